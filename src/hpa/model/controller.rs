//! The controller's memory for one HPA (recommendations, scale events, conditions) and the
//! reconcile that runs on every sync: pre-checks, one proposal per metric, the invalid-metric
//! rules, then normalisation with or without `behavior` (docs/hpa-behaviour.md §1.6, §1.7).

use std::time::Duration;

use super::rate_limits::{legacy_scale_up_limit, scale_down_limit, scale_up_limit};
use super::replicas::{external_metric_replicas, object_metric_replicas};
use super::scale_event::{is_after, is_before, secs, ScaleEvent};
use super::spec::*;
use super::sync_io::*;
use super::tolerance::*;

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
}

impl Hpa {
    /// A fresh controller for a valid spec. Its first sync records `spec.replicas` as the
    /// initial recommendation (docs/hpa-behaviour.md §1.7.6).
    pub fn new(spec: HpaSpec, config: ControllerConfig) -> Result<Self, SpecError> {
        spec.validate()?;
        Ok(Hpa {
            spec,
            config,
            recommendations: Vec::new(),
            scale_up_events: Vec::new(),
            scale_down_events: Vec::new(),
            conditions: Vec::new(),
            last_scale_time: None,
        })
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

    /// Replaces the spec (an `kubectl apply` of the HPA); history is kept, as in the controller.
    pub fn set_spec(&mut self, spec: HpaSpec) -> Result<(), SpecError> {
        spec.validate()?;
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
        let mut events = Vec::new();
        let mut metrics = Vec::new();
        let mut metric_replicas = None;
        let mut stabilized_replicas = None;

        self.set_condition(
            now,
            ConditionType::AbleToScale,
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale".into(),
        );
        // docs/hpa-behaviour.md §1.7.6: recorded before anything else, only when no history is kept.
        self.record_initial_recommendation(now, current);

        let (desired, rescale, decision) = if input.spec_replicas == 0 && min != 0 {
            // docs/hpa-behaviour.md §1.7.1: scaling disabled.
            self.set_condition(
                now,
                ConditionType::ScalingActive,
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero".into(),
            );
            (0, false, Decision::ScalingDisabled)
        } else if current > max {
            // docs/hpa-behaviour.md §1.7.1: current above max, metrics skipped.
            (max, true, Decision::AboveMaxReplicas)
        } else if current < min {
            // docs/hpa-behaviour.md §1.7.1: current below min, metrics skipped.
            (min, true, Decision::BelowMinReplicas)
        } else {
            let computed = self.compute_replicas_for_metrics(input);
            metrics = computed.outcomes;
            for (m, spec) in metrics.iter().zip(&self.spec.metrics) {
                if let Err(e) = &m.result {
                    events.push(Event {
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
                let (first, first_reason) = metrics
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
                events.push(Event {
                    warning: true,
                    reason: "FailedComputeMetricsReplicas".into(),
                    message: format!(
                        "invalid metrics ({invalid} invalid out of {total}), first error is: {first}"
                    ),
                });
                let decision = if invalid >= total {
                    Decision::AllMetricsInvalid { invalid }
                } else {
                    metric_replicas = Some(computed.replicas);
                    Decision::ScaleDownBlockedByInvalidMetric {
                        invalid,
                        proposed: computed.replicas,
                    }
                };
                return SyncOutcome {
                    at: now,
                    current_replicas: current,
                    replicas: current,
                    rescaled: false,
                    decision,
                    metrics,
                    metric_replicas,
                    stabilized_replicas: None,
                    conditions: self.conditions.clone(),
                    events,
                };
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
            metric_replicas = Some(computed.replicas);
            // docs/hpa-behaviour.md §1.7.2: the maximum proposal (never below 0).
            let prenormalized = computed.replicas.max(0);
            let (desired, stabilized, stabilization, limit) = match self.spec.behavior.clone() {
                None => self.normalize_legacy(now, current, prenormalized, min, max),
                Some(b) => self.normalize_with_behavior(now, &b, current, prenormalized, min, max),
            };
            stabilized_replicas = Some(stabilized);
            (
                desired,
                desired != current,
                Decision::Normalized {
                    invalid,
                    stabilization,
                    limit,
                },
            )
        };

        let replicas = if rescale {
            self.set_condition(
                now,
                ConditionType::AbleToScale,
                true,
                "SucceededRescale",
                format!("the HPA controller was able to update the target scale to {desired}"),
            );
            events.push(Event {
                warning: false,
                reason: "SuccessfulRescale".into(),
                message: format!("New size: {desired}"),
            });
            self.store_scale_event(now, current, desired);
            self.last_scale_time = Some(now);
            desired
        } else {
            current
        };

        SyncOutcome {
            at: now,
            current_replicas: current,
            replicas,
            rescaled: rescale,
            decision,
            metrics,
            metric_replicas,
            stabilized_replicas,
            conditions: self.conditions.clone(),
            events,
        }
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
                (Some(answer), Some(ext), _) => {
                    external_metric_replicas(ext, answer, input, &tolerances)
                }
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

        // docs/hpa-behaviour.md §1.7.3: scale-up cap max(2×current, 4), then [min, max].
        let scale_up_limit =
            i32::try_from(legacy_scale_up_limit(i64::from(current))).unwrap_or(i32::MAX);
        let (max_allowed, up_reason) = if max > scale_up_limit {
            (scale_up_limit, Limit::ScaleUpLimit)
        } else {
            (max, Limit::TooManyReplicas)
        };
        let (desired, limit) = if stabilized < min {
            (min, Limit::TooFewReplicas)
        } else if stabilized > max_allowed {
            (max_allowed, up_reason)
        } else {
            (stabilized, Limit::DesiredWithinRange)
        };
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

        // Stabilisation: up = min over the up window, down = max over the down window, result =
        // current clamped into [up, down] (docs/hpa-behaviour.md §1.7.4).
        let mut up_rec = prenormalized;
        let mut down_rec = prenormalized;
        let mut old_index = None;
        for (i, rec) in self.recommendations.iter().enumerate() {
            if is_after(rec.at, now, up.stabilization_window) {
                up_rec = up_rec.min(rec.replicas);
            }
            if is_after(rec.at, now, down.stabilization_window) {
                down_rec = down_rec.max(rec.replicas);
            }
            if is_before(rec.at, now, up.stabilization_window)
                && is_before(rec.at, now, down.stabilization_window)
            {
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
        self.set_able_to_scale_stabilization(now, stabilization);

        // Rate policies and [min, max] (docs/hpa-behaviour.md §1.7.4).
        let (desired, limit) = if stabilized > current {
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
        };
        self.set_scaling_limited(now, desired != stabilized, limit);
        (desired, stabilized, stabilization, limit)
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
    fn store_scale_event(&mut self, now: Duration, prev: i32, new: i32) {
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
            at: now,
            outdated: false,
        };
        match old_index {
            Some(i) => events[i] = event,
            None => events.push(event),
        }
    }
}

struct ComputedMetrics {
    outcomes: Vec<MetricOutcome>,
    invalid: usize,
    replicas: i32,
    metric_name: String,
}

/// `external` or `object`, as the controller names a metric's source in messages.
fn source_word(spec: &MetricSpec) -> &'static str {
    if spec.object.is_some() {
        "object"
    } else {
        "external"
    }
}

/// The event and condition reason of a failed fetch (docs/hpa-behaviour.md §1.6, §6.4).
fn failed_get_reason(spec: &MetricSpec) -> &'static str {
    if spec.object.is_some() {
        "FailedGetObjectMetric"
    } else {
        "FailedGetExternalMetric"
    }
}

#[cfg(test)]
mod tests {
    use super::super::DEFAULT_DOWNSCALE_STABILIZATION;
    use super::*;
    use crate::hpa::quantity::Quantity;
    use proptest::prelude::*;

    fn t(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn avg(name: &str) -> MetricSpec {
        MetricSpec::external(name, MetricTarget::average_value("1").unwrap())
    }

    fn hpa_spec(
        min: i32,
        max: i32,
        metrics: Vec<MetricSpec>,
        behavior: Option<Behavior>,
    ) -> HpaSpec {
        HpaSpec {
            min_replicas: Some(min),
            max_replicas: max,
            metrics,
            behavior,
        }
    }

    fn legacy() -> ControllerConfig {
        ControllerConfig::for_kube_minor(32)
    }

    fn v133() -> ControllerConfig {
        ControllerConfig::for_kube_minor(33)
    }

    fn v135() -> ControllerConfig {
        ControllerConfig::for_kube_minor(35)
    }

    fn one(v: f64) -> MetricInput {
        Ok(vec![v])
    }

    fn broken() -> MetricInput {
        Err("the server is currently unable to handle the request (get hpa_expect_replicas.external.metrics.k8s.io)".into())
    }

    /// Runs syncs every 15 s from `start` on a settled workload that follows the HPA, one
    /// metric answer per sync; returns the replicas after each sync.
    fn follow(hpa: &mut Hpa, start_at: u64, start: i32, answers: &[f64]) -> Vec<i32> {
        let mut replicas = start;
        let mut out = Vec::new();
        for (i, d) in answers.iter().enumerate() {
            let now = t(start_at + 15 * i as u64);
            let o = hpa.sync(now, &SyncInput::steady(replicas, vec![one(*d)]));
            replicas = o.replicas;
            out.push(replicas);
        }
        out
    }

    fn proposal(o: &SyncOutcome, i: usize) -> MetricProposal {
        *o.metrics[i].result.as_ref().expect("valid metric")
    }

    // docs/hpa-behaviour.md §1.5: 10 -> 11 at tolerance 0.1.
    #[test]
    fn ten_to_eleven_differs_between_tolerance_styles() {
        // The float claim, computed as Go computes it: usage 11000m over 1000m × 10 replicas.
        let ratio = 11_000f64 / (1_000f64 * 10f64);
        assert!(
            (1.0 - ratio).abs() > 0.1,
            "legacy: outside by float rounding"
        );
        assert!(
            ratio <= 1.0 + 0.1,
            "1.33+: inside, the upper end is inclusive"
        );
        let band = |style| Tolerances {
            style,
            scale_down: 0.1,
            scale_up: 0.1,
        };
        assert!(!band(ToleranceStyle::Symmetric).is_within(ratio));
        assert!(band(ToleranceStyle::PerDirection {
            configurable: false
        })
        .is_within(ratio));

        let spec = hpa_spec(1, 100, vec![avg("m")], None);
        let mut old = Hpa::new(spec.clone(), legacy()).unwrap();
        let o = old.sync(t(0), &SyncInput::steady(10, vec![one(11.0)]));
        assert!(!proposal(&o, 0).within_tolerance);
        assert_eq!(proposal(&o, 0).replicas, 11);
        assert_eq!(o.replicas, 11);

        for cfg in [v133(), v135()] {
            let mut new = Hpa::new(spec.clone(), cfg).unwrap();
            let o = new.sync(t(0), &SyncInput::steady(10, vec![one(11.0)]));
            assert!(proposal(&o, 0).within_tolerance);
            assert_eq!(o.replicas, 10);
            assert!(!o.rescaled);
        }
    }

    #[test]
    fn hundred_to_hundred_and_five_is_held() {
        for cfg in [legacy(), v133(), v135()] {
            let mut hpa = Hpa::new(hpa_spec(1, 200, vec![avg("m")], None), cfg).unwrap();
            let o = hpa.sync(t(0), &SyncInput::steady(100, vec![one(105.0)]));
            assert_eq!(proposal(&o, 0).replicas, 100, "{cfg:?}");
            assert_eq!(o.replicas, 100);
            let o = hpa.sync(t(15), &SyncInput::steady(100, vec![one(95.0)]));
            assert_eq!(o.replicas, 100, "{cfg:?}");
        }
    }

    #[test]
    fn per_hpa_tolerance_only_with_the_gate() {
        let behavior = Behavior {
            scale_up: Some(ScalingRules {
                tolerance: Some(Quantity::parse("0").unwrap()),
                ..Default::default()
            }),
            scale_down: None,
        };
        let spec = hpa_spec(1, 100, vec![avg("m")], Some(behavior));
        let mut gated = Hpa::new(spec.clone(), v135()).unwrap();
        assert_eq!(gated.tolerances().scale_up, 0.0);
        assert_eq!(gated.tolerances().scale_down, 0.1);
        let o = gated.sync(t(0), &SyncInput::steady(10, vec![one(10.5)]));
        assert_eq!(o.replicas, 11);
        for cfg in [v133(), legacy()] {
            let mut off = Hpa::new(spec.clone(), cfg).unwrap();
            assert_eq!(off.tolerances().scale_up, 0.1);
            let o = off.sync(t(0), &SyncInput::steady(10, vec![one(10.5)]));
            assert_eq!(o.replicas, 10, "{cfg:?}");
        }
    }

    // docs/hpa-behaviour.md §1.3: an absolute D through a Value target is multiplied by ready pods.
    #[test]
    fn value_path_multiplies_by_ready_pods() {
        let value = MetricSpec::external("m", MetricTarget::value("1").unwrap());
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![value.clone()], None), legacy()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(4, vec![one(5.0)]));
        let p = proposal(&o, 0);
        assert!(matches!(p.formula, TargetFormula::Value { milli: 1000 }));
        assert_eq!(p.ratio, 5.0);
        assert_eq!(p.replicas, 20);
        assert_eq!(o.metric_replicas, Some(20));
        assert_eq!(o.replicas, 8, "legacy cap max(2×4, 4)");

        // Pods exist but none is Ready: proposes 0.
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![value.clone()], None), legacy()).unwrap();
        let input = SyncInput {
            ready_pods: 0,
            ..SyncInput::steady(4, vec![one(5.0)])
        };
        assert_eq!(proposal(&hpa.sync(t(0), &input), 0).replicas, 0);

        // No pods at all: the metric is invalid.
        let input = SyncInput {
            ready_pods: 0,
            pods: 0,
            ..SyncInput::steady(4, vec![one(5.0)])
        };
        let o = hpa.sync(t(15), &input);
        assert!(o.metrics[0].result.is_err());
        assert_eq!(o.decision, Decision::AllMetricsInvalid { invalid: 1 });

        // spec.replicas == 0 (scale to zero, minReplicas 0): ceil(sum / value), first step capped
        // at 4 (docs/hpa-behaviour.md §1.7.7).
        let mut hpa = Hpa::new(hpa_spec(0, 100, vec![value], None), legacy()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(0, vec![one(5.0)]));
        assert_eq!(proposal(&o, 0).replicas, 5);
        assert_eq!(o.replicas, 4);
    }

    // docs/hpa-behaviour.md §1.5: rollout trap.
    #[test]
    fn rollout_surge_proposes_status_replicas() {
        for cfg in [legacy(), v135()] {
            let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), cfg).unwrap();
            let input = SyncInput {
                status_replicas: 12,
                pods: 12,
                ready_pods: 12,
                ..SyncInput::steady(10, vec![one(11.0)])
            };
            let o = hpa.sync(t(0), &input);
            let p = proposal(&o, 0);
            assert!(p.within_tolerance, "11/12 is inside the band");
            assert_eq!(p.replicas, 12);
            assert_eq!(o.replicas, 12, "{cfg:?}: scales 10 -> 12 on D=11");
        }
    }

    // docs/hpa-behaviour.md §1.7.3.
    #[test]
    fn legacy_scale_up_cap() {
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(1, vec![one(100.0)]));
        assert_eq!(o.replicas, 4);
        let limited = o.condition(ConditionType::ScalingLimited).unwrap();
        assert!(limited.status);
        assert_eq!(limited.reason, "ScaleUpLimit");
        let o = hpa.sync(t(15), &SyncInput::steady(4, vec![one(100.0)]));
        assert_eq!(o.replicas, 8);
        assert_eq!(
            follow(&mut hpa, 30, 8, &[100.0, 100.0, 100.0]),
            vec![16, 32, 64]
        );
        assert_eq!(follow(&mut hpa, 75, 64, &[100.0]), vec![100]);
    }

    // docs/hpa-behaviour.md §1.7.4: default behavior rates. Checked against calculateScaleUpLimitWith-
    // ScalingRules: an event exactly one period old is not "after" the cutoff, so with syncs
    // exactly 15 s apart each sync starts from the current count: 1 -> 5 -> 10 -> 20 -> 40 -> 50.
    #[test]
    fn behavior_default_scale_up_rates() {
        let spec = hpa_spec(1, 50, vec![avg("m")], Some(Behavior::default()));
        let mut hpa = Hpa::new(spec, v135()).unwrap();
        assert_eq!(
            follow(&mut hpa, 0, 1, &[100.0; 6]),
            vec![5, 10, 20, 40, 50, 50]
        );
        // Syncs closer than the period see earlier events and are held back.
        let spec = hpa_spec(1, 50, vec![avg("m")], Some(Behavior::default()));
        let mut hpa = Hpa::new(spec, v135()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(1, vec![one(100.0)]));
        assert_eq!(o.replicas, 5);
        let o = hpa.sync(t(10), &SyncInput::steady(5, vec![one(100.0)]));
        assert_eq!(o.replicas, 5, "periodStart is 1 again: max(1+4, 2) = 5");
        assert_eq!(
            o.decision,
            Decision::Normalized {
                invalid: 0,
                stabilization: Stabilization::Unchanged,
                limit: Limit::ScaleUpLimit
            }
        );
    }

    #[test]
    fn percent_scale_up_rounds_up_with_go_float_arithmetic() {
        // 100 × (1 + 10/100) is 110.00000000000001 in float64, so ceil gives 111.
        assert_eq!((100f64 * (1.0 + 10f64 / 100.0)).ceil(), 111.0);
        let behavior = Behavior {
            scale_up: Some(ScalingRules {
                policies: Some(vec![ScalingPolicy {
                    policy_type: PolicyType::Percent,
                    value: 10,
                    period_seconds: 60,
                }]),
                ..Default::default()
            }),
            scale_down: None,
        };
        let mut hpa = Hpa::new(hpa_spec(1, 1000, vec![avg("m")], Some(behavior)), v135()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(100, vec![one(500.0)]));
        assert_eq!(o.replicas, 111);
    }

    // docs/hpa-behaviour.md §1.7.3/§1.7.4: the drop waits for the downscale window.
    #[test]
    fn scale_down_is_stabilised_for_300_s() {
        // D = 10 at t = 0..60, then D = 2 from t = 75.
        let answers: Vec<f64> = (0..30).map(|i| if i <= 4 { 10.0 } else { 2.0 }).collect();
        let drop_time = |seq: &[i32]| 15 * seq.iter().position(|&r| r == 2).unwrap() as u64;

        // Legacy: a recommendation exactly 300 s old still counts (not Before the cutoff), so
        // the drop comes 300 s after the metric fell (t = 75 -> 375).
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
        let seq = follow(&mut hpa, 0, 10, &answers);
        assert_eq!(drop_time(&seq), 375);
        assert!(seq[..25].iter().all(|&r| r == 10));

        // Behavior: it no longer counts (not After the cutoff), so the drop comes 300 s after
        // the last high recommendation (t = 60 -> 360), one sync earlier.
        let spec = hpa_spec(1, 100, vec![avg("m")], Some(Behavior::default()));
        let mut hpa = Hpa::new(spec, v135()).unwrap();
        let seq = follow(&mut hpa, 0, 10, &answers);
        assert_eq!(drop_time(&seq), 360);
        let o = hpa.sync(t(450), &SyncInput::steady(2, vec![one(2.0)]));
        assert_eq!(o.replicas, 2);
    }

    #[test]
    fn stabilised_hold_reports_its_reason() {
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
        hpa.sync(t(0), &SyncInput::steady(10, vec![one(10.0)]));
        let o = hpa.sync(t(15), &SyncInput::steady(10, vec![one(2.0)]));
        assert_eq!(o.replicas, 10);
        assert_eq!(o.stabilized_replicas, Some(10));
        assert_eq!(
            o.condition(ConditionType::AbleToScale).unwrap().reason,
            "ScaleDownStabilized"
        );
    }

    // docs/hpa-behaviour.md §1.6.
    #[test]
    fn invalid_metric_blocks_scale_down_but_not_scale_up() {
        for (cfg, behavior) in [(legacy(), None), (v135(), Some(Behavior::default()))] {
            let spec = hpa_spec(1, 100, vec![avg("a"), avg("b")], behavior);
            let mut hpa = Hpa::new(spec, cfg).unwrap();
            let o = hpa.sync(t(0), &SyncInput::steady(10, vec![broken(), one(5.0)]));
            assert_eq!(o.replicas, 10);
            assert_eq!(
                o.decision,
                Decision::ScaleDownBlockedByInvalidMetric {
                    invalid: 1,
                    proposed: 5
                }
            );
            let active = o.condition(ConditionType::ScalingActive).unwrap();
            assert!(!active.status);
            assert_eq!(active.reason, "FailedGetExternalMetric");

            // Equal to spec.replicas: holds, and the metric is "found".
            let o = hpa.sync(t(15), &SyncInput::steady(10, vec![broken(), one(10.0)]));
            assert_eq!(o.replicas, 10);
            assert!(matches!(
                o.decision,
                Decision::Normalized { invalid: 1, .. }
            ));
            assert!(o.condition(ConditionType::ScalingActive).unwrap().status);

            let o = hpa.sync(t(30), &SyncInput::steady(10, vec![broken(), one(20.0)]));
            assert_eq!(o.replicas, 20, "{cfg:?}");
            assert!(matches!(
                o.decision,
                Decision::Normalized { invalid: 1, .. }
            ));
        }
    }

    #[test]
    fn all_metrics_invalid_changes_nothing() {
        let spec = hpa_spec(1, 100, vec![avg("a"), avg("b")], None);
        let mut hpa = Hpa::new(spec, legacy()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(10, vec![broken(), Ok(vec![])]));
        assert_eq!(o.replicas, 10);
        assert!(!o.rescaled);
        assert_eq!(o.decision, Decision::AllMetricsInvalid { invalid: 2 });
        let active = o.condition(ConditionType::ScalingActive).unwrap();
        assert!(!active.status);
        assert_eq!(active.reason, "FailedGetExternalMetric");
        let reasons: Vec<&str> = o.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "FailedGetExternalMetric",
                "FailedGetExternalMetric",
                "FailedComputeMetricsReplicas"
            ]
        );
        assert_eq!(hpa.recommendations().len(), 1, "only the initial one");
        // A missing input entry is an error too.
        let o = hpa.sync(t(15), &SyncInput::steady(10, vec![]));
        assert_eq!(o.decision, Decision::AllMetricsInvalid { invalid: 2 });
    }

    #[test]
    fn empty_item_list_is_invalid_and_zero_is_not() {
        let mut hpa = Hpa::new(hpa_spec(2, 100, vec![avg("m")], None), legacy()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(10, vec![Ok(vec![])]));
        let err = o.metrics[0].result.as_ref().unwrap_err();
        assert!(
            err.contains("no metrics returned from external metrics API"),
            "{err}"
        );
        assert_eq!(o.replicas, 10);
        // docs/hpa-behaviour.md §1.6: a served 0 is valid and drives a scale-in to minReplicas.
        let o = hpa.sync(t(400), &SyncInput::steady(10, vec![one(0.0)]));
        assert_eq!(o.replicas, 2);
    }

    #[test]
    fn items_are_summed_as_rounded_up_millis() {
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(5, vec![Ok(vec![7.0, 3.0, 10.2])]));
        let p = proposal(&o, 0);
        assert_eq!(p.usage_milli, 20_200);
        assert_eq!(p.replicas, 21);
        let o = hpa.sync(t(15), &SyncInput::steady(5, vec![Ok(vec![0.0001, 0.0001])]));
        assert_eq!(proposal(&o, 0).usage_milli, 2);
    }

    fn down_rules(rules: ScalingRules) -> Behavior {
        Behavior {
            scale_up: None,
            scale_down: Some(rules),
        }
    }

    #[test]
    fn percent_scale_down_truncates() {
        let behavior = down_rules(ScalingRules {
            stabilization_window_seconds: Some(0),
            policies: Some(vec![ScalingPolicy {
                policy_type: PolicyType::Percent,
                value: 10,
                period_seconds: 60,
            }]),
            ..Default::default()
        });
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], Some(behavior)), v135()).unwrap();
        // 15 × 0.9 = 13.5 truncates to 13; held while that event is inside the 60 s period.
        assert_eq!(
            follow(&mut hpa, 0, 15, &[1.0; 6]),
            vec![13, 13, 13, 13, 11, 11]
        );
    }

    #[test]
    fn disabled_policy_blocks_its_direction() {
        let disabled = ScalingRules {
            stabilization_window_seconds: Some(0),
            select_policy: Some(SelectPolicy::Disabled),
            ..Default::default()
        };
        let behavior = Behavior {
            scale_up: Some(disabled.clone()),
            scale_down: Some(disabled),
        };
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], Some(behavior)), v135()).unwrap();
        assert_eq!(follow(&mut hpa, 0, 10, &[2.0; 4]), vec![10; 4]);
        let o = hpa.sync(t(60), &SyncInput::steady(10, vec![one(2.0)]));
        let limited = o.condition(ConditionType::ScalingLimited).unwrap();
        assert!(limited.status);
        assert_eq!(limited.reason, "ScaleDownLimit");
        assert_eq!(follow(&mut hpa, 75, 10, &[50.0; 4]), vec![10; 4]);
    }

    #[test]
    fn select_policy_min_takes_the_smaller_change() {
        let behavior = Behavior {
            scale_up: Some(ScalingRules {
                select_policy: Some(SelectPolicy::Min),
                ..Default::default()
            }),
            scale_down: Some(ScalingRules {
                stabilization_window_seconds: Some(0),
                select_policy: Some(SelectPolicy::Min),
                policies: Some(vec![
                    ScalingPolicy {
                        policy_type: PolicyType::Pods,
                        value: 1,
                        period_seconds: 15,
                    },
                    ScalingPolicy {
                        policy_type: PolicyType::Percent,
                        value: 50,
                        period_seconds: 15,
                    },
                ]),
                tolerance: None,
            }),
        };
        let spec = hpa_spec(1, 100, vec![avg("m")], Some(behavior));
        let mut hpa = Hpa::new(spec.clone(), v135()).unwrap();
        // Up: min(10 + 4, ceil(10 × 2)) = 14.
        assert_eq!(follow(&mut hpa, 0, 10, &[100.0]), vec![14]);
        // Down: max(10 - 1, trunc(10 × 0.5)) = 9.
        let mut hpa = Hpa::new(spec, v135()).unwrap();
        assert_eq!(follow(&mut hpa, 0, 10, &[1.0, 1.0]), vec![9, 8]);
    }

    // docs/hpa-behaviour.md §1.7.6.
    #[test]
    fn controller_restart_blocks_scale_down_for_a_window() {
        let settle = |hpa: &mut Hpa| {
            for i in 0..=40 {
                hpa.sync(t(15 * i), &SyncInput::steady(2, vec![one(2.0)]));
            }
        };
        let spec = hpa_spec(1, 100, vec![avg("m")], None);
        // Someone scales the target to 10 by hand at t = 615; the metric still says 2.
        let mut steady = Hpa::new(spec.clone(), legacy()).unwrap();
        settle(&mut steady);
        let o = steady.sync(t(615), &SyncInput::steady(10, vec![one(2.0)]));
        assert_eq!(o.replicas, 2, "without a restart the history says 2");

        let mut restarted = Hpa::new(spec.clone(), legacy()).unwrap();
        settle(&mut restarted);
        restarted.restart_controller();
        let seq = follow(&mut restarted, 615, 10, &[2.0; 22]);
        // 615 + 15 × 20 = 915 still held (not Before the cutoff); 930 drops.
        assert!(seq[..21].iter().all(|&r| r == 10), "{seq:?}");
        assert_eq!(seq[21], 2);

        // The constructor form records the same initial recommendation.
        let mut fresh = Hpa::restarted(spec, legacy(), t(615), 10).unwrap();
        assert_eq!(fresh.recommendations().len(), 1);
        let o = fresh.sync(t(630), &SyncInput::steady(10, vec![one(2.0)]));
        assert_eq!(o.replicas, 10);
    }

    // docs/hpa-behaviour.md §1.7.1.
    #[test]
    fn pre_checks_skip_the_metrics() {
        let mut hpa = Hpa::new(hpa_spec(2, 20, vec![avg("m")], None), legacy()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(0, vec![one(5.0)]));
        assert_eq!(o.decision, Decision::ScalingDisabled);
        assert_eq!(o.replicas, 0);
        assert_eq!(
            o.condition(ConditionType::ScalingActive).unwrap().reason,
            "ScalingDisabled"
        );
        let o = hpa.sync(t(15), &SyncInput::steady(30, vec![broken()]));
        assert_eq!((o.decision, o.replicas), (Decision::AboveMaxReplicas, 20));
        assert!(o.metrics.is_empty());
        let o = hpa.sync(t(30), &SyncInput::steady(1, vec![broken()]));
        assert_eq!((o.decision, o.replicas), (Decision::BelowMinReplicas, 2));
    }

    #[test]
    fn behavior_scale_events_are_recorded() {
        let spec = hpa_spec(1, 100, vec![avg("m")], Some(Behavior::default()));
        let mut hpa = Hpa::new(spec, v135()).unwrap();
        follow(&mut hpa, 0, 1, &[100.0; 3]);
        let changes: Vec<i32> = hpa.scale_up_events().iter().map(|e| e.change).collect();
        // 1 -> 5 -> 10 -> 20: at t = 30 the t = 0 event (+4) is older than the longest period
        // (15 s), so it is marked outdated and its slot reused for +10.
        assert_eq!(changes, vec![10, 5]);
        let mut legacy_hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
        follow(&mut legacy_hpa, 0, 1, &[100.0; 3]);
        assert!(legacy_hpa.scale_up_events().is_empty());
    }

    #[test]
    fn hpa_spec_deserialises_from_autoscaling_v2_yaml() {
        let yaml = r#"
scaleTargetRef: {apiVersion: apps/v1, kind: StatefulSet, name: lobby}
minReplicas: 2
maxReplicas: 50
metrics:
- type: External
  external:
    metric:
      name: hpa_expect_replicas
      selector:
        matchLabels: {hpa_target_name: lobby}
        matchExpressions:
        - {key: env, operator: In, values: [prod, canary]}
        - {key: paused, operator: DoesNotExist}
    target:
      type: AverageValue
      averageValue: "1"
- type: External
  external:
    metric: {name: other}
    target: {type: AverageValue, value: 5}
behavior:
  scaleUp:
    stabilizationWindowSeconds: 0
    policies:
    - {type: Pods, value: 4, periodSeconds: 15}
    selectPolicy: Max
    tolerance: "0"
  scaleDown:
    tolerance: 100m
"#;
        let spec: HpaSpec = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(spec.min_replicas(), 2);
        let first = spec.metrics[0].external.as_ref().unwrap();
        assert_eq!(
            first.target.formula(),
            Some(TargetFormula::AverageValue { milli: 1000 })
        );
        assert_eq!(
            first
                .metric
                .selector
                .as_ref()
                .unwrap()
                .to_query()
                .unwrap()
                .as_deref(),
            Some("env in (canary,prod),hpa_target_name=lobby,!paused")
        );
        // docs/hpa-behaviour.md §1.1: `type` is ignored; the set field decides.
        let second = spec.metrics[1].external.as_ref().unwrap();
        assert_eq!(
            second.target.formula(),
            Some(TargetFormula::Value { milli: 5000 })
        );
        assert_eq!(second.metric.selector, None);
        let b = spec.behavior.clone().unwrap();
        let up = b.resolved_scale_up();
        assert_eq!(up.policies.len(), 1);
        let down = b.resolved_scale_down(DEFAULT_DOWNSCALE_STABILIZATION);
        assert_eq!(down.stabilization_window, t(300));
        assert_eq!(down.select_policy, SelectPolicy::Max);
        assert_eq!(down.tolerance, Some(0.1));

        let hpa = Hpa::new(spec.clone(), v135()).unwrap();
        assert_eq!(
            (hpa.tolerances().scale_up, hpa.tolerances().scale_down),
            (0.0, 0.1)
        );
        let hpa = Hpa::new(spec, legacy()).unwrap();
        assert_eq!(hpa.tolerances().style, ToleranceStyle::Symmetric);
    }

    #[test]
    fn validation_rejects_what_the_api_server_rejects() {
        let mut both = MetricTarget::average_value("1").unwrap();
        both.value = Some(Quantity::parse("1").unwrap());
        for spec in [
            hpa_spec(5, 2, vec![avg("m")], None),
            hpa_spec(1, 10, vec![], None),
            hpa_spec(1, 10, vec![MetricSpec::external("m", both)], None),
            hpa_spec(
                1,
                10,
                vec![MetricSpec::external("m", MetricTarget::value("0").unwrap())],
                None,
            ),
        ] {
            assert!(Hpa::new(spec, v135()).is_err());
        }
        let pods: HpaSpec =
            serde_yaml::from_str("maxReplicas: 3\nmetrics:\n- type: Pods\n  pods: {}\n").unwrap();
        assert!(matches!(
            Hpa::new(pods, v135()),
            Err(SpecError::Unsupported { .. })
        ));
    }

    fn arb_input_metric() -> impl Strategy<Value = MetricInput> {
        prop_oneof![
            3 => prop::collection::vec(0.0f64..200.0, 1..3).prop_map(Ok),
            1 => Just(Err("boom".to_string())),
            1 => Just(Ok(vec![])),
        ]
    }

    fn arb_behavior() -> impl Strategy<Value = Option<Behavior>> {
        let policy = (
            prop_oneof![Just(PolicyType::Pods), Just(PolicyType::Percent)],
            1..200i32,
            1..120i32,
        )
            .prop_map(|(policy_type, value, period_seconds)| ScalingPolicy {
                policy_type,
                value,
                period_seconds,
            });
        let rules = (
            prop::option::of(0..400i32),
            prop::option::of(prop_oneof![
                Just(SelectPolicy::Max),
                Just(SelectPolicy::Min),
                Just(SelectPolicy::Disabled)
            ]),
            prop::option::of(prop::collection::vec(policy, 1..3)),
        )
            .prop_map(|(w, s, p)| ScalingRules {
                stabilization_window_seconds: w,
                select_policy: s,
                policies: p,
                tolerance: None,
            });
        prop::option::of(
            (prop::option::of(rules.clone()), prop::option::of(rules)).prop_map(
                |(scale_up, scale_down)| Behavior {
                    scale_up,
                    scale_down,
                },
            ),
        )
    }

    proptest! {
        #[test]
        fn replicas_respect_bounds_and_invalid_metrics(
            min in 0..5i32,
            span in 0..40i32,
            behavior in arb_behavior(),
            minor in prop_oneof![Just(32u32), Just(33), Just(35)],
            steps in prop::collection::vec(
                (0..60i32, 0..60i32, 0..60i32, 1..40u64, arb_input_metric(), arb_input_metric()),
                1..25,
            ),
        ) {
            let max = (min + span).max(1);
            let spec = hpa_spec(min, max, vec![avg("a"), avg("b")], behavior);
            let mut hpa = Hpa::new(spec, ControllerConfig::for_kube_minor(minor)).unwrap();
            let mut now = t(0);
            for (current, status, ready, dt, a, b) in steps {
                now += t(dt);
                let invalid = [&a, &b].iter().filter(|m| !matches!(m, Ok(v) if !v.is_empty())).count();
                let input = SyncInput {
                    spec_replicas: current,
                    status_replicas: status,
                    ready_pods: ready.min(status),
                    pods: status,
                    metrics: vec![a, b],
                };
                let o = hpa.sync(now, &input);
                if current == 0 && min > 0 {
                    prop_assert_eq!(o.replicas, 0);
                    continue;
                }
                prop_assert!(o.replicas >= min && o.replicas <= max, "{} not in [{}, {}]", o.replicas, min, max);
                if current >= min && current <= max {
                    if invalid == 2 {
                        prop_assert_eq!(o.replicas, current);
                    }
                    if invalid > 0 {
                        prop_assert!(o.replicas >= current);
                    }
                }
            }
        }
    }
}
