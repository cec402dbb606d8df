//! How one request is evaluated: the rules of the metric asked (and of its inputs, gate,
//! floor and current count) run over evidence read once per request, in one reading of the
//! clocks. Serving and explaining (`/status`) evaluate alike; only how many inputs are noted
//! differs.

use std::sync::{Arc, Mutex};

use crate::clock::{FreshWindow, Millis, Now};
use crate::cluster::{PodSet, WorkloadKind};
use crate::config::{MetricKind, MetricSpec, WorkloadLabels};
use crate::evidence::{Evidence, Scope, ScopeKey, Summarize};
use crate::policy::combine;
use crate::policy::threshold::{self, LoadState, SustainRule, ThresholdRule};
use crate::policy::valid_when::{self as gate, CurrentReplicas};
use crate::policy::{self, Answer, QueryContext, RefusalKind, ScopeText};
use crate::selector::LabelSelector;
use crate::source::{ReadMode, SourceError};
use crate::store::{ScopeRead, WorkloadRef};

use super::adapter::{Adapter, MAX_SEEN_QUERIES};
use super::answer_reuse::Version;
use super::object_scope::{self, ObjectRef};
use super::object_selectors::ObjectSelectors;
use super::query_key::QueryKey;

/// One request's evaluation: what it asks (namespace, selector, the workload of an Object
/// query), when (one reading of both clocks for every rule), and the evidence already read.
/// A target reads the floor's series for the floor itself and again for the workload's
/// current count, and a gated recommender may read the current count's series twice: each
/// (series set, scope) is fetched once and reused, which also gives every rule of the request
/// the same snapshot.
pub(super) struct Evaluation<'a> {
    pub(super) namespace: &'a str,
    pub(super) selector: &'a LabelSelector,
    pub(super) now: Now,
    /// An Object metric query: every read is scoped to this workload (object_scope.rs).
    pub(super) object: Option<&'a ObjectRef>,
    /// Explaining (`/status`), not serving: every input is noted, not only the first few.
    pub(super) explain: bool,
    /// By scope, and how it was read (`Read`): listed, or summarized past its first `after`
    /// present inputs (`Store::evidence_summarized`). A listed read also serves a later
    /// summarized one, and any read serves a workload-only one, so the same snapshot is read;
    /// a scope read summarized first and then listed (a recommender's series that another rule
    /// of the same answer sums), or summarized after two different note counts, is read twice.
    pub(super) evidence: Mutex<Vec<((ScopeKey, Read), FetchResult)>>,
}

/// Shared, not copied: a target answer reads the same evidence up to three times.
pub(super) type FetchResult = Result<Arc<Evidence>, SourceError>;

/// How a scope's evidence was read, or is wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Read {
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
    pub(super) fn serves(self, want: Read) -> bool {
        match (self, want) {
            (Read::Listed, _) | (_, Read::Workloads) => true,
            (Read::Summary { after: a }, Read::Summary { after: b }) => a == b,
            _ => false,
        }
    }
}

impl<'a> Evaluation<'a> {
    pub(super) fn new(
        namespace: &'a str,
        selector: &'a LabelSelector,
        now: Now,
        object: Option<&'a ObjectRef>,
        explain: bool,
    ) -> Evaluation<'a> {
        Evaluation {
            namespace,
            selector,
            now,
            object,
            explain,
            evidence: Mutex::default(),
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

    pub(super) fn get(&self, scope: &ScopeKey, want: Read) -> Option<FetchResult> {
        let fetched = self.evidence.lock().unwrap_or_else(|e| e.into_inner());
        fetched
            .iter()
            .find(|((k, read), _)| k == scope && read.serves(want))
            .map(|(_, r)| r.clone())
    }

    /// The clock readings over which every input read keeps the freshness it has now: an
    /// answer computed now reads the same within it.
    pub(super) fn fresh_window(&self, stale_after_ms: Millis) -> FreshWindow {
        let fetched = self.evidence.lock().unwrap_or_else(|e| e.into_inner());
        let mut window = FreshWindow::default();
        for ev in fetched.iter().filter_map(|(_, r)| r.as_ref().ok()) {
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
        let fetched = self.evidence.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = fetched
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .flat_map(|ev| ev.workloads.iter());
        let first = all.next()?;
        all.all(|w| w == first).then(|| first.clone())
    }

    pub(super) fn put(&self, key: (ScopeKey, Read), result: FetchResult) {
        let mut fetched = self.evidence.lock().unwrap_or_else(|e| e.into_inner());
        fetched.push((key, result));
    }
}

/// An answer, and the clock readings within which it reads the same while no input changes.
pub(super) struct Reusable {
    pub(super) answer: Answer,
    pub(super) fresh: FreshWindow,
    /// What the history kept as the workload's `spec.replicas`.
    pub(super) applied: Option<u64>,
}

impl Adapter {
    /// One answer served to an HPA, whichever front door asked: evaluated, counted in the
    /// self-metrics and kept in the history under `scope`.
    pub(super) async fn serve_answer(
        &self,
        spec: &MetricSpec,
        namespace: &str,
        selector: &LabelSelector,
        object: Option<&ObjectRef>,
        scope: &str,
    ) -> Reusable {
        let ev = Evaluation::new(namespace, selector, self.clock.now(), object, false);
        let answer = self.answer_spec(spec, &ev).await;
        // Taken before the history's lookup below, which may read evidence the answer did
        // not: only what the answer read bounds its reuse.
        let fresh = ev.fresh_window(self.stale_after_ms());
        let applied = self.applied_replicas(spec, &ev).await;
        self.metrics.answer(
            spec.name(),
            answer.refusal().map_or("value", RefusalKind::label),
        );
        self.record_answer(
            (spec.name(), namespace, scope),
            &answer,
            applied,
            ev.now.wall,
        );
        Reusable {
            answer,
            fresh,
            applied,
        }
    }

    /// Moves whenever anything an answer in `namespace` for `selector` could read changes,
    /// apart from the passing of time (`Evaluation::fresh_window` covers that): the series
    /// any rule of any configured metric reads in that scope (its own, its `validWhen` gate,
    /// its `currentSeries`), the never-scraped targets, and the cluster's facts. It is scoped
    /// because the store is written with every scrape of any target, and a workload's own
    /// series change far less often. `None` when no answer of `metric` may be reused: a
    /// threshold metric (or a target over one) records a `sustain` evaluation per new sample
    /// and its windows pass with time alone. With a Prometheus source every store write
    /// counts (that source has its own cache, and answer_reuse.rs bounds reuse in time).
    pub(super) fn answer_version(
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

    /// `spec.replicas` of the one workload an answer is about, for the history: what the HPA
    /// has applied so far. The named object of an Object query; else, for a metric with a
    /// floor, the floor's workload (a recommender's pods belong to another); else the single
    /// workload behind everything the answer read. From the watch cache only, and `None`
    /// when that is not one workload or the watch does not know it.
    pub(super) async fn applied_replicas(
        &self,
        spec: &MetricSpec,
        ev: &Evaluation<'_>,
    ) -> Option<u64> {
        let state = self.workload_state()?;
        if let Some(object) = ev.object {
            return state.current_replicas(&object.workload());
        }
        if spec.floor().is_some() {
            return self.current_replicas_for(spec, ev).await.ok();
        }
        state.current_replicas(&ev.one_workload()?)
    }

    pub(super) async fn answer_spec(&self, spec: &MetricSpec, ev: &Evaluation<'_>) -> Answer {
        match spec.kind() {
            MetricKind::Target => self.target_answer(spec, ev).await,
            _ => {
                let notes = ev.notes_kept();
                self.input_answer(spec, ev, notes).await
            }
        }
    }

    /// A metric that is not a target, on its own or as a target's input. Config validation
    /// keeps targets out of a target's inputs (config/metric.rs), which is what lets a target
    /// answer without boxing a future per input; a target here is still answered, boxed.
    pub(super) async fn input_answer(
        &self,
        spec: &MetricSpec,
        ev: &Evaluation<'_>,
        notes_kept: usize,
    ) -> Answer {
        let q = self.query_context(spec, spec.series(), ev, notes_kept);
        let scope = ev.scope(spec, spec.series());
        match spec.kind() {
            MetricKind::Target => Box::pin(self.target_answer(spec, ev)).await,
            MetricKind::Recommendation => {
                // A summary drops the labels that carry the epochs fencing reads.
                let read = match spec.epoch_label() {
                    Some(_) => self.evidence(ev, &scope).await,
                    None => self.summarized_evidence(ev, &scope, q.notes_kept).await,
                };
                match read {
                    Ok(evidence) => {
                        let answer = policy::fenced_recommendation(&q, &evidence, spec.fence());
                        self.gated(spec, answer, ev, &evidence.workloads, None)
                            .await
                    }
                    Err(e) => policy::source_unavailable(spec.name(), spec.kind(), &e.to_string()),
                }
            }
            MetricKind::Threshold => self.threshold_answer(spec, &q, &scope, ev).await,
            MetricKind::StatefulFloor => {
                let evidence = match self.summarized_evidence(ev, &scope, q.notes_kept).await {
                    Ok(evidence) => evidence,
                    Err(e) => {
                        return policy::source_unavailable(spec.name(), spec.kind(), &e.to_string())
                    }
                };
                let state = self.workload_state();
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
                        let listed = match self.evidence(ev, &scope).await {
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
                    self.warn_once(w, first);
                }
                answer.warnings = warnings;
                answer
            }
        }
    }

    /// A target: the max of its recommendation (and combined inputs), and its floor.
    pub(super) async fn target_answer(&self, spec: &MetricSpec, ev: &Evaluation<'_>) -> Answer {
        let q = self.query_context(spec, spec.series(), ev, ev.notes_kept());
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
            self.input_answer(rec_spec, ev, q.notes_kept).await
        } else {
            let mut parts = Vec::with_capacity(inputs.len());
            for input in &inputs {
                parts.push(self.input_answer(input, ev, q.notes_kept).await);
            }
            let names: Vec<&str> = inputs.iter().map(|i| i.name()).collect();
            let current = if parts.iter().all(|p| p.value().is_some()) {
                // Not needed: nothing blocks a decrease.
                Err("not needed".to_string())
            } else {
                self.current_for_target(spec, &inputs, ev).await
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
                Some(self.input_answer(f, ev, notes).await)
            }
            None => None,
        };
        let current = self.current_replicas_for(spec, ev).await;
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
        ev: &Evaluation<'_>,
    ) -> Answer {
        let evidence = match self.evidence(ev, scope).await {
            Ok(evidence) => evidence,
            Err(e) => return policy::source_unavailable(spec.name(), spec.kind(), &e.to_string()),
        };
        let rule = threshold_rule(spec);
        let load = threshold::load_total(q, &evidence);
        let (mut current, current_inputs) =
            self.current_replicas(spec, ev, &evidence.workloads).await;
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
                namespace: ev.namespace.into(),
                selector: ev.selector.to_string(),
                // An Object query's history is its workload's, apart from any External query's.
                object: ev.object.cloned(),
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
                log.record(ev.now.mono, load.newest_ms, v, rule.retain_ms());
            }
            let history = log.history(ev.now.mono);
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
        self.gated(spec, answer, ev, &evidence.workloads, Some(current))
            .await
    }

    /// Apply the metric's `validWhen` gate, read from the same scope (namespace + selector).
    pub(super) async fn gated(
        &self,
        spec: &MetricSpec,
        answer: Answer,
        ev: &Evaluation<'_>,
        workloads: &[WorkloadRef],
        current: Option<Result<CurrentReplicas, String>>,
    ) -> Answer {
        let Some(valid_when) = spec.valid_when() else {
            return answer;
        };
        let series = vec![valid_when.series.clone()];
        let q = self.query_context(spec, &series, ev, ev.notes_kept());
        let scope = ev.scope(spec, &series);
        let check = match self.evidence(ev, &scope).await {
            Ok(evidence) => {
                let evidence = self.of_deciding_producers(spec, ev, evidence).await;
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
            None => self.current_replicas(spec, ev, workloads).await.0,
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
        ev: &Evaluation<'_>,
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
        let q = self.query_context(spec, &series, ev, ev.notes_kept());
        let scope = ev.scope(spec, &series);
        match self.evidence(ev, &scope).await {
            Ok(evidence) => {
                let evidence = self.of_deciding_producers(spec, ev, evidence).await;
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
        ev: &Evaluation<'_>,
        evidence: Arc<Evidence>,
    ) -> Arc<Evidence> {
        let Some((label, step)) = spec.fence() else {
            return evidence;
        };
        let q = self.query_context(spec, spec.series(), ev, ev.notes_kept());
        let deciding = match self.evidence(ev, &ev.scope(spec, spec.series())).await {
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
        ev: &Evaluation<'_>,
    ) -> Result<CurrentReplicas, String> {
        if let Ok(v) = self.current_replicas_for(spec, ev).await {
            return Ok(CurrentReplicas {
                value: v,
                source: "spec.replicas of the floor's workload".into(),
            });
        }
        let mut why = Vec::new();
        for input in inputs {
            let scope = ev.scope(input, input.series());
            let workloads = match self.workload_evidence(ev, &scope).await {
                Ok(ev) => ev.workloads.clone(),
                Err(_) => Arc::from([]),
            };
            match self.current_replicas(input, ev, &workloads).await.0 {
                Ok(c) => return Ok(c),
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }

    /// `spec.replicas` of the single workload behind the floor's pods, if discovery knows it;
    /// otherwise why not, for the refusal.
    pub(super) async fn current_replicas_for(
        &self,
        spec: &MetricSpec,
        ev: &Evaluation<'_>,
    ) -> Result<u64, String> {
        let state = self
            .workload_state()
            .ok_or("no Kubernetes workload state (discovery is off)")?;
        let floor = spec
            .floor()
            .and_then(|f| self.config.metric(f))
            .ok_or("no floor configured")?;
        let scope = ev.scope(floor, floor.series());
        // Only the workloads are read: the floor rule's own read serves.
        let evidence = self
            .workload_evidence(ev, &scope)
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
    pub(super) fn query_context<'a>(
        &self,
        spec: &'a MetricSpec,
        series: &'a [String],
        ev: &Evaluation<'a>,
        notes_kept: usize,
    ) -> QueryContext<'a> {
        QueryContext {
            metric: spec.name(),
            series,
            scope: ScopeText::Parts(spec.namespace_label(), ev.namespace, ev.selector.as_str()),
            now: ev.now,
            stale_after_ms: self.stale_after_ms(),
            notes_kept,
        }
    }

    /// Evidence for `scope`, read from the source once per request (`Evaluation`).
    pub(super) async fn evidence(&self, ev: &Evaluation<'_>, scope: &Scope<'_>) -> FetchResult {
        self.evidence_read(ev, scope, Read::Listed).await
    }

    /// As `evidence`, for the rules that treat every fresh, valid input alike past the
    /// `notes_kept` they note in full (the recommendation and the floor): while serving, the
    /// store may count such inputs instead of listing them (store/family_digest.rs).
    pub(super) async fn summarized_evidence(
        &self,
        ev: &Evaluation<'_>,
        scope: &Scope<'_>,
        notes_kept: usize,
    ) -> FetchResult {
        let want = match ev.explain {
            true => Read::Listed,
            false => Read::Summary { after: notes_kept },
        };
        self.evidence_read(ev, scope, want).await
    }

    /// Evidence for the workloads behind `scope` only: whatever read of it the request made
    /// serves (a summary lists every target's workload).
    pub(super) async fn workload_evidence(
        &self,
        ev: &Evaluation<'_>,
        scope: &Scope<'_>,
    ) -> FetchResult {
        self.evidence_read(ev, scope, Read::Workloads).await
    }

    pub(super) async fn evidence_read(
        &self,
        ev: &Evaluation<'_>,
        scope: &Scope<'_>,
        want: Read,
    ) -> FetchResult {
        let key = scope.key();
        if let Some(hit) = ev.get(&key, want) {
            return hit;
        }
        let read = match want {
            Read::Workloads if ev.explain => Read::Listed,
            Read::Workloads => Read::Summary {
                after: ev.notes_kept(),
            },
            read => read,
        };
        let result = self.read(ev, scope, &key, read).await.map(Arc::new);
        ev.put((key, read), result.clone());
        result
    }

    /// Evidence for `scope` from the source, scoped to the workload for an Object query.
    pub(super) async fn read(
        &self,
        ev: &Evaluation<'_>,
        scope: &Scope<'_>,
        key: &ScopeKey,
        read: Read,
    ) -> Result<Evidence, SourceError> {
        let now = ev.now;
        match (ev.object, read) {
            (None, Read::Summary { after }) => {
                let s = self.summarize(after, now);
                self.source
                    .evidence(scope, ReadMode::Summarized { key, summarize: s }, now.wall)
                    .await
            }
            (None, _) => {
                self.source
                    .evidence(scope, ReadMode::Listed, now.wall)
                    .await
            }
            (Some(object), read) => {
                // Read once: it decides how the scope is read and is the pod set read with.
                // Only the object's own pods matter to its scope (object_scope.rs).
                let pods = self
                    .workload_state()
                    .and_then(|c| c.workload_pods(&object.workload()));
                if let Read::Summary { after } = read {
                    let summary = match &pods {
                        None => self.object_summary(object, scope, now, after),
                        Some(pods) => self.object_split_summary(object, scope, pods, now, after),
                    };
                    if let Some(ev) = summary {
                        return Ok(ev);
                    }
                }
                object_scope::evidence(
                    &*self.source,
                    pods.as_deref(),
                    &self.config.object_metrics.workload_labels,
                    object,
                    scope,
                    now.wall,
                )
                .await
            }
        }
    }

    /// How a summarized read counts clean inputs past the first `after` at `now`.
    fn summarize(&self, after: usize, now: Now) -> Summarize {
        Summarize {
            after,
            now,
            stale_after_ms: self.stale_after_ms(),
        }
    }

    /// The Object query's kept selectors, when the scrape store is the source (only its reads
    /// can be summarized and checked in one snapshot).
    fn store_object_selectors(
        &self,
        object: &ObjectRef,
        scope: &Scope<'_>,
    ) -> Option<(&WorkloadLabels, Arc<ObjectSelectors>)> {
        let source: *const u8 = Arc::as_ptr(&self.source).cast();
        if !std::ptr::eq(source, Arc::as_ptr(&self.store).cast()) {
            return None;
        }
        let wl = &self.config.object_metrics.workload_labels;
        Some((wl, self.object_selectors.get(scope.selector, object, wl)))
    }

    /// An Object query's evidence read as a summary, as External reads are, when discovery
    /// lists no pods for it (so its scope is the series its workload labels name) and the
    /// scrape store answers. Exact only while the named scope holds no series of another API
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
        let (wl, selectors) = self.store_object_selectors(object, scope)?;
        let (named, foreign) = selectors.scopes.as_ref()?;
        let within = |selector| Scope {
            selector,
            ..scope.clone()
        };
        let s = self.summarize(after, now);
        // One snapshot: the check holds for the read it vouches for.
        let [foreign, named] = self.store.evidence_together([
            (&within(foreign), ScopeRead::Series(None)),
            (&within(named), ScopeRead::All(Some(s))),
        ]);
        foreign
            .observations
            .is_empty()
            .then(|| object_scope::from_labels(object, wl, named))
    }

    /// An Object query's evidence with a pod set read as summaries, when the scrape store
    /// answers: the own pods' series and the other named series are disjoint scopes
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
        let (wl, selectors) = self.store_object_selectors(object, scope)?;
        let (named, _) = selectors.scopes.as_ref()?;
        let split = selectors.split(scope.selector, object, wl, pods)?;
        let within = |selector| Scope {
            selector,
            ..scope.clone()
        };
        let s = self.summarize(after, now);
        let me = object.workload();
        // One snapshot: the check holds for the reads it vouches for.
        let [foreign, others, named_wide, scope_wide, own] = self.store.evidence_together([
            (&within(&split.others_foreign), ScopeRead::Series(None)),
            (&within(&split.others), ScopeRead::Series(Some(s))),
            (&within(named), ScopeRead::Whole { silent_of: None }),
            // The merge keeps the object's own silent pods only.
            (
                scope,
                ScopeRead::Whole {
                    silent_of: Some(&me),
                },
            ),
            (&within(&split.own), ScopeRead::Series(Some(s))),
        ]);
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
