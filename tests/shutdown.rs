//! SIGTERM handled as kube-apiserver's --shutdown-delay-duration does (issue 13, item 13): the
//! real binary, a stream of HPA requests, SIGTERM in the middle of it.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

const METRIC: &str = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas?labelSelector=hpa_target_name%3Dlobby";

/// A test bound: the test fails instead of hanging. Never a claim about speed.
const PATIENCE: Duration = Duration::from_secs(60);

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
    let exporter = TestExporter::start().await;
    exporter.page("/ctl", expect_page("ctl-0", "7"));
    let mut adapter = AdapterProcess::start_with(
        &fast_config(&[(exporter.url("/ctl"), "default", "ctl-0")]),
        &["--shutdown-delay", "3s", "--shutdown-timeout", "10s"],
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

    let mut roots = rustls::RootCertStore::empty();
    roots.add(adapter.pki.ca_der()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));

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

    let status = std::process::Command::new("kill")
        .args(["-TERM", &adapter.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());

    // Readiness fails while requests are still served.
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
    let before = tally.served.load(Ordering::Relaxed);
    wait_served(before + 10).await;
    let (code, _) = adapter.get_anonymous("/readyz").await.unwrap();
    assert_eq!(code, 503, "still not ready during the delay");

    // The process ends on its own, with 0.
    let exit = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(s) = adapter.child.try_wait().unwrap() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the adapter did not exit; log:\n{}", adapter.log()));
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
