//! Queries sent to Prometheus per HPA request under 100 concurrent identical requests (with
//! coalescing the goal is about one).
//!
//! NOT MEASURED on this branch: the Prometheus source is being built elsewhere. Once it exists,
//! this part starts a loopback Prometheus-compatible server that counts the queries it receives,
//! points the adapter's source at it, fires 100 concurrent identical `answer` calls and reports
//! queries received / 100. No number is produced until then.

use serde::Serialize;

pub const NOT_MEASURED: &str = "not measured: Prometheus source not on this branch";

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusResult {
    pub measured: bool,
    pub note: String,
    pub concurrent_requests: u32,
    /// Queries the source sent per HPA request; absent until measured.
    pub queries_per_request: Option<f64>,
}

pub fn run() -> PrometheusResult {
    eprintln!("bench: prometheus: {NOT_MEASURED}");
    PrometheusResult {
        measured: false,
        note: NOT_MEASURED.into(),
        concurrent_requests: 100,
        queries_per_request: None,
    }
}
