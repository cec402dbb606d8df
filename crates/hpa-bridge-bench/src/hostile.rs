//! `hostile`: the HPA's request while hostile clients hold connections.
//!
//! The real binary is started as a child process (so its resident memory is its own), with the
//! default connection limits. Four keep-alive TLS connections from 127.0.0.1 measure the API's
//! latency alone and while 2,000 hostile connections from other loopback addresses are held:
//! a third idle after the TLS handshake, a third slowloris (a partial request head, one byte a
//! second), a third sending an unterminated 400 KB head. The two phases alternate three times
//! (the attack is started and stopped each cycle), so the machine's changing load falls on
//! both, and each p99 is taken over all of its phases' requests. A hostile connection the server
//! closes is opened again after a second, as a persistent attacker would. The first seconds of
//! each attack (its first wave of handshakes and oversized heads, before any address has struck
//! out) are measured apart from the held phase.
//!
//! `HPA_BRIDGE_BENCH_SERVER=/path/to/hpa-bridge` measures another build (for a before/after).

use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use super::figure::{Figure, Goal};
use super::{quantile, threads_cpu_time, BenchError, InPart};

const PART: &str = "hostile";
pub(super) const PATH: &str = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas?labelSelector=hpa_target_name%3Dlobby";
const BIG_HEAD: usize = 400 * 1024;
const LEGIT_CONNECTIONS: usize = 4;
/// How long a hostile slot waits before reconnecting after the server closed it.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);
/// How long a hostile slot waits for its connect before it gives up and tries again, as a
/// persistent attacker would when the server's kernel drops its handshakes.
const CONNECT_PATIENCE: Duration = Duration::from_secs(1);
const ATTACKER_THREAD: &str = "bench-attacker";

/// CPU seconds per second of `phase` spent by the server and by the attackers' thread.
#[derive(Clone, Copy, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuShare {
    pub server: f64,
    pub attackers: f64,
}

struct CpuClock {
    server_pid: u32,
    started: Instant,
    server: Duration,
    attackers: Duration,
}

impl CpuClock {
    fn start(server_pid: u32) -> Self {
        CpuClock {
            server_pid,
            started: Instant::now(),
            server: threads_cpu_time(server_pid, "").unwrap_or_default(),
            attackers: threads_cpu_time(std::process::id(), ATTACKER_THREAD).unwrap_or_default(),
        }
    }

    fn add_to(&self, share: &mut (CpuShare, f64)) {
        let server = threads_cpu_time(self.server_pid, "").unwrap_or_default();
        let attackers = threads_cpu_time(std::process::id(), ATTACKER_THREAD).unwrap_or_default();
        share.0.server += server.saturating_sub(self.server).as_secs_f64();
        share.0.attackers += attackers.saturating_sub(self.attackers).as_secs_f64();
        share.1 += self.started.elapsed().as_secs_f64();
    }
}

fn per_second((cpu, seconds): (CpuShare, f64)) -> CpuShare {
    let s = seconds.max(f64::MIN_POSITIVE);
    CpuShare {
        server: cpu.server / s,
        attackers: cpu.attackers / s,
    }
}

#[derive(Clone, Debug)]
pub struct HostilePlan {
    pub hostile: usize,
    /// How long each calm and each held phase measures.
    pub phase: Duration,
    /// How long the attack runs before its held phase is measured, so the first wave of
    /// handshakes and oversized heads is over (it is measured on its own, as it lands).
    pub landing: Duration,
    /// Loopback source addresses the hostile connections come from.
    pub sources: u8,
    /// Times the calm and attacked phases alternate.
    pub cycles: usize,
    /// What the hostile connections do.
    pub mix: AttackMix,
}

/// What the hostile connections do, slot by slot in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AttackMix {
    /// Idle after the TLS handshake, slowloris, and an unterminated 400 KB head: the 400 KB
    /// heads get 431 at once, so each address strikes out within the landing.
    Mixed,
    /// Idle and slowloris only: nothing strikes before the header timeout (10 s), so the held
    /// phase (which ends before it) measures the connections really held, up to the cap.
    IdleAndSlowloris,
}

impl AttackMix {
    fn kinds(self) -> usize {
        match self {
            AttackMix::Mixed => 3,
            AttackMix::IdleAndSlowloris => 2,
        }
    }

    fn label(self) -> &'static str {
        match self {
            AttackMix::Mixed => "idle/slowloris/400 KB-head",
            AttackMix::IdleAndSlowloris => "idle and slowloris (no 400 KB heads)",
        }
    }
}

impl HostilePlan {
    /// The same plan with another mix.
    pub fn with_mix(self, mix: AttackMix) -> Self {
        HostilePlan { mix, ..self }
    }

    pub fn new(quick: bool) -> Self {
        if quick {
            HostilePlan {
                hostile: 150,
                phase: Duration::from_millis(300),
                landing: Duration::from_millis(1500),
                sources: 3,
                cycles: 1,
                mix: AttackMix::Mixed,
            }
        } else {
            HostilePlan {
                hostile: 2000,
                phase: Duration::from_secs(3),
                landing: Duration::from_secs(3),
                sources: 40,
                cycles: 3,
                mix: AttackMix::Mixed,
            }
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostileResult {
    pub server: String,
    pub mix: AttackMix,
    pub hostile_connections: usize,
    /// Loopback addresses the hostile connections came from.
    pub sources: u8,
    /// Seconds each calm and each held phase measured, and the attack ran before its held phase.
    pub phase_seconds: f64,
    pub landing_seconds: f64,
    /// Requests measured: calm, as the attack landed, while it was held.
    pub calm_requests: usize,
    pub landing_requests: usize,
    pub held_requests: usize,
    pub p99_landing_us: f64,
    /// CPU seconds per second used by the server and by the attackers' thread, calm and held.
    pub calm_cpu: CpuShare,
    pub held_cpu: CpuShare,
    pub p50_alone_us: f64,
    pub p99_alone_us: f64,
    pub p50_hostile_us: f64,
    pub p99_hostile_us: f64,
    /// Requests of the measuring client that failed while the hostile connections were held.
    pub failed_requests: usize,
    /// Calm and attacked phases alternated this many times.
    pub cycles: usize,
    /// Each cycle's attacked p99 over its calm p99, to show the spread behind the pooled figure.
    pub cycle_p99_ratios: Vec<f64>,
    pub rss_idle_bytes: u64,
    /// The largest resident set sampled while the hostile connections were held.
    pub rss_hostile_bytes: u64,
    /// Two seconds after the hostile clients left.
    pub rss_after_bytes: u64,
    /// Hostile connection attempts the server closed (refused at accept or expired).
    pub hostile_closed: usize,
    /// Hostile connects that got no answer within [`CONNECT_PATIENCE`] and were tried again:
    /// the server's drop filter dropped them (or a full listen backlog did).
    pub hostile_dropped: usize,
    /// The most client addresses on the server's drop filter at the end of a held phase.
    pub clients_dropped: f64,
    /// The fewest and most connections the server held open at the start and end of the
    /// attacked phases (its `hpa_bridge_connections` gauge).
    pub held_during_attack: (f64, f64),
    /// Connections refused at accept because their address had struck out.
    pub refused_penalized: f64,
    /// Connections refused at accept by the global and per-client caps.
    pub refused_capped: f64,
    /// Times a hostile address struck out.
    pub clients_penalized: f64,
}

pub(super) struct Server {
    pub(super) child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> Result<u16, BenchError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .part(PART)?
        .local_addr()
        .part(PART)?
        .port())
}

fn rss(pid: u32) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// The server's self-metrics (plain HTTP on its loopback metrics port).
async fn server_metrics(metrics_port: u16) -> String {
    let addr = format!("127.0.0.1:{metrics_port}");
    let read = super::fleet::http_get(&addr, "/metrics");
    match tokio::time::timeout(Duration::from_secs(10), read).await {
        Ok(Ok(reply)) => String::from_utf8_lossy(&reply).into_owned(),
        _ => String::new(),
    }
}

/// The sum of the samples of `name` on the API listener whose labels contain `with`.
fn api_sample(metrics: &str, name: &str, with: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l.contains("listener=\"api\"") && l.contains(with))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        // An empty sum is -0.0.
        .fold(0.0, |a, b| a + b)
}

fn start_server(
    exe: &std::path::Path,
) -> Result<(Server, u16, u16, CertificateDer<'static>), BenchError> {
    start_server_with(exe, None)
}

/// The server with `config` (YAML) as its config file, if given; its API port, its metrics
/// port and its serving certificate.
pub(super) fn start_server_with(
    exe: &std::path::Path,
    config: Option<&str>,
) -> Result<(Server, u16, u16, CertificateDer<'static>), BenchError> {
    let generated =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .part(PART)?;
    let dir = std::env::temp_dir().join(format!("hpa-bridge-bench-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).part(PART)?;
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, generated.cert.pem()).part(PART)?;
    std::fs::write(&key, generated.signing_key.serialize_pem()).part(PART)?;
    let port = free_port()?;
    let metrics_port = free_port()?;
    let mut command = Command::new(exe);
    command.args(["serve", "--secure-port", &port.to_string()]);
    if let Some(config) = config {
        let path = dir.join("config.yaml");
        std::fs::write(&path, config).part(PART)?;
        command.arg("--config").arg(path);
    }
    let child = command
        .args([
            "--metrics-bind-address",
            &format!("127.0.0.1:{metrics_port}"),
        ])
        .arg("--tls-cert-file")
        .arg(&cert)
        .arg("--tls-private-key-file")
        .arg(&key)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| BenchError::part(PART, format!("starting {}: {e}", exe.display())))?;
    Ok((
        Server { child, dir },
        port,
        metrics_port,
        generated.cert.der().clone(),
    ))
}

pub(super) fn client_config(
    cert: CertificateDer<'static>,
) -> Result<Arc<rustls::ClientConfig>, BenchError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).part(PART)?;
    Ok(Arc::new(
        rustls::ClientConfig::builder_with_provider(hpa_bridge_sources::pki::crypto_provider())
            .with_safe_default_protocol_versions()
            .part(PART)?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    ))
}

pub(super) type Sender = hyper::client::conn::http1::SendRequest<http_body_util::Empty<Bytes>>;

pub(super) async fn legit_connection(
    port: u16,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<Sender, String> {
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let stream = tokio_rustls::TlsConnector::from(tls.clone())
        .connect(
            ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?,
            tcp,
        )
        .await
        .map_err(|e| e.to_string())?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn get(sender: &mut Sender, port: u16) -> Result<(), String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let req = http::Request::get(PATH)
        .header("host", format!("127.0.0.1:{port}"))
        .body(http_body_util::Empty::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    resp.into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Requests from every sender, one after another on each, for `phase`; latencies in µs,
/// sorted, and the failures. A sender whose connection the server closed (HTTP/1.1 keep-alive
/// idle) is reconnected.
async fn measure(
    senders: &mut Vec<Sender>,
    port: u16,
    tls: &Arc<rustls::ClientConfig>,
    phase: Duration,
) -> (Vec<u32>, usize) {
    let until = Instant::now() + phase;
    let mut tasks = Vec::new();
    let taken: Vec<Sender> = std::mem::take(senders);
    for mut s in taken {
        let tls = tls.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut failed = 0;
            while Instant::now() < until {
                let t = Instant::now();
                let mut r = get(&mut s, port).await;
                if r.is_err() {
                    if let Ok(fresh) = legit_connection(port, &tls).await {
                        s = fresh;
                        r = get(&mut s, port).await;
                    }
                }
                match r {
                    Ok(()) => lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32),
                    Err(_) => failed += 1,
                }
            }
            (lat, failed, s)
        }));
    }
    let mut all = Vec::new();
    let mut failed = 0;
    for t in tasks {
        if let Ok((lat, f, s)) = t.await {
            all.extend(lat);
            failed += f;
            senders.push(s);
        }
    }
    all.sort_unstable();
    (all, failed)
}

/// What the hostile slots saw, over the whole part.
#[derive(Default)]
struct AttackTally {
    /// Connections the server closed or refused.
    closed: AtomicUsize,
    /// Connects with no answer within [`CONNECT_PATIENCE`].
    dropped: AtomicUsize,
}

/// One hostile client slot: connect, misbehave, and when the server closes (or the connect
/// gets no answer), wait and try again until the attack stops.
async fn hostile_slot(
    kind: usize,
    source: IpAddr,
    to: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    tally: Arc<AttackTally>,
    opened: Arc<AtomicUsize>,
) {
    let mut counted = false;
    while !*stop.borrow() {
        let attempt = async {
            let socket = TcpSocket::new_v4().ok()?;
            socket.bind(SocketAddr::new(source, 0)).ok()?;
            let tcp = match tokio::time::timeout(CONNECT_PATIENCE, socket.connect(to)).await {
                Ok(connected) => connected.ok()?,
                Err(_) => return Some(false),
            };
            let mut stream = tokio_rustls::TlsConnector::from(tls.clone())
                .connect(ServerName::try_from("127.0.0.1").ok()?, tcp)
                .await
                .ok()?;
            if !counted {
                counted = true;
                opened.fetch_add(1, Ordering::Relaxed);
            }
            match kind {
                0 => {
                    // Idle after the handshake: read until the server closes.
                    let mut buf = [0u8; 64];
                    let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await;
                }
                1 => {
                    // Slowloris: a head that never ends, one byte a second.
                    stream
                        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                        .await
                        .ok()?;
                    loop {
                        stream.write_all(b"a").await.ok()?;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                _ => {
                    // An unterminated 400 KB head, then silence.
                    let mut head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n".to_vec();
                    while head.len() < BIG_HEAD {
                        head.extend_from_slice(
                            b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
                        );
                    }
                    stream.write_all(&head).await.ok()?;
                    let mut buf = [0u8; 512];
                    while tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
                        .await
                        .ok()?
                        > 0
                    {}
                }
            }
            Some(true)
        };
        let held = tokio::select! {
            a = attempt => a,
            // Woken once when the attack stops: the harness adds no polling of its own to the
            // machine the server shares.
            _ = stop.wait_for(|stopped| *stopped) => return,
        };
        // Some(false): the connect got no answer. Otherwise the server closed or refused it.
        let counter = match held {
            Some(false) => &tally.dropped,
            _ => &tally.closed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

/// The server binary to measure: the `hpa-bridge` built beside `bench_exe`, unless
/// `HPA_BRIDGE_BENCH_SERVER` names another build.
pub(super) fn server_exe(bench_exe: &std::path::Path) -> Result<std::path::PathBuf, BenchError> {
    let exe = match std::env::var_os("HPA_BRIDGE_BENCH_SERVER") {
        Some(path) => std::path::PathBuf::from(path),
        None => bench_exe.with_file_name(format!("hpa-bridge{}", std::env::consts::EXE_SUFFIX)),
    };
    if !exe.is_file() {
        return Err(BenchError::part(PART, format!(
            "no server binary at {} (build it with `cargo build --release --bin hpa-bridge`, or set HPA_BRIDGE_BENCH_SERVER)",
            exe.display()
        )));
    }
    Ok(exe)
}

/// `bench_exe` is this bench binary; the server measured is the `hpa-bridge` built beside it
/// (cargo puts every binary of the package in one directory), unless
/// `HPA_BRIDGE_BENCH_SERVER` names another build.
pub fn run(plan: &HostilePlan, bench_exe: &std::path::Path) -> Result<HostileResult, BenchError> {
    let exe = server_exe(bench_exe)?;
    let (server, port, metrics_port, cert) = start_server(&exe)?;
    let pid = server.child.id();
    let tls = client_config(cert)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .part(PART)?;
    // The attackers run on their own thread, so the measuring client's tasks never queue
    // behind theirs: what is measured is the server's delay.
    let attackers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(ATTACKER_THREAD)
        .enable_all()
        .build()
        .part(PART)?;
    let attack = attackers.handle().clone();
    let result = runtime.block_on(async {
        // Up and answering.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut senders = loop {
            let mut senders = Vec::new();
            for _ in 0..LEGIT_CONNECTIONS {
                if let Ok(s) = legit_connection(port, &tls).await {
                    senders.push(s);
                }
            }
            if senders.len() == LEGIT_CONNECTIONS {
                break senders;
            }
            if Instant::now() > deadline {
                return Err(BenchError::part(
                    PART,
                    "the server never accepted connections",
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        measure(&mut senders, port, &tls, plan.phase / 4).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_idle = rss(pid);
        let to = SocketAddr::from(([127, 0, 0, 1], port));
        let tally = Arc::new(AttackTally::default());
        let closed = &tally.closed;
        let mut on_drop_filter: f64 = 0.0;
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(rss_idle));
        let mut alone = Vec::new();
        let mut hostile = Vec::new();
        let mut failed = 0;
        let mut cycle_ratios = Vec::new();
        // Alone and under attack alternate, so that drift in the machine's load over the run
        // falls on both alike; the p99s are taken over all cycles' requests.
        let mut held = Vec::new();
        let mut landings = Vec::new();
        let (mut calm_cpu, mut held_cpu) = ((CpuShare::default(), 0.0), (CpuShare::default(), 0.0));
        for cycle in 0..plan.cycles.max(1) {
            let clock = CpuClock::start(pid);
            let (calm, _) = measure(&mut senders, port, &tls, plan.phase).await;
            clock.add_to(&mut calm_cpu);
            let (stop_attack, stop) = tokio::sync::watch::channel(false);
            let sampling = Arc::new(AtomicBool::new(true));
            let opened = Arc::new(AtomicUsize::new(0));
            let closed_before = closed.load(Ordering::Relaxed);
            let dropped_before = tally.dropped.load(Ordering::Relaxed);
            let mut slots = Vec::new();
            for i in 0..plan.hostile {
                // Each cycle's attack comes from addresses the server has not seen yet, so
                // its first wave is handshaken in full whatever the earlier cycles earned.
                let source = IpAddr::from([
                    127,
                    0,
                    1 + (cycle % 250) as u8,
                    1 + (i % plan.sources as usize) as u8,
                ]);
                slots.push(attack.spawn(hostile_slot(
                    i % plan.mix.kinds(),
                    source,
                    to,
                    tls.clone(),
                    stop.clone(),
                    tally.clone(),
                    opened.clone(),
                )));
            }
            // Let the attack settle: every slot has tried at least once.
            let settle = Instant::now() + Duration::from_secs(20);
            while opened.load(Ordering::Relaxed) + closed.load(Ordering::Relaxed) - closed_before
                + tally.dropped.load(Ordering::Relaxed)
                - dropped_before
                < plan.hostile
                && Instant::now() < settle
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak.fetch_max(rss(pid), Ordering::Relaxed);
            let sampler = {
                let (peak, sampling) = (peak.clone(), sampling.clone());
                tokio::spawn(async move {
                    while sampling.load(Ordering::Relaxed) {
                        peak.fetch_max(rss(pid), Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                })
            };
            // As the attack lands: its first wave's handshakes and oversized heads.
            let (landing, landing_failed) = measure(&mut senders, port, &tls, plan.landing).await;
            landings.extend(landing);
            let before = server_metrics(metrics_port).await;
            // Held: what the attack costs while it goes on.
            let clock = CpuClock::start(pid);
            let (attacked, f) = measure(&mut senders, port, &tls, plan.phase).await;
            clock.add_to(&mut held_cpu);
            let f = f + landing_failed;
            let after = server_metrics(metrics_port).await;
            // Connections the server held open over the attacked phase: the attack's that it
            // admitted, plus the four measuring ones.
            for m in [&before, &after] {
                held.push(api_sample(m, "hpa_bridge_connections{", ""));
            }
            on_drop_filter =
                on_drop_filter.max(api_sample(&after, "hpa_bridge_clients_dropped{", ""));
            failed += f;
            peak.fetch_max(rss(pid), Ordering::Relaxed);
            stop_attack.send_replace(true);
            sampling.store(false, Ordering::Relaxed);
            for s in slots {
                let _ = s.await;
            }
            let _ = sampler.await;
            cycle_ratios.push(quantile(&attacked, 0.99) / quantile(&calm, 0.99).max(1.0));
            alone.extend(calm);
            hostile.extend(attacked);
            // The server closes what the attackers left; the next calm phase starts after.
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        alone.sort_unstable();
        hostile.sort_unstable();
        landings.sort_unstable();
        let metrics = server_metrics(metrics_port).await;
        Ok(HostileResult {
            held_during_attack: (
                held.iter().copied().fold(f64::INFINITY, f64::min),
                held.iter().copied().fold(0.0, f64::max),
            ),
            refused_penalized: api_sample(
                &metrics,
                "hpa_bridge_connections_refused_total",
                "reason=\"penalized\"",
            ),
            refused_capped: api_sample(
                &metrics,
                "hpa_bridge_connections_refused_total",
                "reason=\"max-connections",
            ),
            clients_penalized: api_sample(&metrics, "hpa_bridge_clients_penalized_total", ""),
            server: exe.display().to_string(),
            mix: plan.mix,
            hostile_connections: plan.hostile,
            sources: plan.sources,
            calm_cpu: per_second(calm_cpu),
            held_cpu: per_second(held_cpu),
            phase_seconds: plan.phase.as_secs_f64(),
            landing_seconds: plan.landing.as_secs_f64(),
            calm_requests: alone.len(),
            landing_requests: landings.len(),
            held_requests: hostile.len(),
            p99_landing_us: quantile(&landings, 0.99),
            p50_alone_us: quantile(&alone, 0.5),
            p99_alone_us: quantile(&alone, 0.99),
            p50_hostile_us: quantile(&hostile, 0.5),
            p99_hostile_us: quantile(&hostile, 0.99),
            failed_requests: failed,
            cycles: cycle_ratios.len(),
            cycle_p99_ratios: cycle_ratios,
            rss_idle_bytes: rss_idle,
            rss_hostile_bytes: peak.load(Ordering::Relaxed),
            rss_after_bytes: rss(pid),
            hostile_closed: closed.load(Ordering::Relaxed),
            hostile_dropped: tally.dropped.load(Ordering::Relaxed),
            clients_dropped: on_drop_filter,
        })
    });
    drop(server);
    attackers.shutdown_background();
    result
}

/// The report's rows for this part.
pub fn figures(h: &HostileResult) -> Vec<Figure> {
    const MIB: f64 = 1024.0 * 1024.0;
    let n = h.hostile_connections;
    let label = h.mix.label();
    let above = h.rss_hostile_bytes.saturating_sub(h.rss_idle_bytes) as f64 / MIB;
    // The mixed attack's rows carry the plain names, so reports compare across runs; the
    // other mix names itself.
    let (prefix, landing) = match h.mix {
        AttackMix::Mixed => (
            "Hostile".to_string(),
            "first wave of handshakes and heads".to_string(),
        ),
        AttackMix::IdleAndSlowloris => (format!("Hostile, {label}"), "first wave".to_string()),
    };
    vec![
        Figure::new(
            "hostile",
            format!("Hostile: API p99 with {n} {label} connections held (vs none)"),
            "µs",
        )
        .compare(h.p99_alone_us, h.p99_hostile_us, Some(Goal::AtMost(1.5))),
        Figure::new(
            "hostile",
            format!("{prefix}: API p99 as the {n} connections land ({landing}; vs none)"),
            "µs",
        )
        .compare(h.p99_alone_us, h.p99_landing_us, None),
        // The goal is < 64 MiB above idle: compared against idle + 64 MiB, the ratio is < 1.
        Figure::new(
            "hostile",
            format!(
                "{prefix}: resident memory with {n} hostile connections held (vs idle + 64 MiB)"
            ),
            "MiB",
        )
        .compare(
            h.rss_idle_bytes as f64 / MIB + 64.0,
            h.rss_hostile_bytes as f64 / MIB,
            Some(Goal::Below(1.0)),
        ),
        Figure::new(
            "hostile",
            format!("{prefix}: resident memory above idle with {n} hostile connections held"),
            "MiB",
        )
        .value(above),
        Figure::new(
            "hostile",
            format!("{prefix}: resident memory 2 s after the hostile clients left, above idle"),
            "MiB",
        )
        .value(h.rss_after_bytes.saturating_sub(h.rss_idle_bytes) as f64 / MIB),
        Figure::new(
            "hostile",
            format!("{prefix}: measuring client's requests failed while under attack"),
            "requests",
        )
        .value(h.failed_requests as f64),
    ]
}

/// The report's paragraph on how the part was measured.
pub fn note(h: &HostileResult) -> String {
    let ratios: Vec<String> = h
        .cycle_p99_ratios
        .iter()
        .map(|r| format!("{r:.2}"))
        .collect();
    format!(
        "**Hostile connections ({}).** The release `hpa-bridge serve` as a child process with its default \
         connection limits; four keep-alive TLS connections from 127.0.0.1 ask `hpa_expect_replicas`. \
         {} hostile connections from {} other loopback addresses ({}; each reconnects a second after the \
         server closes it) run on their own thread. Calm and attacked phases alternated {} times (the \
         attack is started and stopped every cycle). Each cycle measures {:.1} s calm; then starts the \
         attack, waits until every hostile slot has connected or been refused once, and measures the \
         landing for {:.1} s (the first wave's handshakes and 400 KB heads; its own row, no goal); then \
         measures {:.1} s with the attack held. Requests: {} calm, {} landing, {} held; the p99s are \
         over all of a kind's requests. Per cycle, held p99 / calm p99: {}. Attack connections the \
         server closed: {}. Each cycle's attack comes from {} loopback addresses the server has not \
         seen before. The server held {:.0} to {:.0} connections open at the start and end of the \
         held phases; it refused {:.0} connections at accept by its caps and {:.0} from \
         addresses that had struck out ({:.0} addresses penalized; `--client-penalty-strikes`). \
         Its kernel dropped the handshakes of up to {:.0} penalized addresses at once (its drop \
         filter, `--client-penalty-kernel-drop`): {} hostile connects got no answer within {:.0} s \
         and were tried again. \
         CPU seconds per second (all of the server's threads; the attackers' thread): calm {:.2} and \
         {:.2}, held {:.2} and {:.2}; the measuring client and the attackers share the machine's \
         two cores with the server.\n",
        h.mix.label(),
        h.hostile_connections,
        h.sources,
        match h.mix {
            AttackMix::Mixed => "a third idle after the TLS handshake, a third slowloris, a third an \
                                 unterminated 400 KB head",
            AttackMix::IdleAndSlowloris => "half idle after the TLS handshake, half slowloris; none \
                                            strikes before the 10 s header timeout, which falls after \
                                            the held phase, so the server holds them up to its caps",
        },
        h.cycles,
        h.phase_seconds,
        h.landing_seconds,
        h.phase_seconds,
        h.calm_requests,
        h.landing_requests,
        h.held_requests,
        ratios.join(", "),
        h.hostile_closed,
        h.sources,
        h.held_during_attack.0,
        h.held_during_attack.1,
        h.refused_capped,
        h.refused_penalized,
        h.clients_penalized,
        h.clients_dropped,
        h.hostile_dropped,
        CONNECT_PATIENCE.as_secs_f64(),
        h.calm_cpu.server,
        h.calm_cpu.attackers,
        h.held_cpu.server,
        h.held_cpu.attackers
    )
}
