//! `Adapter`: what the API serves from. It answers a `MetricQuery` from either API through
//! the `Engine` (provider.rs, the rules in evaluation.rs), reusing an answer while a fresh
//! one would be the same (answer_reuse.rs), and keeps what was served: the history, the
//! queries `/status` lists (status_document.rs) and the self-metrics. Nothing reaches around
//! it to the store or the source. It is assembled by `EngineBuilder` (builder.rs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock::{Clock, FreshWindow, Millis, Now};
use crate::cluster::Cluster;
use crate::config::{Config, MetricSpec};
use crate::evidence::TargetId;
use crate::policy::{self, Answer, RefusalKind};
use crate::source::EvidenceSource;
use crate::store::{PageFormat, ScrapeTarget, Store};
use crate::telemetry::{ScopeGauges, SelfMetrics, PROMETHEUS_FAMILIES};

use super::answer_reuse::AnswerReuse;
use super::history::{self, History};
use super::metric_query::{MetricQuery, Served};
use super::provider::{Engine, Evaluated, QueryError};
use super::query_key::QueryKey;

/// The requests seen, so `/status` can show every served workload; bounded so a scanner
/// cannot grow it without limit.
pub(super) const MAX_SEEN_QUERIES: usize = 4096;
/// `MAX_SEEN_QUERIES` as the capacity of `Adapter::seen`.
const SEEN_CAPACITY: std::num::NonZeroUsize =
    std::num::NonZeroUsize::new(MAX_SEEN_QUERIES).unwrap();

/// A request's label in the self-metrics (`Adapter::metric_label`): which configured metric it
/// asked for, or none (`-`). Held as a position in the configuration rather than a borrowed
/// name, so the request chain can keep it across the answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricLabel(Option<usize>);

impl MetricLabel {
    /// `-`: no configured metric.
    pub const NONE: MetricLabel = MetricLabel(None);
}

pub struct Adapter {
    /// The rules over the configuration, the evidence source and the cluster's facts.
    pub(super) engine: Engine,
    pub(super) metrics: Arc<SelfMetrics>,
    pub(super) ready: AtomicBool,
    /// When each query was last asked. Authorised requests only, bounded (`MAX_SEEN_QUERIES`,
    /// the least recently asked out first): a seeded fast hash will do.
    pub(super) seen: Mutex<lru::LruCache<QueryKey, Millis, foldhash::fast::RandomState>>,
    /// The answers served to HPAs, per scope, bounded (history.rs).
    pub(super) history: Mutex<History>,
    pub(super) reuse: AnswerReuse,
    /// Parts of `/status` kept outside the engine.
    pub(super) sections: Vec<super::StatusSection>,
}

impl Adapter {
    /// An adapter answering from `source`.
    pub(crate) fn new(
        config: Config,
        source: Arc<dyn EvidenceSource>,
        clock: Arc<dyn Clock>,
        metrics: Arc<SelfMetrics>,
    ) -> Self {
        let mut limits = history::Limits::for_retention(
            config.history.retention.0.as_millis() as Millis,
            config.history.max_scopes,
        );
        if let Some(n) = config.history.entries_per_scope {
            limits.capacity = n.max(1);
        }
        Adapter {
            history: Mutex::new(History::new(limits)),
            engine: Engine::new(config, source, clock),
            metrics,
            ready: AtomicBool::new(false),
            seen: Mutex::new(crate::bounded_lru::bounded_lru(SEEN_CAPACITY)),
            reuse: AnswerReuse::default(),
            sections: Vec::new(),
        }
    }

    /// Know the cluster's facts: workloads, their pods and `spec.replicas`.
    pub(crate) fn with_cluster(mut self, cluster: Arc<dyn Cluster>) -> Self {
        self.engine = self.engine.with_cluster(cluster);
        self
    }
    /// Show `section` in `/status`.
    pub(crate) fn with_status_section(mut self, section: super::StatusSection) -> Self {
        self.sections.push(section);
        self
    }

    /// The `window` of a served value: one scrape interval, in whole seconds.
    pub fn answer_window_secs(&self) -> u64 {
        self.engine.config.scrape.interval.0.as_secs().max(1)
    }

    pub fn now_ms(&self) -> Millis {
        self.engine.clock.now_ms()
    }

    /// Both clocks: reuse is timed on both (`Evaluation::fresh_window`): scraped samples age on
    /// the monotonic one, a producer's own timestamps on the wall clock.
    pub fn now(&self) -> Now {
        self.engine.clock.now()
    }

    /// The self-metrics registry, for the connection gates that count refused and expired
    /// connections beside the request counters.
    pub fn self_metrics(&self) -> Arc<SelfMetrics> {
        self.metrics.clone()
    }

    /// Count one API request in the self-metrics.
    pub fn record_request(&self, code: u16, metric: MetricLabel, seconds: f64) {
        let name = metric
            .0
            .and_then(|i| self.engine.config.metrics.get(i))
            .map_or("-", |m| m.name());
        self.metrics.request(code, name, seconds);
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
        self.engine.stale_after_ms()
    }

    pub fn served_metric_names(&self) -> Vec<String> {
        self.engine.metrics()
    }

    /// The label for self-metrics: a configured metric name, or `-` for anything else, so
    /// unauthenticated or mistaken requests cannot grow the label set without bound.
    pub fn metric_label(&self, requested: &str) -> MetricLabel {
        MetricLabel(self.engine.config.metric_index(requested))
    }

    /// The answer to one query, as the HPA asks it through either API
    /// (docs/hpa-behaviour.md §1.2, §6.5): reused while a fresh computation would give the
    /// same (answer_reuse.rs), else computed, counted and listed on `/status`; either way kept
    /// in the history.
    pub async fn answer(&self, query: &MetricQuery) -> Result<Arc<Served>, QueryError> {
        let spec = self.engine.spec(&query.metric)?;
        // Read before the version: a write after it moves the generation.
        let Some(generation) = self.engine.generation() else {
            return Ok(self.compute(spec, query, &query.key()).await.0);
        };
        let key = query.key();
        let now = self.engine.clock.now();
        let young = self.reuse.young(&key, now);
        if let Some(e) = young.as_ref().filter(|e| e.generation == generation) {
            self.served_again(spec, query, &e.served);
            return Ok(e.served.clone());
        }
        let Some(version) = self
            .engine
            .version(spec.name(), &query.namespace, &query.selector)
        else {
            return Ok(self.compute(spec, query, &key).await.0);
        };
        if let Some(e) = young.filter(|e| e.version == version) {
            self.reuse.checked(&key, version, generation);
            self.served_again(spec, query, &e.served);
            return Ok(e.served);
        }
        let (served, fresh) = self.compute(spec, query, &key).await;
        self.reuse
            .keep(key, version, generation, now, fresh, served.clone());
        Ok(served)
    }

    /// `answer`, always computed afresh. Not a setting of the adapter: the bench uses it to
    /// show the serve path's cost when the store changes between every pair of requests,
    /// which is what a large, spread-out scrape loop approaches.
    #[doc(hidden)]
    pub async fn answer_computed(&self, query: &MetricQuery) -> Result<Arc<Served>, QueryError> {
        let spec = self.engine.spec(&query.metric)?;
        Ok(self.compute(spec, query, &query.key()).await.0)
    }

    /// A reused answer is kept in the history like a computed one, so that the history holds
    /// every answer an HPA was given (two HPAs on one scope, or a sync within one scrape
    /// interval of another request, are served from reuse). `hpa_bridge_answers_total` counts
    /// computations only (docs/metrics.md).
    fn served_again(&self, spec: &MetricSpec, query: &MetricQuery, served: &Served) {
        let answer = &served.answer;
        self.record_answer(
            (spec.name(), &query.namespace, &query.history_scope()),
            answer,
            served.spec_replicas(),
            self.engine.clock.now().wall,
        );
        tracing::debug!(namespace = %query.namespace, selector = %query.selector, object = ?query.object, answer = %policy::summary(answer), "served again");
    }

    /// An answer computed for an HPA, with the clock readings within which it may be reused
    /// while its version stands: counted in the self-metrics, kept in the history and its
    /// query listed on `/status`.
    async fn compute(
        &self,
        spec: &MetricSpec,
        query: &MetricQuery,
        key: &QueryKey,
    ) -> (Arc<Served>, FreshWindow) {
        let Evaluated {
            answer,
            fresh,
            applied,
            at,
        } = self.engine.serve(spec, query).await;
        self.metrics.answer(
            spec.name(),
            answer.refusal().map_or("value", RefusalKind::label),
        );
        self.record_answer(
            (spec.name(), &query.namespace, &query.history_scope()),
            &answer,
            applied,
            at.wall,
        );
        self.remember_query(key);
        tracing::debug!(namespace = %query.namespace, selector = %query.selector, object = ?query.object, answer = %policy::summary(&answer), "served");
        let served = Served::new(answer, self.answer_window_secs(), applied);
        (Arc::new(served), fresh)
    }

    /// Keep an answer served to an HPA in the history (through `compute` or a reuse, for either
    /// front door); `/status` evaluations are not recorded.
    pub(super) fn record_answer(
        &self,
        key: (&str, &str, &str),
        answer: &Answer,
        spec_replicas: Option<u64>,
        now: Millis,
    ) {
        let evicted = self
            .history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(&key, answer, spec_replicas, now);
        if let Some(k) = evicted {
            tracing::debug!(metric = %k.metric, namespace = %k.namespace, scope = %k.scope, "history.maxScopes reached: dropped the scope asked about least recently");
        }
    }

    /// Every scrape target of the active source and its health (none for the Prometheus
    /// source).
    pub fn target_health(&self) -> Vec<(Arc<ScrapeTarget>, crate::store::TargetHealth)> {
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

    /// List a served query on `/status`.
    fn remember_query(&self, key: &QueryKey) {
        let now = self.engine.clock.now_ms();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = seen.get_mut(key) {
            *at = now;
            return;
        }
        seen.put(key.clone(), now);
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
        m.ready.set(i64::from(self.is_ready()));
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
}

/// The identity of a `scrape.static` target: its URL as it may be shown.
pub fn static_target_id(url: &str) -> TargetId {
    TargetId(crate::redaction::redact_url(url).as_ref().into())
}

/// A scrape store holding the config's `scrape.static` targets.
pub fn static_store(config: &Config) -> Arc<Store> {
    let store = Arc::new(store_for(config));
    store.set_targets(static_targets(config));
    store
}

/// An empty scrape store that applies the config's `scrape.maxClockSkew`.
fn store_for(config: &Config) -> Store {
    Store::with_max_clock_skew(config.scrape.max_clock_skew.0.as_millis() as Millis)
        .with_stale_after(config.scrape.stale_after().as_millis() as Millis)
}

/// The credentials of each `scrape.static` target that has them, by the target's id.
pub fn static_credentials(
    config: &Config,
) -> std::collections::HashMap<TargetId, crate::config::ScrapeCredentials> {
    static_targets(config)
        .into_iter()
        .zip(&config.scrape.static_targets)
        .enumerate()
        .filter_map(|(i, (target, t))| Some((target.id, t.credentials(i)?)))
        .collect()
}

/// The `scrape.static` targets, which carry no workload.
pub fn static_targets(config: &Config) -> Vec<ScrapeTarget> {
    let mut taken = std::collections::HashSet::new();
    config
        .scrape
        .static_targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            // The id is shown in /status, metric labels and logs, so it never holds a password
            // or a query value. `Config` refuses two entries for one URL, but URLs differing in
            // a query value are shown alike; an id taken by an earlier entry names its entry,
            // so that neither target replaces the other in the store.
            let mut id = static_target_id(&t.url);
            if !taken.insert(id.clone()) {
                id = TargetId(format!("{id} (scrape.static[{i}])").into());
                taken.insert(id.clone());
            }
            let format = match &t.json {
                // `Config` compiled every block when it was loaded.
                Some(json) => match json.compile(&format!("scrape.static[{i}].json")) {
                    Ok(x) => PageFormat::Json(Arc::new(x)),
                    Err(e) => PageFormat::UnusableJsonConfig(e.to_string().into()),
                },
                None => PageFormat::Exposition,
            };
            ScrapeTarget {
                format,
                id,
                url: t.url.clone(),
                labels: t.labels.clone(),
                workload: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
