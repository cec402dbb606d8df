//! The health probes (`/healthz`, `/livez`, `/readyz`), answered before authentication and
//! whatever the method: the kubelet probes anonymously (docs/hpa-behaviour.md §3.1).

use std::sync::Arc;

use tower::Layer;

use super::answer_first::{AnswerFirst, AnswerFirstService};
use super::response::ApiResponse;
use super::{ApiHandler, Route, Routed};

/// The layer answering the health probes.
#[derive(Clone)]
pub struct Health {
    handler: Arc<ApiHandler>,
}

impl Health {
    pub fn new(handler: Arc<ApiHandler>) -> Self {
        Health { handler }
    }
}

impl AnswerFirst for Health {
    fn answer<B>(&self, req: &Routed<B>) -> Option<ApiResponse> {
        match req.route {
            Route::Health(which) => Some(self.handler.health(which)),
            _ => None,
        }
    }
}

impl<S> Layer<S> for Health {
    type Service = AnswerFirstService<S, Health>;

    fn layer(&self, inner: S) -> Self::Service {
        AnswerFirstService::new(inner, self.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::Method;

    use crate::api::tests::{ask_api, bearer_gate, default_handler, request, response_bytes};
    use crate::api::transport::shutdown::Shutdown;

    /// Behind a gate, an anonymous caller's probes are answered whatever their method, while
    /// the rest of the API refuses it.
    #[tokio::test]
    async fn probes_are_answered_anonymously_whatever_the_method() {
        let handler = Arc::new(default_handler());
        let gate = bearer_gate();
        let shutdown = Shutdown::new();
        let ask = |method: Method, path: &'static str| {
            let (handler, gate, shutdown) = (handler.clone(), gate.clone(), shutdown.clone());
            async move {
                let req = request(method, path, false);
                let resp = ask_api(&handler, Some(&gate), &shutdown, req).await;
                (
                    resp.status().as_u16(),
                    response_bytes(&resp).unwrap_or_default(),
                )
            }
        };
        assert_eq!(ask(Method::GET, "/healthz").await, (200, "ok\n".into()));
        assert_eq!(ask(Method::POST, "/livez").await, (200, "ok\n".into()));
        // Not ready yet: the first scrape round has not completed.
        assert_eq!(ask(Method::GET, "/readyz").await.0, 503);
        handler.ready().mark();
        assert_eq!(ask(Method::GET, "/readyz").await.0, 200);
        assert_eq!(ask(Method::GET, "/apis").await.0, 401);
    }
}
