//! The HPAs' next moves, predicted while serving (docs/explain.md, "In the adapter"): the
//! adapter watches the HPAs that read its metrics (and those named for shadow mode), explains
//! each one's next sync as `explain hpa` does, and after that sync checks what the HPA set
//! against what was predicted. `/status` shows the explanations as `hpas`, the status page as
//! a panel per HPA, and `/metrics` the misses in a row (an HPA that does not do what the model
//! says: a second metric, an RBAC gap, a paused controller, or a gap in the model).
//!
//! [`check`], [`shadow`] and [`panel`] are pure; [`watch`] is the I/O; [`board`] holds what
//! the page, `/status` and `/metrics` read.

pub mod board;
pub mod check;
pub mod panel;
pub mod shadow;
pub mod watch;

pub use board::{HpaPrediction, Predictions};
pub use check::{Pending, PredictionCheck};
pub use watch::HpaWatch;
