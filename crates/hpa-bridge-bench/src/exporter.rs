//! The scale part's exporter, run as a child process (`hpa-bridge-bench bench-exporter`) so that its
//! CPU time is not counted as the adapter's: the tests' exporter (crates/hpa-bridge-kit/src/exporter.rs) with a
//! page per target, and a control endpoint that changes what a target exports.
//!
//! Target `i` is served at `http://127.77.<i/250>.<i%250+1>:<port>/t/<i>`: one address per
//! target, as pods have, so the scraper's per-host connection pool behaves as in a cluster
//! (Linux routes all of 127.0.0.0/8 to the loopback interface). With `shared_host` every target
//! is a path on 127.0.0.1 instead.

use std::fmt::Write;
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::pages;
use hpa_bridge_kit::exporter::{serve_each, Behaviour, TestExporter};

#[derive(Clone, Debug)]
pub struct ExporterSpec {
    pub targets: usize,
    pub workloads: usize,
    pub page_bytes: usize,
    pub shared_host: bool,
    /// Wanted series on each page (at least the pod's stateful index and, for ordinals 0 and
    /// 1, a recommendation): 10 per target, 50,000 over 5,000 targets, a large store.
    pub wanted_series: usize,
    /// The pages' series name a Deployment as their scale target, not a StatefulSet.
    pub deployment: bool,
}

/// The address of target `i`.
pub fn target_ip(i: usize, shared_host: bool) -> Ipv4Addr {
    if shared_host {
        Ipv4Addr::LOCALHOST
    } else {
        Ipv4Addr::new(127, 77, (i / 250) as u8, (i % 250 + 1) as u8)
    }
}

/// Workload and ordinal of target `i`: targets are spread round-robin over the workloads.
pub fn workload_of(i: usize, workloads: usize) -> (usize, usize) {
    (i % workloads, i / workloads)
}

/// The value workload `w`'s leading controller exports until changed.
pub fn initial_recommendation(w: usize) -> u32 {
    2 + (w % 5) as u32
}

/// The stateful index target `i` exports until changed: ordinals 0 to 2 hold state.
pub fn initial_index(i: usize, workloads: usize) -> usize {
    let (_, k) = workload_of(i, workloads);
    if k < 3 {
        k + 1
    } else {
        0
    }
}

/// Target `i`'s page: ~40 unwanted series of escape-heavy filler, then its pod's stateful index
/// and, for ordinals 0 and 1 (a leader and a former leader), a recommendation; the rest of the
/// page's `wanted_series` are recommendations of 1 from further controller instances (distinct
/// `service_instance_id`), which the store must hold and the answer must read but which never
/// change the maximum, so every answer stays the same as with the two controllers alone.
pub fn target_page(spec: &ExporterSpec, i: usize, recommendation: u32, index: usize) -> Bytes {
    let (w, k) = workload_of(i, spec.workloads);
    let mut page = String::with_capacity(spec.page_bytes + 1024);
    pages::filler(
        &mut page,
        40,
        spec.page_bytes.saturating_sub(400),
        8,
        &format!("t{i}"),
    );
    let kind = if spec.deployment {
        "Deployment"
    } else {
        "StatefulSet"
    };
    let common = format!(
        "hpa_target_kind=\"{kind}\",hpa_target_name=\"w{w}\",hpa_target_api_version=\"apps/v1\""
    );
    // One family per name, as an exporter writes it: the recommendations, then the index.
    let leader = k < 2;
    let extra = spec
        .wanted_series
        .saturating_sub(if leader { 2 } else { 1 });
    if leader || extra > 0 {
        page.push_str("# TYPE hpa_expect_replicas gauge\n");
    }
    if leader {
        let value = if k == 0 { recommendation } else { 1 };
        let _ = writeln!(
            page,
            "hpa_expect_replicas{{{common},service_instance_id=\"w{w}-c{k}\"}} {value}"
        );
    }
    for j in 0..extra {
        let _ = writeln!(
            page,
            "hpa_expect_replicas{{{common},service_instance_id=\"w{w}-{k}-r{j}\"}} 1"
        );
    }
    let _ = writeln!(
        page,
        "# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{{common},service_instance_id=\"w{w}-{k}\"}} {index}"
    );
    Bytes::from(page)
}

/// Serve until stdin closes (the parent exits or drops the pipe). Prints one line,
/// `ready port=<port> control=<addr>`, once every listener is bound.
pub async fn serve(spec: ExporterSpec) -> std::io::Result<()> {
    let ips: Vec<IpAddr> = (0..if spec.shared_host { 1 } else { spec.targets })
        .map(|i| target_ip(i, spec.shared_host).into())
        .collect();
    let exporter = TestExporter::start_on_all(&ips, 0).await?;
    let port = exporter.addr.port();
    // What each target exports, from which its page is written.
    let values: Arc<Vec<Mutex<(u32, usize)>>> = Arc::new(
        (0..spec.targets)
            .map(|i| {
                let (w, _) = workload_of(i, spec.workloads);
                Mutex::new((initial_recommendation(w), initial_index(i, spec.workloads)))
            })
            .collect(),
    );
    let publish = {
        let exporter = exporter.clone();
        move |i: usize, (recommendation, index): (u32, usize)| {
            exporter.set(
                &format!("/t/{i}"),
                Behaviour {
                    body: target_page(&spec, i, recommendation, index),
                    status: 200,
                    delay: std::time::Duration::ZERO,
                },
            )
        }
    };
    for (i, v) in values.iter().enumerate() {
        publish(i, *v.lock().unwrap_or_else(|e| e.into_inner()));
    }

    // `/set?target=I&value=V` changes target I's recommendation (for the freshness
    // measurement), `/set?target=I&index=N` its pod's stateful index (for the deletion-cost churn).
    let control = TcpListener::bind("127.0.0.1:0").await?;
    let control_addr: SocketAddr = control.local_addr()?;
    let (_serving, served) = watch::channel(false);
    tokio::spawn(serve_each(control, served, move |req| {
        let mut target = None;
        let mut value = None;
        let mut index = None;
        for pair in req.uri().query().unwrap_or("").split('&') {
            match pair.split_once('=') {
                Some(("target", v)) => target = v.parse::<usize>().ok(),
                Some(("value", v)) => value = v.parse::<u32>().ok(),
                Some(("index", v)) => index = v.parse::<usize>().ok(),
                _ => {}
            }
        }
        let response = match (target, value.is_some() || index.is_some()) {
            (Some(t), true) if t < values.len() => {
                let mut now = values[t].lock().unwrap_or_else(|e| e.into_inner());
                *now = (value.unwrap_or(now.0), index.unwrap_or(now.1));
                publish(t, *now);
                http::Response::new(Full::new(Bytes::from_static(b"ok\n")))
            }
            _ => http::Response::builder()
                .status(400)
                .body(Full::new(Bytes::from_static(
                    b"want ?target=I&value=V or ?target=I&index=N\n",
                )))
                .unwrap_or_default(),
        };
        async move { response }
    }));

    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready port={port} control={control_addr}")?;
        out.flush()?;
    }
    // tokio's stdin needs a feature the crate does not otherwise use; a blocking thread will do.
    tokio::task::spawn_blocking(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    })
    .await
    .map_err(std::io::Error::other)
}
