//! The adapter's core: config + store + clock, turned into answers by `policy`.
//!
//! Both `serve` and `simulate` build one `Adapter`; only the clock and the scrape timer differ.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::json;

use crate::clock::{rfc3339, Clock, Millis};
use crate::config::{Config, MetricKind, MetricSpec};
use crate::policy::{self, Answer, QueryContext};
use crate::selector::LabelSelector;
use crate::source::EvidenceSource;
use crate::store::{Scope, ScrapeTarget, Store, TargetId, WorkloadRef};
use crate::telemetry::SelfMetrics;

/// What discovery knows about workloads; absent without Kubernetes.
pub trait WorkloadState: Send + Sync {
    /// `spec.replicas` from the workload's scale subresource, when readable.
    fn current_replicas(&self, workload: &WorkloadRef) -> Option<u64>;
    /// `spec.ordinals.start` of a StatefulSet (0 otherwise).
    fn ordinals_start(&self, workload: &WorkloadRef) -> u64;
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QueryError {
    #[error("metric {metric:?} is not served by this adapter (served: {served})")]
    UnknownMetric { metric: String, served: String },
}

/// The requests seen, so `/status` can show every served workload; bounded so a scanner
/// cannot grow it without limit.
const MAX_SEEN_QUERIES: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct QueryKey {
    metric: String,
    namespace: String,
    selector: String,
}

pub struct Adapter {
    pub config: Arc<Config>,
    pub store: Arc<Store>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<SelfMetrics>,
    /// Where evidence comes from: the scrape store by default.
    source: Arc<dyn EvidenceSource>,
    ready: AtomicBool,
    seen: Mutex<BTreeMap<QueryKey, Millis>>,
    workloads: RwLock<Option<Arc<dyn WorkloadState>>>,
}

impl Adapter {
    pub fn new(config: Config, clock: Arc<dyn Clock>, metrics: Arc<SelfMetrics>) -> Self {
        let store = Arc::new(Store::new());
        let targets: Vec<ScrapeTarget> = config
            .scrape
            .static_targets
            .iter()
            .map(|t| ScrapeTarget {
                id: TargetId(t.url.as_str().into()),
                url: t.url.clone(),
                labels: t.labels.clone(),
                workload: None,
            })
            .collect();
        store.set_targets(targets);
        Adapter {
            config: Arc::new(config),
            source: store.clone(),
            store,
            clock,
            metrics,
            ready: AtomicBool::new(false),
            seen: Mutex::new(BTreeMap::new()),
            workloads: RwLock::new(None),
        }
    }

    /// Read evidence from another source (e.g. Prometheus) instead of the scrape store.
    pub fn with_source(mut self, source: Arc<dyn EvidenceSource>) -> Self {
        self.source = source;
        self
    }

    pub fn set_workload_state(&self, state: Arc<dyn WorkloadState>) {
        *self.workloads.write().unwrap_or_else(|e| e.into_inner()) = Some(state);
    }

    fn workload_state(&self) -> Option<Arc<dyn WorkloadState>> {
        self.workloads
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Ready means the first scrape round has completed.
    pub fn mark_ready(&self) {
        if !self.ready.swap(true, Ordering::SeqCst) {
            tracing::info!("first scrape round complete; ready");
        }
    }

    pub fn stale_after_ms(&self) -> Millis {
        self.config.scrape.stale_after().as_millis() as Millis
    }

    pub fn served_metric_names(&self) -> Vec<String> {
        self.config.metrics.iter().map(|m| m.name.clone()).collect()
    }

    /// The answer for one external metric query, as the HPA would ask it (REFERENCE.md §1.2).
    pub async fn answer(
        &self,
        metric: &str,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Answer, QueryError> {
        let spec = self
            .config
            .metric(metric)
            .ok_or_else(|| QueryError::UnknownMetric {
                metric: metric.into(),
                served: self.served_metric_names().join(", "),
            })?;
        let now = self.clock.now_ms();
        let answer = self.answer_spec(spec, namespace, selector, now).await;
        self.metrics.answer(
            &spec.name,
            match answer.refusal() {
                None => "value".into(),
                Some(kind) => format!("{kind:?}"),
            }
            .as_str(),
        );
        Ok(answer)
    }

    fn answer_spec<'a>(
        &'a self,
        spec: &'a MetricSpec,
        namespace: &'a str,
        selector: &'a LabelSelector,
        now: Millis,
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            let selector_text = selector.to_string();
            let q = QueryContext {
                metric: &spec.name,
                series: &spec.series,
                scope: policy::describe_scope(&spec.namespace_label, namespace, &selector_text),
                now,
                stale_after_ms: self.stale_after_ms(),
            };
            let scope = Scope {
                series: &spec.series,
                namespace_label: &spec.namespace_label,
                namespace,
                selector,
            };
            match spec.kind {
                MetricKind::Recommendation | MetricKind::Threshold => {
                    match self.source.evidence(&scope, now).await {
                        Ok(ev) => policy::recommendation(&q, &ev),
                        Err(e) => policy::source_unavailable(&spec.name, spec.kind, &e.to_string()),
                    }
                }
                MetricKind::StatefulFloor => {
                    let ev = match self.source.evidence(&scope, now).await {
                        Ok(ev) => ev,
                        Err(e) => {
                            return policy::source_unavailable(
                                &spec.name,
                                spec.kind,
                                &e.to_string(),
                            )
                        }
                    };
                    let state = self.workload_state();
                    let (ordinals_start, warnings) = match (&state, ev.workloads.as_slice()) {
                        (Some(state), [w]) => (state.ordinals_start(w), floor_warnings(w)),
                        _ => (0, Vec::new()),
                    };
                    let mut answer = policy::stateful_floor(&q, &ev, ordinals_start);
                    answer.warnings = warnings;
                    answer
                }
                MetricKind::Target => {
                    let rec_spec = spec
                        .recommendation
                        .as_deref()
                        .and_then(|n| self.config.metric(n));
                    let floor_spec = spec.floor.as_deref().and_then(|n| self.config.metric(n));
                    let Some(rec_spec) = rec_spec else {
                        // Config validation guarantees a recommendation; refuse rather than panic.
                        return policy::target(
                            &spec.name,
                            policy::recommendation(&q, &Default::default()),
                            None,
                            None,
                        );
                    };
                    let rec = self.answer_spec(rec_spec, namespace, selector, now).await;
                    let floor = match floor_spec {
                        Some(f) => Some(self.answer_spec(f, namespace, selector, now).await),
                        None => None,
                    };
                    let current = self.current_replicas_for(spec, namespace, selector);
                    policy::target(&spec.name, rec, floor, current)
                }
            }
        })
    }

    /// `spec.replicas` of the single workload behind the floor's pods, if discovery knows it.
    fn current_replicas_for(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Option<u64> {
        let state = self.workload_state()?;
        let floor = self.config.metric(spec.floor.as_deref()?)?;
        let ev = self.store.evidence(&Scope {
            series: &floor.series,
            namespace_label: &floor.namespace_label,
            namespace,
            selector,
        });
        match ev.workloads.as_slice() {
            [w] => state.current_replicas(w),
            _ => None,
        }
    }

    /// Remember a served query for `/status`.
    pub fn record_query(&self, metric: &str, namespace: &str, selector: &LabelSelector) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let key = QueryKey {
            metric: metric.to_ascii_lowercase(),
            namespace: namespace.into(),
            selector: selector.to_string(),
        };
        if seen.len() >= MAX_SEEN_QUERIES && !seen.contains_key(&key) {
            if let Some(oldest) = seen
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(k, _)| k.clone())
            {
                seen.remove(&oldest);
            }
        }
        seen.insert(key, self.clock.now_ms());
    }

    /// Refresh gauges that are derived from the store.
    pub fn refresh_gauges(&self) {
        let (series, stale) = self
            .store
            .series_counts(self.clock.now_ms(), self.stale_after_ms());
        self.metrics.series.set(series as i64);
        self.metrics.stale_series.set(stale as i64);
        self.metrics.targets.set(self.store.targets().len() as i64);
    }

    /// The `/status` document: every workload seen in requests or found in the data, with its
    /// current answer and inputs, and every target with its health. Enough to answer "why did
    /// the HPA get 7?" without anything else.
    pub async fn status(&self) -> serde_json::Value {
        let now = self.clock.now_ms();
        let mut workloads = Vec::new();
        let seen: Vec<(QueryKey, Millis)> = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let mut shown: BTreeSet<QueryKey> = BTreeSet::new();
        for (key, at) in &seen {
            let Ok(selector) = LabelSelector::parse(&key.selector) else {
                continue;
            };
            if let Ok(answer) = self.answer(&key.metric, &key.namespace, &selector).await {
                workloads.push(WorkloadStatus {
                    namespace: key.namespace.clone(),
                    selector: key.selector.clone(),
                    metric: key.metric.clone(),
                    source: "request",
                    last_requested: Some(rfc3339(*at)),
                    answer,
                });
                shown.insert(key.clone());
            }
        }
        for (namespace, selector_text) in self.discovered_label_sets() {
            for spec in &self.config.metrics {
                let key = QueryKey {
                    metric: spec.name.clone(),
                    namespace: namespace.clone(),
                    selector: selector_text.clone(),
                };
                if shown.contains(&key) {
                    continue;
                }
                let Ok(selector) = LabelSelector::parse(&selector_text) else {
                    continue;
                };
                workloads.push(WorkloadStatus {
                    namespace: namespace.clone(),
                    selector: selector_text.clone(),
                    metric: spec.name.clone(),
                    source: "discovered",
                    last_requested: None,
                    answer: self.answer_spec(spec, &namespace, &selector, now).await,
                });
            }
        }
        let targets: Vec<serde_json::Value> = self
            .store
            .target_health()
            .into_iter()
            .map(|(t, h)| {
                json!({
                    "id": t.id,
                    "url": t.url,
                    "labels": t.labels,
                    "workload": t.workload,
                    "healthy": h.last_error.is_none() && h.ever_succeeded(),
                    "lastError": h.last_error,
                    "lastSuccess": h.last_success_ms.map(rfc3339),
                    "lastSuccessAgeSeconds": h.last_success_ms.map(|t| (now - t) as f64 / 1000.0),
                    "lastDurationMs": h.last_duration_ms,
                    "consecutiveFailures": h.consecutive_failures,
                })
            })
            .collect();
        json!({
            "now": rfc3339(now),
            "ready": self.is_ready(),
            "scrape": {
                "interval": self.config.scrape.interval.to_string(),
                "timeout": self.config.scrape.timeout.to_string(),
                "staleAfterSeconds": self.stale_after_ms() as f64 / 1000.0,
            },
            "workloads": workloads,
            "targets": targets,
            "source": self.source.status(),
        })
    }

    /// (namespace, selector) pairs found in the recommendation series, using the label that
    /// names the workload (REFERENCE.md §4.1: `hpa_target_name`).
    fn discovered_label_sets(&self) -> BTreeSet<(String, String)> {
        let mut sets = BTreeSet::new();
        let everything = LabelSelector::everything();
        for spec in self
            .config
            .metrics
            .iter()
            .filter(|m| m.kind == MetricKind::Recommendation)
        {
            let namespaces = self.store.label_values(&spec.series, &spec.namespace_label);
            for ns in namespaces {
                let ev = self.store.evidence(&Scope {
                    series: &spec.series,
                    namespace_label: &spec.namespace_label,
                    namespace: &ns,
                    selector: &everything,
                });
                for o in ev.observations.iter().filter(|o| o.present) {
                    if let Some(name) = o.labels.get("hpa_target_name") {
                        sets.insert((ns.clone(), format!("hpa_target_name={name}")));
                    }
                }
            }
        }
        sets
    }
}

fn floor_warnings(w: &WorkloadRef) -> Vec<String> {
    if w.kind == "Deployment" {
        vec![format!(
            "the floor is served for Deployment {}/{}, which promises no deletion order: it gives no protection (REFERENCE.md §4.1)",
            w.namespace, w.name
        )]
    } else {
        Vec::new()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadStatus {
    namespace: String,
    selector: String,
    metric: String,
    source: &'static str,
    last_requested: Option<String>,
    answer: Answer,
}
