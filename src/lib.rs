//! hpa-bridge: a Kubernetes external metrics adapter that serves absolute replica targets.
//!
//! Imports point one way: `config`, `clock` -> `cluster` -> `evidence` -> `store`, `source` -> `policy` -> `engine` -> `api` (see DESIGN.md).
//! `policy`, `selector`, `exposition` and `hpa::model` are pure: no I/O, time is a parameter.

pub mod api;
pub mod auth;
pub(crate) mod bounded_lru;
pub mod check;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod deletion_cost;
pub mod demo;
pub mod engine;
pub mod evidence;
pub mod exposition;
pub mod hpa;
pub mod policy;
pub mod redaction;
pub mod selector;
pub mod source;
pub mod store;
pub mod telemetry;
pub mod tls;
