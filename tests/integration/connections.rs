//! Hostile clients against the real binary: the connection caps, the header
//! and handshake timeouts and the request-head size cap, on the API port (TLS) and the metrics
//! port (plain HTTP). Assertions are about what the server did (closed, refused, answered 431,
//! counted), never about how fast.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// A test bound: the test fails instead of hanging. Never a claim about speed.
const PATIENCE: Duration = Duration::from_secs(60);

async fn connect_from(source: IpAddr, to: SocketAddr) -> TcpStream {
    try_connect_from(source, to).await.unwrap()
}

/// A connection the server refuses at accept: it closes it with a reset at once, which the
/// client sees as a failed connect or as a stream closed before anything was sent.
async fn refused(source: IpAddr, to: SocketAddr) -> bool {
    match try_connect_from(source, to).await {
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
            true
        }
        Ok(mut extra) => until_closed(&mut extra).await.is_empty(),
    }
}

fn hostile_source() -> IpAddr {
    // Another loopback address: the readiness probes from 127.0.0.1 are a different client.
    IpAddr::from([127, 0, 0, 2])
}

async fn tls(
    adapter: &AdapterProcess,
    tcp: TcpStream,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    adapter
        .pki
        .connector(&[])
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap()
}

/// One strike against `from`: a TLS connection to `to` whose request head is too large,
/// answered 431 or closed.
async fn strike(adapter: &AdapterProcess, from: IpAddr, to: SocketAddr) {
    let s = tls(adapter, connect_from(from, to).await).await;
    let got = send_head(s, huge_head("/healthz")).await;
    assert!(
        got.is_empty() || got.starts_with(b"HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

/// Read until the server closes; what it sent before. A reset counts as closed.
async fn until_closed<S: AsyncRead + Unpin>(stream: &mut S) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(PATIENCE, read_all)
        .await
        .expect("the server never closed the connection");
    got
}

/// Whether the server still holds the connection open after `wait`.
async fn still_open<S: AsyncRead + Unpin>(stream: &mut S, wait: Duration) -> bool {
    let mut buf = [0u8; 1];
    tokio::time::timeout(wait, stream.read(&mut buf))
        .await
        .is_err()
}

fn counter(metrics: &str, name: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|lab| l.contains(lab)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Wait until the server reports no open connection on the API listener.
async fn no_open_api_connections(adapter: &AdapterProcess) {
    let settled = async {
        loop {
            let (_, m) = adapter.plain_get("/metrics").await;
            if counter(&m, "hpa_bridge_connections{", &["listener=\"api\""]) == 0.0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(PATIENCE, settled)
        .await
        .expect("the readiness probes' connections were never closed");
}

fn api_addr(a: &AdapterProcess) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], a.port))
}

fn metrics_addr(a: &AdapterProcess) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], a.metrics_port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_over_the_per_client_cap_is_closed_and_counted() {
    let adapter =
        AdapterProcess::start_with(&fast_config(&[]), &["--max-connections-per-client", "3"]).await;
    for (addr, listener) in [
        (api_addr(&adapter), "api"),
        (metrics_addr(&adapter), "metrics"),
    ] {
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(connect_from(hostile_source(), addr).await);
        }
        assert!(
            refused(hostile_source(), addr).await,
            "the refused connection got an answer"
        );
        for c in &mut held {
            assert!(
                still_open(c, Duration::from_millis(200)).await,
                "{listener}: an admitted connection was closed"
            );
        }
        // Another client is unaffected by this one's cap.
        let (code, _) = adapter.plain_get("/metrics").await;
        assert_eq!(code, 200);
        let (code, _) = adapter.get_anonymous("/healthz").await.unwrap();
        assert_eq!(code, 200);
        // A freed slot admits the client again.
        drop(held.pop());
        let reached = async {
            loop {
                if let Ok(mut again) = try_connect_from(hostile_source(), addr).await {
                    if still_open(&mut again, Duration::from_millis(300)).await {
                        return;
                    }
                }
            }
        };
        tokio::time::timeout(PATIENCE, reached)
            .await
            .expect("the freed slot was never given back");
        let (_, m) = adapter.plain_get("/metrics").await;
        assert!(
            counter(
                &m,
                "hpa_bridge_connections_refused_total",
                &[
                    &format!("listener=\"{listener}\""),
                    "reason=\"max-connections-per-client\""
                ]
            ) >= 1.0,
            "{m}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_cap_refuses_every_client() {
    let adapter = AdapterProcess::start_with(&fast_config(&[]), &["--max-connections", "4"]).await;
    let addr = api_addr(&adapter);
    // The readiness probes' connections count against the cap until the server sees them
    // closed; hold the cap only once none is left, or the fourth held connection is refused.
    no_open_api_connections(&adapter).await;
    let mut held = Vec::new();
    for i in 0..4u8 {
        held.push(connect_from(IpAddr::from([127, 0, 0, 10 + i]), addr).await);
    }
    assert!(refused(IpAddr::from([127, 0, 0, 20]), addr).await);
    let (_, m) = adapter.plain_get("/metrics").await;
    assert!(
        counter(
            &m,
            "hpa_bridge_connections_refused_total",
            &["listener=\"api\"", "reason=\"max-connections\""]
        ) >= 1.0,
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_slow_clients_are_closed_after_the_header_timeout() {
    let adapter =
        AdapterProcess::start_with(&fast_config(&[]), &["--request-header-timeout", "1s"]).await;
    // No TLS handshake at all.
    let mut silent = connect_from(hostile_source(), api_addr(&adapter)).await;
    // A TLS session that never finishes its request head (slowloris).
    let mut slow_tls = tls(
        &adapter,
        connect_from(hostile_source(), api_addr(&adapter)).await,
    )
    .await;
    slow_tls
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    slow_tls.flush().await.unwrap();
    // The same on the plain metrics port, one byte after another.
    let mut slow_plain = connect_from(hostile_source(), metrics_addr(&adapter)).await;
    slow_plain
        .write_all(b"GET /metrics HTTP/1.1\r\n")
        .await
        .unwrap();
    // A keep-alive connection that sent one request and then nothing.
    let mut kept = connect_from(hostile_source(), metrics_addr(&adapter)).await;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();

    until_closed(&mut silent).await;
    until_closed(&mut slow_tls).await;
    let trickle = async {
        // Keep trickling: bytes that never complete the head do not extend the deadline.
        for _ in 0..600 {
            if slow_plain.write_all(b"X").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(PATIENCE, trickle).await.ok();
    until_closed(&mut slow_plain).await;
    let answer = until_closed(&mut kept).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    let (_, m) = adapter.plain_get("/metrics").await;
    assert!(
        counter(
            &m,
            "hpa_bridge_connections_expired_total",
            &["listener=\"api\""]
        ) >= 2.0,
        "{m}"
    );
    // The server is still serving.
    let (code, _) = adapter.get_anonymous("/healthz").await.unwrap();
    assert_eq!(code, 200);
}

/// Send `head`, read what comes back; the write may fail once the server closes.
async fn send_head<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, head: Vec<u8>) -> Vec<u8> {
    let (mut r, mut w) = tokio::io::split(&mut stream);
    let write = async move {
        let _ = w.write_all(&head).await;
        let _ = w.flush().await;
    };
    let read = until_closed(&mut r);
    let ((), got) = tokio::join!(write, read);
    got
}

fn huge_head(path: &str) -> Vec<u8> {
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: x\r\n").into_bytes();
    for i in 0..1024 {
        head.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "a".repeat(1000)).as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_megabyte_head_is_refused_with_431() {
    let adapter = AdapterProcess::start_with(&fast_config(&[]), &[]).await;
    let head = huge_head("/metrics");
    assert!(head.len() > 1_000_000);
    let plain = send_head(
        connect_from(hostile_source(), metrics_addr(&adapter)).await,
        head.clone(),
    )
    .await;
    let tls_stream = tls(
        &adapter,
        connect_from(hostile_source(), api_addr(&adapter)).await,
    )
    .await;
    let secure = send_head(tls_stream, huge_head("/healthz")).await;
    for (port, got) in [("metrics", plain), ("api", secure)] {
        // The server answers 431 and closes; a reset racing the answer may swallow it, but
        // never may the request be served.
        let text = String::from_utf8_lossy(&got);
        assert!(
            got.is_empty() || text.starts_with("HTTP/1.1 431"),
            "{port}: {text}"
        );
    }
    // A head under the cap is still served.
    let mut ok = connect_from(hostile_source(), metrics_addr(&adapter)).await;
    let mut head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".to_vec();
    head.extend_from_slice(format!("X-Filler: {}\r\n\r\n", "a".repeat(16_000)).as_bytes());
    ok.write_all(&head).await.unwrap();
    let got = until_closed(&mut ok).await;
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

async fn h2_sender(
    adapter: &AdapterProcess,
) -> hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>> {
    let tcp = TcpStream::connect(api_addr(adapter)).await.unwrap();
    let stream = adapter
        .pki
        .connector(&[b"h2"])
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    sender
}

/// hyper's HTTP/2 client is strict: DATA on a HEAD answer fails the body with an
/// InvalidBodyLength-style error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_over_http2_has_no_body() {
    use http_body_util::BodyExt;
    let adapter = AdapterProcess::start_with(&fast_config(&[]), &[]).await;
    let mut sender = h2_sender(&adapter).await;
    for path in [
        "/healthz",
        "/apis/external.metrics.k8s.io/v1beta1",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas",
        "/no/such/path",
    ] {
        let get = sender
            .send_request(
                http::Request::get(format!("https://127.0.0.1{path}"))
                    .body(http_body_util::Empty::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        let get_code = get.status();
        let get_body = get.into_body().collect().await.unwrap().to_bytes();
        assert!(!get_body.is_empty(), "GET {path} has a body");

        let head = sender
            .send_request(
                http::Request::head(format!("https://127.0.0.1{path}"))
                    .body(http_body_util::Empty::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(head.status(), get_code, "HEAD {path}");
        let body = head
            .into_body()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("HEAD {path}: {e}"))
            .to_bytes();
        assert!(body.is_empty(), "HEAD {path} sent {body:?}");
    }
}

/// What became of a new connection from a client address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// The TLS handshake completed.
    Served,
    /// Closed or reset at accept, before any TLS work.
    Refused,
    /// The kernel dropped the handshake's segments (the listener's drop filter): the connect
    /// never completed.
    Dropped,
}

/// A loopback handshake the kernel does not drop completes within this, whatever the load:
/// it needs no work from the process, only from the kernel.
const DROPPED_AFTER: Duration = Duration::from_secs(2);

/// A TLS handshake with a server that answers completes well within this; the test only
/// waits this long for one whose segments the kernel drops.
const HANDSHAKE_DROPPED_AFTER: Duration = Duration::from_secs(10);

/// The API port at the loopback address of `source`'s family: a dual-stack listener is
/// reached over IPv4 from an IPv4 source.
fn api_addr_for(adapter: &AdapterProcess, source: IpAddr) -> SocketAddr {
    match source {
        IpAddr::V4(_) => api_addr(adapter),
        IpAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, adapter.port)),
    }
}

async fn fate(adapter: &AdapterProcess, source: IpAddr) -> Fate {
    let to = api_addr_for(adapter, source);
    let tcp = match tokio::time::timeout(DROPPED_AFTER, try_connect_from(source, to)).await {
        Err(_) => return Fate::Dropped,
        Ok(Err(_)) => return Fate::Refused,
        Ok(Ok(tcp)) => tcp,
    };
    let handshake = adapter
        .pki
        .connector(&[])
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp);
    // A handshake whose SYN passed just before the filter listed its address, and whose last
    // ACK was then dropped, looks connected to the client while the kernel drops its data.
    match tokio::time::timeout(HANDSHAKE_DROPPED_AFTER, handshake).await {
        Ok(Ok(_)) => Fate::Served,
        Ok(Err(_)) => Fate::Refused,
        Err(_) => Fate::Dropped,
    }
}

/// Waits until new connections from `source` meet `expected`; fails with `what` after PATIENCE.
async fn eventually(adapter: &AdapterProcess, source: IpAddr, expected: Fate, what: &str) {
    let reached = async {
        while fate(adapter, source).await != expected {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(PATIENCE, reached).await.expect(what);
}

/// An address whose connections keep sending oversized heads strikes out. Its
/// connection that never sent a request is closed, other clients are served as before, and
/// its new connections cost the server nothing: the kernel drops their segments before accept
/// (the listener's drop filter), or, with `--client-penalty-kernel-drop=false`, the server
/// refuses them at accept, before any TLS work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_keeps_misbehaving_is_kept_out_and_loses_its_idle_connections() {
    for (kernel_drop, expected) in [("true", Fate::Dropped), ("false", Fate::Refused)] {
        misbehave_until_penalized(kernel_drop, expected).await;
    }
}

/// Two strikes keep an address out for ten minutes, by the kernel filter or at accept.
fn penalty_flags(kernel_drop: &str) -> [&str; 6] {
    [
        "--client-penalty-strikes",
        "2",
        "--client-penalty",
        "10m",
        "--client-penalty-kernel-drop",
        kernel_drop,
    ]
}

async fn misbehave_until_penalized(kernel_drop: &str, expected: Fate) {
    let adapter = AdapterProcess::start_with(&fast_config(&[]), &penalty_flags(kernel_drop)).await;
    let offender = IpAddr::from([127, 0, 0, 3]);
    let bystander = IpAddr::from([127, 0, 0, 4]);
    // Held first: a TLS session that has not sent a request yet.
    let mut held = tls(&adapter, connect_from(offender, api_addr(&adapter)).await).await;
    // One strike is not enough.
    strike(&adapter, offender, api_addr(&adapter)).await;
    assert!(
        still_open(&mut held, Duration::from_millis(300)).await,
        "one strike closed the held connection"
    );
    assert_eq!(fate(&adapter, offender).await, Fate::Served);
    strike(&adapter, offender, api_addr(&adapter)).await;
    // Struck out: the held connection is closed without an answer...
    let sent = until_closed(&mut held).await;
    assert!(sent.is_empty(), "the held connection got {sent:?}");
    // ...and new connections are dropped or refused, before the TLS handshake.
    eventually(
        &adapter,
        offender,
        expected,
        "the offender was never kept out",
    )
    .await;
    assert_eq!(fate(&adapter, offender).await, expected);
    // Other clients are unaffected.
    assert_eq!(fate(&adapter, bystander).await, Fate::Served);
    let (code, _) = adapter.get_anonymous("/healthz").await.unwrap();
    assert_eq!(code, 200);
    let (_, m) = adapter.plain_get("/metrics").await;
    for (name, labels) in [
        (
            "hpa_bridge_clients_penalized_total",
            ["listener=\"api\"", "reason=\"head-too-large\""],
        ),
        (
            "hpa_bridge_connections_expired_total",
            ["listener=\"api\"", "reason=\"penalized\""],
        ),
    ] {
        assert!(counter(&m, name, &labels) >= 1.0, "{name}: {m}");
    }
    assert_eq!(
        counter(&m, "hpa_bridge_clients_penalized_total", &[]),
        1.0,
        "{m}"
    );
    let dropped = counter(&m, "hpa_bridge_clients_dropped{", &["listener=\"api\""]);
    match expected {
        Fate::Dropped => assert_eq!(dropped, 1.0, "{m}"),
        _ => {
            assert_eq!(dropped, 0.0, "{m}");
            let refused = counter(
                &m,
                "hpa_bridge_connections_refused_total",
                &["listener=\"api\"", "reason=\"penalized\""],
            );
            assert!(refused >= 1.0, "{m}");
        }
    }
    assert!(
        adapter
            .log()
            .contains("refusing the client's connections after repeated misbehaviour"),
        "{}",
        adapter.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn penalties_can_be_turned_off() {
    let adapter =
        AdapterProcess::start_with(&fast_config(&[]), &["--client-penalty-strikes", "0"]).await;
    let offender = IpAddr::from([127, 0, 0, 5]);
    for _ in 0..4 {
        strike(&adapter, offender, api_addr(&adapter)).await;
    }
    assert_eq!(fate(&adapter, offender).await, Fate::Served);
    let (_, m) = adapter.plain_get("/metrics").await;
    assert_eq!(
        counter(&m, "hpa_bridge_clients_penalized_total", &[]),
        0.0,
        "{m}"
    );
}

/// One slowloris connection is one strike, although on HTTP/1.1 both the server's header
/// deadline and hyper's header timer fire for its partial head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_head_is_one_strike() {
    let adapter = AdapterProcess::start_with(
        &fast_config(&[]),
        &[
            "--client-penalty-strikes",
            "2",
            "--request-header-timeout",
            "1s",
        ],
    )
    .await;
    let slow = IpAddr::from([127, 0, 0, 6]);
    let slowloris = || async {
        let mut s = tls(&adapter, connect_from(slow, api_addr(&adapter)).await).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await
            .unwrap();
        s.flush().await.unwrap();
        until_closed(&mut s).await;
    };
    slowloris().await;
    // Give a second strike for the same connection, if one were coming, time to land.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        fate(&adapter, slow).await,
        Fate::Served,
        "one slow head struck the address out"
    );
    slowloris().await;
    eventually(
        &adapter,
        slow,
        Fate::Dropped,
        "two slow heads never struck the address out",
    )
    .await;
    let (_, m) = adapter.plain_get("/metrics").await;
    assert_eq!(
        counter(
            &m,
            "hpa_bridge_clients_penalized_total",
            &["reason=\"header-timeout\""]
        ),
        1.0,
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exempt_addresses_are_never_refused() {
    let adapter = AdapterProcess::start_with(
        &fast_config(&[]),
        &[
            "--client-penalty-strikes",
            "1",
            "--client-penalty-exempt",
            "10.0.0.0/8,127.0.0.7/32",
        ],
    )
    .await;
    let exempt = IpAddr::from([127, 0, 0, 7]);
    let other = IpAddr::from([127, 0, 0, 8]);
    for _ in 0..3 {
        strike(&adapter, exempt, api_addr(&adapter)).await;
    }
    assert_eq!(fate(&adapter, exempt).await, Fate::Served);
    // The penalty is on for everyone else.
    strike(&adapter, other, api_addr(&adapter)).await;
    eventually(
        &adapter,
        other,
        Fate::Dropped,
        "the address outside the exempt ranges was never kept out",
    )
    .await;
}

#[tokio::test]
async fn a_malformed_exempt_range_stops_startup_with_its_name() {
    let mut p = AdapterProcess::spawn(
        &fast_config(&[]),
        &["--client-penalty-exempt", "10.0.0.0/40"],
    );
    let exit = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Ok(Some(exit)) = p.child.try_wait() {
                return exit;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the adapter started with a malformed range");
    assert!(!exit.success());
    let log = p.log();
    assert!(
        log.contains("10.0.0.0/40") && log.contains("prefix length"),
        "{log}"
    );
}

/// Penalties on a dual-stack (`[::]`) listener, where an IPv4 client is
/// seen as `::ffff:a.b.c.d` and a native IPv6 one as itself. A native IPv6 client strikes out
/// first, then an IPv4 one; from then on every new connection from either is kept out (the
/// IPv4 one dropped in the kernel or refused at accept, the IPv6 one refused at accept), many
/// at once, while another IPv4 client is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dual_stack_listener_keeps_out_penalized_ipv4_and_ipv6_clients() {
    let probe = std::net::TcpListener::bind("[::]:0").unwrap_or_else(|e| {
        panic!(
            "this machine cannot bind [::] ({e}), so the dual-stack listener cannot be tested: \
             enable IPv6 (sysctl net.ipv6.conf.all.disable_ipv6=0)"
        )
    });
    let port = probe.local_addr().unwrap().port();
    if let Err(e) = std::net::TcpStream::connect(("127.0.0.1", port)) {
        panic!(
            "an IPv4 client cannot reach a [::] listener here ({e}), so it is not dual-stack: \
             sysctl net.ipv6.bindv6only must be 0"
        );
    }
    drop(probe);
    for (kernel_drop, ipv4_fate) in [("true", Fate::Dropped), ("false", Fate::Refused)] {
        dual_stack_penalties(kernel_drop, ipv4_fate).await;
    }
}

async fn dual_stack_penalties(kernel_drop: &str, ipv4_fate: Fate) {
    // A listener off loopback needs authentication; a client CA is enough.
    let clients = Pki::new("client-ca");
    let ca = clients.ca_path().display().to_string();
    let adapter = AdapterProcess::start_with(
        &fast_config(&[]),
        &[
            &[
                "--bind-address",
                "::",
                "--client-ca-file",
                &ca,
                "--authentication-skip-lookup",
            ][..],
            &penalty_flags(kernel_drop),
        ]
        .concat(),
    )
    .await;
    let ipv6 = IpAddr::from(std::net::Ipv6Addr::LOCALHOST);
    let ipv4 = IpAddr::from([127, 0, 0, 3]);
    let bystander = IpAddr::from([127, 0, 0, 4]);
    for source in [ipv6, ipv4, bystander] {
        assert_eq!(fate(&adapter, source).await, Fate::Served, "{source}");
    }
    for (offender, expected) in [(ipv6, Fate::Refused), (ipv4, ipv4_fate)] {
        for _ in 0..2 {
            strike(&adapter, offender, api_addr_for(&adapter, offender)).await;
        }
        eventually(
            &adapter,
            offender,
            expected,
            &format!("{offender} was never kept out (kernel drop {kernel_drop})"),
        )
        .await;
    }
    // Many connects at once, as a reconnecting client makes them: none gets through.
    let mut attempts = tokio::task::JoinSet::new();
    let adapter = Arc::new(adapter);
    for source in [ipv6, ipv4] {
        for _ in 0..50 {
            let adapter = adapter.clone();
            attempts.spawn(async move { (source, fate(&adapter, source).await) });
        }
    }
    let mut through = Vec::new();
    while let Some(attempt) = attempts.join_next().await {
        let (source, got) = attempt.unwrap();
        let expected = if source == ipv6 {
            Fate::Refused
        } else {
            ipv4_fate
        };
        if got != expected {
            through.push((source, got));
        }
    }
    assert!(
        through.is_empty(),
        "kernel drop {kernel_drop}: {} of 100 connects from penalized clients were not kept out: {through:?}",
        through.len()
    );
    assert_eq!(fate(&adapter, bystander).await, Fate::Served);
    let (_, m) = adapter.plain_get("/metrics").await;
    assert_eq!(
        counter(
            &m,
            "hpa_bridge_clients_penalized_total",
            &["listener=\"api\""]
        ),
        2.0,
        "{m}"
    );
    let dropped = counter(&m, "hpa_bridge_clients_dropped{", &["listener=\"api\""]);
    let listed = if ipv4_fate == Fate::Dropped { 1.0 } else { 0.0 };
    assert_eq!(dropped, listed, "only the IPv4 client is listed: {m}");
}
