//! Authentication and authorisation: the port's [`Gatekeeper`] judges each request's head with
//! the connection's peer. A refusal (401, 403, 500/503) is the answer, counted in the request
//! self-metrics where the port keeps them; an admitted request goes on, and its answer is
//! marked so the connection vouches for its client (`transport::penalty_box`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use tower::{Layer, Service};

use super::request_metrics::RequestMetrics;
use super::response::ApiResponse;
use super::transport::{authenticated, Gatekeeper, Peer};
use super::Routed;

/// The layer asking the gate about each request of one connection.
#[derive(Clone)]
pub struct Authenticate {
    gate: Arc<dyn Gatekeeper>,
    peer: Arc<Peer>,
    refusals: Option<RequestMetrics>,
}

impl Authenticate {
    /// `refusals` counts the requests refused, when the port counts its requests.
    pub fn new(
        gate: Arc<dyn Gatekeeper>,
        peer: Arc<Peer>,
        refusals: Option<RequestMetrics>,
    ) -> Self {
        Authenticate {
            gate,
            peer,
            refusals,
        }
    }
}

impl<S> Layer<S> for Authenticate {
    type Service = AuthenticateService<S>;

    fn layer(&self, inner: S) -> AuthenticateService<S> {
        AuthenticateService {
            inner,
            gate: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct AuthenticateService<S> {
    inner: S,
    gate: Authenticate,
}

impl<S, B> Service<Routed<B>> for AuthenticateService<S>
where
    S: Service<Routed<B>, Response = ApiResponse> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: 'static,
    B: Send + 'static,
{
    type Response = ApiResponse;
    type Error = S::Error;
    /// Boxed: the gate's verdict borrows the request it then hands on.
    type Future = Pin<Box<dyn Future<Output = Result<ApiResponse, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Routed<B>) -> Self::Future {
        // The service made ready answers; its clone waits for the next request (tower's
        // contract for a service called from a future).
        let next = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, next);
        let gate = self.gate.clone();
        Box::pin(async move {
            let Routed { req, route } = req;
            let (head, body) = req.into_parts();
            if let Err(denied) = gate.gate.admit(&head, &gate.peer, &route).await {
                if let Some(refusals) = &gate.refusals {
                    refusals.refused(&route, denied.status().as_u16());
                }
                return Ok(denied);
            }
            let req = Routed {
                req: Request::from_parts(head, body),
                route,
            };
            inner.call(req).await.map(authenticated)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::Method;

    use crate::api::tests::{
        ask_api, bearer_gate, default_handler, json_body, request, requests_counted,
    };
    use crate::api::transport::shutdown::Shutdown;
    use crate::api::transport::Authenticated;

    /// An anonymous caller gets the gate's Kubernetes `Status` and never the handler's answer;
    /// the refusal is counted under the metric it asked for, through either API. An admitted
    /// caller's answer is marked for the connection to vouch for it.
    #[tokio::test]
    async fn the_gate_refuses_an_anonymous_caller_and_counts_the_refusal() {
        let handler = Arc::new(default_handler());
        let metric = handler.adapter.served_metric_names()[0].clone();
        let gate = bearer_gate();
        let shutdown = Shutdown::new();
        let path = format!("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/{metric}");
        let object_path = format!(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/statefulsets.apps/lobby/{metric}"
        );
        let ask_at = |path: &str, authorised: bool| {
            let (handler, gate, shutdown) = (handler.clone(), gate.clone(), shutdown.clone());
            let req = request(Method::GET, path, authorised);
            async move { ask_api(&handler, Some(&gate), &shutdown, req).await }
        };
        let ask = |authorised: bool| ask_at(&path, authorised);

        let refused = ask(false).await;
        assert_eq!(refused.status().as_u16(), 401);
        let status = json_body(&refused);
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "Unauthorized");
        assert!(refused
            .headers()
            .contains_key(http::header::WWW_AUTHENTICATE));
        assert!(refused.extensions().get::<Authenticated>().is_none());
        assert_eq!(requests_counted(&handler.adapter, 401, &metric), 1.0);

        let admitted = ask(true).await;
        assert_ne!(admitted.status().as_u16(), 401);
        assert!(admitted.extensions().get::<Authenticated>().is_some());
        assert_eq!(requests_counted(&handler.adapter, 401, &metric), 1.0);

        let refused = ask_at(&object_path, false).await;
        assert_eq!(refused.status().as_u16(), 401);
        assert_eq!(json_body(&refused)["kind"], "Status");
        assert_eq!(requests_counted(&handler.adapter, 401, &metric), 2.0);
        assert_eq!(requests_counted(&handler.adapter, 401, "-"), 0.0);
    }
}
