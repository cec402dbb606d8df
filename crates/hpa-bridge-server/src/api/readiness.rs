//! `/readyz` while the server terminates: 503 before anything else is asked, so the endpoints
//! controller and the aggregator stop sending requests (`transport::shutdown`).

use std::sync::Arc;

use tower::Layer;

use super::answer_first::{AnswerFirst, AnswerFirstService};
use super::response::{plain, ApiResponse};
use super::transport::shutdown::Shutdown;
use super::{Route, Routed};

/// The layer failing `/readyz` from the moment the server terminates.
#[derive(Clone, Debug)]
pub struct Readiness {
    shutdown: Arc<Shutdown>,
}

impl Readiness {
    pub fn new(shutdown: Arc<Shutdown>) -> Self {
        Readiness { shutdown }
    }
}

impl AnswerFirst for Readiness {
    fn answer<B>(&self, req: &Routed<B>) -> Option<ApiResponse> {
        (req.route == Route::Health("readyz") && self.shutdown.terminating())
            .then(|| plain(503, "not ready: shutting down\n"))
    }
}

impl<S> Layer<S> for Readiness {
    type Service = AnswerFirstService<S, Readiness>;

    fn layer(&self, inner: S) -> Self::Service {
        AnswerFirstService::new(inner, self.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::Method;

    use crate::api::tests::{ask_api, default_handler, request, response_bytes};
    use crate::api::transport::shutdown::{Phase, Shutdown};

    /// A ready adapter's `/readyz` fails as soon as the server terminates; the other probes
    /// and the API go on being answered.
    #[tokio::test]
    async fn readyz_fails_once_the_server_terminates() {
        let handler = Arc::new(default_handler());
        handler.ready().mark();
        let shutdown = Shutdown::new();
        let ask = |path: &'static str| {
            let (handler, shutdown) = (handler.clone(), shutdown.clone());
            async move {
                let resp =
                    ask_api(&handler, None, &shutdown, request(Method::GET, path, false)).await;
                (
                    resp.status().as_u16(),
                    response_bytes(&resp).unwrap_or_default(),
                )
            }
        };
        assert_eq!(ask("/readyz").await.0, 200);
        shutdown.advance(Phase::Terminating);
        assert_eq!(
            ask("/readyz").await,
            (
                503,
                bytes::Bytes::from_static(b"not ready: shutting down\n")
            )
        );
        assert_eq!(ask("/readyz/").await.0, 503);
        assert_eq!(ask("/healthz").await.0, 200);
        assert_eq!(ask("/apis").await.0, 200);
    }
}
