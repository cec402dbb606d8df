//! Scale: many targets scraped from a separate exporter process, measured on the adapter side
//! only (this process's CPU time and resident memory).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::exporter::{self, ExporterSpec};
use super::{cpu_time, cpu_time_ticks, memory, quantile, BenchError};
use hpa_bridge::clock::{Clock, SystemClock};
use hpa_bridge::config::Config;
use hpa_bridge::engine::EngineBuilder;
use hpa_bridge::selector::LabelSelector;
use hpa_bridge::store::{ScrapeTarget, TargetId};
use hpa_bridge::telemetry::SelfMetrics;

#[derive(Clone, Debug)]
pub struct ScalePlan {
    pub targets: usize,
    pub workloads: usize,
    pub page_bytes: usize,
    pub interval: Duration,
    pub measured_rounds: usize,
    pub freshness_changes: usize,
    pub concurrency: usize,
    pub answer_time: Duration,
}

impl ScalePlan {
    pub fn full() -> Self {
        ScalePlan {
            targets: 5000,
            workloads: 200,
            page_bytes: 8 * 1024,
            interval: Duration::from_secs(10),
            measured_rounds: 3,
            freshness_changes: 4,
            // The value `serve` uses.
            concurrency: 512,
            answer_time: Duration::from_secs(1),
        }
    }

    pub fn quick() -> Self {
        ScalePlan {
            targets: 100,
            workloads: 10,
            page_bytes: 4 * 1024,
            interval: Duration::from_millis(500),
            measured_rounds: 2,
            freshness_changes: 2,
            concurrency: 512,
            answer_time: Duration::from_millis(100),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Round {
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub failed_targets: usize,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Freshness {
    /// Seconds from the exporter's change to the adapter's answer carrying it.
    pub delays_seconds: Vec<f64>,
    pub p50_seconds: f64,
    pub max_seconds: f64,
    /// A change is due in the answer within one interval plus one round: the limit here.
    pub limit_seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleResult {
    pub targets: usize,
    pub workloads: usize,
    pub page_bytes: usize,
    pub distinct_hosts: bool,
    pub concurrency: usize,
    pub interval_seconds: f64,
    /// The first round, which opens every connection.
    pub cold_round: Round,
    pub rounds: Vec<Round>,
    pub cpu_seconds_per_round: f64,
    /// The same from /proc/self/stat ticks over all measured rounds (cross-check, 10 ms steps).
    pub cpu_seconds_per_round_ticks: f64,
    pub max_round_seconds: f64,
    pub interval_held: bool,
    pub rss_bytes_before: u64,
    pub rss_bytes: u64,
    pub hwm_bytes: u64,
    pub tracked_series: usize,
    pub bytes_per_series: f64,
    pub bytes_per_target: f64,
    pub freshness: Freshness,
    /// Mean time of one in-process `hpa_target_replicas` answer over this store (no HTTP).
    pub answer_us_on_store: f64,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::part("scale", e)
}

/// The exporter child; killed and reaped when dropped.
pub(super) struct ExporterProcess {
    child: Child,
    pub(super) port: u16,
    control: String,
}

impl ExporterProcess {
    pub(super) fn start(exe: &Path, spec: &ExporterSpec) -> Result<Self, BenchError> {
        let mut cmd = Command::new(exe);
        cmd.arg("bench-exporter")
            .arg("--targets")
            .arg(spec.targets.to_string())
            .arg("--workloads")
            .arg(spec.workloads.to_string())
            .arg("--page-bytes")
            .arg(spec.page_bytes.to_string());
        if spec.shared_host {
            cmd.arg("--shared-host");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| err(format!("starting {} bench-exporter: {e}", exe.display())))?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(name))
                .map(str::to_owned)
        };
        let (Some(port), Some(control)) = (field("port="), field("control=")) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err(format!(
                "the exporter did not report ready (said {line:?})"
            )));
        };
        let port = port.parse().map_err(err)?;
        Ok(ExporterProcess {
            child,
            port,
            control,
        })
    }
}

impl Drop for ExporterProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The soft limit on open files, from /proc/self/limits.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Whether this machine lets a process bind 127.77.x.y (Linux routes 127/8 to loopback).
pub(super) fn distinct_hosts_available() -> bool {
    std::net::TcpListener::bind((exporter::target_ip(1, false), 0)).is_ok()
}

async fn set_value(control: &str, target: usize, value: u32) -> Result<(), BenchError> {
    let mut tcp = tokio::net::TcpStream::connect(control).await.map_err(err)?;
    tcp.write_all(
        format!("GET /set?target={target}&value={value} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes(),
    )
    .await
    .map_err(err)?;
    let mut reply = Vec::new();
    tcp.read_to_end(&mut reply).await.map_err(err)?;
    if !reply.starts_with(b"HTTP/1.0 200") && !reply.starts_with(b"HTTP/1.1 200") {
        return Err(err(format!(
            "exporter control answered {:?}",
            String::from_utf8_lossy(&reply)
        )));
    }
    Ok(())
}

pub fn run(plan: &ScalePlan, exe: &Path) -> Result<ScaleResult, BenchError> {
    // The adapter holds one connection per target; the exporter, a separate process, its own.
    let needed = plan.targets as u64 + 256;
    match open_files_limit() {
        Some(limit) if limit < needed => {
            return Err(err(format!(
            "the open-files limit is {limit}, {needed} are needed: run `ulimit -n {needed}` first"
        )))
        }
        _ => {}
    }
    let distinct_hosts = distinct_hosts_available();
    let spec = ExporterSpec {
        targets: plan.targets,
        workloads: plan.workloads,
        page_bytes: plan.page_bytes,
        shared_host: !distinct_hosts,
    };
    let exporter = ExporterProcess::start(exe, &spec)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(err)?;
    let (rss_before, _) = memory().unwrap_or_default();
    let result = runtime.block_on(measure(plan, &spec, &exporter));
    drop(exporter);
    let mut result = result?;
    result.rss_bytes_before = rss_before;
    result.bytes_per_series =
        result.rss_bytes.saturating_sub(rss_before) as f64 / result.tracked_series.max(1) as f64;
    result.bytes_per_target =
        result.rss_bytes.saturating_sub(rss_before) as f64 / plan.targets.max(1) as f64;
    Ok(result)
}

async fn measure(
    plan: &ScalePlan,
    spec: &ExporterSpec,
    exporter: &ExporterProcess,
) -> Result<ScaleResult, BenchError> {
    let interval_ms = plan.interval.as_millis();
    // The default timeout (3 s), or the interval when that is shorter (quick runs).
    let timeout_ms = interval_ms.min(3000);
    let config = Config::from_yaml(&format!(
        "scrape:\n  interval: {interval_ms}ms\n  timeout: {timeout_ms}ms\n"
    ))
    .map_err(err)?;
    let metrics = Arc::new(SelfMetrics::new());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let engine = EngineBuilder::new(config, clock.clone())
        .metrics(metrics.clone())
        .scrape_concurrency(plan.concurrency)
        .build()
        .map_err(err)?;
    let adapter = engine.adapter.clone();
    let store = engine.targets();
    let targets: Vec<ScrapeTarget> = (0..plan.targets)
        .map(|i| {
            let (w, k) = exporter::workload_of(i, plan.workloads);
            let ip = exporter::target_ip(i, spec.shared_host);
            ScrapeTarget {
                id: TargetId(format!("default/w{w}-{k}").into()),
                url: format!("http://{ip}:{}/t/{i}", exporter.port),
                labels: [
                    ("namespace", "default".to_string()),
                    ("pod", format!("w{w}-{k}")),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
                workload: None,
            }
        })
        .collect();
    store.set_targets(targets);
    let scraper = Arc::new(
        engine
            .scraper
            .ok_or_else(|| err("the scale bench scrapes; no other source"))?,
    );

    let failed = || {
        store
            .target_health()
            .iter()
            .filter(|(_, h)| h.last_error.is_some() || !h.ever_succeeded())
            .count()
    };
    let started = Instant::now();
    let mut rounds = Vec::new();
    let mut ticks_after_cold = Duration::ZERO;
    for r in 0..=plan.measured_rounds {
        tokio::time::sleep_until((started + plan.interval * r as u32).into()).await;
        let cpu0 = cpu_time().unwrap_or_default();
        let t0 = Instant::now();
        scraper.scrape_round().await;
        let seconds = t0.elapsed().as_secs_f64();
        let cpu = cpu_time().unwrap_or_default().saturating_sub(cpu0);
        if r == 0 {
            ticks_after_cold = cpu_time_ticks().unwrap_or_default();
        }
        rounds.push(Round {
            seconds,
            cpu_seconds: cpu.as_secs_f64(),
            failed_targets: failed(),
        });
    }
    let ticks = cpu_time_ticks()
        .unwrap_or_default()
        .saturating_sub(ticks_after_cold);
    let (rss, hwm) = memory().unwrap_or_default();
    let tracked_series = store
        .series_counts(clock.now_ms(), adapter.stale_after_ms())
        .0;
    let cold_round = rounds.remove(0);
    if let Some(bad) = rounds.iter().find(|r| r.failed_targets > 0) {
        return Err(err(format!(
            "{} of {} targets failed their scrape; see the warnings above",
            bad.failed_targets, plan.targets
        )));
    }
    let cpu_seconds_per_round =
        rounds.iter().map(|r| r.cpu_seconds).sum::<f64>() / rounds.len().max(1) as f64;
    let max_round_seconds = rounds.iter().map(|r| r.seconds).fold(0.0, f64::max);

    // Freshness: the scrape loop runs as in `serve`; the exporter's value changes at offsets
    // spread over the interval and the answer is polled until it carries the new value.
    let loop_scraper = scraper.clone();
    let interval = plan.interval;
    let scrape_loop = tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            loop_scraper.scrape_round().await;
        }
    });
    let selector = LabelSelector::parse("hpa_target_name=w0").map_err(err)?;
    let offsets = [0.13, 0.71, 0.42, 0.93, 0.27, 0.58];
    let mut delays = Vec::new();
    for j in 0..plan.freshness_changes {
        tokio::time::sleep(plan.interval.mul_f64(offsets[j % offsets.len()])).await;
        let value = 100 + j as u32;
        set_value(&exporter.control, 0, value).await?;
        let changed = Instant::now();
        let give_up = changed + plan.interval * 3 + Duration::from_secs(5);
        loop {
            let answer = adapter
                .answer("hpa_expect_replicas", "default", &selector)
                .await
                .map_err(err)?;
            if answer.value() == Some(u64::from(value)) {
                delays.push(changed.elapsed().as_secs_f64());
                break;
            }
            if Instant::now() > give_up {
                scrape_loop.abort();
                return Err(err(format!(
                    "the change to {value} never reached the answer (last: {})",
                    hpa_bridge::policy::summary(&answer)
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    scrape_loop.abort();
    let mut sorted_ms: Vec<u32> = delays.iter().map(|d| (d * 1000.0) as u32).collect();
    sorted_ms.sort_unstable();
    let freshness = Freshness {
        p50_seconds: quantile(&sorted_ms, 0.5) / 1000.0,
        max_seconds: delays.iter().copied().fold(0.0, f64::max),
        limit_seconds: plan.interval.as_secs_f64() + max_round_seconds,
        delays_seconds: delays,
    };

    // What one HPA query costs over a store this size (the serve part uses a small store).
    let answer_started = Instant::now();
    let mut answers = 0u64;
    while answers == 0 || answer_started.elapsed() < plan.answer_time {
        let sel = LabelSelector::parse(&format!(
            "hpa_target_name=w{}",
            answers as usize % plan.workloads
        ))
        .map_err(err)?;
        let a = adapter
            .answer("hpa_target_replicas", "default", &sel)
            .await
            .map_err(err)?;
        std::hint::black_box(a);
        answers += 1;
    }
    let answer_us_on_store = answer_started.elapsed().as_secs_f64() * 1e6 / answers as f64;

    Ok(ScaleResult {
        targets: plan.targets,
        workloads: plan.workloads,
        page_bytes: plan.page_bytes,
        distinct_hosts: !spec.shared_host,
        concurrency: plan.concurrency,
        interval_seconds: plan.interval.as_secs_f64(),
        cold_round,
        rounds,
        cpu_seconds_per_round,
        cpu_seconds_per_round_ticks: ticks.as_secs_f64() / plan.measured_rounds.max(1) as f64,
        max_round_seconds,
        interval_held: max_round_seconds <= plan.interval.as_secs_f64(),
        rss_bytes_before: 0,
        rss_bytes: rss,
        hwm_bytes: hwm,
        tracked_series,
        bytes_per_series: 0.0,
        bytes_per_target: 0.0,
        freshness,
        answer_us_on_store,
    })
}
