//! `spread`: the CPU profile of scraping over the interval, with every target scraped at the top
//! of the interval (a burst) against each target at its own phase (`Scraper::run`, the loop
//! `serve` runs; docs/hpa-behaviour.md §5.1).
//!
//! Both loops run in this process against the scale part's exporter process, one after the
//! other over the same store, for the same number of intervals after one warm-up interval.
//! This process's CPU time is sampled every 100 ms; the figures are the busiest 100 ms (in
//! cores) and the CPU per interval, spread against burst.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::figure::{Figure, Goal};
use super::fleet::{self, Scraped};
use super::{cpu_time, BenchError};
use hpa_bridge_sources::source::scrape::Scraper;

const PART: &str = "spread";
const BUCKET: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct SpreadPlan {
    pub targets: usize,
    pub workloads: usize,
    pub page_bytes: usize,
    pub interval: Duration,
    pub measured_intervals: u32,
}

impl SpreadPlan {
    pub fn new(quick: bool) -> Self {
        if quick {
            SpreadPlan {
                targets: 100,
                workloads: 10,
                page_bytes: 4096,
                interval: Duration::from_millis(1000),
                measured_intervals: 1,
            }
        } else {
            SpreadPlan {
                targets: 5000,
                workloads: 200,
                page_bytes: 8 * 1024,
                interval: Duration::from_secs(5),
                measured_intervals: 2,
            }
        }
    }
}

/// CPU use of one loop over the measured intervals.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuProfile {
    /// CPU seconds in each 100 ms of wall time, in order.
    pub cpu_per_bucket: Vec<f64>,
    /// The busiest 100 ms, in cores (CPU seconds per wall second).
    pub peak_cores: f64,
    /// The 90th percentile of the buckets, in cores.
    pub p90_cores: f64,
    pub cpu_seconds_per_interval: f64,
    /// Buckets with any scraping CPU at all (above 5% of a core), as a share of all buckets.
    pub busy_share: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadResult {
    pub targets: usize,
    pub interval_seconds: f64,
    pub measured_intervals: u32,
    pub burst: CpuProfile,
    pub spread: CpuProfile,
}

pub fn run(plan: &SpreadPlan, exe: &Path) -> Result<SpreadResult, BenchError> {
    let (spec, exporter) =
        fleet::start_exporter(exe, plan.targets, plan.workloads, plan.page_bytes, 2)?;
    let runtime = fleet::default_runtime(PART)?;
    let scraped = Scraped::new(&spec, &exporter, plan.interval, fleet::SCRAPE_CONCURRENCY)?;
    runtime.block_on(measure(plan, scraped.scraper.clone()))
}

async fn measure(plan: &SpreadPlan, scraper: Arc<Scraper>) -> Result<SpreadResult, BenchError> {
    let interval = plan.interval;
    let burst_scraper = scraper.clone();
    let burst = profile(plan, async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            burst_scraper.scrape_round().await;
        }
    })
    .await;
    let spread_scraper = scraper.clone();
    let spread = profile(plan, async move {
        spread_scraper.run(interval, || {}).await;
    })
    .await;
    Ok(SpreadResult {
        targets: plan.targets,
        interval_seconds: plan.interval.as_secs_f64(),
        measured_intervals: plan.measured_intervals,
        burst,
        spread,
    })
}

/// Run `scrape_loop` for one warm-up interval and then `measured_intervals` more, sampling
/// this process's CPU time every 100 ms over the measured part; then stop it.
async fn profile(
    plan: &SpreadPlan,
    scrape_loop: impl std::future::Future<Output = ()> + Send + 'static,
) -> CpuProfile {
    let task = tokio::spawn(scrape_loop);
    tokio::time::sleep(plan.interval).await;
    let buckets = (plan.interval.as_millis() / BUCKET.as_millis()) as usize
        * plan.measured_intervals as usize;
    let start = Instant::now();
    let mut last = cpu_time().unwrap_or_default();
    let mut cpu_per_bucket = Vec::with_capacity(buckets);
    for b in 1..=buckets {
        tokio::time::sleep_until((start + BUCKET * b as u32).into()).await;
        let now = cpu_time().unwrap_or_default();
        cpu_per_bucket.push(now.saturating_sub(last).as_secs_f64());
        last = now;
    }
    let wall = start.elapsed();
    task.abort();
    let _ = task.await;
    let mut sorted = cpu_per_bucket.clone();
    sorted.sort_by(f64::total_cmp);
    let cores = |cpu: f64| cpu / BUCKET.as_secs_f64();
    let total: f64 = cpu_per_bucket.iter().sum();
    CpuProfile {
        peak_cores: cores(sorted.last().copied().unwrap_or(0.0)),
        p90_cores: cores(sorted[(sorted.len() * 9 / 10).min(sorted.len().saturating_sub(1))]),
        cpu_seconds_per_interval: total / (wall.as_secs_f64() / plan.interval.as_secs_f64()),
        busy_share: cpu_per_bucket.iter().filter(|c| cores(**c) > 0.05).count() as f64
            / cpu_per_bucket.len().max(1) as f64,
        cpu_per_bucket,
    }
}

pub fn figures(s: &SpreadResult) -> Vec<Figure> {
    let what = format!("{} targets, {} s interval", s.targets, s.interval_seconds);
    vec![
        Figure::new(
            PART,
            format!("Spread: busiest 100 ms of scraping, each target at its own phase vs all at the top of the interval ({what})"),
            "cores",
        )
        .compare(s.burst.peak_cores, s.spread.peak_cores, Some(Goal::AtMost(0.5))),
        Figure::new(
            PART,
            "Spread: 90th-percentile 100 ms, spread vs burst",
            "cores",
        )
        .compare(s.burst.p90_cores, s.spread.p90_cores, None),
        Figure::new(
            PART,
            "Spread: CPU per interval, spread vs burst (the same scrapes, with more wakeups)",
            "CPU s",
        )
        .compare(
            s.burst.cpu_seconds_per_interval,
            s.spread.cpu_seconds_per_interval,
            Some(Goal::AtMost(1.5)),
        ),
    ]
}

pub fn note(s: &SpreadResult) -> String {
    let sparkline = |p: &CpuProfile| {
        p.cpu_per_bucket
            .iter()
            .map(|c| format!("{:.2}", c / BUCKET.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "**Spread.** {} targets of the scale part's exporter, scraped by the real `Scraper` on a \
         default multi-thread runtime for one warm-up interval and then {} intervals of {} s, first \
         with every target at the top of the interval (`scrape_round` on a ticker, the loop before), \
         then with `Scraper::run` (each target at its phase). This process's CPU was sampled every \
         100 ms. Busy 100 ms slots (above 5% of a core): burst {:.0}%, spread {:.0}%. Cores used in \
         each 100 ms, burst: {}\n\nspread: {}\n",
        s.targets,
        s.measured_intervals,
        s.interval_seconds,
        s.burst.busy_share * 100.0,
        s.spread.busy_share * 100.0,
        sparkline(&s.burst),
        sparkline(&s.spread)
    )
}
