//! One writer per workload: a workload's `spec.replicas` belongs to the one HPA that reads
//! hpa-bridge. A second HPA, a KEDA ScaledObject or a manifest that fixes `spec.replicas`
//! also writes it (docs/check.md, HB020–HB022; docs/hpa-behaviour.md §8).

use super::*;

/// A scale target: namespace, kind, name.
type Target = (String, String, String);

/// The ScaledObject that owns this HPA, when KEDA made it: an owner reference to a
/// ScaledObject, or the HPA name KEDA gives it in the ScaledObject's namespace (also the case
/// of an HPA handed over with `scaledobject.keda.sh/transfer-hpa-ownership`).
fn keda_owner<'a>(
    hpa: &HpaInput,
    scaled: &'a [ScaledObjectInput],
) -> Option<&'a ScaledObjectInput> {
    let meta = &hpa.hpa.metadata;
    let ns = meta.namespace.as_deref().unwrap_or("default");
    let name = meta.name.as_deref().unwrap_or_default();
    let owners = meta.owner_references.iter().flatten();
    let owned_by = owners
        .filter(|o| o.kind == "ScaledObject" && o.api_version.starts_with("keda.sh/"))
        .map(|o| o.name.as_str())
        .next();
    scaled.iter().find(|so| {
        so.namespace == ns && (owned_by == Some(so.name.as_str()) || so.hpa_name == name)
    })
}

/// Is this HPA made by KEDA? Its spec is KEDA's, not the user's, and its metrics are KEDA's.
pub(super) fn is_keda_owned(hpa: &HpaInput, scaled: &[ScaledObjectInput]) -> bool {
    keda_owner(hpa, scaled).is_some()
        || hpa
            .hpa
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "ScaledObject" && o.api_version.starts_with("keda.sh/"))
}

fn target_of(hpa: &HpaInput) -> Option<Target> {
    let spec = hpa.hpa.spec.as_ref()?;
    let ns = hpa.hpa.metadata.namespace.as_deref().unwrap_or("default");
    Some((
        ns.to_string(),
        spec.scale_target_ref.kind.clone(),
        spec.scale_target_ref.name.clone(),
    ))
}

/// Does the HPA read any metric hpa-bridge serves (External or Object)?
fn reads_hpa_bridge(hpa: &HorizontalPodAutoscaler, config: &Config) -> bool {
    hpa.spec
        .iter()
        .flat_map(|s| s.metrics.iter().flatten())
        .filter_map(|m| {
            m.external
                .as_ref()
                .map(|e| &e.metric.name)
                .or(m.object.as_ref().map(|o| &o.metric.name))
        })
        .any(|name| config.metric(name).is_some())
}

fn hpa_ref(hpa: &HpaInput) -> ObjectRef {
    ObjectRef {
        kind: "HorizontalPodAutoscaler".into(),
        namespace: Some(
            hpa.hpa
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
        ),
        name: hpa.hpa.metadata.name.clone().unwrap_or_default(),
    }
}

/// HB020, HB021 and HB022, for every workload an HPA reading hpa-bridge scales. The generated
/// HPA of a ScaledObject counts as the ScaledObject, never as a second HPA: the conflict is
/// reported once, as HB021.
pub(super) fn check_writers(ctx: &mut Ctx) {
    let inputs = ctx.inputs;
    let mut by_target: BTreeMap<Target, Vec<&HpaInput>> = BTreeMap::new();
    for h in &inputs.hpas {
        if is_keda_owned(h, &inputs.scaled_objects) {
            continue;
        }
        if let Some(t) = target_of(h) {
            by_target.entry(t).or_default().push(h);
        }
    }
    for ((ns, kind, name), hpas) in by_target {
        if !hpas.iter().any(|h| reads_hpa_bridge(&h.hpa, ctx.config)) {
            continue;
        }
        let workload = format!("{kind} {ns}/{name}");
        // Documents with one namespace and name are one object, whichever is applied last
        // (alternative versions of one HPA side by side): not two HPAs.
        let names: BTreeSet<String> = hpas.iter().map(|h| hpa_ref(h).name).collect();
        if names.len() > 1 {
            for h in &hpas {
                let own = hpa_ref(h).name;
                let others: Vec<&str> = names
                    .iter()
                    .filter(|n| **n != own)
                    .map(String::as_str)
                    .collect();
                ctx.push(
                    rules::TWO_HPAS,
                    Severity::Error,
                    &hpa_ref(h),
                    "spec.scaleTargetRef",
                    format!("{workload} is also scaled by HorizontalPodAutoscaler {}", others.join(", ")),
                    "the HPA controller finds the workload's pods selected by more than one HPA and stops all of them: ScalingActive=False, reason AmbiguousSelector, on every sync (kubernetes#112011, docs/hpa-behaviour.md §8.1). Nothing in the API server rejects the second HPA, so this only shows at run time",
                    "keep one HPA per workload: merge the metrics into one HPA (it takes the largest proposal, docs/hpa-behaviour.md §1.7.2) and delete the others",
                    &h.source,
                );
            }
        }
        for so in inputs
            .scaled_objects
            .iter()
            .filter(|so| so.namespace == ns && so.target_kind == kind && so.target_name == name)
        {
            for h in &hpas {
                ctx.push(
                    rules::HPA_AND_SCALED_OBJECT,
                    Severity::Error,
                    &hpa_ref(h),
                    "spec.scaleTargetRef",
                    format!(
                        "KEDA ScaledObject {ns}/{} also scales {workload}, through its HPA {}",
                        so.name, so.hpa_name
                    ),
                    "KEDA writes the workload's replicas through an HPA of its own; with this one beside it two HPAs select the same pods, and the HPA controller stops both with AmbiguousSelector (docs/hpa-behaviour.md §8.2). Where KEDA scales to and from zero itself, it also sets spec.replicas directly",
                    "keep one writer: delete this HPA and let the ScaledObject scale the workload, or delete the ScaledObject. Beside KEDA, hpa-bridge serves Object metrics (HB016), and the HPA reading them must be the workload's only one",
                    &h.source,
                );
            }
        }
        let fixed = inputs
            .workloads
            .iter()
            .find(|w| w.namespace == ns && w.kind == kind && w.name == name)
            .and_then(|w| Some((w, w.replicas_fixed_by.as_ref()?)));
        if let Some((w, by)) = fixed {
            let names: Vec<String> = hpas.iter().map(|h| hpa_ref(h).name).collect();
            ctx.push(
                rules::REPLICAS_FIXED,
                Severity::Warning,
                &ObjectRef {
                    kind: kind.clone(),
                    namespace: Some(ns.clone()),
                    name: name.clone(),
                },
                "spec.replicas",
                format!("{by}, and HorizontalPodAutoscaler {} scales it", names.join(", ")),
                "every apply of the manifest (kubectl apply, a GitOps sync) sets spec.replicas back to the written value, and the HPA moves it again at its next sync: pods are added or removed for nothing, and a sync during a peak shrinks the workload (docs/hpa-behaviour.md §8.3)",
                "remove spec.replicas from the manifest and let the HPA own it; with server-side apply, hand the field over first (docs/hpa-behaviour.md §8.3). A GitOps tool told to ignore the field (Argo CD ignoreDifferences with RespectIgnoreDifferences) is fine and can stay",
                &w.source,
            );
        }
    }
}
