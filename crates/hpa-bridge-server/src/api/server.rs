//! The API port's request chain, read top to bottom in `api_service`: HEAD, routing, readiness
//! while terminating, the anonymous health probes, the gate, the request self-metrics, the
//! handler. The accept loop is the transport's.

use std::convert::Infallible;
use std::sync::Arc;

use tokio::net::TcpListener;
use tower::ServiceBuilder;

use super::authentication::Authenticate;
use super::head::Head;
use super::health::Health;
use super::readiness::Readiness;
use super::request_metrics::{RecordRequest, RequestMetrics};
use super::response::ApiResponse;
use super::transport::connection::{ConnectionGate, ConnectionLimits};
use super::transport::shutdown::Shutdown;
use super::transport::{serve, Gatekeeper, Listening, Peer, RequestChain};
use super::{ApiHandler, Routed};

/// Serve the API over TLS with default connection limits, until the process ends.
pub async fn serve_api(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    handler: Arc<ApiHandler>,
    gate: Option<Arc<dyn Gatekeeper>>,
) {
    let metrics = handler.adapter.self_metrics();
    let listening = Listening {
        gate: ConnectionGate::new("api", ConnectionLimits::default(), metrics),
        tls: Some(tls),
        shutdown: Shutdown::new(),
        gatekeeper: gate,
    };
    serve_api_on(listener, listening, handler).await
}

/// Serve the API on `listening`, behind its gatekeeper, until its shutdown stops it.
pub async fn serve_api_on(listener: TcpListener, listening: Listening, handler: Arc<ApiHandler>) {
    let gate = listening.gatekeeper.clone();
    let shutdown = listening.shutdown.clone();
    serve(listener, listening, move |peer| {
        api_service(&handler, gate.as_ref(), &shutdown, peer)
    })
    .await
}

/// The API port's chain for one connection, outermost first. The order is a security
/// property: the probes are answered before the gate (they are anonymous), and only what the
/// gate admits reaches the handler.
pub fn api_service<B>(
    handler: &Arc<ApiHandler>,
    gate: Option<&Arc<dyn Gatekeeper>>,
    shutdown: &Arc<Shutdown>,
    peer: Arc<Peer>,
) -> impl RequestChain<B>
where
    B: Send + Sync + 'static,
{
    let handler = handler.clone();
    let metrics = RequestMetrics::new(handler.adapter.clone());
    let authenticate =
        gate.map(|gate| Authenticate::new(gate.clone(), peer, Some(metrics.clone())));
    ServiceBuilder::new()
        .layer(Head)
        .map_request(Routed::new)
        .layer(Readiness::new(shutdown.clone()))
        .layer(Health::new(handler.clone()))
        .option_layer(authenticate)
        .layer(RecordRequest::new(metrics))
        // The answer's future is several KiB (the whole evaluation's state); boxed here, each
        // layer above and the connection move a pointer instead of copying it.
        .service_fn(move |req| Box::pin(answer(handler.clone(), req)))
}

/// The end of the chain: the handler's answer to a routed request.
async fn answer<B>(handler: Arc<ApiHandler>, req: Routed<B>) -> Result<ApiResponse, Infallible> {
    Ok(handler.answer(&req.req, &req.route).await)
}
