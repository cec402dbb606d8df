//! One External or Object metric's replica proposal: the Value and AverageValue formulas with
//! the tolerance band (docs/hpa-behaviour.md §1.1–§1.5, §6).

use super::go_numeric::{go_f64_to_i32, go_f64_to_i64};
use super::pod_metrics::{plain_metric_replicas, PodMetricInput};
use super::spec::{ExternalMetricSource, MetricTarget, ObjectMetricSource, TargetFormula};
use super::sync_io::{MetricInput, MetricProposal, SyncInput};
use super::tolerance::{average_value_ratio, Tolerances};
use crate::quantity::milli_ceil;

/// One External metric's proposal (docs/hpa-behaviour.md §1.1–§1.5).
pub(super) fn external_metric_replicas(
    ext: &ExternalMetricSource,
    answer: &MetricInput,
    input: &SyncInput,
    tolerances: &Tolerances,
    guarded_sum: bool,
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
    let mut milli = Vec::with_capacity(items.len());
    for v in items {
        milli.push(
            milli_ceil(*v).ok_or_else(|| fail(&format!("item value {v} is not a quantity")))?,
        );
    }
    let usage = external_sum(formula, &milli, guarded_sum);
    proposal(formula, usage, input, tolerances, Source::External)
}

/// A Pods or Resource metric's proposal from the average the HPA's status shows for it
/// (docs/hpa-behaviour.md §1.9): `answer` holds that one average, in the metric's units, or a
/// utilization in percent against an `averageUtilization` target. Exact only when every pod is
/// ready; [`MetricProposal::exact`] says which.
pub(super) fn pod_metric_replicas(
    name: &str,
    target: &MetricTarget,
    answer: &MetricInput,
    input: &SyncInput,
    tolerances: &Tolerances,
) -> Result<MetricProposal, String> {
    let fail = |e: &str| format!("unable to get metric {name}: {e}");
    let items = answer.as_ref().map_err(|e| fail(e))?;
    let [average] = items.as_slice() else {
        return Err(fail("the HPA's status shows no current average for it"));
    };
    // A utilization compares percent with percent; the units cancel in the ratio.
    let (target_milli, average_milli) = match (&target.average_value, target.average_utilization) {
        (Some(q), _) => (q.milli_value(), milli_ceil(*average)),
        (None, Some(u)) => (i64::from(u) * 1000, milli_ceil(*average)),
        (None, None) => return Err(fail("no averageValue or averageUtilization target")),
    };
    let average_milli =
        average_milli.ok_or_else(|| fail(&format!("average {average} is not a quantity")))?;
    let pods = PodMetricInput::Average {
        average_milli,
        ready_pods: input.ready_pods,
        pods: input.pods,
    };
    let (replicas, usage) =
        plain_metric_replicas(&pods, input.spec_replicas, target_milli, tolerances)
            .map_err(|e| fail(&e))?;
    let ratio = usage as f64 / target_milli as f64;
    Ok(MetricProposal {
        formula: TargetFormula::AverageValue {
            milli: target_milli,
        },
        usage_milli: usage,
        current_milli: usage,
        ratio,
        within_tolerance: tolerances.is_within(ratio),
        replicas,
        exact: pods.is_exact(),
    })
}

/// The sum of an External answer's milli values as the controller adds them up
/// (docs/hpa-behaviour.md §1.8). From 1.34 the AverageValue path reads any negative running
/// sum as an overflow, `MaxInt64`, and the Value path stops at `MaxInt64` when a positive item
/// would overflow; a negative item still lowers a Value sum. Before 1.34 both wrap as Go's
/// int64 addition does.
pub(super) fn external_sum(formula: TargetFormula, milli: &[i64], guarded: bool) -> i64 {
    let mut usage: i64 = 0;
    for &val in milli {
        match (guarded, formula) {
            (false, _) => usage = usage.wrapping_add(val),
            (true, TargetFormula::AverageValue { .. }) => {
                usage = usage.wrapping_add(val);
                if usage < 0 {
                    return i64::MAX;
                }
            }
            (true, TargetFormula::Value { .. }) => {
                if val > 0 && usage > i64::MAX - val {
                    return i64::MAX;
                }
                usage = usage.wrapping_add(val);
            }
        }
    }
    usage
}

/// One Object metric's proposal (docs/hpa-behaviour.md §6): the formula by `target.type`,
/// exactly one item, then the same formulas as External: `Value` multiplies by the ready pods,
/// `AverageValue` compares against `status.replicas` and otherwise gives ceil(value / target).
pub(super) fn object_metric_replicas(
    obj: &ObjectMetricSource,
    answer: &MetricInput,
    input: &SyncInput,
    tolerances: &Tolerances,
) -> Result<MetricProposal, String> {
    let name = &obj.metric.name;
    let fail = |e: &str| {
        format!(
            "unable to get metric {name}: {} on {}/{}: {e}",
            obj.described_object.kind, obj.described_object.name, name
        )
    };
    let formula = obj.target.object_formula().ok_or_else(|| {
        "invalid object metric source: neither a value target nor an average value target was set"
            .to_string()
    })?;
    let items = answer.as_ref().map_err(|e| fail(e))?;
    // docs/hpa-behaviour.md §6.2: the client demands exactly one item.
    let [v] = items.as_slice() else {
        return Err(fail(&format!(
            "the custom metrics API server returned {} results when we asked for exactly one",
            items.len()
        )));
    };
    let usage = milli_ceil(*v).ok_or_else(|| fail(&format!("item value {v} is not a quantity")))?;
    proposal(formula, usage, input, tolerances, Source::Object)
}

/// Which client asked: the External AverageValue path caps its count at `MaxInt32` before
/// converting; the Object AverageValue path converts without a cap (docs/hpa-behaviour.md §1.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    External,
    Object,
}

/// The formulas shared by External and Object metrics, on a usage in milli units. Every
/// float-to-int32 conversion is Go's on amd64 ([`go_f64_to_i32`]).
pub(super) fn proposal(
    formula: TargetFormula,
    usage: i64,
    input: &SyncInput,
    tolerances: &Tolerances,
    source: Source,
) -> Result<MetricProposal, String> {
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
                if source == Source::External && r > i32::MAX as f64 {
                    i32::MAX
                } else {
                    go_f64_to_i32(r)
                }
            };
            // status.currentMetrics shows the average per pod over status.replicas.
            let per_pod = (usage as f64 / f64::from(status)).ceil();
            let current_milli = if source == Source::External && usage as f64 >= i64::MAX as f64 {
                i64::MAX
            } else {
                go_f64_to_i64(per_pod)
            };
            Ok(MetricProposal {
                formula,
                usage_milli: usage,
                current_milli,
                ratio,
                within_tolerance: within,
                replicas,
                exact: true,
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
                    current_milli: usage,
                    ratio,
                    within_tolerance: false,
                    replicas: go_f64_to_i32(ratio.ceil()),
                    exact: true,
                });
            }
            if tolerances.is_within(ratio) {
                return Ok(MetricProposal {
                    formula,
                    usage_milli: usage,
                    current_milli: usage,
                    ratio,
                    within_tolerance: true,
                    replicas: spec,
                    exact: true,
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
                go_f64_to_i32(f.ceil())
            };
            Ok(MetricProposal {
                formula,
                usage_milli: usage,
                current_milli: usage,
                ratio,
                within_tolerance: false,
                replicas,
                exact: true,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::{MetricSpec, MetricTarget};
    use super::super::tolerance::ToleranceStyle;
    use super::*;

    fn tol() -> Tolerances {
        Tolerances {
            style: ToleranceStyle::Symmetric,
            scale_down: 0.1,
            scale_up: 0.1,
        }
    }

    fn object(target: MetricTarget) -> ObjectMetricSource {
        MetricSpec::object("StatefulSet", "lobby", "hpa_target_replicas", target)
            .object
            .unwrap()
    }

    fn input(spec: i32, status: i32, ready: i32) -> SyncInput {
        SyncInput {
            spec_replicas: spec,
            status_replicas: status,
            ready_pods: ready,
            pods: ready.max(status),
            metrics: Vec::new(),
            selector: Default::default(),
        }
    }

    /// docs/hpa-behaviour.md §6.3: AverageValue divides by status.replicas only for the
    /// tolerance check, so with averageValue 1 the proposal is ceil(value).
    #[test]
    fn object_average_value_gives_ceil_of_the_value() {
        let o = object(MetricTarget::average_value("1").unwrap());
        let p = object_metric_replicas(&o, &Ok(vec![7.0]), &input(3, 3, 3), &tol()).unwrap();
        assert_eq!(p.replicas, 7);
        assert!(!p.within_tolerance);
        let p = object_metric_replicas(&o, &Ok(vec![6.2]), &input(3, 3, 3), &tol()).unwrap();
        assert_eq!(p.replicas, 7, "ceil");
        // Inside the band against status.replicas: the proposal is status.replicas.
        let p = object_metric_replicas(&o, &Ok(vec![10.0]), &input(10, 11, 10), &tol()).unwrap();
        assert!(p.within_tolerance);
        assert_eq!(p.replicas, 11);
    }

    /// docs/hpa-behaviour.md §6.3: Value multiplies by the ready pods, the same double
    /// multiplication as an External Value target; with spec.replicas 0 it is ceil(ratio).
    #[test]
    fn object_value_multiplies_by_ready_pods() {
        let o = object(MetricTarget::value("1").unwrap());
        let p = object_metric_replicas(&o, &Ok(vec![7.0]), &input(3, 3, 3), &tol()).unwrap();
        assert_eq!(p.replicas, 21);
        let p = object_metric_replicas(&o, &Ok(vec![7.0]), &input(0, 0, 0), &tol()).unwrap();
        assert_eq!(p.replicas, 7);
    }

    /// docs/hpa-behaviour.md §6.1–§6.2: the formula follows target.type, and exactly one item
    /// is accepted.
    #[test]
    fn object_formula_follows_type_and_needs_exactly_one_item() {
        let o = object(MetricTarget::average_value("1").unwrap());
        let two = object_metric_replicas(&o, &Ok(vec![3.0, 4.0]), &input(3, 3, 3), &tol());
        assert!(two.unwrap_err().contains("returned 2 results"));
        let none = object_metric_replicas(&o, &Ok(vec![]), &input(3, 3, 3), &tol());
        assert!(none.unwrap_err().contains("returned 0 results"));
        // type AverageValue with only `value` set: no formula (External would run Value).
        let mut t = MetricTarget::value("1").unwrap();
        t.target_type = Some("AverageValue".into());
        let err = object_metric_replicas(&object(t), &Ok(vec![3.0]), &input(3, 3, 3), &tol());
        assert!(err.unwrap_err().contains("invalid object metric source"));
        let failed = object_metric_replicas(&o, &Err("503".into()), &input(3, 3, 3), &tol());
        assert!(failed.unwrap_err().contains("unable to get metric"));
    }
}
