//! The decision rules. Pure: evidence and a clock value in, an `Answer` out.
//!
//! The refusal is a first-class answer. An HPA that gets an error (any non-2xx) treats the
//! metric as invalid, and an invalid metric freezes scale-in while still allowing scale-out
//! through other metrics (docs/hpa-behaviour.md §1.6). A served 0 or a guess would instead drive a
//! scale-in, so every path that cannot prove a value refuses, with the reason.
//!
//! One file per rule; each is pure. `observation` classifies inputs the same way for all.

pub mod answer;
#[cfg(test)]
mod clean_tail_tests;
pub mod combine;
mod epoch_fence;
mod floor;
pub mod input_notes;
pub mod observation;
mod reason_text;
mod recommendation;
mod target;
pub mod threshold;
pub mod valid_when;

#[cfg(test)]
pub(crate) mod fixtures;

pub use answer::{source_unavailable, summary, Answer, InputNote, Outcome, RawValue, RefusalKind};
pub use floor::stateful_floor;
pub use input_notes::{notes_in, InputCounts, InputNotes, NOTES_KEPT_WHEN_SERVING};
pub use observation::{QueryContext, ScopeText};
pub use recommendation::recommendation;
pub use target::target;
