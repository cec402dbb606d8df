//! The metrics port: `/metrics` (behind the gate when it faces the network) and, on a loopback
//! listener only, the status page, `/status` and the answer history.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceBuilder;

use super::authentication::Authenticate;
use super::head::Head;
use super::open_pages::OpenPages;
use super::ready::Ready;
use super::response::{json_response, plain, status_response, ApiResponse, StatusReason};
use super::transport::{serve, Gatekeeper, Listening, Peer, RequestChain};
use super::Routed;
use hpa_bridge_engine::engine::{Adapter, StatusQuery};

/// A section of the status page rendered by a part above the API (the HPA predictions).
pub type PagePanel = Arc<dyn Fn() -> String + Send + Sync>;

/// Serve the metrics port on `listening`, behind its gatekeeper if it has one. `/metrics` may
/// face the network, but only behind the gate (TLS with delegated authentication and
/// authorization); the status pages (`/`, `/status`, `/status/*`), which show every workload,
/// label and target, are served only when `status_pages` says the listener is a loopback one.
pub async fn serve_metrics_on(
    listener: TcpListener,
    listening: Listening,
    pages: MetricsPages,
    status_pages: bool,
) {
    let gate = listening.gatekeeper.clone();
    serve(listener, listening, move |peer| {
        metrics_service(&pages, gate.as_ref(), status_pages, peer)
    })
    .await
}

/// The metrics port's chain for one connection, outermost first: HEAD, the open pages, the
/// gate (a non-resource request: SubjectAccessReview of `get` on the path, the convention of
/// controller-runtime's secure metrics; refusals are not counted here), the pages.
pub fn metrics_service<B>(
    pages: &MetricsPages,
    gate: Option<&Arc<dyn Gatekeeper>>,
    status_pages: bool,
    peer: Arc<Peer>,
) -> impl RequestChain<B>
where
    B: Send + Sync + 'static,
{
    let pages = pages.clone();
    let authenticate = gate.map(|gate| Authenticate::new(gate.clone(), peer, None));
    ServiceBuilder::new()
        .layer(Head)
        .map_request(Routed::non_resource)
        .layer(OpenPages::new(status_pages))
        .option_layer(authenticate)
        .service_fn(move |req| page(pages.clone(), req))
}

/// The metrics port's pages: `/metrics` and the status pages.
#[derive(Clone)]
pub struct MetricsPages {
    adapter: Arc<Adapter>,
    ready: Ready,
    status_builds: Arc<Semaphore>,
    /// The HPAs' panel, when the adapter predicts HPAs.
    hpa_panel: Option<PagePanel>,
}

impl MetricsPages {
    /// The pages of one listener.
    pub fn new(adapter: Arc<Adapter>, ready: Ready) -> Self {
        MetricsPages {
            adapter,
            ready,
            // One status document is built at a time per listener: each is linear in the
            // page, but a crowd of callers must not take every blocking thread.
            status_builds: Arc::new(Semaphore::new(1)),
            hpa_panel: None,
        }
    }

    /// The pages with the HPAs' panel on them.
    pub fn with_hpa_panel(mut self, panel: Option<PagePanel>) -> Self {
        self.hpa_panel = panel;
        self
    }
}

/// The end of the metrics port's chain: the page a request asks for.
async fn page<B>(pages: MetricsPages, req: Routed<B>) -> Result<ApiResponse, Infallible> {
    Ok(metrics_response(&pages, &req.req).await)
}

/// `/status/history`: the answers served per scope, filtered by `namespace` and `metric`.
fn history_json(adapter: &Adapter, query: Option<&str>) -> serde_json::Value {
    let filter = hpa_bridge_engine::engine::history::Filter {
        namespace: super::request_parts::query_param(query, "namespace")
            .ok()
            .flatten()
            .filter(|v| !v.is_empty()),
        metric: super::request_parts::query_param(query, "metric")
            .ok()
            .flatten()
            .filter(|v| !v.is_empty()),
    };
    let view = adapter.explainer().history(&filter);
    let mut doc = serde_json::to_value(&view).unwrap_or_default();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert(
            "now".into(),
            hpa_bridge_rules::clock::rfc3339(view.now_ms).into(),
        );
        obj.insert(
            "retentionSeconds".into(),
            (view.retention_ms as f64 / 1000.0).into(),
        );
    }
    doc
}

/// The status page: the HPAs' predictions, every scope's history and the scrape targets'
/// health.
pub fn status_page_html(adapter: &Adapter, ready: bool, hpa_panel: Option<&PagePanel>) -> String {
    use super::status_page::{render, Page, TargetRow};
    let view = adapter.explainer().history(&Default::default());
    let now = view.now_ms;
    let targets: Option<Vec<TargetRow>> =
        (!adapter.explainer().has_prometheus_source()).then(|| {
            adapter
                .explainer()
                .target_health()
                .into_iter()
                .map(|(t, h)| TargetRow {
                    id: t.id.to_string(),
                    healthy: h.last_error.is_none() && h.ever_succeeded(),
                    last_error: h.last_error.clone(),
                    last_success_age_seconds: h.last_success_ms.map(|s| (now - s) as f64 / 1000.0),
                    consecutive_failures: h.consecutive_failures,
                })
                .collect()
        });
    render(&Page {
        now_ms: now,
        retention_ms: view.retention_ms,
        ready,
        scopes: &view.scopes,
        tracked: view.tracked,
        max_scopes: view.max_scopes,
        dropped_scopes: view.dropped_scopes,
        targets: targets.as_deref(),
        hpas: hpa_panel.map(|panel| panel()).as_deref(),
    })
}

async fn metrics_response<B>(pages: &MetricsPages, req: &http::Request<B>) -> ApiResponse {
    let (adapter, status_builds) = (&pages.adapter, &*pages.status_builds);
    let query = req.uri().query();
    match req.uri().path() {
        // OpenMetrics for the scrapers that ask for it (Prometheus does), the text format
        // 0.0.4 for everyone else, as Prometheus' own client libraries negotiate.
        "/metrics" => {
            let openmetrics = req
                .headers()
                .get_all(http::header::ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.contains("application/openmetrics-text"));
            let (content_type, page) = if openmetrics {
                (
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    adapter.explainer().render_self_metrics(),
                )
            } else {
                (
                    "text/plain; version=0.0.4; charset=utf-8",
                    adapter.explainer().render_self_metrics_text_format(),
                )
            };
            http::Response::builder()
                .header(http::header::CONTENT_TYPE, content_type)
                .body(Full::new(Bytes::from(page)))
                .unwrap_or_else(|_| plain(500, "encoding failed\n"))
        }
        "/status" => status_document(adapter, pages.ready.is_ready(), query, status_builds).await,
        "/status/history" => json_response(200, &history_json(adapter, query)),
        "/" => http::Response::builder()
            .header(http::header::CONTENT_TYPE, "text/html; charset=utf-8")
            .header(http::header::CACHE_CONTROL, "no-cache, private")
            // Nothing on the page may load from anywhere, and nothing may run.
            .header(
                http::header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'",
            )
            .body(Full::new(Bytes::from(status_page_html(
                adapter,
                pages.ready.is_ready(),
                pages.hpa_panel.as_ref(),
            ))))
            .unwrap_or_else(|_| plain(500, "encoding failed\n")),
        "/healthz" => plain(200, "ok\n"),
        _ => plain(
            404,
            "not found: try /, /metrics, /status or /status/history\n",
        ),
    }
}

/// `/status?namespace=&metric=&limit=&continue=`. The document is built and encoded on a
/// blocking thread: for thousands of workloads that is real CPU, and the async workers must
/// stay free for the HPA's requests and the probes.
async fn status_document(
    adapter: &Arc<Adapter>,
    ready: bool,
    query: Option<&str>,
    status_builds: &Semaphore,
) -> ApiResponse {
    let query = match super::request_parts::query_pairs(query)
        .map_err(|e| e.to_string())
        .and_then(|pairs| StatusQuery::from_params(&pairs).map_err(|e| e.to_string()))
    {
        Ok(q) => q,
        Err(message) => {
            return status_response(StatusReason::BadRequest, &message);
        }
    };
    let Ok(_permit) = status_builds.acquire().await else {
        return plain(503, "shutting down\n");
    };
    let adapter = adapter.clone();
    let runtime = tokio::runtime::Handle::current();
    let built = tokio::task::spawn_blocking(move || {
        let doc = runtime.block_on(adapter.explainer().status(&query, ready));
        serde_json::to_vec(&doc)
    })
    .await;
    match built {
        Ok(Ok(body)) => http::Response::builder()
            .status(200)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_else(|_| plain(500, "encoding failed\n")),
        _ => plain(500, "building the status document failed\n"),
    }
}
