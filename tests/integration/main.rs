//! The integration tests, one crate: each module is a suite (select one with
//! `scripts/test --test integration <suite>::`), and `common` and `kubeapi` (over the
//! hpa-bridge-kit crate, shared with the bench) are the harness they share. One crate links the library once instead of
//! once per suite.
//!
//! The suites share one process and run on libtest's threads side by side, so none of them
//! changes process-wide state (environment variables, the current directory, a global
//! subscriber or signal handler): each reads the environment only, and everything a test
//! starts (exporters, API servers, the adapter binary, Prometheus) listens on a port the kernel
//! picks and lives in its own temporary directory.

mod common;
mod kubeapi;

mod alert_rules;
mod auth;
mod bench_handoff;
mod chart;
mod check;
mod check_cluster;
mod cluster;
mod connections;
mod custom_metrics;
mod differential;
mod discovery;
mod e2e;
mod faults;
mod hostile_exporters;
mod kubernetes;
mod manifests;
mod model_vs_real;
mod newcomer;
mod policies;
mod prediction;
mod prometheus;
mod scrape_credentials;
mod shutdown;
mod status;
mod status_page;
