//! `Adapter`: what the API serves from. It answers a `MetricQuery` from either API through
//! the `Engine` (provider.rs; the rules in evaluation.rs) with the reuse layer around it
//! (reusing.rs), and keeps every answer served in the history; `/status` explains from the
//! same engine (explainer.rs). Nothing reaches around it to the store or the source.
//! It is assembled by `EngineBuilder` (builder.rs).

use std::sync::{Arc, Mutex};

use hpa_bridge_rules::clock::{Clock, Millis, Now};
use hpa_bridge_rules::cluster::Cluster;
use hpa_bridge_rules::config::Config;
use hpa_bridge_rules::policy::{self, Answer};
use hpa_bridge_sources::source::EvidenceSource;
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

use super::explainer::Explainer;
use super::history::{self, History};
use super::metric_query::{MetricQuery, Served};
use super::provider::{Answered, Engine, MetricsProvider, QueryError};
use super::reusing::Reusing;

pub struct Adapter {
    /// The rules over the configuration, the evidence source and the cluster's facts.
    pub(super) engine: Arc<Engine>,
    /// The same engine with answer reuse around it: what HPAs are served from.
    provider: Reusing<Arc<Engine>>,
    metrics: Arc<SelfMetrics>,
    /// The answers served to HPAs, per scope, bounded (history.rs).
    history: Arc<Mutex<History>>,
    /// `/status`, the history and the self-metrics, from the same engine and history.
    explainer: Explainer,
}

impl Adapter {
    /// An adapter answering from `source`, knowing the cluster's facts (workloads, their pods
    /// and `spec.replicas`) when it has them.
    pub(crate) fn new(
        config: Config,
        source: Arc<dyn EvidenceSource>,
        cluster: Option<Arc<dyn Cluster>>,
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
        let engine = Engine::new(config, source, cluster, clock.clone(), metrics.clone());
        let engine = Arc::new(engine);
        let history = Arc::new(Mutex::new(History::new(limits)));
        Adapter {
            provider: Reusing::new(engine.clone(), clock),
            explainer: Explainer {
                engine: engine.clone(),
                history: history.clone(),
                metrics: metrics.clone(),
                sections: Vec::new(),
            },
            engine,
            metrics,
            history,
        }
    }

    /// Show `section` in `/status`.
    pub(crate) fn with_status_section(mut self, section: super::StatusSection) -> Self {
        self.explainer.sections.push(section);
        self
    }

    /// What explains the answers served: `/status`, the history, the self-metrics.
    pub fn explainer(&self) -> &Explainer {
        &self.explainer
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

    pub fn stale_after_ms(&self) -> Millis {
        self.engine.stale_after_ms()
    }

    pub fn served_metric_names(&self) -> Vec<String> {
        self.engine.metrics()
    }

    /// The answer to one query, as the HPA asks it through either API
    /// (docs/hpa-behaviour.md §1.2, §6.5): reused while a fresh computation would give the
    /// same (reusing.rs), else computed; either way kept in the history.
    pub async fn answer(&self, query: &MetricQuery) -> Result<Arc<Served>, QueryError> {
        let answered = self.provider.answer(query).await?;
        Ok(self.served(query, answered))
    }

    /// `answer`, always computed afresh: the engine without the reuse layer. Not a setting of
    /// the adapter: the bench uses it to show the serve path's cost when the store changes
    /// between every pair of requests, which is what a large, spread-out scrape loop
    /// approaches, and the differential test compares the two.
    #[doc(hidden)]
    pub async fn answer_computed(&self, query: &MetricQuery) -> Result<Arc<Served>, QueryError> {
        let answered = self.provider.inner().answer(query).await?;
        Ok(self.served(query, answered))
    }

    /// Every answer served is kept in the history, a reused one like a computed one, so that
    /// the history holds every answer an HPA was given (two HPAs on one scope, or a sync
    /// within one scrape interval of another request, are served from reuse), with the
    /// workload's `spec.replicas` of its computation (a reuse needs the cluster's facts
    /// unchanged, so it still holds). `hpa_bridge_answers_total` counts computations only
    /// (docs/metrics.md).
    fn served(&self, query: &MetricQuery, answered: Answered) -> Arc<Served> {
        let Answered { served, at, .. } = answered;
        // The metric was found to answer it; its configured name keys the history.
        if let Ok(spec) = self.engine.spec(&query.metric) {
            let scope = query.history_scope();
            let key = (spec.name(), query.namespace.as_str(), scope.as_ref());
            self.record_answer(key, &served.answer, served.spec_replicas(), at.wall);
        }
        tracing::debug!(namespace = %query.namespace, selector = %query.selector, object = ?query.object, answer = %policy::summary(&served.answer), "served");
        served
    }

    /// Keep an answer served to an HPA in the history (`served`, for either front door);
    /// `/status` evaluations are not recorded.
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
}

#[cfg(test)]
mod tests;
