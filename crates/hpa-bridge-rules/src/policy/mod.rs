//! The decision rules. Pure: evidence and a clock value in, an `Answer` out.
//!
//! The refusal is a first-class answer. An HPA that gets an error (any non-2xx) treats the
//! metric as invalid, and an invalid metric freezes scale-in while still allowing scale-out
//! through other metrics (docs/hpa-behaviour.md §1.6). A served 0 or a guess would instead drive a
//! scale-in, so every path that cannot prove a value refuses, with the reason.
//!
//! One file per rule; each is pure. `observation` classifies inputs the same way for all.

pub mod answer;
pub mod combine;
mod deployment_floor;
mod epoch_fence;
mod floor;
pub mod input_notes;
pub mod observation;
mod producer_quote;
mod reason_text;
mod recommendation;
mod target;
pub mod threshold;
pub mod valid_when;

#[cfg(test)]
pub(crate) mod fixtures;

use crate::evidence::Evidence;

pub use answer::{source_unavailable, summary, Answer, InputNote, Outcome, RawValue, RefusalKind};
pub use deployment_floor::{
    cost_confirms, deployment_floor, mixed_workloads_floor, pod_indices, unresolved_owner_floor,
};
pub use epoch_fence::deciding_producers;
pub use floor::stateful_floor;
pub use input_notes::{notes_in, InputCounts, InputNotes, NOTES_KEPT_WHEN_SERVING};
pub use observation::{QueryContext, ScopeText};
pub use target::target;

/// An absolute replica recommendation: the max over fresh, valid series, never the sum
/// (recommendation.rs). With an `epoch_label`, only the series of the newest leader epoch are inputs of the max
/// (epoch_fence.rs).
pub fn recommendation(q: &QueryContext<'_>, ev: &Evidence, epoch_label: Option<&str>) -> Answer {
    fenced_recommendation(q, ev, epoch_label.map(|label| (label, 1)))
}

/// As `recommendation`, fenced by `(epochLabel, epochStep)` when given.
pub fn fenced_recommendation(
    q: &QueryContext<'_>,
    ev: &Evidence,
    fence: Option<(&str, u64)>,
) -> Answer {
    match fence {
        None => recommendation::max_over_fresh(q, ev),
        Some((label, step)) => epoch_fence::fenced(q, ev, label, step),
    }
}
