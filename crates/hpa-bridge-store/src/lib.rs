//! hpa-bridge's scrape store: target sets and pages written in, and the evidence of a query's
//! scope read out through its index, under one lock.
//!
//! Imports point one way: the rules crate's layers (re-exported here under their own names, for
//! `crate::` paths) -> `store` (see DESIGN.md). This crate cannot name the sources that fill it
//! or anything above them; the crates above re-export `store` by its name.

pub use hpa_bridge_rules::{clock, cluster, config, evidence, exposition, redaction, selector};

pub mod store;
