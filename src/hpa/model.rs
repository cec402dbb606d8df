//! A pure, executable model of the kube-controller-manager HPA controller's decision
//! procedure for `External` metrics (REFERENCE.md §1).
//!
//! One [`Hpa`] holds what the controller keeps in memory for one HorizontalPodAutoscaler
//! (recommendation history, scale-up and scale-down events) plus the object's
//! `status.conditions`. [`Hpa::sync`] runs one reconcile: pre-checks, one proposal per metric,
//! the invalid-metric rules, then normalisation with or without `behavior`.
//!
//! **Time.** Every instant is a [`Duration`] since an arbitrary epoch chosen by the caller (a
//! simulated clock). The model never reads a clock. Window tests copy Go's strict
//! `Before`/`After` comparisons exactly, so with syncs exactly 15 s apart a sample exactly one
//! window old is *not* "after" the cutoff (behavior path) yet *not* "before" it either (legacy
//! path). The real controller's syncs drift a little past 15 s; a simulator that wants that
//! can add a few milliseconds per sync.
//!
//! **Current replicas.** As in Go (`currentReplicas := scale.Spec.Replicas`), pre-checks,
//! stabilisation, rate limits and the "did we rescale" test all use `spec.replicas`.
//! `status.replicas` only enters the AverageValue formula (REFERENCE.md §1.5), and the number
//! of Ready pods only the Value formula (REFERENCE.md §1.3).
//!
//! Facts were checked against `pkg/controller/podautoscaler/horizontal.go` and
//! `replica_calculator.go` (the `Tolerances` era, 1.33+, and its legacy predecessor).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::quantity::{milli_ceil, Quantity};

/// The controller syncs every HPA every 15 s, one GET per metric per sync (REFERENCE.md §1.7.5).
pub const SYNC_PERIOD: Duration = Duration::from_secs(15);
/// `--horizontal-pod-autoscaler-tolerance` default (REFERENCE.md §1.5).
pub const DEFAULT_TOLERANCE: f64 = 0.1;
/// `--horizontal-pod-autoscaler-downscale-stabilization` default (REFERENCE.md §1.7.3/§1.7.4).
pub const DEFAULT_DOWNSCALE_STABILIZATION: Duration = Duration::from_secs(300);
/// Legacy scale-up cap `max(2 × current, 4)` (REFERENCE.md §1.7.3).
const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;

// ---------------------------------------------------------------------------------------------
// The HPA spec (autoscaling/v2 JSON/YAML field names)
// ---------------------------------------------------------------------------------------------

/// The parts of `HorizontalPodAutoscaler.spec` the decision uses. Unknown fields (such as
/// `scaleTargetRef`) are ignored so a whole HPA spec can be embedded in a scenario.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaSpec {
    /// Defaults to 1 (REFERENCE.md §1.7.1). 0 needs `HPAScaleToZero` (REFERENCE.md §1.7.7).
    #[serde(default)]
    pub min_replicas: Option<i32>,
    pub max_replicas: i32,
    #[serde(default)]
    pub metrics: Vec<MetricSpec>,
    /// `None` selects the legacy normalisation (REFERENCE.md §1.7.3).
    #[serde(default)]
    pub behavior: Option<Behavior>,
}

impl HpaSpec {
    /// `minReplicas`, defaulted to 1.
    pub fn min_replicas(&self) -> i32 {
        self.min_replicas.unwrap_or(1)
    }
}

/// `spec.metrics[]`. Only `type: External` is modelled.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricSpec {
    #[serde(rename = "type")]
    pub source_type: MetricSourceType,
    #[serde(default)]
    pub external: Option<ExternalMetricSource>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum MetricSourceType {
    External,
    Object,
    Pods,
    Resource,
    ContainerResource,
}

/// `spec.metrics[].external`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalMetricSource {
    pub metric: MetricIdentifier,
    pub target: MetricTarget,
}

/// `external.metric`: the name and the label selector sent to the adapter.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricIdentifier {
    pub name: String,
    #[serde(default)]
    pub selector: Option<MetricSelector>,
}

/// A `metav1.LabelSelector` as written in the HPA.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<SelectorRequirement>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl MetricSelector {
    /// The `labelSelector` query value the HPA sends, unencoded, rendered by the one selector
    /// renderer ([`crate::selector::label_selector_to_string`]). `None` when there is nothing to
    /// select on: a nil or empty selector sends no `labelSelector` parameter
    /// (docs/hpa-behaviour.md §1.2). A requirement the API server would reject is an error.
    pub fn to_query(&self) -> Result<Option<String>, crate::selector::SelectorError> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
        let object = meta::LabelSelector {
            match_labels: Some(self.match_labels.clone()),
            match_expressions: Some(
                self.match_expressions
                    .iter()
                    .map(|r| meta::LabelSelectorRequirement {
                        key: r.key.clone(),
                        operator: r.operator.as_str().to_string(),
                        values: Some(r.values.clone()),
                    })
                    .collect(),
            ),
        };
        let text = crate::selector::label_selector_to_string(Some(&object))?;
        Ok((!text.is_empty()).then_some(text))
    }
}

impl SelectorOperator {
    /// The operator as `metav1.LabelSelectorRequirement` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SelectorOperator::In => "In",
            SelectorOperator::NotIn => "NotIn",
            SelectorOperator::Exists => "Exists",
            SelectorOperator::DoesNotExist => "DoesNotExist",
        }
    }
}

/// `external.target`. The formula is chosen by which field is set, `averageValue` first, then
/// `value`; `type` is never read (REFERENCE.md §1.1).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricTarget {
    /// Kept for validation only; never decides the formula (REFERENCE.md §1.1).
    #[serde(rename = "type", default)]
    pub target_type: Option<String>,
    #[serde(default)]
    pub value: Option<Quantity>,
    #[serde(default)]
    pub average_value: Option<Quantity>,
    #[serde(default)]
    pub average_utilization: Option<i32>,
}

/// The formula a target runs, with the target's milli value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetFormula {
    /// `desired = ceil(sum / averageValue)` (REFERENCE.md §1.4).
    AverageValue { milli: i64 },
    /// `desired = ceil(sum / value × readyPods)` (REFERENCE.md §1.3).
    Value { milli: i64 },
}

impl MetricTarget {
    /// An `averageValue` target.
    pub fn average_value(q: &str) -> Result<Self, SpecError> {
        Ok(MetricTarget {
            target_type: Some("AverageValue".into()),
            value: None,
            average_value: Some(parse_q(q)?),
            average_utilization: None,
        })
    }

    /// A `value` target.
    pub fn value(q: &str) -> Result<Self, SpecError> {
        Ok(MetricTarget {
            target_type: Some("Value".into()),
            value: Some(parse_q(q)?),
            average_value: None,
            average_utilization: None,
        })
    }

    /// Which formula runs: `averageValue` first, then `value`, whatever `type` says
    /// (REFERENCE.md §1.1). `None` when neither is set.
    pub fn formula(&self) -> Option<TargetFormula> {
        if let Some(q) = &self.average_value {
            return Some(TargetFormula::AverageValue {
                milli: q.milli_value(),
            });
        }
        self.value.as_ref().map(|q| TargetFormula::Value {
            milli: q.milli_value(),
        })
    }
}

fn parse_q(q: &str) -> Result<Quantity, SpecError> {
    Quantity::parse(q).map_err(|e| SpecError::Invalid(e.to_string()))
}

impl MetricSpec {
    /// An External metric with no selector.
    pub fn external(name: &str, target: MetricTarget) -> Self {
        MetricSpec {
            source_type: MetricSourceType::External,
            external: Some(ExternalMetricSource {
                metric: MetricIdentifier {
                    name: name.into(),
                    selector: None,
                },
                target,
            }),
        }
    }
}

/// `spec.behavior` (REFERENCE.md §1.7.4).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Behavior {
    #[serde(default)]
    pub scale_up: Option<ScalingRules>,
    #[serde(default)]
    pub scale_down: Option<ScalingRules>,
}

/// `behavior.scaleUp` / `behavior.scaleDown`. Missing fields take the API defaults
/// (REFERENCE.md §1.7.4), see [`ResolvedRules`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRules {
    #[serde(default)]
    pub stabilization_window_seconds: Option<i32>,
    #[serde(default)]
    pub select_policy: Option<SelectPolicy>,
    #[serde(default)]
    pub policies: Option<Vec<ScalingPolicy>>,
    /// Per-HPA tolerance, honoured only in the 1.33+ style with the gate on (REFERENCE.md §1.5).
    #[serde(default)]
    pub tolerance: Option<Quantity>,
}

/// `policies[]`: `{type, value, periodSeconds}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingPolicy {
    #[serde(rename = "type")]
    pub policy_type: PolicyType,
    pub value: i32,
    pub period_seconds: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum PolicyType {
    Pods,
    Percent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum SelectPolicy {
    Max,
    Min,
    Disabled,
}

/// One direction's rules after API and controller defaults (REFERENCE.md §1.7.4).
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedRules {
    pub stabilization_window: Duration,
    pub select_policy: SelectPolicy,
    pub policies: Vec<ScalingPolicy>,
    pub tolerance: Option<f64>,
}

impl Behavior {
    /// Scale-up rules with defaults: window 0 s, Pods 4/15 s and Percent 100/15 s, `Max`
    /// (REFERENCE.md §1.7.4).
    pub fn resolved_scale_up(&self) -> ResolvedRules {
        resolve(
            self.scale_up.as_ref(),
            Duration::ZERO,
            vec![
                ScalingPolicy {
                    policy_type: PolicyType::Pods,
                    value: 4,
                    period_seconds: 15,
                },
                ScalingPolicy {
                    policy_type: PolicyType::Percent,
                    value: 100,
                    period_seconds: 15,
                },
            ],
        )
    }

    /// Scale-down rules with defaults: window from the controller flag (300 s by default),
    /// Percent 100/15 s, `Max` (REFERENCE.md §1.7.4).
    pub fn resolved_scale_down(&self, downscale_stabilization: Duration) -> ResolvedRules {
        resolve(
            self.scale_down.as_ref(),
            downscale_stabilization,
            vec![ScalingPolicy {
                policy_type: PolicyType::Percent,
                value: 100,
                period_seconds: 15,
            }],
        )
    }
}

fn resolve(
    rules: Option<&ScalingRules>,
    default_window: Duration,
    default_policies: Vec<ScalingPolicy>,
) -> ResolvedRules {
    let rules = rules.cloned().unwrap_or_default();
    ResolvedRules {
        stabilization_window: rules
            .stabilization_window_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(default_window),
        select_policy: rules.select_policy.unwrap_or(SelectPolicy::Max),
        policies: rules.policies.unwrap_or(default_policies),
        tolerance: rules.tolerance.map(|q| q.as_f64()),
    }
}

/// A spec the API server would reject, or one this model does not cover.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("invalid HPA spec: {0}")]
    Invalid(String),
    #[error("metric {index}: only External metrics are modelled, not {source_type:?}")]
    Unsupported {
        index: usize,
        source_type: MetricSourceType,
    },
}

impl HpaSpec {
    /// The API server's validation, as far as the model depends on it.
    pub fn validate(&self) -> Result<(), SpecError> {
        let bad = |m: String| Err(SpecError::Invalid(m));
        let min = self.min_replicas();
        if min < 0 {
            return bad("minReplicas must be at least 0".into());
        }
        if self.max_replicas < 1 || self.max_replicas < min {
            return bad("maxReplicas must be at least 1 and at least minReplicas".into());
        }
        if self.metrics.is_empty() {
            return bad("at least one metric is needed".into());
        }
        for (index, m) in self.metrics.iter().enumerate() {
            if m.source_type != MetricSourceType::External {
                return Err(SpecError::Unsupported {
                    index,
                    source_type: m.source_type,
                });
            }
            let Some(ext) = &m.external else {
                return bad(format!("metrics[{index}].external is required"));
            };
            let t = &ext.target;
            if let Some(ty) = &t.target_type {
                if !["Value", "AverageValue", "Utilization"].contains(&ty.as_str()) {
                    return bad(format!(
                        "metrics[{index}].target.type {ty:?} is unsupported"
                    ));
                }
            }
            match (&t.value, &t.average_value) {
                (None, None) => {
                    return bad(format!(
                        "metrics[{index}]: must set either a target value or a per-pod target"
                    ))
                }
                (Some(_), Some(_)) => {
                    return bad(format!(
                        "metrics[{index}]: may not set both a target value and a per-pod target"
                    ))
                }
                _ => {}
            }
            for q in [&t.value, &t.average_value].into_iter().flatten() {
                if q.milli_value() <= 0 {
                    return bad(format!("metrics[{index}]: target must be positive"));
                }
            }
        }
        if let Some(b) = &self.behavior {
            for (dir, rules) in [("scaleUp", &b.scale_up), ("scaleDown", &b.scale_down)] {
                let Some(r) = rules else { continue };
                if let Some(w) = r.stabilization_window_seconds {
                    if !(0..=3600).contains(&w) {
                        return bad(format!("{dir}.stabilizationWindowSeconds must be 0..=3600"));
                    }
                }
                if let Some(ps) = &r.policies {
                    if ps.is_empty() {
                        return bad(format!("{dir}: must specify at least one policy"));
                    }
                    for p in ps {
                        if p.value <= 0 || !(1..=1800).contains(&p.period_seconds) {
                            return bad(format!(
                                "{dir}: policy value must be > 0 and periodSeconds 1..=1800"
                            ));
                        }
                    }
                }
                if let Some(t) = &r.tolerance {
                    if t.as_f64() < 0.0 {
                        return bad(format!("{dir}.tolerance must be >= 0"));
                    }
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Controller configuration
// ---------------------------------------------------------------------------------------------

/// How the tolerance band is tested (REFERENCE.md §1.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToleranceStyle {
    /// Before 1.33: `|1 - ratio| <= tolerance`, in float64 as Go computes it.
    Symmetric,
    /// 1.33 and later: `1 - down <= ratio <= 1 + up`, both ends inclusive. `configurable` is the
    /// `HPAConfigurableTolerance` gate (alpha, off, in 1.33–1.34; beta, on, from 1.35): only
    /// with it on are `behavior.scaleUp/scaleDown.tolerance` honoured.
    PerDirection { configurable: bool },
}

impl ToleranceStyle {
    /// The style and default gate of a Kubernetes 1.`minor` controller (REFERENCE.md §1.5).
    pub fn for_kube_minor(minor: u32) -> Self {
        if minor < 33 {
            ToleranceStyle::Symmetric
        } else {
            ToleranceStyle::PerDirection {
                configurable: minor >= 35,
            }
        }
    }
}

/// kube-controller-manager flags the decision depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ControllerConfig {
    /// `--horizontal-pod-autoscaler-tolerance` (REFERENCE.md §1.5).
    pub tolerance: f64,
    pub tolerance_style: ToleranceStyle,
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (REFERENCE.md §1.7.3/§1.7.4).
    pub downscale_stabilization: Duration,
}

impl ControllerConfig {
    /// Flag defaults of a Kubernetes 1.`minor` controller.
    pub fn for_kube_minor(minor: u32) -> Self {
        ControllerConfig {
            tolerance: DEFAULT_TOLERANCE,
            tolerance_style: ToleranceStyle::for_kube_minor(minor),
            downscale_stabilization: DEFAULT_DOWNSCALE_STABILIZATION,
        }
    }
}

impl Default for ControllerConfig {
    /// Kubernetes 1.35 defaults: tolerance 0.1, per-direction band with the gate on, 300 s.
    fn default() -> Self {
        ControllerConfig::for_kube_minor(35)
    }
}

/// The band a usage ratio must leave before a metric proposes a change (REFERENCE.md §1.5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerances {
    pub style: ToleranceStyle,
    pub scale_down: f64,
    pub scale_up: f64,
}

impl Tolerances {
    /// REFERENCE.md §1.5: legacy `|1-ratio| <= tol`; 1.33+ `1-down <= ratio <= 1+up`.
    /// NaN is never within (as in Go).
    pub fn is_within(&self, ratio: f64) -> bool {
        match self.style {
            ToleranceStyle::Symmetric => (1.0 - ratio).abs() <= self.scale_up,
            ToleranceStyle::PerDirection { .. } => {
                (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
            }
        }
    }
}

/// Without `behavior`, the most one sync may scale up to: `max(2 × current, 4)`
/// (docs/hpa-behaviour.md §1.7.3), computed in float64 as the controller does.
pub fn legacy_scale_up_limit(current: i64) -> i64 {
    (SCALE_UP_LIMIT_FACTOR * current as f64).max(SCALE_UP_LIMIT_MINIMUM) as i64
}

/// The AverageValue path's usage ratio, `sum / (averageValue × replicas)` on milli values in
/// float64, as the controller computes it (docs/hpa-behaviour.md §1.5). `replicas` is
/// `status.replicas`.
pub fn average_value_ratio(usage_milli: i64, target_milli: i64, replicas: i64) -> f64 {
    usage_milli as f64 / (target_milli as f64 * replicas as f64)
}

// ---------------------------------------------------------------------------------------------
// Inputs and outputs of one sync
// ---------------------------------------------------------------------------------------------

/// What one metric GET returned: the item values, or the error text. An empty list is invalid
/// (REFERENCE.md §1.2/§1.6).
pub type MetricInput = Result<Vec<f64>, String>;

/// What the controller reads in one sync besides the HPA itself.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncInput {
    /// `scale.spec.replicas`: the controller's "current replicas" (REFERENCE.md §1.7.1).
    pub spec_replicas: i32,
    /// `scale.status.replicas`: the AverageValue denominator; above `spec_replicas` during a
    /// surge rollout (REFERENCE.md §1.5).
    pub status_replicas: i32,
    /// Pods matching the target's selector that are Running and Ready (REFERENCE.md §1.3).
    pub ready_pods: i32,
    /// All pods matching the target's selector. The Value formula fails (invalid metric) when
    /// it needs the ready count and there are none at all.
    pub pods: i32,
    /// One answer per `spec.metrics` entry, in order. A missing entry counts as an error.
    pub metrics: Vec<MetricInput>,
}

impl SyncInput {
    /// A settled workload: spec = status = ready = all pods = `replicas`.
    pub fn steady(replicas: i32, metrics: Vec<MetricInput>) -> Self {
        SyncInput {
            spec_replicas: replicas,
            status_replicas: replicas,
            ready_pods: replicas,
            pods: replicas,
            metrics,
        }
    }
}

/// One metric's valid proposal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricProposal {
    pub formula: TargetFormula,
    /// Sum of the items' milli values, each rounded up (REFERENCE.md §1.2).
    pub usage_milli: i64,
    /// The ratio tested against the tolerance band (REFERENCE.md §1.5).
    pub ratio: f64,
    /// True when the ratio fell inside the band, so the proposal is the baseline count.
    pub within_tolerance: bool,
    pub replicas: i32,
}

/// One metric's result in a sync.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricOutcome {
    pub name: String,
    /// `Err` holds the error message that becomes the condition and event text.
    pub result: Result<MetricProposal, String>,
}

/// The HPA condition types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConditionType {
    AbleToScale,
    ScalingActive,
    ScalingLimited,
}

/// An entry of `status.conditions`.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub condition_type: ConditionType,
    pub status: bool,
    pub reason: String,
    pub message: String,
    pub last_transition: Duration,
}

/// A Kubernetes Event the controller would record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// Which rule shaped the final count after stabilisation (the `ScalingLimited` reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    DesiredWithinRange,
    /// Legacy `max(2×current, 4)` (REFERENCE.md §1.7.3) or a scale-up policy (REFERENCE.md §1.7.4).
    ScaleUpLimit,
    /// A scale-down policy (REFERENCE.md §1.7.4).
    ScaleDownLimit,
    /// `maxReplicas`.
    TooManyReplicas,
    /// `minReplicas`.
    TooFewReplicas,
}

impl Limit {
    pub fn reason(self) -> &'static str {
        match self {
            Limit::DesiredWithinRange => "DesiredWithinRange",
            Limit::ScaleUpLimit => "ScaleUpLimit",
            Limit::ScaleDownLimit => "ScaleDownLimit",
            Limit::TooManyReplicas => "TooManyReplicas",
            Limit::TooFewReplicas => "TooFewReplicas",
        }
    }
}

/// Whether stabilisation changed the metric's recommendation (the `AbleToScale` reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stabilization {
    /// `ReadyForNewScale`: the recommendation passed unchanged.
    Unchanged,
    /// Held down by a recent lower recommendation (behavior scale-up window).
    ScaleUpStabilized,
    /// Held up by a recent higher recommendation (REFERENCE.md §1.7.3/§1.7.4/§1.7.6).
    ScaleDownStabilized,
}

/// Which branch of the reconcile decided this sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// `spec.replicas == 0` with `minReplicas > 0` (REFERENCE.md §1.7.1).
    ScalingDisabled,
    /// Current above `maxReplicas`: set to max, metrics skipped (REFERENCE.md §1.7.1).
    AboveMaxReplicas,
    /// Current below `minReplicas`: set to min, metrics skipped (REFERENCE.md §1.7.1).
    BelowMinReplicas,
    /// Every metric invalid: no scaling (REFERENCE.md §1.6).
    AllMetricsInvalid { invalid: usize },
    /// Some metric invalid and the valid ones propose fewer than `spec.replicas`: no scaling
    /// (REFERENCE.md §1.6, kubernetes#99514).
    ScaleDownBlockedByInvalidMetric { invalid: usize, proposed: i32 },
    /// Metrics gave a proposal; it went through stabilisation and limits (REFERENCE.md §1.7).
    /// `invalid` > 0 means some metric failed but the valid ones scale up or hold.
    Normalized {
        invalid: usize,
        stabilization: Stabilization,
        limit: Limit,
    },
}

/// Everything one sync decided.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncOutcome {
    pub at: Duration,
    /// `spec.replicas` as read ("current replicas").
    pub current_replicas: i32,
    /// `spec.replicas` after this sync: the new count when `rescaled`, else `current_replicas`.
    pub replicas: i32,
    pub rescaled: bool,
    pub decision: Decision,
    /// One entry per metric, in spec order; empty when a pre-check skipped the metrics.
    pub metrics: Vec<MetricOutcome>,
    /// The maximum valid proposal (REFERENCE.md §1.7.2), when metrics were consulted.
    pub metric_replicas: Option<i32>,
    /// The recommendation after stabilisation, before rate limits and [min, max].
    pub stabilized_replicas: Option<i32>,
    /// The HPA's whole `status.conditions` after this sync.
    pub conditions: Vec<Condition>,
    /// Events recorded during this sync.
    pub events: Vec<Event>,
}

impl SyncOutcome {
    pub fn condition(&self, t: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.condition_type == t)
    }
}

impl fmt::Display for SyncOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "t={}s {} -> {} ({:?})",
            self.at.as_secs_f64(),
            self.current_replicas,
            self.replicas,
            self.decision
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Controller state
// ---------------------------------------------------------------------------------------------

/// A recommendation kept for stabilisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampedRecommendation {
    pub replicas: i32,
    pub at: Duration,
}

/// A scale event kept for rate policies; `change` is positive in both lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleEvent {
    pub change: i32,
    pub at: Duration,
    pub outdated: bool,
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

/// `ts.After(now - window)` without underflow.
fn is_after(ts: Duration, now: Duration, window: Duration) -> bool {
    ts + window > now
}

/// `ts.Before(now - window)` without underflow.
fn is_before(ts: Duration, now: Duration, window: Duration) -> bool {
    ts + window < now
}

fn secs(s: i32) -> Duration {
    Duration::from_secs(s.max(0) as u64)
}

impl Hpa {
    /// A fresh controller for a valid spec. Its first sync records `spec.replicas` as the
    /// initial recommendation (REFERENCE.md §1.7.6).
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
    /// (REFERENCE.md §1.7.6).
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
    /// count as the initial recommendation (REFERENCE.md §1.7.6).
    pub fn restart_controller(&mut self) {
        self.recommendations.clear();
        self.scale_up_events.clear();
        self.scale_down_events.clear();
    }

    /// Records `current` at `now` if no recommendation is kept yet, as every sync does first
    /// (REFERENCE.md §1.7.6).
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
    /// `behavior.*.tolerance` only in the 1.33+ style with the gate on (REFERENCE.md §1.5).
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

    /// One reconcile of this HPA at `now` (REFERENCE.md §1.7).
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
        // REFERENCE.md §1.7.6: recorded before anything else, only when no history is kept.
        self.record_initial_recommendation(now, current);

        let (desired, rescale, decision) = if input.spec_replicas == 0 && min != 0 {
            // REFERENCE.md §1.7.1: scaling disabled.
            self.set_condition(
                now,
                ConditionType::ScalingActive,
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero".into(),
            );
            (0, false, Decision::ScalingDisabled)
        } else if current > max {
            // REFERENCE.md §1.7.1: current above max, metrics skipped.
            (max, true, Decision::AboveMaxReplicas)
        } else if current < min {
            // REFERENCE.md §1.7.1: current below min, metrics skipped.
            (min, true, Decision::BelowMinReplicas)
        } else {
            let computed = self.compute_replicas_for_metrics(input);
            metrics = computed.outcomes;
            for m in &metrics {
                if let Err(e) = &m.result {
                    events.push(Event {
                        warning: true,
                        reason: "FailedGetExternalMetric".into(),
                        message: e.clone(),
                    });
                }
            }
            let total = self.spec.metrics.len();
            let invalid = computed.invalid;
            // REFERENCE.md §1.6: all invalid, or some invalid and the valid ones would scale
            // below spec.replicas: no scaling at all, and no recommendation is recorded.
            if invalid >= total || (invalid > 0 && computed.replicas < input.spec_replicas) {
                let first = metrics
                    .iter()
                    .find_map(|m| m.result.as_ref().err().cloned())
                    .unwrap_or_default();
                self.set_condition(
                    now,
                    ConditionType::ScalingActive,
                    false,
                    "FailedGetExternalMetric",
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
            // REFERENCE.md §1.7.2: the maximum proposal (never below 0).
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

    /// Every metric's proposal and the maximum over the valid ones (REFERENCE.md §1.6/§1.7.2).
    fn compute_replicas_for_metrics(&self, input: &SyncInput) -> ComputedMetrics {
        let tolerances = self.tolerances();
        let mut out = ComputedMetrics {
            outcomes: Vec::new(),
            invalid: 0,
            replicas: 0,
            metric_name: String::new(),
        };
        for (i, spec) in self.spec.metrics.iter().enumerate() {
            let ext = spec
                .external
                .as_ref()
                .expect("validated: External metrics have a source");
            let name = ext.metric.name.clone();
            let result = match input.metrics.get(i) {
                None => Err(format!(
                    "unable to get external metric {name}: no answer in the model input"
                )),
                Some(answer) => external_metric_replicas(ext, answer, input, &tolerances),
            };
            match &result {
                Err(_) => out.invalid += 1,
                // Go: `if replicas == 0 || proposal > replicas` (REFERENCE.md §1.7.2).
                Ok(p) => {
                    if out.replicas == 0 || p.replicas > out.replicas {
                        out.replicas = p.replicas;
                        out.metric_name = format!("external metric {name}");
                    }
                }
            }
            out.outcomes.push(MetricOutcome { name, result });
        }
        out
    }

    /// Without `behavior` (REFERENCE.md §1.7.3): max over the downscale window, then
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

        // REFERENCE.md §1.7.3: scale-up cap max(2×current, 4), then [min, max].
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

    /// With `behavior` (REFERENCE.md §1.7.4): stabilisation windows, then rate policies, then
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
        // current clamped into [up, down] (REFERENCE.md §1.7.4).
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

        // Rate policies and [min, max] (REFERENCE.md §1.7.4).
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
    /// (REFERENCE.md §1.7.4).
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

/// One External metric's proposal (REFERENCE.md §1.1–§1.5).
fn external_metric_replicas(
    ext: &ExternalMetricSource,
    answer: &MetricInput,
    input: &SyncInput,
    tolerances: &Tolerances,
) -> Result<MetricProposal, String> {
    let name = &ext.metric.name;
    let fail = |e: &str| format!("unable to get external metric {name}: {e}");
    let formula = ext.target.formula().ok_or_else(|| {
        "invalid external metric source: neither a value target nor an average value target was set"
            .to_string()
    })?;
    let items = answer.as_ref().map_err(|e| fail(e))?;
    // REFERENCE.md §1.2: an empty list is an error, not zero.
    if items.is_empty() {
        return Err(fail("no metrics returned from external metrics API"));
    }
    // REFERENCE.md §1.2: every item is summed, each as its milli value rounded up.
    let mut usage: i64 = 0;
    for v in items {
        let m = milli_ceil(*v).ok_or_else(|| fail(&format!("item value {v} is not a quantity")))?;
        usage = usage.saturating_add(m);
    }
    match formula {
        TargetFormula::AverageValue { milli: target } => {
            // REFERENCE.md §1.4/§1.5: ratio = sum / (averageValue × status.replicas); inside
            // the band the proposal is status.replicas, else ceil(sum / averageValue).
            let status = input.status_replicas;
            let ratio = average_value_ratio(usage, target, i64::from(status));
            let within = tolerances.is_within(ratio);
            let replicas = if within {
                status
            } else {
                let r = (usage as f64 / target as f64).ceil();
                if r > i32::MAX as f64 {
                    i32::MAX
                } else {
                    r as i32
                }
            };
            Ok(MetricProposal {
                formula,
                usage_milli: usage,
                ratio,
                within_tolerance: within,
                replicas,
            })
        }
        TargetFormula::Value { milli: target } => {
            // REFERENCE.md §1.3: ratio = sum / value, compared with the band against
            // spec.replicas; outside it, ceil(ratio × readyPods); with spec.replicas == 0,
            // ceil(ratio) and no tolerance.
            let ratio = usage as f64 / target as f64;
            let spec = input.spec_replicas;
            if spec == 0 {
                return Ok(MetricProposal {
                    formula,
                    usage_milli: usage,
                    ratio,
                    within_tolerance: false,
                    replicas: ratio.ceil() as i32,
                });
            }
            if tolerances.is_within(ratio) {
                return Ok(MetricProposal {
                    formula,
                    usage_milli: usage,
                    ratio,
                    within_tolerance: true,
                    replicas: spec,
                });
            }
            if input.pods <= 0 {
                return Err(
                    "unable to calculate ready pods: no pods returned by selector while calculating replica count"
                        .to_string(),
                );
            }
            let f = ratio * input.ready_pods.max(0) as f64;
            let replicas = if f > i32::MAX as f64 {
                i32::MAX
            } else {
                f.ceil() as i32
            };
            Ok(MetricProposal {
                formula,
                usage_milli: usage,
                ratio,
                within_tolerance: false,
                replicas,
            })
        }
    }
}

/// Highest count the scale-up policies allow (REFERENCE.md §1.7.4).
fn scale_up_limit(
    now: Duration,
    current: i32,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    rules: &ResolvedRules,
) -> i32 {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return current,
        SelectPolicy::Min => (i32::MAX, std::cmp::min),
        SelectPolicy::Max => (i32::MIN, std::cmp::max),
    };
    for p in &rules.policies {
        let start = period_start(now, current, up_events, down_events, p.period_seconds);
        let proposed = match p.policy_type {
            PolicyType::Pods => start.saturating_add(p.value),
            // Percent up rounds up (REFERENCE.md §1.7.4).
            PolicyType::Percent => (start as f64 * (1.0 + p.value as f64 / 100.0)).ceil() as i32,
        };
        result = pick(result, proposed);
    }
    result
}

/// Lowest count the scale-down policies allow (REFERENCE.md §1.7.4).
fn scale_down_limit(
    now: Duration,
    current: i32,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    rules: &ResolvedRules,
) -> i32 {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return current,
        SelectPolicy::Min => (i32::MIN, std::cmp::max),
        SelectPolicy::Max => (i32::MAX, std::cmp::min),
    };
    for p in &rules.policies {
        let start = period_start(now, current, up_events, down_events, p.period_seconds);
        let proposed = match p.policy_type {
            PolicyType::Pods => start.saturating_sub(p.value),
            // Percent down truncates (REFERENCE.md §1.7.4).
            PolicyType::Percent => (start as f64 * (1.0 - p.value as f64 / 100.0)) as i32,
        };
        result = pick(result, proposed);
    }
    result
}

/// `periodStart = current − added in period + removed in period` (REFERENCE.md §1.7.4).
fn period_start(
    now: Duration,
    current: i32,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    period_seconds: i32,
) -> i32 {
    let in_period = |events: &[ScaleEvent]| -> i32 {
        events
            .iter()
            .filter(|e| is_after(e.at, now, secs(period_seconds)))
            .map(|e| e.change)
            .sum()
    };
    current - in_period(up_events) + in_period(down_events)
}

#[cfg(test)]
mod tests {
    use super::*;
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

    // REFERENCE.md §1.5: 10 -> 11 at tolerance 0.1.
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

    // REFERENCE.md §1.3: an absolute D through a Value target is multiplied by ready pods.
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
        // at 4 (REFERENCE.md §1.7.7).
        let mut hpa = Hpa::new(hpa_spec(0, 100, vec![value], None), legacy()).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(0, vec![one(5.0)]));
        assert_eq!(proposal(&o, 0).replicas, 5);
        assert_eq!(o.replicas, 4);
    }

    // REFERENCE.md §1.5: rollout trap.
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

    // REFERENCE.md §1.7.3.
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

    // REFERENCE.md §1.7.4: default behavior rates. Checked against calculateScaleUpLimitWith-
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

    // REFERENCE.md §1.7.3/§1.7.4: the drop waits for the downscale window.
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

    // REFERENCE.md §1.6.
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
        // REFERENCE.md §1.6: a served 0 is valid and drives a scale-in to minReplicas.
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

    // REFERENCE.md §1.7.6.
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

    // REFERENCE.md §1.7.1.
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
        // REFERENCE.md §1.1: `type` is ignored; the set field decides.
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
