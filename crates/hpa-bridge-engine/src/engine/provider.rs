//! `Engine`: the configuration, an evidence source and the cluster's facts, turned into
//! answers by the rules. One query in, one evaluated answer out (evaluation.rs runs the
//! rules); reuse, the history and the self-metrics are the adapter's, around it.

use std::sync::Arc;

use crate::clock::{Clock, FreshWindow, Millis, Now};
use crate::cluster::Cluster;
use crate::config::{Config, MetricKind, MetricSpec};
use crate::policy::Answer;
use crate::selector::LabelSelector;
use crate::source::EvidenceSource;

use super::answer_reuse::Version;
use super::evaluation::{metric_scope, Evaluation, RuleMemory};
use super::metric_query::MetricQuery;
use super::object_scope::ObjectRef;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QueryError {
    #[error("metric {metric:?} is not served by this adapter (served: {served})")]
    UnknownMetric { metric: String, served: String },
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
}

/// An answer as served, and the clock readings within which it reads the same while no
/// input changes.
pub(super) struct Evaluated {
    pub(super) answer: Answer,
    pub(super) fresh: FreshWindow,
    /// `spec.replicas` of the answer's workload, as the watch knows it now.
    pub(super) applied: Option<u64>,
    /// When it was evaluated: the one reading of the clocks every rule used.
    pub(super) at: Now,
}

impl Engine {
    pub(super) fn new(
        config: Config,
        source: Arc<dyn EvidenceSource>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Engine {
            config: Arc::new(config),
            clock,
            source,
            cluster: None,
            memory: RuleMemory::default(),
        }
    }

    /// Know the cluster's facts: workloads, their pods and `spec.replicas`.
    pub(super) fn with_cluster(mut self, cluster: Arc<dyn Cluster>) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The configured metric `metric` names, without regard to case.
    pub(super) fn spec(&self, metric: &str) -> Result<&MetricSpec, QueryError> {
        self.config
            .metric(metric)
            .ok_or_else(|| QueryError::UnknownMetric {
                metric: metric.into(),
                served: self.metrics().join(", "),
            })
    }

    /// The metrics served, as configured.
    pub fn metrics(&self) -> Vec<String> {
        self.config
            .metrics
            .iter()
            .map(|m| m.name().to_string())
            .collect()
    }

    /// `query`'s answer as served to an HPA (docs/hpa-behaviour.md §1.2, §6.5): its first
    /// inputs noted, the rest counted.
    pub(super) async fn serve(&self, spec: &MetricSpec, query: &MetricQuery) -> Evaluated {
        let (namespace, selector, object) =
            (&query.namespace, &query.selector, query.object.as_ref());
        let ev = self.evaluation(namespace, selector, object, self.clock.now(), false);
        let answer = ev.answer(spec).await;
        // Taken before the workload's count below, which may read evidence the answer did
        // not: only what the answer read bounds its reuse.
        let fresh = ev.fresh_window(self.stale_after_ms());
        let applied = ev.applied_replicas(spec).await;
        Evaluated {
            answer,
            fresh,
            applied,
            at: ev.now,
        }
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
    /// answer_reuse.rs bounds reuse in time.
    pub(super) fn version(
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

    /// Moves with every write to the source and every change of the cluster's facts; `None`
    /// when the cluster's facts cannot tell their changes, and then nothing is reused.
    pub(super) fn generation(&self) -> Option<Version> {
        Some(Version {
            store: self.source.generation(),
            cluster: self.cluster_version()?,
        })
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
