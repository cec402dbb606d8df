//! The aggregated API: discovery, the external metrics list endpoint, health, and Kubernetes
//! `Status` errors. Every response is `application/json`, whatever the request asked for:
//! answering 406 to a protobuf-first Accept header would break the HPA (docs/hpa-behaviour.md §2).

pub mod answer_first;
pub mod authentication;
pub mod custom_metrics;
pub mod discovery;
pub mod head;
pub mod health;
pub mod metrics_port;
pub mod open_pages;
pub mod readiness;
pub mod ready;
pub mod request_metrics;
pub mod server;
pub mod status_page;
pub mod transport;

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::json;

use hpa_bridge_engine::engine::{Adapter, MetricQuery, QueryError, Served};
use hpa_bridge_rules::clock::rfc3339;
use hpa_bridge_rules::policy::{self, Outcome};
use hpa_bridge_rules::selector::LabelSelector;

pub const GROUP: &str = "external.metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
pub const GROUP_VERSION: &str = "external.metrics.k8s.io/v1beta1";

pub type ApiResponse = Response<Full<Bytes>>;

/// Reasons and codes used on the wire (docs/hpa-behaviour.md §2).
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

pub fn json_response(code: u16, body: &impl serde::Serialize) -> ApiResponse {
    // Room for a typical response (a custom metrics list, a Status), which `to_vec` would grow
    // more than once to hold.
    let mut bytes = Vec::with_capacity(512);
    if serde_json::to_writer(&mut bytes, body).is_err() {
        bytes = b"{}".to_vec();
    }
    bytes_response(code, Bytes::from(bytes))
}

fn bytes_response(code: u16, bytes: Bytes) -> ApiResponse {
    use http::HeaderValue;
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )
        .header(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        )
        .body(Full::new(bytes))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// The body of a Kubernetes `Status` failure.
fn status_body(reason: StatusReason, message: &str) -> Bytes {
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason.as_str(),
        "code": reason.code(),
    });
    Bytes::from(serde_json::to_vec(&status).unwrap_or_else(|_| b"{}".to_vec()))
}

/// A Kubernetes `Status` failure; the HTTP status equals `code`.
pub fn status_response(reason: StatusReason, message: &str) -> ApiResponse {
    let mut resp = bytes_response(reason.code(), status_body(reason, message));
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
    /// `/apis/custom.metrics.k8s.io`
    CustomGroup,
    /// Anything below `/apis/custom.metrics.k8s.io/` (custom_metrics.rs).
    CustomMetrics(custom_metrics::CustomPath),
    NotFound,
}

/// A request and what its path asks for, routed once at the top of a port's chain.
#[derive(Debug)]
pub struct Routed<B> {
    pub req: Request<B>,
    pub route: Route,
}

impl<B> Routed<B> {
    pub fn new(req: Request<B>) -> Self {
        let route = route(req.uri().path());
        Routed { req, route }
    }

    /// A request to a port without resources (the metrics port): the gate sees a non-resource
    /// request (`Route::NotFound`), as controller-runtime's secure metrics do.
    pub fn non_resource(req: Request<B>) -> Self {
        Routed {
            req,
            route: Route::NotFound,
        }
    }
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
        "/apis/custom.metrics.k8s.io" => return Route::CustomGroup,
        _ => {}
    }
    if let Some(rest) = path.strip_prefix("/apis/custom.metrics.k8s.io/") {
        return Route::CustomMetrics(custom_metrics::parse_path(rest));
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

/// The refusal of a write: it names the API group the path asked for, so a client writing to
/// `custom.metrics.k8s.io` is not told about external metrics.
fn read_only_message(method: &Method, path: &str) -> String {
    let what = if path.starts_with("/apis/custom.metrics.k8s.io") {
        "custom metrics (custom.metrics.k8s.io) are"
    } else if path.starts_with("/apis/external.metrics.k8s.io") {
        "external metrics (external.metrics.k8s.io) are"
    } else {
        "this server is"
    };
    format!("method {method} is not supported: {what} read-only (get, list)")
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// A query Go's `url.ParseQuery` reports an error for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryParamError {
    #[error("invalid URL escape {0:?} in the query")]
    Escape(String),
    #[error("invalid semicolon separator in query")]
    Semicolon,
    #[error("query parameter {0:?} is not valid UTF-8 once decoded")]
    Utf8(String),
}

/// The `labelSelector` query parameter, decoded as Go's `url.ParseQuery` does: names and
/// values are percent-decoded (`label%53elector` is `labelSelector`), `+` is a space in both,
/// and of repeated parameters the first counts (`url.Values.Get`).
///
/// Where Go reports an error (a bad escape, a `;`), the API server's handlers read
/// `req.URL.Query()`, which drops the pair and carries on; dropping a `labelSelector` would
/// widen the answer to the whole namespace, so any such query is refused instead (400). That
/// guards direct callers only: the aggregator forwards `req.URL.Query().Encode()`, in which
/// such a pair is already gone (docs/hpa-behaviour.md §3.1), and the HPA's own client never
/// sends one.
pub fn label_selector_param(query: Option<&str>) -> Result<Option<String>, QueryParamError> {
    query_param(query, "labelSelector")
}

/// The parameter `wanted` of a query (the first of a repeated name, as `url.Values.Get`),
/// decoded as `label_selector_param` describes.
pub fn query_param(query: Option<&str>, wanted: &str) -> Result<Option<String>, QueryParamError> {
    let mut found = None;
    each_query_pair(query, |name, value| {
        if found.is_none() && name == wanted {
            found = Some(value.into_owned());
        }
    })?;
    Ok(found)
}

/// Every query parameter, decoded as Go's `url.ParseQuery` does, in order (the first of a
/// repeated name is the one `url.Values.Get` returns). A bad escape or a `;` refuses the
/// whole query, for the reason given on `label_selector_param`.
pub fn query_pairs(query: Option<&str>) -> Result<Vec<(String, String)>, QueryParamError> {
    let mut pairs = Vec::new();
    each_query_pair(query, |name, value| {
        pairs.push((name.into_owned(), value.into_owned()))
    })?;
    Ok(pairs)
}

/// Each decoded pair of `query` in order, up to the first error, which is the answer: the
/// callers drop what they saw, since an error anywhere refuses the whole query (as
/// `query_pairs` says). Names and values without escapes are lent, not copied: the HPA's query
/// is one parameter whose name has none.
fn each_query_pair<'q>(
    query: Option<&'q str>,
    mut pair: impl FnMut(Cow<'q, str>, Cow<'q, str>),
) -> Result<(), QueryParamError> {
    for p in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        if p.contains(';') {
            return Err(QueryParamError::Semicolon);
        }
        let (name, value) = p.split_once('=').unwrap_or((p, ""));
        pair(query_unescape(name)?, query_unescape(value)?);
    }
    Ok(())
}

/// Go's `url.QueryUnescape`: `+` is a space, `%` takes exactly two hex digits.
fn query_unescape(s: &str) -> Result<Cow<'_, str>, QueryParamError> {
    if !s.contains(['%', '+']) {
        return Ok(Cow::Borrowed(s));
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let digit = |j: usize| {
                    let c = *bytes.get(j).filter(|c| c.is_ascii_hexdigit())?;
                    (c as char).to_digit(16).map(|d| d as u8)
                };
                let (Some(high), Some(low)) = (digit(i + 1), digit(i + 2)) else {
                    let end = (i + 3).min(bytes.len());
                    return Err(QueryParamError::Escape(
                        String::from_utf8_lossy(&bytes[i..end]).into_owned(),
                    ));
                };
                let b = high << 4 | low;
                out.push(b);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out)
        .map(Cow::Owned)
        .map_err(|_| QueryParamError::Utf8(s.to_string()))
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

/// Answers authenticated and authorised requests; health is handled before authentication and
/// the request is counted around it (`server::api_service`).
pub struct ApiHandler {
    pub(crate) adapter: Arc<Adapter>,
    ready: ready::Ready,
    /// Whether the engine may reuse answers (always, except in the bench's comparison).
    reuse_answers: bool,
    /// Selectors already parsed, by their decoded text: each HPA asks the same question every
    /// sync period, so parsing and printing the canonical form again would repeat the same
    /// work on every request. Bounded (`MAX_SELECTORS`, least recently used first out,
    /// `MAX_REMEMBERED_SELECTOR`); a selector that does not parse is never kept. Keyed by what
    /// authorised callers ask, so a seeded fast hash will do.
    selectors:
        std::sync::Mutex<lru::LruCache<String, Arc<LabelSelector>, foldhash::fast::RandomState>>,
}

/// The longest selector text kept parsed, and how many are kept. A parsed selector costs tens
/// of bytes per requirement or value beside its text, so one built to be expensive (`a in
/// (0,0,0,...)`) is held only up to this length: a few MiB at most in all. An HPA's selector
/// is a few labels.
const MAX_REMEMBERED_SELECTOR: usize = 256;
const MAX_SELECTORS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(1024).unwrap();

impl ApiHandler {
    pub fn new(adapter: Arc<Adapter>) -> Self {
        ApiHandler {
            ready: ready::Ready::new(adapter.self_metrics()),
            adapter,
            reuse_answers: true,
            selectors: std::sync::Mutex::new(hpa_bridge_engine::bounded_lru::bounded_lru(
                MAX_SELECTORS,
            )),
        }
    }

    /// Compute every answer afresh instead of reusing one (`Adapter::answer_computed`): the
    /// bench's comparison.
    #[doc(hidden)]
    pub fn without_answer_reuse(mut self) -> Self {
        self.reuse_answers = false;
        self
    }

    /// The handler answering `/readyz` from `ready`, a flag it shares with the status port.
    pub fn with_ready(mut self, ready: ready::Ready) -> Self {
        self.ready = ready;
        self
    }

    pub fn ready(&self) -> &ready::Ready {
        &self.ready
    }

    pub fn health(&self, which: &str) -> ApiResponse {
        if which == "readyz" && !self.ready.is_ready() {
            return plain(503, "not ready: the first scrape round has not completed\n");
        }
        plain(200, "ok\n")
    }

    /// The answer to `req`, uncounted (the request chain counts it: `request_metrics`).
    pub async fn handle<B>(&self, req: &Request<B>) -> ApiResponse {
        self.answer(req, &route(req.uri().path())).await
    }

    /// `handle`, for a request whose path was already routed.
    pub async fn answer<B>(&self, req: &Request<B>, route: &Route) -> ApiResponse {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return status_response(
                StatusReason::MethodNotAllowed,
                &read_only_message(req.method(), req.uri().path()),
            );
        }
        match route {
            Route::Health(which) => self.health(which),
            Route::ApiGroupList => json_response(200, &discovery::api_group_list()),
            Route::ApiGroup => json_response(200, &discovery::api_group()),
            Route::ApiResourceList => json_response(
                200,
                &discovery::api_resource_list(&self.adapter.served_metric_names()),
            ),
            Route::ExternalMetric(ns, metric) => {
                self.external_metric(ns, metric, req.uri().query()).await
            }
            Route::CustomGroup => json_response(200, &custom_metrics::api_group()),
            Route::CustomMetrics(path) => self.custom_metrics(path, req.uri().query()).await,
            Route::NotFound => status_response(
                StatusReason::NotFound,
                &format!(
                    "the server could not find the requested resource {}",
                    req.uri().path()
                ),
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
        let selector_text = match label_selector_param(query) {
            Ok(s) => s.unwrap_or_default(),
            Err(e) => return status_response(StatusReason::BadRequest, &e.to_string()),
        };
        let selector = match self.parse_selector(selector_text) {
            Ok(s) => s,
            Err(e) => return status_response(StatusReason::BadRequest, &e.to_string()),
        };
        self.serve(
            MetricQuery::external(metric, ns, selector),
            WireForm::External,
        )
        .await
    }

    /// `text` parsed, from the handler's memory when it was parsed before.
    fn parse_selector(
        &self,
        text: String,
    ) -> Result<Arc<LabelSelector>, hpa_bridge_rules::selector::SelectorError> {
        let known = self
            .selectors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&text)
            .cloned();
        if let Some(p) = known {
            return Ok(p);
        }
        let parsed = Arc::new(LabelSelector::parse(&text)?);
        // A long one is parsed each time rather than held.
        if text.len() > MAX_REMEMBERED_SELECTOR {
            return Ok(parsed);
        }
        let mut map = self.selectors.lock().unwrap_or_else(|e| e.into_inner());
        map.put(text, parsed.clone());
        Ok(parsed)
    }

    /// One query from either API, answered by the engine and put on the wire in `form`.
    async fn serve(&self, query: MetricQuery, form: WireForm) -> ApiResponse {
        let served = if self.reuse_answers {
            self.adapter.answer(&query).await
        } else {
            self.adapter.answer_computed(&query).await
        };
        match served {
            Ok(served) => {
                let render_now = || render(&served, &query, form);
                let (code, body) = match served
                    .attached::<Renderings>()
                    .and_then(|r| r.0.get(form.slot()))
                {
                    Some(kept) => kept.get_or_init(render_now).clone(),
                    None => render_now(),
                };
                bytes_response(code, body)
            }
            Err(e @ QueryError::UnknownMetric { .. }) => {
                status_response(StatusReason::NotFound, &e.to_string())
            }
        }
    }
}

/// How an answer goes on the wire: the External API's list, or a custom metrics
/// `MetricValueList` of one served version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireForm {
    External,
    Object(custom_metrics::ServedVersion),
}

/// The renderings of one served answer, per wire form, kept with it (`Served::attached`) so
/// that a reused answer is not rendered again. Two forms at most: a query is External or
/// Object, and custom metrics have two served versions.
#[derive(Default)]
struct Renderings([std::sync::OnceLock<(u16, Bytes)>; 2]);

impl WireForm {
    /// Where `Renderings` keeps this form: a query is External or Object, so only Object's two
    /// versions need separate places.
    fn slot(self) -> usize {
        match self {
            WireForm::External | WireForm::Object(custom_metrics::ServedVersion::V1beta2) => 0,
            WireForm::Object(custom_metrics::ServedVersion::V1beta1) => 1,
        }
    }
}

/// A value list's JSON. Its buffer starts at a size a common list fits in, so serializing it
/// does not grow and copy the buffer on the way: `to_vec` starts at 128 bytes, and the shortest
/// External list (one-letter metric, no labels) is already 189.
fn answer_json(list: &impl serde::Serialize) -> Vec<u8> {
    let mut body = Vec::with_capacity(512);
    match serde_json::to_writer(&mut body, list) {
        Ok(()) => body,
        Err(_) => b"{}".to_vec(),
    }
}

/// An answer on the wire: its value in the form's list, or its refusal as a `Status`. Depends
/// only on the answer and on what the query's key holds, so a reused answer's rendering is
/// the one a fresh rendering would give.
fn render(served: &Served, query: &MetricQuery, form: WireForm) -> (u16, Bytes) {
    let answer = &served.answer;
    match answer.outcome {
        Outcome::Value {
            value,
            timestamp_ms,
        } => {
            let timestamp = rfc3339(timestamp_ms);
            let body = match (form, &query.object) {
                (WireForm::Object(version), Some(object)) => {
                    let list = custom_metrics::metric_value_list(
                        version,
                        object,
                        &answer.metric,
                        &query.selector,
                        timestamp,
                        served.window_secs,
                        value.to_string(),
                    );
                    answer_json(&list)
                }
                _ => {
                    let list = ExternalMetricValueList {
                        api_version: GROUP_VERSION,
                        // Exactly one item: the HPA sums every item (docs/hpa-behaviour.md §1.2).
                        items: [ExternalMetricValue {
                            metric_labels: query.selector.equality_labels(),
                            metric_name: &answer.metric,
                            timestamp,
                            value: value.to_string(),
                            window: served.window_secs,
                        }],
                        kind: "ExternalMetricValueList",
                        metadata: Metadata {},
                    };
                    answer_json(&list)
                }
            };
            (200, Bytes::from(body))
        }
        Outcome::Refused { kind, .. } => {
            let reason = if kind.http_code() == 404 {
                StatusReason::NotFound
            } else {
                StatusReason::ServiceUnavailable
            };
            let about = match &query.object {
                Some(object) => format!(" for {object}"),
                None => String::new(),
            };
            let message = format!(
                "{}{about} {}: {}",
                answer.metric,
                refusal_verb(kind),
                answer.reason
            );
            (reason.code(), status_body(reason, &message))
        }
    }
}

/// The served list, typed so that it is written without building a JSON tree per request;
/// fields in the order `serde_json::Value` would sort them, so the bytes are those of the tree.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ExternalMetricValueList<'a> {
    api_version: &'static str,
    items: [ExternalMetricValue<'a>; 1],
    kind: &'static str,
    metadata: Metadata,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ExternalMetricValue<'a> {
    metric_labels: std::collections::BTreeMap<&'a str, &'a str>,
    metric_name: &'a str,
    timestamp: String,
    value: String,
    window: u64,
}

#[derive(serde::Serialize)]
struct Metadata {}

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
mod tests;
