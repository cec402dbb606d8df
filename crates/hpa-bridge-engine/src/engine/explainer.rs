//! `Explainer`: what explains the answers served, from the same engine and history the
//! adapter serves with. The `/status` document: every workload listed (asked about, or found
//! in the data), each evaluated afresh and explained, and every scrape target with its
//! health; the answer history as `/status/history` shows it; the self-metrics and their
//! gauges. Explaining is not serving: nothing here is counted or kept in the history.

use std::collections::{BTreeMap, BTreeSet};

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::json;

use hpa_bridge_rules::clock::{rfc3339, Millis};
use hpa_bridge_rules::config::MetricKind;
use hpa_bridge_rules::evidence::Read;
use hpa_bridge_rules::policy::Answer;
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_store::store::{ScrapeTarget, TargetHealth};
use hpa_bridge_telemetry::self_metrics::{ScopeGauges, SelfMetrics, PROMETHEUS_FAMILIES};

use super::evaluation::metric_scope;
use super::history::{self, Filter, History};
use super::metric_query::history_scope;
use super::metric_query::MetricQuery;
use super::object_scope::ObjectRef;
use super::provider::{Engine, QueryError};
use super::status::{RowOrigin, StatusKey, StatusQuery};

/// A part of `/status` that something outside the engine keeps (the deletion-cost lease as
/// this replica sees it): its field name and what it shows now.
pub type StatusSection = (
    &'static str,
    Arc<dyn Fn() -> serde_json::Value + Send + Sync>,
);

pub struct Explainer {
    pub(super) engine: Arc<Engine>,
    /// The answers served, as the adapter keeps them.
    pub(super) history: Arc<Mutex<History>>,
    pub(super) metrics: Arc<SelfMetrics>,
    /// Parts of `/status` kept outside the engine.
    pub(super) sections: Vec<StatusSection>,
}

impl Explainer {
    fn stale_after_ms(&self) -> Millis {
        self.engine.stale_after_ms()
    }

    /// The self-metrics in the Prometheus text format, gauges refreshed from the source.
    pub fn render_self_metrics(&self) -> String {
        self.refresh_gauges();
        self.metrics.render()
    }

    /// The same in the Prometheus text format 0.0.4.
    pub fn render_self_metrics_text_format(&self) -> String {
        self.refresh_gauges();
        self.metrics.render_text_format()
    }

    /// Every scrape target of the active source and its health (none for the Prometheus
    /// source).
    pub fn target_health(&self) -> Vec<(Arc<ScrapeTarget>, TargetHealth)> {
        self.engine.source.targets()
    }

    /// Whether evidence comes from a Prometheus source rather than the embedded scraper.
    pub fn has_prometheus_source(&self) -> bool {
        self.engine
            .config
            .source
            .as_ref()
            .is_some_and(|s| s.prometheus.is_some())
    }

    /// Refresh gauges that are derived from the store.
    pub fn refresh_gauges(&self) {
        let held = self
            .engine
            .source
            .inventory(self.engine.clock.now(), self.stale_after_ms());
        let m = &self.metrics;
        m.set_gauge("series", &m.series, held.series);
        m.set_gauge("stale_series", &m.stale_series, held.stale_series);
        m.set_gauge("targets", &m.targets, held.targets);
        // Without a Prometheus source its families would only ever say 0.
        m.set_absent(&PROMETHEUS_FAMILIES, !self.has_prometheus_source());
        let (states, tracked, dropped) = {
            let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
            (
                h.states(self.engine.clock.now_ms()),
                h.len(),
                h.dropped_scopes(),
            )
        };
        let scopes: Vec<ScopeGauges> = states
            .into_iter()
            .map(|s| ScopeGauges {
                workload: s.key.workload().to_string(),
                namespace: s.key.namespace,
                metric: s.key.metric,
                refusing: s.refusing,
                refusing_since_seconds: s.refusing_since_ms.map(|ms| ms as f64 / 1000.0),
                floor_holds: s.floor_holds,
            })
            .collect();
        m.set_scopes(&scopes, tracked, dropped);
    }
    /// The answer history of the scopes `filter` selects, oldest entry first.
    pub fn history(&self, filter: &Filter) -> HistoryView {
        let now = self.engine.clock.now_ms();
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let limits = h.limits();
        HistoryView {
            now_ms: now,
            retention_ms: limits.retention_ms,
            capacity: limits.capacity,
            max_scopes: limits.max_scopes,
            tracked: h.len(),
            dropped_scopes: h.dropped_scopes(),
            scopes: h.snapshot(filter, now),
        }
    }

    /// The answer `query` would get now, evaluated as `/status` evaluates its rows: not
    /// served, so neither counted, kept in the history, reused nor listed. The HPA predictions
    /// read what an HPA is about to be given (and, in shadow mode, what it would be given)
    /// without standing in for the HPA's own requests.
    pub async fn preview(&self, query: &MetricQuery) -> Result<Answer, QueryError> {
        let spec = self.engine.spec(&query.metric)?;
        let (namespace, object) = (&query.namespace, query.object.as_ref());
        Ok((self.engine)
            .explain(spec, namespace, &query.selector, object)
            .await)
    }

    /// The `/status` document: the workloads seen in requests or found in the data, each with
    /// its current answer and inputs, and every target with its health. Enough to answer "why
    /// did the HPA get 7?" without anything else. `query` filters and pages the workloads;
    /// only the rows on the page are evaluated. `ready` is the server's readiness, which the
    /// API holds.
    pub async fn status(&self, query: &StatusQuery, ready: bool) -> serde_json::Value {
        let now = self.engine.clock.now();
        let mut rows: BTreeMap<StatusKey, RowOrigin> = BTreeMap::new();
        for (namespace, selector) in self.discovered_label_sets(now).await {
            for spec in &self.engine.config.metrics {
                rows.insert(
                    StatusKey {
                        namespace: namespace.clone(),
                        metric: spec.name().to_string(),
                        selector: selector.clone(),
                        object: None,
                    },
                    RowOrigin::Discovered,
                );
            }
        }
        for (key, at) in self
            .engine
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            rows.insert(
                StatusKey {
                    namespace: key.namespace.clone(),
                    metric: key.metric.clone(),
                    selector: key.selector.clone(),
                    object: key.object.clone(),
                },
                RowOrigin::Request { at_ms: *at },
            );
        }
        let (page, next) = query.page(&rows);
        let mut workloads = Vec::with_capacity(page.len());
        for (key, origin) in page {
            let (Some(spec), Ok(selector)) = (
                self.engine.config.metric(&key.metric),
                LabelSelector::parse(&key.selector),
            ) else {
                continue;
            };
            // Not `answer()`: looking at /status must not count as serving an answer. An Object
            // row is evaluated through the Object front door's scope, the workload it names.
            let answer = (self.engine)
                .explain(spec, &key.namespace, &selector, key.object.as_ref())
                .await;
            let (source, last_requested) = match origin {
                RowOrigin::Request { at_ms } => ("request", Some(rfc3339(*at_ms))),
                RowOrigin::Discovered => ("discovered", None),
            };
            workloads.push(WorkloadStatus {
                namespace: key.namespace.clone(),
                scope: history_scope(&selector, key.object.as_ref()).into_owned(),
                object: key.object.as_ref().map(ObjectRow::from),
                selector: key.selector.clone(),
                metric: key.metric.clone(),
                source,
                last_requested,
                answer,
            });
        }
        let targets: Vec<serde_json::Value> = self.engine.source
            .targets()
            .into_iter()
            .filter(|(t, _)| {
                // A namespace filter keeps the targets of that namespace (and static targets
                // without one, which may serve any namespace).
                query
                    .namespace
                    .as_ref()
                    .is_none_or(|ns| t.labels.get("namespace").is_none_or(|tns| tns == ns))
            })
            .map(|(t, h)| {
                json!({
                    "id": t.id,
                    "url": hpa_bridge_rules::redaction::redact_url(&t.url),
                    "labels": t.labels,
                    "workload": t.workload,
                    "healthy": h.last_error.is_none() && h.ever_succeeded(),
                    "lastError": h.last_error,
                    "lastSuccess": h.last_success_ms.map(rfc3339),
                    "lastSuccessAgeSeconds": h.last_success_ms.map(|t| (now.wall - t) as f64 / 1000.0),
                    "lastDurationMs": h.last_duration_ms,
                    "consecutiveFailures": h.consecutive_failures,
                })
            })
            .collect();
        let mut metadata = serde_json::Map::new();
        if let Some((token, remaining)) = next {
            metadata.insert("continue".into(), token.into());
            metadata.insert("remainingItemCount".into(), remaining.into());
        }
        let mut document = json!({
            "metadata": metadata,
            "now": rfc3339(now.wall),
            "ready": ready,
            "scrape": {
                "interval": self.engine.config.scrape.interval.to_string(),
                "timeout": hpa_bridge_rules::config::HumanDuration(self.engine.config.scrape.timeout()).to_string(),
                "staleAfterSeconds": self.stale_after_ms() as f64 / 1000.0,
            },
            "workloads": workloads,
            "targets": targets,
            "source": self.engine.source.status(),
        });
        for (field, section) in &self.sections {
            document[*field] = section();
        }
        document
    }

    /// (namespace, selector) pairs found in the recommendation series, using the label that
    /// names the workload (docs/hpa-behaviour.md §4.1: `hpa_target_name`).
    async fn discovered_label_sets(
        &self,
        now: hpa_bridge_rules::clock::Now,
    ) -> BTreeSet<(String, String)> {
        let mut sets = BTreeSet::new();
        let everything = LabelSelector::everything();
        for spec in self
            .engine
            .config
            .metrics
            .iter()
            .filter(|m| m.kind() == MetricKind::Recommendation)
        {
            let namespaces = self
                .engine
                .source
                .label_values(spec.series(), spec.namespace_label());
            for ns in namespaces {
                let scope = metric_scope(spec, spec.series(), &ns, &everything);
                // A source that cannot say (Prometheus lists no label values) finds no rows.
                let Ok(ev) = self
                    .engine
                    .source
                    .read(&scope, Read::Glance, now.wall)
                    .await
                else {
                    continue;
                };
                for o in ev.observations.iter().filter(|o| o.present) {
                    if let Some(name) = o.id.labels.get("hpa_target_name") {
                        sets.insert((ns.clone(), format!("hpa_target_name={name}")));
                    }
                }
            }
        }
        sets
    }
}

/// The answer history as `/status/history` and the status page show it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryView {
    #[serde(skip)]
    pub now_ms: Millis,
    #[serde(skip)]
    pub retention_ms: Millis,
    pub capacity: usize,
    pub max_scopes: usize,
    pub tracked: usize,
    pub dropped_scopes: u64,
    #[serde(serialize_with = "scopes_json")]
    pub scopes: Vec<history::ScopeHistory>,
}

fn scopes_json<S: serde::Serializer>(
    scopes: &[history::ScopeHistory],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(scopes.len()))?;
    for h in scopes {
        let mut scope = json!({
            "metric": h.key.metric,
            "namespace": h.key.namespace,
            "scope": h.key.scope,
            "workload": h.key.workload(),
            "reason": h.last_reason,
            "inputs": h.last_inputs,
            "inputsTotal": h.last_inputs_total,
            "entries": h.entries,
        });
        // As on an answer: only for scopes whose producers say something.
        if !h.last_producer_reasons.is_empty() {
            scope["producerReasons"] = json!(h.last_producer_reasons);
        }
        seq.serialize_element(&scope)?;
    }
    seq.end()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadStatus {
    namespace: String,
    /// What the answer covers, named as in the history: the selector of an External query,
    /// `StatefulSet/lobby` (plus any `metricLabelSelector`) for an Object query.
    scope: String,
    /// The workload an Object query named; absent on External rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<ObjectRow>,
    selector: String,
    metric: String,
    source: &'static str,
    last_requested: Option<String>,
    answer: Answer,
}

/// An Object row's workload as `/status` shows it (the `describedObject` of the answer).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRow {
    api_version: &'static str,
    kind: &'static str,
    resource: &'static str,
    name: String,
}

impl From<&ObjectRef> for ObjectRow {
    fn from(o: &ObjectRef) -> Self {
        ObjectRow {
            api_version: o.kind.api_version(),
            kind: o.kind.kind(),
            resource: o.kind.resource(),
            name: o.name.clone(),
        }
    }
}
