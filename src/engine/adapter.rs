//! `Adapter`: the engine's one narrow interface. It answers (metric, namespace, selector) and
//! builds the status document; nothing reaches around it to the store or the source.
//! It is assembled by `EngineBuilder` (builder.rs).

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;
use serde_json::json;

use crate::clock::{rfc3339, Clock, FreshWindow, Millis, Now};
use crate::cluster::Cluster;
use crate::config::{Config, MetricKind, MetricSpec};
use crate::policy::combine;
use crate::policy::threshold::{self, EvaluationLog, LoadState, SustainRule, ThresholdRule};
use crate::policy::valid_when::{self as gate, CurrentReplicas};
use crate::policy::{self, Answer, QueryContext, RefusalKind, ScopeText};
use crate::selector::LabelSelector;
use crate::source::scrape::{ScrapeSettings, Scraper};
use crate::source::{EvidenceSource, SourceError};
use crate::store::{
    Evidence, Scope, ScopeKey, ScrapeTarget, Store, Summarize, TargetId, WorkloadRef,
};
use crate::telemetry::{ScopeGauges, SelfMetrics, PROMETHEUS_FAMILIES};

use super::history::{self, Filter, History};

use super::status::{RowOrigin, StatusKey, StatusQuery};

use super::object_scope::{self, ObjectRef};
use super::query_key::{QueryKey, QueryParts};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QueryError {
    #[error("metric {metric:?} is not served by this adapter (served: {served})")]
    UnknownMetric { metric: String, served: String },
}

/// Evidence already read while answering one request. A target reads the floor's series for the
/// floor itself and again for the workload's current count, and a gated recommender may read
/// the current count's series twice: each (series set, scope) is fetched once and reused, which
/// also gives every rule of the request the same snapshot.
#[derive(Default)]
struct Fetched {
    /// By scope, and how it was read (`Read`): listed, or summarized past its first `after`
    /// present inputs (`Store::evidence_summarized`). A listed read also serves a later
    /// summarized one, and any read serves a workload-only one, so the same snapshot is read;
    /// a scope read summarized first and then listed (a recommender's series that another rule
    /// of the same answer sums), or summarized after two different note counts, is read twice.
    evidence: Mutex<Vec<((ScopeKey, Read), FetchResult)>>,
    /// An Object metric query: every read is scoped to this workload (object_scope.rs).
    object: Option<ObjectRef>,
    /// Explaining (`/status`), not serving: every input is noted, not only the first few.
    explain: bool,
}

/// Shared, not copied: a target answer reads the same evidence up to three times.
type FetchResult = Result<Arc<Evidence>, SourceError>;

/// How a scope's evidence was read, or is wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// Every input listed.
    Listed,
    /// Clean inputs past the first `after` present ones counted, not listed (`Summarize`).
    Summary { after: usize },
    /// Only the workloads behind the inputs are wanted: any read serves.
    Workloads,
}

impl Read {
    /// Whether evidence read as `self` answers a rule that wants `want`: a listed read answers
    /// every rule, a summary the rules that note as many inputs, and workloads any read.
    fn serves(self, want: Read) -> bool {
        match (self, want) {
            (Read::Listed, _) | (_, Read::Workloads) => true,
            (Read::Summary { after: a }, Read::Summary { after: b }) => a == b,
            _ => false,
        }
    }
}

impl Fetched {
    fn notes_kept(&self) -> usize {
        if self.explain {
            usize::MAX
        } else {
            policy::NOTES_KEPT_WHEN_SERVING
        }
    }

    fn get(&self, scope: &ScopeKey, want: Read) -> Option<FetchResult> {
        let fetched = self.evidence.lock().unwrap_or_else(|e| e.into_inner());
        fetched
            .iter()
            .find(|((k, read), _)| k == scope && read.serves(want))
            .map(|(_, r)| r.clone())
    }

    /// The clock readings over which every input read keeps the freshness it has at `now`:
    /// an answer computed at `now` reads the same within it.
    fn fresh_window(&self, now: Now, stale_after_ms: Millis) -> FreshWindow {
        let fetched = self.evidence.lock().unwrap_or_else(|e| e.into_inner());
        let mut window = FreshWindow::default();
        for ev in fetched.iter().filter_map(|(_, r)| r.as_ref().ok()) {
            for o in &ev.observations {
                window.narrow(now, o.observed_at_ms, o.scraped_mono_ms, stale_after_ms);
            }
            // A summary holds only clean, fresh, scraped series (store/family_digest.rs).
            if let Some(t) = ev.clean_tail {
                window.narrow(now, t.newest_at_ms, Some(t.oldest_mono_ms), stale_after_ms);
            }
        }
        window
    }

    /// The workload behind all the evidence read so far, when it is one.
    fn one_workload(&self) -> Option<WorkloadRef> {
        let fetched = self.evidence.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = fetched
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .flat_map(|ev| ev.workloads.iter());
        let first = all.next()?;
        all.all(|w| w == first).then(|| first.clone())
    }

    fn put(&self, key: (ScopeKey, Read), result: FetchResult) {
        let mut fetched = self.evidence.lock().unwrap_or_else(|e| e.into_inner());
        fetched.push((key, result));
    }
}

/// What a reused answer depends on besides its scope's series: every write to the store (a
/// shortcut: while none happened, nothing changed) and the cluster's facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    store: u64,
    cluster: u64,
}

impl Version {
    /// Writes to the store so far (the bench counts them).
    pub fn store_writes(self) -> u64 {
        self.store
    }
}

/// An answer, and the clock readings within which it reads the same while no input changes.
pub struct Reusable {
    pub answer: Answer,
    pub fresh: FreshWindow,
}

/// The requests seen, so `/status` can show every served workload; bounded so a scanner
/// cannot grow it without limit.
const MAX_SEEN_QUERIES: usize = 4096;

pub struct Adapter {
    config: Arc<Config>,
    /// The embedded scraper's sink; the evidence source unless another one is set.
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    metrics: Arc<SelfMetrics>,
    /// Where evidence comes from: the scrape store by default.
    source: Arc<dyn EvidenceSource>,
    ready: AtomicBool,
    /// Authorised requests only, bounded (`MAX_SEEN_QUERIES`): a seeded fast hash will do.
    seen: Mutex<HashMap<QueryKey, Millis>>,
    workloads: RwLock<Option<Arc<dyn Cluster>>>,
    /// Deployments whose floor warning was already logged: log once, show always.
    warned: Mutex<BTreeSet<(String, String)>>,
    /// Threshold evaluations per (metric, namespace, selector), for `sustain`; bounded like
    /// `seen`.
    evaluations: Mutex<BTreeMap<QueryKey, EvaluationLog>>,
    /// The answers served to HPAs, per scope, bounded (history.rs).
    history: Mutex<History>,
}

impl Adapter {
    pub(crate) fn new(config: Config, clock: Arc<dyn Clock>, metrics: Arc<SelfMetrics>) -> Self {
        let store = Arc::new(Store::new());
        store.set_targets(static_targets(&config));
        let mut limits = history::Limits::for_retention(
            config.history.retention.0.as_millis() as Millis,
            config.history.max_scopes,
        );
        if let Some(n) = config.history.entries_per_scope {
            limits.capacity = n.max(1);
        }
        let history = History::new(limits);
        Adapter {
            history: Mutex::new(history),
            config: Arc::new(config),
            source: store.clone(),
            store,
            clock,
            metrics,
            ready: AtomicBool::new(false),
            seen: Mutex::new(HashMap::new()),
            workloads: RwLock::new(None),
            warned: Mutex::new(BTreeSet::new()),
            evaluations: Mutex::new(BTreeMap::new()),
        }
    }

    /// Read evidence from another source (e.g. Prometheus) instead of the scrape store.
    pub(crate) fn with_source(mut self, source: Arc<dyn EvidenceSource>) -> Self {
        self.source = source;
        self
    }

    /// The scrape store the scrape loop and discovery fill (the wiring's handle; answers read
    /// the active source).
    pub(crate) fn scrape_store(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// The embedded scraper over the configured targets, filling `scrape_store`.
    pub(crate) fn scraper(&self, concurrency: usize) -> Scraper {
        let scrape = &self.config.scrape;
        Scraper::new(
            self.store.clone(),
            ScrapeSettings {
                timeout: scrape.timeout(),
                max_body_bytes: scrape.max_body_bytes,
                limits: scrape.limits(),
                wanted: Arc::new(self.config.wanted_series()),
                concurrency,
            },
            self.clock.clone(),
            self.metrics.clone(),
        )
    }

    pub fn scrape_interval(&self) -> std::time::Duration {
        self.config.scrape.interval.0
    }

    /// `scrape.kubernetes`, for starting discovery.
    pub fn kubernetes_discovery(&self) -> Option<&crate::config::KubernetesDiscoveryConfig> {
        self.config.scrape.kubernetes.as_ref()
    }

    /// The `scrape.static` targets, which carry no workload.
    pub fn static_targets(&self) -> Vec<ScrapeTarget> {
        static_targets(&self.config)
    }

    /// The `window` of a served value: one scrape interval, in whole seconds.
    pub fn answer_window_secs(&self) -> u64 {
        self.config.scrape.interval.0.as_secs().max(1)
    }

    pub fn now_ms(&self) -> Millis {
        self.clock.now_ms()
    }

    /// Both clocks: reuse is timed on both (`Reusable::fresh`): scraped samples age on
    /// the monotonic one, a producer's own timestamps on the wall clock.
    pub fn now(&self) -> Now {
        self.clock.now()
    }

    /// Moves with every write to the scrape store and every change of the cluster's facts;
    /// `None` when the cluster's facts cannot tell their changes, and then nothing is reused.
    pub fn generation(&self) -> Option<Version> {
        Some(Version {
            store: self.store.generation(),
            cluster: self.cluster_version()?,
        })
    }

    fn cluster_version(&self) -> Option<u64> {
        match self.workload_state() {
            None => Some(0),
            Some(cluster) => cluster.version(),
        }
    }

    /// Moves whenever anything an answer in `namespace` for `selector` could read changes,
    /// apart from the passing of time (`Reusable::fresh` covers that): the series any rule
    /// of any configured metric reads in that scope (its own, its `validWhen` gate, its
    /// `currentSeries`), the never-scraped targets, and the cluster's facts. In a live
    /// cluster the store changes hundreds of times a second, but a workload's own series far
    /// less often. `None` when no answer of `metric` may be reused: a threshold metric (or a
    /// target over one) counts one `sustain` evaluation per new sample and its windows pass
    /// with time alone. With a Prometheus source every store write counts (that source has
    /// its own cache, and the caller bounds reuse to a second).
    pub fn answer_version(
        &self,
        metric: &str,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Option<Version> {
        if self.evaluates_every_scrape(metric) {
            return None;
        }
        let cluster = self.cluster_version()?;
        let store = if self.has_prometheus_source() {
            self.store.generation()
        } else {
            self.store
                .scope_version(self.config.metrics.iter().flat_map(|spec| {
                    spec.read_series()
                        .map(move |series| metric_scope(spec, series, namespace, selector))
                }))
        };
        Some(Version { store, cluster })
    }

    /// Count one API request in the self-metrics.
    /// The self-metrics registry, for the connection gates that count refused and expired
    /// connections beside the request counters.
    pub fn self_metrics(&self) -> Arc<SelfMetrics> {
        self.metrics.clone()
    }

    pub fn record_request(&self, code: u16, metric: &str, seconds: f64) {
        self.metrics.request(code, metric, seconds);
    }

    /// The self-metrics in the Prometheus text format, gauges refreshed from the source.
    pub fn render_self_metrics(&self) -> String {
        self.refresh_gauges();
        self.metrics.render()
    }

    pub fn set_workload_state(&self, state: Arc<dyn Cluster>) {
        *self.workloads.write().unwrap_or_else(|e| e.into_inner()) = Some(state);
    }

    fn workload_state(&self) -> Option<Arc<dyn Cluster>> {
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
        self.config
            .metrics
            .iter()
            .map(|m| m.name().to_string())
            .collect()
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

    /// The label for self-metrics: a configured metric name, or `-` for anything else, so
    /// unauthenticated or mistaken requests cannot grow the label set without bound.
    pub fn metric_label<'a>(&'a self, requested: &str) -> &'a str {
        self.config
            .metric(requested)
            .map(|m| m.name())
            .unwrap_or("-")
    }

    /// The answer for one external metric query, as the HPA would ask it (docs/hpa-behaviour.md §1.2).
    pub async fn answer(
        &self,
        metric: &str,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Answer, QueryError> {
        Ok(self
            .answer_reusable(metric, namespace, selector)
            .await?
            .answer)
    }

    /// `answer`, with the clock readings within which it may be reused while its version
    /// stands: until one of its inputs crosses its staleness threshold on either clock.
    pub async fn answer_reusable(
        &self,
        metric: &str,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Reusable, QueryError> {
        // The selector's text is its canonical form (LabelSelector::as_str).
        self.serve_answer(
            metric,
            namespace,
            selector,
            Fetched::default(),
            selector.as_str(),
        )
        .await
    }

    /// One answer served to an HPA, whichever front door asked: evaluated, counted in the
    /// self-metrics and kept in the history under `scope`.
    async fn serve_answer(
        &self,
        metric: &str,
        namespace: &str,
        selector: &LabelSelector,
        fetched: Fetched,
        scope: &str,
    ) -> Result<Reusable, QueryError> {
        let spec = self
            .config
            .metric(metric)
            .ok_or_else(|| QueryError::UnknownMetric {
                metric: metric.into(),
                served: self.served_metric_names().join(", "),
            })?;
        let now = self.clock.now();
        let answer = self
            .answer_spec(spec, namespace, selector, now, &fetched)
            .await;
        self.metrics.answer(
            spec.name(),
            answer.refusal().map_or("value", RefusalKind::label),
        );
        // Taken before the history's lookup below, which may read evidence the answer did
        // not: only what the answer read bounds its reuse.
        let fresh = fetched.fresh_window(now, self.stale_after_ms());
        let applied = self
            .applied_replicas(spec, namespace, selector, now, &fetched)
            .await;
        self.record_answer((spec.name(), namespace, scope), &answer, applied, now.wall);
        Ok(Reusable { answer, fresh })
    }

    /// Keep an answer served to an HPA in the history (through `serve_answer`, for either
    /// front door); `/status` evaluations are not recorded.
    fn record_answer(
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

    /// `spec.replicas` of the one workload an answer is about, for the history: what the HPA
    /// has applied so far. The named object of an Object query; else, for a metric with a
    /// floor, the floor's workload (a recommender's pods belong to another); else the single
    /// workload behind everything the answer read. From the watch cache only, and `None`
    /// when that is not one workload or the watch does not know it.
    async fn applied_replicas(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
    ) -> Option<u64> {
        let state = self.workload_state()?;
        if let Some(object) = &fetched.object {
            return state.current_replicas(&object.workload());
        }
        if spec.floor().is_some() {
            return self
                .current_replicas_for(spec, namespace, selector, now, fetched)
                .await
                .ok();
        }
        state.current_replicas(&fetched.one_workload()?)
    }

    /// Every scrape target of the active source and its health (none for the Prometheus
    /// source).
    pub fn target_health(&self) -> Vec<(Arc<ScrapeTarget>, crate::store::TargetHealth)> {
        self.source.targets()
    }

    /// Whether evidence comes from a Prometheus source rather than the embedded scraper.
    pub fn has_prometheus_source(&self) -> bool {
        self.config
            .source
            .as_ref()
            .is_some_and(|s| s.prometheus.is_some())
    }

    /// The answer history of the scopes `filter` selects, oldest entry first.
    pub fn history(&self, filter: &Filter) -> HistoryView {
        let now = self.clock.now_ms();
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

    /// The answer for one Object metric query (custom.metrics.k8s.io): the same rules as
    /// `answer`, with every read scoped to the named workload (docs/hpa-behaviour.md §6.5).
    pub async fn answer_object(
        &self,
        metric: &str,
        object: &ObjectRef,
        selector: &LabelSelector,
    ) -> Result<Answer, QueryError> {
        let fetched = Fetched {
            object: Some(object.clone()),
            ..Fetched::default()
        };
        let scope = object_history_scope(object, selector);
        Ok(self
            .serve_answer(metric, &object.namespace, selector, fetched, &scope)
            .await?
            .answer)
    }

    async fn answer_spec(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
    ) -> Answer {
        match spec.kind() {
            MetricKind::Target => {
                self.target_answer(spec, namespace, selector, now, fetched)
                    .await
            }
            _ => {
                let notes = fetched.notes_kept();
                self.input_answer(spec, namespace, selector, now, fetched, notes)
                    .await
            }
        }
    }

    /// A metric that is not a target, on its own or as a target's input. Config validation
    /// keeps targets out of a target's inputs (config/metric.rs), which is what lets a target
    /// answer without boxing a future per input; a target here is still answered, boxed.
    async fn input_answer(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
        notes_kept: usize,
    ) -> Answer {
        let q = self.query_context(spec, spec.series(), namespace, selector, now, notes_kept);
        let scope = metric_scope(spec, spec.series(), namespace, selector);
        match spec.kind() {
            MetricKind::Target => {
                Box::pin(self.target_answer(spec, namespace, selector, now, fetched)).await
            }
            MetricKind::Recommendation => {
                // A summary drops the labels that carry the epochs fencing reads.
                let ev = match spec.epoch_label() {
                    Some(_) => self.evidence(fetched, &scope, now).await,
                    None => {
                        self.summarized_evidence(fetched, &scope, now, q.notes_kept)
                            .await
                    }
                };
                match ev {
                    Ok(ev) => {
                        let answer = policy::recommendation(&q, &ev, spec.epoch_label());
                        self.gated(
                            spec,
                            answer,
                            namespace,
                            selector,
                            now,
                            fetched,
                            &ev.workloads,
                            None,
                        )
                        .await
                    }
                    Err(e) => policy::source_unavailable(spec.name(), spec.kind(), &e.to_string()),
                }
            }
            MetricKind::Threshold => {
                self.threshold_answer(spec, &q, &scope, namespace, selector, now, fetched)
                    .await
            }
            MetricKind::StatefulFloor => {
                let ev = match self
                    .summarized_evidence(fetched, &scope, now, q.notes_kept)
                    .await
                {
                    Ok(ev) => ev,
                    Err(e) => {
                        return policy::source_unavailable(spec.name(), spec.kind(), &e.to_string())
                    }
                };
                let state = self.workload_state();
                let (ordinals_start, warnings) = match (&state, &*ev.workloads) {
                    (Some(state), [w]) => (state.ordinals_start(w), floor_warnings(w)),
                    _ => (0, Vec::new()),
                };
                let mut answer = policy::stateful_floor(&q, &ev, ordinals_start);
                if let ([w], Some(first)) = (&*ev.workloads, warnings.first()) {
                    self.warn_once(w, first);
                }
                answer.warnings = warnings;
                answer
            }
        }
    }

    /// A target: the max of its recommendation (and combined inputs), and its floor.
    async fn target_answer(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
    ) -> Answer {
        let q = self.query_context(
            spec,
            spec.series(),
            namespace,
            selector,
            now,
            fetched.notes_kept(),
        );
        let no_recommendation = |why: &str| {
            policy::target(
                spec.name(),
                policy::recommendation(&q, &Default::default(), None),
                None,
                Err(why),
            )
        };
        let MetricSpec::Target(t) = spec else {
            return no_recommendation("not a target");
        };
        // `recommendation` and `combine` are all inputs of one max.
        let mut inputs: Vec<&MetricSpec> = Vec::new();
        for name in t.recommendation.iter().chain(t.combine.iter()) {
            if let Some(s) = self.config.metric(name) {
                if !inputs.iter().any(|i| i.name() == s.name()) {
                    inputs.push(s);
                }
            }
        }
        let floor_spec = t.floor.as_deref().and_then(|n| self.config.metric(n));
        let Some(&rec_spec) = inputs.first() else {
            // Config validation guarantees a recommendation; refuse rather than panic.
            return no_recommendation("no recommendation configured");
        };
        let rec = if inputs.len() == 1 {
            self.input_answer(rec_spec, namespace, selector, now, fetched, q.notes_kept)
                .await
        } else {
            let mut parts = Vec::with_capacity(inputs.len());
            for input in &inputs {
                parts.push(
                    self.input_answer(input, namespace, selector, now, fetched, q.notes_kept)
                        .await,
                );
            }
            let names: Vec<&str> = inputs.iter().map(|i| i.name()).collect();
            let current = if parts.iter().all(|p| p.value().is_some()) {
                // Not needed: nothing blocks a decrease.
                Err("not needed".to_string())
            } else {
                self.current_for_target(spec, &inputs, namespace, selector, now, fetched)
                    .await
            };
            combine::combine(
                &combine::combined_name(&names),
                MetricKind::Recommendation,
                parts,
                current.as_ref().map_err(String::as_str),
            )
        };
        let floor = match floor_spec {
            Some(f) => {
                // The history keeps a served answer's first notes, in the order of its parts
                // (engine/history.rs, `first_inputs`): the floor's come after the
                // recommendation's, so it notes only as many as are left. Its value, reason and
                // counts do not depend on how many it notes (policy/clean_tail_tests.rs), and
                // past the noted ones the store may count its pods instead of listing them.
                let notes = q.notes_kept.saturating_sub(policy::notes_in(&rec));
                Some(
                    self.input_answer(f, namespace, selector, now, fetched, notes)
                        .await,
                )
            }
            None => None,
        };
        let current = self
            .current_replicas_for(spec, namespace, selector, now, fetched)
            .await;
        policy::target(
            spec.name(),
            rec,
            floor,
            current.as_ref().copied().map_err(String::as_str),
        )
    }

    /// A threshold metric: the load total, the current count, the evaluation history, then the
    /// validity gate.
    #[allow(clippy::too_many_arguments)]
    async fn threshold_answer(
        &self,
        spec: &MetricSpec,
        q: &QueryContext<'_>,
        scope: &Scope<'_>,
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
    ) -> Answer {
        let ev = match self.evidence(fetched, scope, now).await {
            Ok(ev) => ev,
            Err(e) => return policy::source_unavailable(spec.name(), spec.kind(), &e.to_string()),
        };
        let rule = threshold_rule(spec);
        let load = threshold::load_total(q, &ev);
        let (mut current, current_inputs) = self
            .current_replicas(spec, namespace, selector, now, fetched, &ev.workloads)
            .await;
        // Counting live targets stands in for the replica count only when every target's load
        // is known: with partial data the count leaves out exactly the unknown pods, and holding
        // at it would shrink the workload on unknown input.
        if current.is_err()
            && spec.current_series().is_none()
            && matches!(load.state, threshold::LoadState::Known(_))
        {
            current = threshold::current_from_live_targets(&load);
        }
        let answer = if rule.sustained() {
            let key = QueryKey {
                metric: spec.name().to_string(),
                namespace: namespace.into(),
                selector: selector.to_string(),
                // An Object query's history is its workload's, apart from any External query's.
                object: fetched.object.clone(),
            };
            let mut logs = self.evaluations.lock().unwrap_or_else(|e| e.into_inner());
            if logs.len() >= MAX_SEEN_QUERIES && !logs.contains_key(&key) {
                if let Some(oldest) = logs
                    .iter()
                    .min_by_key(|(_, l)| l.last_at())
                    .map(|(k, _)| k.clone())
                {
                    logs.remove(&oldest);
                }
            }
            let log = logs.entry(key).or_default();
            // Only a known total is an evaluation of the sustain condition. Sustain windows are
            // durations, timed on the monotonic clock: a step of the wall clock neither fills
            // nor empties them.
            if let LoadState::Known(v) = load.state {
                log.record(now.mono, load.newest_ms, v, rule.retain_ms());
            }
            let history = log.history(now.mono);
            threshold::threshold(
                q,
                &rule,
                load,
                current.clone(),
                current_inputs,
                Some(&history),
            )
        } else {
            threshold::threshold(q, &rule, load, current.clone(), current_inputs, None)
        };
        self.gated(
            spec,
            answer,
            namespace,
            selector,
            now,
            fetched,
            &ev.workloads,
            Some(current),
        )
        .await
    }

    /// Apply the metric's `validWhen` gate, read from the same scope (namespace + selector).
    #[allow(clippy::too_many_arguments)]
    async fn gated(
        &self,
        spec: &MetricSpec,
        answer: Answer,
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
        workloads: &[WorkloadRef],
        current: Option<Result<CurrentReplicas, String>>,
    ) -> Answer {
        let Some(valid_when) = spec.valid_when() else {
            return answer;
        };
        let series = vec![valid_when.series.clone()];
        let q = self.query_context(
            spec,
            &series,
            namespace,
            selector,
            now,
            fetched.notes_kept(),
        );
        let scope = metric_scope(spec, &series, namespace, selector);
        let check = match self.evidence(fetched, &scope, now).await {
            Ok(ev) => gate::check_gate(valid_when, &q, &ev),
            Err(e) => gate::GateCheck {
                open: false,
                reason: format!("validWhen {} is unknown: {e}", valid_when.series),
                inputs: Default::default(),
            },
        };
        if check.open {
            return gate::apply_gate(answer, spec.kind(), check, Err("not needed"));
        }
        let current = match current {
            Some(c) => c,
            None => {
                self.current_replicas(spec, namespace, selector, now, fetched, workloads)
                    .await
                    .0
            }
        };
        gate::apply_gate(
            answer,
            spec.kind(),
            check,
            current.as_ref().map_err(String::as_str),
        )
    }

    /// The current replica count for a recommender: `spec.replicas` from Kubernetes when the
    /// evidence belongs to one known workload, else the configured `currentSeries`.
    async fn current_replicas(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
        workloads: &[WorkloadRef],
    ) -> (Result<CurrentReplicas, String>, policy::InputNotes) {
        if let (Some(state), [w]) = (self.workload_state(), workloads) {
            if let Some(v) = state.current_replicas(w) {
                return (
                    Ok(CurrentReplicas {
                        value: v,
                        source: format!("spec.replicas of {} {}/{}", w.kind, w.namespace, w.name),
                    }),
                    policy::InputNotes::default(),
                );
            }
            if spec.current_series().is_none() {
                // Never a guess: the workload is known from its pods but not (yet) in the
                // watch cache, so its current count is unknown.
                return (Err(not_in_watch_cache(w)), policy::InputNotes::default());
            }
        }
        let Some(current_series) = spec.current_series() else {
            return (
                Err(format!(
                    "{}: no Kubernetes workload state and no currentSeries configured",
                    spec.name()
                )),
                policy::InputNotes::default(),
            );
        };
        let series = vec![current_series.to_string()];
        let q = self.query_context(
            spec,
            &series,
            namespace,
            selector,
            now,
            fetched.notes_kept(),
        );
        let scope = metric_scope(spec, &series, namespace, selector);
        match self.evidence(fetched, &scope, now).await {
            Ok(ev) => gate::current_from_series(&q, &ev),
            Err(e) => (Err(e.to_string()), policy::InputNotes::default()),
        }
    }

    /// The current count for a target whose combined inputs disagree in validity: from the
    /// floor's workload, else from any input that knows it.
    async fn current_for_target(
        &self,
        spec: &MetricSpec,
        inputs: &[&MetricSpec],
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
    ) -> Result<CurrentReplicas, String> {
        if let Ok(v) = self
            .current_replicas_for(spec, namespace, selector, now, fetched)
            .await
        {
            return Ok(CurrentReplicas {
                value: v,
                source: "spec.replicas of the floor's workload".into(),
            });
        }
        let mut why = Vec::new();
        for input in inputs {
            let scope = metric_scope(input, input.series(), namespace, selector);
            let workloads = match self.workload_evidence(fetched, &scope, now).await {
                Ok(ev) => ev.workloads.clone(),
                Err(_) => Arc::from([]),
            };
            match self
                .current_replicas(input, namespace, selector, now, fetched, &workloads)
                .await
                .0
            {
                Ok(c) => return Ok(c),
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }

    /// `spec.replicas` of the single workload behind the floor's pods, if discovery knows it;
    /// otherwise why not, for the refusal.
    async fn current_replicas_for(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
        now: Now,
        fetched: &Fetched,
    ) -> Result<u64, String> {
        let state = self
            .workload_state()
            .ok_or("no Kubernetes workload state (discovery is off)")?;
        let floor = spec
            .floor()
            .and_then(|f| self.config.metric(f))
            .ok_or("no floor configured")?;
        let scope = metric_scope(floor, floor.series(), namespace, selector);
        // Only the workloads are read: the floor rule's own read serves.
        let ev = self
            .workload_evidence(fetched, &scope, now)
            .await
            .map_err(|e| e.to_string())?;
        match &*ev.workloads {
            [w] => state
                .current_replicas(w)
                .ok_or_else(|| not_in_watch_cache(w)),
            [] => Err("the floor's pods belong to no known workload".into()),
            more => Err(format!(
                "the floor's pods belong to {} workloads, not one",
                more.len()
            )),
        }
    }

    /// What a rule of `spec` is asked, over `series`, for its messages and its reading of
    /// time.
    fn query_context<'a>(
        &self,
        spec: &'a MetricSpec,
        series: &'a [String],
        namespace: &'a str,
        selector: &'a LabelSelector,
        now: Now,
        notes_kept: usize,
    ) -> QueryContext<'a> {
        QueryContext {
            metric: spec.name(),
            series,
            scope: ScopeText::Parts(spec.namespace_label(), namespace, selector.as_str()),
            now,
            stale_after_ms: self.stale_after_ms(),
            notes_kept,
        }
    }

    /// Evidence for `scope`, read from the source once per request (see `Fetched`).
    async fn evidence(&self, fetched: &Fetched, scope: &Scope<'_>, now: Now) -> FetchResult {
        self.evidence_read(fetched, scope, now, Read::Listed).await
    }

    /// As `evidence`, for the rules that treat every fresh, valid input alike past the
    /// `notes_kept` they note in full (the recommendation and the floor): while serving, the
    /// store may count such inputs instead of listing them (store/family_digest.rs).
    async fn summarized_evidence(
        &self,
        fetched: &Fetched,
        scope: &Scope<'_>,
        now: Now,
        notes_kept: usize,
    ) -> FetchResult {
        let want = match fetched.explain {
            true => Read::Listed,
            false => Read::Summary { after: notes_kept },
        };
        self.evidence_read(fetched, scope, now, want).await
    }

    /// Evidence for the workloads behind `scope` only: whatever read of it the request made
    /// serves (a summary lists every target's workload).
    async fn workload_evidence(
        &self,
        fetched: &Fetched,
        scope: &Scope<'_>,
        now: Now,
    ) -> FetchResult {
        self.evidence_read(fetched, scope, now, Read::Workloads)
            .await
    }

    async fn evidence_read(
        &self,
        fetched: &Fetched,
        scope: &Scope<'_>,
        now: Now,
        want: Read,
    ) -> FetchResult {
        let key = scope.key();
        if let Some(hit) = fetched.get(&key, want) {
            return hit;
        }
        let read = match want {
            Read::Workloads if fetched.explain => Read::Listed,
            Read::Workloads => Read::Summary {
                after: fetched.notes_kept(),
            },
            read => read,
        };
        let result = self
            .read(fetched, scope, &key, now, read)
            .await
            .map(Arc::new);
        fetched.put((key, read), result.clone());
        result
    }

    /// Evidence for `scope` from the source, scoped to the workload for an Object query.
    async fn read(
        &self,
        fetched: &Fetched,
        scope: &Scope<'_>,
        key: &ScopeKey,
        now: Now,
        read: Read,
    ) -> Result<Evidence, SourceError> {
        match (&fetched.object, read) {
            (None, Read::Summary { after }) => {
                let s = Summarize {
                    after,
                    now,
                    stale_after_ms: self.stale_after_ms(),
                };
                self.source
                    .evidence_summarized(scope, key, now.wall, s)
                    .await
            }
            (None, _) => self.source.evidence(scope, now.wall).await,
            (Some(object), _) => {
                let cluster = self.workload_state();
                object_scope::evidence(
                    &*self.source,
                    cluster.as_deref(),
                    &self.config.object_metrics.workload_labels,
                    object,
                    scope,
                    now.wall,
                )
                .await
            }
        }
    }

    fn warn_once(&self, w: &WorkloadRef, warning: &str) {
        let key = (w.namespace.clone(), w.name.clone());
        if self
            .warned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key)
        {
            tracing::warn!(kind = %w.kind, namespace = %w.namespace, name = %w.name, "{warning}");
        }
    }

    /// Remember a served External query for `/status`.
    pub fn record_query(&self, metric: &str, namespace: &str, selector: &LabelSelector) {
        let metric = lowercase(metric);
        self.remember_query(&(&*metric, namespace, selector.as_str(), None));
    }

    /// Remember a served Object query for `/status`: its row names the workload.
    pub fn record_object_query(&self, metric: &str, object: &ObjectRef, selector: &LabelSelector) {
        let metric = lowercase(metric);
        self.remember_query(&(
            &*metric,
            object.namespace.as_str(),
            selector.as_str(),
            Some(object),
        ));
    }

    fn remember_query(&self, parts: &dyn QueryParts) {
        let now = self.clock.now_ms();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = seen.get_mut(parts) {
            *at = now;
            return;
        }
        if seen.len() >= MAX_SEEN_QUERIES {
            // Ties go to the smallest key, whatever the map's order.
            if let Some(oldest) = seen
                .iter()
                .min_by_key(|(k, at)| (**at, *k))
                .map(|(k, _)| k.clone())
            {
                seen.remove(&oldest);
            }
        }
        seen.insert(QueryKey::of(parts), now);
    }

    /// Refresh gauges that are derived from the store.
    pub fn refresh_gauges(&self) {
        let held = self
            .source
            .inventory(self.clock.now(), self.stale_after_ms());
        let m = &self.metrics;
        m.set_gauge("series", &m.series, held.series);
        m.set_gauge("stale_series", &m.stale_series, held.stale_series);
        m.set_gauge("targets", &m.targets, held.targets);
        m.ready.set(i64::from(self.is_ready()));
        // Without a Prometheus source its families would only ever say 0 (issue 16).
        m.set_absent(&PROMETHEUS_FAMILIES, !self.has_prometheus_source());
        let (states, tracked, dropped) = {
            let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
            (h.states(), h.len(), h.dropped_scopes())
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

    /// The `/status` document: the workloads seen in requests or found in the data, each with
    /// its current answer and inputs, and every target with its health. Enough to answer "why
    /// did the HPA get 7?" without anything else. `query` filters and pages the workloads;
    /// only the rows on the page are evaluated.
    pub async fn status(&self, query: &StatusQuery) -> serde_json::Value {
        let now = self.clock.now();
        let mut rows: BTreeMap<StatusKey, RowOrigin> = BTreeMap::new();
        for (namespace, selector) in self.discovered_label_sets() {
            for spec in &self.config.metrics {
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
        for (key, at) in self.seen.lock().unwrap_or_else(|e| e.into_inner()).iter() {
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
                self.config.metric(&key.metric),
                LabelSelector::parse(&key.selector),
            ) else {
                continue;
            };
            // Not `answer()`: looking at /status must not count as serving an answer. An Object
            // row is evaluated through the Object front door's scope, the workload it names.
            let fetched = Fetched {
                object: key.object.clone(),
                explain: true,
                ..Fetched::default()
            };
            let answer = self
                .answer_spec(spec, &key.namespace, &selector, now, &fetched)
                .await;
            let (source, last_requested) = match origin {
                RowOrigin::Request { at_ms } => ("request", Some(rfc3339(*at_ms))),
                RowOrigin::Discovered => ("discovered", None),
            };
            workloads.push(WorkloadStatus {
                namespace: key.namespace.clone(),
                scope: match &key.object {
                    None => key.selector.clone(),
                    Some(o) => object_history_scope(o, &selector),
                },
                object: key.object.as_ref().map(ObjectRow::from),
                selector: key.selector.clone(),
                metric: key.metric.clone(),
                source,
                last_requested,
                answer,
            });
        }
        let targets: Vec<serde_json::Value> = self
            .source
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
                    "url": crate::redaction::redact_url(&t.url),
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
        json!({
            "metadata": metadata,
            "now": rfc3339(now.wall),
            "ready": self.is_ready(),
            "scrape": {
                "interval": self.config.scrape.interval.to_string(),
                "timeout": crate::config::HumanDuration(self.config.scrape.timeout()).to_string(),
                "staleAfterSeconds": self.stale_after_ms() as f64 / 1000.0,
            },
            "workloads": workloads,
            "targets": targets,
            "source": self.source.status(),
        })
    }

    /// (namespace, selector) pairs found in the recommendation series, using the label that
    /// names the workload (docs/hpa-behaviour.md §4.1: `hpa_target_name`).
    fn discovered_label_sets(&self) -> BTreeSet<(String, String)> {
        let mut sets = BTreeSet::new();
        let everything = LabelSelector::everything();
        for spec in self
            .config
            .metrics
            .iter()
            .filter(|m| m.kind() == MetricKind::Recommendation)
        {
            let namespaces = self
                .store
                .label_values(spec.series(), spec.namespace_label());
            for ns in namespaces {
                let ev =
                    self.store
                        .evidence_once(&metric_scope(spec, spec.series(), &ns, &everything));
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

/// Why a workload known from its pods has no current count: never a guess (issue 14).
/// The scope of `spec`'s `series` (its own, or one it is gated or counted by) in `namespace`
/// under `selector`: every read of a metric's evidence is scoped this way.
fn metric_scope<'a>(
    spec: &'a MetricSpec,
    series: &'a [String],
    namespace: &'a str,
    selector: &'a LabelSelector,
) -> Scope<'a> {
    Scope {
        series,
        namespace_label: spec.namespace_label(),
        namespace,
        selector,
    }
}

fn not_in_watch_cache(w: &WorkloadRef) -> String {
    format!(
        "spec.replicas of {} {}/{} is not known yet: the workload is not in the watch cache",
        w.kind, w.namespace, w.name
    )
}

/// The history scope of an Object query: `statefulsets.apps/lobby`, narrowed by its
/// `metricLabelSelector` when one was given.
fn object_history_scope(object: &ObjectRef, selector: &LabelSelector) -> String {
    let base = format!("{}/{}", object.kind.resource(), object.name);
    if selector.requirements().is_empty() {
        base
    } else {
        format!("{base} {selector}")
    }
}

/// `text` in lower case, copied only when it has upper-case letters (metric names in a path
/// are matched without regard to case, and are nearly always lower case already).
fn lowercase(text: &str) -> std::borrow::Cow<'_, str> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        text.to_ascii_lowercase().into()
    } else {
        text.into()
    }
}

/// The identity of a `scrape.static` target: its URL as it may be shown.
pub fn static_target_id(url: &str) -> TargetId {
    TargetId(crate::redaction::redact_url(url).as_ref().into())
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
            ScrapeTarget {
                id,
                url: t.url.clone(),
                labels: t.labels.clone(),
                workload: None,
            }
        })
        .collect()
}

/// The threshold rule's parameters, from the metric's configuration.
fn threshold_rule(spec: &MetricSpec) -> ThresholdRule {
    let MetricSpec::Threshold(spec) = spec else {
        // Only threshold metrics reach here; a neutral rule avoids a panic path.
        return ThresholdRule {
            up_per_replica: 1.0,
            down_per_replica: 1.0,
            sustain: None,
            max_step: None,
            min: threshold::DEFAULT_MIN,
            max: None,
        };
    };
    let up = spec.up_per_replica;
    ThresholdRule {
        up_per_replica: up,
        down_per_replica: spec.down_per_replica.unwrap_or(up),
        sustain: spec.sustain.as_ref().map(|s| SustainRule {
            up_ms: s.up.map(|d| d.0.as_millis() as Millis),
            down_ms: s.down.map(|d| d.0.as_millis() as Millis),
            fraction: s.fraction,
        }),
        max_step: spec.max_step.map(u64::from),
        min: spec.min.map(u64::from).unwrap_or(threshold::DEFAULT_MIN),
        max: spec.max.map(u64::from),
    }
}

fn floor_warnings(w: &WorkloadRef) -> Vec<String> {
    if w.kind == "Deployment" {
        vec![format!(
            "the floor is served for Deployment {}/{}, which promises no deletion order: it gives no protection (docs/hpa-behaviour.md §4.1)",
            w.namespace, w.name
        )]
    } else {
        Vec::new()
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
        seq.serialize_element(&json!({
            "metric": h.key.metric,
            "namespace": h.key.namespace,
            "scope": h.key.scope,
            "workload": h.key.workload(),
            "reason": h.last_reason,
            "inputs": h.last_inputs,
            "inputsTotal": h.last_inputs_total,
            "entries": h.entries,
        }))?;
    }
    seq.end()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadStatus {
    namespace: String,
    /// What the answer covers, named as in the history: the selector of an External query,
    /// `statefulsets.apps/lobby` (plus any `metricLabelSelector`) for an Object query.
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

#[cfg(test)]
mod tests;
