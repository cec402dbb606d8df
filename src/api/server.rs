//! Accept loops: the TLS API port and the plain-HTTP metrics port.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::{json_response, plain, route, ApiHandler, ApiResponse, Route};
use crate::adapter::Adapter;

/// What the transport knows about the caller.
#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The verified client certificate chain, leaf first, if the client presented one.
    pub certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// Authentication and authorisation in front of the API. `Ok` lets the request through;
/// `Err` is the response to send instead (401, 403, 500/503).
pub trait Gatekeeper: Send + Sync + 'static {
    fn admit<'a>(
        &'a self,
        req: &'a Request<Incoming>,
        peer: &'a Peer,
        route: &'a Route,
    ) -> Pin<Box<dyn Future<Output = Result<(), ApiResponse>> + Send + 'a>>;
}

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serve the API over TLS until the listener fails.
pub async fn serve_api(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    handler: Arc<ApiHandler>,
    gate: Option<Arc<dyn Gatekeeper>>,
) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (tcp, addr) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let gate = gate.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(peer = %addr, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(peer = %addr, "TLS handshake timed out");
                    return;
                }
            };
            let certificates = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()));
            let peer = Arc::new(Peer { addr, certificates });
            let service = service_fn(move |req: Request<Incoming>| {
                let handler = handler.clone();
                let gate = gate.clone();
                let peer = peer.clone();
                async move { Ok::<_, Infallible>(respond(&handler, gate.as_deref(), &peer, req).await) }
            });
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await
            {
                tracing::debug!(peer = %addr, error = %e, "connection ended with an error");
            }
        });
    }
}

async fn respond(
    handler: &ApiHandler,
    gate: Option<&dyn Gatekeeper>,
    peer: &Peer,
    req: Request<Incoming>,
) -> ApiResponse {
    let r = route(req.uri().path());
    // Health endpoints are anonymous (REFERENCE.md §3.1).
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
    }
    handler.handle(&req).await
}

/// Serve `/metrics` and `/status` over plain HTTP.
pub async fn serve_metrics(listener: TcpListener, adapter: Arc<Adapter>) {
    loop {
        let (tcp, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let adapter = adapter.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let adapter = adapter.clone();
                async move { Ok::<_, Infallible>(metrics_response(&adapter, req.uri().path()).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

async fn metrics_response(adapter: &Adapter, path: &str) -> ApiResponse {
    match path {
        "/metrics" => http::Response::builder()
            .header(
                http::header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
            .body(Full::new(Bytes::from(adapter.render_self_metrics())))
            .unwrap_or_else(|_| plain(500, "encoding failed\n")),
        "/status" => json_response(200, &adapter.status().await),
        "/healthz" => plain(200, "ok\n"),
        _ => plain(404, "not found: try /metrics or /status\n"),
    }
}
