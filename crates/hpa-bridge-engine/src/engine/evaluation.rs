//! How one request is evaluated: the rules of the metric asked (and of its inputs, gate,
//! floor and current count) run over evidence read once per request, in one reading of the
//! clocks. Serving and explaining (`/status`) evaluate alike; only how many inputs are noted
//! differs. Reads go through the engine's `EvidenceSource` alone (`Read`), so the rules are
//! the same whichever source holds the samples.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use hpa_bridge_rules::clock::{FreshWindow, Millis, Now};
use hpa_bridge_rules::cluster::{Cluster, PodSet, WorkloadKind};
use hpa_bridge_rules::config::{Config, MetricKind, MetricSpec, WorkloadLabels};
use hpa_bridge_rules::evidence::{Evidence, Read, Scope, ScopeKey, Summarize};
use hpa_bridge_rules::policy::combine;
use hpa_bridge_rules::policy::threshold::{
    self, EvaluationLog, LoadState, SustainRule, ThresholdRule,
};
use hpa_bridge_rules::policy::valid_when::{self as gate, CurrentReplicas};
use hpa_bridge_rules::policy::{self, Answer, QueryContext, ScopeText};
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_sources::source::{EvidenceSource, SourceError};
use hpa_bridge_store::store::WorkloadRef;

use super::object_scope::{self, ObjectRef};
use super::object_selectors::{ObjectSelectorCache, ObjectSelectors};
use super::query_key::QueryKey;

/// One request's evaluation: what it asks (namespace, selector, the workload of an Object
/// query), when (one reading of both clocks for every rule), and the evidence already read.
/// A target reads the floor's series for the floor itself and again for the workload's
/// current count, and a gated recommender may read the current count's series twice: each
/// (series set, scope) is fetched once and reused, which also gives every rule of the request
/// the same snapshot.
pub(super) struct Evaluation<'a> {
    config: &'a Config,
    /// Where every read goes: the rules never name a store.
    source: &'a dyn EvidenceSource,
    /// The cluster's facts; `None` without Kubernetes.
    cluster: Option<&'a Arc<dyn Cluster>>,
    memory: &'a RuleMemory,
    pub(super) namespace: &'a str,
    pub(super) selector: &'a LabelSelector,
    pub(super) now: Now,
    /// An Object metric query: every read is scoped to this workload (object_scope.rs).
    pub(super) object: Option<&'a ObjectRef>,
    /// Explaining (`/status`), not serving: every input is noted, not only the first few.
    pub(super) explain: bool,
    /// By scope, and how it was read: every input listed (`None`), or clean inputs past the
    /// first `after` present ones counted, not listed (`Some(after)`, `Read::Summarized`). A
    /// listed read also serves a later summarized one, and any read serves a workload-only
    /// one, so the same snapshot is read; a scope read summarized first and then listed (a
    /// recommender's series that another rule of the same answer sums), or summarized after
    /// two different note counts, is read twice.
    pub(super) fetched: Mutex<Vec<Fetched>>,
}

/// One read of this request: its scope, every input listed (`None`) or summarized past
/// `Some(after)`, and what it gave.
pub(super) struct Fetched {
    scope: ScopeKey,
    after: Option<usize>,
    pub(super) result: FetchResult,
}

/// What the rules keep between requests.
#[derive(Default)]
pub(super) struct RuleMemory {
    /// Threshold evaluations per query, for `sustain`; bounded (`MAX_SUSTAIN_LOGS`).
    sustain: Mutex<BTreeMap<QueryKey, EvaluationLog>>,
    /// Deployments whose floor warning was already logged: log once, show always.
    warned: Mutex<BTreeSet<(String, String)>>,
    /// Object queries' label selectors, per workload (object_selectors.rs).
    object_selectors: ObjectSelectorCache,
}

/// The queries whose threshold evaluations are kept for `sustain`; bounded so that a scanner
/// cannot grow them without limit (the least recently evaluated out first).
const MAX_SUSTAIN_LOGS: usize = 4096;

impl RuleMemory {
    /// Log `warning` about `w` the first time only.
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
}

/// Shared, not copied: a target answer reads the same evidence up to three times.
pub(super) type FetchResult = Result<Arc<Evidence>, SourceError>;

impl<'a> Evaluation<'a> {
    pub(super) fn new(
        (config, source, cluster): (
            &'a Config,
            &'a dyn EvidenceSource,
            Option<&'a Arc<dyn Cluster>>,
        ),
        memory: &'a RuleMemory,
        namespace: &'a str,
        selector: &'a LabelSelector,
        now: Now,
        object: Option<&'a ObjectRef>,
        explain: bool,
    ) -> Evaluation<'a> {
        Evaluation {
            config,
            source,
            cluster,
            memory,
            namespace,
            selector,
            now,
            object,
            explain,
            fetched: Mutex::default(),
        }
    }

    /// The scope of `spec`'s `series` (its own, or one it is gated or counted by) in this
    /// request's namespace under its selector: every read of a metric's evidence is scoped
    /// this way.
    pub(super) fn scope<'s>(&'s self, spec: &'s MetricSpec, series: &'s [String]) -> Scope<'s> {
        metric_scope(spec, series, self.namespace, self.selector)
    }

    pub(super) fn notes_kept(&self) -> usize {
        if self.explain {
            usize::MAX
        } else {
            policy::NOTES_KEPT_WHEN_SERVING
        }
    }

    /// This request's read of `scope` that lists every input (`after` is `None`), or counts
    /// past the first `after`; with `any`, whichever read of `scope` there was.
    pub(super) fn get(
        &self,
        scope: &ScopeKey,
        after: Option<usize>,
        any: bool,
    ) -> Option<FetchResult> {
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        fetched
            .iter()
            .find(|f| &f.scope == scope && (any || f.after.is_none() || f.after == after))
            .map(|f| f.result.clone())
    }

    /// The clock readings over which every input read keeps the freshness it has now: an
    /// answer computed now reads the same within it.
    pub(super) fn fresh_window(&self, stale_after_ms: Millis) -> FreshWindow {
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        let mut window = FreshWindow::default();
        for ev in fetched.iter().filter_map(|f| f.result.as_ref().ok()) {
            for o in &ev.observations {
                window.narrow(
                    self.now,
                    o.observed_at_ms,
                    o.scraped_mono_ms,
                    stale_after_ms,
                );
                if let Some(until) = o.valid_until_ms {
                    window.narrow_until(self.now, until);
                }
            }
            // A summary holds only clean, fresh, scraped series (store/family_digest.rs).
            if let Some(t) = ev.clean_tail {
                window.narrow(
                    self.now,
                    t.newest_at_ms,
                    Some(t.oldest_mono_ms),
                    stale_after_ms,
                );
            }
        }
        window
    }

    /// The workload behind all the evidence read so far, when it is one.
    pub(super) fn one_workload(&self) -> Option<WorkloadRef> {
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = fetched
            .iter()
            .filter_map(|f| f.result.as_ref().ok())
            .flat_map(|ev| ev.workloads.iter());
        let first = all.next()?;
        all.all(|w| w == first).then(|| first.clone())
    }

    pub(super) fn put(&self, scope: ScopeKey, after: Option<usize>, result: FetchResult) {
        let mut fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        fetched.push(Fetched {
            scope,
            after,
            result,
        });
    }

    fn stale_after_ms(&self) -> Millis {
        self.config.scrape.stale_after().as_millis() as Millis
    }

    /// `spec.replicas` of the one workload an answer is about, for the history: what the HPA
    /// has applied so far. The named object of an Object query; else, for a metric with a
    /// floor, the floor's workload (a recommender's pods belong to another); else the single
    /// workload behind everything the answer read. From the watch cache only, and `None`
    /// when that is not one workload or the watch does not know it.
    pub(super) async fn applied_replicas(&self, spec: &MetricSpec) -> Option<u64> {
        let state = self.cluster.cloned()?;
        if let Some(object) = self.object {
            return state.current_replicas(&object.workload());
        }
        if spec.floor().is_some() {
            return self.current_replicas_for(spec).await.ok();
        }
        state.current_replicas(&self.one_workload()?)
    }

    pub(super) async fn answer(&self, spec: &MetricSpec) -> Answer {
        match spec.kind() {
            MetricKind::Target => self.target_answer(spec).await,
            _ => {
                let notes = self.notes_kept();
                self.input_answer(spec, notes).await
            }
        }
    }

    /// A metric that is not a target, on its own or as a target's input. Config validation
    /// keeps targets out of a target's inputs (config/metric.rs), which is what lets a target
    /// answer without boxing a future per input; a target here is still answered, boxed.
    pub(super) async fn input_answer(&self, spec: &MetricSpec, notes_kept: usize) -> Answer {
        let q = self.query_context(spec, spec.series(), notes_kept);
        let scope = self.scope(spec, spec.series());
        match spec.kind() {
            MetricKind::Target => Box::pin(self.target_answer(spec)).await,
            MetricKind::Recommendation => {
                // A summary drops the labels that carry the epochs fencing reads.
                let read = match spec.epoch_label() {
                    Some(_) => self.evidence(&scope).await,
                    None => self.summarized_evidence(&scope, q.notes_kept).await,
                };
                match read {
                    Ok(evidence) => {
                        let answer = policy::fenced_recommendation(&q, &evidence, spec.fence());
                        self.gated(spec, answer, &evidence.workloads, None).await
                    }
                    Err(e) => policy::source_unavailable(spec.name(), spec.kind(), &e.to_string()),
                }
            }
            MetricKind::Threshold => self.threshold_answer(spec, &q, &scope).await,
            MetricKind::StatefulFloor => {
                let evidence = match self.summarized_evidence(&scope, q.notes_kept).await {
                    Ok(evidence) => evidence,
                    Err(e) => {
                        return policy::source_unavailable(spec.name(), spec.kind(), &e.to_string())
                    }
                };
                let state = self.cluster.cloned();
                if let Some(state) = &state {
                    let ws = &*evidence.workloads;
                    if let Some(rs) = ws.iter().find(|w| state.owner_unresolved(w)) {
                        return policy::unresolved_owner_floor(&q, rs);
                    }
                    let opted = ws.iter().find(|w| state.deletion_cost_opt_in(w));
                    if let (Some(w), true) = (opted, ws.len() > 1) {
                        // The count of holding pods covers one Deployment's pods; the highest
                        // index of a mix protects nothing of it.
                        return policy::mixed_workloads_floor(&q, w, ws);
                    }
                }
                if let (Some(state), [w]) = (&state, &*evidence.workloads) {
                    if state.deletion_cost_opt_in(w) {
                        // Each pod is weighed on its own: a summary would count them.
                        let listed = match self.evidence(&scope).await {
                            Ok(listed) => listed,
                            Err(e) => {
                                return policy::source_unavailable(
                                    spec.name(),
                                    spec.kind(),
                                    &e.to_string(),
                                )
                            }
                        };
                        // A failing watch's mirror shows a past state: neither the pods nor
                        // the ReplicaSets are trusted then.
                        let current = state.facts_current();
                        let pods = current.then(|| state.workload_pods(w)).flatten();
                        let replica_sets = current.then(|| state.replica_sets(w)).flatten();
                        return policy::deployment_floor(
                            &q,
                            &listed,
                            w,
                            pods.as_deref(),
                            replica_sets.as_deref(),
                        );
                    }
                }
                let (ordinals_start, warnings) = match (&state, &*evidence.workloads) {
                    (Some(state), [w]) => (state.ordinals_start(w), floor_warnings(w)),
                    _ => (0, Vec::new()),
                };
                let mut answer = policy::stateful_floor(&q, &evidence, ordinals_start);
                if let ([w], Some(first)) = (&*evidence.workloads, warnings.first()) {
                    self.memory.warn_once(w, first);
                }
                answer.warnings = warnings;
                answer
            }
        }
    }

    /// A target: the max of its recommendation (and combined inputs), and its floor.
    pub(super) async fn target_answer(&self, spec: &MetricSpec) -> Answer {
        let q = self.query_context(spec, spec.series(), self.notes_kept());
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
            self.input_answer(rec_spec, q.notes_kept).await
        } else {
            let mut parts = Vec::with_capacity(inputs.len());
            for input in &inputs {
                parts.push(self.input_answer(input, q.notes_kept).await);
            }
            let names: Vec<&str> = inputs.iter().map(|i| i.name()).collect();
            let current = if parts.iter().all(|p| p.value().is_some()) {
                // Not needed: nothing blocks a decrease.
                Err("not needed".to_string())
            } else {
                self.current_for_target(spec, &inputs).await
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
                // counts do not depend on how many it notes (store/tests/clean_tail.rs), and
                // past the noted ones the store may count its pods instead of listing them.
                let notes = q.notes_kept.saturating_sub(policy::notes_in(&rec));
                Some(self.input_answer(f, notes).await)
            }
            None => None,
        };
        let current = self.current_replicas_for(spec).await;
        policy::target(
            spec.name(),
            rec,
            floor,
            current.as_ref().copied().map_err(String::as_str),
        )
    }

    /// A threshold metric: the load total, the current count, the evaluation history, then the
    /// validity gate.
    pub(super) async fn threshold_answer(
        &self,
        spec: &MetricSpec,
        q: &QueryContext<'_>,
        scope: &Scope<'_>,
    ) -> Answer {
        let evidence = match self.evidence(scope).await {
            Ok(evidence) => evidence,
            Err(e) => return policy::source_unavailable(spec.name(), spec.kind(), &e.to_string()),
        };
        let rule = threshold_rule(spec);
        let load = threshold::load_total(q, &evidence);
        let (mut current, current_inputs) = self.current_replicas(spec, &evidence.workloads).await;
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
                namespace: self.namespace.into(),
                selector: self.selector.to_string(),
                // An Object query's history is its workload's, apart from any External query's.
                object: self.object.cloned(),
            };
            let mut logs = self
                .memory
                .sustain
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if logs.len() >= MAX_SUSTAIN_LOGS && !logs.contains_key(&key) {
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
                log.record(self.now.mono, load.newest_ms, v, rule.retain_ms());
            }
            let history = log.history(self.now.mono);
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
        self.gated(spec, answer, &evidence.workloads, Some(current))
            .await
    }

    /// Apply the metric's `validWhen` gate, read from the same scope (namespace + selector).
    pub(super) async fn gated(
        &self,
        spec: &MetricSpec,
        answer: Answer,
        workloads: &[WorkloadRef],
        current: Option<Result<CurrentReplicas, String>>,
    ) -> Answer {
        let Some(valid_when) = spec.valid_when() else {
            return answer;
        };
        let series = vec![valid_when.series.clone()];
        let q = self.query_context(spec, &series, self.notes_kept());
        let scope = self.scope(spec, &series);
        let check = match self.evidence(&scope).await {
            Ok(evidence) => {
                let evidence = self.of_deciding_producers(spec, evidence).await;
                gate::check_gate(valid_when, &q, &evidence)
            }
            Err(e) => gate::GateCheck {
                open: false,
                reason: format!("validWhen {} is unknown: {e}", valid_when.series),
                inputs: Default::default(),
                producer_reasons: Vec::new(),
            },
        };
        if check.open {
            return gate::apply_gate(answer, spec.kind(), check, Err("not needed"));
        }
        let current = match current {
            Some(c) => c,
            None => self.current_replicas(spec, workloads).await.0,
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
    pub(super) async fn current_replicas(
        &self,
        spec: &MetricSpec,
        workloads: &[WorkloadRef],
    ) -> (Result<CurrentReplicas, String>, policy::InputNotes) {
        if let (Some(state), [w]) = (self.cluster.cloned(), workloads) {
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
        let q = self.query_context(spec, &series, self.notes_kept());
        let scope = self.scope(spec, &series);
        match self.evidence(&scope).await {
            Ok(evidence) => {
                let evidence = self.of_deciding_producers(spec, evidence).await;
                gate::current_from_series(&q, &evidence)
            }
            Err(e) => (Err(e.to_string()), policy::InputNotes::default()),
        }
    }

    /// For a fenced recommender, `evidence` (of its gate or current count) of the producers of
    /// its deciding epoch alone: a fenced producer's gate never opens it, and its count is an
    /// older leader's. Unchanged for a recommender that is not fenced.
    async fn of_deciding_producers(
        &self,
        spec: &MetricSpec,
        evidence: Arc<Evidence>,
    ) -> Arc<Evidence> {
        let Some((label, step)) = spec.fence() else {
            return evidence;
        };
        let q = self.query_context(spec, spec.series(), self.notes_kept());
        let deciding = match self.evidence(&self.scope(spec, spec.series())).await {
            Ok(own) => policy::deciding_producers(&q, &own, label, step),
            Err(_) => Vec::new(),
        };
        let mut only = (*evidence).clone();
        only.observations
            .retain(|o| deciding.contains(&o.id.target));
        Arc::new(only)
    }

    /// The current count for a target whose combined inputs disagree in validity: from the
    /// floor's workload, else from any input that knows it.
    pub(super) async fn current_for_target(
        &self,
        spec: &MetricSpec,
        inputs: &[&MetricSpec],
    ) -> Result<CurrentReplicas, String> {
        if let Ok(v) = self.current_replicas_for(spec).await {
            return Ok(CurrentReplicas {
                value: v,
                source: "spec.replicas of the floor's workload".into(),
            });
        }
        let mut why = Vec::new();
        for input in inputs {
            let scope = self.scope(input, input.series());
            let workloads = match self.workload_evidence(&scope).await {
                Ok(read) => read.workloads.clone(),
                Err(_) => Arc::from([]),
            };
            match self.current_replicas(input, &workloads).await.0 {
                Ok(c) => return Ok(c),
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }

    /// `spec.replicas` of the single workload behind the floor's pods, if discovery knows it;
    /// otherwise why not, for the refusal.
    pub(super) async fn current_replicas_for(&self, spec: &MetricSpec) -> Result<u64, String> {
        let state = self
            .cluster
            .cloned()
            .ok_or("no Kubernetes workload state (discovery is off)")?;
        let floor = spec
            .floor()
            .and_then(|f| self.config.metric(f))
            .ok_or("no floor configured")?;
        let scope = self.scope(floor, floor.series());
        // Only the workloads are read: the floor rule's own read serves.
        let evidence = self
            .workload_evidence(&scope)
            .await
            .map_err(|e| e.to_string())?;
        match &*evidence.workloads {
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
    pub(super) fn query_context<'s>(
        &'s self,
        spec: &'s MetricSpec,
        series: &'s [String],
        notes_kept: usize,
    ) -> QueryContext<'s> {
        QueryContext {
            metric: spec.name(),
            series,
            scope: ScopeText::Parts(
                spec.namespace_label(),
                self.namespace,
                self.selector.as_str(),
            ),
            now: self.now,
            stale_after_ms: self.stale_after_ms(),
            notes_kept,
        }
    }

    /// Evidence for `scope`, read from the source once per request (`Evaluation`).
    pub(super) async fn evidence(&self, scope: &Scope<'_>) -> FetchResult {
        self.evidence_read(scope, None, false).await
    }

    /// As `evidence`, for the rules that treat every fresh, valid input alike past the
    /// `notes_kept` they note in full (the recommendation and the floor): while serving, the
    /// store may count such inputs instead of listing them (store/family_digest.rs).
    pub(super) async fn summarized_evidence(
        &self,
        scope: &Scope<'_>,
        notes_kept: usize,
    ) -> FetchResult {
        let after = (!self.explain).then_some(notes_kept);
        self.evidence_read(scope, after, false).await
    }

    /// Evidence for the workloads behind `scope` only: whatever read of it the request made
    /// serves (a summary lists every target's workload).
    pub(super) async fn workload_evidence(&self, scope: &Scope<'_>) -> FetchResult {
        let after = (!self.explain).then(|| self.notes_kept());
        self.evidence_read(scope, after, true).await
    }

    /// This request's read of `scope` (listed, or summarized past `after`; with `any`, any
    /// read of it), made now if the request has none.
    async fn evidence_read(
        &self,
        scope: &Scope<'_>,
        after: Option<usize>,
        any: bool,
    ) -> FetchResult {
        let key = scope.key();
        if let Some(hit) = self.get(&key, after, any) {
            return hit;
        }
        let result = self.read(scope, after).await.map(Arc::new);
        self.put(key, after, result.clone());
        result
    }

    /// Evidence for `scope` from the source, every input listed or summarized past `after`,
    /// scoped to the workload for an Object query.
    async fn read(&self, scope: &Scope<'_>, after: Option<usize>) -> Result<Evidence, SourceError> {
        let now = self.now;
        let Some(object) = self.object else {
            let read = match after {
                Some(after) => Read::Summarized(self.summarize(after, now)),
                None => Read::Listed,
            };
            return self.source.read(scope, read, now.wall).await;
        };
        // Read once: it decides how the scope is read and is the pod set read with. Only the
        // object's own pods matter to its scope (object_scope.rs).
        let pods = self
            .cluster
            .cloned()
            .and_then(|c| c.workload_pods(&object.workload()));
        if let Some(after) = after {
            let summary = match &pods {
                None => self.object_summary(object, scope, now, after),
                Some(pods) => self.object_split_summary(object, scope, pods, now, after),
            };
            if let Some(summary) = summary {
                return Ok(summary);
            }
        }
        object_scope::evidence(
            self.source,
            pods.as_deref(),
            &self.config.object_metrics.workload_labels,
            object,
            scope,
            now.wall,
        )
        .await
    }

    /// How a summarized read counts clean inputs past the first `after` at `now`.
    fn summarize(&self, after: usize, now: Now) -> Summarize {
        Summarize {
            after,
            now,
            stale_after_ms: self.stale_after_ms(),
        }
    }

    /// The Object query's kept selectors.
    fn kept_object_selectors(
        &self,
        object: &ObjectRef,
        scope: &Scope<'_>,
    ) -> (&WorkloadLabels, Arc<ObjectSelectors>) {
        let wl = &self.config.object_metrics.workload_labels;
        (
            wl,
            self.memory.object_selectors.get(scope.selector, object, wl),
        )
    }

    /// An Object query's evidence read as a summary, as External reads are, when discovery
    /// lists no pods for it (so its scope is the series its workload labels name) and the
    /// source reads in one snapshot (`EvidenceSource::read_together`: the scrape store). Exact only while the named scope holds no series of another API
    /// group, which the Object scope drops and a summary's counted tail could not: checked in
    /// the same snapshot (no store write between the two reads), else `None` and the caller
    /// lists every input.
    fn object_summary(
        &self,
        object: &ObjectRef,
        scope: &Scope<'_>,
        now: Now,
        after: usize,
    ) -> Option<Evidence> {
        let (wl, selectors) = self.kept_object_selectors(object, scope);
        let (named, foreign) = selectors.scopes.as_ref()?;
        let within = |selector| Scope {
            selector,
            ..scope.clone()
        };
        let s = self.summarize(after, now);
        // One snapshot: the check holds for the read it vouches for.
        let [foreign, named]: [Evidence; 2] = (self.source.read_together(&[
            (&within(foreign), Read::Series(None)),
            (&within(named), Read::Summarized(s)),
        ])?)
        .try_into()
        .ok()?;
        foreign
            .observations
            .is_empty()
            .then(|| object_scope::from_labels(object, wl, named))
    }

    /// An Object query's evidence with a pod set read as summaries, when the source reads in
    /// one snapshot (the scrape store): the own pods' series and the other named series are disjoint scopes
    /// (`object_scope::split_scopes`), each summarized as an External read is, and the
    /// never-scraped targets and silent pods come from the named and whole scopes' scope-wide
    /// part, as the listed reads give them. Exact only while the other named series name no
    /// other group (checked in the snapshot they are read in: no store write between) and no
    /// read carries a producer reason (whose order the listed reads decide); else `None` and
    /// the caller lists every input.
    fn object_split_summary(
        &self,
        object: &ObjectRef,
        scope: &Scope<'_>,
        pods: &PodSet,
        now: Now,
        after: usize,
    ) -> Option<Evidence> {
        let (wl, selectors) = self.kept_object_selectors(object, scope);
        let (named, _) = selectors.scopes.as_ref()?;
        let split = selectors.split(scope.selector, object, wl, pods)?;
        let within = |selector| Scope {
            selector,
            ..scope.clone()
        };
        let s = self.summarize(after, now);
        let me = object.workload();
        // One snapshot: the check holds for the reads it vouches for.
        let [foreign, others, named_wide, scope_wide, own]: [Evidence; 5] =
            (self.source.read_together(&[
                (&within(&split.others_foreign), Read::Series(None)),
                (&within(&split.others), Read::Series(Some(s))),
                (&within(named), Read::Whole { silent_of: None }),
                // The merge keeps the object's own silent pods only.
                (
                    scope,
                    Read::Whole {
                        silent_of: Some(&me),
                    },
                ),
                (&within(&split.own), Read::Series(Some(s))),
            ])?)
            .try_into()
            .ok()?;
        if !foreign.observations.is_empty() {
            return None;
        }
        let reads = object_scope::SplitReads {
            named_wide,
            scope_wide,
            own,
            others,
        };
        let reasons =
            !reads.others.producer_reasons.is_empty() || !reads.own.producer_reasons.is_empty();
        (!reasons).then(|| object_scope::from_split(object, wl, pods, reads))
    }
}

/// The scope of `spec`'s `series` (its own, or one it is gated or counted by) in `namespace`
/// under `selector`: every read of a metric's evidence is scoped this way.
pub(super) fn metric_scope<'a>(
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

/// Why a workload known from its pods has no current count: never a guess.
fn not_in_watch_cache(w: &WorkloadRef) -> String {
    format!(
        "spec.replicas of {} {}/{} is not known yet: the workload is not in the watch cache",
        w.kind, w.namespace, w.name
    )
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
    if w.kind == WorkloadKind::Deployment {
        vec![format!(
            "the floor is served for Deployment {}/{}, which promises no deletion order: it gives no protection; annotate the Deployment hpa-bridge.io/deletion-cost: \"stateful-index\" and run with --write-deletion-cost (docs/deletion-cost.md)",
            w.namespace, w.name
        )]
    } else {
        Vec::new()
    }
}
