//! How a scope's evidence is asked for. One type for every reader: the engine asks a source,
//! a source asks the store, and tests ask either, in the same words.

use super::{Summarize, WorkloadRef};

/// What of a scope is read, and how much of it is listed. A scope's evidence has two parts:
/// its series (with their targets' producer reasons), and the scope-wide part (the targets
/// never scraped, the workloads behind the scope and their silent pods).
#[derive(Clone, Copy, Debug)]
pub enum Read<'a> {
    /// Both parts, every in-scope series listed.
    Listed,
    /// Both parts, the source free to count series that read as fresh and valid under the
    /// `Summarize` in `Evidence::clean_tail` instead of listing them (clean_tail.rs). Only the
    /// rules that treat every such input alike ask for this: the recommendation and the floor.
    /// A source that keeps no digests lists everything.
    Summarized(Summarize),
    /// As `Listed`, for a one-off look (the status page's namespace-wide scan, the
    /// deletion-cost writer): a source that caches a scope's resolution does not keep this
    /// one, so it cannot push the HPAs' scopes out of that cache.
    Glance,
    /// Both parts, the in-scope series whose `label` is one of `values` listed, the source
    /// free to leave out the others and the producer reasons of targets it lists nothing of.
    /// For a caller that keeps only those series (an Object query keeps its workload's own
    /// pods' series out of the namespace's): a source that keeps no index of the label lists
    /// everything, and the caller's filter gives the same (`EvidenceSource::narrows_by_label`).
    /// A reason left out is one the caller drops with its target's series, or holds from
    /// another read of the same target (two reads are two moments, as two listed reads
    /// would be). `values` are distinct.
    Labelled {
        label: &'a str,
        values: &'a [&'a str],
    },
    /// The series part alone, summarized as `Summarized` under `Some`.
    Series(Option<Summarize>),
    /// The scope-wide part alone, listing no series; the silent pods of every workload of the
    /// scope, or of `silent_of` alone (a scope may span every workload of a namespace, and its
    /// caller may keep one).
    Whole { silent_of: Option<&'a WorkloadRef> },
}
