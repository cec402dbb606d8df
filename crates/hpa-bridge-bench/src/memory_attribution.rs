//! `memory`: where the scale part's resident memory per target goes, measured.
//!
//! A child process (`hpa-bridge-bench bench-memory`) builds the scale part's fleet (the same
//! exporter, engine and real `Scraper`) with the bench's counting allocator switched on, and
//! reads the live bytes, the C allocator's own counts and VmRSS between phases:
//!
//! 1. the engine and the target set, before any scrape;
//! 2. the cold round and the measured rounds (VmRSS here is the scale part's figure);
//! 3. the scraper dropped: every pooled connection closes, its task ends and its buffers go;
//!    what remains is the store;
//! 4. a fresh store given the same target set, then one empty page per target: the target
//!    set's and each target's page state without series, so the store's rest is its series
//!    and their index;
//! 5. outside the scale figure, which is read before any answer: each workload answered
//!    (resolved scopes) and the answer history filled to its bound.
//!
//! The rows add up to the VmRSS growth by construction: the live bytes of each phase, then
//! the C allocator's headers and rounding (its in-use bytes less the live ones), the free
//! memory it holds resident (what `malloc_trim` hands back right after the rounds), and the
//! rest of VmRSS less its in-use bytes: negative where allocated pages were never written
//! (a buffer's unused capacity is not resident).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::answer_cost::Front;
use super::counting_alloc::{self, Snapshot};
use super::exporter::ExporterSpec;
use super::figure::Figure;
use super::fleet::{self, ExporterProcess, Scraped};
use super::scale::ScalePlan;
use super::{BenchError, InPart};
use hpa_bridge_engine::engine::history::Limits;
use hpa_bridge_exposition::ExposedSample;
use hpa_bridge_rules::clock::{Clock, SystemClock};
use hpa_bridge_store::store::StoreWriter;

const PART: &str = "memory";

/// How long the runtime gets to finish the closed connections' tasks between readings, and
/// the most readings.
const CLOSE_SETTLE: Duration = Duration::from_millis(500);
const CLOSE_READINGS: usize = 20;

/// Rounds beyond the plan's while targets are left failed by a busy machine.
const RETRIES: usize = 3;

/// The connection phase's size classes listed in the report.
const LISTED_CLASSES: usize = 6;

/// One component: its bytes in all, per target, and its share of the VmRSS growth.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Share {
    pub component: String,
    pub bytes: i64,
    pub bytes_per_target: f64,
    pub share: f64,
}

/// A size class of blocks that the closed connections freed.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassShare {
    /// The largest block size in the class.
    pub size: usize,
    pub blocks_per_target: f64,
    pub bytes_per_target: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryResult {
    pub targets: usize,
    pub workloads: usize,
    pub page_bytes: usize,
    pub wanted_series_per_target: usize,
    pub rounds: usize,
    pub tracked_series: usize,
    /// VmRSS after the rounds less VmRSS before the engine: the scale part's figure.
    pub rss_growth_bytes: i64,
    pub live_growth_bytes: i64,
    /// The growth, component by component; adds up to `rss_growth_bytes`.
    pub rows: Vec<Share>,
    /// What the closed connections freed, by block size, largest first.
    pub connection_classes: Vec<ClassShare>,
    pub connection_blocks_per_target: f64,
    /// What the store kept after the rounds (its growth from the target set), by block size.
    pub store_classes: Vec<ClassShare>,
    /// The most bytes live during the warm rounds above those live after them: bodies and
    /// parses in flight.
    pub transient_peak_bytes: i64,
    /// VmRSS that `malloc_trim` handed back right after the rounds.
    pub trim_released_bytes: i64,
    /// Not in the scale figure: grow with the workloads asked about, not the targets.
    pub answer_rows: Vec<Share>,
    pub history_entries_per_scope: usize,
}

/// The child's arguments.
#[derive(Clone, Debug)]
pub struct MemoryPlan {
    pub targets: usize,
    pub workloads: usize,
    pub page_bytes: usize,
    pub wanted_series: usize,
    pub rounds: usize,
    /// Between the rounds' starts, as in the scale part.
    pub interval: Duration,
}

impl MemoryPlan {
    /// The scale part's fleet.
    pub fn of(scale: &ScalePlan) -> Self {
        MemoryPlan {
            targets: scale.targets,
            workloads: scale.workloads,
            page_bytes: scale.page_bytes,
            wanted_series: scale.wanted_series,
            rounds: scale.measured_rounds,
            interval: scale.interval,
        }
    }

    fn args(&self) -> Vec<String> {
        [
            ("--targets", self.targets),
            ("--workloads", self.workloads),
            ("--page-bytes", self.page_bytes),
            ("--wanted-series", self.wanted_series),
            ("--rounds", self.rounds),
            ("--interval-ms", self.interval.as_millis() as usize),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect()
    }
}

pub fn run(plan: &MemoryPlan, exe: &Path) -> Result<MemoryResult, BenchError> {
    super::child_figures(exe, "bench-memory", &plan.args()).part(PART)
}

/// The phases, in this process: called by `hpa-bridge-bench bench-memory` (the child).
pub fn child(plan: &MemoryPlan, exe: &Path) -> Result<MemoryResult, BenchError> {
    counting_alloc::start();
    let (spec, exporter) = fleet::start_exporter(
        exe,
        plan.targets,
        plan.workloads,
        plan.page_bytes,
        plan.wanted_series,
    )?;
    let runtime = fleet::default_runtime(PART)?;
    runtime.block_on(phases(plan, &spec, &exporter))
}

async fn phases(
    plan: &MemoryPlan,
    spec: &ExporterSpec,
    exporter: &ExporterProcess,
) -> Result<MemoryResult, BenchError> {
    let interval = plan.interval;
    let start = Snapshot::now();
    let fleet = Scraped::new(spec, exporter, interval, fleet::SCRAPE_CONCURRENCY)?;
    let target_set = Snapshot::now();
    // Rounds an interval apart, as the scale part runs them; on a busy machine a round may
    // leave targets failed (timed out), whose connections would then be missing from the
    // reading, so a few more rounds are allowed until every target has its page.
    let started = Instant::now();
    fleet.scraper.scrape_round().await;
    counting_alloc::take_peak();
    let mut round = 0;
    while round < plan.rounds || (fleet.failed_targets() > 0 && round < plan.rounds + RETRIES) {
        round += 1;
        tokio::time::sleep_until((started + interval * round as u32).into()).await;
        fleet.scraper.scrape_round().await;
    }
    let peak = counting_alloc::take_peak();
    let failed = fleet.failed_targets();
    if failed > 0 {
        return Err(BenchError::part(
            PART,
            format!("{failed} of {} targets failed their scrape", plan.targets),
        ));
    }
    let tracked_series = fleet.tracked_series();
    let rounds = Snapshot::now();
    counting_alloc::trim();
    let trimmed = Snapshot::now();

    let Scraped {
        adapter,
        store: _store,
        scraper,
    } = fleet;
    drop(scraper);
    // The closed connections' tasks free their state as the runtime polls them: read until
    // the live bytes stop falling.
    let mut closed = Snapshot::now();
    for _ in 0..CLOSE_READINGS {
        tokio::time::sleep(CLOSE_SETTLE).await;
        let next = Snapshot::now();
        let settled = next.live_bytes >= closed.live_bytes;
        closed = next;
        if settled {
            break;
        }
    }

    // A fresh store with the same targets: the target set, then one empty page each.
    let targets: Vec<_> = (0..plan.targets)
        .map(|i| fleet::scrape_target(spec, exporter.port(), i))
        .collect();
    let replay_start = Snapshot::now();
    let fresh = StoreWriter::default();
    fresh.set_targets(targets);
    let replay_targets = Snapshot::now();
    for t in fresh.targets() {
        fresh.record_success(&t, SystemClock.now(), 0, Vec::<ExposedSample>::new());
    }
    let replay_pages = Snapshot::now();
    drop(fresh);

    // Outside the scale figure: each workload answered through both fronts (its scopes
    // resolved and its first answers kept), and the history filled to its bound.
    let before_answers = Snapshot::now();
    for w in 0..plan.workloads {
        for front in [Front::External, Front::Object] {
            adapter.answer_computed(&front.query(w)?).await.part(PART)?;
        }
    }
    let answered = Snapshot::now();
    let limits = Limits::default();
    let before_history = Snapshot::now();
    let history = super::page::history(plan.workloads, limits);
    let filled = Snapshot::now();
    drop(history);

    let live = |later: &Snapshot, earlier: &Snapshot| later.live_bytes - earlier.live_bytes;
    let connections = live(&rounds, &closed);
    let target_records = live(&replay_targets, &replay_start);
    let page_state = live(&replay_pages, &replay_targets);
    let store_growth = live(&closed, &target_set);
    let in_use = rounds.malloc_in_use_bytes as i64 - start.malloc_in_use_bytes as i64;
    let live_growth = live(&rounds, &start);
    let rss_growth = rounds.rss_bytes as i64 - start.rss_bytes as i64;
    let trim_released = rounds.rss_bytes as i64 - trimmed.rss_bytes as i64;
    let eight_kib = rounds
        .class_growth(&closed)
        .iter()
        .find(|(size, _, _)| *size == READ_BUFFER_CLASS)
        .map_or(0, |(_, _, bytes)| *bytes);
    let n = plan.targets.max(1) as f64;
    let share = |component: &str, bytes: i64| Share {
        component: component.into(),
        bytes,
        bytes_per_target: bytes as f64 / n,
        share: bytes as f64 / rss_growth.max(1) as f64,
    };
    let rows = vec![
        share(
            "scrape connections: 8 KiB blocks (hyper's read buffer and write buffer)",
            eight_kib,
        ),
        share(
            "scrape connections: the rest (connection task and state, socket registration, pool)",
            connections - eight_kib,
        ),
        share(
            "store: series and their index (labels, slots, postings, family digests)",
            store_growth - page_state,
        ),
        share(
            "store: per-target page state without series (health, TargetCell)",
            page_state,
        ),
        share(
            "target set (ScrapeTarget and the store's record before a page)",
            target_records,
        ),
        share(
            "engine and other fixed state",
            live(&target_set, &start) - target_records,
        ),
        share(
            "allocator: chunk headers and rounding",
            in_use - live_growth,
        ),
        share(
            "allocator: free memory held resident (what malloc_trim hands back)",
            trim_released,
        ),
        share(
            "allocated pages never written (unused capacity), net of other resident pages",
            rss_growth - in_use - trim_released,
        ),
    ];
    let answer_rows = vec![
        share(
            "resolved scopes and first answers kept, one External and one Object query per workload",
            live(&answered, &before_answers),
        ),
        share(
            "history at its bound, one scope per workload",
            live(&filled, &before_history),
        ),
    ];
    let classes = |later: &Snapshot, earlier: &Snapshot| -> Vec<ClassShare> {
        later
            .class_growth(earlier)
            .into_iter()
            .take(LISTED_CLASSES)
            .map(|(size, blocks, bytes)| ClassShare {
                size,
                blocks_per_target: blocks as f64 / n,
                bytes_per_target: bytes as f64 / n,
            })
            .collect()
    };
    Ok(MemoryResult {
        targets: plan.targets,
        workloads: plan.workloads,
        page_bytes: plan.page_bytes,
        wanted_series_per_target: plan.wanted_series,
        rounds: round,
        tracked_series,
        rss_growth_bytes: rss_growth,
        live_growth_bytes: live_growth,
        rows,
        connection_classes: classes(&rounds, &closed),
        store_classes: classes(&closed, &target_set),
        connection_blocks_per_target: (rounds.live_blocks - closed.live_blocks) as f64 / n,
        transient_peak_bytes: peak - rounds.live_bytes,
        trim_released_bytes: trim_released,
        answer_rows,
        history_entries_per_scope: limits.capacity,
    })
}

/// The size class of the scraper's read buffer (`READ_BUFFER_BYTES` in source/scrape.rs) and
/// of hyper's initial write buffer, which are the same size.
const READ_BUFFER_CLASS: usize = 8 * 1024;

pub fn figures(m: &MemoryResult) -> Vec<Figure> {
    let mut f = vec![Figure::new(
        PART,
        format!(
            "Memory: VmRSS growth per target, {} targets × {} wanted series (the scale part's figure)",
            m.targets, m.wanted_series_per_target
        ),
        "bytes",
    )
    .value(m.rss_growth_bytes as f64 / m.targets.max(1) as f64)];
    for r in m.rows.iter().chain(&m.answer_rows) {
        f.push(
            Figure::new(PART, format!("Memory per target: {}", r.component), "bytes")
                .value(r.bytes_per_target),
        );
    }
    f
}

pub fn note(m: &MemoryResult) -> String {
    let mib = |b: i64| b as f64 / f64::from(1 << 20);
    let mut s = format!(
        "**Memory.** The scale part's fleet ({} targets over {} workloads, {}-byte pages, {} wanted \
         series each; {} tracked series) in a child process (`bench-memory`) whose global allocator \
         counts live bytes by block size; the cold round and {} more, then the scraper dropped (its \
         pooled connections close), then a fresh store given the same targets and one empty page \
         each. VmRSS grew {:.1} MiB, live bytes {:.1} MiB; `malloc_trim` right after the rounds \
         handed back {:.1} MiB. Transient peak during the warm rounds: {:.1} MiB above what stayed \
         live.\n\n| Component | bytes per target | share of VmRSS growth |\n|---|---:|---:|\n",
        m.targets,
        m.workloads,
        m.page_bytes,
        m.wanted_series_per_target,
        m.tracked_series,
        m.rounds,
        mib(m.rss_growth_bytes),
        mib(m.live_growth_bytes),
        mib(m.trim_released_bytes),
        mib(m.transient_peak_bytes),
    );
    let row = |prefix: &str, r: &Share| {
        format!(
            "| {prefix}{} | {:.0} | {:.1}% |\n",
            r.component,
            r.bytes_per_target,
            r.share * 100.0
        )
    };
    for r in &m.rows {
        s.push_str(&row("", r));
    }
    s.push_str(&format!(
        "| total (VmRSS growth) | {:.0} | 100% |\n",
        m.rss_growth_bytes as f64 / m.targets.max(1) as f64
    ));
    for r in &m.answer_rows {
        s.push_str(&row("not in the total: ", r));
    }
    s.push_str(&format!(
        "\nHistory bound: {} entries per scope. The closed connections freed {:.1} blocks each; by \
         size (largest in the class: blocks, bytes per connection): {}. What the store kept per \
         target, by size: {}.\n",
        m.history_entries_per_scope,
        m.connection_blocks_per_target,
        class_list(&m.connection_classes),
        class_list(&m.store_classes),
    ));
    s
}

fn class_list(classes: &[ClassShare]) -> String {
    classes
        .iter()
        .map(|c| {
            format!(
                "{} B: {:.2}, {:.0}",
                c.size, c.blocks_per_target, c.bytes_per_target
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
