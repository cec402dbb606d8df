//! The aggregated API: discovery, the external metrics list endpoint, health, and Kubernetes
//! `Status` errors. Every response is `application/json`, whatever the request asked for:
//! answering 406 to a protobuf-first Accept header would break the HPA (REFERENCE.md §2).

pub mod discovery;
pub mod server;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::json;

use crate::adapter::{Adapter, QueryError};
use crate::clock::rfc3339;
use crate::policy::{self, Outcome};
use crate::selector::LabelSelector;

pub const GROUP: &str = "external.metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
pub const GROUP_VERSION: &str = "external.metrics.k8s.io/v1beta1";

pub type ApiResponse = Response<Full<Bytes>>;

/// Reasons and codes used on the wire (REFERENCE.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusReason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    InternalError,
    ServiceUnavailable,
}

impl StatusReason {
    pub fn code(self) -> u16 {
        match self {
            StatusReason::BadRequest => 400,
            StatusReason::Unauthorized => 401,
            StatusReason::Forbidden => 403,
            StatusReason::NotFound => 404,
            StatusReason::MethodNotAllowed => 405,
            StatusReason::InternalError => 500,
            StatusReason::ServiceUnavailable => 503,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::BadRequest => "BadRequest",
            StatusReason::Unauthorized => "Unauthorized",
            StatusReason::Forbidden => "Forbidden",
            StatusReason::NotFound => "NotFound",
            StatusReason::MethodNotAllowed => "MethodNotAllowed",
            StatusReason::InternalError => "InternalError",
            StatusReason::ServiceUnavailable => "ServiceUnavailable",
        }
    }
}

pub fn json_response(code: u16, body: &serde_json::Value) -> ApiResponse {
    let bytes = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    bytes_response(code, Bytes::from(bytes))
}

fn bytes_response(code: u16, bytes: Bytes) -> ApiResponse {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CACHE_CONTROL, "no-cache, private")
        .body(Full::new(bytes))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// The bytes of a response built here (one `Full` frame), without consuming it.
fn response_bytes(resp: &ApiResponse) -> Option<Bytes> {
    use http_body_util::BodyExt;
    let mut body = resp.body().clone();
    let frame = futures::FutureExt::now_or_never(body.frame())??.ok()?;
    frame.into_data().ok()
}

/// A Kubernetes `Status` failure; the HTTP status equals `code`.
pub fn status_response(reason: StatusReason, message: &str) -> ApiResponse {
    let mut resp = json_response(
        reason.code(),
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason.as_str(),
            "code": reason.code(),
        }),
    );
    if reason == StatusReason::Unauthorized {
        resp.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"hpa-bridge\""),
        );
    }
    resp
}

/// What a request path asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Health(&'static str),
    ApiGroupList,
    ApiGroup,
    ApiResourceList,
    /// `namespace`, `metric`
    ExternalMetric(String, String),
    NotFound,
}

pub fn route(path: &str) -> Route {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    match path {
        "/healthz" => return Route::Health("healthz"),
        "/livez" => return Route::Health("livez"),
        "/readyz" => return Route::Health("readyz"),
        "/apis" => return Route::ApiGroupList,
        "/apis/external.metrics.k8s.io" => return Route::ApiGroup,
        "/apis/external.metrics.k8s.io/v1beta1" => return Route::ApiResourceList,
        _ => {}
    }
    let Some(rest) = path.strip_prefix("/apis/external.metrics.k8s.io/v1beta1/namespaces/") else {
        return Route::NotFound;
    };
    let mut parts = rest.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(ns), Some(metric), None) if !ns.is_empty() && !metric.is_empty() => {
            Route::ExternalMetric(percent_decode(ns), percent_decode(metric))
        }
        _ => Route::NotFound,
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// The `labelSelector` query parameter, form-decoded (`+` is a space).
pub fn label_selector_param(query: Option<&str>) -> Option<String> {
    let query = query?;
    let mut found = None;
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == "labelSelector" {
            found = Some(percent_decode(&v.replace('+', " ")));
        }
    }
    found
}

/// A DNS-1123 label, which every namespace name is.
fn valid_namespace(ns: &str) -> bool {
    !ns.is_empty()
        && ns.len() <= 63
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-')
}

/// Answers authenticated and authorised requests; health is handled before authentication.
pub struct ApiHandler {
    pub adapter: Arc<Adapter>,
    rendered: std::sync::Mutex<std::collections::HashMap<RenderKey, Rendered>>,
}

/// (metric, namespace, canonical selector)
type RenderKey = (String, String, String);

/// A rendered answer, reused while the store has not changed and for at most
/// `RENDER_REUSE_MS`. Many HPAs and adapter replicas ask the same question; recomputing the
/// evidence and the JSON for each dominated the serve path (BENCHMARKS.md). The time bound
/// keeps freshness exact to within a second (staleAfter is tens of seconds), and covers inputs
/// that change outside the store (the Prometheus source, workload scale).
#[derive(Clone)]
struct Rendered {
    generation: u64,
    at_ms: crate::clock::Millis,
    status: u16,
    body: Bytes,
}

const RENDER_REUSE_MS: crate::clock::Millis = 1000;
const MAX_RENDERED: usize = 4096;

impl ApiHandler {
    pub fn new(adapter: Arc<Adapter>) -> Self {
        ApiHandler {
            adapter,
            rendered: Default::default(),
        }
    }

    pub fn health(&self, which: &str) -> ApiResponse {
        if which == "readyz" && !self.adapter.is_ready() {
            return plain(503, "not ready: the first scrape round has not completed\n");
        }
        plain(200, "ok\n")
    }

    pub async fn handle<B>(&self, req: &Request<B>) -> ApiResponse {
        let started = Instant::now();
        let (resp, metric) = self.dispatch(req).await;
        self.adapter.record_request(
            resp.status().as_u16(),
            metric.as_deref().unwrap_or("-"),
            started.elapsed().as_secs_f64(),
        );
        resp
    }

    async fn dispatch<B>(&self, req: &Request<B>) -> (ApiResponse, Option<String>) {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return (
                status_response(
                    StatusReason::MethodNotAllowed,
                    &format!(
                        "method {} is not supported: external metrics are read-only (get, list)",
                        req.method()
                    ),
                ),
                None,
            );
        }
        match route(req.uri().path()) {
            Route::Health(which) => (self.health(which), None),
            Route::ApiGroupList => (json_response(200, &discovery::api_group_list()), None),
            Route::ApiGroup => (json_response(200, &discovery::api_group()), None),
            Route::ApiResourceList => (
                json_response(
                    200,
                    &discovery::api_resource_list(&self.adapter.served_metric_names()),
                ),
                None,
            ),
            Route::ExternalMetric(ns, metric) => {
                let resp = self.external_metric(&ns, &metric, req.uri().query()).await;
                (resp, Some(self.adapter.metric_label(&metric).to_string()))
            }
            Route::NotFound => (
                status_response(
                    StatusReason::NotFound,
                    &format!(
                        "the server could not find the requested resource {}",
                        req.uri().path()
                    ),
                ),
                None,
            ),
        }
    }

    async fn external_metric(&self, ns: &str, metric: &str, query: Option<&str>) -> ApiResponse {
        if !valid_namespace(ns) {
            return status_response(
                StatusReason::BadRequest,
                &format!("invalid namespace {ns:?}: must be a DNS-1123 label"),
            );
        }
        let selector_text = label_selector_param(query).unwrap_or_default();
        let selector = match LabelSelector::parse(&selector_text) {
            Ok(s) => s,
            Err(e) => return status_response(StatusReason::BadRequest, &e.to_string()),
        };
        let key: RenderKey = (
            self.adapter.metric_label(metric).to_string(),
            ns.to_string(),
            selector.to_string(),
        );
        let generation = self.adapter.generation();
        let now = self.adapter.now_ms();
        let reuse = self
            .rendered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .filter(|r| {
                r.generation == generation && (0..RENDER_REUSE_MS).contains(&(now - r.at_ms))
            })
            .cloned();
        if let Some(r) = reuse {
            // The query was recorded for /status when this answer was computed, under a second
            // ago.
            return bytes_response(r.status, r.body);
        }
        let resp = self.compute_external_metric(ns, metric, &selector).await;
        if key.0 != "-" {
            let status = resp.status().as_u16();
            // Full<Bytes> holds one frame; take its bytes without consuming the response.
            if let Some(body) = response_bytes(&resp) {
                let mut map = self.rendered.lock().unwrap_or_else(|e| e.into_inner());
                if map.len() >= MAX_RENDERED {
                    map.clear();
                }
                map.insert(
                    key,
                    Rendered {
                        generation,
                        at_ms: now,
                        status,
                        body,
                    },
                );
            }
        }
        resp
    }

    async fn compute_external_metric(
        &self,
        ns: &str,
        metric: &str,
        selector: &LabelSelector,
    ) -> ApiResponse {
        let selector = selector.clone();
        let answer = match self.adapter.answer(metric, ns, &selector).await {
            Ok(a) => a,
            Err(e @ QueryError::UnknownMetric { .. }) => {
                return status_response(StatusReason::NotFound, &e.to_string())
            }
        };
        self.adapter.record_query(metric, ns, &selector);
        tracing::debug!(namespace = ns, selector = %selector, answer = %policy::summary(&answer), "served");
        match answer.outcome {
            Outcome::Value {
                value,
                timestamp_ms,
            } => {
                let window = self.adapter.answer_window_secs();
                json_response(
                    200,
                    &json!({
                        "kind": "ExternalMetricValueList",
                        "apiVersion": GROUP_VERSION,
                        "metadata": {},
                        // Exactly one item: the HPA sums every item (REFERENCE.md §1.2).
                        "items": [{
                            "metricName": answer.metric,
                            "metricLabels": selector.equality_labels(),
                            "timestamp": rfc3339(timestamp_ms),
                            "window": window,
                            "value": value.to_string(),
                        }],
                    }),
                )
            }
            Outcome::Refused { kind, .. } => {
                let reason = if kind.http_code() == 404 {
                    StatusReason::NotFound
                } else {
                    StatusReason::ServiceUnavailable
                };
                status_response(
                    reason,
                    &format!(
                        "{} {}: {}",
                        answer.metric,
                        refusal_verb(kind),
                        answer.reason
                    ),
                )
            }
        }
    }
}

fn refusal_verb(kind: policy::RefusalKind) -> &'static str {
    use policy::RefusalKind::*;
    match kind {
        NoMatch => "has no data",
        Stale => "is stale",
        Partial => "is partial",
        IncompleteFloor => "has an incomplete floor",
        Invalid => "is invalid",
        SourceUnavailable => "is unavailable",
        GateClosed => "is held by its validity gate",
    }
}

pub fn plain(code: u16, text: &'static str) -> ApiResponse {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(text.as_bytes())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("/healthz"), Route::Health("healthz"));
        assert_eq!(route("/apis/"), Route::ApiGroupList);
        assert_eq!(
            route("/apis/external.metrics.k8s.io/v1beta1"),
            Route::ApiResourceList
        );
        assert_eq!(
            route("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas"),
            Route::ExternalMetric("default".into(), "hpa_expect_replicas".into())
        );
        assert_eq!(
            route("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/a/b"),
            Route::NotFound
        );
        assert_eq!(route("/api/v1/pods"), Route::NotFound);
    }

    #[test]
    fn selector_param_is_form_decoded() {
        assert_eq!(
            label_selector_param(Some("labelSelector=app%3Dlobby%2Ctier+in+%28a%29")),
            Some("app=lobby,tier in (a)".into())
        );
        assert_eq!(label_selector_param(Some("x=1")), None);
        assert_eq!(label_selector_param(None), None);
    }

    fn answers_computed(adapter: &Adapter) -> usize {
        adapter
            .render_self_metrics()
            .lines()
            .filter(|l| l.starts_with("hpa_bridge_answers_total{"))
            .map(|l| {
                l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0) as usize
            })
            .sum()
    }

    #[tokio::test]
    async fn rendered_answers_are_reused_only_while_nothing_changed() {
        use crate::clock::ManualClock;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let adapter = Arc::new(Adapter::new(
            crate::config::Config::from_yaml("").unwrap(),
            clock.clone(),
            Arc::new(crate::telemetry::SelfMetrics::new()),
        ));
        let handler = ApiHandler::new(adapter.clone());
        async fn get(h: &ApiHandler) -> u16 {
            let req = Request::get(
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas",
            )
            .body(())
            .unwrap();
            h.handle(&req).await.status().as_u16()
        }
        assert_eq!(get(&handler).await, 404);
        assert_eq!(answers_computed(&adapter), 1);
        assert_eq!(get(&handler).await, 404);
        assert_eq!(answers_computed(&adapter), 1, "reused within the second");
        clock.advance(RENDER_REUSE_MS);
        assert_eq!(get(&handler).await, 404);
        assert_eq!(
            answers_computed(&adapter),
            2,
            "recomputed after the time bound"
        );
        adapter.scrape_store().set_targets(Vec::new());
        assert_eq!(get(&handler).await, 404);
        assert_eq!(
            answers_computed(&adapter),
            3,
            "recomputed after a store change"
        );
    }

    #[test]
    fn namespaces() {
        assert!(valid_namespace("default"));
        assert!(valid_namespace("kube-system"));
        assert!(!valid_namespace("Default"));
        assert!(!valid_namespace("-a"));
        assert!(!valid_namespace(&"a".repeat(64)));
    }
}
