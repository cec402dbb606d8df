//! hpa-bridge's sources of evidence: the scraper and its schedule, filling the scrape store,
//! Kubernetes discovery and the Prometheus source, with the self-metrics and TLS they use.
//!
//! Imports point one way: the rules and store crates' layers (re-exported here under their own
//! names, for `crate::` paths) -> `source` (see DESIGN.md). This crate cannot name the engine or
//! the API above it; `hpa-bridge-engine` and `hpa-bridge` re-export these modules under the same
//! names.

pub use hpa_bridge_rules::{clock, cluster, config, evidence, exposition, redaction, selector};
pub use hpa_bridge_store::store;

pub mod source;
pub mod telemetry;
pub mod tls;
