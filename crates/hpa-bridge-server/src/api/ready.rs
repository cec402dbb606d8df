//! Whether the server is ready: its first scrape round has completed (with pods discovered,
//! after the pod set is known; with the Prometheus source, at once). One flag per process,
//! read by the API port's `/readyz`, the status page and document, and the `ready`
//! self-metric. `/readyz` also fails while the server terminates (readiness.rs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hpa_bridge_telemetry::self_metrics::SelfMetrics;

#[derive(Clone, Debug)]
pub struct Ready {
    ready: Arc<AtomicBool>,
    metrics: Arc<SelfMetrics>,
}

impl Ready {
    /// Not ready yet.
    pub fn new(metrics: Arc<SelfMetrics>) -> Self {
        Ready {
            ready: Arc::new(AtomicBool::new(false)),
            metrics,
        }
    }

    pub fn mark(&self) {
        if !self.ready.swap(true, Ordering::SeqCst) {
            self.metrics.ready.set(1);
            tracing::info!("first scrape round complete; ready");
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}
