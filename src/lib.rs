//! hpa-bridge: a Kubernetes external metrics adapter that serves absolute replica targets.
//!
//! Imports point one way: `config`, `clock` -> `cluster` -> `evidence` -> `policy`, then `store`
//! -> `source` -> `engine` -> `api` (see DESIGN.md). The page parsers are the
//! `hpa-bridge-exposition` crate, the layers up to `policy` the `hpa-bridge-rules` crate, `store`
//! the `hpa-bridge-store` crate, `source`, `telemetry` and `tls` the `hpa-bridge-sources` crate,
//! `engine` the `hpa-bridge-engine` crate, and the HPA controller's model the
//! `hpa-bridge-hpa-model` crate; each `use` names the crate it comes from, and Cargo keeps each
//! crate from importing anything above it. The order inside each crate is checked by
//! scripts/import-graph.py.
//! `policy`, `selector`, the exposition crate and the HPA model are pure: no I/O, time is a
//! parameter.

pub mod api;
pub mod auth;
pub mod check;
pub mod config_reference;
pub mod deletion_cost;
pub mod demo;
pub mod explain;
pub mod hpa;
pub mod lease;
pub mod memory;
pub mod prediction;
