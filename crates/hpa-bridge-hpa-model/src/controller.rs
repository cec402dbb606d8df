//! The controller's memory for one HPA (recommendations, scale events, conditions) and the
//! reconcile that runs on every sync: pre-checks, one proposal per metric, the invalid-metric
//! rules, then normalisation with or without `behavior` (docs/hpa-behaviour.md §1.6, §1.7).

use std::time::Duration;

use super::rate_limits::{legacy_scale_up_limit_i32, scale_down_limit, scale_up_limit};
use super::replicas::{external_metric_replicas, object_metric_replicas, pod_metric_replicas};
use super::scale_event::{is_after, is_before, secs, ScaleEvent};
use super::spec::*;
use super::sync_io::*;
use super::tolerance::*;

/// What normalisation made of the metrics' proposal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Normalized {
    pub desired: i32,
    /// After stabilisation, before the rate limits and `[min, max]`.
    pub stabilized: i32,
    pub stabilization: Stabilization,
    pub limit: Limit,
}

/// A recommendation kept for stabilisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampedRecommendation {
    pub replicas: i32,
    pub at: Duration,
}

/// One HPA as the controller sees it: the spec, the controller flags, the controller's
/// in-memory history and the object's conditions.
#[derive(Clone, Debug)]
pub struct Hpa {
    spec: HpaSpec,
    config: ControllerConfig,
    recommendations: Vec<TimestampedRecommendation>,
    scale_up_events: Vec<ScaleEvent>,
    scale_down_events: Vec<ScaleEvent>,
    conditions: Vec<Condition>,
    last_scale_time: Option<Duration>,
    /// How long after its sync's clock reading a scale event is stamped. Upstream stamps it
    /// when the update of the scale has returned (`storeScaleEvent` after `Scales().Update`), a
    /// few milliseconds after the reading its windows use; 0 here unless set, since nothing
    /// outside the controller shows that latency.
    scale_event_delay: Duration,
}

impl Hpa {
    /// A fresh controller for a valid spec. Its first sync records `spec.replicas` as the
    /// initial recommendation (docs/hpa-behaviour.md §1.7.6).
    pub fn new(spec: HpaSpec, config: ControllerConfig) -> Result<Self, SpecError> {
        validate_for(&spec, &config)?;
        Ok(Hpa {
            spec,
            config,
            recommendations: Vec::new(),
            scale_up_events: Vec::new(),
            scale_down_events: Vec::new(),
            conditions: Vec::new(),
            last_scale_time: None,
            scale_event_delay: Duration::ZERO,
        })
    }

    /// Stamp scale events `delay` after their sync's clock reading, as the real controller does
    /// by the latency of its scale update (the comparison with the real controller tries it).
    pub fn set_scale_event_delay(&mut self, delay: Duration) {
        self.scale_event_delay = delay;
    }

    /// A controller that (re)started at `now` with `spec.replicas == current`: the current count
    /// is already an initial recommendation, which blocks scale-down for one window
    /// (docs/hpa-behaviour.md §1.7.6).
    pub fn restarted(
        spec: HpaSpec,
        config: ControllerConfig,
        now: Duration,
        current: i32,
    ) -> Result<Self, SpecError> {
        let mut hpa = Hpa::new(spec, config)?;
        hpa.record_initial_recommendation(now, current);
        Ok(hpa)
    }

    /// A kube-controller-manager restart: the in-memory recommendations and scale events are
    /// lost; conditions live on the API object and stay. The next sync records the current
    /// count as the initial recommendation (docs/hpa-behaviour.md §1.7.6).
    pub fn restart_controller(&mut self) {
        self.recommendations.clear();
        self.scale_up_events.clear();
        self.scale_down_events.clear();
    }

    /// Records `current` at `now` if no recommendation is kept yet, as every sync does first
    /// (docs/hpa-behaviour.md §1.7.6).
    pub fn record_initial_recommendation(&mut self, now: Duration, current: i32) {
        if self.recommendations.is_empty() {
            self.recommendations.push(TimestampedRecommendation {
                replicas: current,
                at: now,
            });
        }
    }

    /// Replaces the controller's memory of this HPA: its recommendations and its scale-up and
    /// scale-down events. `explain` seeds it from what the HPA object shows; the upstream
    /// controller's tests seed it the same way.
    pub fn seed_memory(
        &mut self,
        recommendations: Vec<TimestampedRecommendation>,
        scale_up_events: Vec<ScaleEvent>,
        scale_down_events: Vec<ScaleEvent>,
    ) {
        self.recommendations = recommendations;
        self.scale_up_events = scale_up_events;
        self.scale_down_events = scale_down_events;
    }

    /// Replaces `status.conditions` (as read from the HPA object).
    pub fn seed_conditions(&mut self, conditions: Vec<Condition>) {
        self.conditions = conditions;
    }

    /// `normalizeDesiredReplicas` or `normalizeDesiredReplicasWithBehaviors`: stabilisation, then
    /// the rate limits and `[min, max]`, on a count the metrics proposed. Records the
    /// recommendation and updates the conditions as a sync does (docs/hpa-behaviour.md §1.7).
    pub fn normalize(&mut self, now: Duration, current: i32, prenormalized: i32) -> Normalized {
        let (min, max) = (self.spec.min_replicas(), self.spec.max_replicas);
        let (desired, stabilized, stabilization, limit) = match self.spec.behavior.clone() {
            None => self.normalize_legacy(now, current, prenormalized, min, max),
            Some(b) => self.normalize_with_behavior(now, &b, current, prenormalized, min, max),
        };
        Normalized {
            desired,
            stabilized,
            stabilization,
            limit,
        }
    }

    /// Replaces the spec (an `kubectl apply` of the HPA); history is kept, as in the controller.
    pub fn set_spec(&mut self, spec: HpaSpec) -> Result<(), SpecError> {
        validate_for(&spec, &self.config)?;
        self.spec = spec;
        Ok(())
    }

    pub fn spec(&self) -> &HpaSpec {
        &self.spec
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    pub fn recommendations(&self) -> &[TimestampedRecommendation] {
        &self.recommendations
    }

    pub fn scale_up_events(&self) -> &[ScaleEvent] {
        &self.scale_up_events
    }

    pub fn scale_down_events(&self) -> &[ScaleEvent] {
        &self.scale_down_events
    }

    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    pub fn last_scale_time(&self) -> Option<Duration> {
        self.last_scale_time
    }

    /// The tolerances this HPA gets: the cluster flag both ways, overridden per direction by
    /// `behavior.*.tolerance` only in the 1.33+ style with the gate on (docs/hpa-behaviour.md §1.5).
    pub fn tolerances(&self) -> Tolerances {
        let mut t = Tolerances {
            style: self.config.tolerance_style,
            scale_down: self.config.tolerance,
            scale_up: self.config.tolerance,
        };
        if let (ToleranceStyle::PerDirection { configurable: true }, Some(b)) =
            (self.config.tolerance_style, &self.spec.behavior)
        {
            if let Some(q) = b.scale_down.as_ref().and_then(|r| r.tolerance.as_ref()) {
                t.scale_down = q.as_f64();
            }
            if let Some(q) = b.scale_up.as_ref().and_then(|r| r.tolerance.as_ref()) {
                t.scale_up = q.as_f64();
            }
        }
        t
    }

    fn set_condition(
        &mut self,
        now: Duration,
        t: ConditionType,
        status: bool,
        reason: &str,
        message: String,
    ) {
        match self.conditions.iter_mut().find(|c| c.condition_type == t) {
            Some(c) => {
                if c.status != status {
                    c.last_transition = now;
                }
                c.status = status;
                c.reason = reason.to_string();
                c.message = message;
            }
            None => self.conditions.push(Condition {
                condition_type: t,
                status,
                reason: reason.to_string(),
                message,
                last_transition: now,
            }),
        }
    }

    /// One reconcile of this HPA at `now` (docs/hpa-behaviour.md §1.7).
    pub fn sync(&mut self, now: Duration, input: &SyncInput) -> SyncOutcome {
        let current = input.spec_replicas;
        let min = self.spec.min_replicas();
        let max = self.spec.max_replicas;
        let mut run = SyncRun::new(now, current);

        self.set_condition(
            now,
            ConditionType::AbleToScale,
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale".into(),
        );
        // docs/hpa-behaviour.md §1.7.6: recorded before anything else, only when no history is kept.
        self.record_initial_recommendation(now, current);

        let (desired, rescale, decision) = if current == 0 && !self.may_scale_from_zero(min) {
            // docs/hpa-behaviour.md §1.7.1, §7.2: scaling disabled.
            self.set_condition(
                now,
                ConditionType::ScalingActive,
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero".into(),
            );
            if self.config.scale_to_zero == ScaleToZero::Off {
                self.remove_condition(ConditionType::ScaledToZero);
            }
            (0, false, Decision::ScalingDisabled)
        } else if current != 0 && current > max {
            // docs/hpa-behaviour.md §1.7.1: current above max, metrics skipped.
            (max, true, Decision::AboveMaxReplicas)
        } else if current != 0 && current < min {
            // docs/hpa-behaviour.md §1.7.1: current below min, metrics skipped. A target at 0
            // that may scale reads its metrics even below a raised minReplicas (§7.2), so an
            // invalid metric keeps it at 0.
            (min, true, Decision::BelowMinReplicas)
        } else if let Some(refusal) = input.selector.refusal() {
            // docs/hpa-behaviour.md §1.6.1: the selector is checked before any metric; a
            // refusal stops the sync with no proposal and no recommendation.
            let reason = refusal.condition_reason;
            self.refuse_selector(&mut run, refusal);
            return run.finish(self, current, false, Decision::SelectorRefused { reason });
        } else {
            match self.propose_from_metrics(&mut run, input) {
                Ok(step) => step,
                Err(stopped) => return run.finish(self, current, false, stopped),
            }
        };

        let replicas = if rescale {
            self.rescale(&mut run, desired, min);
            desired
        } else {
            current
        };
        run.finish(self, replicas, rescale, decision)
    }

    /// A selector the controller refuses: ScalingActive=False and two warnings.
    fn refuse_selector(&mut self, run: &mut SyncRun, refusal: SelectorRefusal) {
        self.set_condition(
            run.at,
            ConditionType::ScalingActive,
            false,
            refusal.condition_reason,
            refusal.condition_message,
        );
        run.events.push(Event {
            warning: true,
            reason: refusal.event_reason.into(),
            message: refusal.event_message.clone(),
        });
        run.events.push(Event {
            warning: true,
            reason: "FailedComputeMetricsReplicas".into(),
            message: refusal.event_message,
        });
    }

    /// The replicas the metrics propose, normalized (stabilized, rate-limited, clamped), and
    /// whether that rescales; `Err` with the decision when invalid metrics stop the sync.
    fn propose_from_metrics(
        &mut self,
        run: &mut SyncRun,
        input: &SyncInput,
    ) -> Result<(i32, bool, Decision), Decision> {
        let (now, current) = (run.at, run.current);
        let min = self.spec.min_replicas();
        let scaled_to_zero = self.scaled_to_zero();
        let computed = self.compute_replicas_for_metrics(input);
        run.metrics = computed.outcomes;
        for (m, spec) in run.metrics.iter().zip(&self.spec.metrics) {
            if let Err(e) = &m.result {
                run.events.push(Event {
                    warning: true,
                    reason: failed_get_reason(spec).into(),
                    message: e.clone(),
                });
            }
        }
        let total = self.spec.metrics.len();
        let invalid = computed.invalid;
        // docs/hpa-behaviour.md §1.6: all invalid, or some invalid and the valid ones would scale
        // below spec.replicas: no scaling at all, and no recommendation is recorded.
        if invalid >= total || (invalid > 0 && computed.replicas < input.spec_replicas) {
            let (first, first_reason) = run
                .metrics
                .iter()
                .zip(&self.spec.metrics)
                .find_map(|(m, spec)| {
                    m.result
                        .as_ref()
                        .err()
                        .map(|e| (e.clone(), failed_get_reason(spec)))
                })
                .unwrap_or_default();
            self.set_condition(
                now,
                ConditionType::ScalingActive,
                false,
                if first_reason.is_empty() {
                    "FailedGetExternalMetric"
                } else {
                    first_reason
                },
                format!("the HPA was unable to compute the replica count: {first}"),
            );
            run.events.push(Event {
                warning: true,
                reason: "FailedComputeMetricsReplicas".into(),
                message: format!(
                    "invalid metrics ({invalid} invalid out of {total}), first error is: {first}"
                ),
            });
            if invalid >= total {
                return Err(Decision::AllMetricsInvalid { invalid });
            }
            run.metric_replicas = Some(computed.replicas);
            return Err(Decision::ScaleDownBlockedByInvalidMetric {
                invalid,
                proposed: computed.replicas,
            });
        }
        self.set_condition(
            now,
            ConditionType::ScalingActive,
            true,
            "ValidMetricFound",
            format!(
                "the HPA was able to successfully calculate a replica count from {}",
                computed.metric_name
            ),
        );
        run.metric_replicas = Some(computed.replicas);
        // docs/hpa-behaviour.md §1.7.2: the maximum proposal (never below 0).
        let prenormalized = computed.replicas.max(0);
        let Normalized {
            mut desired,
            stabilized,
            stabilization,
            limit,
        } = self.normalize(now, current, prenormalized);
        // docs/hpa-behaviour.md §7.2: leaving a 0 the HPA set itself, after minReplicas was
        // raised, goes at least to the new minimum.
        if current == 0 && min != 0 && scaled_to_zero && desired < min {
            desired = min;
        }
        run.stabilized_replicas = Some(stabilized);
        Ok((
            desired,
            desired != current,
            Decision::Normalized {
                invalid,
                stabilization,
                limit,
            },
        ))
    }

    /// The scale update to `desired`: its condition and event, the scale event and time.
    fn rescale(&mut self, run: &mut SyncRun, desired: i32, min: i32) {
        let (now, current) = (run.at, run.current);
        self.set_condition(
            now,
            ConditionType::AbleToScale,
            true,
            "SucceededRescale",
            format!("the HPA controller was able to update the target scale to {desired}"),
        );
        run.events.push(Event {
            warning: false,
            reason: "SuccessfulRescale".into(),
            message: format!("New size: {desired}"),
        });
        self.store_scale_event(now, current, desired);
        self.last_scale_time = Some(now);
        self.record_zero_crossing(now, current, desired, min);
    }

    /// `ScaledToZero=True` on the object, read only with the condition implementation.
    fn scaled_to_zero(&self) -> bool {
        self.config.scale_to_zero == ScaleToZero::Condition
            && self
                .conditions
                .iter()
                .find(|c| c.condition_type == ConditionType::ScaledToZero)
                .is_some_and(|c| c.status)
    }

    /// Whether a target at 0 replicas is autoscaled (docs/hpa-behaviour.md §1.7.1, §7.2).
    fn may_scale_from_zero(&self, min: i32) -> bool {
        match self.config.scale_to_zero {
            ScaleToZero::Off | ScaleToZero::ReplicasRule => min == 0,
            ScaleToZero::Condition => {
                self.scaled_to_zero() && (min != 0 || self.spec.has_object_or_external_metric())
            }
        }
    }

    /// The condition implementation writes `ScaledToZero` on every rescale, so it is never
    /// stale: True only for its own scale from more than 0 to 0 with `minReplicas` 0 and an
    /// Object or External metric, False (`NotScaledToZero`) for any other rescale. A manual
    /// scale is no rescale of the HPA's and leaves the condition as it was; the next rescale of
    /// the HPA's clears it (docs/hpa-behaviour.md §7.2). With the gate off the condition goes.
    fn record_zero_crossing(&mut self, now: Duration, current: i32, desired: i32, min: i32) {
        match self.config.scale_to_zero {
            ScaleToZero::ReplicasRule => {}
            ScaleToZero::Off => self.remove_condition(ConditionType::ScaledToZero),
            ScaleToZero::Condition => {
                if current > 0
                    && desired == 0
                    && min == 0
                    && self.spec.has_object_or_external_metric()
                {
                    self.set_condition(
                        now,
                        ConditionType::ScaledToZero,
                        true,
                        "ScaledToZero",
                        "the HPA controller scaled the workload to zero".into(),
                    );
                } else {
                    self.set_condition(
                        now,
                        ConditionType::ScaledToZero,
                        false,
                        "NotScaledToZero",
                        "the HPA controller did not scale the workload to zero".into(),
                    );
                }
            }
        }
    }

    fn remove_condition(&mut self, t: ConditionType) {
        self.conditions.retain(|c| c.condition_type != t);
    }

    /// Every metric's proposal and the maximum over the valid ones (docs/hpa-behaviour.md §1.6/§1.7.2).
    fn compute_replicas_for_metrics(&self, input: &SyncInput) -> ComputedMetrics {
        let tolerances = self.tolerances();
        let mut out = ComputedMetrics {
            outcomes: Vec::new(),
            invalid: 0,
            replicas: 0,
            metric_name: String::new(),
        };
        for (i, spec) in self.spec.metrics.iter().enumerate() {
            let name = spec.metric_name().unwrap_or_default().to_string();
            let result = match (input.metrics.get(i), &spec.external, &spec.object) {
                (None, _, _) => Err(format!(
                    "unable to get {} metric {name}: no answer in the model input",
                    source_word(spec)
                )),
                (Some(answer), None, None) if spec.pods.is_some() || spec.resource.is_some() => {
                    match spec.target() {
                        Some(target) => {
                            pod_metric_replicas(&name, target, answer, input, &tolerances)
                        }
                        None => Err(format!("metric {name}: no target")),
                    }
                }
                (Some(answer), Some(ext), _) => external_metric_replicas(
                    ext,
                    answer,
                    input,
                    &tolerances,
                    self.config.guarded_external_sum,
                ),
                (Some(answer), None, Some(obj)) => {
                    object_metric_replicas(obj, answer, input, &tolerances)
                }
                (Some(_), None, None) => Err(format!(
                    "metric {name}: validated specs have an external or object source"
                )),
            };
            match &result {
                Err(_) => out.invalid += 1,
                // Go: `if replicas == 0 || proposal > replicas` (docs/hpa-behaviour.md §1.7.2).
                Ok(p) => {
                    if out.replicas == 0 || p.replicas > out.replicas {
                        out.replicas = p.replicas;
                        out.metric_name = format!("{} metric {name}", source_word(spec));
                    }
                }
            }
            out.outcomes.push(MetricOutcome { name, result });
        }
        out
    }

    /// Without `behavior` (docs/hpa-behaviour.md §1.7.3): max over the downscale window, then
    /// `[min, min(max, max(2×current, 4))]`.
    fn normalize_legacy(
        &mut self,
        now: Duration,
        current: i32,
        prenormalized: i32,
        min: i32,
        max: i32,
    ) -> (i32, i32, Stabilization, Limit) {
        let window = self.config.downscale_stabilization;
        let mut max_rec = prenormalized;
        let mut old_index = None;
        for (i, rec) in self.recommendations.iter().enumerate() {
            if is_before(rec.at, now, window) {
                old_index = Some(i);
            } else if rec.replicas > max_rec {
                max_rec = rec.replicas;
            }
        }
        let rec = TimestampedRecommendation {
            replicas: prenormalized,
            at: now,
        };
        match old_index {
            Some(i) => self.recommendations[i] = rec,
            None => self.recommendations.push(rec),
        }
        let stabilized = max_rec;
        let stabilization = if stabilized != prenormalized {
            Stabilization::ScaleDownStabilized
        } else {
            Stabilization::Unchanged
        };
        self.set_able_to_scale_stabilization(now, stabilization);

        let (desired, limit) = legacy_rules(current, stabilized, min, max);
        self.set_scaling_limited(now, desired != stabilized, limit);
        (desired, stabilized, stabilization, limit)
    }

    /// With `behavior` (docs/hpa-behaviour.md §1.7.4): stabilisation windows, then rate policies, then
    /// `[min, max]`.
    fn normalize_with_behavior(
        &mut self,
        now: Duration,
        behavior: &Behavior,
        current: i32,
        prenormalized: i32,
        min: i32,
        max: i32,
    ) -> (i32, i32, Stabilization, Limit) {
        let up = behavior.resolved_scale_up();
        let down = behavior.resolved_scale_down(self.config.downscale_stabilization);
        let (stabilized, stabilization) = self.stabilize_with_windows(
            now,
            up.stabilization_window,
            down.stabilization_window,
            current,
            prenormalized,
        );
        self.set_able_to_scale_stabilization(now, stabilization);

        // Rate policies and [min, max] (docs/hpa-behaviour.md §1.7.4).
        let (desired, limit) = self.behavior_rate(now, behavior, current, stabilized, min, max);
        self.set_scaling_limited(now, desired != stabilized, limit);
        (desired, stabilized, stabilization, limit)
    }

    /// `stabilizeRecommendationWithBehaviors`: the lowest recommendation in the scale-up window
    /// and the highest in the scale-down window bound the current count; records the
    /// recommendation, reusing a slot older than both windows (docs/hpa-behaviour.md §1.7.4).
    pub(super) fn stabilize_with_windows(
        &mut self,
        now: Duration,
        up_window: Duration,
        down_window: Duration,
        current: i32,
        prenormalized: i32,
    ) -> (i32, Stabilization) {
        // Stabilisation: up = min over the up window, down = max over the down window, result =
        // current clamped into [up, down] (docs/hpa-behaviour.md §1.7.4).
        let mut up_rec = prenormalized;
        let mut down_rec = prenormalized;
        let mut old_index = None;
        for (i, rec) in self.recommendations.iter().enumerate() {
            if is_after(rec.at, now, up_window) {
                up_rec = up_rec.min(rec.replicas);
            }
            if is_after(rec.at, now, down_window) {
                down_rec = down_rec.max(rec.replicas);
            }
            if is_before(rec.at, now, up_window) && is_before(rec.at, now, down_window) {
                old_index = Some(i);
            }
        }
        let mut stabilized = current;
        if stabilized < up_rec {
            stabilized = up_rec;
        }
        if stabilized > down_rec {
            stabilized = down_rec;
        }
        let rec = TimestampedRecommendation {
            replicas: prenormalized,
            at: now,
        };
        match old_index {
            Some(i) => self.recommendations[i] = rec,
            None => self.recommendations.push(rec),
        }
        let stabilization = if stabilized == prenormalized {
            Stabilization::Unchanged
        } else if prenormalized >= current {
            Stabilization::ScaleUpStabilized
        } else {
            Stabilization::ScaleDownStabilized
        };
        (stabilized, stabilization)
    }

    /// `convertDesiredReplicasWithBehaviorRate`: the rate policies of the direction the count
    /// moves in, then `[min, max]`, with the limiting reason (docs/hpa-behaviour.md §1.7.4).
    /// Reads the scale events kept so far; records nothing.
    pub fn behavior_rate(
        &self,
        now: Duration,
        behavior: &Behavior,
        current: i32,
        stabilized: i32,
        min: i32,
        max: i32,
    ) -> (i32, Limit) {
        let up = behavior.resolved_scale_up();
        let down = behavior.resolved_scale_down(self.config.downscale_stabilization);
        if stabilized > current {
            let limit = scale_up_limit(
                now,
                current,
                &self.scale_up_events,
                &self.scale_down_events,
                &up,
            )
            .max(current);
            let (max_allowed, reason) = if max > limit {
                (limit, Limit::ScaleUpLimit)
            } else {
                (max, Limit::TooManyReplicas)
            };
            if stabilized > max_allowed {
                (max_allowed, reason)
            } else {
                (stabilized, Limit::DesiredWithinRange)
            }
        } else if stabilized < current {
            let limit = scale_down_limit(
                now,
                current,
                &self.scale_up_events,
                &self.scale_down_events,
                &down,
            )
            .min(current);
            let (min_allowed, reason) = if min < limit {
                (limit, Limit::ScaleDownLimit)
            } else {
                (min, Limit::TooFewReplicas)
            };
            if stabilized < min_allowed {
                (min_allowed, reason)
            } else {
                (stabilized, Limit::DesiredWithinRange)
            }
        } else {
            (stabilized, Limit::DesiredWithinRange)
        }
    }

    fn set_able_to_scale_stabilization(&mut self, now: Duration, s: Stabilization) {
        let (reason, message) = match s {
            Stabilization::Unchanged => {
                ("ReadyForNewScale", "recommended size matches current size")
            }
            Stabilization::ScaleUpStabilized => (
                "ScaleUpStabilized",
                "recent recommendations were lower than current one, applying the lowest recent recommendation",
            ),
            Stabilization::ScaleDownStabilized => (
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            ),
        };
        self.set_condition(
            now,
            ConditionType::AbleToScale,
            true,
            reason,
            message.into(),
        );
    }

    fn set_scaling_limited(&mut self, now: Duration, limited: bool, limit: Limit) {
        let message = match limit {
            Limit::DesiredWithinRange => "the desired count is within the acceptable range",
            Limit::ScaleUpLimit => {
                "the desired replica count is increasing faster than the maximum scale rate"
            }
            Limit::ScaleDownLimit => {
                "the desired replica count is decreasing faster than the maximum scale rate"
            }
            Limit::TooManyReplicas => {
                "the desired replica count is more than the maximum replica count"
            }
            Limit::TooFewReplicas => {
                "the desired replica count is less than the minimum replica count"
            }
        };
        self.set_condition(
            now,
            ConditionType::ScalingLimited,
            limited,
            limit.reason(),
            message.into(),
        );
    }

    /// Keeps the scale event for rate policies, reusing an outdated slot (older than the
    /// direction's longest policy period) as Go does. Only with `behavior`
    /// (docs/hpa-behaviour.md §1.7.4).
    pub(super) fn store_scale_event(&mut self, now: Duration, prev: i32, new: i32) {
        let Some(behavior) = self.spec.behavior.clone() else {
            return;
        };
        let (rules, events, change) = if new > prev {
            (
                behavior.resolved_scale_up(),
                &mut self.scale_up_events,
                new - prev,
            )
        } else {
            (
                behavior.resolved_scale_down(self.config.downscale_stabilization),
                &mut self.scale_down_events,
                prev - new,
            )
        };
        let longest = rules
            .policies
            .iter()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0);
        let mut old_index = None;
        for (i, e) in events.iter_mut().enumerate() {
            if is_before(e.at, now, secs(longest)) {
                e.outdated = true;
            }
            if e.outdated {
                old_index = Some(i);
            }
        }
        let event = ScaleEvent {
            change,
            at: now + self.scale_event_delay,
            outdated: false,
        };
        match old_index {
            Some(i) => events[i] = event,
            None => events.push(event),
        }
    }
}

/// `convertDesiredReplicasWithRules`, the normalisation without `behavior`: the scale-up cap
/// `max(2×current, 4)`, then `[min, max]`, with the limiting reason (docs/hpa-behaviour.md
/// §1.7.3).
pub fn legacy_rules(current: i32, desired: i32, min: i32, max: i32) -> (i32, Limit) {
    let scale_up_limit = legacy_scale_up_limit_i32(current);
    let (max_allowed, up_reason) = if max > scale_up_limit {
        (scale_up_limit, Limit::ScaleUpLimit)
    } else {
        (max, Limit::TooManyReplicas)
    };
    if desired < min {
        (min, Limit::TooFewReplicas)
    } else if desired > max_allowed {
        (max_allowed, up_reason)
    } else {
        (desired, Limit::DesiredWithinRange)
    }
}

/// The API server's validation with the cluster's feature gates: `minReplicas: 0` needs
/// `HPAScaleToZero` (docs/hpa-behaviour.md §1.7.7, §7.1).
fn validate_for(spec: &HpaSpec, config: &ControllerConfig) -> Result<(), SpecError> {
    spec.validate()?;
    if spec.min_replicas() == 0 && !config.scale_to_zero.allows_min_zero() {
        return Err(SpecError::Invalid(
            "minReplicas 0 needs the HPAScaleToZero feature gate (alpha and off before 1.37, beta and on from 1.37)".into(),
        ));
    }
    Ok(())
}

struct ComputedMetrics {
    outcomes: Vec<MetricOutcome>,
    invalid: usize,
    replicas: i32,
    metric_name: String,
}

/// The source as the controller names it in messages.
fn source_word(spec: &MetricSpec) -> &'static str {
    match spec.source_type {
        MetricSourceType::Object => "object",
        MetricSourceType::Pods => "pods",
        MetricSourceType::Resource | MetricSourceType::ContainerResource => "resource",
        MetricSourceType::External => "external",
    }
}

/// The event and condition reason of a failed fetch (docs/hpa-behaviour.md §1.6, §6.4).
fn failed_get_reason(spec: &MetricSpec) -> &'static str {
    match spec.source_type {
        MetricSourceType::Object => "FailedGetObjectMetric",
        MetricSourceType::Pods => "FailedGetPodsMetric",
        MetricSourceType::Resource => "FailedGetResourceMetric",
        MetricSourceType::ContainerResource => "FailedGetContainerResourceMetric",
        MetricSourceType::External => "FailedGetExternalMetric",
    }
}

/// What one sync has produced so far, made into its outcome at the end.
struct SyncRun {
    at: Duration,
    current: i32,
    events: Vec<Event>,
    metrics: Vec<MetricOutcome>,
    metric_replicas: Option<i32>,
    stabilized_replicas: Option<i32>,
}

impl SyncRun {
    fn new(at: Duration, current: i32) -> SyncRun {
        SyncRun {
            at,
            current,
            events: Vec::new(),
            metrics: Vec::new(),
            metric_replicas: None,
            stabilized_replicas: None,
        }
    }

    fn finish(self, hpa: &Hpa, replicas: i32, rescaled: bool, decision: Decision) -> SyncOutcome {
        SyncOutcome {
            at: self.at,
            current_replicas: self.current,
            replicas,
            rescaled,
            decision,
            metrics: self.metrics,
            metric_replicas: self.metric_replicas,
            stabilized_replicas: self.stabilized_replicas,
            conditions: hpa.conditions.clone(),
            events: self.events,
        }
    }
}

#[cfg(test)]
mod tests;
