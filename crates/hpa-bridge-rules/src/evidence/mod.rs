//! The evidence contract: what a source says about one query's scope, and what the policy
//! decides from. Both sources (the scrape store and a Prometheus-compatible server) produce
//! these types and the policy reads only them, so the rules are identical whichever source is
//! active, and neither side depends on the other.

mod clean_tail;
mod read;
mod scope;
mod series_id;
mod series_labels;

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::clock::{Millis, Now};
pub use crate::cluster::WorkloadRef;
pub use clean_tail::{CleanTail, Summarize};
use hpa_bridge_exposition::Unusable;
pub use read::Read;
pub use scope::{Scope, ScopeKey};
pub use series_id::{SeriesId, SeriesRef};
pub use series_labels::{ByLabels, SeriesLabels};

/// Stable identity of a scrape target: the URL for static targets, `namespace/pod` for pods.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TargetId(pub Arc<str>);

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a sample value cannot be used as a replica count.
pub fn invalid_reason(value: f64) -> Option<&'static str> {
    if value.is_nan() {
        Some("NaN")
    } else if value.is_infinite() {
        Some("infinite")
    } else if value < 0.0 {
        Some("negative")
    } else if value.fract() != 0.0 {
        Some("not an integer")
    } else if value > MAX_REPLICA_VALUE {
        // Far below the 9.2e15 where a milli-Quantity overflows int64 (docs/hpa-behaviour.md §2).
        Some("implausibly large")
    } else {
        None
    }
}

/// Replica counts above this are treated as garbage rather than served.
pub const MAX_REPLICA_VALUE: f64 = 1_000_000.0;

/// One input series in scope for a query, as the policy sees it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    /// The target, name and labels (read through it: `o.id.target`).
    #[serde(flatten)]
    pub id: SeriesRef,
    /// The newest raw value, which may be invalid.
    pub value: f64,
    pub observed_at_ms: Millis,
    /// When this process scraped the value, on the monotonic clock, if the producer gave it
    /// no time of its own: its age is then read on that clock, so a step of the wall clock
    /// can neither keep it fresh nor age it. `None` for a time the producer wrote (an
    /// exposition timestamp, a Prometheus sample), which only the wall clock can age.
    #[serde(skip)]
    pub scraped_mono_ms: Option<Millis>,
    /// The newest valid integer value and when it was seen.
    pub last_valid: Option<(u64, Millis)>,
    /// Still exported by its target's last successful scrape.
    pub present: bool,
    /// The target's most recent scrape failed.
    pub target_failing: bool,
    /// Why the target's last page's sample cannot be used whatever its value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unusable: Option<Unusable>,
    /// The producer's own expiry of the value (wall clock): past it, the series reads as stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_until_ms: Option<Millis>,
}

impl Observation {
    /// How old the value is at `now`, on the clock that can tell (`scraped_mono_ms`).
    pub fn age_ms(&self, now: Now) -> Millis {
        now.age_ms(self.observed_at_ms, self.scraped_mono_ms)
    }

    /// Past the time its producer said the value holds until: stale, however young.
    pub fn expired(&self, now: Now) -> bool {
        self.valid_until_ms.is_some_and(|until| now.wall > until)
    }
}

/// A target that might hold in-scope series but has never been scraped successfully, so nobody
/// knows what it exports.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownTarget {
    pub target: TargetId,
    pub last_error: Option<String>,
}

/// Everything the store knows that is relevant to one query.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub observations: Vec<Observation>,
    pub unknown_targets: Vec<UnknownTarget>,
    /// Never-scraped pods of some workload while the scope's series come only from targets
    /// of none (static targets): any could be a floor's own pod, so a floor counts them, but
    /// no pod of their workloads carries a series in scope, so the other rules leave them out
    /// (docs/unknown-input.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_bystanders: Vec<UnknownTarget>,
    /// The workloads of the targets behind the observations (from discovery).
    /// Shared with the scope's kept resolution, so an answer does not copy their names.
    #[serde(skip_serializing_if = "<[WorkloadRef]>::is_empty")]
    pub workloads: Arc<[WorkloadRef]>,
    /// Pods of `workloads` that have had a page but hold no series in scope, per workload:
    /// for a floor, each is a pod that never reported an index.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub silent_pods: Vec<SilentPods>,
    /// Static targets whose own labels put everything they export in scope, that have had
    /// a page but hold no series in scope: for a floor, each never reported an index.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub silent_targets: Vec<TargetId>,
    /// In-scope series not listed in `observations`, all fresh and valid (`Summarize`); only
    /// when asked for, and only from the scrape store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clean_tail: Option<CleanTail>,
    /// What the producers of the scope's targets last said of their values, for the targets
    /// that say (a JSON source's `reason`), listed or summarized.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub producer_reasons: Vec<ProducerReason>,
}

impl Evidence {
    /// The never-scraped targets a floor counts: `unknown_targets` and `unknown_bystanders`.
    pub fn unknown_to_floor(&self) -> impl Iterator<Item = &UnknownTarget> + Clone {
        self.unknown_targets.iter().chain(&self.unknown_bystanders)
    }
}

/// A producer's own account of its values, as its last good page gave it (already cut to
/// `exposition::json_page::REASON_MAX_CHARS`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerReason {
    pub target: TargetId,
    pub reason: Arc<str>,
}

/// Pods of a workload that were scraped but export nothing in a scope.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SilentPods {
    pub workload: WorkloadRef,
    pub pods: usize,
}
