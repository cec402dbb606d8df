//! hpa-bridge's engine: a metric query in, an explained answer out, from the sources' evidence
//! under the rules' policy, with the answer's reuse, its history and the /status document.
//!
//! Imports point one way: the rules and sources crates' layers (re-exported here under their
//! own names, for `crate::` paths) -> `engine` (see DESIGN.md). This crate cannot name the API,
//! the authentication or the tools above it; `hpa-bridge` re-exports `engine` under its name.

pub use hpa_bridge_rules::{
    clock, cluster, config, evidence, exposition, policy, redaction, selector,
};
pub use hpa_bridge_sources::{source, store, telemetry, tls};

pub mod bounded_lru;
pub mod engine;
