//! The scale target rules: the workload exists and the floor can protect it
//! (docs/hpa-behaviour.md §4.1).

use super::*;

pub(super) fn check_workload(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    target_ref: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
    uses: &Uses,
) {
    let ns = object.namespace.clone().unwrap_or_default();
    let workload = ctx
        .inputs
        .workloads
        .iter()
        .find(|w| w.kind == target_ref.kind && w.namespace == ns && w.name == target_ref.name)
        .cloned();
    match target_ref.kind.as_str() {
        // An opted-in Deployment's floor is the count of holding pods, kept safe by their
        // deletion cost (docs/deletion-cost.md).
        "Deployment" if uses.floor && !workload.as_ref().is_some_and(|w| w.deletion_cost_opt_in) => ctx.push(
            rules::FLOOR_ON_DEPLOYMENT,
            Severity::Warning,
            object,
            "spec.scaleTargetRef.kind",
            format!("a stateful floor metric is used for Deployment {}", target_ref.name),
            "a Deployment promises no deletion order, so keeping the highest state-owning index protects nothing: any pod may be removed on scale-in (docs/hpa-behaviour.md §4.1)",
            "annotate the Deployment hpa-bridge.io/deletion-cost: \"stateful-index\" and run the adapter with --write-deletion-cost (manifests/overlays/deletion-cost), so idle pods go first (docs/deletion-cost.md); or run it as a StatefulSet",
            src,
        ),
        "StatefulSet" => {
            if uses.recommendation && !uses.floor {
                ctx.push(
                    rules::NO_FLOOR,
                    Severity::Warning,
                    object,
                    "spec.metrics",
                    format!("StatefulSet {} is scaled on an absolute recommendation with no stateful-floor (or target) metric", target_ref.name),
                    "without the floor, a scale-in can remove pods that still own state (hpa_stateful_index, docs/hpa-behaviour.md §4.1)",
                    "use the target metric (hpa_target_replicas, max of recommendation and floor) or add the stateful-floor metric",
                    src,
                );
            }
            if let Some(w) = &workload {
                if uses.floor && w.ordinals_start != 0 && ctx.config.scrape.kubernetes.is_none() {
                    let sts = ObjectRef {
                        kind: "StatefulSet".into(),
                        namespace: Some(w.namespace.clone()),
                        name: w.name.clone(),
                    };
                    ctx.push(
                        rules::ORDINALS_START,
                        Severity::Error,
                        &sts,
                        "spec.ordinals.start",
                        format!("ordinals start at {} and the adapter has no Kubernetes discovery (scrape.kubernetes) to learn it", w.ordinals_start),
                        format!("the floor is index − start (docs/hpa-behaviour.md §4.1); without the offset it is {} too high, and every new pod raises it again, so the floor climbs to maxReplicas", w.ordinals_start),
                        "configure scrape.kubernetes so the adapter reads spec.ordinals.start, or use ordinals starting at 0",
                        &w.source,
                    );
                }
            }
        }
        _ => {}
    }
    if ctx.inputs.live
        && workload.is_none()
        && matches!(target_ref.kind.as_str(), "StatefulSet" | "Deployment")
    {
        ctx.push(
            rules::SCALE_TARGET_MISSING,
            Severity::Warning,
            object,
            "spec.scaleTargetRef",
            format!(
                "{} {}/{} does not exist",
                target_ref.kind, ns, target_ref.name
            ),
            "the HPA cannot scale a missing workload and reports FailedGetScale",
            "fix spec.scaleTargetRef or create the workload",
            src,
        );
    }
}
