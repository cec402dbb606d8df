//! hpa-bridge's scrape store: target sets and pages written in, and the evidence of a query's
//! scope read out through its index, under one lock.
//!
//! Imports point one way: the rules crate's layers -> `store` (see DESIGN.md). This crate cannot
//! name the sources that fill it or anything above them.

pub mod store;
