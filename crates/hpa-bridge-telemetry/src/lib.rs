//! hpa-bridge's telemetry: the self-metrics every layer counts into (sources, engine, duties,
//! API) and the logging setup. Below the sources, so each layer can count without naming the
//! one that serves `/metrics`; it names only the store crate (a target's id labels its series).

pub mod logging;
pub mod self_metrics;
