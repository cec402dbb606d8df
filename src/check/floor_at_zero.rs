//! HB024: at 0 replicas no pod exports `hpa_stateful_index`, and an External `target` cannot
//! tell which workload the absent floor belongs to, so it refuses (404) and the workload stays
//! at 0; the Object form knows its workload and serves the recommendation
//! (docs/hpa-behaviour.md §7.4).

use super::*;

pub(super) fn check_floor_at_zero(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    hpa: &HorizontalPodAutoscaler,
    uses: &Uses,
) {
    let Some(&first) = uses.external_floor_targets.first() else {
        return;
    };
    let metrics = hpa
        .spec
        .as_ref()
        .and_then(|s| s.metrics.as_ref())
        .map(Vec::len)
        .unwrap_or(0);
    // Another metric may still bring the workload back from 0 (an invalid metric blocks only
    // scale-in, docs/hpa-behaviour.md §1.6); with none, nothing does.
    let others = metrics - uses.external_floor_targets.len();
    let (severity, consequence) = if others == 0 {
        (
            Severity::Error,
            "no other metric of this HPA can bring it back, so the workload stays at 0 for good",
        )
    } else {
        (
            Severity::Warning,
            "this metric stays invalid while the workload is at 0, and scaling up from 0 rests on the HPA's other metrics alone",
        )
    };
    let name = hpa
        .spec
        .as_ref()
        .and_then(|s| s.metrics.as_ref())
        .and_then(|m| m.get(first))
        .and_then(|m| m.external.as_ref())
        .map(|e| e.metric.name.clone())
        .unwrap_or_default();
    ctx.push(
        rules::EXTERNAL_FLOOR_AT_ZERO,
        severity,
        object,
        format!("spec.metrics[{first}].external"),
        format!("minReplicas is 0 and {name:?} is an External target with a stateful floor: at 0 replicas it has no floor series and answers 404; {consequence}"),
        "at 0 replicas no pod exports hpa_stateful_index, and an External target cannot tell which workload an absent floor belongs to, so it refuses rather than guess (docs/hpa-behaviour.md §7.4); the Object form names its workload, holds at max(recommendation, current spec.replicas) and serves the recommendation at 0",
        format!("read {name:?} as an Object metric (describedObject: the scaled workload, target AverageValue 1, served on custom.metrics.k8s.io), or set minReplicas to 1"),
        src,
    );
}
