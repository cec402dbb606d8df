//! `HorizontalPodAutoscaler.spec` as the model reads it (autoscaling/v2 field names), the API
//! defaults of `behavior`, and the validation the API server applies (docs/hpa-behaviour.md
//! §1.1, §1.7.4).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::quantity::Quantity;
use std::time::Duration;

/// The parts of `HorizontalPodAutoscaler.spec` the decision uses. Unknown fields (such as
/// `scaleTargetRef`) are ignored so a whole HPA spec can be embedded in a scenario.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaSpec {
    /// Defaults to 1 (docs/hpa-behaviour.md §1.7.1). 0 needs `HPAScaleToZero` (docs/hpa-behaviour.md §1.7.7).
    #[serde(default)]
    pub min_replicas: Option<i32>,
    pub max_replicas: i32,
    #[serde(default)]
    pub metrics: Vec<MetricSpec>,
    /// `None` selects the legacy normalisation (docs/hpa-behaviour.md §1.7.3).
    #[serde(default)]
    pub behavior: Option<Behavior>,
}

impl HpaSpec {
    /// `minReplicas`, defaulted to 1.
    pub fn min_replicas(&self) -> i32 {
        self.min_replicas.unwrap_or(1)
    }

    /// Whether some metric is Object or External, the kinds that may take a target to 0 and
    /// back (docs/hpa-behaviour.md §7.1).
    pub fn has_object_or_external_metric(&self) -> bool {
        self.metrics.iter().any(|m| {
            matches!(
                m.source_type,
                MetricSourceType::External | MetricSourceType::Object
            )
        })
    }
}

/// `spec.metrics[]`. `External` and `Object` are modelled exactly; `Pods` and `Resource` from
/// their average only (docs/hpa-behaviour.md §1.9); `ContainerResource` not at all.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricSpec {
    #[serde(rename = "type")]
    pub source_type: MetricSourceType,
    #[serde(default)]
    pub external: Option<ExternalMetricSource>,
    #[serde(default)]
    pub object: Option<ObjectMetricSource>,
    /// Read only from the HPA's `status.currentMetrics` (`explain`): see [`super::pod_metrics`].
    #[serde(default)]
    pub pods: Option<PodsMetricSource>,
    /// Read only from the HPA's `status.currentMetrics` (`explain`): see [`super::pod_metrics`].
    #[serde(default)]
    pub resource: Option<ResourceMetricSource>,
}

/// `spec.metrics[].pods`: a per-pod custom metric averaged over the target's pods.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodsMetricSource {
    pub metric: MetricIdentifier,
    pub target: MetricTarget,
}

/// `spec.metrics[].resource`: CPU or memory of the target's pods.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceMetricSource {
    pub name: String,
    pub target: MetricTarget,
}

/// `spec.metrics[].object` (docs/hpa-behaviour.md §6).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMetricSource {
    pub described_object: DescribedObject,
    pub metric: MetricIdentifier,
    pub target: MetricTarget,
}

/// `object.describedObject`: the object whose metric is fetched.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribedObject {
    #[serde(default)]
    pub api_version: Option<String>,
    pub kind: String,
    pub name: String,
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
    /// renderer ([`hpa_bridge_rules::selector::label_selector_to_string`]). `None` when there is nothing to
    /// select on: a nil or empty selector sends no `labelSelector` parameter
    /// (docs/hpa-behaviour.md §1.2). A requirement the API server would reject is an error.
    pub fn to_query(&self) -> Result<Option<String>, hpa_bridge_rules::selector::SelectorError> {
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
        let text = hpa_bridge_rules::selector::label_selector_to_string(Some(&object))?;
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
/// `value`; `type` is never read (docs/hpa-behaviour.md §1.1).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricTarget {
    /// Kept for validation only; never decides the formula (docs/hpa-behaviour.md §1.1).
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
    /// `desired = ceil(sum / averageValue)` (docs/hpa-behaviour.md §1.4).
    AverageValue { milli: i64 },
    /// `desired = ceil(sum / value × readyPods)` (docs/hpa-behaviour.md §1.3).
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

    /// Which formula an Object metric runs: chosen by `type`, unlike External
    /// (docs/hpa-behaviour.md §6.1). `None` when the type's field is not set or the type is
    /// neither `Value` nor `AverageValue`.
    pub fn object_formula(&self) -> Option<TargetFormula> {
        match self.target_type.as_deref() {
            Some("Value") => self.value.as_ref().map(|q| TargetFormula::Value {
                milli: q.milli_value(),
            }),
            Some("AverageValue") => {
                self.average_value
                    .as_ref()
                    .map(|q| TargetFormula::AverageValue {
                        milli: q.milli_value(),
                    })
            }
            _ => None,
        }
    }

    /// Which formula runs: `averageValue` first, then `value`, whatever `type` says
    /// (docs/hpa-behaviour.md §1.1). `None` when neither is set.
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
            object: None,
            pods: None,
            resource: None,
        }
    }

    /// An Object metric of `kind`/`name` (apps/v1) with no selector.
    pub fn object(kind: &str, name: &str, metric: &str, target: MetricTarget) -> Self {
        MetricSpec {
            source_type: MetricSourceType::Object,
            external: None,
            object: Some(ObjectMetricSource {
                described_object: DescribedObject {
                    api_version: Some("apps/v1".into()),
                    kind: kind.into(),
                    name: name.into(),
                },
                metric: MetricIdentifier {
                    name: metric.into(),
                    selector: None,
                },
                target,
            }),
            pods: None,
            resource: None,
        }
    }

    /// The metric's name, whichever source it is.
    pub fn metric_name(&self) -> Option<&str> {
        if let Some(e) = &self.external {
            return Some(&e.metric.name);
        }
        if let Some(o) = &self.object {
            return Some(&o.metric.name);
        }
        if let Some(p) = &self.pods {
            return Some(&p.metric.name);
        }
        self.resource.as_ref().map(|r| r.name.as_str())
    }

    /// The target as written, whichever source it is.
    pub fn target(&self) -> Option<&MetricTarget> {
        match self.source_type {
            MetricSourceType::External => self.external.as_ref().map(|e| &e.target),
            MetricSourceType::Object => self.object.as_ref().map(|o| &o.target),
            MetricSourceType::Pods => self.pods.as_ref().map(|p| &p.target),
            MetricSourceType::Resource => self.resource.as_ref().map(|r| &r.target),
            MetricSourceType::ContainerResource => None,
        }
    }
}

/// `spec.behavior` (docs/hpa-behaviour.md §1.7.4).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Behavior {
    #[serde(default)]
    pub scale_up: Option<ScalingRules>,
    #[serde(default)]
    pub scale_down: Option<ScalingRules>,
}

/// `behavior.scaleUp` / `behavior.scaleDown`. Missing fields take the API defaults
/// (docs/hpa-behaviour.md §1.7.4), see [`ResolvedRules`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRules {
    #[serde(default)]
    pub stabilization_window_seconds: Option<i32>,
    #[serde(default)]
    pub select_policy: Option<SelectPolicy>,
    #[serde(default)]
    pub policies: Option<Vec<ScalingPolicy>>,
    /// Per-HPA tolerance, honoured only in the 1.33+ style with the gate on (docs/hpa-behaviour.md §1.5).
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

/// One direction's rules after API and controller defaults (docs/hpa-behaviour.md §1.7.4).
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedRules {
    pub stabilization_window: Duration,
    pub select_policy: SelectPolicy,
    pub policies: Vec<ScalingPolicy>,
    pub tolerance: Option<f64>,
}

impl Behavior {
    /// Scale-up rules with defaults: window 0 s, Pods 4/15 s and Percent 100/15 s, `Max`
    /// (docs/hpa-behaviour.md §1.7.4).
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
    /// Percent 100/15 s, `Max` (docs/hpa-behaviour.md §1.7.4).
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
    #[error("metric {index}: External, Object, Pods and Resource metrics are modelled, not {source_type:?}")]
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
            if m.source_type == MetricSourceType::ContainerResource {
                return Err(SpecError::Unsupported {
                    index,
                    source_type: m.source_type,
                });
            }
            let Some(t) = m.target() else {
                return bad(format!(
                    "metrics[{index}]: the {:?} source is required",
                    m.source_type
                ));
            };
            if let (Some(u), None, None) = (t.average_utilization, &t.value, &t.average_value) {
                if m.source_type != MetricSourceType::Resource || u <= 0 {
                    return bad(format!(
                        "metrics[{index}]: averageUtilization must be positive and on a Resource metric"
                    ));
                }
                continue;
            }
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
