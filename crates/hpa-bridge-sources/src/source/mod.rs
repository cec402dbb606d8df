//! Where samples come from: direct scraping (the embedded default, its targets static or found by
//! Kubernetes discovery) or a Prometheus-compatible query source. Every source hands the policy the
//! same `Evidence`, so the rules are identical whichever source is active.

pub mod discovery;
pub mod prometheus;
pub mod scrape;
pub mod scrape_schedule;

use futures::future::BoxFuture;
use serde::Serialize;

use crate::clock::{Millis, Now};
use std::sync::Arc;

use crate::evidence::{Evidence, Scope, ScopeKey, Summarize};
use crate::store::{ScrapeTarget, Store, TargetHealth};

/// What a source holds, for the self-metrics. A count that does not apply to the source is
/// `None`, and its gauge is left out rather than shown as 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    pub series: Option<usize>,
    pub stale_series: Option<usize>,
    pub targets: Option<usize>,
}

/// The source could not say anything about the query (for example Prometheus is down). This
/// is unknown input: the answer is a refusal, never an empty success or a 0.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{source_name} source unavailable: {message}")]
pub struct SourceError {
    pub source_name: &'static str,
    pub message: String,
}

/// How a source is asked to read a scope's evidence.
#[derive(Clone, Copy, Debug)]
pub enum ReadMode<'a> {
    /// Every in-scope series listed.
    Listed,
    /// The source may count series that read as fresh and valid under `summarize` in
    /// `Evidence::clean_tail` instead of listing them (store/family_digest.rs). Only the rules
    /// that treat every such input alike ask for this: the recommendation and the floor. A
    /// source that keeps no digests lists everything. `key` is `scope.key()`, which the caller
    /// already holds, for a source that caches by scope.
    Summarized {
        key: &'a ScopeKey,
        summarize: Summarize,
    },
    /// The in-scope series whose `label` is one of `values` listed, the source free to leave
    /// out the others and the producer reasons of targets it lists nothing of; the unknown
    /// targets, the workloads and their silent pods are the whole scope's, as `Listed` gives
    /// them. For a caller that keeps only those series (an Object query keeps its workload's
    /// own pods' series out of the namespace's): a source that keeps no index of the label
    /// lists everything, and the caller's filter gives the same. A reason left out is one the
    /// caller drops with its target's series, or holds from another read of the same target
    /// (two reads are two moments, as two listed reads would be).
    /// `values` are distinct.
    Labelled {
        label: &'a str,
        values: &'a [&'a str],
    },
}

/// A source's own health for `/status`, tagged by the kind of source.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SourceStatus {
    Prometheus(prometheus::PrometheusStatus),
}

/// Evidence for one query, from wherever the samples live.
pub trait EvidenceSource: Send + Sync + 'static {
    fn evidence<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        read: ReadMode<'a>,
        now: Millis,
    ) -> BoxFuture<'a, Result<Evidence, SourceError>>;

    /// Whether a `ReadMode::Labelled` read lists only the series of the values asked (so the
    /// caller's filter would keep all of them). The scrape store's does; by default a source
    /// may list everything.
    fn narrows_by_label(&self) -> bool {
        false
    }

    /// The source's own health for `/status` (e.g. the last Prometheus error); `None` for the
    /// scrape store, whose targets are listed separately.
    fn status(&self) -> Option<SourceStatus> {
        None
    }

    /// The series and targets the source holds, for `hpa_bridge_series`,
    /// `hpa_bridge_stale_series` and `hpa_bridge_targets`; nothing by default.
    fn inventory(&self, _now: Now, _stale_after_ms: Millis) -> Inventory {
        Inventory::default()
    }

    /// The scrape targets and their health, for `/status`; none for a source that does not
    /// scrape.
    fn targets(&self) -> Vec<(Arc<ScrapeTarget>, TargetHealth)> {
        Vec::new()
    }
}

impl EvidenceSource for Store {
    fn evidence<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        read: ReadMode<'a>,
        _now: Millis,
    ) -> BoxFuture<'a, Result<Evidence, SourceError>> {
        let evidence = match read {
            ReadMode::Listed => Store::evidence(self, scope),
            ReadMode::Summarized { key, summarize } => {
                self.evidence_kept(scope, key, true, Some(summarize))
            }
            ReadMode::Labelled { label, values } => self.evidence_labelled(scope, label, values),
        };
        Box::pin(std::future::ready(Ok(evidence)))
    }

    fn narrows_by_label(&self) -> bool {
        true
    }

    fn inventory(&self, now: Now, stale_after_ms: Millis) -> Inventory {
        let (series, stale) = self.series_counts(now, stale_after_ms);
        Inventory {
            series: Some(series),
            stale_series: Some(stale),
            targets: Some(Store::targets(self).len()),
        }
    }

    fn targets(&self) -> Vec<(Arc<ScrapeTarget>, TargetHealth)> {
        self.target_health()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/status` shows a source's health under `source`, tagged by its kind and with the
    /// field names the status page and dashboards read.
    #[test]
    fn a_prometheus_status_reads_as_status_shows_it() {
        let status = SourceStatus::Prometheus(prometheus::PrometheusStatus {
            url: "http://prometheus:9090".into(),
            version: Some("2.53.0".into()),
            healthy: false,
            last_success: None,
            last_error: Some("connection refused".into()),
            last_error_at: Some("2026-01-01T00:00:00Z".into()),
            consecutive_failures: 3,
            cache_ttl_seconds: 1.5,
            retain_for_seconds: 600.0,
        });
        assert_eq!(
            serde_json::to_string(&status).unwrap(),
            r#"{"kind":"prometheus","url":"http://prometheus:9090","version":"2.53.0","healthy":false,"lastSuccess":null,"lastError":"connection refused","lastErrorAt":"2026-01-01T00:00:00Z","consecutiveFailures":3,"cacheTtlSeconds":1.5,"retainForSeconds":600.0}"#
        );
    }
}
