//! A loopback stand-in for kube-apiserver, for the slow-API part. No kube-apiserver can be
//! installed on the machines this bench runs on, so this serves, over plain HTTP, exactly what
//! `source::discovery` asks for: LIST and WATCH of pods, StatefulSets, ReplicaSets and
//! Deployments in one namespace (or all). Objects are built from k8s-openapi types and
//! serialized, so kube-runtime's reflectors decode them as they would the real thing.
//!
//! Every response waits `delay` before its headers. A watch sends only the pod events the
//! bench sends through [`Objects::send_pod_event`] (none, for the slow-API part) and ends after
//! [`WATCH_SECONDS`], so the reflectors keep re-watching, and every re-watch waits the delay
//! again: a slow API server for as long as the part runs.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::exporter::{self, ExporterSpec};

/// How long a watch stays open before the server ends it (the real one ends watches after
/// minutes; ending them quickly makes the reflectors ask again, and wait again, all the time).
pub const WATCH_SECONDS: u64 = 1;
const RESOURCE_VERSION: &str = "1";

/// The objects served: one StatefulSet per workload of `spec` with `spec.replicas` equal to
/// its pods, and one Running pod per target, annotated for scraping at the exporter's page.
pub struct Objects {
    pub pods: Vec<Value>,
    pub statefulsets: Vec<Value>,
    /// Pod watch events (one JSON line each) to the pod watches open when sent.
    pod_events: tokio::sync::broadcast::Sender<Bytes>,
}

pub fn meta(name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        uid: Some(format!("uid-{name}")),
        name: Some(name),
        namespace: Some("default".into()),
        resource_version: Some(RESOURCE_VERSION.into()),
        labels: Some(labels),
        ..Default::default()
    }
}

impl Objects {
    pub fn new(spec: &ExporterSpec, port: u16) -> Self {
        let per_workload = spec.targets.div_ceil(spec.workloads.max(1));
        let app = |w: usize| BTreeMap::from([("app".to_string(), format!("w{w}"))]);
        let statefulsets = (0..spec.workloads)
            .map(|w| StatefulSet {
                metadata: meta(format!("w{w}"), app(w)),
                spec: Some(StatefulSetSpec {
                    replicas: Some(per_workload as i32),
                    selector: LabelSelector {
                        match_labels: Some(app(w)),
                        ..Default::default()
                    },
                    service_name: Some(format!("w{w}")),
                    ..Default::default()
                }),
                status: None,
            })
            .collect::<Vec<_>>();
        let pods = (0..spec.targets)
            .map(|i| {
                let (w, k) = exporter::workload_of(i, spec.workloads);
                let mut metadata = meta(format!("w{w}-{k}"), app(w));
                metadata.owner_references = Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "StatefulSet".into(),
                    name: format!("w{w}"),
                    uid: format!("uid-w{w}"),
                    controller: Some(true),
                    ..Default::default()
                }]);
                metadata.annotations = Some(BTreeMap::from([
                    ("prometheus.io/scrape".to_string(), "true".to_string()),
                    ("prometheus.io/port".to_string(), port.to_string()),
                    ("prometheus.io/path".to_string(), format!("/t/{i}")),
                ]));
                Pod {
                    metadata,
                    spec: None,
                    status: Some(PodStatus {
                        phase: Some("Running".into()),
                        pod_ip: Some(exporter::target_ip(i, spec.shared_host).to_string()),
                        ..Default::default()
                    }),
                }
            })
            .collect::<Vec<_>>();
        Objects {
            pods: pods
                .iter()
                .filter_map(|p| typed_json(p, "v1", "Pod"))
                .collect(),
            statefulsets: statefulsets
                .iter()
                .filter_map(|s| typed_json(s, "apps/v1", "StatefulSet"))
                .collect(),
            pod_events: tokio::sync::broadcast::channel(64).0,
        }
    }

    /// Send pod `i` (modulo the pods) as MODIFIED, at resource version `version` and with
    /// `annotation` set to `value`, to the pod watches open now; false when none is (the
    /// caller sends again).
    pub fn send_pod_event(&self, i: usize, version: u64, annotation: &str, value: &str) -> bool {
        let Some(mut pod) = self.pods.get(i % self.pods.len().max(1)).cloned() else {
            return false;
        };
        pod["metadata"]["resourceVersion"] = json!(version.to_string());
        pod["metadata"]["annotations"][annotation] = json!(value);
        let line = format!("{}\n", json!({"type": "MODIFIED", "object": pod}));
        self.pod_events.send(Bytes::from(line)).is_ok()
    }
}

/// The object's JSON with the `apiVersion` and `kind` a list item carries.
pub fn typed_json<T: serde::Serialize>(object: &T, api_version: &str, kind: &str) -> Option<Value> {
    let mut v = serde_json::to_value(object).ok()?;
    let map = v.as_object_mut()?;
    map.insert("apiVersion".into(), json!(api_version));
    map.insert("kind".into(), json!(kind));
    Some(v)
}

/// Requests answered, to show that the reflectors kept asking while the part ran.
#[derive(Default)]
pub struct Counters {
    pub lists: AtomicU64,
    pub watches: AtomicU64,
}

type Body = BoxBody<Bytes, Infallible>;

fn respond(
    objects: &Objects,
    counters: &Counters,
    path: &str,
    query: &str,
) -> http::Response<Body> {
    let resource = path.rsplit('/').next().unwrap_or("");
    let (api_version, items): (&str, &[Value]) = match resource {
        "pods" => ("v1", &objects.pods),
        "statefulsets" => ("apps/v1", &objects.statefulsets),
        "replicasets" | "deployments" => ("apps/v1", &[]),
        _ => {
            return http::Response::builder()
                .status(404)
                .body(Full::new(Bytes::from_static(b"{}")).boxed())
                .unwrap_or_default()
        }
    };
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    if watch {
        counters.watches.fetch_add(1, Ordering::Relaxed);
        // Only the pod events the bench sends, then the end, as a watch's timeout ends it.
        let events = (resource == "pods").then(|| objects.pod_events.subscribe());
        let end = tokio::time::Instant::now() + Duration::from_secs(WATCH_SECONDS);
        let stream = futures::stream::unfold(events, move |mut events| async move {
            loop {
                let Some(rx) = events.as_mut() else {
                    tokio::time::sleep_until(end).await;
                    return None;
                };
                match tokio::time::timeout_at(end, rx.recv()).await {
                    Ok(Ok(line)) => return Some((Ok::<_, Infallible>(Frame::data(line)), events)),
                    Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
                    _ => return None,
                }
            }
        });
        return http::Response::builder()
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(BodyExt::boxed(StreamBody::new(stream)))
            .unwrap_or_default();
    }
    counters.lists.fetch_add(1, Ordering::Relaxed);
    let kind = match resource {
        "pods" => "PodList",
        "statefulsets" => "StatefulSetList",
        "replicasets" => "ReplicaSetList",
        _ => "DeploymentList",
    };
    let list = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"resourceVersion": RESOURCE_VERSION},
        "items": items,
    });
    http::Response::builder()
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(list.to_string())).boxed())
        .unwrap_or_default()
}

/// Serve `objects` on `listener`, every response after `delay`.
pub async fn serve(
    listener: TcpListener,
    objects: Arc<Objects>,
    counters: Arc<Counters>,
    delay: Duration,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let objects = objects.clone();
        let counters = counters.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: http::Request<Incoming>| {
                let objects = objects.clone();
                let counters = counters.clone();
                async move {
                    tokio::time::sleep(delay).await;
                    let path = req.uri().path();
                    let query = req.uri().query().unwrap_or("");
                    Ok::<_, Infallible>(respond(&objects, &counters, path, query))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}
