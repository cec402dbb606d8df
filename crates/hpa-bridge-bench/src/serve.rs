//! The serve path: the HPA's `GET .../hpa_target_replicas?labelSelector=...` over TLS keep-alive,
//! authenticated by a front-proxy client certificate, against a bare hyper + rustls server that
//! returns the same bytes with the same TLS configuration.
//!
//! Server and client share the machine's cores. To keep the comparison fair each server runs on
//! a runtime with one worker thread and the load generator on a current-thread runtime, and the
//! adapter and the baseline are measured alternately with the same client.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::{quantile, task_cpu_ns, BenchError, InPart, Plan};
use hpa_bridge_engine::engine::{Adapter, EngineBuilder};
use hpa_bridge_exposition as exposition;
use hpa_bridge_kit::authority::Authority;
use hpa_bridge_rules::clock::SystemClock;
use hpa_bridge_rules::config::Config;
use hpa_bridge_rules::evidence::TargetId;
use hpa_bridge_server::api::response::{status_response, ApiResponse, StatusReason};
use hpa_bridge_server::api::server::serve_api;
use hpa_bridge_server::api::transport::{Gatekeeper, Peer};
use hpa_bridge_server::api::{ApiHandler, Route};
use hpa_bridge_server::auth;
use hpa_bridge_server::tls::{self, ServingCert};
use hpa_bridge_store::store::ScrapeTarget;

pub const PATH: &str = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_target_replicas?labelSelector=hpa_target_name%3Dlobby";
/// The identity kube-apiserver forwards for the HPA controller (docs/hpa-behaviour.md §3).
const HPA_USER: &str = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";
const FRONT_PROXY_CN: &str = "front-proxy-client";

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadFigures {
    pub requests: u64,
    pub seconds: f64,
    pub requests_per_second: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// The server's CPU time per request (its runtime's threads, from the kernel's
    /// `schedstat`): what a request costs the server, whatever else shares the machine.
    pub server_cpu_us_per_request: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServeResult {
    pub path: String,
    pub connections: usize,
    pub response_bytes: usize,
    pub arrangement: String,
    pub gatekeeper: String,
    pub baseline: LoadFigures,
    /// The stand-in gatekeeper verifying each client certificate once (`OncePerCertificate`).
    pub adapter: LoadFigures,
    pub throughput_ratio: f64,
    pub p99_ratio: f64,
    /// The stand-in re-verifying the chain's signature on every request (`EveryRequest`).
    pub adapter_verify_every_request: LoadFigures,
    pub verify_every_request_throughput_ratio: f64,
    pub verify_every_request_p99_ratio: f64,
}

const PART: &str = "serve";

// ---- certificates -------------------------------------------------------------------------

pub struct Pki {
    dir: PathBuf,
    /// CA files for the adapter's real trust store.
    client_ca_file: PathBuf,
    front_proxy_ca_file: PathBuf,
    serving_ca: CertificateDer<'static>,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_ca: CertificateDer<'static>,
    front_proxy_ca: CertificateDer<'static>,
    front_proxy_chain: Vec<CertificateDer<'static>>,
    front_proxy_key: PrivateKeyDer<'static>,
}

impl Pki {
    pub fn generate() -> Result<Self, BenchError> {
        let serving = Authority::new("bench-serving-ca").part(PART)?;
        let client = Authority::new("bench-client-ca").part(PART)?;
        let front = Authority::new("bench-front-proxy-ca").part(PART)?;
        let server = serving.server(&["localhost", "127.0.0.1"]).part(PART)?;
        let front_proxy = front.client(FRONT_PROXY_CN, &[]).part(PART)?;
        // ServingCert reads files (it re-reads them on rotation); a private directory holds them.
        let dir = std::env::temp_dir().join(format!("hpa-bridge-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).part(PART)?;
        let server_cert = dir.join("server.crt");
        let server_key = dir.join("server.key");
        std::fs::write(&server_cert, &server.cert_pem).part(PART)?;
        std::fs::write(&server_key, &server.key_pem).part(PART)?;
        let client_ca_file = dir.join("client-ca.crt");
        let front_proxy_ca_file = dir.join("front-proxy-ca.crt");
        std::fs::write(&client_ca_file, client.pem()).part(PART)?;
        std::fs::write(&front_proxy_ca_file, front.pem()).part(PART)?;
        Ok(Pki {
            dir,
            client_ca_file,
            front_proxy_ca_file,
            serving_ca: serving.der(),
            server_cert,
            server_key,
            client_ca: client.der(),
            front_proxy_ca: front.der(),
            front_proxy_chain: vec![front_proxy.cert_der],
            front_proxy_key: front_proxy.key_der,
        })
    }

    /// The API server's TLS config: client certificates from either CA are requested (never
    /// required, as the adapter's own config does) and verified in the handshake.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, BenchError> {
        let mut roots = RootCertStore::empty();
        roots.add(self.client_ca.clone()).part(PART)?;
        roots.add(self.front_proxy_ca.clone()).part(PART)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            hpa_bridge_sources::pki::crypto_provider(),
        )
        .allow_unauthenticated()
        .build()
        .part(PART)?;
        let cert = ServingCert::from_files(&self.server_cert, &self.server_key).part(PART)?;
        Ok(Arc::new(
            tls::server_config(cert, Some(verifier)).part(PART)?,
        ))
    }

    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, BenchError> {
        let mut roots = RootCertStore::empty();
        roots.add(self.serving_ca.clone()).part(PART)?;
        let mut config =
            rustls::ClientConfig::builder_with_provider(hpa_bridge_sources::pki::crypto_provider())
                .with_safe_default_protocol_versions()
                .part(PART)?
                .with_root_certificates(roots)
                .with_client_auth_cert(
                    self.front_proxy_chain.clone(),
                    self.front_proxy_key.clone_key(),
                )
                .part(PART)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---- the stand-in gatekeeper --------------------------------------------------------------

/// How the stand-in checks that the client certificate comes from the request-header CA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainCheck {
    /// An ECDSA verification of the chain on every request, as the issue describes the work.
    EveryRequest,
    /// Verified on first sight of a certificate and remembered (keyed by its exact DER bytes,
    /// until it expires): the same decision, since a certificate's signature cannot change.
    OncePerCertificate,
}

/// BENCH STAND-IN, not the adapter's authentication: it does the per-request work the real
/// `Gatekeeper` must do for a front-proxied request, so the serve figure includes its cost until
/// the real one is wired in here. Per request: check that the presented chain comes from the
/// request-header CA (the handshake accepted either CA), check the proxy's CN, read the
/// `X-Remote-*` headers, and look the (user, groups, verb, resource) tuple up in an
/// in-memory authorisation cache (filled on a miss, as a SubjectAccessReview answer would be).
pub struct StandInGatekeeper {
    request_header_ca: Arc<dyn ClientCertVerifier>,
    allowed_names: Vec<String>,
    chain_check: ChainCheck,
    /// Leaf DER -> (CN, notAfter as unix seconds), for `OncePerCertificate`.
    verified: RwLock<HashMap<Vec<u8>, (String, i64)>>,
    cache: RwLock<HashMap<String, bool>>,
}

impl StandInGatekeeper {
    fn new(
        front_proxy_ca: CertificateDer<'static>,
        chain_check: ChainCheck,
    ) -> Result<Self, BenchError> {
        let mut roots = RootCertStore::empty();
        roots.add(front_proxy_ca).part(PART)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            hpa_bridge_sources::pki::crypto_provider(),
        )
        .build()
        .part(PART)?;
        Ok(StandInGatekeeper {
            request_header_ca: verifier,
            allowed_names: vec![FRONT_PROXY_CN.into()],
            chain_check,
            verified: RwLock::new(HashMap::new()),
            cache: RwLock::new(HashMap::new()),
        })
    }

    /// The proxy's CN if the chain verifies against the request-header CA.
    fn proxy_name(&self, chain: &[CertificateDer<'static>]) -> Option<String> {
        let (leaf, intermediates) = chain.split_first()?;
        let now = UnixTime::now();
        if self.chain_check == ChainCheck::OncePerCertificate {
            let known = self
                .verified
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(leaf.as_ref())
                .cloned();
            if let Some((cn, not_after)) = known {
                if (now.as_secs() as i64) < not_after {
                    return Some(cn);
                }
            }
        }
        self.request_header_ca
            .verify_client_cert(leaf, intermediates, now)
            .ok()?;
        let (_, cert) = x509_parser::parse_x509_certificate(leaf).ok()?;
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())?
            .to_owned();
        if self.chain_check == ChainCheck::OncePerCertificate {
            let not_after = cert.validity().not_after.timestamp();
            self.verified
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(leaf.as_ref().to_vec(), (cn.clone(), not_after));
        }
        Some(cn)
    }

    fn check(
        &self,
        req: &http::request::Parts,
        peer: &Peer,
        route: &Route,
    ) -> Result<(), StatusReason> {
        let unauthorized = || StatusReason::Unauthorized;
        let chain = peer.certificates.as_deref().ok_or_else(unauthorized)?;
        let cn = self.proxy_name(chain).ok_or_else(unauthorized)?;
        if !self.allowed_names.contains(&cn) {
            return Err(unauthorized());
        }
        let user = req
            .headers
            .get("x-remote-user")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(unauthorized)?;
        let mut key = String::with_capacity(128);
        key.push_str(user);
        for g in req.headers.get_all("x-remote-group") {
            key.push('\0');
            key.push_str(g.to_str().map_err(|_| unauthorized())?);
        }
        key.push_str("\0get\0");
        if let Route::ExternalMetric(ns, metric) = route {
            key.push_str(ns);
            key.push('\0');
            key.push_str(metric);
        }
        let cached = self
            .cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        let allowed = match cached {
            Some(a) => a,
            None => {
                let a = user == HPA_USER;
                self.cache
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, a);
                a
            }
        };
        if allowed {
            Ok(())
        } else {
            Err(StatusReason::Forbidden)
        }
    }
}

impl Gatekeeper for StandInGatekeeper {
    fn admit<'a>(
        &'a self,
        req: &'a http::request::Parts,
        peer: &'a Peer,
        route: &'a Route,
    ) -> Pin<Box<dyn Future<Output = Result<(), ApiResponse>> + Send + 'a>> {
        let verdict = self
            .check(req, peer, route)
            .map_err(|reason| status_response(reason, reason.as_str()));
        Box::pin(std::future::ready(verdict))
    }
}

// ---- servers --------------------------------------------------------------------------------

/// An adapter serving the `lobby` workload: two controllers (max 5) and six pods whose stateful
/// indices give a floor of 4, recorded straight into the store as a scrape would.
fn lobby_adapter() -> Result<Arc<Adapter>, BenchError> {
    // A long staleAfter keeps the recorded samples fresh for the whole run without a scraper.
    let config = Config::from_yaml("scrape:\n  staleAfter: 24h\n").part(PART)?;
    let engine = EngineBuilder::new(config, Arc::new(SystemClock))
        .build()
        .part(PART)?;
    let adapter = engine.adapter().clone();
    let store = engine.targets();
    let common = "hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",hpa_target_api_version=\"apps/v1\"";
    let mut pages: Vec<(String, String)> = vec![
        (
            "controller-0".into(),
            format!("hpa_expect_replicas{{{common},service_instance_id=\"lobby-0\"}} 5\n"),
        ),
        (
            "controller-1".into(),
            format!("hpa_expect_replicas{{{common},service_instance_id=\"lobby-1\"}} 3\n"),
        ),
    ];
    for i in 0..6 {
        let index = if i < 4 { i + 1 } else { 0 };
        pages.push((
            format!("lobby-{i}"),
            format!("hpa_stateful_index{{{common},service_instance_id=\"lobby-{i}\"}} {index}\n"),
        ));
    }
    let targets: Vec<ScrapeTarget> = pages
        .iter()
        .map(|(pod, _)| ScrapeTarget {
            format: Default::default(),
            id: TargetId(format!("default/{pod}").into()),
            url: format!("http://127.0.0.1:1/{pod}"),
            labels: [("namespace", "default"), ("pod", pod)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            workload: None,
        })
        .collect();
    store.set_targets(targets.clone());
    let now = hpa_bridge_rules::clock::Clock::now(&SystemClock);
    for (t, (_, page)) in targets.iter().zip(&pages) {
        let samples = exposition::parse_all(page.as_bytes()).part(PART)?;
        store.record_success(t, now, 1, samples);
    }
    Ok(adapter)
}

/// A server on its own thread and one-worker runtime, stopped when dropped.
pub struct ServerThread {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Each of the runtime's threads, as its task directory (`/proc/<pid>/task/<tid>`).
    threads: Arc<std::sync::Mutex<Vec<std::path::PathBuf>>>,
}

impl ServerThread {
    pub fn start<F, Fut>(name: &str, serve: F) -> Result<Self, BenchError>
    where
        F: FnOnce(TcpListener) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let threads: Arc<std::sync::Mutex<Vec<std::path::PathBuf>>> = Arc::default();
        let started = threads.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("bench-{name}"))
            .on_thread_start(move || {
                // `/proc/thread-self` names this thread as `<pid>/task/<tid>`.
                if let Ok(task) = std::fs::read_link("/proc/thread-self") {
                    let task = std::path::Path::new("/proc").join(task);
                    started.lock().unwrap_or_else(|e| e.into_inner()).push(task);
                }
            })
            .enable_all()
            .build()
            .part(PART)?;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").part(PART)?;
        std_listener.set_nonblocking(true).part(PART)?;
        let addr = std_listener.local_addr().part(PART)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = TcpListener::from_std(std_listener) else {
                    return;
                };
                tokio::select! {
                    _ = serve(listener) => {}
                    _ = stopped => {}
                }
            });
            runtime.shutdown_background();
        });
        Ok(ServerThread {
            addr,
            stop: Some(stop),
            thread: Some(thread),
            threads,
        })
    }

    /// Nanoseconds its runtime's threads have run on a CPU so far (the kernel's
    /// `schedstat`), or `None` when none of its threads could be found.
    pub fn cpu_ns(&self) -> Option<u64> {
        let threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        // A thread that has ended (a blocking-pool thread) no longer counts.
        (!threads.is_empty()).then(|| threads.iter().filter_map(|t| task_cpu_ns(t)).sum())
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The limit: hyper's HTTP/1.1 connection driver behind the same rustls acceptor, answering
/// every request with fixed bytes and headers.
async fn serve_baseline(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    response: Arc<(Bytes, http::HeaderMap)>,
) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let response = response.clone();
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = service_fn(move |_req: Request<Incoming>| {
                let mut resp = Response::new(Full::new(response.0.clone()));
                *resp.headers_mut() = response.1.clone();
                async move { Ok::<_, Infallible>(resp) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

// ---- the load generator -----------------------------------------------------------------

pub struct Load {
    requests: u64,
    elapsed: Duration,
    latencies_us: Vec<u32>,
    /// CPU time the server's runtime spent over the run, when measured.
    server_cpu_ns: Option<u64>,
}

pub struct Client {
    tls: Arc<rustls::ClientConfig>,
    /// Request paths, asked round-robin by each connection (from its own starting point).
    paths: Arc<Vec<String>>,
    /// Every response must have these bytes, when given; status 200 always, unless
    /// `refusals` allows the adapter's 503 too.
    expected_body: Option<Bytes>,
    refusals: bool,
}

impl Client {
    async fn connect(
        &self,
        addr: SocketAddr,
    ) -> Result<hyper::client::conn::http1::SendRequest<Empty<Bytes>>, String> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
        let stream = TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Ok(sender)
    }

    /// One request as kube-apiserver forwards the HPA's: the user and groups in headers.
    async fn get(
        sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
        addr: SocketAddr,
        path: &str,
    ) -> Result<(http::response::Parts, Bytes), String> {
        sender.ready().await.map_err(|e| e.to_string())?;
        let req = Request::get(path)
            .header(http::header::HOST, addr.to_string())
            .header(http::header::ACCEPT, "application/json")
            .header("x-remote-user", HPA_USER)
            .header("x-remote-group", "system:serviceaccounts")
            .header("x-remote-group", "system:serviceaccounts:kube-system")
            .header("x-remote-group", "system:authenticated")
            .body(Empty::new())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((parts, body))
    }

    /// `connections` keep-alive connections, each sending requests back to back for `duration`.
    async fn load(
        self: Arc<Self>,
        addr: SocketAddr,
        connections: usize,
        duration: Duration,
    ) -> Result<Load, String> {
        let mut senders = Vec::with_capacity(connections);
        for _ in 0..connections {
            senders.push(self.connect(addr).await?);
        }
        let started = Instant::now();
        let deadline = started + duration;
        let mut tasks = Vec::with_capacity(connections);
        for (c, mut sender) in senders.into_iter().enumerate() {
            let me = self.clone();
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(64 * 1024);
                let mut next = c;
                while Instant::now() < deadline {
                    let path = &me.paths[next % me.paths.len().max(1)];
                    next += 1;
                    let t0 = Instant::now();
                    let (parts, body) = Self::get(&mut sender, addr, path).await?;
                    let us = t0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    let refused =
                        me.refusals && parts.status == http::StatusCode::SERVICE_UNAVAILABLE;
                    if (parts.status != http::StatusCode::OK && !refused)
                        || me.expected_body.as_ref().is_some_and(|b| *b != body)
                    {
                        return Err(format!(
                            "unexpected response {}: {}",
                            parts.status,
                            String::from_utf8_lossy(&body)
                        ));
                    }
                    latencies.push(us);
                }
                Ok::<_, String>(latencies)
            }));
        }
        let mut latencies_us = Vec::new();
        for t in tasks {
            latencies_us.extend(t.await.map_err(|e| e.to_string())??);
        }
        Ok(Load {
            requests: latencies_us.len() as u64,
            elapsed: started.elapsed(),
            latencies_us,
            server_cpu_ns: None,
        })
    }
}

/// Runs the client on its own current-thread runtime (one core's worth of load generation).
pub fn run_client<T: Send + 'static>(
    f: impl Future<Output = Result<T, String>> + Send + 'static,
) -> Result<T, BenchError> {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(f)
    })
    .join()
    .map_err(|_| BenchError::part(PART, "load generator panicked"))?
    .part(PART)
}

pub fn figures(loads: &[Load]) -> LoadFigures {
    let mut all: Vec<u32> = loads
        .iter()
        .flat_map(|l| l.latencies_us.iter().copied())
        .collect();
    all.sort_unstable();
    let requests: u64 = loads.iter().map(|l| l.requests).sum();
    let seconds: f64 = loads.iter().map(|l| l.elapsed.as_secs_f64()).sum();
    let cpu_ns: Option<u64> = loads.iter().map(|l| l.server_cpu_ns).sum();
    LoadFigures {
        requests,
        seconds,
        requests_per_second: requests as f64 / seconds,
        p50_us: quantile(&all, 0.5),
        p99_us: quantile(&all, 0.99),
        p999_us: quantile(&all, 0.999),
        server_cpu_us_per_request: cpu_ns
            .filter(|_| requests > 0)
            .map(|ns| ns as f64 / 1000.0 / requests as f64),
    }
}

/// The HPA's request for `metric` of each of the workloads `w0..w<n>` (the bench exporter's
/// names).
pub fn workload_paths(metric: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|w| {
            format!(
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/{metric}?labelSelector=hpa_target_name%3Dw{w}"
            )
        })
        .collect()
}

/// The Object query of each of `n` workloads (StatefulSets `w0`, `w1`, ...).
pub fn object_paths(metric: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|w| {
            format!(
                "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/statefulsets.apps/w{w}/{metric}"
            )
        })
        .collect()
}

/// The adapter's own authentication: the trust store from CA files (as with
/// --requestheader-client-ca-file / --client-ca-file), its client-certificate verifier in the
/// handshake, and the real `AuthGate` per request. Authorization takes the always-allow-groups
/// path (no Kubernetes API here), which is a cheaper lookup than a warm SubjectAccessReview
/// cache; both are an in-memory check. Returns the gate and the TLS config to serve it with.
pub fn adapter_gate(
    pki: &Pki,
) -> Result<(Arc<dyn Gatekeeper>, Arc<rustls::ServerConfig>), BenchError> {
    let settings = auth::TrustSettings {
        requestheader_client_ca_file: Some(pki.front_proxy_ca_file.clone()),
        requestheader: auth::requestheader::RequestHeaderConfig {
            allowed_names: vec![FRONT_PROXY_CN.into()],
            ..Default::default()
        },
        client_ca_file: Some(pki.client_ca_file.clone()),
        lookup: None,
    };
    let trust = run_client(async move {
        auth::TrustStore::load(settings, false)
            .await
            .map_err(|e| e.to_string())
    })?;
    let verifier = trust.client_verifier();
    let gate = auth::AuthGate {
        authenticator: auth::Authenticator {
            trust,
            tokens: None,
        },
        authorizer: auth::Authorizer::new(
            None,
            vec!["system:serviceaccounts:kube-system".into()],
            Duration::from_secs(10),
            Duration::from_secs(5),
            Duration::from_secs(10),
        ),
    };
    let cert = ServingCert::from_files(&pki.server_cert, &pki.server_key).part(PART)?;
    let tls = Arc::new(tls::server_config(cert, Some(verifier)).part(PART)?);
    Ok((Arc::new(gate) as Arc<dyn Gatekeeper>, tls))
}

/// `handler` served by `serve_api` behind the adapter's own gate, on its own 1-worker runtime.
pub fn start_adapter(
    name: &str,
    pki: &Pki,
    handler: Arc<ApiHandler>,
) -> Result<ServerThread, BenchError> {
    let (gate, tls) = adapter_gate(pki)?;
    ServerThread::start(name, move |listener| {
        serve_api(listener, tls, handler, Some(gate))
    })
}

/// The bare server for the adapter at `adapter`: one request for `path` there gives the
/// bytes and headers the baseline returns for every request. Returns the baseline and the
/// adapter's body.
pub fn start_baseline(
    pki: &Pki,
    adapter: SocketAddr,
    path: &str,
) -> Result<(ServerThread, Bytes), BenchError> {
    let probe = Arc::new(Client {
        tls: pki.client_config()?,
        paths: Arc::new(Vec::new()),
        expected_body: None,
        refusals: false,
    });
    let path = path.to_owned();
    let (parts, body) = run_client(async move {
        let mut sender = probe.connect(adapter).await?;
        Client::get(&mut sender, adapter, &path).await
    })?;
    if parts.status != http::StatusCode::OK {
        return Err(BenchError::part(
            PART,
            format!(
                "the adapter answered {}: {}",
                parts.status,
                String::from_utf8_lossy(&body)
            ),
        ));
    }
    let mut headers = parts.headers.clone();
    headers.remove(http::header::DATE);
    let canned = Arc::new((body.clone(), headers));
    let tls = pki.server_config()?;
    let baseline = ServerThread::start("baseline", move |listener| {
        serve_baseline(listener, tls, canned)
    })?;
    Ok((baseline, body))
}

/// The same client against each server in turn: a warm-up each (it fills the authorisation
/// cache, the allocator and the connection state), then `repeats` alternating runs of `run`.
/// Figures in the order of `servers`.
pub fn measure_alternately(
    client: Arc<Client>,
    servers: &[&ServerThread],
    connections: usize,
    warmup: Duration,
    run: Duration,
    repeats: usize,
) -> Result<Vec<LoadFigures>, BenchError> {
    let measure = |server: &ServerThread, d: Duration| -> Result<Load, BenchError> {
        let c = client.clone();
        let addr = server.addr;
        let before = server.cpu_ns();
        let mut load = run_client(async move { c.load(addr, connections, d).await })?;
        load.server_cpu_ns = before
            .zip(server.cpu_ns())
            .map(|(b, a)| a.saturating_sub(b));
        Ok(load)
    };
    for server in servers {
        measure(server, warmup)?;
    }
    let mut runs: Vec<Vec<Load>> = servers.iter().map(|_| Vec::new()).collect();
    for _ in 0..repeats {
        for (server, loads) in servers.iter().zip(runs.iter_mut()) {
            loads.push(measure(server, run)?);
        }
    }
    Ok(runs.iter().map(|loads| figures(loads)).collect())
}

impl Client {
    pub fn new(
        pki: &Pki,
        paths: Vec<String>,
        expected_body: Option<Bytes>,
    ) -> Result<Self, BenchError> {
        Ok(Client {
            tls: pki.client_config()?,
            paths: Arc::new(paths),
            expected_body,
            refusals: false,
        })
    }

    /// The same, also accepting the adapter's refusal (503): an incomplete floor is an answer.
    pub fn accepting_refusals(mut self) -> Self {
        self.refusals = true;
        self
    }
}

pub fn run(plan: &Plan) -> Result<ServeResult, BenchError> {
    let pki = Pki::generate()?;
    let handler = Arc::new(ApiHandler::new(lobby_adapter()?));
    let adapter_server = start_adapter("adapter", &pki, handler.clone())?;
    // For comparison: the same request path with the chain re-verified on every request (the
    // cost the verdict memo in auth::trust removes).
    let every_server = {
        let gate: Arc<dyn Gatekeeper> = Arc::new(StandInGatekeeper::new(
            pki.front_proxy_ca.clone(),
            ChainCheck::EveryRequest,
        )?);
        let tls = pki.server_config()?;
        ServerThread::start("adapter-every", move |listener| {
            serve_api(listener, tls, handler, Some(gate))
        })?
    };
    // The baseline returns exactly what the adapter answers, headers included.
    let (baseline_server, body) = start_baseline(&pki, adapter_server.addr, PATH)?;
    let response_bytes = body.len();
    let client = Arc::new(Client::new(&pki, vec![PATH.into()], Some(body))?);
    let measured = measure_alternately(
        client,
        &[&baseline_server, &adapter_server, &every_server],
        plan.serve_connections,
        plan.serve_warmup,
        plan.serve_run,
        plan.serve_repeats,
    )?;
    drop(adapter_server);
    drop(every_server);
    drop(baseline_server);
    let [baseline, adapter, every]: [LoadFigures; 3] = measured
        .try_into()
        .map_err(|_| BenchError::part(PART, "expected three measurements"))?;
    Ok(ServeResult {
        path: PATH.into(),
        connections: plan.serve_connections,
        response_bytes,
        arrangement: arrangement(plan, plan.serve_run),
        gatekeeper: "the adapter's auth::AuthGate (front-proxy chain verified against the \
                     requestheader CA with a 30 s verdict memo, CN check, X-Remote-* headers, \
                     always-allow-groups authorization); the every-request variant is a stand-in \
                     that re-verifies the chain per request"
            .into(),
        throughput_ratio: adapter.requests_per_second / baseline.requests_per_second,
        p99_ratio: adapter.p99_us / baseline.p99_us.max(1.0),
        verify_every_request_throughput_ratio: every.requests_per_second
            / baseline.requests_per_second,
        verify_every_request_p99_ratio: every.p99_us / baseline.p99_us.max(1.0),
        adapter_verify_every_request: every,
        baseline,
        adapter,
    })
}

/// How servers and load generator share the cores, for the report.
pub fn arrangement(plan: &Plan, run: Duration) -> String {
    format!(
        "each server on a 1-worker tokio runtime, the load generator on a current-thread runtime; \
         {} alternating runs of {:?} each after a {:?} warm-up",
        plan.serve_repeats, run, plan.serve_warmup
    )
}
