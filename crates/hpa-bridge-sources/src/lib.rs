//! hpa-bridge's sources of evidence: the scraper and its schedule, filling the scrape store,
//! Kubernetes discovery and the Prometheus source, with the PEM reading their clients and the
//! server's TLS share (`pki`).
//!
//! Imports point one way: the rules and store crates' layers -> `source` (see DESIGN.md). This
//! crate cannot name the engine or the API above it.

pub mod pki;
pub mod source;
