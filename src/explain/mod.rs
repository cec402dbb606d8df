//! `hpa-bridge explain hpa NAME`: why an HPA did or did not scale, and what its next sync
//! will do, per metric (docs/explain.md).
//!
//! [`read`] reads the HPA, its scale target, the target's pods and hpa-bridge's answers; the
//! rest is pure: [`explanation::explain`] runs the HPA model with the HPA's spec and status,
//! and [`text::render`] prints it.

pub mod explanation;
pub mod observation;
pub mod read;
pub mod replay;
pub mod text;

pub use explanation::{explain, ExplainError, Explanation};
pub use observation::{AnswerHistory, Observation, PodCount, ScaleView, ServedAnswer};

#[cfg(test)]
mod tests;
