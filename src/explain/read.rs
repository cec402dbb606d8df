//! The I/O of `explain`: the HPA and its scale target from the API server, the target's pods,
//! the other HPAs of the namespace, the external metrics APIService, and hpa-bridge's answers
//! from the adapter's status port. Whatever cannot be read is kept as its error, and the
//! explanation says what it could not see.

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::Client;
use serde_json::Value;

use super::observation::{AnswerHistory, Observation, PodCount, ScaleView, ServedAnswer};
use hpa_bridge_rules::clock::Millis;

/// The most of the status document read; a larger one is refused, not buffered.
const MAX_STATUS_BYTES: usize = 64 << 20;
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("HorizontalPodAutoscaler {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("reading HorizontalPodAutoscaler {namespace}/{name}: {source}")]
    Hpa {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

/// Where to read from.
pub struct Target<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// The adapter's status port, e.g. `http://127.0.0.1:9101`.
    pub status_url: &'a str,
    /// The Service that should own the external metrics APIService, `namespace/name`.
    pub adapter_service: (&'a str, &'a str),
}

/// Reads everything an explanation needs. Only a missing or unreadable HPA is an error.
pub async fn observe(
    client: &Client,
    t: &Target<'_>,
    now_ms: Millis,
) -> Result<Observation, ReadError> {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), t.namespace);
    let hpa = match hpas.get_opt(t.name).await {
        Ok(Some(h)) => h,
        Ok(None) => {
            return Err(ReadError::NotFound {
                namespace: t.namespace.into(),
                name: t.name.into(),
            })
        }
        Err(source) => {
            return Err(ReadError::Hpa {
                namespace: t.namespace.into(),
                name: t.name.into(),
                source,
            })
        }
    };
    let target_ref = hpa.spec.as_ref().map(|s| s.scale_target_ref.clone());
    let hpa_json = serde_json::to_value(&hpa).unwrap_or(Value::Null);
    let scale = match &target_ref {
        Some(r) => {
            read_scale(
                client,
                t.namespace,
                &r.api_version.clone().unwrap_or_default(),
                &r.kind,
                &r.name,
            )
            .await
        }
        None => Err("the HPA has no scaleTargetRef".into()),
    };
    let pods = match &scale {
        Ok(s) if !s.selector.is_empty() => count_pods(client, t.namespace, &s.selector).await,
        Ok(_) => Err("the scale target reports no selector".into()),
        Err(_) => Err("the scale target could not be read".into()),
    };
    let other_hpas_on_target = match (&target_ref, hpas.list(&ListParams::default()).await) {
        (Some(r), Ok(list)) => list
            .items
            .iter()
            .filter(|h| h.metadata.name.as_deref() != Some(t.name))
            .filter(|h| {
                h.spec.as_ref().is_some_and(|s| {
                    s.scale_target_ref.kind == r.kind && s.scale_target_ref.name == r.name
                })
            })
            .filter_map(|h| h.metadata.name.clone())
            .collect(),
        _ => Vec::new(),
    };
    let reads_external = hpa
        .spec
        .as_ref()
        .and_then(|s| s.metrics.as_ref())
        .is_some_and(|m| m.iter().any(|m| m.type_ == "External"));
    let foreign_external_owner = if reads_external {
        foreign_owner(client, t.adapter_service).await
    } else {
        None
    };
    let served = read_status(t.status_url, "/status", t.namespace)
        .await
        .map(|doc| ServedAnswer::from_status_document(&doc));
    let history = read_status(t.status_url, "/status/history", t.namespace)
        .await
        .map(|doc| AnswerHistory::from_history_document(&doc));
    let kube_minor = client
        .apiserver_version()
        .await
        .ok()
        .and_then(|v| v.minor.trim_end_matches('+').parse().ok())
        .unwrap_or(hpa_bridge_hpa_model::NEWEST_KUBE_MINOR);
    Ok(Observation {
        hpa: hpa_json,
        scale,
        pods,
        served,
        history,
        other_hpas_on_target,
        foreign_external_owner,
        kube_minor,
        now_ms,
    })
}

/// The `scale` subresource of the target, found through discovery as the controller finds it.
async fn read_scale(
    client: &Client,
    namespace: &str,
    api_version: &str,
    kind: &str,
    name: &str,
) -> Result<ScaleView, String> {
    let resource = resource_of(client, api_version, kind).await?;
    scale_of(client, namespace, &resource, kind, name).await
}

/// The resource serving `kind` of `api_version`, found through discovery.
pub async fn resource_of(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<kube::api::ApiResource, String> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("{kind} {api_version}: {e}"))?;
    Ok(resource)
}

/// The `scale` subresource of `name`, a `kind` served by `resource`.
pub async fn scale_of(
    client: &Client,
    namespace: &str,
    resource: &kube::api::ApiResource,
    kind: &str,
    name: &str,
) -> Result<ScaleView, String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    let scale = api
        .get_scale(name)
        .await
        .map_err(|e| format!("{kind}/{name} scale: {e}"))?;
    Ok(ScaleView {
        spec_replicas: scale.spec.and_then(|s| s.replicas).unwrap_or(0),
        status_replicas: scale.status.as_ref().map(|s| s.replicas).unwrap_or(0),
        selector: scale.status.and_then(|s| s.selector).unwrap_or_default(),
    })
}

/// The pods the selector selects, and how many are Running with `Ready=True`.
async fn count_pods(client: &Client, namespace: &str, selector: &str) -> Result<PodCount, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| format!("listing pods {selector}: {e}"))?;
    let ready = list
        .items
        .iter()
        .filter(|p| {
            let st = p.status.as_ref();
            st.and_then(|s| s.phase.as_deref()) == Some("Running")
                && st
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    Ok(PodCount {
        pods: list.items.len() as i32,
        ready: ready as i32,
    })
}

/// The owner of `v1beta1.external.metrics.k8s.io` when it is not hpa-bridge's Service.
async fn foreign_owner(client: &Client, adapter: (&str, &str)) -> Option<String> {
    let gvk = GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService");
    let resource = kube::api::ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let svc = api
        .get_opt("v1beta1.external.metrics.k8s.io")
        .await
        .ok()??;
    let input =
        crate::check::manifest::api_service_from_json(&serde_json::to_value(&svc).ok()?, None);
    match input.service {
        Some((ns, name)) if ns == adapter.0 && name == adapter.1 => None,
        Some((ns, name)) => Some(format!("{ns}/{name}")),
        None => Some("local (no service)".into()),
    }
}

/// The adapter's own prediction of `namespace/name` (its `/status` `hpas` entry: the shadow
/// mode's explanation and how its predictions fared), when it makes one.
pub async fn adapter_prediction(status_url: &str, namespace: &str, name: &str) -> Option<Value> {
    let doc = read_status(status_url, "/status", namespace).await.ok()?;
    let want = format!("{namespace}/{name}");
    doc["hpas"]
        .as_array()?
        .iter()
        .find(|h| h["hpa"] == want.as_str())
        .cloned()
}

/// `GET <status_url><path>?namespace=NS` on the adapter's loopback status port.
async fn read_status(status_url: &str, path: &str, namespace: &str) -> Result<Value, String> {
    let url = format!(
        "{}{path}?namespace={namespace}",
        status_url.trim_end_matches('/')
    );
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let fetch = async {
        let resp = client.get(uri).await.map_err(|e| {
            format!("{url}: {e} (is `kubectl port-forward` to the adapter's status port running?)")
        })?;
        let code = resp.status();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_STATUS_BYTES)
            .collect()
            .await
            .map_err(|e| format!("{url}: reading the body: {e}"))?
            .to_bytes();
        if !code.is_success() {
            return Err(format!("{url}: HTTP {code}"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not a status document: {e}"))
    };
    tokio::time::timeout(STATUS_TIMEOUT, fetch)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "{url}: no answer within {} s",
                STATUS_TIMEOUT.as_secs()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;

    /// A loopback HTTP server answering every request with `code` and `body`; returns its URL.
    async fn serve_once(code: u16, body: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let svc = service_fn(
                    move |req: http::Request<hyper::body::Incoming>| async move {
                        assert_eq!(req.uri().path(), "/status");
                        assert_eq!(req.uri().query(), Some("namespace=games"));
                        http::Response::builder()
                            .status(code)
                            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                    },
                );
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn the_status_port_is_read_over_http() {
        let url = serve_once(
            200,
            r#"{"workloads":[{"namespace":"games","metric":"hpa_target_replicas","selector":"","answer":{"outcome":{"state":"value","value":3},"reason":"max 3"}}]}"#,
        )
        .await;
        let doc = read_status(&url, "/status", "games").await.unwrap();
        let rows = ServedAnswer::from_status_document(&doc);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].value, Some(3));
        let url = serve_once(500, "building the status document failed\n").await;
        assert!(read_status(&url, "/status", "games")
            .await
            .unwrap_err()
            .contains("HTTP 500"));
        let url = serve_once(200, "not json").await;
        assert!(read_status(&url, "/status", "games")
            .await
            .unwrap_err()
            .contains("not a status document"));
    }

    #[tokio::test]
    async fn an_unreachable_status_port_says_to_forward_it() {
        // A port just freed: nothing listens there.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = read_status(&format!("http://127.0.0.1:{port}"), "/status", "games")
            .await
            .unwrap_err();
        assert!(err.contains("port-forward"), "{err}");
    }
}
