//! What the metrics port answers before its gate: `/healthz`, since probes are anonymous, and
//! the refusal of the status pages on a listener that is not a loopback one, since they are
//! never served there whoever asks.

use tower::Layer;

use super::answer_first::{AnswerFirst, AnswerFirstService};
use super::response::{plain, ApiResponse};
use super::Routed;

/// The layer answering the metrics port's open pages; `status_pages` says whether the
/// listener is a loopback one.
#[derive(Clone, Copy, Debug)]
pub struct OpenPages {
    status_pages: bool,
}

impl OpenPages {
    pub fn new(status_pages: bool) -> Self {
        OpenPages { status_pages }
    }
}

impl AnswerFirst for OpenPages {
    fn answer<B>(&self, req: &Routed<B>) -> Option<ApiResponse> {
        let path = req.req.uri().path();
        if path == "/healthz" {
            return Some(plain(200, "ok\n"));
        }
        (is_status_page(path) && !self.status_pages).then(|| {
            plain(
                404,
                "not found: the status pages are served only on a loopback listener \
                 (--metrics-bind-address on loopback, or --status-bind-address)\n",
            )
        })
    }
}

impl<S> Layer<S> for OpenPages {
    type Service = AnswerFirstService<S, OpenPages>;

    fn layer(&self, inner: S) -> Self::Service {
        AnswerFirstService::new(inner, *self)
    }
}

/// The pages that explain answers: every workload, label and target URL.
pub fn is_status_page(path: &str) -> bool {
    path == "/" || path == "/status" || path.starts_with("/status/")
}

#[cfg(test)]
mod tests {
    use http::Method;
    use tower::ServiceExt;

    use crate::api::metrics_port::{metrics_service, MetricsPages};
    use crate::api::tests::{bearer_gate, default_handler, peer, request, response_bytes};

    /// Behind a gate and off loopback, an anonymous caller gets `/healthz` and the refusal of
    /// the status pages, not the gate's 401; `/metrics` is the gate's.
    #[tokio::test]
    async fn the_open_pages_are_answered_before_the_gate() {
        let handler = default_handler();
        let pages = MetricsPages::new(handler.adapter.clone(), handler.ready().clone());
        let gate = bearer_gate();
        let ask = |method: Method, path: &'static str| {
            let chain = metrics_service(&pages, Some(&gate), false, peer());
            async move {
                let Ok(resp) = chain.oneshot(request(method, path, false)).await;
                (
                    resp.status().as_u16(),
                    response_bytes(&resp).unwrap_or_default(),
                )
            }
        };
        assert_eq!(ask(Method::GET, "/healthz").await, (200, "ok\n".into()));
        let (code, body) = ask(Method::GET, "/status").await;
        assert_eq!(code, 404);
        assert!(String::from_utf8_lossy(&body).contains("loopback"));
        assert_eq!(ask(Method::GET, "/metrics").await.0, 401);
    }
}
