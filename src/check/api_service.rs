//! The APIService rules: one `v1beta1.external.metrics.k8s.io`, owned by hpa-bridge and
//! Available (docs/hpa-behaviour.md §3.1, §3.4).

use super::*;

/// The Helm chart's values (charts/hpa-bridge) that register the external metrics APIService,
/// and that leave it to KEDA while serving custom metrics instead.
const HELM_EXTERNAL_ON: &str = "apiServices.external.enabled=true";
const HELM_BESIDE_KEDA: &str = "apiServices.external.enabled=false,apiServices.custom.enabled=true";

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
                format!("install hpa-bridge's APIService, pointing at its Service: the Helm chart's {HELM_EXTERNAL_ON} (its default), or manifests/ (kubectl apply -k)"),
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
                format!("to keep the other adapter (KEDA), leave external.metrics to it and install hpa-bridge with the Helm values {HELM_BESIDE_KEDA}, serving Object metrics on custom.metrics.k8s.io (README.md, \"Installing beside another adapter\"); to move external metrics to hpa-bridge, remove the other adapter's external metrics (prometheus-adapter's external rules) and install with {HELM_EXTERNAL_ON}, pointing the APIService at {want_ns}/{want_name}; if hpa-bridge runs under another name, pass --adapter-service"),
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
            "check the adapter's pods and Service endpoints, the caBundle, and that GET /apis/external.metrics.k8s.io/v1beta1 answers within 5 s; where the API server cannot reach pod IPs, install with the Helm value hostNetwork=true",
            &api.source,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(api_service: Option<ApiServiceInput>) -> Vec<Finding> {
        let inputs = Inputs {
            api_service,
            live: true,
            ..Inputs::default()
        };
        let config = Config::from_yaml("{}").unwrap();
        check(&inputs, &config, &CheckSettings::default()).findings
    }

    #[test]
    fn a_foreign_owner_names_the_helm_values_that_install_beside_it() {
        let f = findings(Some(ApiServiceInput {
            service: Some(("keda".into(), "keda-operator-metrics-apiserver".into())),
            available: Some((true, String::new())),
            source: None,
        }));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "HB016");
        assert!(f[0].fix.contains(HELM_BESIDE_KEDA), "{}", f[0].fix);
        assert!(f[0].fix.contains(HELM_EXTERNAL_ON), "{}", f[0].fix);
    }

    #[test]
    fn a_missing_or_unavailable_apiservice_names_the_helm_value_that_installs_or_reaches_it() {
        let f = findings(None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "HB017");
        assert!(f[0].fix.contains(HELM_EXTERNAL_ON), "{}", f[0].fix);
        let f = findings(Some(ApiServiceInput {
            service: Some(("hpa-bridge".into(), "hpa-bridge".into())),
            available: Some((false, "FailedDiscoveryCheck".into())),
            source: None,
        }));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "HB017");
        assert!(f[0].fix.contains("hostNetwork=true"), "{}", f[0].fix);
    }
}
