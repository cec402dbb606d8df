//! SIGTERM handled as kube-apiserver's --shutdown-delay-duration does: the
//! real binary, a stream of HPA requests, SIGTERM in the middle of it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hpa_bridge_kit::exporter::TestExporter;

use crate::common::*;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

const METRIC: &str = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas?labelSelector=hpa_target_name%3Dlobby";

/// A test bound: the test fails instead of hanging. Never a claim about speed.
const PATIENCE: Duration = Duration::from_secs(60);
/// The bound on one step of a keep-alive client (connect, a request's head, its body).
const STEP: Duration = Duration::from_secs(20);

/// An adapter serving the value 7 with `--shutdown-delay delay`, and its exporter.
async fn serving_seven(delay: &str) -> (TestExporter, AdapterProcess) {
    let exporter = TestExporter::start().await;
    exporter.page("/ctl", expect_page("ctl-0", "7"));
    let adapter = AdapterProcess::start_with(
        &fast_config(&[(exporter.url("/ctl"), "default", "ctl-0")]),
        &["--shutdown-delay", delay, "--shutdown-timeout", "10s"],
    )
    .await;
    adapter
        .eventually_value(
            "default",
            "hpa_expect_replicas",
            "hpa_target_name=lobby",
            "7",
        )
        .await;
    (exporter, adapter)
}

/// SIGTERM, then wait until readiness fails.
async fn terminate(adapter: &AdapterProcess) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &adapter.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let not_ready = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Ok((503, _)) = adapter.get_anonymous("/readyz").await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        not_ready.is_ok(),
        "/readyz never answered 503; log:\n{}",
        adapter.log()
    );
}

/// The adapter's exit, once it ends on its own.
async fn exited(adapter: &mut AdapterProcess) -> std::process::ExitStatus {
    tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(s) = adapter.child.try_wait().unwrap() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the adapter did not exit; log:\n{}", adapter.log()))
}

#[derive(Default)]
struct Tally {
    /// Answered 200 with the value.
    served: AtomicUsize,
    /// The server never took the connection: refused, or reset before the TLS handshake ended.
    not_accepted: AtomicUsize,
    /// The TLS session was established and the request then failed or got a wrong answer.
    failed: Mutex<Vec<String>>,
}

/// One request on a fresh connection, classified.
async fn one_request(port: u16, tls: &tokio_rustls::TlsConnector, tally: &Tally) {
    let Ok(tcp) = TcpStream::connect(("127.0.0.1", port)).await else {
        tally.not_accepted.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let Ok(stream) = tls
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
    else {
        tally.not_accepted.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let outcome = async {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = http::Request::get(METRIC)
            .header("host", format!("127.0.0.1:{port}"))
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let code = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        if code == 200 && single_value(&v).as_deref() == Some("7") {
            Ok(())
        } else {
            Err(format!("{code} {v}"))
        }
    };
    match outcome.await {
        Ok(()) => {
            tally.served.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => tally.failed.lock().unwrap().push(e),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_fails_readiness_keeps_serving_then_drains_and_exits_zero() {
    let (_exporter, mut adapter) = serving_seven("3s").await;

    let connector = adapter.pki.connector(&[]);

    // The stream: four clients, one request per connection, until told to stop.
    let tally = Arc::new(Tally::default());
    let done = Arc::new(AtomicBool::new(false));
    let port = adapter.port;
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (tally, done, connector) = (tally.clone(), done.clone(), connector.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    one_request(port, &connector, &tally).await;
                }
            })
        })
        .collect();
    let wait_served = |n: usize| {
        let tally = tally.clone();
        async move {
            tokio::time::timeout(PATIENCE, async {
                while tally.served.load(Ordering::Relaxed) < n {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("the request stream stalled")
        }
    };
    wait_served(20).await;

    // Readiness fails while requests are still served.
    terminate(&adapter).await;
    let before = tally.served.load(Ordering::Relaxed);
    wait_served(before + 10).await;
    let (code, _) = adapter.get_anonymous("/readyz").await.unwrap();
    assert_eq!(code, 503, "still not ready during the delay");

    // The process ends on its own, with 0.
    let exit = exited(&mut adapter).await;
    done.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(exit.code(), Some(0), "log:\n{}", adapter.log());

    let failed = tally.failed.lock().unwrap();
    assert!(
        failed.is_empty(),
        "{} accepted request(s) failed, e.g. {:?}; log:\n{}",
        failed.len(),
        failed.first(),
        adapter.log()
    );
    assert!(
        tally.not_accepted.load(Ordering::Relaxed) > 0,
        "the clients kept going until the listener closed"
    );
    let log = adapter.log();
    for step in [
        "shutting down: /readyz fails",
        "shutdown delay over",
        "no longer accepting connections",
        "drained; exiting",
    ] {
        assert!(log.contains(step), "missing log step {step:?}:\n{log}");
    }
}

/// How one keep-alive client fared through the shutdown.
#[derive(Default)]
struct KeptAlive {
    /// Answered 200 with the value.
    served: usize,
    /// Answers to requests sent once readiness failed.
    served_while_terminating: usize,
    /// Connections opened once readiness failed that served a request: the server sent the
    /// client away from its earlier connection while the listener still accepted.
    moved_while_terminating: usize,
    /// Requests written and then lost, or wrong answers.
    failed: Vec<String>,
}

/// Either protocol's sender, so one loop drives both kinds of client.
enum Sender {
    Http1(hyper::client::conn::http1::SendRequest<http_body_util::Empty<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<http_body_util::Empty<Bytes>>),
}

impl Sender {
    async fn open(port: u16, tls: &tokio_rustls::TlsConnector, h2: bool) -> Result<Self, String> {
        let tcp = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let stream = tls
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .map_err(|e| e.to_string())?;
        let io = TokioIo::new(stream);
        Ok(if h2 {
            let (sender, conn) =
                hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            Sender::Http2(sender)
        } else {
            let (sender, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            Sender::Http1(sender)
        })
    }

    /// Whether a request can go on this connection (the server has not closed it or sent
    /// GOAWAY).
    async fn usable(&mut self) -> bool {
        match self {
            Sender::Http1(s) => s.ready().await.is_ok(),
            Sender::Http2(s) => s.ready().await.is_ok(),
        }
    }

    /// `Err(None)`: the server never processed the request, so it may go on a new
    /// connection: it was never written, or, on HTTP/2, the server's GOAWAY refused its stream.
    /// A stream above a GOAWAY's last stream id was not processed and can be retried (RFC 9113
    /// §6.8); Go's HTTP/2 transport, which kube-apiserver's aggregator uses, retries it, and
    /// opens no new stream once any GOAWAY arrived. hyper's client still opens streams after
    /// the first, graceful GOAWAY of a shutdown, and the server refuses those in its last one.
    async fn send(
        &mut self,
        req: http::Request<http_body_util::Empty<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, Option<String>> {
        let sent = match self {
            Sender::Http1(s) => s.try_send_request(req).await,
            Sender::Http2(s) => s.try_send_request(req).await,
        };
        sent.map_err(|mut e| match e.take_message() {
            Some(_) => None,
            None => {
                let e = e.into_error();
                let refused = std::error::Error::source(&e)
                    .and_then(|s| s.downcast_ref::<h2::Error>())
                    .is_some_and(|h| h.is_go_away() && h.is_remote());
                (!refused).then(|| format!("{e:?}"))
            }
        })
    }
}

/// Requests back to back on one keep-alive connection at a time, a new one only when the
/// server closes or leaves the current one, until a new connection is refused after
/// `terminating` was set.
async fn keep_alive_client(
    port: u16,
    tls: tokio_rustls::TlsConnector,
    h2: bool,
    terminating: Arc<AtomicBool>,
) -> KeptAlive {
    let mut tally = KeptAlive::default();
    let mut current: Option<(Sender, bool)> = None;
    // Each step has a bound of its own, so a client that stalls says where.
    macro_rules! step {
        ($what:expr, $f:expr) => {
            match tokio::time::timeout(STEP, $f).await {
                Ok(v) => v,
                Err(_) => {
                    let terminating = terminating.load(Ordering::SeqCst);
                    tally.failed.push(format!(
                        "{} made no progress in {STEP:?} (terminating: {terminating})",
                        $what
                    ));
                    return tally;
                }
            }
        };
    }
    loop {
        let asked_while_terminating = terminating.load(Ordering::SeqCst);
        let kept = match current.take() {
            Some((mut s, _)) => step!("waiting for a kept connection", s.usable()).then_some(s),
            None => None,
        };
        let (mut sender, fresh) = match kept {
            Some(s) => (s, false),
            None => match step!("opening a connection", Sender::open(port, &tls, h2)) {
                Ok(s) => (s, true),
                // The listener closed: the shutdown delay is over.
                Err(_) if asked_while_terminating => return tally,
                Err(e) => {
                    tally.failed.push(format!("connect before SIGTERM: {e}"));
                    return tally;
                }
            },
        };
        let req = http::Request::get(METRIC)
            .header("host", format!("127.0.0.1:{port}"))
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        let resp = match step!("waiting for an answer's head", sender.send(req)) {
            Ok(r) => r,
            // Not written (the connection went away first): a new connection carries it.
            Err(None) => continue,
            Err(Some(e)) => {
                let on = if fresh { "a new" } else { "a reused" };
                tally
                    .failed
                    .push(format!("request written on {on} connection and lost: {e}"));
                continue;
            }
        };
        let close = resp
            .headers()
            .get(http::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        let code = resp.status().as_u16();
        let body = match step!("reading an answer's body", resp.into_body().collect()) {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                tally.failed.push(format!("answer cut short: {e}"));
                continue;
            }
        };
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if code != 200 || single_value(&v).as_deref() != Some("7") {
            tally.failed.push(format!("{code} {v}"));
            continue;
        }
        tally.served += 1;
        if asked_while_terminating {
            tally.served_while_terminating += 1;
            if fresh {
                tally.moved_while_terminating += 1;
            }
            if !h2 && !close {
                tally.failed.push(
                    "an HTTP/1.1 answer during the shutdown delay without Connection: close".into(),
                );
            }
        }
        if !close {
            current = Some((sender, fresh));
        }
    }
}

/// Keep-alive clients sending back to back through SIGTERM lose no request.
/// During the shutdown delay HTTP/1.1 answers carry `Connection: close` and HTTP/2
/// connections get a GOAWAY, so every client moves to a new connection while the listener
/// still accepts; once it closes, a client's next connection is refused, and no request is
/// ever written on a connection the server then closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_clients_are_sent_away_during_the_delay_and_lose_no_request() {
    let (_exporter, mut adapter) = serving_seven("4s").await;
    let (http1, http2) = (
        adapter.pki.connector(&[b"http/1.1"]),
        adapter.pki.connector(&[b"h2"]),
    );
    let terminating = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = [false, true, false, true]
        .into_iter()
        .map(|h2| {
            let tls = if h2 { http2.clone() } else { http1.clone() };
            let task = tokio::spawn(keep_alive_client(
                adapter.port,
                tls,
                h2,
                terminating.clone(),
            ));
            (h2, task)
        })
        .collect();
    // Let every client settle on its kept-alive connection.
    tokio::time::sleep(Duration::from_millis(500)).await;
    terminate(&adapter).await;
    terminating.store(true, Ordering::SeqCst);

    let mut tallies = Vec::new();
    for (h2, task) in clients {
        let tally = tokio::time::timeout(PATIENCE, task)
            .await
            .expect("a client never saw the listener close")
            .unwrap();
        tallies.push((if h2 { "HTTP/2" } else { "HTTP/1.1" }, tally));
    }
    let exit = exited(&mut adapter).await;
    assert_eq!(exit.code(), Some(0), "log:\n{}", adapter.log());
    for (protocol, t) in &tallies {
        assert!(
            t.failed.is_empty(),
            "{protocol} client: {} failure(s) after {} answers, e.g. {:?}",
            t.failed.len(),
            t.served,
            t.failed.first()
        );
        assert!(
            t.moved_while_terminating > 0,
            "{protocol} client: never sent to a new connection during the delay \
             ({} answers while terminating)",
            t.served_while_terminating
        );
    }
}
