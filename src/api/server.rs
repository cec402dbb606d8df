//! Accept loops: the TLS API port and the metrics port, each bounded by its
//! [`ConnectionLimits`] and stopped by the shared [`Shutdown`].

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
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::connection::{
    AcceptBackoff, Activity, ConnectionGate, ConnectionLimits, Expiry, InFlight, MIN_HEADER_BYTES,
};
use super::drop_filter::{self, DropFilter};
use super::penalty_box::Strike;
use super::shutdown::Shutdown;
use super::{json_response, plain, route, ApiHandler, ApiResponse, Route, StatusReason};
use crate::engine::{Adapter, StatusQuery};

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

    /// Whether `certificates` are the front proxy's (kube-apiserver's requestheader client
    /// certificate, with an allowed name). A connection that presented them is never struck
    /// (`penalty_box`): the aggregator relays its users' requests, oversized heads included,
    /// and must not lock out its own address before it has earned trust with a request.
    fn is_front_proxy(&self, _certificates: &[CertificateDer<'static>]) -> bool {
        false
    }
}

/// Answers one request on a listener: the API's routing and gate, or the metrics port's pages.
pub type Respond = Arc<
    dyn Fn(Request<Incoming>, Arc<Peer>) -> Pin<Box<dyn Future<Output = ApiResponse> + Send>>
        + Send
        + Sync,
>;

/// How one listener serves: its connection bounds, TLS or not, and the shared lifecycle.
#[derive(Clone)]
pub struct Listening {
    pub gate: Arc<ConnectionGate>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub shutdown: Arc<Shutdown>,
    /// The listener's gatekeeper, asked whether a connection's certificate spares it strikes.
    pub gatekeeper: Option<Arc<dyn Gatekeeper>>,
}

/// After the server closes an expired connection gracefully (an HTTP/2 GOAWAY, or closing an
/// idle HTTP/1.1 connection), how long the client gets before the socket is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// HTTP/2 streams one connection may have open; the aggregator multiplexes many HPAs over few
/// connections, but every stream holds a request in memory.
const MAX_CONCURRENT_STREAMS: u32 = 250;

/// While shutting down, how often a connection that has not sent its first request checks.
const FIRST_REQUEST_POLL: Duration = Duration::from_millis(10);

fn http_builder(limits: &ConnectionLimits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BYTES))
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    builder
}

/// Accept connections until the shutdown reaches [`Phase::Stopping`]; every connection is
/// bounded by the listener's [`ConnectionLimits`].
pub async fn serve(listener: TcpListener, listening: Listening, respond: Respond) {
    let name = listening.gate.listener();
    let http = Arc::new(http_builder(listening.gate.limits()));
    let acceptor = listening.tls.clone().map(TlsAcceptor::from);
    let mut backoff = AcceptBackoff::new(name);
    let stopping = listening.shutdown.clone();
    let stopping = stopping.stopping();
    tokio::pin!(stopping);
    let gate = &listening.gate;
    let rules = &gate.limits().penalty;
    let kernel_drop = rules.drop_in_kernel && rules.strikes > 0;
    let mut filter = DropFilter::new();
    // When the kernel's drop filter must next be updated (a penalty ends then), if armed.
    let due = tokio::time::sleep_until(Instant::now());
    tokio::pin!(due);
    let mut due_armed = false;
    loop {
        let drops = kernel_drop && !filter.failed();
        let refresh = tokio::select! {
            a = listener.accept() => Some(a),
            _ = &mut stopping => {
                tracing::info!(listener = name, "no longer accepting connections");
                return;
            }
            _ = gate.refused_changed(), if drops => None,
            _ = &mut due, if drops && due_armed => None,
        };
        let Some(accepted) = refresh else {
            match filter.refresh(&listener, gate) {
                Some(next) => {
                    due.as_mut().reset(next);
                    due_armed = true;
                }
                None => due_armed = false,
            }
            continue;
        };
        let (tcp, addr) = match accepted {
            Ok(c) => {
                backoff.succeeded();
                c
            }
            Err(e) => {
                // ECONNABORTED and friends concern one connection; the descriptor-table errors
                // repeat until a connection closes, so wait instead of spinning.
                tokio::time::sleep(backoff.failed(&e)).await;
                continue;
            }
        };
        let permit = match listening.gate.admit(addr.ip()) {
            Ok(p) => p,
            Err(refusal) => {
                tracing::debug!(listener = name, peer = %addr, cap = refusal.as_str(), "connection refused");
                // Dropping the socket closes it: no TLS or HTTP work for the excess. A zero
                // linger closes with a reset, so the refusal leaves no socket in TIME_WAIT and
                // no FIN exchange behind (what nginx does for a refused connection).
                let _ = tcp.set_zero_linger();
                drop(tcp);
                // A burst of refusals (an attacker's reconnects come in waves) would otherwise
                // hold this worker until the backlog is empty; let the requests queued behind
                // it run between refusals.
                tokio::task::yield_now().await;
                continue;
            }
        };
        if kernel_drop {
            // The connection may have been given the listener's filter (see `drop_filter`),
            // including one that was swapped out as it was created: shed it whatever the list
            // holds now. One setsockopt, beside a TLS handshake.
            let _ = drop_filter::apply(&tcp, &[]);
        }
        let _ = tcp.set_nodelay(true);
        let http = http.clone();
        let acceptor = acceptor.clone();
        let respond = respond.clone();
        let listening = listening.clone();
        tokio::spawn(async move {
            let opened = Instant::now();
            let _permit = permit;
            match acceptor {
                Some(acceptor) => {
                    let limits = listening.gate.limits();
                    let handshake =
                        tokio::time::timeout(limits.header_timeout, acceptor.accept(tcp));
                    // Not cut short by a shutdown: the client may already count the session
                    // as established, and its first request is served (see `drive`).
                    let tls = match handshake.await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(listener = name, peer = %addr, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(listener = name, peer = %addr, "TLS handshake timed out");
                            listening
                                .gate
                                .metrics()
                                .connection_expired(name, "tls-handshake-timeout");
                            listening.gate.strike(addr.ip(), Strike::HandshakeTimeout);
                            return;
                        }
                    };
                    let certificates = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .map(|c| Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()));
                    let peer = Arc::new(Peer { addr, certificates });
                    drive(TokioIo::new(tls), peer, opened, &http, &listening, respond).await;
                }
                None => {
                    let peer = Arc::new(Peer {
                        addr,
                        certificates: None,
                    });
                    drive(TokioIo::new(tcp), peer, opened, &http, &listening, respond).await;
                }
            }
        });
    }
}

/// Serve one connection until it ends, expires (no request head within the header timeout,
/// or idle past the idle timeout), or the server stops.
async fn drive<I>(
    io: I,
    peer: Arc<Peer>,
    opened: Instant,
    http: &auto::Builder<TokioExecutor>,
    listening: &Listening,
    respond: Respond,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let name = listening.gate.listener();
    let limits = listening.gate.limits();
    // Its address struck out while this connection was in its TLS handshake.
    if listening.gate.refuses(peer.addr.ip()) {
        listening
            .gate
            .metrics()
            .connection_expired(name, "penalized");
        return;
    }
    let activity = Arc::new(Activity::since(opened));
    // A connection counts one strike at most: on HTTP/1.1 the server's own header deadline
    // and hyper's header timer can both fire for one partial head.
    // The front proxy's connection is never struck; its certificate is checked only when a
    // strike would land, which an honest client never causes.
    let mut struck = false;
    let mut strike = |why: Strike| {
        if std::mem::replace(&mut struck, true) {
            return;
        }
        let front_proxy = listening
            .gatekeeper
            .as_ref()
            .zip(peer.certificates.as_deref())
            .is_some_and(|(g, chain)| g.is_front_proxy(chain));
        if front_proxy {
            tracing::debug!(listener = name, peer = %peer.addr, strike = why.as_str(), "not striking the front proxy's connection");
        } else {
            listening.gate.strike(peer.addr.ip(), why);
        }
    };
    // Set by a request answered while terminating on HTTP/2: the connection then sends GOAWAY.
    let goaway = Arc::new(tokio::sync::Notify::new());
    let service = {
        let activity = activity.clone();
        let peer = peer.clone();
        let gate = listening.gate.clone();
        let shutdown = listening.shutdown.clone();
        let goaway = goaway.clone();
        service_fn(move |req: Request<Incoming>| {
            let in_flight = InFlight::start(&activity);
            let head = req.method() == http::Method::HEAD;
            let version = req.version();
            let answer = respond(req, peer.clone());
            let (gate, peer, shutdown, goaway) =
                (gate.clone(), peer.clone(), shutdown.clone(), goaway.clone());
            async move {
                let mut resp = answer.await;
                if resp.extensions().get::<Authenticated>().is_some() && in_flight.0.vouch_due() {
                    gate.vouch(peer.addr.ip());
                }
                if shutdown.terminating() {
                    send_clients_away(&mut resp, version, &goaway);
                }
                drop(in_flight);
                Ok::<_, Infallible>(if head { without_body(resp) } else { resp })
            }
        })
    };
    let conn = http.serve_connection(io, service);
    tokio::pin!(conn);
    let stopping = listening.shutdown.stopping();
    tokio::pin!(stopping);
    let mut stopping_seen = false;
    let mut stopped = false;
    let mut hard_close: Option<Instant> = None;
    let far = || Instant::now() + Duration::from_secs(86_400);
    loop {
        let expiry = activity.deadline(limits);
        let wake = expiry.map(|(at, _)| at).unwrap_or_else(far);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    let hyper_error = e.downcast_ref::<hyper::Error>();
                    if hyper_error.is_some_and(|e| e.is_timeout()) {
                        listening.gate.metrics().connection_expired(name, "header-timeout");
                        // Only a connection that never completed a request is misbehaving:
                        // an idle HTTP/1.1 keep-alive connection times out here too.
                        if activity.requests() == 0 {
                            strike(Strike::HeaderTimeout);
                        }
                    }
                    if hyper_error.is_some_and(|e| e.is_parse_too_large()) {
                        strike(Strike::HeadTooLarge);
                    }
                    tracing::debug!(listener = name, peer = %peer.addr, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = &mut stopping, if !stopping_seen => stopping_seen = true,
            // Terminating on HTTP/2: GOAWAY now, while the listener still accepts, so the
            // client moves its next requests to a new connection (see `send_clients_away`).
            _ = goaway.notified(), if !stopped => {
                conn.as_mut().graceful_shutdown();
                stopped = true;
            }
            // Shutting down: finish what is in flight, then close (HTTP/2: GOAWAY). A
            // connection accepted just before the listener closed has not sent its request
            // yet; closing it now would fail a request the client has every right to think
            // accepted, so it gets until its first request starts (or its header timeout).
            _ = tokio::time::sleep(FIRST_REQUEST_POLL), if stopping_seen && !stopped => {
                if activity.requests() > 0 {
                    conn.as_mut().graceful_shutdown();
                    stopped = true;
                }
            }
            _ = tokio::time::sleep_until(wake), if expiry.is_some() && hard_close.is_none() && !stopped => {
                // Re-read: a request may have started or ended since the sleep was armed.
                if let Some((at, why)) = activity.deadline(limits) {
                    if at <= Instant::now() {
                        let reason = match why {
                            Expiry::HeaderTimeout => "header-timeout",
                            Expiry::IdleTimeout => "idle-timeout",
                        };
                        tracing::debug!(listener = name, peer = %peer.addr, reason, "closing connection");
                        listening.gate.metrics().connection_expired(name, reason);
                        if why == Expiry::HeaderTimeout {
                            strike(Strike::HeaderTimeout);
                        }
                        conn.as_mut().graceful_shutdown();
                        hard_close = Some(Instant::now() + CLOSE_GRACE);
                    }
                }
            }
            // Its address struck out (through other connections): a connection that never
            // sent a request goes too, freeing its slot under the caps for other clients.
            _ = listening.gate.struck_out(), if activity.requests() == 0 && hard_close.is_none() && !stopped => {
                if activity.requests() == 0 && listening.gate.refuses(peer.addr.ip()) {
                    tracing::debug!(listener = name, peer = %peer.addr, "closing connection of a penalized client");
                    listening.gate.metrics().connection_expired(name, "penalized");
                    conn.as_mut().graceful_shutdown();
                    hard_close = Some(Instant::now() + CLOSE_GRACE);
                }
            }
            _ = tokio::time::sleep_until(hard_close.unwrap_or_else(far)), if hard_close.is_some() => return,
        }
    }
}

/// While the server terminates (the shutdown delay), every connection that carries a request
/// is told to go, as kube-apiserver does while it terminates: HTTP/1.1 answers carry
/// `Connection: close` (and hyper closes after them), HTTP/2 connections get a GOAWAY. The
/// client then sends its next request on a new connection, which the listener still accepts,
/// and no request is ever written on a connection the server is about to close: closing an
/// idle keep-alive connection races the client's next request, which is then lost. hyper's
/// graceful shutdown alone would close an HTTP/1.1 connection after an answer that does not
/// say so, and close an idle one at once.
fn send_clients_away(resp: &mut ApiResponse, version: http::Version, goaway: &tokio::sync::Notify) {
    if version == http::Version::HTTP_2 {
        goaway.notify_one();
    } else {
        resp.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
}

/// The answer to a HEAD request: the GET answer's status and headers, with its length, and no
/// body. hyper drops the body of a HEAD answer on HTTP/1.1 but sends it on HTTP/2, where
/// strict clients fail on the unexpected DATA (issue 13, item 8).
fn without_body(resp: ApiResponse) -> ApiResponse {
    use hyper::body::Body;
    let (mut parts, body) = resp.into_parts();
    if let Some(len) = body.size_hint().exact() {
        parts
            .headers
            .insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    }
    http::Response::from_parts(parts, Full::new(Bytes::new()))
}

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

/// Marks a response whose request got past the [`Gatekeeper`]: the connection then vouches for
/// its client's address (`penalty_box`). Without a gatekeeper nothing is marked, since nothing
/// was proven (and nothing needs protecting from a shared-address attacker).
#[derive(Clone, Copy, Debug)]
struct Authenticated;

fn authenticated(mut resp: ApiResponse) -> ApiResponse {
    resp.extensions_mut().insert(Authenticated);
    resp
}

/// The metrics port's answer to one request. `/metrics` may face the network, but only behind
/// `gate` (TLS with delegated authentication and authorization); the status pages (`/`,
/// `/status`, `/status/*`), which show every workload, label and target, are served only when
/// `status_pages` says the listener is a loopback one.
pub fn metrics_responder(
    adapter: Arc<Adapter>,
    gate: Option<Arc<dyn Gatekeeper>>,
    status_pages: bool,
) -> Respond {
    // One status document is built at a time per listener: each is linear in the page, but a
    // crowd of callers must not take every blocking thread.
    let status_builds = Arc::new(tokio::sync::Semaphore::new(1));
    Arc::new(move |req, peer| {
        let adapter = adapter.clone();
        let gate = gate.clone();
        let status_builds = status_builds.clone();
        Box::pin(async move {
            let path = req.uri().path();
            if path == "/healthz" {
                return plain(200, "ok\n");
            }
            if is_status_page(path) && !status_pages {
                return plain(
                    404,
                    "not found: the status pages are served only on a loopback listener \
                     (--metrics-bind-address on loopback, or --status-bind-address)\n",
                );
            }
            if let Some(gate) = &gate {
                // A non-resource request: SubjectAccessReview of `get` on the path, the
                // convention of controller-runtime's secure metrics.
                if let Err(denied) = gate.admit(&req, &peer, &Route::NotFound).await {
                    return denied;
                }
                return authenticated(metrics_response(&adapter, &req, &status_builds).await);
            }
            metrics_response(&adapter, &req, &status_builds).await
        })
    })
}

/// The pages that explain answers: every workload, label and target URL.
pub fn is_status_page(path: &str) -> bool {
    path == "/" || path == "/status" || path.starts_with("/status/")
}

/// `/status/history`: the answers served per scope, filtered by `namespace` and `metric`.
fn history_json(adapter: &Adapter, query: Option<&str>) -> serde_json::Value {
    let filter = crate::engine::history::Filter {
        namespace: super::query_param(query, "namespace")
            .ok()
            .flatten()
            .filter(|v| !v.is_empty()),
        metric: super::query_param(query, "metric")
            .ok()
            .flatten()
            .filter(|v| !v.is_empty()),
    };
    let view = adapter.history(&filter);
    let mut doc = serde_json::to_value(&view).unwrap_or_default();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("now".into(), crate::clock::rfc3339(view.now_ms).into());
        obj.insert(
            "retentionSeconds".into(),
            (view.retention_ms as f64 / 1000.0).into(),
        );
    }
    doc
}

/// The status page: every scope's history and the scrape targets' health.
pub fn status_page_html(adapter: &Adapter) -> String {
    use super::status_page::{render, Page, TargetRow};
    let view = adapter.history(&Default::default());
    let now = view.now_ms;
    let targets: Option<Vec<TargetRow>> = (!adapter.has_prometheus_source()).then(|| {
        adapter
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
        ready: adapter.is_ready(),
        scopes: &view.scopes,
        tracked: view.tracked,
        max_scopes: view.max_scopes,
        dropped_scopes: view.dropped_scopes,
        targets: targets.as_deref(),
    })
}

/// Serve `/metrics` and `/status` over plain HTTP with default connection limits.
pub async fn serve_metrics(listener: TcpListener, adapter: Arc<Adapter>) {
    let listening = Listening {
        gate: ConnectionGate::new(
            "metrics",
            ConnectionLimits::default(),
            adapter.self_metrics(),
        ),
        tls: None,
        shutdown: Shutdown::new(),
        gatekeeper: None,
    };
    serve(listener, listening, metrics_responder(adapter, None, true)).await
}

async fn metrics_response<B>(
    adapter: &Arc<Adapter>,
    req: &http::Request<B>,
    status_builds: &tokio::sync::Semaphore,
) -> ApiResponse {
    let query = req.uri().query();
    match req.uri().path() {
        "/metrics" => http::Response::builder()
            .header(
                http::header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
            .body(Full::new(Bytes::from(adapter.render_self_metrics())))
            .unwrap_or_else(|_| plain(500, "encoding failed\n")),
        "/status" => status_document(adapter, query, status_builds).await,
        "/status/history" => json_response(200, &history_json(adapter, query)),
        "/" => http::Response::builder()
            .header(http::header::CONTENT_TYPE, "text/html; charset=utf-8")
            .header(http::header::CACHE_CONTROL, "no-cache, private")
            // Nothing on the page may load from anywhere, and nothing may run.
            .header(
                http::header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'",
            )
            .body(Full::new(Bytes::from(status_page_html(adapter))))
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
    query: Option<&str>,
    status_builds: &tokio::sync::Semaphore,
) -> ApiResponse {
    let query = match super::query_pairs(query)
        .map_err(|e| e.to_string())
        .and_then(|pairs| StatusQuery::from_params(&pairs).map_err(|e| e.to_string()))
    {
        Ok(q) => q,
        Err(message) => {
            return super::status_response(StatusReason::BadRequest, &message);
        }
    };
    let Ok(_permit) = status_builds.acquire().await else {
        return plain(503, "shutting down\n");
    };
    let adapter = adapter.clone();
    let runtime = tokio::runtime::Handle::current();
    let built = tokio::task::spawn_blocking(move || {
        let doc = runtime.block_on(adapter.status(&query));
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
