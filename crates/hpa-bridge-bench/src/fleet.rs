//! A fleet of scrape targets: the exporter child process serving one page per target
//! (`hpa-bridge-bench bench-exporter`, so its CPU is not counted as the adapter's) and an
//! engine whose real `Scraper` scrapes it, assembled through `EngineBuilder` as `serve` does.
//! The scale, live-serve and slow-API parts all stand on it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::exporter::{self, ExporterSpec};
use super::{BenchError, InPart};
use hpa_bridge_engine::engine::{Adapter, Assembly, EngineBuilder};
use hpa_bridge_rules::clock::{Clock, SystemClock};
use hpa_bridge_rules::config::Config;
use hpa_bridge_rules::evidence::TargetId;
use hpa_bridge_sources::source::discovery::Discovery;
use hpa_bridge_sources::source::scrape::Scraper;
use hpa_bridge_store::store::{ScrapeTarget, Store, StoreWriter};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

const PART: &str = "fleet";

/// The exporter child; killed and reaped when dropped.
pub struct ExporterProcess {
    child: Child,
    port: u16,
    control: String,
}

impl ExporterProcess {
    pub fn start(exe: &Path, spec: &ExporterSpec) -> Result<Self, BenchError> {
        let mut cmd = Command::new(exe);
        cmd.arg("bench-exporter")
            .arg("--targets")
            .arg(spec.targets.to_string())
            .arg("--workloads")
            .arg(spec.workloads.to_string())
            .arg("--page-bytes")
            .arg(spec.page_bytes.to_string())
            .arg("--wanted-series")
            .arg(spec.wanted_series.to_string());
        if spec.shared_host {
            cmd.arg("--shared-host");
        }
        if spec.deployment {
            cmd.arg("--deployment");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                BenchError::part(
                    PART,
                    format!("starting {} bench-exporter: {e}", exe.display()),
                )
            })?;
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
            return Err(BenchError::part(
                PART,
                format!("the exporter did not report ready (said {line:?})"),
            ));
        };
        let port = port.parse().part(PART)?;
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
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Whether this machine lets a process bind 127.77.x.y (Linux routes 127/8 to loopback).
pub fn distinct_hosts_available() -> bool {
    std::net::TcpListener::bind((exporter::target_ip(1, false), 0)).is_ok()
}

/// One plain HTTP/1.0 GET of `path` at `addr`: the whole reply, head and body.
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<Vec<u8>> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await?;
    let mut reply = Vec::new();
    tcp.read_to_end(&mut reply).await?;
    Ok(reply)
}

/// Target `target`'s recommendation becomes `value`.
pub async fn set_value(control: &str, target: usize, value: u32) -> Result<(), BenchError> {
    set(control, &format!("target={target}&value={value}")).await
}

/// Target `target`'s pod exports stateful index `index`.
pub async fn set_index(control: &str, target: usize, index: usize) -> Result<(), BenchError> {
    set(control, &format!("target={target}&index={index}")).await
}

async fn set(control: &str, query: &str) -> Result<(), BenchError> {
    let reply = http_get(control, &format!("/set?{query}"))
        .await
        .part(PART)?;
    if !reply.starts_with(b"HTTP/1.0 200") && !reply.starts_with(b"HTTP/1.1 200") {
        return Err(BenchError::part(
            PART,
            format!(
                "exporter control answered {:?}",
                String::from_utf8_lossy(&reply)
            ),
        ));
    }
    Ok(())
}

/// A default multi-thread runtime (a worker per core), as `serve` runs the scraper on.
pub fn default_runtime(part: &'static str) -> Result<tokio::runtime::Runtime, BenchError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .part(part)
}

/// The exporter process serving [`exporter_spec`]'s pages.
pub fn start_exporter(
    exe: &Path,
    targets: usize,
    workloads: usize,
    page_bytes: usize,
    wanted_series: usize,
) -> Result<(ExporterSpec, ExporterProcess), BenchError> {
    let spec = exporter_spec(targets, workloads, page_bytes, wanted_series)?;
    let process = ExporterProcess::start(exe, &spec)?;
    Ok((spec, process))
}

/// The pages of `targets` StatefulSet pods, after checking that this process may hold one
/// connection per target; one loopback address per target where the machine allows it.
pub fn exporter_spec(
    targets: usize,
    workloads: usize,
    page_bytes: usize,
    wanted_series: usize,
) -> Result<ExporterSpec, BenchError> {
    // The adapter holds one connection per target. The exporter, a child process with the
    // same limit, holds the other end of each and, on distinct addresses, a listener per
    // target as well: without room for both, the connections past its limit time out.
    let shared_host = !distinct_hosts_available();
    let exporter_files = if shared_host { 1 } else { 2 };
    let needed = (exporter_files * targets) as u64 + 256;
    match open_files_limit() {
        Some(limit) if limit < needed => {
            return Err(BenchError::part(
                PART,
                format!(
            "the open-files limit is {limit}, {needed} are needed: run `ulimit -n {needed}` first"
        ),
            ))
        }
        _ => {}
    }
    let spec = ExporterSpec {
        targets,
        workloads: workloads.max(1),
        page_bytes,
        shared_host,
        wanted_series,
        deployment: false,
    };
    Ok(spec)
}

impl ExporterProcess {
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn control(&self) -> &str {
        &self.control
    }
}

/// Target `i` of the exporter as discovery would name it: pod `w<w>-<k>` in `default`.
pub fn scrape_target(spec: &ExporterSpec, port: u16, i: usize) -> ScrapeTarget {
    let (w, k) = exporter::workload_of(i, spec.workloads);
    scrape_target_named(spec, port, i, format!("w{w}-{k}"))
}

/// Target `i` of the exporter as pod `pod` in `default` (a replaced pod gets a new name).
pub fn scrape_target_named(spec: &ExporterSpec, port: u16, i: usize, pod: String) -> ScrapeTarget {
    let ip = exporter::target_ip(i, spec.shared_host);
    ScrapeTarget {
        format: Default::default(),
        id: TargetId(format!("default/{pod}").into()),
        url: format!("http://{ip}:{port}/t/{i}"),
        labels: [("namespace", "default".to_string()), ("pod", pod)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        workload: None,
    }
}

/// The engine as `serve` assembles it for the embedded scraper, with `yaml` appended to the
/// scrape interval and timeout (the default 3 s timeout, or the interval when shorter).
pub fn engine(interval: Duration, concurrency: usize, yaml: &str) -> Result<Assembly, BenchError> {
    builder(config(interval, yaml)?, concurrency)
        .build()
        .part(PART)
}

/// The bench's config: scraping every `interval`, with `yaml` under `scrape:`.
pub fn config(interval: Duration, yaml: &str) -> Result<Config, BenchError> {
    let interval_ms = interval.as_millis();
    let timeout_ms = interval_ms.min(3000);
    Config::from_yaml(&format!(
        "scrape:\n  interval: {interval_ms}ms\n  timeout: {timeout_ms}ms\n{yaml}"
    ))
    .part(PART)
}

/// An engine wired to a cluster as `serve` wires it.
pub struct Discovered {
    pub client: kube::Client,
    pub discovery: Arc<Discovery>,
    pub engine: Assembly,
}

/// Discovery (`scrape.kubernetes` of `config`) against the API server at `url` first, then
/// the engine built with its facts over the target store it fills, as `serve` wires them;
/// returned once the first complete target set is published (60 s at most).
pub async fn discovered(url: &str, config: Config) -> Result<Discovered, BenchError> {
    let k = config
        .scrape
        .kubernetes
        .clone()
        .ok_or_else(|| BenchError::part(PART, "the config has no kubernetes discovery"))?;
    let uri: http::Uri = url.parse().part(PART)?;
    let client = kube::Client::try_from(kube::Config::new(uri)).part(PART)?;
    let targets = StoreWriter::default();
    let discovery = Discovery::start(client.clone(), k, targets.clone(), Vec::new());
    let engine = builder(config, SCRAPE_CONCURRENCY)
        .targets(targets)
        .cluster(discovery.clone())
        .build()
        .part(PART)?;
    tokio::time::timeout(Duration::from_secs(60), discovery.wait_synced())
        .await
        .map_err(|_| {
            BenchError::part(
                PART,
                format!("discovery against {url} did not sync in 60 s"),
            )
        })?;
    Ok(Discovered {
        client,
        discovery,
        engine,
    })
}

/// The engine's assembly as `serve` makes it, on the system clock.
pub fn builder(config: Config, concurrency: usize) -> EngineBuilder {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    EngineBuilder::new(config, clock)
        .metrics(Arc::new(SelfMetrics::new()))
        .scrape_concurrency(concurrency)
}

/// An engine scraping every page of the exporter: its adapter, target store and scraper.
pub struct Scraped {
    pub adapter: Arc<Adapter>,
    pub store: StoreWriter,
    pub scraper: Arc<Scraper>,
}

/// What `serve` scrapes with.
pub const SCRAPE_CONCURRENCY: usize = hpa_bridge_engine::engine::DEFAULT_SCRAPE_CONCURRENCY;

impl Scraped {
    pub fn new(
        spec: &ExporterSpec,
        exporter: &ExporterProcess,
        interval: Duration,
        concurrency: usize,
    ) -> Result<Self, BenchError> {
        let engine = engine(interval, concurrency, "")?;
        let store = engine.targets();
        store.set_targets(
            (0..spec.targets)
                .map(|i| scrape_target(spec, exporter.port, i))
                .collect(),
        );
        Ok(Scraped {
            adapter: engine.adapter().clone(),
            store,
            scraper: Arc::new(engine.scraper().cloned().ok_or_else(|| {
                BenchError::part(PART, "the engine built no scraper (a source is configured)")
            })?),
        })
    }

    pub fn failed_targets(&self) -> usize {
        failed_targets(&self.store)
    }

    /// The scrape loop as `serve` runs it: one round at once, then each target at its own
    /// phase of the interval (`Scraper::run`).
    pub fn spawn_loop(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let scraper = self.scraper.clone();
        // Readiness is the API port's: nothing here asks /readyz.
        tokio::spawn(async move {
            scraper.run(interval, || {}).await;
        })
    }

    /// Series in the store that are not stale.
    pub fn tracked_series(&self) -> usize {
        self.store
            .series_counts(SystemClock.now(), self.adapter.stale_after_ms())
            .0
    }
}

/// That discovery found `expected` targets and each was scraped: else what went wrong, for
/// `what` (pods, targets).
pub fn all_discovered_and_scraped(
    store: &Store,
    expected: usize,
    what: &str,
) -> Result<(), String> {
    let (found, failed) = (store.targets().len(), failed_targets(store));
    if found != expected || failed > 0 {
        return Err(format!(
            "discovery found {found} of {expected} {what}, {failed} failed their scrape"
        ));
    }
    Ok(())
}

/// Targets whose last scrape failed or that never succeeded.
pub fn failed_targets(store: &Store) -> usize {
    store
        .target_health()
        .iter()
        .filter(|(_, h)| h.last_error.is_some() || !h.ever_succeeded())
        .count()
}
