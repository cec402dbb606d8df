//! Where samples come from: direct scraping (the embedded default, its targets static or found by
//! Kubernetes discovery) or a Prometheus-compatible query source. Every source hands the policy the
//! same `Evidence`, so the rules are identical whichever source is active.

pub mod discovery;
pub mod prometheus;
pub mod scrape;
pub mod scrape_schedule;

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use serde::Serialize;

use hpa_bridge_rules::clock::{Millis, Now};
use std::sync::Arc;

use hpa_bridge_rules::evidence::{Evidence, Read, Scope};
use hpa_bridge_store::store::{ScrapeTarget, Store, TargetHealth};

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

/// A source's own health for `/status`, tagged by the kind of source.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SourceStatus {
    Prometheus(prometheus::PrometheusStatus),
}

/// Evidence for one query, from wherever the samples live.
pub trait EvidenceSource: Send + Sync + 'static {
    /// What `read` asks of `scope`, as the source holds it at `now`.
    fn read<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        read: Read<'a>,
        now: Millis,
    ) -> BoxFuture<'a, Result<Evidence, SourceError>>;

    /// Several reads in one snapshot, so that a check made by one holds for the others (an
    /// Object query's summary is exact only while another scope is empty); `None` from a
    /// source that cannot promise one snapshot, and the caller reads otherwise.
    fn read_together(&self, _reads: &[(&Scope<'_>, Read<'_>)]) -> Option<Vec<Evidence>> {
        None
    }

    /// Moves whenever anything a read of these scopes gives changes, other than the passing
    /// of time; reused answers are checked against it (engine/reusing.rs). A source that
    /// cannot tell says 0 always, and reuse is bounded by time alone.
    fn version(&self, _scopes: &mut dyn Iterator<Item = Scope<'_>>) -> u64 {
        0
    }

    /// Moves with every write the source takes (a cheap check before `version`: while it
    /// stands, no version moved); 0 always from a source that cannot tell.
    fn generation(&self) -> u64 {
        0
    }

    /// The values of `label` on the series named `series`, for the status page's rows found
    /// in the data; none by default.
    fn label_values(&self, _series: &[String], _label: &str) -> BTreeSet<String> {
        BTreeSet::new()
    }

    /// Whether a `Read::Labelled` read lists only the series of the values asked (so the
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
    fn read<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        read: Read<'a>,
        _now: Millis,
    ) -> BoxFuture<'a, Result<Evidence, SourceError>> {
        Box::pin(std::future::ready(Ok(Store::read(self, scope, read))))
    }

    fn read_together(&self, reads: &[(&Scope<'_>, Read<'_>)]) -> Option<Vec<Evidence>> {
        Some(Store::read_together(self, reads))
    }

    fn version(&self, scopes: &mut dyn Iterator<Item = Scope<'_>>) -> u64 {
        self.scope_version(scopes)
    }

    fn generation(&self) -> u64 {
        Store::generation(self)
    }

    fn label_values(&self, series: &[String], label: &str) -> BTreeSet<String> {
        Store::label_values(self, series, label)
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
