//! The provider: what the API asks of the engine (`MetricsProvider`, shaped like
//! custom-metrics-apiserver's provider interface), and `Engine`, its plain implementation:
//! the configuration, an evidence source and the cluster's facts, turned into answers by the
//! rules. Query in, evidence read, rules run (evaluation.rs), answer out. Reuse is a layer
//! around it (reusing.rs); the history is the adapter's, around that.

use std::future::Future;
use std::sync::{Arc, Mutex};

use hpa_bridge_rules::clock::{Clock, FreshWindow, Millis, Now};
use hpa_bridge_rules::cluster::Cluster;
use hpa_bridge_rules::config::{Config, MetricKind, MetricSpec};
use hpa_bridge_rules::policy::{Answer, RefusalKind};
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_sources::source::EvidenceSource;
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

use super::evaluation::{metric_scope, Evaluation, RuleMemory};
use super::metric_query::{MetricQuery, Served};
use super::object_scope::ObjectRef;
use super::query_key::QueryKey;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QueryError {
    #[error("metric {metric:?} is not served by this adapter (served: {served})")]
    UnknownMetric { metric: String, served: String },
}

/// What the API asks of the engine.
pub trait MetricsProvider: Send + Sync {
    /// `query`'s answer as served to an HPA (docs/hpa-behaviour.md §1.2, §6.5), with the
    /// clock readings within which it reads the same while its version stands.
    fn answer(
        &self,
        query: &MetricQuery,
    ) -> impl Future<Output = Result<Answered, QueryError>> + Send;

    /// Moves whenever anything `query`'s answer could read changes, apart from the passing of
    /// time (`Answered::fresh` covers that); `None` when no answer of it may be reused.
    fn version(&self, query: &MetricQuery) -> Option<Version>;

    /// Moves with every write to the evidence and every change of the cluster's facts: while
    /// it stands, no version moved. `None` when the facts cannot tell their changes.
    fn generation(&self) -> Option<Version>;

    /// The metrics served, as configured.
    fn metrics(&self) -> Vec<String>;
}

/// What an answer depends on besides the passing of time: the series it reads (or every write
/// to the store, `generation`'s shortcut: while none happened, nothing changed) and the
/// cluster's facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub(super) store: u64,
    pub(super) cluster: u64,
}

/// An answer as served, shared by every request that reuses it.
pub struct Answered {
    pub served: Arc<Served>,
    /// The clock readings over which every input it read keeps its freshness.
    pub fresh: FreshWindow,
    /// When it was evaluated, or served again.
    pub at: Now,
}

impl<P: MetricsProvider> MetricsProvider for Arc<P> {
    fn answer(
        &self,
        query: &MetricQuery,
    ) -> impl Future<Output = Result<Answered, QueryError>> + Send {
        (**self).answer(query)
    }

    fn version(&self, query: &MetricQuery) -> Option<Version> {
        (**self).version(query)
    }

    fn generation(&self) -> Option<Version> {
        (**self).generation()
    }

    fn metrics(&self) -> Vec<String> {
        (**self).metrics()
    }
}

pub struct Engine {
    pub(super) config: Arc<Config>,
    pub(super) clock: Arc<dyn Clock>,
    /// Where evidence comes from: the scrape store, or a Prometheus-compatible server.
    pub(super) source: Arc<dyn EvidenceSource>,
    /// The cluster's facts (discovery's watch caches, or the simulator's workload); `None`
    /// without Kubernetes.
    pub(super) cluster: Option<Arc<dyn Cluster>>,
    /// What the rules keep between requests (`sustain` logs, warnings given, selectors).
    memory: RuleMemory,
    /// Counts the answers computed (`hpa_bridge_answers_total`).
    metrics: Arc<SelfMetrics>,
    /// When each query was last answered for an HPA, so `/status` can list every served
    /// workload. Authorised requests only, bounded (`MAX_SEEN_QUERIES`, the least recently
    /// asked out first): a seeded fast hash will do.
    pub(super) seen: Mutex<lru::LruCache<QueryKey, Millis, foldhash::fast::RandomState>>,
}

/// The queries `/status` lists from requests; bounded so a scanner cannot grow them without
/// limit.
pub(super) const MAX_SEEN_QUERIES: usize = 4096;
const SEEN_CAPACITY: std::num::NonZeroUsize =
    std::num::NonZeroUsize::new(MAX_SEEN_QUERIES).unwrap();

impl MetricsProvider for Engine {
    /// Evaluated afresh, counted and listed on `/status`.
    async fn answer(&self, query: &MetricQuery) -> Result<Answered, QueryError> {
        let spec = self.spec(&query.metric)?;
        let (namespace, selector) = (&query.namespace, &query.selector);
        let now = self.clock.now();
        let ev = self.evaluation(namespace, selector, query.object.as_ref(), now, false);
        let answer = ev.answer(spec).await;
        // Taken before the workload's count below, which may read evidence the answer did
        // not: only what the answer read bounds its reuse.
        let fresh = ev.fresh_window(self.stale_after_ms());
        let applied = ev.applied_replicas(spec).await;
        let outcome = answer.refusal().map_or("value", RefusalKind::label);
        self.metrics.answer(spec.name(), outcome);
        self.remember_query(query.key(), now.wall);
        let served = Served::new(answer, self.window_secs(), applied);
        Ok(Answered {
            served: Arc::new(served),
            fresh,
            at: now,
        })
    }

    fn version(&self, query: &MetricQuery) -> Option<Version> {
        let spec = self.spec(&query.metric).ok()?;
        self.scope_version(spec.name(), &query.namespace, &query.selector)
    }

    fn generation(&self) -> Option<Version> {
        Some(Version {
            store: self.source.generation(),
            cluster: self.cluster_version()?,
        })
    }

    fn metrics(&self) -> Vec<String> {
        self.config
            .metrics
            .iter()
            .map(|m| m.name().to_string())
            .collect()
    }
}

impl Engine {
    pub(super) fn new(
        config: Config,
        source: Arc<dyn EvidenceSource>,
        cluster: Option<Arc<dyn Cluster>>,
        clock: Arc<dyn Clock>,
        metrics: Arc<SelfMetrics>,
    ) -> Self {
        Engine {
            config: Arc::new(config),
            clock,
            source,
            cluster,
            memory: RuleMemory::default(),
            metrics,
            seen: Mutex::new(crate::bounded_lru::bounded_lru(SEEN_CAPACITY)),
        }
    }

    /// The configured metric `metric` names, without regard to case.
    pub(super) fn spec(&self, metric: &str) -> Result<&MetricSpec, QueryError> {
        self.config
            .metric(metric)
            .ok_or_else(|| QueryError::UnknownMetric {
                metric: metric.into(),
                served: MetricsProvider::metrics(self).join(", "),
            })
    }

    /// The answer in `namespace` under `selector` (for the workload `object` of an Object
    /// query) now, with every input noted, as `/status` explains it.
    pub(super) async fn explain(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
        object: Option<&ObjectRef>,
    ) -> Answer {
        (self.evaluation(namespace, selector, object, self.clock.now(), true))
            .answer(spec)
            .await
    }

    /// Moves whenever anything an answer in `namespace` for `selector` could read changes,
    /// apart from the passing of time (`Evaluation::fresh_window` covers that): the series
    /// any rule of any configured metric reads in that scope (its own, its `validWhen` gate,
    /// its `currentSeries`), the never-scraped targets, and the cluster's facts. It is scoped
    /// because the store is written with every scrape of any target, and a workload's own
    /// series change far less often. `None` when no answer of `metric` may be reused: a
    /// threshold metric (or a target over one) records a `sustain` evaluation per new sample
    /// and its windows pass with time alone. A source that
    /// cannot tell its changes (a Prometheus source, which has its own cache) says 0 always, and
    /// reusing.rs bounds reuse in time.
    fn scope_version(
        &self,
        metric: &str,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Option<Version> {
        if self.evaluates_every_scrape(metric) {
            return None;
        }
        let cluster = self.cluster_version()?;
        let mut scopes = self.config.metrics.iter().flat_map(|spec| {
            spec.read_series()
                .map(move |series| metric_scope(spec, series, namespace, selector))
        });
        let store = self.source.version(&mut scopes);
        Some(Version { store, cluster })
    }

    fn cluster_version(&self) -> Option<u64> {
        match &self.cluster {
            None => Some(0),
            Some(cluster) => cluster.version(),
        }
    }

    /// Whether `metric` is a threshold or a target with a threshold among its inputs.
    fn evaluates_every_scrape(&self, metric: &str) -> bool {
        let is_threshold = |name: &str| {
            self.config
                .metric(name)
                .is_some_and(|m| m.kind() == MetricKind::Threshold)
        };
        match self.config.metric(metric) {
            Some(MetricSpec::Target(t)) => t
                .recommendation
                .iter()
                .chain(t.combine.iter())
                .any(|n| is_threshold(n)),
            Some(m) => m.kind() == MetricKind::Threshold,
            None => false,
        }
    }

    /// The `window` of a served value: one scrape interval, in whole seconds.
    pub(super) fn window_secs(&self) -> u64 {
        self.config.scrape.interval.0.as_secs().max(1)
    }

    /// List a query answered for an HPA on `/status`, as asked at `now`.
    pub(super) fn remember_query(&self, key: QueryKey, now: Millis) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = seen.get_mut(&key) {
            *at = now;
            return;
        }
        seen.put(key, now);
    }

    pub(super) fn stale_after_ms(&self) -> Millis {
        self.config.scrape.stale_after().as_millis() as Millis
    }

    /// One request's evaluation at `now`: serving, or explaining (every input noted).
    pub(super) fn evaluation<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a LabelSelector,
        object: Option<&'a ObjectRef>,
        now: Now,
        explain: bool,
    ) -> Evaluation<'a> {
        let parts = (&*self.config, &*self.source, self.cluster.as_ref());
        Evaluation::new(
            parts,
            &self.memory,
            namespace,
            selector,
            now,
            object,
            explain,
        )
    }
}
