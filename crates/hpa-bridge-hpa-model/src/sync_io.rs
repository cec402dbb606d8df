//! What one sync reads besides the HPA, and everything it decides: proposals, conditions,
//! events and the decision branch.

use std::fmt;
use std::time::Duration;

use super::spec::TargetFormula;

/// What one metric GET returned: the item values, or the error text. An empty list is invalid
/// (docs/hpa-behaviour.md §1.2/§1.6).
pub type MetricInput = Result<Vec<f64>, String>;

/// What the controller reads in one sync besides the HPA itself.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncInput {
    /// `scale.spec.replicas`: the controller's "current replicas" (docs/hpa-behaviour.md §1.7.1).
    pub spec_replicas: i32,
    /// `scale.status.replicas`: the AverageValue denominator; above `spec_replicas` during a
    /// surge rollout (docs/hpa-behaviour.md §1.5).
    pub status_replicas: i32,
    /// Pods matching the target's selector that are Running and Ready (docs/hpa-behaviour.md §1.3).
    pub ready_pods: i32,
    /// All pods matching the target's selector. The Value formula fails (invalid metric) when
    /// it needs the ready count and there are none at all.
    pub pods: i32,
    /// One answer per `spec.metrics` entry, in order. A missing entry counts as an error.
    pub metrics: Vec<MetricInput>,
    /// What the controller found of the scale target's `status.selector` before it read any
    /// metric (docs/hpa-behaviour.md §1.6.1).
    pub selector: TargetSelector,
}

/// Why a selector stops the sync: the `ScalingActive=False` reason and message, and the
/// warning Event's reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorRefusal {
    pub condition_reason: &'static str,
    pub event_reason: &'static str,
    pub condition_message: String,
    pub event_message: String,
}

/// The scale target's pod selector as the controller checks it on every sync that reads the
/// metrics (`validateAndParseSelector`, docs/hpa-behaviour.md §1.6.1). Anything but `Valid`
/// stops the sync before any metric: no proposal, no recommendation, no scaling.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TargetSelector {
    /// A selector that parses and whose pods no other HPA selects.
    #[default]
    Valid,
    /// `scale.status.selector` is empty (a workload whose scale subresource reports none).
    Missing,
    /// The selector does not parse; the text is the parser's error.
    Unparsable(String),
    /// The pods it selects are selected by more than one HPA. `hpas` are the HPAs as the
    /// controller prints them (Go's `%v` of a `{Name Namespace}` key, such as `{web default}`).
    Ambiguous { selector: String, hpas: Vec<String> },
}

impl TargetSelector {
    /// The `ScalingActive=False` reason, the Event's reason and message, as the controller
    /// writes them; `None` for a valid selector.
    pub fn refusal(&self) -> Option<SelectorRefusal> {
        let refusal = |condition_reason, event_reason, condition_message: String, event_message| {
            Some(SelectorRefusal {
                condition_reason,
                event_reason,
                condition_message,
                event_message,
            })
        };
        match self {
            TargetSelector::Valid => None,
            TargetSelector::Missing => refusal(
                "InvalidSelector",
                "SelectorRequired",
                "the HPA target's scale is missing a selector".into(),
                "selector is required".into(),
            ),
            TargetSelector::Unparsable(e) => {
                let m = format!(
                    "couldn't convert selector into a corresponding internal selector object: {e}"
                );
                refusal("InvalidSelector", "InvalidSelector", m.clone(), m)
            }
            TargetSelector::Ambiguous { selector, hpas } => {
                let m = format!(
                    "pods by selector {selector} are controlled by more than one HPA (e.g. [{}])",
                    hpas.join(" ")
                );
                refusal("AmbiguousSelector", "AmbiguousSelector", m.clone(), m)
            }
        }
    }
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
            selector: TargetSelector::Valid,
        }
    }
}

/// One metric's valid proposal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricProposal {
    pub formula: TargetFormula,
    /// Sum of the items' milli values, each rounded up (docs/hpa-behaviour.md §1.2).
    pub usage_milli: i64,
    /// The milli value the controller writes to `status.currentMetrics`: the sum for a Value
    /// target, the average per pod over `status.replicas` for AverageValue.
    pub current_milli: i64,
    /// The ratio tested against the tolerance band (docs/hpa-behaviour.md §1.5).
    pub ratio: f64,
    /// True when the ratio fell inside the band, so the proposal is the baseline count.
    pub within_tolerance: bool,
    pub replicas: i32,
    /// False for a Pods or Resource metric computed from its average while some pods are not
    /// ready: the controller's corrections for unready and missing pods are unknown
    /// (docs/hpa-behaviour.md §1.9).
    pub exact: bool,
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
    /// Set by the 1.37 controller when it scales to 0, cleared when it scales from 0
    /// (docs/hpa-behaviour.md §7.2).
    ScaledToZero,
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
    /// Legacy `max(2×current, 4)` (docs/hpa-behaviour.md §1.7.3) or a scale-up policy (docs/hpa-behaviour.md §1.7.4).
    ScaleUpLimit,
    /// A scale-down policy (docs/hpa-behaviour.md §1.7.4).
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
    /// Held up by a recent higher recommendation (docs/hpa-behaviour.md §1.7.3/§1.7.4/§1.7.6).
    ScaleDownStabilized,
}

/// Which branch of the reconcile decided this sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A target at 0 replicas that the HPA may not scale from: `minReplicas > 0` (docs/hpa-behaviour.md
    /// §1.7.1), or from 1.37 a 0 the HPA did not set itself (docs/hpa-behaviour.md §7.2).
    ScalingDisabled,
    /// Current above `maxReplicas`: set to max, metrics skipped (docs/hpa-behaviour.md §1.7.1).
    AboveMaxReplicas,
    /// Current below `minReplicas`: set to min, metrics skipped (docs/hpa-behaviour.md §1.7.1).
    BelowMinReplicas,
    /// The target's selector is missing, does not parse, or its pods belong to another HPA
    /// too: no metric is read and nothing scales (docs/hpa-behaviour.md §1.6.1). The reason is
    /// the `ScalingActive=False` reason.
    SelectorRefused { reason: &'static str },
    /// Every metric invalid: no scaling (docs/hpa-behaviour.md §1.6).
    AllMetricsInvalid { invalid: usize },
    /// Some metric invalid and the valid ones propose fewer than `spec.replicas`: no scaling
    /// (docs/hpa-behaviour.md §1.6, kubernetes#99514).
    ScaleDownBlockedByInvalidMetric { invalid: usize, proposed: i32 },
    /// Metrics gave a proposal; it went through stabilisation and limits (docs/hpa-behaviour.md §1.7).
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
    /// The maximum valid proposal (docs/hpa-behaviour.md §1.7.2), when metrics were consulted.
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
