//! `check --cluster`: read the live objects (HPAs, their scale targets, KEDA ScaledObjects, the
//! metrics APIServices) through the kubeconfig, and ask the adapter for
//! every metric the HPAs use, the way the HPA does: through the API server's aggregation
//! layer (docs/hpa-behaviour.md §1.2).

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::Client;

use super::manifest::{api_service_from_json, scaled_object_from_json, workload_from_json};
use super::{
    queries_for, AdapterAnswer, AdapterReply, ApiServiceInput, CheckSettings, HpaInput, Inputs,
    MetricQuery, ScaledObjectInput, CUSTOM_METRICS_APISERVICE, EXTERNAL_METRICS_APISERVICE,
};
use hpa_bridge_rules::config::Config;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("kubeconfig: {0}")]
    Config(String),
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Only HPAs in this namespace; all namespaces when None.
    pub namespace: Option<String>,
}

pub async fn client(opts: &ClusterOptions) -> Result<Client, ClusterError> {
    let options = KubeConfigOptions {
        context: opts.context.clone(),
        ..Default::default()
    };
    let config = match &opts.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?
        }
        None if opts.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| ClusterError::Config(e.to_string()))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| ClusterError::Config(e.to_string()))?,
    };
    // The HPA makes one GET per metric per sync and does not retry (docs/hpa-behaviour.md §1.7.5): a
    // 503 refusal is the answer to report, not a transient to retry away.
    let mut config = config;
    config.default_retry = false;
    Client::try_from(config).map_err(|e| ClusterError::Config(e.to_string()))
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Api { what, source }
}

/// Read HPAs, their scale targets, the APIService and the adapter's answers.
pub async fn read(
    client: Client,
    opts: &ClusterOptions,
    config: &Config,
    settings: &CheckSettings,
) -> Result<Inputs, ClusterError> {
    let hpa_api: Api<HorizontalPodAutoscaler> = match &opts.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let hpas = hpa_api
        .list(&ListParams::default())
        .await
        .map_err(api_err("listing autoscaling/v2 HorizontalPodAutoscalers"))?
        .items;
    let mut inputs = Inputs {
        live: true,
        ..Default::default()
    };
    for hpa in &hpas {
        let ns = hpa.metadata.namespace.clone().unwrap_or_default();
        let Some(spec) = &hpa.spec else { continue };
        let target = &spec.scale_target_ref;
        if inputs
            .workloads
            .iter()
            .any(|w| w.kind == target.kind && w.namespace == ns && w.name == target.name)
        {
            continue;
        }
        let what = format!("reading {} {}/{}", target.kind, ns, target.name);
        let object = match target.kind.as_str() {
            "StatefulSet" => Api::<StatefulSet>::namespaced(client.clone(), &ns)
                .get_opt(&target.name)
                .await
                .map_err(api_err(what.clone()))?
                .map(serde_json::to_value),
            "Deployment" => Api::<Deployment>::namespaced(client.clone(), &ns)
                .get_opt(&target.name)
                .await
                .map_err(api_err(what.clone()))?
                .map(serde_json::to_value),
            _ => None,
        };
        if let Some(object) = object {
            let invalid = |message: String| ClusterError::Invalid {
                what: what.clone(),
                message,
            };
            let object = object.map_err(|e| invalid(e.to_string()))?;
            let mut w = workload_from_json(&object, true, None).map_err(invalid)?;
            w.kind = target.kind.clone();
            w.namespace = ns;
            w.name = target.name.clone();
            inputs.workloads.push(w);
        }
    }
    inputs.scaled_objects = scaled_objects(&client, opts).await?;
    inputs.api_service = read_api_service(&client, EXTERNAL_METRICS_APISERVICE).await?;
    // The custom metrics APIService matters only to the HPAs that read hpa-bridge's Object
    // metrics, and the check role may grant only the external one.
    let queries: Vec<MetricQuery> = hpas.iter().flat_map(|h| queries_for(h, config)).collect();
    if queries.iter().any(|q| q.object.is_some()) {
        inputs.custom_api_service = match read_api_service(&client, CUSTOM_METRICS_APISERVICE).await
        {
            Ok(api) => api,
            // A check role from before Object metrics were checked: the rest still runs.
            Err(ClusterError::Api {
                what,
                source: kube::Error::Api(status),
            }) if status.code == 403 => {
                eprintln!(
                    "warning: {what}: {} (the Object metrics' APIService and answers are not checked; apply manifests/check/rbac.yaml again)",
                    status.message
                );
                inputs.custom_api_service_unreadable = true;
                None
            }
            Err(e) => return Err(e),
        };
    }
    // Ask only when the requests reach hpa-bridge: another owner's answers, or the
    // aggregator's 503 while unavailable, say nothing about hpa-bridge.
    let ours = |api: &Option<ApiServiceInput>| {
        api.as_ref().is_some_and(|a| {
            a.service.as_ref() == Some(&settings.adapter_service)
                && a.available.as_ref().is_none_or(|(ok, _)| *ok)
        })
    };
    let (external, custom) = (ours(&inputs.api_service), ours(&inputs.custom_api_service));
    for query in queries {
        if (query.object.is_none() && external) || (query.object.is_some() && custom) {
            let reply = fetch(&client, &query.path()).await;
            tracing::debug!(path = %query.path(), ?reply, "adapter answer");
            inputs.answers.push(AdapterAnswer { query, reply });
        }
    }
    inputs.hpas = hpas
        .into_iter()
        .map(|hpa| HpaInput { hpa, source: None })
        .collect();
    Ok(inputs)
}

async fn read_api_service(
    client: &Client,
    name: &str,
) -> Result<Option<ApiServiceInput>, ClusterError> {
    let api_service = Api::<APIService>::all(client.clone())
        .get_opt(name)
        .await
        .map_err(api_err(format!("reading APIService {name}")))?;
    Ok(api_service.map(|a| {
        let v = serde_json::to_value(&a).unwrap_or_default();
        api_service_from_json(&v, None)
    }))
}

/// The KEDA ScaledObjects, each another writer of its target's replicas (HB021). A cluster
/// without KEDA has no such resource (404), and a checker not allowed to list them (403) is
/// told on stderr that HB021 went unchecked: neither stops the other checks.
async fn scaled_objects(
    client: &Client,
    opts: &ClusterOptions,
) -> Result<Vec<ScaledObjectInput>, ClusterError> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "keda.sh",
        "v1alpha1",
        "ScaledObject",
    ));
    let api: Api<DynamicObject> = match &opts.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let what = "listing keda.sh/v1alpha1 ScaledObjects";
    let list = match api.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Vec::new()),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            eprintln!(
                "warning: {what}: {} (HB021, an HPA beside a ScaledObject, is not checked)",
                status.message
            );
            return Ok(Vec::new());
        }
        Err(e) => return Err(api_err(what)(e)),
    };
    let mut out = Vec::new();
    for so in list.items {
        let name = so.metadata.name.clone().unwrap_or_default();
        let invalid = |message: String| ClusterError::Invalid {
            what: format!("reading ScaledObject {name}"),
            message,
        };
        let v = serde_json::to_value(&so).map_err(|e| invalid(e.to_string()))?;
        out.push(scaled_object_from_json(&v, None).map_err(invalid)?);
    }
    Ok(out)
}

async fn fetch(client: &Client, path: &str) -> AdapterReply {
    let request = match http::Request::get(path).body(Vec::new()) {
        Ok(r) => r,
        Err(e) => {
            return AdapterReply::Error {
                code: 0,
                reason: "BadRequest".into(),
                message: e.to_string(),
            }
        }
    };
    match client.request_text(request).await {
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(v) => {
                let items = v["items"].as_array().map(Vec::len).unwrap_or(0);
                AdapterReply::Values {
                    items,
                    value: v["items"][0]["value"].as_str().map(String::from),
                }
            }
            Err(e) => AdapterReply::Error {
                code: 200,
                reason: "InvalidResponse".into(),
                message: format!("not JSON: {e}"),
            },
        },
        Err(kube::Error::Api(status)) => AdapterReply::Error {
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
        },
        Err(e) => AdapterReply::Error {
            code: 0,
            reason: "RequestFailed".into(),
            message: e.to_string(),
        },
    }
}
