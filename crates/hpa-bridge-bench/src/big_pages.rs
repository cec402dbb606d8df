//! `big-pages`: the real binary's resident memory while it scrapes hostile 16 MiB pages, JSON
//! status documents beside exposition text, and its CPU while a JSON page outlives the scrape
//! deadline.
//!
//! Each run starts `hpa-bridge serve` as a child process (its memory is its own) with a healthy
//! target (`lobby`'s recommendation) and the run's hostile targets, all served on loopback by an
//! exporter in this process. The hostile targets first serve small pages while the idle
//! resident memory is read; then they serve their big pages for the measured phase, during which
//! one keep-alive TLS connection keeps asking for `lobby`'s answer, as an HPA would, so the
//! figures also say whether a healthy workload's answers kept flowing. The peak is the child's
//! VmHWM at the end (idle is below it, so it is the phase's peak).
//!
//! `HPA_BRIDGE_BENCH_SERVER=/path/to/hpa-bridge` measures another build (for a before/after);
//! a run whose config that build refuses (a key it does not know) is reported as skipped.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Serialize;

use super::figure::{Figure, Goal};
use super::{hostile, pages, threads_cpu_time, BenchError, InPart};

const PART: &str = "big-pages";
const MIB: f64 = 1024.0 * 1024.0;
/// Under the default `scrape.maxBodyBytes` (16 MiB), so every page is read in full.
const PAGE_BYTES: usize = 16 * 1024 * 1024 - 4096;
/// The bound on memory: three 16 MiB hostile JSON pages at once stay within this of idle.
const GOAL_ABOVE_IDLE_MIB: f64 = 128.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PageKind {
    /// ~100,000 unwanted series in families of 50, full of escapes (pages.rs).
    Exposition,
    /// `{"recommendedWorkers": 4, "pad": [0,0,...]}`: eight million values.
    JsonArray,
    /// `{"recommendedWorkers": 4, "k0000000": 0, ...}`: a million keys.
    JsonKeys,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BigPagesRun {
    pub label: String,
    pub kind: PageKind,
    pub pages: usize,
    pub page_bytes: usize,
    /// Extra `scrape:` keys of this run (a lifted budget, a shorter timeout).
    pub scrape: String,
    /// The server refused the config (an older build); nothing measured.
    pub skipped: bool,
    pub rss_idle_bytes: u64,
    pub rss_peak_bytes: u64,
    /// CPU seconds per second of the server's threads in the measured phase.
    pub cpu_per_second: f64,
    /// Answers to `lobby`'s request in the measured phase: 200s, and anything else.
    pub answered: usize,
    pub failed: usize,
    /// The slowest of them.
    pub slowest_answer_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BigPagesResult {
    pub phase_seconds: f64,
    pub runs: Vec<BigPagesRun>,
}

struct Plan {
    kind: PageKind,
    pages: usize,
    scrape: &'static str,
    label: &'static str,
}

const PLANS: &[Plan] = &[
    Plan {
        kind: PageKind::Exposition,
        pages: 3,
        scrape: "",
        label: "3 exposition pages",
    },
    Plan {
        kind: PageKind::JsonArray,
        pages: 1,
        scrape: "",
        label: "1 JSON page",
    },
    Plan {
        kind: PageKind::JsonArray,
        pages: 3,
        scrape: "",
        label: "3 JSON pages",
    },
    Plan {
        kind: PageKind::JsonArray,
        pages: 3,
        scrape: "  maxJsonNodes: 100000000\n",
        label: "3 JSON pages, node budget lifted",
    },
    Plan {
        kind: PageKind::JsonKeys,
        pages: 1,
        scrape: "  timeout: 300ms\n  maxJsonNodes: 100000000\n",
        label: "1 JSON page of 1M keys, 300 ms timeout, node budget lifted",
    },
    Plan {
        kind: PageKind::JsonKeys,
        pages: 1,
        scrape: "  timeout: 300ms\n",
        label: "1 JSON page of 1M keys, 300 ms timeout",
    },
];

fn big_page(kind: PageKind, i: usize) -> Bytes {
    let mut page = String::with_capacity(PAGE_BYTES + 64);
    match kind {
        PageKind::Exposition => {
            pages::filler(&mut page, 100_000, PAGE_BYTES, 50, &format!("big{i}"));
        }
        PageKind::JsonArray => {
            page.push_str("{\"recommendedWorkers\": 4, \"pad\": [0");
            while page.len() < PAGE_BYTES - 2 {
                page.push_str(",0");
            }
            page.push_str("]}");
        }
        PageKind::JsonKeys => {
            page.push_str("{\"recommendedWorkers\": 4");
            let mut k = 0;
            while page.len() < PAGE_BYTES - 16 {
                let _ = write!(page, ",\"k{k:07}\":0");
                k += 1;
            }
            page.push('}');
        }
    }
    Bytes::from(page)
}

fn small_page(kind: PageKind) -> Bytes {
    match kind {
        PageKind::Exposition => Bytes::from_static(b"# TYPE up gauge\nup 1\n"),
        PageKind::JsonArray | PageKind::JsonKeys => {
            Bytes::from_static(b"{\"recommendedWorkers\": 4, \"pad\": [0]}")
        }
    }
}

type Pages = Arc<RwLock<HashMap<String, Bytes>>>;

/// A loopback exporter serving `pages` by path, each with its length stated.
async fn exporter(pages: Pages) -> Result<u16, BenchError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .part(PART)?;
    let port = listener.local_addr().part(PART)?.port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let pages = pages.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<Incoming>| {
                    let body = pages.read().unwrap().get(req.uri().path()).cloned();
                    async move {
                        let (status, body) = match body {
                            Some(b) => (200, b),
                            None => (404, Bytes::new()),
                        };
                        Ok::<_, Infallible>(
                            http::Response::builder()
                                .status(status)
                                .header("content-type", "text/plain; version=0.0.4")
                                .body(Full::new(body))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    Ok(port)
}

fn config(plan: &Plan, port: u16) -> String {
    let mut c = format!("scrape:\n  interval: 1s\n{}  static:\n", plan.scrape);
    let _ = write!(
        c,
        "    - url: http://127.0.0.1:{port}/ok\n      labels: {{namespace: default, pod: ctl-0}}\n"
    );
    for i in 0..plan.pages {
        let _ = write!(
            c,
            "    - url: http://127.0.0.1:{port}/big{i}\n      labels: {{namespace: other, pod: big-{i}}}\n"
        );
        if plan.kind != PageKind::Exposition {
            c.push_str(
                "      json:\n        samples:\n          - {series: hpa_expect_replicas, value: $.recommendedWorkers}\n",
            );
        }
    }
    c
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

async fn ask(sender: &mut hostile::Sender, port: u16) -> Result<u16, String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let req = http::Request::get(hostile::PATH)
        .header("host", format!("127.0.0.1:{port}"))
        .body(http_body_util::Empty::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    resp.into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(status)
}

async fn measure(
    plan: &Plan,
    exe: &std::path::Path,
    phase: Duration,
) -> Result<BigPagesRun, BenchError> {
    let pages: Pages = Arc::default();
    pages.write().unwrap().insert(
        "/ok".into(),
        Bytes::from_static(b"# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",service_instance_id=\"ctl-0\"} 3\n"),
    );
    for i in 0..plan.pages {
        pages
            .write()
            .unwrap()
            .insert(format!("/big{i}"), small_page(plan.kind));
    }
    let big: Vec<Bytes> = (0..plan.pages).map(|i| big_page(plan.kind, i)).collect();
    let port = exporter(pages.clone()).await?;
    let mut run = BigPagesRun {
        label: plan.label.into(),
        kind: plan.kind,
        pages: plan.pages,
        page_bytes: big.first().map_or(0, Bytes::len),
        scrape: plan.scrape.trim().replace('\n', ";"),
        skipped: false,
        rss_idle_bytes: 0,
        rss_peak_bytes: 0,
        cpu_per_second: 0.0,
        answered: 0,
        failed: 0,
        slowest_answer_ms: 0.0,
    };
    let (mut server, api_port, _, cert) =
        hostile::start_server_with(exe, Some(&config(plan, port)))?;
    let pid = server.child.id();
    let tls = hostile::client_config(cert)?;
    // Up, and answering lobby from the healthy target.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut sender = loop {
        if let Ok(Some(_)) = server.child.try_wait() {
            run.skipped = true;
            return Ok(run);
        }
        if let Ok(mut s) = hostile::legit_connection(api_port, &tls).await {
            if ask(&mut s, api_port).await == Ok(200) {
                break s;
            }
        }
        if Instant::now() > deadline {
            return Err(BenchError::part(
                PART,
                format!("{}: lobby was never answered", plan.label),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    run.rss_idle_bytes = status_kib(pid, "VmRSS:");
    for (i, page) in big.iter().enumerate() {
        pages
            .write()
            .unwrap()
            .insert(format!("/big{i}"), page.clone());
    }
    let cpu_before = threads_cpu_time(pid, "").unwrap_or_default();
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    while started.elapsed() < phase {
        let asked = Instant::now();
        match ask(&mut sender, api_port).await {
            Ok(200) => run.answered += 1,
            Ok(_) => run.failed += 1,
            Err(_) => {
                run.failed += 1;
                if let Ok(s) = hostile::legit_connection(api_port, &tls).await {
                    sender = s;
                }
            }
        }
        slowest = slowest.max(asked.elapsed());
        // An HPA asks every 15 s; ten times a second finds any stall of the answers.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu = threads_cpu_time(pid, "")
        .unwrap_or_default()
        .saturating_sub(cpu_before);
    run.cpu_per_second = cpu.as_secs_f64() / started.elapsed().as_secs_f64();
    run.rss_peak_bytes = status_kib(pid, "VmHWM:");
    run.slowest_answer_ms = slowest.as_secs_f64() * 1000.0;
    drop(server);
    Ok(run)
}

pub fn run(quick: bool, bench_exe: &std::path::Path) -> Result<BigPagesResult, BenchError> {
    let exe = hostile::server_exe(bench_exe)?;
    let phase = Duration::from_secs(if quick { 4 } else { 10 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .part(PART)?;
    let mut runs = Vec::new();
    // The quick run measures the goal's pair only: three exposition pages and three JSON ones.
    let plans = PLANS
        .iter()
        .filter(|p| !quick || (p.pages == 3 && p.scrape.is_empty()));
    for plan in plans {
        eprintln!("bench: big pages: {}...", plan.label);
        runs.push(runtime.block_on(measure(plan, &exe, phase))?);
    }
    Ok(BigPagesResult {
        phase_seconds: phase.as_secs_f64(),
        runs,
    })
}

fn above_idle(r: &BigPagesRun) -> f64 {
    r.rss_peak_bytes.saturating_sub(r.rss_idle_bytes) as f64 / MIB
}

pub fn figures(b: &BigPagesResult) -> Vec<Figure> {
    let mut f = Vec::new();
    let measured: Vec<&BigPagesRun> = b.runs.iter().filter(|r| !r.skipped).collect();
    let exposition = measured.iter().find(|r| r.kind == PageKind::Exposition);
    for r in &measured {
        let name = format!("Big pages, {}", r.label);
        if r.kind == PageKind::JsonArray && r.pages == 3 && r.scrape.is_empty() {
            // The goal is < 128 MiB above idle: against idle + 128 MiB, the ratio is < 1.
            f.push(
                Figure::new(
                    "big-pages",
                    format!("{name}: peak resident memory (vs idle + {GOAL_ABOVE_IDLE_MIB} MiB)"),
                    "MiB",
                )
                .compare(
                    r.rss_idle_bytes as f64 / MIB + GOAL_ABOVE_IDLE_MIB,
                    r.rss_peak_bytes as f64 / MIB,
                    Some(Goal::Below(1.0)),
                ),
            );
        }
        match exposition {
            Some(e) if r.kind != PageKind::Exposition && r.pages == e.pages => f.push(
                Figure::new(
                    "big-pages",
                    format!("{name}: peak above idle (vs {})", e.label),
                    "MiB",
                )
                .compare(above_idle(e), above_idle(r), None),
            ),
            _ => f.push(
                Figure::new("big-pages", format!("{name}: peak above idle"), "MiB")
                    .value(above_idle(r)),
            ),
        }
        f.push(
            Figure::new(
                "big-pages",
                format!("{name}: server CPU while scraping"),
                "s/s",
            )
            .value(r.cpu_per_second),
        );
        f.push(
            Figure::new(
                "big-pages",
                format!("{name}: healthy workload's requests not answered 200"),
                "requests",
            )
            .value(r.failed as f64),
        );
    }
    f
}

pub fn note(b: &BigPagesResult) -> String {
    let mut rows = String::new();
    for r in &b.runs {
        if r.skipped {
            let _ = write!(
                rows,
                " {}: skipped (the server refused its config).",
                r.label
            );
            continue;
        }
        let _ = write!(
            rows,
            " {}: idle {:.1} MiB, peak {:.1} MiB, {:.2} CPU s/s, lobby answered {} times ({} not 200, slowest {:.0} ms).",
            r.label,
            r.rss_idle_bytes as f64 / MIB,
            r.rss_peak_bytes as f64 / MIB,
            r.cpu_per_second,
            r.answered,
            r.failed,
            r.slowest_answer_ms
        );
    }
    format!(
        "**Big pages.** The release `hpa-bridge serve` as a child process, scraping every 1 s a healthy \
         target (lobby's recommendation) and hostile targets of {} bytes each, served on loopback; the \
         hostile targets serve small pages while the idle VmRSS is read, then their big pages for {:.0} s, \
         while one TLS keep-alive connection asks for lobby's answer ten times a second. Peak is VmHWM. \
         Exposition pages: ~100,000 unwanted series full of escapes; JSON pages: eight million values in \
         one array, or a million keys.{rows}\n",
        PAGE_BYTES, b.phase_seconds
    )
}
