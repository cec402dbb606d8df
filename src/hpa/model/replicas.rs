//! One External metric's replica proposal: the Value and AverageValue formulas with the
//! tolerance band (docs/hpa-behaviour.md §1.1–§1.5).

use super::super::quantity::milli_ceil;
use super::spec::{ExternalMetricSource, TargetFormula};
use super::sync_io::{MetricInput, MetricProposal, SyncInput};
use super::tolerance::{average_value_ratio, Tolerances};

/// One External metric's proposal (docs/hpa-behaviour.md §1.1–§1.5).
pub(super) fn external_metric_replicas(
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
    // docs/hpa-behaviour.md §1.2: an empty list is an error, not zero.
    if items.is_empty() {
        return Err(fail("no metrics returned from external metrics API"));
    }
    // docs/hpa-behaviour.md §1.2: every item is summed, each as its milli value rounded up.
    let mut usage: i64 = 0;
    for v in items {
        let m = milli_ceil(*v).ok_or_else(|| fail(&format!("item value {v} is not a quantity")))?;
        usage = usage.saturating_add(m);
    }
    match formula {
        TargetFormula::AverageValue { milli: target } => {
            // docs/hpa-behaviour.md §1.4/§1.5: ratio = sum / (averageValue × status.replicas); inside
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
            // docs/hpa-behaviour.md §1.3: ratio = sum / value, compared with the band against
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
