//! A loopback stand-in for kube-apiserver whose pods change, for the deletion-cost part. The
//! slow-API part's server ([`super::kubeapi`]) serves objects that never change; this one
//! serves what `source::discovery` and the deletion-cost writer use of a live API server, over
//! plain HTTP, in the semantics tests/integration/kubeapi.rs gives the tests:
//!
//! - LIST of pods, ReplicaSets, Deployments and StatefulSets (all in `default`);
//! - WATCH of the same from `resourceVersion=N`: every event after N, then live ones, as
//!   newline-delimited `{"type":"ADDED|MODIFIED","object":...}`;
//! - PATCH of a pod with `application/merge-patch+json` (RFC 7386): applied, the
//!   `resourceVersion` moves, and every pod watch sees MODIFIED. Each one is recorded with
//!   the moment it arrived and its `fieldManager`;
//! - the deletion-cost Lease (`coordination.k8s.io/v1`): GET, POST (create) and PUT (replace,
//!   only from the stored `resourceVersion`, else 409), since the writer patches only while
//!   it holds the lease and renews it every retry period, as in production.
//!
//! Objects are k8s-openapi values serialized, so kube-runtime's reflectors decode them as they
//! would the real thing.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::broadcast;

/// The resources served: plural, `apiVersion`, list kind.
const RESOURCES: [(&str, &str, &str); 4] = [
    ("pods", "v1", "PodList"),
    ("replicasets", "apps/v1", "ReplicaSetList"),
    ("deployments", "apps/v1", "DeploymentList"),
    ("statefulsets", "apps/v1", "StatefulSetList"),
];

#[derive(Clone, Debug)]
struct Event {
    rv: u64,
    resource: &'static str,
    kind: &'static str,
    object: Value,
}

/// One PATCH as it arrived.
#[derive(Clone, Debug)]
pub struct Patched {
    pub at: Instant,
    pub pod: String,
    pub field_manager: Option<String>,
    /// The `pod-deletion-cost` annotation the patch sets, if it sets one.
    pub cost: Option<String>,
}

#[derive(Default)]
struct State {
    rv: u64,
    objects: BTreeMap<(&'static str, String), Value>,
    /// Every event, so a watch from any resourceVersion gets what it missed.
    log: Vec<Event>,
    patches: Vec<Patched>,
    leases: BTreeMap<String, Value>,
}

pub struct LiveApi {
    state: Mutex<State>,
    events: broadcast::Sender<Event>,
}

type Body = BoxBody<Bytes, Infallible>;

/// RFC 7386: objects merge key by key, `null` removes a key, anything else replaces.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch) {
        (Some(object), Value::Object(fields)) => {
            for (k, v) in fields {
                match v {
                    Value::Null => {
                        object.remove(k);
                    }
                    _ => merge(object.entry(k.clone()).or_insert(Value::Null), v),
                }
            }
        }
        (None, Value::Object(_)) => {
            *target = json!({});
            merge(target, patch);
        }
        _ => *target = patch.clone(),
    }
}

impl LiveApi {
    /// Serve `objects`, each a `(plural, object)` with its `apiVersion` and `kind`.
    pub fn new(objects: Vec<(&'static str, Value)>) -> Arc<LiveApi> {
        let api = Arc::new(LiveApi {
            state: Mutex::default(),
            events: broadcast::channel(65536).0,
        });
        {
            let mut st = api.state.lock().unwrap_or_else(|e| e.into_inner());
            for (resource, object) in objects {
                api.put(&mut st, resource, object);
            }
        }
        api
    }

    fn put(&self, st: &mut State, resource: &'static str, mut object: Value) {
        st.rv += 1;
        object["metadata"]["resourceVersion"] = json!(st.rv.to_string());
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let kind = match st.objects.insert((resource, name), object.clone()) {
            Some(_) => "MODIFIED",
            None => "ADDED",
        };
        let event = Event {
            rv: st.rv,
            resource,
            kind,
            object,
        };
        st.log.push(event.clone());
        // Sent under the lock, so a watch that reads the log under it misses nothing.
        let _ = self.events.send(event);
    }

    /// Apply a merge patch to pod `name`, as the API server does; false if there is no such pod.
    pub fn patch_pod(&self, name: &str, patch: &Value) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mut object) = st.objects.get(&("pods", name.to_string())).cloned() else {
            return false;
        };
        merge(&mut object, patch);
        self.put(&mut st, "pods", object);
        true
    }

    /// Every PATCH request received, in order.
    pub fn patches(&self) -> Vec<Patched> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .patches
            .clone()
    }

    /// A Lease: GET, POST (create) or PUT (replace from the stored `resourceVersion`).
    fn lease(
        &self,
        method: &http::Method,
        name: Option<&str>,
        body: &[u8],
    ) -> http::Response<Body> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if *method == http::Method::GET {
            let name = name.unwrap_or_default();
            return match st.leases.get(name) {
                Some(lease) => json_response(200, lease),
                None => status(404, "NotFound", &format!("leases \"{name}\" not found")),
            };
        }
        let Ok(mut lease) = serde_json::from_slice::<Value>(body) else {
            return status(400, "BadRequest", "the body is not JSON");
        };
        let key = lease["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let stored = st
            .leases
            .get(&key)
            .map(|l| l["metadata"]["resourceVersion"].clone());
        match (method.as_str(), stored) {
            ("POST", Some(_)) => return status(409, "AlreadyExists", "the lease exists"),
            ("PUT", None) => return status(404, "NotFound", "no such lease"),
            ("PUT", Some(rv)) if rv != lease["metadata"]["resourceVersion"] => {
                return status(409, "Conflict", "the object has been modified");
            }
            ("POST" | "PUT", _) => {}
            _ => return status(405, "MethodNotAllowed", "GET, POST and PUT only"),
        }
        st.rv += 1;
        lease["metadata"]["resourceVersion"] = json!(st.rv.to_string());
        lease["apiVersion"] = json!("coordination.k8s.io/v1");
        lease["kind"] = json!("Lease");
        st.leases.insert(key, lease.clone());
        json_response(
            if method == http::Method::POST {
                201
            } else {
                200
            },
            &lease,
        )
    }

    fn respond(
        &self,
        method: &http::Method,
        path: &str,
        query: &str,
        body: &[u8],
    ) -> http::Response<Body> {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let param = |name: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        };
        if let ["apis", "coordination.k8s.io", "v1", "namespaces", _, "leases", rest @ ..] =
            segments.as_slice()
        {
            return self.lease(method, rest.first().copied(), body);
        }
        if method == http::Method::PATCH {
            let ["api", "v1", "namespaces", "default", "pods", name] = segments.as_slice() else {
                return status(405, "MethodNotAllowed", "only pods are patched here");
            };
            let Ok(patch) = serde_json::from_slice::<Value>(body) else {
                return status(400, "BadRequest", "the patch is not JSON");
            };
            let cost = patch["metadata"]["annotations"][hpa_bridge::cluster::POD_DELETION_COST]
                .as_str()
                .map(String::from);
            self.state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .patches
                .push(Patched {
                    at: Instant::now(),
                    pod: name.to_string(),
                    field_manager: param("fieldManager").map(String::from),
                    cost,
                });
            if !self.patch_pod(name, &patch) {
                return status(404, "NotFound", &format!("pods \"{name}\" not found"));
            }
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let object = st.objects.get(&("pods", name.to_string())).cloned();
            return json_response(200, object.as_ref().unwrap_or(&Value::Null));
        }
        let last = segments.last().copied().unwrap_or_default();
        let Some(&(resource, api_version, list_kind)) = RESOURCES.iter().find(|r| r.0 == last)
        else {
            return status(404, "NotFound", &format!("{path} is not served"));
        };
        if method != http::Method::GET {
            return status(405, "MethodNotAllowed", "LIST, WATCH and PATCH only");
        }
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(param("watch"), Some("true" | "1")) {
            let since: u64 = param("resourceVersion")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let live = self.events.subscribe();
            let backlog: Vec<Bytes> = st
                .log
                .iter()
                .filter(|e| e.rv > since && e.resource == resource)
                .map(line)
                .collect();
            drop(st);
            let backlog = futures::stream::iter(backlog.into_iter().map(|b| Ok(Frame::data(b))));
            // A watcher that falls behind the channel is ended; it watches again from the last
            // resourceVersion it saw and gets the rest from the log.
            let live = futures::stream::unfold(live, move |mut live| async move {
                loop {
                    match live.recv().await {
                        Ok(e) if e.rv > since && e.resource == resource => {
                            return Some((Ok(Frame::data(line(&e))), live))
                        }
                        Ok(_) => continue,
                        Err(_) => return None,
                    }
                }
            });
            use futures::StreamExt;
            return http::Response::builder()
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(BodyExt::boxed(StreamBody::new(backlog.chain(live))))
                .unwrap_or_default();
        }
        let items: Vec<&Value> = st
            .objects
            .iter()
            .filter(|((r, _), _)| *r == resource)
            .map(|(_, o)| o)
            .collect();
        json_response(
            200,
            &json!({
                "apiVersion": api_version,
                "kind": list_kind,
                "metadata": {"resourceVersion": st.rv.to_string()},
                "items": items,
            }),
        )
    }
}

fn line(e: &Event) -> Bytes {
    Bytes::from(format!("{}\n", json!({"type": e.kind, "object": e.object})))
}

fn json_response(code: u16, v: &Value) -> http::Response<Body> {
    http::Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(v.to_string())).boxed())
        .unwrap_or_default()
}

fn status(code: u16, reason: &str, message: &str) -> http::Response<Body> {
    json_response(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "reason": reason, "message": message, "code": code}),
    )
}

/// Serve `api` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, api: Arc<LiveApi>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let api = api.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: http::Request<Incoming>| {
                let api = api.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let query = parts.uri.query().unwrap_or("");
                    Ok::<_, Infallible>(api.respond(&parts.method, parts.uri.path(), query, &body))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}
