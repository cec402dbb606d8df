//! hpa-bridge: a Kubernetes external metrics adapter that serves absolute replica targets. This
//! crate holds the HPA predictions that run beside the server, `explain`, and the tools (`check`,
//! `simulate`); the cluster duties (deletion costs, the memory, their Leases) are the
//! `hpa-bridge-duties` crate.
//!
//! Imports point one way: `config`, `clock` -> `cluster` -> `evidence` -> `policy`, then `store`
//! -> `source` -> `engine` -> `api` (see DESIGN.md). The page parsers are the
//! `hpa-bridge-exposition` crate, the layers up to `policy` the `hpa-bridge-rules` crate, `store`
//! the `hpa-bridge-store` crate, the self-metrics and logging the `hpa-bridge-telemetry` crate,
//! `source` the `hpa-bridge-sources` crate, `engine` the `hpa-bridge-engine` crate, `api`, `auth`
//! and the serving `tls` the `hpa-bridge-server` crate, and the
//! HPA controller's model the `hpa-bridge-hpa-model` crate; each `use` names the crate it comes
//! from, and Cargo keeps each crate from importing anything above it. The order inside each
//! crate is checked by scripts/import-graph.py.
//! `policy`, `selector`, the exposition crate and the HPA model are pure: no I/O, time is a
//! parameter.

pub mod check;
pub mod config_reference;
pub mod demo;
pub mod explain;
pub mod hpa;
pub mod prediction;
