//! The Object metric rules (docs/hpa-behaviour.md §6): the HPA picks an Object metric's formula
//! by `target.type`, so a `Value` target multiplies the absolute count by the ready pods, and
//! `averageValue` other than 1 divides it.

use super::*;

/// One `type: Object` entry of an HPA.
pub(super) fn check_object_metric(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    index: usize,
    metric: &k8s_openapi::api::autoscaling::v2::ObjectMetricSource,
    target_ref: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
    uses: &mut Uses,
) {
    let base = format!("spec.metrics[{index}].object");
    let metric_name = &metric.metric.name;
    let Some(served) = ctx.config.metric(metric_name) else {
        let names: Vec<&str> = ctx.config.metrics.iter().map(|m| m.name()).collect();
        ctx.push(
            rules::NOT_SERVED,
            Severity::Error,
            object,
            format!("{base}.metric.name"),
            format!("metric {metric_name:?} is not served by hpa-bridge (it serves {})", names.join(", ")),
            "the request gets 404, the metric is invalid on every sync and the HPA cannot scale down (docs/hpa-behaviour.md §6.4, §1.6)",
            "use one of the served names, or add the metric to the adapter's config (metrics:)",
            src,
        );
        return;
    };
    let described = &metric.described_object;
    let group = described
        .api_version
        .as_deref()
        .unwrap_or_default()
        .split('/')
        .next()
        .unwrap_or_default();
    if !matches!(described.kind.as_str(), "StatefulSet" | "Deployment") || group != "apps" {
        ctx.push(
            rules::NOT_SERVED,
            Severity::Error,
            object,
            format!("{base}.describedObject"),
            format!(
                "hpa-bridge serves Object metrics of StatefulSets and Deployments (apps), not {} {}",
                described.api_version.as_deref().unwrap_or("<no apiVersion>"),
                described.kind
            ),
            "any other resource answers 404, so the metric is invalid on every sync (docs/hpa-behaviour.md §6.5)",
            "describe the scaled StatefulSet or Deployment",
            src,
        );
        return;
    }
    uses.served = true;
    let kind = served.kind();
    match kind {
        MetricKind::StatefulFloor => uses.floor = true,
        MetricKind::Target => {
            uses.recommendation = true;
            uses.floor |= served.floor().is_some();
        }
        MetricKind::Recommendation | MetricKind::Threshold => uses.recommendation = true,
    }
    if described.kind != target_ref.kind || described.name != target_ref.name {
        ctx.push(
            rules::SELECTOR_SCOPE,
            Severity::Warning,
            object,
            format!("{base}.describedObject"),
            format!(
                "the metric describes {} {}, but the HPA scales {} {}",
                described.kind, described.name, target_ref.kind, target_ref.name
            ),
            "the workload would be sized by another workload's numbers (docs/hpa-behaviour.md §6.5)",
            format!(
                "describe {} {}, unless following another workload is intended",
                target_ref.kind, target_ref.name
            ),
            src,
        );
    }
    let target = &metric.target;
    let kind = kind.as_str();
    // docs/hpa-behaviour.md §6.1: an Object metric is dispatched on target.type.
    match target.type_.as_str() {
        "Value" => ctx.push(
            rules::VALUE_PATH,
            Severity::Error,
            object,
            format!("{base}.target.type"),
            format!("the absolute {kind} metric is read through the Object Value formula"),
            "an Object Value target proposes ceil(value / target × readyPods) (docs/hpa-behaviour.md §6.3), the same double multiplication as an External Value target: an absolute count D becomes about D × readyPods",
            "use target: {type: AverageValue, averageValue: \"1\"}: it proposes ceil(value) (docs/hpa-behaviour.md §6.3)",
            src,
        ),
        "AverageValue" => {
            let avg = target.average_value.as_ref().map(|q| q.0.as_str());
            match avg.map(|a| (a, parse_quantity(a))) {
                Some((_, Some(v))) if (v - 1.0).abs() < 1e-9 => {}
                parsed => ctx.push(
                    rules::AVERAGE_VALUE_NOT_ONE,
                    Severity::Error,
                    object,
                    format!("{base}.target.averageValue"),
                    match parsed {
                        Some((a, Some(_))) => {
                            format!("averageValue is {a:?} on the absolute {kind} metric")
                        }
                        Some((a, None)) => format!("averageValue {a:?} is not a quantity"),
                        None => "type is AverageValue but averageValue is not set".to_string(),
                    },
                    "an Object AverageValue target proposes ceil(value / averageValue) (docs/hpa-behaviour.md §6.3): with an absolute replica count D it scales to D divided by this figure instead of D",
                    "set averageValue: \"1\"",
                    src,
                ),
            }
        }
        other => ctx.push(
            rules::TYPE_MISMATCH,
            Severity::Error,
            object,
            format!("{base}.target.type"),
            format!("type {other:?} on an Object metric"),
            "an Object metric runs only Value or AverageValue; any other type makes it invalid on every sync (docs/hpa-behaviour.md §6.1)",
            "use target: {type: AverageValue, averageValue: \"1\"}",
            src,
        ),
    }
}
