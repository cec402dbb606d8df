//! The API port's request chain: health first (anonymous), then the [`Gatekeeper`]
//! (authentication and authorization), then the handler; the accept loop is the transport's.

use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use tokio::net::TcpListener;

use super::transport::connection::{ConnectionGate, ConnectionLimits};
use super::transport::shutdown::Shutdown;
use super::transport::{authenticated, serve, Gatekeeper, Listening, Peer, Respond};
use super::{plain, route, ApiHandler, ApiResponse, Route};

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
        gatekeeper: gate.clone(),
    };
    serve(
        listener,
        listening.clone(),
        api_responder(handler, gate, listening.shutdown),
    )
    .await
}

/// The API's answer to one request: health, then the gate, then the handler.
pub fn api_responder(
    handler: Arc<ApiHandler>,
    gate: Option<Arc<dyn Gatekeeper>>,
    shutdown: Arc<Shutdown>,
) -> Respond {
    Arc::new(move |req, peer| {
        let handler = handler.clone();
        let gate = gate.clone();
        let shutdown = shutdown.clone();
        Box::pin(async move {
            if shutdown.terminating() && route(req.uri().path()) == Route::Health("readyz") {
                return plain(503, "not ready: shutting down\n");
            }
            respond(&handler, gate.as_deref(), &peer, req).await
        })
    })
}

async fn respond(
    handler: &ApiHandler,
    gate: Option<&dyn Gatekeeper>,
    peer: &Peer,
    req: Request<Incoming>,
) -> ApiResponse {
    let r = route(req.uri().path());
    // Health endpoints are anonymous (docs/hpa-behaviour.md §3.1).
    if let Route::Health(which) = r {
        return handler.health(which);
    }
    if let Some(gate) = gate {
        if let Err(denied) = gate.admit(&req, peer, &r).await {
            let metric = match &r {
                Route::ExternalMetric(_, m) => handler.adapter.metric_label(m),
                _ => "-",
            };
            handler
                .adapter
                .record_request(denied.status().as_u16(), metric, 0.0);
            return denied;
        }
        return authenticated(handler.handle_route(&req, r).await);
    }
    handler.handle_route(&req, r).await
}
