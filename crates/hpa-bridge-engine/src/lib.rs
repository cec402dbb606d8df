//! hpa-bridge's engine: a metric query in, an explained answer out, from the sources' evidence
//! under the rules' policy, with the answer's reuse, its history and the /status document.
//!
//! Imports point one way: the rules, store and sources crates' layers -> `engine` (see
//! DESIGN.md). This crate cannot name the API, the authentication or the tools above it.

pub mod bounded_lru;
pub mod engine;
