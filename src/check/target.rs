//! The metric target rules: which formula the HPA will run (docs/hpa-behaviour.md §1.1,
//! §1.3, §1.4).

use super::*;

pub(super) fn check_target(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    base: &str,
    kind: MetricKind,
    target: &k8s_openapi::api::autoscaling::v2::MetricTarget,
) {
    let ty = target.type_.as_str();
    let kind = kind.as_str();
    // The HPA checks averageValue first, then value; type is never read (docs/hpa-behaviour.md §1.1).
    if let Some(avg) = &target.average_value {
        match parse_quantity(&avg.0) {
            Some(v) if (v - 1.0).abs() < 1e-9 => {}
            parsed => ctx.push(
                rules::AVERAGE_VALUE_NOT_ONE,
                Severity::Error,
                object,
                format!("{base}.target.averageValue"),
                match parsed {
                    Some(_) => format!("averageValue is {:?} on the absolute {kind} metric", avg.0),
                    None => format!("averageValue {:?} is not a quantity", avg.0),
                },
                "the HPA computes desired = ceil(value / averageValue) (docs/hpa-behaviour.md §1.4): with an absolute replica count D it scales to D divided by this figure instead of D",
                "set averageValue: \"1\"",
                src,
            ),
        }
        if ty != "AverageValue" {
            ctx.push(
                rules::TYPE_MISMATCH,
                Severity::Warning,
                object,
                format!("{base}.target.type"),
                format!("type is {ty:?} but averageValue is set, so the HPA runs the AverageValue formula"),
                "the HPA picks the formula by the field that is set and never reads type (docs/hpa-behaviour.md §1.1); the manifest says one thing and does another",
                "set type: AverageValue (and remove value)",
                src,
            );
        } else if target.value.is_some() {
            ctx.push(
                rules::TYPE_MISMATCH,
                Severity::Warning,
                object,
                format!("{base}.target.value"),
                "both averageValue and value are set; value is ignored",
                "the HPA reads averageValue first (docs/hpa-behaviour.md §1.1); the ignored value misleads whoever edits it next",
                "remove target.value",
                src,
            );
        }
    } else if target.value.is_some() {
        ctx.push(
            rules::VALUE_PATH,
            Severity::Error,
            object,
            format!("{base}.target.value"),
            format!("the absolute {kind} metric is read through the Value path (target.value is set, averageValue is not)"),
            "the Value formula is desired = ceil(value / target × readyPods) (docs/hpa-behaviour.md §1.3): an absolute count D becomes about D × readyPods, so the workload runs away to maxReplicas (or to 0 proposals when no pod is Ready)",
            "use target: {type: AverageValue, averageValue: \"1\"} (docs/hpa-behaviour.md §1.4)",
            src,
        );
        if ty != "Value" {
            ctx.push(
                rules::TYPE_MISMATCH,
                Severity::Warning,
                object,
                format!("{base}.target.type"),
                format!("type is {ty:?} but only value is set, so the HPA runs the Value formula"),
                "the HPA picks the formula by the field that is set and never reads type (docs/hpa-behaviour.md §1.1)",
                "replace value with averageValue: \"1\"",
                src,
            );
        }
    } else {
        ctx.push(
            rules::TYPE_MISMATCH,
            Severity::Error,
            object,
            format!("{base}.target"),
            format!("type is {ty:?} but neither averageValue nor value is set"),
            "an External metric target needs averageValue or value; the API server rejects this HPA",
            "set type: AverageValue and averageValue: \"1\"",
            src,
        );
    }
}
