//! A loopback stand-in for kube-apiserver, shared by the integration tests and the bench, for
//! what the real control plane (tests/control-plane) cannot be made to do on demand: answer
//! slowly, hang or refuse a PATCH, refuse one caller's Lease writes, end watches with 410 Gone,
//! go down and come back with a fresh watch cache; and, for the bench, hold thousands of pods
//! that change without a controller or kubelet in the way. It serves what kube-runtime's
//! watchers, the scale subresource and the deletion-cost writer use, over whatever connection
//! it is given (the tests wrap it in TLS, the bench serves plain HTTP):
//!
//! - LIST `/api/v1/[namespaces/{ns}/]pods` and `/apis/apps/v1/[namespaces/{ns}/]{statefulsets,
//!   replicasets,deployments}` with `labelSelector`, `limit` and `continue` (paged);
//! - WATCH the same paths with `watch=true&resourceVersion=N`: the events after N, a BOOKMARK,
//!   then live ones, as newline-delimited `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK","object":...}`;
//! - GET `/apis/apps/v1/namespaces/{ns}/{statefulsets,deployments}/{name}/scale`
//!   (autoscaling/v1 Scale from the object's `spec.replicas`);
//! - PATCH `/api/v1/namespaces/{ns}/pods/{name}` with `application/merge-patch+json`: applied,
//!   recorded with its `fieldManager`, and seen by watchers as MODIFIED;
//! - Leases (`/apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]`): GET, POST
//!   (409 AlreadyExists when present) and PUT (409 Conflict unless the body's
//!   `resourceVersion` is the stored one), each write recorded; not watched;
//! - the three calls of a delegating aggregated API server: POST `tokenreviews` and
//!   `subjectaccessreviews` (echoed back with a `status`, as kube-apiserver does) and GET of the
//!   ConfigMap `kube-system/extension-apiserver-authentication`, answered as `set_reviews`
//!   says (errors, refusals and a missing or forbidden ConfigMap included) and each recorded
//!   with its body.
//!
//! Faults: `break_watches` ends every open watch with a 410 `ERROR` event; `begin_outage` /
//! `end_outage` stand in for an API server restart (every request answers 503 meanwhile, and
//! the restarted server's watch cache starts after the outage, so a watch from an older
//! `resourceVersion` is told 410 Gone); `with_delay` answers every request late, and
//! `with_watch_timeout` ends every watch after a while, as a slow or busy API server does.
//!
//! Every object is schema-valid (typed k8s-openapi values, or checked against them); the server
//! stamps `resourceVersion`, `uid` and `creationTimestamp` as the API server does. With a token,
//! requests without it get 401, and `Bearer {token}-{caller}` tells callers apart.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec, ScaleStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::broadcast;

use hpa_bridge_rules::selector::LabelSelector;

/// The resources served: plural name, API prefix, list kind.
const RESOURCES: [(&str, &str, &str); 4] = [
    ("pods", "/api/v1", "PodList"),
    ("statefulsets", "/apis/apps/v1", "StatefulSetList"),
    ("replicasets", "/apis/apps/v1", "ReplicaSetList"),
    ("deployments", "/apis/apps/v1", "DeploymentList"),
];

pub const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
pub const SUBJECT_ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
pub const AUTH_CONFIGMAP: &str =
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";

/// How the delegated-auth calls are answered.
#[derive(Default)]
pub struct Reviews {
    /// token -> UserInfo JSON (`username`, `uid`, `groups`, `extra`).
    pub tokens: HashMap<String, Value>,
    /// Answer TokenReviews with this HTTP error instead.
    pub token_review_error: Option<u16>,
    /// Users the SubjectAccessReview allows (for any attributes).
    pub allowed_users: Vec<String>,
    /// Answer SubjectAccessReviews with this HTTP error instead.
    pub access_review_error: Option<u16>,
    /// The ConfigMap's data; `None` answers 404 NotFound.
    pub configmap: Option<BTreeMap<String, String>>,
    /// Answer the ConfigMap GET with 403 Forbidden (the adapter lacks its RoleBinding).
    pub configmap_forbidden: bool,
}

/// One delegated-auth request as received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

#[derive(Clone, Debug)]
struct Event {
    rv: u64,
    resource: &'static str,
    namespace: String,
    kind: &'static str,
    object: Value,
}

/// One PATCH as received.
#[derive(Clone, Debug)]
pub struct Patched {
    pub name: String,
    pub field_manager: Option<String>,
    pub patch: Value,
    /// The kubeconfig that sent it (`kubeconfig_as`); empty for `kubeconfig`.
    pub caller: String,
    pub at: Instant,
}

/// One lease write (POST or PUT) as received, and how it was answered.
#[derive(Clone, Debug)]
pub struct LeaseWrite {
    pub caller: String,
    /// `spec.holderIdentity` of the body (empty when absent).
    pub holder: String,
    pub code: u16,
    pub at: Instant,
}

#[derive(Default)]
struct State {
    rv: u64,
    objects: BTreeMap<(&'static str, String, String), Value>,
    log: Vec<Event>,
    requests: Vec<String>,
    /// The API server is restarting: every request answers 503.
    outage: bool,
    /// Requests refused during outages.
    refused: usize,
    patches: Vec<Patched>,
    /// Every PATCH is answered with this status, unapplied.
    patch_failure: Option<u16>,
    /// Every PATCH waits this long before it is handled, as one queued by API priority and
    /// fairness does.
    patch_stall: Option<std::time::Duration>,
    /// PATCHes that arrived while `patch_stall` was set.
    patches_stalled: usize,
    /// A watch from a `resourceVersion` below this one is too old (410 Gone): the watch cache
    /// of a restarted API server starts at its restart.
    oldest_watchable_rv: u64,
    leases: BTreeMap<(String, String), Value>,
    lease_writes: Vec<LeaseWrite>,
    /// Lease writes from these callers are answered with the status, unapplied.
    lease_write_failures: HashMap<String, u16>,
    /// Lists and watches answered.
    lists: u64,
    watches: u64,
    reviews: Reviews,
    reviewed: Vec<Recorded>,
}

#[derive(Clone)]
pub struct KubeApi {
    state: Arc<Mutex<State>>,
    events: broadcast::Sender<Event>,
    /// Bumped to end every open watch stream.
    breaks: Arc<tokio::sync::watch::Sender<u64>>,
    /// The bearer token every request must carry (`{token}-{caller}` names a caller); None
    /// serves everyone as the caller "".
    token: Option<String>,
    /// Every response waits this long.
    delay: Duration,
    /// Every watch ends after this long.
    watch_timeout: Option<Duration>,
}

fn resource_of(plural: &str) -> Option<&'static str> {
    RESOURCES.iter().find(|r| r.0 == plural).map(|r| r.0)
}

impl KubeApi {
    /// An API server holding nothing yet, requiring `token` when given.
    pub fn new(token: Option<&str>) -> Self {
        let (events, _) = broadcast::channel(1024);
        KubeApi {
            state: Arc::default(),
            events,
            breaks: Arc::new(tokio::sync::watch::channel(0).0),
            token: token.map(String::from),
            delay: Duration::ZERO,
            watch_timeout: None,
        }
    }

    /// Every response from now on waits `delay` before its headers.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Every watch ends after `timeout`, so the watchers ask again.
    pub fn with_watch_timeout(mut self, timeout: Duration) -> Self {
        self.watch_timeout = Some(timeout);
        self
    }

    /// Serve plain HTTP on `listener`, for as long as the task runs.
    pub async fn serve_plain(self, listener: TcpListener) {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(self.clone().serve_connection(TokioIo::new(tcp)));
        }
    }

    /// Serve one connection (plain or TLS) until it closes.
    pub async fn serve_connection<I>(self, io: TokioIo<I>)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let svc = service_fn(move |req: http::Request<Incoming>| {
            let a = self.clone();
            async move {
                let (parts, body) = req.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                if !a.delay.is_zero() {
                    tokio::time::sleep(a.delay).await;
                }
                let stall = a.state.lock().unwrap().patch_stall;
                if let Some(stall) = stall.filter(|_| parts.method == http::Method::PATCH) {
                    a.state.lock().unwrap().patches_stalled += 1;
                    tokio::time::sleep(stall).await;
                }
                Ok::<_, Infallible>(a.handle(http::Request::from_parts(parts, body)))
            }
        });
        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
            .serve_connection(io, svc)
            .await;
    }

    /// Requests seen, as `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Lists and watches answered so far.
    pub fn answered(&self) -> (u64, u64) {
        let st = self.state.lock().unwrap();
        (st.lists, st.watches)
    }

    /// End every open watch stream with an `ERROR` event carrying a 410 Gone `Status`, as the
    /// API server does when the watch cache has moved past the watcher's resourceVersion.
    pub fn break_watches(&self) {
        self.breaks.send_modify(|n| *n += 1);
    }

    /// The API server goes down: open watches end, and every request answers 503 until
    /// `end_outage`. Objects may still be applied meanwhile (nobody sees them).
    pub fn begin_outage(&self) {
        self.state.lock().unwrap().outage = true;
        self.break_watches();
    }

    /// The API server is back with a fresh watch cache: watches from a resourceVersion older
    /// than now are told 410 Gone, so clients re-list.
    pub fn end_outage(&self) {
        let mut st = self.state.lock().unwrap();
        st.outage = false;
        st.oldest_watchable_rv = st.rv;
    }

    /// Requests refused while the server was down.
    pub fn refused(&self) -> usize {
        self.state.lock().unwrap().refused
    }

    /// Create or replace an object (ADDED or MODIFIED), as a typed k8s-openapi value.
    pub fn apply<K: serde::Serialize + serde::de::DeserializeOwned + k8s_openapi::Resource>(
        &self,
        object: &K,
    ) {
        let plural = K::URL_PATH_SEGMENT;
        let resource = resource_of(plural).unwrap_or_else(|| panic!("{plural} not served"));
        let value = self.store(resource, serde_json::to_value(object).unwrap());
        // The stamped object must still be a valid k8s-openapi object.
        let _: K = serde_json::from_value(value).unwrap();
    }

    /// The same for an object as JSON with its `kind`: a Pod, StatefulSet, ReplicaSet or
    /// Deployment.
    pub fn apply_json(&self, object: Value) {
        use k8s_openapi::api::{apps::v1 as apps, core::v1 as core};
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let resource = match kind.as_str() {
            "Pod" => "pods",
            "StatefulSet" => "statefulsets",
            "ReplicaSet" => "replicasets",
            "Deployment" => "deployments",
            other => panic!("{other} not served"),
        };
        let value = self.store(resource, object);
        let valid = match resource {
            "pods" => serde_json::from_value::<core::Pod>(value).is_ok(),
            "statefulsets" => serde_json::from_value::<apps::StatefulSet>(value).is_ok(),
            "replicasets" => serde_json::from_value::<apps::ReplicaSet>(value).is_ok(),
            _ => serde_json::from_value::<apps::Deployment>(value).is_ok(),
        };
        assert!(valid, "not a valid {kind}");
    }

    /// Store `value` (stamped) and tell the watchers; the stored object.
    fn store(&self, resource: &'static str, mut value: Value) -> Value {
        let mut st = self.state.lock().unwrap();
        st.rv += 1;
        let rv = st.rv;
        let meta = value["metadata"].as_object_mut().unwrap();
        let ns = meta["namespace"].as_str().expect("namespace").to_string();
        let name = meta["name"].as_str().expect("name").to_string();
        let key = (resource, ns.clone(), name.clone());
        let existing = st.objects.get(&key).cloned();
        stamp(
            meta,
            existing.as_ref(),
            rv,
            format!("uid-{resource}-{ns}-{name}-{rv}"),
        );
        st.objects.insert(key, value.clone());
        let event = Event {
            rv,
            resource,
            namespace: ns,
            kind: if existing.is_some() {
                "MODIFIED"
            } else {
                "ADDED"
            },
            object: value.clone(),
        };
        st.log.push(event.clone());
        let _ = self.events.send(event);
        value
    }

    /// Change pod `ns/name` by a JSON merge patch as another writer would (a MODIFIED event,
    /// no PATCH recorded); false when there is no such pod.
    pub fn merge_pod(&self, ns: &str, name: &str, patch: &Value) -> bool {
        let mut st = self.state.lock().unwrap();
        self.merge_locked(&mut st, ns, name, patch).is_some()
    }

    fn merge_locked(&self, st: &mut State, ns: &str, name: &str, patch: &Value) -> Option<Value> {
        let key = ("pods", ns.to_string(), name.to_string());
        let mut object = st.objects.get(&key).cloned()?;
        json_patch::merge(&mut object, patch);
        st.rv += 1;
        let rv = st.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let _: k8s_openapi::api::core::v1::Pod = serde_json::from_value(object.clone()).unwrap();
        st.objects.insert(key, object.clone());
        let event = Event {
            rv,
            resource: "pods",
            namespace: ns.into(),
            kind: "MODIFIED",
            object: object.clone(),
        };
        st.log.push(event.clone());
        let _ = self.events.send(event);
        Some(object)
    }

    /// Delete an object (DELETED, carrying the object at a new resourceVersion).
    pub fn delete<K: k8s_openapi::Resource>(&self, namespace: &str, name: &str) {
        let resource = resource_of(K::URL_PATH_SEGMENT).unwrap();
        let mut st = self.state.lock().unwrap();
        let mut object = st
            .objects
            .remove(&(resource, namespace.to_string(), name.to_string()))
            .unwrap_or_else(|| panic!("no {resource} {namespace}/{name}"));
        st.rv += 1;
        let rv = st.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let event = Event {
            rv,
            resource,
            namespace: namespace.into(),
            kind: "DELETED",
            object,
        };
        st.log.push(event.clone());
        let _ = self.events.send(event);
    }

    fn handle(&self, req: http::Request<Bytes>) -> http::Response<BoxBody<Bytes, Infallible>> {
        let path = req.uri().path().to_string();
        let query: HashMap<String, String> = req
            .uri()
            .query()
            .map(|q| {
                q.split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| {
                        (
                            k.to_string(),
                            percent_encoding::percent_decode_str(&v.replace('+', " "))
                                .decode_utf8_lossy()
                                .into_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        {
            let mut st = self.state.lock().unwrap();
            st.requests.push(format!("{} {}", req.method(), req.uri()));
            if st.outage {
                st.refused += 1;
                return status(503, "ServiceUnavailable", "the API server is restarting");
            }
        }
        let caller = match &self.token {
            None => Some(String::new()),
            Some(token) => req
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix(&format!("Bearer {token}")))
                .and_then(|rest| match rest {
                    "" => Some(String::new()),
                    _ => rest.strip_prefix('-').map(String::from),
                }),
        };
        if matches!(
            path.as_str(),
            TOKEN_REVIEWS | SUBJECT_ACCESS_REVIEWS | AUTH_CONFIGMAP
        ) {
            let authorization = req
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let body: Value = serde_json::from_slice(req.body()).unwrap_or(Value::Null);
            self.state.lock().unwrap().reviewed.push(Recorded {
                path: path.clone(),
                authorization,
                body: body.clone(),
            });
            if caller.is_none() {
                return status(401, "Unauthorized", "Unauthorized");
            }
            return self.review(req.method().as_str(), &path, body);
        }
        let Some(caller) = caller else {
            return status(401, "Unauthorized", "no valid bearer token");
        };
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        if let ["apis", "coordination.k8s.io", "v1", "namespaces", ns, "leases", rest @ ..] =
            segments.as_slice()
        {
            return self.lease(ns, rest.first().copied(), &caller, &req);
        }
        if req.method() == http::Method::PATCH {
            return match segments.as_slice() {
                ["api", "v1", "namespaces", ns, "pods", name] => {
                    self.patch_pod(ns, name, &query, &req, caller)
                }
                _ => status(405, "MethodNotAllowed", "only pods are patched here"),
            };
        }
        if req.method() != http::Method::GET {
            return status(405, "MethodNotAllowed", "read-only test server");
        }
        let (rest, prefix) = match segments.as_slice() {
            ["api", "v1", rest @ ..] => (rest, "/api/v1"),
            ["apis", "apps", "v1", rest @ ..] => (rest, "/apis/apps/v1"),
            _ => return status(404, "NotFound", &format!("{path} is not served")),
        };
        let served = |plural: &str| {
            RESOURCES
                .iter()
                .find(|r| r.0 == plural && r.1 == prefix)
                .copied()
        };
        match rest {
            [plural] => match served(plural) {
                Some(r) => self.collection(r, None, &query),
                None => status(404, "NotFound", &format!("{path} is not served")),
            },
            ["namespaces", ns, plural] => match served(plural) {
                Some(r) => self.collection(r, Some(ns), &query),
                None => status(404, "NotFound", &format!("{path} is not served")),
            },
            ["namespaces", ns, plural, name, "scale"]
                if matches!(*plural, "statefulsets" | "deployments" | "replicasets") =>
            {
                self.scale(plural, ns, name)
            }
            _ => status(404, "NotFound", &format!("{path} is not served")),
        }
    }

    /// A JSON merge patch (RFC 7386) of a pod, as the API server applies one: the object
    /// changes, its resourceVersion moves, and watchers see MODIFIED.
    fn patch_pod(
        &self,
        ns: &str,
        name: &str,
        query: &HashMap<String, String>,
        req: &http::Request<Bytes>,
        caller: String,
    ) -> http::Response<BoxBody<Bytes, Infallible>> {
        let content_type = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if content_type != "application/merge-patch+json" {
            return status(
                415,
                "UnsupportedMediaType",
                &format!("{content_type} is not served"),
            );
        }
        let Ok(patch) = serde_json::from_slice::<Value>(req.body()) else {
            return status(400, "BadRequest", "the patch is not JSON");
        };
        let mut st = self.state.lock().unwrap();
        st.patches.push(Patched {
            name: name.into(),
            field_manager: query.get("fieldManager").cloned(),
            patch: patch.clone(),
            caller,
            at: Instant::now(),
        });
        if let Some(code) = st.patch_failure {
            return status(code, "Forbidden", "patches are refused by the test");
        }
        match self.merge_locked(&mut st, ns, name, &patch) {
            Some(object) => json_response(200, &object),
            None => status(404, "NotFound", &format!("pods \"{name}\" not found")),
        }
    }

    /// A Lease: GET, POST (create) or PUT (replace, only from the stored resourceVersion).
    fn lease(
        &self,
        ns: &str,
        name: Option<&str>,
        caller: &str,
        req: &http::Request<Bytes>,
    ) -> http::Response<BoxBody<Bytes, Infallible>> {
        let mut st = self.state.lock().unwrap();
        let method = req.method().clone();
        if method == http::Method::GET {
            let Some(name) = name else {
                return status(405, "MethodNotAllowed", "leases are not listed here");
            };
            return match st.leases.get(&(ns.to_string(), name.to_string())) {
                Some(lease) => json_response(200, lease),
                None => status(
                    404,
                    "NotFound",
                    &format!("leases.coordination.k8s.io \"{name}\" not found"),
                ),
            };
        }
        let Ok(mut body) = serde_json::from_slice::<Value>(req.body()) else {
            return status(400, "BadRequest", "the body is not JSON");
        };
        if serde_json::from_value::<k8s_openapi::api::coordination::v1::Lease>(body.clone())
            .is_err()
        {
            return status(400, "BadRequest", "the body is not a Lease");
        }
        let holder = body["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let body_name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let record = |st: &mut State, code: u16| {
            st.lease_writes.push(LeaseWrite {
                caller: caller.into(),
                holder: holder.clone(),
                code,
                at: Instant::now(),
            });
        };
        if let Some(&code) = st.lease_write_failures.get(caller) {
            record(&mut st, code);
            return status(
                code,
                "InternalError",
                "lease writes are refused by the test",
            );
        }
        let key = match (&method, name) {
            (&http::Method::POST, None) => (ns.to_string(), body_name.clone()),
            (&http::Method::PUT, Some(name)) if name == body_name => {
                (ns.to_string(), name.to_string())
            }
            _ => return status(405, "MethodNotAllowed", "GET, POST and PUT only"),
        };
        let existing = st.leases.get(&key).cloned();
        let rejected = match (&method, &existing) {
            (&http::Method::POST, Some(_)) => Some((
                409,
                "AlreadyExists",
                format!("leases.coordination.k8s.io \"{}\" already exists", key.1),
            )),
            (&http::Method::PUT, None) => Some((
                404,
                "NotFound",
                format!("leases.coordination.k8s.io \"{}\" not found", key.1),
            )),
            (&http::Method::PUT, Some(old))
                if body["metadata"]["resourceVersion"].is_string()
                    && body["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"] =>
            {
                Some((
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on leases.coordination.k8s.io \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                        key.1
                    ),
                ))
            }
            _ => None,
        };
        if let Some((code, reason, message)) = rejected {
            record(&mut st, code);
            return status(code, reason, &message);
        }
        st.rv += 1;
        let rv = st.rv;
        let meta = body["metadata"].as_object_mut().unwrap();
        meta.insert("namespace".into(), json!(ns));
        stamp(
            meta,
            existing.as_ref(),
            rv,
            format!("uid-lease-{ns}-{}-{rv}", key.1),
        );
        body["kind"] = json!("Lease");
        body["apiVersion"] = json!("coordination.k8s.io/v1");
        st.leases.insert(key, body.clone());
        let code = if existing.is_some() { 200 } else { 201 };
        record(&mut st, code);
        json_response(code, &body)
    }

    /// The Lease as the server holds it.
    pub fn lease_object(&self, ns: &str, name: &str) -> Option<Value> {
        let st = self.state.lock().unwrap();
        st.leases.get(&(ns.to_string(), name.to_string())).cloned()
    }

    /// Every lease write received, in order.
    pub fn lease_writes(&self) -> Vec<LeaseWrite> {
        self.state.lock().unwrap().lease_writes.clone()
    }

    /// From now on `caller`'s lease writes are answered `code` (`None`: applied again).
    pub fn fail_lease_writes(&self, caller: &str, code: Option<u16>) {
        let mut st = self.state.lock().unwrap();
        match code {
            Some(code) => st.lease_write_failures.insert(caller.into(), code),
            None => st.lease_write_failures.remove(caller),
        };
    }

    /// Every PATCH received, in order.
    pub fn patches(&self) -> Vec<Patched> {
        self.state.lock().unwrap().patches.clone()
    }

    /// From now on every PATCH is answered `code` (`None`: applied again).
    pub fn fail_patches(&self, code: Option<u16>) {
        self.state.lock().unwrap().patch_failure = code;
    }

    /// From now on every PATCH waits `stall` before it is handled (`None`: at once).
    pub fn stall_patches(&self, stall: Option<std::time::Duration>) {
        self.state.lock().unwrap().patch_stall = stall;
    }

    /// How many PATCHes have arrived to be stalled.
    pub fn patches_stalled(&self) -> usize {
        self.state.lock().unwrap().patches_stalled
    }

    /// The object as the server holds it.
    pub fn object(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let resource = resource_of(plural)?;
        let st = self.state.lock().unwrap();
        st.objects
            .get(&(resource, ns.to_string(), name.to_string()))
            .cloned()
    }

    /// From now on the delegated-auth calls are answered as `f` sets.
    pub fn set_reviews(&self, f: impl FnOnce(&mut Reviews)) {
        f(&mut self.state.lock().unwrap().reviews);
    }

    /// The delegated-auth requests to `path`, in order.
    pub fn recorded(&self, path: &str) -> Vec<Recorded> {
        let st = self.state.lock().unwrap();
        st.reviewed
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    pub fn count(&self, path: &str) -> usize {
        self.recorded(path).len()
    }

    /// The body of the last request to `path`.
    pub fn last_review(&self, path: &str) -> Value {
        self.recorded(path)
            .last()
            .unwrap_or_else(|| panic!("no request to {path}"))
            .body
            .clone()
    }

    fn review(
        &self,
        method: &str,
        path: &str,
        mut body: Value,
    ) -> http::Response<BoxBody<Bytes, Infallible>> {
        let st = self.state.lock().unwrap();
        let b = &st.reviews;
        match (method, path) {
            ("POST", TOKEN_REVIEWS) => {
                if let Some(code) = b.token_review_error {
                    return status(code, "InternalError", "etcd is on fire");
                }
                let token = body["spec"]["token"].as_str().unwrap_or("").to_string();
                body["metadata"] = json!({"creationTimestamp": null});
                body["status"] = match b.tokens.get(&token) {
                    Some(user) => json!({"authenticated": true, "user": user,
                                         "audiences": ["https://kubernetes.default.svc.cluster.local"]}),
                    None => {
                        json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"})
                    }
                };
                json_response(201, &body)
            }
            ("POST", SUBJECT_ACCESS_REVIEWS) => {
                if let Some(code) = b.access_review_error {
                    return status(code, "InternalError", "webhook authorizer is unreachable");
                }
                let user = body["spec"]["user"].as_str().unwrap_or("").to_string();
                body["metadata"] = json!({"creationTimestamp": null});
                body["status"] = if b.allowed_users.contains(&user) {
                    json!({"allowed": true, "reason": format!("RBAC: allowed by ClusterRoleBinding \"metrics-readers\" of ClusterRole \"external-metrics-reader\" to User \"{user}\"")})
                } else {
                    json!({"allowed": false})
                };
                json_response(201, &body)
            }
            ("GET", AUTH_CONFIGMAP) if b.configmap_forbidden => status(
                403,
                "Forbidden",
                "configmaps \"extension-apiserver-authentication\" is forbidden: User \"system:serviceaccount:hpa-bridge:hpa-bridge\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\"",
            ),
            ("GET", AUTH_CONFIGMAP) => match &b.configmap {
                Some(data) => json_response(
                    200,
                    &json!({
                        "kind": "ConfigMap",
                        "apiVersion": "v1",
                        "metadata": {
                            "name": "extension-apiserver-authentication",
                            "namespace": "kube-system",
                            "uid": "5e1c8f7a-2f0b-4a53-9d0e-8d1f1b2a9c11",
                            "resourceVersion": "4711",
                            "creationTimestamp": "2025-01-07T09:12:44Z"
                        },
                        "data": data,
                    }),
                ),
                None => status(
                    404,
                    "NotFound",
                    "configmaps \"extension-apiserver-authentication\" not found",
                ),
            },
            _ => status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        }
    }

    fn scale(
        &self,
        plural: &str,
        ns: &str,
        name: &str,
    ) -> http::Response<BoxBody<Bytes, Infallible>> {
        let resource = resource_of(plural).unwrap();
        let st = self.state.lock().unwrap();
        let Some(obj) = st
            .objects
            .get(&(resource, ns.to_string(), name.to_string()))
        else {
            return status(
                404,
                "NotFound",
                &format!("{plural}.apps \"{name}\" not found"),
            );
        };
        let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1) as i32;
        let scale = Scale {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                resource_version: obj["metadata"]["resourceVersion"]
                    .as_str()
                    .map(String::from),
                uid: obj["metadata"]["uid"].as_str().map(String::from),
                ..Default::default()
            },
            spec: Some(ScaleSpec {
                replicas: Some(replicas),
            }),
            status: Some(ScaleStatus {
                replicas: obj["status"]["replicas"].as_i64().unwrap_or(0) as i32,
                selector: None,
            }),
        };
        let mut v = serde_json::to_value(&scale).unwrap();
        v["kind"] = json!("Scale");
        v["apiVersion"] = json!("autoscaling/v1");
        json_response(200, &v)
    }

    fn collection(
        &self,
        (resource, _, list_kind): (&'static str, &str, &str),
        ns: Option<&str>,
        query: &HashMap<String, String>,
    ) -> http::Response<BoxBody<Bytes, Infallible>> {
        let selector = match query.get("labelSelector") {
            Some(s) => match LabelSelector::parse(s) {
                Ok(sel) => sel,
                Err(e) => return status(400, "BadRequest", &format!("labelSelector: {e}")),
            },
            None => LabelSelector::everything(),
        };
        let ns: Option<String> = ns.map(String::from);
        let matches = move |resource_: &str, namespace: &str, object: &Value| {
            resource_ == resource
                && ns.as_deref().is_none_or(|n| n == namespace)
                && selector.matches(&labels_of(object))
        };
        if query.get("watch").map(String::as_str) == Some("true") {
            self.state.lock().unwrap().watches += 1;
            let ends = self.watch_timeout.map(|t| tokio::time::Instant::now() + t);
            let since: u64 = query
                .get("resourceVersion")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let mut live = self.events.subscribe();
            let mut breaks = self.breaks.subscribe();
            breaks.borrow_and_update();
            let st = self.state.lock().unwrap();
            if since < st.oldest_watchable_rv {
                let gone = gone_event(since, st.oldest_watchable_rv);
                drop(st);
                return http::Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(gone)).boxed())
                    .unwrap();
            }
            let backlog: VecDeque<Event> = st
                .log
                .iter()
                .filter(|e| e.rv > since && matches(e.resource, &e.namespace, &e.object))
                .cloned()
                .collect();
            let bookmark_rv = st.rv;
            drop(st);
            let kind = list_kind.trim_end_matches("List").to_string();
            let api_version = if resource == "pods" { "v1" } else { "apps/v1" };
            // Start with the backlog, then a BOOKMARK at the current version, then live events.
            let bookmark = json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version,
                                  "metadata": {"resourceVersion": bookmark_rv.to_string()}}});
            let state = Arc::clone(&self.state);
            let stream = async_stream(move |tx| async move {
                let mut last = since;
                let mut backlog = backlog;
                while let Some(e) = backlog.pop_front() {
                    last = e.rv;
                    if tx.send(line(&e)).is_err() {
                        return;
                    }
                }
                if tx.send(format!("{bookmark}\n")).is_err() {
                    return;
                }
                last = last.max(bookmark_rv);
                loop {
                    // Biased, breaks first: an object applied after `begin_outage` must never
                    // reach a watch that the outage has already ended (tokio's select would
                    // otherwise pick at random when both are ready).
                    let timeout = async {
                        match ends {
                            Some(at) => tokio::time::sleep_until(at).await,
                            None => std::future::pending().await,
                        }
                    };
                    let received = tokio::select! {
                        biased;
                        _ = breaks.changed() => {
                            let _ = tx.send(gone_event(last, last + 1));
                            return;
                        }
                        // The server's watch timeout: the stream ends, cleanly.
                        _ = timeout => return,
                        e = live.recv() => e,
                    };
                    // A watch accepted just before the outage began may have missed the break:
                    // a server that is down delivers nothing.
                    if state.lock().unwrap().outage {
                        let _ = tx.send(gone_event(last, last + 1));
                        return;
                    }
                    match received {
                        Ok(e) if e.rv > last && matches(e.resource, &e.namespace, &e.object) => {
                            last = e.rv;
                            if tx.send(line(&e)).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(_) => return,
                    }
                }
            });
            return http::Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(stream)
                .unwrap();
        }
        let mut st = self.state.lock().unwrap();
        st.lists += 1;
        let items: Vec<Value> = st
            .objects
            .iter()
            .filter(|((r, n, _), o)| matches(r, n, o))
            .map(|(_, o)| o.clone())
            .collect();
        let offset: usize = query
            .get("continue")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let limit: usize = query
            .get("limit")
            .and_then(|l| l.parse().ok())
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX);
        let end = offset.saturating_add(limit).min(items.len());
        let page = items.get(offset..end).unwrap_or_default().to_vec();
        let mut metadata = json!({"resourceVersion": st.rv.to_string()});
        if end < items.len() {
            metadata["continue"] = json!(end.to_string());
        }
        let api_version = if resource == "pods" { "v1" } else { "apps/v1" };
        json_response(
            200,
            &json!({"kind": list_kind, "apiVersion": api_version, "metadata": metadata, "items": page}),
        )
    }
}

/// The `ERROR` watch event kube-apiserver sends when `since` is older than its watch cache.
fn gone_event(since: u64, oldest: u64) -> String {
    format!(
        "{}\n",
        json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
               "status": "Failure", "reason": "Expired", "code": 410,
               "message": format!("too old resource version: {since} ({oldest})")}})
    )
}

fn line(e: &Event) -> String {
    format!("{}\n", json!({"type": e.kind, "object": e.object}))
}

fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// A streaming body fed by a task through a channel; the task ends when the client goes away.
fn async_stream<F, Fut>(task: F) -> BoxBody<Bytes, Infallible>
where
    F: FnOnce(tokio::sync::mpsc::UnboundedSender<String>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(task(tx));
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|s| (Ok::<_, Infallible>(Frame::data(Bytes::from(s))), rx))
    });
    BodyExt::boxed(StreamBody::new(stream))
}

fn json_response(code: u16, v: &Value) -> http::Response<BoxBody<Bytes, Infallible>> {
    http::Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())).boxed())
        .unwrap()
}

fn status(code: u16, reason: &str, message: &str) -> http::Response<BoxBody<Bytes, Infallible>> {
    json_response(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "reason": reason, "message": message, "code": code}),
    )
}

/// Stamp a stored object's metadata as the API server does: a new `resourceVersion`, and the
/// `uid` and `creationTimestamp` kept from the object it replaces (`uid` for a new one).
fn stamp(
    meta: &mut serde_json::Map<String, Value>,
    existing: Option<&Value>,
    rv: u64,
    uid: String,
) {
    meta.insert("resourceVersion".into(), json!(rv.to_string()));
    match existing {
        Some(old) => {
            meta.insert("uid".into(), old["metadata"]["uid"].clone());
            meta.insert(
                "creationTimestamp".into(),
                old["metadata"]["creationTimestamp"].clone(),
            );
        }
        None => {
            meta.insert("uid".into(), json!(uid));
            meta.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
        }
    }
}
