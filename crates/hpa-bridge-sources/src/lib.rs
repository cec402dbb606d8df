//! hpa-bridge's sources of evidence: the scrape store, the scraper and its schedule,
//! Kubernetes discovery and the Prometheus source, with the self-metrics and TLS they use.
//!
//! Imports point one way: the rules crate's layers (re-exported here under their own names, for
//! `crate::` paths) -> `store` -> `source` (see DESIGN.md). This crate cannot name the engine or
//! the API above it; `hpa-bridge` re-exports these modules under the same names.

pub use hpa_bridge_rules::{clock, cluster, config, evidence, exposition, redaction, selector};

pub mod source;
pub mod store;
pub mod telemetry;
pub mod tls;
