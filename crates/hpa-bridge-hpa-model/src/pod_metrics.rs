//! The per-pod formulas of `Pods` and `Resource` metrics (`calcPlainMetricReplicas` and
//! `GetResourceReplicas`'s AverageValue twin): the average over the pods that reported, then
//! the corrections for unready and missing pods (docs/hpa-behaviour.md §1.9).
//!
//! The model has these for `explain`, which sees such a metric only through the HPA's
//! `status.currentMetrics`: the average, not the per-pod values nor which pods reported. Fed
//! that average for every ready pod, the proposal is exact when every pod is ready and
//! reported, and approximate otherwise ([`PodMetricInput::is_exact`]).

use super::go_numeric::go_f64_to_i32;
use super::tolerance::Tolerances;

/// A pod as the replica calculator groups it (`groupPods`) for a metric that is not CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodSample {
    pub phase: MetricPodPhase,
    /// `metadata.deletionTimestamp` is set.
    pub deleted: bool,
    /// The pod's value in milli units, `None` when the metrics API returned none for it.
    pub value: Option<i64>,
}

/// The phases `groupPods` tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricPodPhase {
    Pending,
    Running,
    Failed,
}

/// What a Pods or Resource AverageValue proposal was computed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodMetricInput {
    /// Every pod, as the controller lists them: the exact computation.
    Pods(Vec<PodSample>),
    /// Only the average the HPA's status shows and the count of ready pods: the computation
    /// as if every ready pod reported that average and no pod were unready or missing.
    Average {
        average_milli: i64,
        ready_pods: i32,
        /// All pods of the target; more than `ready_pods` makes the answer approximate.
        pods: i32,
    },
}

impl PodMetricInput {
    /// Whether the proposal equals the controller's: per-pod values, or an average with every
    /// pod ready (the controller's unready and missing corrections then do not apply).
    pub fn is_exact(&self) -> bool {
        match self {
            PodMetricInput::Pods(_) => true,
            PodMetricInput::Average {
                ready_pods, pods, ..
            } => ready_pods == pods,
        }
    }

    fn samples(&self) -> Vec<PodSample> {
        match self {
            PodMetricInput::Pods(p) => p.clone(),
            PodMetricInput::Average {
                average_milli,
                ready_pods,
                ..
            } => (0..*ready_pods)
                .map(|_| PodSample {
                    phase: MetricPodPhase::Running,
                    deleted: false,
                    value: Some(*average_milli),
                })
                .collect(),
        }
    }
}

/// `calcPlainMetricReplicas`: the proposal and the average usage (milli) of a Pods metric, or of
/// a Resource metric with an AverageValue target, against `target_milli` per pod.
pub fn plain_metric_replicas(
    input: &PodMetricInput,
    current: i32,
    target_milli: i64,
    tolerances: &Tolerances,
) -> Result<(i32, i64), String> {
    let pods = input.samples();
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    // groupPods for a metric other than CPU: readiness is not looked at.
    let mut ready = 0usize;
    let mut unready = 0usize;
    let mut missing = 0usize;
    let mut values: Vec<i64> = Vec::new();
    for p in &pods {
        if p.deleted || p.phase == MetricPodPhase::Failed {
            continue;
        }
        if p.phase == MetricPodPhase::Pending {
            unready += 1;
            continue;
        }
        match p.value {
            None => missing += 1,
            Some(v) => {
                ready += 1;
                values.push(v);
            }
        }
    }
    if values.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let (ratio, usage) = usage_ratio(&values, target_milli);
    let scale_up_with_unready = unready > 0 && ratio > 1.0;
    if !scale_up_with_unready && missing == 0 {
        if tolerances.is_within(ratio) {
            return Ok((current, usage));
        }
        return Ok((go_f64_to_i32((ratio * ready as f64).ceil()), usage));
    }
    // Missing pods count as at target when scaling down and as 0 when scaling up; unready pods
    // as 0 when scaling up. A correction that flips the direction means no change.
    if missing > 0 {
        if ratio < 1.0 {
            values.extend(std::iter::repeat_n(target_milli, missing));
        } else if ratio > 1.0 {
            values.extend(std::iter::repeat_n(0, missing));
        }
    }
    if scale_up_with_unready {
        values.extend(std::iter::repeat_n(0, unready));
    }
    let (new_ratio, _) = usage_ratio(&values, target_milli);
    if tolerances.is_within(new_ratio)
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok((current, usage));
    }
    let new_replicas = go_f64_to_i32((new_ratio * values.len() as f64).ceil());
    if (new_ratio < 1.0 && new_replicas > current) || (new_ratio > 1.0 && new_replicas < current) {
        return Ok((current, usage));
    }
    Ok((new_replicas, usage))
}

/// `GetMetricUsageRatio`: the integer average (Go's truncating division) over the target.
fn usage_ratio(values: &[i64], target_milli: i64) -> (f64, i64) {
    let total = values.iter().fold(0i64, |s, v| s.wrapping_add(*v));
    let usage = total / values.len() as i64;
    (usage as f64 / target_milli as f64, usage)
}
