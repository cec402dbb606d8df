//! The APIService rules: `v1beta1.external.metrics.k8s.io`, and `v1beta2.custom.metrics.k8s.io`
//! when an HPA reads hpa-bridge's Object metrics, each owned by hpa-bridge and Available
//! (docs/hpa-behaviour.md §3.1, §3.4, §6.5).

use super::*;

/// The Helm chart's values (charts/hpa-bridge) that register the external metrics APIService,
/// and that leave it to KEDA while serving custom metrics instead.
const HELM_EXTERNAL_ON: &str = "apiServices.external.enabled=true";
const HELM_BESIDE_KEDA: &str = "apiServices.external.enabled=false,apiServices.custom.enabled=true";

/// The Helm value and the kustomize overlay that register the custom metrics APIServices.
const HELM_CUSTOM_ON: &str = "apiServices.custom.enabled=true";

pub(super) fn check_api_service(ctx: &mut Ctx) {
    check_group(ctx, Group::External);
    check_group(ctx, Group::Custom);
}

/// The two metrics API groups an HPA reads hpa-bridge through.
#[derive(Clone, Copy, PartialEq)]
enum Group {
    External,
    Custom,
}

impl Group {
    fn api_service(self) -> &'static str {
        match self {
            Group::External => EXTERNAL_METRICS_APISERVICE,
            Group::Custom => CUSTOM_METRICS_APISERVICE,
        }
    }

    fn input(self, inputs: &Inputs) -> Option<ApiServiceInput> {
        match self {
            Group::External => inputs.api_service.clone(),
            Group::Custom => inputs.custom_api_service.clone(),
        }
    }

    /// What the HPA's metrics read through it are called.
    fn metrics(self) -> &'static str {
        match self {
            Group::External => "External",
            Group::Custom => "Object",
        }
    }

    fn install(self) -> String {
        match self {
            Group::External => format!("the Helm chart's {HELM_EXTERNAL_ON} (its default), or manifests/ (kubectl apply -k)"),
            Group::Custom => format!("the Helm value {HELM_CUSTOM_ON}, or the kustomize overlay manifests/overlays/custom-metrics"),
        }
    }
}

fn check_group(ctx: &mut Ctx, group: Group) {
    if group == Group::Custom && ctx.inputs.custom_api_service_unreadable {
        return;
    }
    let name = group.api_service();
    let object = ObjectRef {
        kind: "APIService".into(),
        namespace: None,
        name: name.into(),
    };
    let (want_ns, want_name) = ctx.settings.adapter_service.clone();
    let metrics = group.metrics();
    // A group matters only to the HPAs that read hpa-bridge's metrics through it. Installed
    // beside KEDA (external.metrics left to it, Object metrics on custom.metrics), another
    // owner of external.metrics is the intended setup and no HPA is affected.
    let readers: Vec<String> = ctx
        .inputs
        .hpas
        .iter()
        .filter(|h| {
            inputs::queries_for(&h.hpa, ctx.config)
                .iter()
                .any(|q| q.object.is_some() == (group == Group::Custom))
        })
        .map(|h| {
            format!(
                "{}/{}",
                h.hpa.metadata.namespace.as_deref().unwrap_or("default"),
                h.hpa.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect();
    let (severity, affected) = match readers.as_slice() {
        // Many clusters give custom.metrics to another adapter for their own HPAs: with no
        // HPA reading hpa-bridge's Object metrics there is nothing to say.
        [] if group == Group::Custom => return,
        [] => (
            Severity::Info,
            format!("no HPA given reads hpa-bridge's metrics as {metrics} metrics, so none is affected yet"),
        ),
        some => (
            Severity::Error,
            format!(
                "HPAs that read hpa-bridge's metrics as {metrics} metrics: {}",
                some.join(", ")
            ),
        ),
    };
    let Some(api) = group.input(ctx.inputs) else {
        if ctx.inputs.live {
            ctx.push(
                rules::APISERVICE_UNAVAILABLE,
                severity,
                &object,
                "",
                format!("the cluster has no APIService {name}; {affected}"),
                format!("every {metrics} metric request of every HPA fails, so no HPA using one can scale on it (docs/hpa-behaviour.md §1.6)"),
                format!("install hpa-bridge's APIService, pointing at its Service: {}", group.install()),
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
            let fix = match group {
                Group::External => format!("to keep the other adapter (KEDA), leave external.metrics to it and install hpa-bridge with the Helm values {HELM_BESIDE_KEDA}, serving Object metrics on custom.metrics.k8s.io (docs/beside-other-adapters.md; with kustomize, manifests/overlays/beside-keda); to move external metrics to hpa-bridge, remove the other adapter's external metrics (prometheus-adapter's external rules) and install with {HELM_EXTERNAL_ON}, pointing the APIService at {want_ns}/{want_name}; if hpa-bridge runs under another name, pass --adapter-service"),
                Group::Custom => format!("custom.metrics can have one owner (docs/beside-other-adapters.md): keep the other adapter there and read hpa-bridge's metrics as External metrics, or move its custom rules and install hpa-bridge with {HELM_CUSTOM_ON}, pointing the APIService at {want_ns}/{want_name}; if hpa-bridge runs under another name, pass --adapter-service"),
            };
            let group_name = name.split_once('.').map_or(name, |(_, g)| g);
            ctx.push(
                rules::FOREIGN_APISERVICE,
                severity,
                &object,
                "spec.service",
                format!("{group_name} is served by {owner}, not by hpa-bridge's Service {want_ns}/{want_name}; {affected}"),
                format!("only one APIService per group version can exist (docs/hpa-behaviour.md §3.1): every HPA {metrics} metric request goes to that owner, which does not know hpa-bridge's metrics"),
                fix,
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
            format!("while it is unavailable the aggregator answers 503 to every {metrics} metric request, so HPAs freeze scale-in and cannot use these metrics to scale out; it also breaks discovery and namespace deletion (docs/hpa-behaviour.md §3.1)"),
            format!("check the adapter's pods and Service endpoints, the caBundle, and that GET /apis/{} answers within 5 s; where the API server cannot reach pod IPs, install with the Helm value hostNetwork=true", name.split_once('.').map(|(v, g)| format!("{g}/{v}")).unwrap_or_default()),
            &api.source,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(api_service: Option<ApiServiceInput>) -> Vec<Finding> {
        findings_with(api_service, Vec::new())
    }

    fn findings_with(api_service: Option<ApiServiceInput>, hpas: Vec<HpaInput>) -> Vec<Finding> {
        let ours = Some(ApiServiceInput {
            service: Some(("hpa-bridge".into(), "hpa-bridge".into())),
            available: Some((true, String::new())),
            source: None,
        });
        findings_of(api_service, ours, hpas)
    }

    fn findings_of(
        api_service: Option<ApiServiceInput>,
        custom_api_service: Option<ApiServiceInput>,
        hpas: Vec<HpaInput>,
    ) -> Vec<Finding> {
        let inputs = Inputs {
            api_service,
            custom_api_service,
            hpas,
            live: true,
            ..Inputs::default()
        };
        let config = Config::from_yaml("{}").unwrap();
        check(&inputs, &config, &CheckSettings::default())
            .findings
            .into_iter()
            .filter(|f| f.code == "HB016" || f.code == "HB017")
            .collect()
    }

    /// An HPA in `games` scaling lobby on `metric`, as an External metric or an Object one.
    fn hpa(name: &str, metric: &str, external: bool) -> HpaInput {
        let source = if external {
            serde_json::json!({"type": "External", "external": {
                "metric": {"name": metric, "selector": {"matchLabels": {"hpa_target_name": "lobby"}}},
                "target": {"type": "AverageValue", "averageValue": "1"}}})
        } else {
            serde_json::json!({"type": "Object", "object": {
                "describedObject": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lobby"},
                "metric": {"name": metric},
                "target": {"type": "Value", "value": "1"}}})
        };
        let hpa = serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "games"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lobby"},
                     "minReplicas": 1, "maxReplicas": 10, "metrics": [source]}
        }))
        .unwrap();
        HpaInput { hpa, source: None }
    }

    fn keda() -> Option<ApiServiceInput> {
        Some(ApiServiceInput {
            service: Some(("keda".into(), "keda-operator-metrics-apiserver".into())),
            available: Some((true, String::new())),
            source: None,
        })
    }

    #[test]
    fn a_foreign_owner_names_the_helm_values_that_install_beside_it() {
        let f = findings_with(keda(), vec![hpa("lobby", "hpa_target_replicas", true)]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "HB016");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].message.contains("games/lobby"), "{}", f[0].message);
        assert!(f[0].fix.contains(HELM_BESIDE_KEDA), "{}", f[0].fix);
        assert!(f[0].fix.contains(HELM_EXTERNAL_ON), "{}", f[0].fix);
    }

    /// Installed beside KEDA as HB016's own fix says (external.metrics left to KEDA,
    /// Object metrics on custom.metrics), no HPA reads hpa-bridge's metrics as External, so
    /// the foreign owner is only noted.
    #[test]
    fn a_foreign_owner_is_only_noted_when_no_hpa_reads_the_adapter_as_external() {
        for hpas in [
            Vec::new(),
            vec![hpa("lobby", "hpa_target_replicas", false)],
            // KEDA's own metric, External, served by KEDA.
            vec![hpa("queue", "s0-rabbitmq-jobs", true)],
        ] {
            let f = findings_with(keda(), hpas);
            assert_eq!(f.len(), 1, "{f:?}");
            assert_eq!(f[0].code, "HB016");
            assert_eq!(f[0].severity, Severity::Info, "{f:?}");
            assert!(
                f[0].message.contains("none is affected"),
                "{}",
                f[0].message
            );
        }
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

    /// Object metrics go through custom.metrics: with an HPA reading hpa-bridge's Object
    /// metric, that APIService must exist, be hpa-bridge's and be Available; with none, its
    /// owner is not hpa-bridge's business.
    #[test]
    fn the_custom_metrics_apiservice_is_checked_for_the_hpas_reading_object_metrics() {
        let ours = Some(ApiServiceInput {
            service: Some(("hpa-bridge".into(), "hpa-bridge".into())),
            available: Some((true, String::new())),
            source: None,
        });
        let adapter = Some(ApiServiceInput {
            service: Some(("monitoring".into(), "prometheus-adapter".into())),
            available: Some((true, String::new())),
            source: None,
        });
        let object = || vec![hpa("lobby", "hpa_target_replicas", false)];
        assert!(findings_of(ours.clone(), ours.clone(), object()).is_empty());
        // Nobody reads Object metrics: another owner, or none, says nothing.
        let external = || vec![hpa("lobby", "hpa_target_replicas", true)];
        assert!(findings_of(ours.clone(), adapter.clone(), external()).is_empty());
        assert!(findings_of(ours.clone(), None, external()).is_empty());

        let f = findings_of(ours.clone(), adapter, object());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].code, f[0].severity), ("HB016", Severity::Error));
        assert_eq!(f[0].object.name, CUSTOM_METRICS_APISERVICE);
        assert!(
            f[0].message.contains(
                "custom.metrics.k8s.io is served by Service monitoring/prometheus-adapter"
            ) && f[0].message.contains("as Object metrics: games/lobby"),
            "{}",
            f[0].message
        );
        assert!(f[0].fix.contains(HELM_CUSTOM_ON), "{}", f[0].fix);

        let f = findings_of(ours.clone(), None, object());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "HB017");
        assert!(
            f[0].fix.contains("manifests/overlays/custom-metrics"),
            "{}",
            f[0].fix
        );

        let unavailable = Some(ApiServiceInput {
            available: Some((false, "FailedDiscoveryCheck: timeout".into())),
            ..ours.clone().unwrap()
        });
        let f = findings_of(ours, unavailable, object());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "HB017");
        assert!(
            f[0].fix
                .contains("GET /apis/custom.metrics.k8s.io/v1beta2 answers"),
            "{}",
            f[0].fix
        );
    }
}
