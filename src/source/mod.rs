//! Where samples come from: direct scraping (the embedded default) and, later, discovery and
//! a Prometheus-compatible query source. Every source hands the policy the same `Evidence`,
//! so the rules are identical whichever source is active.

pub mod discovery;
pub mod prometheus;
pub mod scrape;

use futures::future::BoxFuture;

use crate::clock::Millis;
use crate::store::{Evidence, Scope, Store};

/// The source could not say anything about the query (for example Prometheus is down). This
/// is unknown input: the answer is a refusal, never an empty success or a 0.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{source_name} source unavailable: {message}")]
pub struct SourceError {
    pub source_name: &'static str,
    pub message: String,
}

/// Evidence for one query, from wherever the samples live.
pub trait EvidenceSource: Send + Sync + 'static {
    fn evidence<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        now: Millis,
    ) -> BoxFuture<'a, Result<Evidence, SourceError>>;

    /// The source's own health for `/status` (e.g. the last Prometheus error); `None` for the
    /// scrape store, whose targets are listed separately.
    fn status(&self) -> Option<serde_json::Value> {
        None
    }
}

impl EvidenceSource for Store {
    fn evidence<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        _now: Millis,
    ) -> BoxFuture<'a, Result<Evidence, SourceError>> {
        Box::pin(std::future::ready(Ok(Store::evidence(self, scope))))
    }
}
