//! The transport: the accept loop of each port, bounded by its [`ConnectionLimits`]
//! (connection caps, header and idle timeouts, the penalty box and the kernel's drop filter)
//! and stopped by the shared [`Shutdown`]. It knows connections and peers, not metrics: a
//! port's answers come from its request chain, a tower service made for each connection.

pub mod connection;
pub mod drop_filter;
pub mod penalty_box;
pub mod shutdown;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::{Service, ServiceExt};

use super::response::ApiResponse;
use super::Route;
use connection::{
    AcceptBackoff, Activity, ConnectionGate, ConnectionLimits, Expiry, InFlight, MIN_HEADER_BYTES,
};
use drop_filter::DropFilter;
use penalty_box::Strike;
use shutdown::Shutdown;

/// What the transport knows about the caller.
#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The verified client certificate chain, leaf first, if the client presented one.
    pub certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// Authentication and authorisation in front of the API. `Ok` lets the request through;
/// `Err` is the response to send instead (401, 403, 500/503). It sees the request's head only.
pub trait Gatekeeper: Send + Sync + 'static {
    fn admit<'a>(
        &'a self,
        req: &'a http::request::Parts,
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

/// A port's request chain for one connection: a tower service answering every request, made
/// anew for each connection since it knows the connection's peer.
pub trait RequestChain<B>:
    Service<Request<B>, Response = ApiResponse, Error = Infallible, Future: Send + 'static>
    + Clone
    + Send
    + 'static
{
}

impl<T, B> RequestChain<B> for T where
    T: Service<Request<B>, Response = ApiResponse, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + 'static
{
}

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
/// bounded by the listener's [`ConnectionLimits`] and answered by the request chain `chain`
/// makes for its peer.
pub async fn serve<C, S>(listener: TcpListener, listening: Listening, chain: C)
where
    C: Fn(Arc<Peer>) -> S + Send + Sync + 'static,
    S: RequestChain<Incoming>,
{
    let chain = Arc::new(chain);
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
        let chain = chain.clone();
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
                    let service = chain(peer.clone());
                    drive(TokioIo::new(tls), peer, opened, &http, &listening, service).await;
                }
                None => {
                    let peer = Arc::new(Peer {
                        addr,
                        certificates: None,
                    });
                    let service = chain(peer.clone());
                    drive(TokioIo::new(tcp), peer, opened, &http, &listening, service).await;
                }
            }
        });
    }
}

/// Serve one connection until it ends, expires (no request head within the header timeout,
/// or idle past the idle timeout), or the server stops.
async fn drive<I, S>(
    io: I,
    peer: Arc<Peer>,
    opened: Instant,
    http: &auto::Builder<TokioExecutor>,
    listening: &Listening,
    chain: S,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: RequestChain<Incoming>,
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
        // hyper calls through `&self`, tower through `&mut self` after readiness: each request
        // gets its own clone of the chain, as hyper-util's `TowerToHyperService` does.
        service_fn(move |req: Request<Incoming>| {
            let in_flight = InFlight::start(&activity);
            let version = req.version();
            let answer = chain.clone().oneshot(req);
            let (gate, peer, shutdown, goaway) =
                (gate.clone(), peer.clone(), shutdown.clone(), goaway.clone());
            async move {
                let Ok(mut resp) = answer.await;
                if resp.extensions().get::<Authenticated>().is_some() && in_flight.0.vouch_due() {
                    gate.vouch(peer.addr.ip());
                }
                if shutdown.terminating() {
                    send_clients_away(&mut resp, version, &goaway);
                }
                drop(in_flight);
                Ok::<_, Infallible>(resp)
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

/// Marks a response whose request got past the [`Gatekeeper`]: the connection then vouches for
/// its client's address (`penalty_box`). Without a gatekeeper nothing is marked, since nothing
/// was proven (and nothing needs protecting from a shared-address attacker).
#[derive(Clone, Copy, Debug)]
pub(in crate::api) struct Authenticated;

pub(in crate::api) fn authenticated(mut resp: ApiResponse) -> ApiResponse {
    resp.extensions_mut().insert(Authenticated);
    resp
}
