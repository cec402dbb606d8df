//! hpa-bridge's layers below the store: what the rules read and the rules themselves.
//!
//! Imports point one way: `config`, `clock` -> `cluster` -> `evidence` -> `policy` (see DESIGN.md).
//! This crate depends on no async runtime, HTTP stack or Kubernetes client; the crates above name
//! it in their imports (`hpa_bridge_rules::policy`), re-exporting nothing.
//! `policy` and `selector` are pure: no I/O, time is a parameter. The page parsers they read the
//! results of are the exposition crate's.

pub mod clock;
pub mod cluster;
pub mod config;
pub mod evidence;
pub mod policy;
pub mod redaction;
pub mod selector;
