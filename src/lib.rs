//! hpa-bridge: a Kubernetes external metrics adapter that serves absolute replica targets.
//!
//! The data path is straight: `source` -> `store` -> `policy` -> `api` (see DESIGN.md).
//! `policy`, `selector`, `exposition` and `hpa::model` are pure: no I/O, time is a parameter.

pub mod config;
pub mod exposition;
pub mod hpa;
pub mod selector;
