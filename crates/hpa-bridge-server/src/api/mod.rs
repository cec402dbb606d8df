//! The aggregated API: routing, and `ApiHandler`, which answers discovery, the external metrics
//! list endpoint, the custom metrics Object query and health. Below it, one way:
//! request_parts.rs decodes paths and queries, custom_metrics.rs holds that group's paths and
//! formats, wire.rs puts answers on the wire, response.rs builds responses and `Status` errors.
//! Every response is `application/json`, whatever the request asked for: answering 406 to a
//! protobuf-first Accept header would break the HPA (docs/hpa-behaviour.md §2).

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
pub mod request_parts;
pub mod response;
pub mod server;
pub mod status_page;
pub mod transport;
pub mod wire;

use std::sync::Arc;

use http::{Method, Request};

use custom_metrics::{
    api_resource_list, valid_object_name, CustomPath, ObjectMetricPath, ServedVersion, SERVED_FORM,
    VERSIONS,
};
use hpa_bridge_engine::engine::{Adapter, MetricQuery, ObjectKind, ObjectRef, QueryError};
use hpa_bridge_rules::selector::LabelSelector;
use request_parts::{label_selector_param, percent_decode, query_param, valid_namespace};
use response::{bytes_response, json_response, plain, status_response, ApiResponse, StatusReason};
use wire::WireForm;

pub const GROUP: &str = "external.metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
pub const GROUP_VERSION: &str = "external.metrics.k8s.io/v1beta1";

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
                let (code, body) = wire::rendered(&served, &query, form);
                bytes_response(code, body)
            }
            Err(e @ QueryError::UnknownMetric { .. }) => {
                status_response(StatusReason::NotFound, &e.to_string())
            }
        }
    }

    /// Everything below `/apis/custom.metrics.k8s.io/`: the Object query, or for the other
    /// paths of a served version its resource list or a `Status` naming what is served.
    async fn custom_metrics(&self, path: &CustomPath, query: Option<&str>) -> ApiResponse {
        let Some(version) = ServedVersion::parse(&path.version) else {
            return status_response(
                StatusReason::NotFound,
                &format!(
                    "{GROUP} version {:?} is not served: the served versions are {}",
                    path.version,
                    VERSIONS.join(" and ")
                ),
            );
        };
        let Some(ObjectMetricPath {
            namespace: ns,
            resource,
            name,
            metric,
        }) = path.object_metric()
        else {
            return self.not_an_object_metric(path);
        };
        if !valid_namespace(ns) {
            return status_response(
                StatusReason::BadRequest,
                &format!("invalid namespace {ns:?}: must be a DNS-1123 label"),
            );
        }
        let Some(kind) = ObjectKind::from_resource(resource) else {
            return status_response(
                StatusReason::NotFound,
                &format!(
                    "resource {resource:?} is not served by {GROUP}: the served resources are \
                     statefulsets.apps and deployments.apps"
                ),
            );
        };
        if name == "*" {
            return status_response(
                StatusReason::BadRequest,
                &format!(
                    "the \"*\" form (every {resource} matching a selector) is not served: name one \
                     {} (Object metric)",
                    kind.kind()
                ),
            );
        }
        if !valid_object_name(name) {
            return status_response(
                StatusReason::BadRequest,
                &format!(
                    "invalid {} name {name:?}: must be a DNS-1123 subdomain",
                    kind.kind()
                ),
            );
        }
        let selector_text = match query_param(query, "metricLabelSelector") {
            Ok(s) => s.unwrap_or_default(),
            Err(e) => return status_response(StatusReason::BadRequest, &e.to_string()),
        };
        // Remembered like the external API's selectors: an HPA asks the same question every 15 s.
        let parsed = match self.parse_selector(selector_text) {
            Ok(s) => s,
            Err(e) => {
                return status_response(
                    StatusReason::BadRequest,
                    &format!("metricLabelSelector: {e}"),
                )
            }
        };
        let object = ObjectRef {
            kind,
            namespace: ns.to_string(),
            name: name.to_string(),
        };
        self.serve(
            MetricQuery::object(metric, object, parsed),
            WireForm::Object(version),
        )
        .await
    }

    /// The answer to every other path below a served version: the version's resource list,
    /// or a NotFound naming the form that is served.
    fn not_an_object_metric(&self, path: &CustomPath) -> ApiResponse {
        let rest: Vec<&str> = path.rest.iter().map(String::as_str).collect();
        let message = match rest.as_slice() {
            [] => {
                return json_response(
                    200,
                    &api_resource_list(&path.version, &self.adapter.served_metric_names()),
                )
            }
            ["namespaces", ns, "metrics", _] => {
                format!("metrics of the Namespace {ns:?} are not served: {SERVED_FORM}")
            }
            [first, ..] if *first != "namespaces" => {
                format!("root-scoped custom metrics are not served: {SERVED_FORM}")
            }
            _ => format!("the server could not find the requested resource: {SERVED_FORM}"),
        };
        status_response(StatusReason::NotFound, &message)
    }
}

#[cfg(test)]
mod tests;
