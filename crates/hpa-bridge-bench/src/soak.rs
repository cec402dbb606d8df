//! `soak`: many scrape rounds while pods come and go: does memory level
//! off, or does every replaced pod leave something behind (series, postings, label strings,
//! health records, connection pools)?
//!
//! The rounds run in a child process (`hpa-bridge-bench bench-soak`), so its resident memory
//! is the store's and the scraper's alone, not what other parts of the bench allocated and
//! freed (freed memory would be reused first and hide a leak). The child starts the scale
//! part's exporter, replaces a rotating tenth of the pods before every round (new pod names,
//! so new series identities, as a Deployment's rollout makes), sets the target set as
//! discovery does, scrapes a full round with the real scraper, and records VmRSS.

use std::path::Path;

use serde::{Deserialize, Serialize};

use std::time::Duration;

use super::exporter::{self, ExporterSpec};
use super::figure::{Figure, Goal};
use super::fleet;
use super::{memory, BenchError, InPart};
use hpa_bridge_rules::clock::{Clock, SystemClock};

const PART: &str = "soak";

#[derive(Clone, Debug)]
pub struct SoakPlan {
    pub targets: usize,
    pub workloads: usize,
    pub page_bytes: usize,
    pub rounds: usize,
    /// Percent of the pods replaced before each round.
    pub replaced_percent: usize,
    /// Growth is judged from this round on (the store, pools and allocator fill up first).
    pub settle_rounds: usize,
}

impl SoakPlan {
    pub fn new(quick: bool) -> Self {
        if quick {
            SoakPlan {
                targets: 50,
                workloads: 5,
                page_bytes: 2048,
                rounds: 40,
                replaced_percent: 10,
                settle_rounds: 10,
            }
        } else {
            SoakPlan {
                targets: 1000,
                workloads: 50,
                page_bytes: 4096,
                rounds: 1000,
                replaced_percent: 10,
                settle_rounds: 100,
            }
        }
    }

    fn args(&self) -> Vec<String> {
        [
            ("--targets", self.targets),
            ("--workloads", self.workloads),
            ("--page-bytes", self.page_bytes),
            ("--rounds", self.rounds),
            ("--replaced-percent", self.replaced_percent),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect()
    }
}

/// What the child measured after each round.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SoakRounds {
    pub rss_bytes: Vec<u64>,
    pub tracked_series: Vec<usize>,
    pub replaced_pods: usize,
    pub seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SoakResult {
    pub targets: usize,
    pub rounds: usize,
    pub replaced_percent: usize,
    pub settle_rounds: usize,
    pub replaced_pods: usize,
    pub seconds: f64,
    /// Median VmRSS over the `settle_rounds` rounds after the first `settle_rounds`, and over
    /// the last `settle_rounds` rounds: medians, because the allocator makes single samples
    /// swing by a few MiB either way.
    pub rss_bytes_after_settle: u64,
    pub rss_bytes_at_end: u64,
    pub rss_bytes_max: u64,
    /// Least-squares slope of VmRSS over the rounds after `settle_rounds`.
    pub growth_bytes_per_round_after_settle: f64,
    /// The same over the first `settle_rounds` rounds.
    pub growth_bytes_per_round_before_settle: f64,
    pub tracked_series_at_settle: usize,
    pub tracked_series_at_end: usize,
    /// VmRSS after every 10th round, for the record.
    pub rss_mib_every_10_rounds: Vec<f64>,
}

/// The rounds, in this process: called by `hpa-bridge-bench bench-soak` (the child).
pub fn child(plan: &SoakPlan, exe: &Path) -> Result<SoakRounds, BenchError> {
    let (spec, exporter) =
        fleet::start_exporter(exe, plan.targets, plan.workloads, plan.page_bytes, 2)?;
    let runtime = fleet::default_runtime(PART)?;
    runtime.block_on(rounds(plan, &spec, exporter.port()))
}

async fn rounds(plan: &SoakPlan, spec: &ExporterSpec, port: u16) -> Result<SoakRounds, BenchError> {
    let engine = fleet::engine(Duration::from_secs(10), fleet::SCRAPE_CONCURRENCY, "")?;
    let clock = SystemClock;
    let store = engine.targets();
    let scraper = engine
        .scraper()
        .ok_or_else(|| BenchError::part(PART, "the soak scrapes; no other source"))?;
    let stale_after = engine.adapter().stale_after_ms();
    // A pod's generation is bumped when it is replaced: its name changes, its address is
    // reused (pod IPs are), so the old identity must be forgotten and the new one learned.
    let mut generation = vec![0usize; plan.targets];
    let per_round = (plan.targets * plan.replaced_percent / 100).max(1);
    let mut out = SoakRounds::default();
    let started = std::time::Instant::now();
    for round in 0..plan.rounds {
        if round > 0 {
            for j in 0..per_round {
                generation[(round * per_round + j) % plan.targets] += 1;
                out.replaced_pods += 1;
            }
        }
        let targets = (0..plan.targets).map(|i| {
            let (w, k) = exporter::workload_of(i, plan.workloads);
            fleet::scrape_target_named(spec, port, i, format!("w{w}-{k}-g{}", generation[i]))
        });
        store.set_targets(targets.collect());
        scraper.scrape_round().await;
        let failed = fleet::failed_targets(&store);
        if failed > 0 {
            return Err(BenchError::part(
                PART,
                format!(
                    "round {round}: {failed} of {} targets failed their scrape",
                    plan.targets
                ),
            ));
        }
        out.rss_bytes.push(memory().unwrap_or_default().0);
        out.tracked_series
            .push(store.series_counts(clock.now(), stale_after).0);
    }
    out.seconds = started.elapsed().as_secs_f64();
    Ok(out)
}

/// Least-squares slope of `ys` against their index.
fn slope(ys: &[u64]) -> f64 {
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return 0.0;
    }
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = ys.iter().map(|y| *y as f64).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in ys.iter().enumerate() {
        let dx = x as f64 - mean_x;
        num += dx * (*y as f64 - mean_y);
        den += dx * dx;
    }
    num / den
}

pub fn run(plan: &SoakPlan, exe: &Path) -> Result<SoakResult, BenchError> {
    let rounds: SoakRounds = super::child_figures(exe, "bench-soak", &plan.args()).part(PART)?;
    let n = rounds.rss_bytes.len();
    if n < 3 * plan.settle_rounds.max(1) {
        return Err(BenchError::part(
            PART,
            format!(
                "the soak child measured {n} rounds; at least {} are needed",
                3 * plan.settle_rounds.max(1)
            ),
        ));
    }
    let settle = plan.settle_rounds.max(1);
    let median = |window: &[u64]| {
        let mut w = window.to_vec();
        w.sort_unstable();
        w[w.len() / 2]
    };
    let after_settle = median(&rounds.rss_bytes[settle..2 * settle]);
    let at_end = median(&rounds.rss_bytes[n - settle..]);
    Ok(SoakResult {
        targets: plan.targets,
        rounds: rounds.rss_bytes.len(),
        replaced_percent: plan.replaced_percent,
        settle_rounds: settle,
        replaced_pods: rounds.replaced_pods,
        seconds: rounds.seconds,
        rss_bytes_after_settle: after_settle,
        rss_bytes_at_end: at_end,
        rss_bytes_max: rounds.rss_bytes.iter().copied().max().unwrap_or(0),
        growth_bytes_per_round_after_settle: slope(&rounds.rss_bytes[settle..]),
        growth_bytes_per_round_before_settle: slope(&rounds.rss_bytes[..=settle]),
        tracked_series_at_settle: rounds.tracked_series[settle],
        tracked_series_at_end: *rounds.tracked_series.last().unwrap_or(&0),
        rss_mib_every_10_rounds: rounds
            .rss_bytes
            .iter()
            .step_by(10)
            .map(|b| *b as f64 / (1 << 20) as f64)
            .collect(),
    })
}

pub fn figures(s: &SoakResult) -> Vec<Figure> {
    let what = format!(
        "{} pods, {}% replaced before each of {} rounds",
        s.targets, s.replaced_percent, s.rounds
    );
    vec![
        Figure::new(
            PART,
            format!(
                "Soak: median VmRSS over the last {n} rounds vs over rounds {n}–{} ({what})",
                2 * s.settle_rounds,
                n = s.settle_rounds
            ),
            "MiB",
        )
        .compare(
            s.rss_bytes_after_settle as f64 / (1 << 20) as f64,
            s.rss_bytes_at_end as f64 / (1 << 20) as f64,
            Some(Goal::AtMost(1.05)),
        ),
        Figure::new(
            PART,
            format!(
                "Soak: RSS growth per round after round {} (least-squares slope)",
                s.settle_rounds
            ),
            "bytes",
        )
        .value(s.growth_bytes_per_round_after_settle),
        Figure::new(
            PART,
            format!(
                "Soak: RSS growth per round in rounds 0–{} (filling up)",
                s.settle_rounds
            ),
            "bytes",
        )
        .value(s.growth_bytes_per_round_before_settle),
        Figure::new(
            PART,
            format!(
                "Soak: tracked series after the last round vs after round {}",
                s.settle_rounds
            ),
            "series",
        )
        .compare(
            s.tracked_series_at_settle as f64,
            s.tracked_series_at_end as f64,
            Some(Goal::AtMost(1.0)),
        ),
    ]
}

pub fn note(s: &SoakResult) -> String {
    format!(
        "**Soak.** {} pods served by the scale part's exporter process; before each of {} rounds \
         a rotating {}% of them is replaced (a new pod name, so new series identities; the old \
         ones must be forgotten), the target set is replaced as discovery does, and the real \
         scraper scrapes a full round. The rounds run in a child process (`bench-soak`) so its \
         VmRSS is theirs alone. {} pods replaced in {:.1} s. Median VmRSS over rounds {n}–{}: {:.1} MiB; \
         over the last {n}: {:.1} MiB (max {:.1} MiB). Tracked series: {} after round {}, {} at the \
         end. VmRSS every 10 rounds (MiB): {}.\n",
        s.targets,
        s.rounds,
        s.replaced_percent,
        s.replaced_pods,
        s.seconds,
        2 * s.settle_rounds,
        s.rss_bytes_after_settle as f64 / (1 << 20) as f64,
        s.rss_bytes_at_end as f64 / (1 << 20) as f64,
        s.rss_bytes_max as f64 / (1 << 20) as f64,
        s.tracked_series_at_settle,
        s.settle_rounds,
        s.tracked_series_at_end,
        s.rss_mib_every_10_rounds
            .iter()
            .map(|m| format!("{m:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        n = s.settle_rounds
    )
}
