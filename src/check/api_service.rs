//! The APIService rules: one `v1beta1.external.metrics.k8s.io`, owned by hpa-bridge and
//! Available (docs/hpa-behaviour.md §3.1, §3.4).

use super::*;

pub(super) fn check_api_service(ctx: &mut Ctx) {
    let object = ObjectRef {
        kind: "APIService".into(),
        namespace: None,
        name: EXTERNAL_METRICS_APISERVICE.into(),
    };
    let (want_ns, want_name) = ctx.settings.adapter_service.clone();
    let Some(api) = ctx.inputs.api_service.clone() else {
        if ctx.inputs.live {
            ctx.push(
                rules::APISERVICE_UNAVAILABLE,
                Severity::Error,
                &object,
                "",
                format!("the cluster has no APIService {EXTERNAL_METRICS_APISERVICE}"),
                "every External metric request of every HPA fails, so no HPA using one can scale on it (docs/hpa-behaviour.md §1.6)",
                "install hpa-bridge's APIService (deploy/), pointing at its Service",
                &None,
            );
        }
        return;
    };
    match &api.service {
        Some((ns, name)) if *ns == want_ns && *name == want_name => {}
        other => {
            let owner = match other {
                Some((ns, name)) => format!("Service {ns}/{name}"),
                None => "the API server itself (no spec.service)".into(),
            };
            ctx.push(
                rules::FOREIGN_APISERVICE,
                Severity::Error,
                &object,
                "spec.service",
                format!("external.metrics.k8s.io is served by {owner}, not by hpa-bridge's Service {want_ns}/{want_name}"),
                "only one APIService per group version can exist (docs/hpa-behaviour.md §3.1): every HPA External metric request goes to that owner, which does not know hpa-bridge's metrics",
                format!("point the APIService at {want_ns}/{want_name} (and move the other adapter's external metrics, e.g. KEDA's, to a different mechanism), or pass --adapter-service if hpa-bridge runs under another name"),
                &api.source,
            );
        }
    }
    if let Some((false, why)) = &api.available {
        ctx.push(
            rules::APISERVICE_UNAVAILABLE,
            Severity::Error,
            &object,
            "status.conditions[type=Available]",
            format!("the APIService is not Available: {why}"),
            "while it is unavailable the aggregator answers 503 to every External metric request, so HPAs freeze scale-in and cannot use these metrics to scale out; it also breaks discovery and namespace deletion (docs/hpa-behaviour.md §3.1)",
            "check the adapter's pods and Service endpoints, the caBundle, and that GET /apis/external.metrics.k8s.io/v1beta1 answers within 5 s",
            &api.source,
        );
    }
}
