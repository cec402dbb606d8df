//! HB023: with `minReplicas: 0` the HPA scales the workload from 0 only on a served value,
//! so the recommendation must come from something that runs while the workload has no pods
//! (docs/hpa-behaviour.md §7.3).

use super::*;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;

/// The annotation on an HPA that says its recommender runs outside the scaled workload.
pub const RECOMMENDER_ANNOTATION: &str = "hpa-bridge.io/recommender";
/// The one value of [`RECOMMENDER_ANNOTATION`] that silences HB023.
pub const RECOMMENDER_OUTSIDE: &str = "outside-workload";

/// What the check can tell about where the recommendation series come from.
enum Source {
    /// Discovery scrapes the workload's own pods: they may export the series.
    OwnPods(String),
    /// Discovery is configured, and the workload's pods are not among the scraped ones.
    Elsewhere,
    /// No discovery, or no pod template to match: nothing to tell by.
    Unknown(String),
}

fn source(ctx: &Ctx, ns: &str, target: &CrossVersionObjectReference) -> Source {
    let Some(discovery) = &ctx.config.scrape.kubernetes else {
        return Source::Unknown(
            "the adapter has no Kubernetes discovery (scrape.kubernetes), so the check cannot see which pods are scraped".into(),
        );
    };
    let labels = ctx
        .inputs
        .workloads
        .iter()
        .find(|w| w.kind == target.kind && w.namespace == ns && w.name == target.name)
        .and_then(|w| w.pod_labels.as_ref());
    let Some(labels) = labels else {
        return Source::Unknown(format!(
            "the pod template of {} {ns}/{} is not among the inputs (give its manifest with -f, or use --cluster)",
            target.kind, target.name
        ));
    };
    let namespace_watched =
        discovery.namespaces.is_empty() || discovery.namespaces.iter().any(|n| n == ns);
    let selected = match &discovery.pod_selector {
        None => Some(true),
        Some(text) => hpa_bridge_rules::selector::LabelSelector::parse(text)
            .ok()
            .map(|s| s.matches(labels)),
    };
    match (namespace_watched, selected) {
        (true, Some(true)) => Source::OwnPods(format!(
            "the adapter's discovery (scrape.kubernetes{}) scrapes the pods of {} {ns}/{}",
            discovery
                .pod_selector
                .as_ref()
                .map(|s| format!(", podSelector {s:?}"))
                .unwrap_or_default(),
            target.kind,
            target.name
        )),
        (_, None) => Source::Unknown(
            "scrape.kubernetes.podSelector does not parse, so the check cannot match it".into(),
        ),
        _ => Source::Elsewhere,
    }
}

pub(super) fn check_scale_from_zero(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    hpa: &HorizontalPodAutoscaler,
    target: &CrossVersionObjectReference,
    uses: &Uses,
) {
    // The floor alone never asks for more than the pods already hold; only a recommendation
    // or a load total can bring the workload back from 0.
    if !uses.recommendation {
        return;
    }
    let annotation = hpa
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECOMMENDER_ANNOTATION));
    if annotation.map(String::as_str) == Some(RECOMMENDER_OUTSIDE) {
        return;
    }
    let ns = object.namespace.clone().unwrap_or_default();
    let (severity, evidence) = match source(ctx, &ns, target) {
        Source::Elsewhere => return,
        Source::OwnPods(why) => (Severity::Error, why),
        Source::Unknown(why) => (Severity::Warning, why),
    };
    let bad_value = annotation
        .map(|v| format!(" ({RECOMMENDER_ANNOTATION}: {v:?} is not {RECOMMENDER_OUTSIDE:?}, so it is ignored)"))
        .unwrap_or_default();
    ctx.push(
        rules::RECOMMENDER_IN_WORKLOAD,
        severity,
        object,
        "spec.minReplicas",
        format!("minReplicas is 0 and the recommendation may be exported by the workload's own pods: {evidence}{bad_value}"),
        "at 0 replicas nothing exports a recommendation that runs inside the workload (the libapp controller runs in the service's own processes, docs/hpa-behaviour.md §4.1). The adapter then has no series to serve (404) or refuses a stale one, the metric is invalid, and the HPA never scales the workload up again (docs/hpa-behaviour.md §7.3)",
        format!("run the recommender outside the workload and annotate the HPA {RECOMMENDER_ANNOTATION}: {RECOMMENDER_OUTSIDE}, or set minReplicas to 1 so one pod always runs it"),
        src,
    );
}
