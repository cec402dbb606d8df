//! `hpa-bridge-bench` (also reached as `hpa-bridge bench`): the adapter's hot paths measured
//! against their practical limits, side by side in one run, and reported as ratios.
//! A separate binary so that the production `hpa-bridge` links no bench code; it drives the
//! adapter through the library's public API.
//!
//! - `serve`: the HPA's request over TLS keep-alive with client-certificate authentication,
//!   against a bare hyper + rustls server returning the same bytes.
//! - `parse`: the exposition skip path against a `memchr` newline scan of the same page; the
//!   JSON source's read of a status document, and of a deeply nested and a very wide one.
//! - `scale`: thousands of targets scraped from a separate exporter process: CPU per round,
//!   round duration against the interval, resident memory, freshness.
//! - `live`: the serve path over thousands of targets the scraper keeps rewriting, many
//!   workloads round-robin, answer reuse on and off, against the bare server.
//! - `slowapi`: the HPA's request with real discovery against a loopback Kubernetes API that
//!   delays every response, against the same with a prompt one.
//! - `prometheus`: PromQL queries per HPA request under 100 concurrent identical requests,
//!   against what a naive adapter would send.
//! - `deletion-cost`: the pod-deletion-cost writer over an opted-in Deployment whose pods keep
//!   changing their stateful index: patches per change, change to patch against the scrape
//!   interval, patch rate against `--deletion-cost-qps`, and the floor's answer latency
//!   against the same churn without the writer.
//! - `predictions`: serve's HPA predictions per 1,000 HPAs: one prediction's CPU against
//!   turning the HPA object into JSON, and the memory held per HPA.
//! - `memory`: the scale part's resident memory per target, split by component (connections,
//!   store, target set, allocator) with a counting allocator in a child process.
//!
//! Absolute numbers depend on the machine and on whatever else runs on it; ratios measured in
//! the same run with the same client are what the goals are stated in.

mod answer_cost;
mod big_pages;
mod counting_alloc;
mod deletion_cost;
mod exporter;
mod figure;
mod fleet;
mod hostile;
mod json_parse;
mod kube_objects;
mod live;
mod memory_attribution;
mod page;
mod pages;
mod parse;
mod predictions;
mod prometheus;
mod report;
mod scale;
mod serve;
mod slowapi;
mod soak;
mod spread;
mod throughput;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use hpa_bridge_telemetry::logging;

pub use figure::Figure;
pub use report::Report;

/// Counts live bytes only once the memory part's child switches it on (counting_alloc.rs).
#[global_allocator]
static ALLOCATOR: counting_alloc::Counting = counting_alloc::Counting;

#[derive(Parser, Debug)]
#[command(
    name = "hpa-bridge-bench",
    version,
    about = "Measure the serve path, the parse path, scale and memory against their limits; writes \
BENCHMARKS.md and benchmarks.json (documented in BENCHMARKS.md)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Verbosity: -v for debug, -vv for trace. RUST_LOG overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log format.
    #[arg(long, value_parser = ["text", "json"], default_value = "text", global = true)]
    log_format: String,
    #[command(flatten)]
    bench: BenchArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The scale part's exporter, started as a child process by the bench itself.
    #[command(hide = true, name = "bench-exporter")]
    Exporter(BenchExporterArgs),
    /// The soak part's rounds, started as a child process so its memory is its own.
    #[command(hide = true, name = "bench-soak")]
    Soak(BenchSoakArgs),
    /// The memory part's phases, started as a child process so its allocator counts theirs.
    #[command(hide = true, name = "bench-memory")]
    Memory(BenchMemoryArgs),
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// A short run (a few seconds per part, small scale) whose figures are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Exit non-zero if any figure misses its goal.
    #[arg(long)]
    check: bool,
    /// Directory for BENCHMARKS.md and benchmarks.json.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Parts to run (default all): serve, parse, scale, live, slowapi, prometheus, hostile, page,
    /// spread, soak, deletion-cost, predictions, memory, big-pages.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// The fleet a child process serves or scrapes, as its parent passes it.
#[derive(Args, Debug)]
struct FleetArgs {
    #[arg(long)]
    targets: usize,
    #[arg(long)]
    workloads: usize,
    #[arg(long)]
    page_bytes: usize,
}

#[derive(Args, Debug)]
struct BenchExporterArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[arg(long)]
    shared_host: bool,
    #[arg(long, default_value_t = 2)]
    wanted_series: usize,
    #[arg(long)]
    deployment: bool,
}

#[derive(Args, Debug)]
struct BenchSoakArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[arg(long)]
    rounds: usize,
    #[arg(long)]
    replaced_percent: usize,
}

#[derive(Args, Debug)]
struct BenchMemoryArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[arg(long)]
    wanted_series: usize,
    #[arg(long)]
    rounds: usize,
    #[arg(long)]
    interval_ms: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init_logging(cli.verbose, cli.log_format == "json");
    let result = match cli.command {
        Some(Command::Exporter(args)) => bench_exporter(args),
        Some(Command::Soak(args)) => bench_soak(args),
        Some(Command::Memory(args)) => bench_memory(args),
        None => bench(cli.bench),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn bench_exporter(args: BenchExporterArgs) -> Result<ExitCode, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime
        .block_on(exporter::serve(exporter::ExporterSpec {
            targets: args.fleet.targets,
            workloads: args.fleet.workloads.max(1),
            page_bytes: args.fleet.page_bytes,
            shared_host: args.shared_host,
            wanted_series: args.wanted_series,
            deployment: args.deployment,
        }))
        .map_err(|e| format!("bench exporter: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

fn bench_soak(args: BenchSoakArgs) -> Result<ExitCode, String> {
    let plan = soak::SoakPlan {
        targets: args.fleet.targets.max(1),
        workloads: args.fleet.workloads.max(1),
        page_bytes: args.fleet.page_bytes,
        rounds: args.rounds,
        replaced_percent: args.replaced_percent,
        settle_rounds: 0,
    };
    print_json(&soak::child(&plan, &bench_exe()?).map_err(|e| e.to_string())?)
}

fn bench_memory(args: BenchMemoryArgs) -> Result<ExitCode, String> {
    let plan = memory_attribution::MemoryPlan {
        targets: args.fleet.targets.max(1),
        workloads: args.fleet.workloads.max(1),
        page_bytes: args.fleet.page_bytes,
        wanted_series: args.wanted_series,
        rounds: args.rounds,
        interval: Duration::from_millis(args.interval_ms),
    };
    print_json(&memory_attribution::child(&plan, &bench_exe()?).map_err(|e| e.to_string())?)
}

/// This binary, which the parts run again as their child processes.
fn bench_exe() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("locating the hpa-bridge-bench binary: {e}"))
}

/// A child process's result, as one line of JSON on stdout for its parent.
fn print_json(value: &impl serde::Serialize) -> Result<ExitCode, String> {
    println!(
        "{}",
        serde_json::to_string(value).map_err(|e| e.to_string())?
    );
    Ok(ExitCode::SUCCESS)
}

fn bench(args: BenchArgs) -> Result<ExitCode, String> {
    let mut command = String::from("cargo run --release --bin hpa-bridge-bench --");
    if args.quick {
        command.push_str(" --quick");
    }
    let opts = BenchOptions {
        quick: args.quick,
        out_dir: args.out.clone(),
        parts: args.only.clone(),
        exe: bench_exe()?,
        command,
    };
    // Called outside any tokio runtime: the parts build runtimes with pinned worker counts.
    let report = run(&opts).map_err(|e| e.to_string())?;
    println!("{}", report.markdown());
    println!(
        "wrote {} and {}",
        args.out.join("BENCHMARKS.md").display(),
        args.out.join("benchmarks.json").display()
    );
    let unmet = report.unmet();
    if args.check && !unmet.is_empty() {
        for f in &unmet {
            eprintln!("goal not met: {} (ratio {:?})", f.name, f.ratio);
        }
        return Err(format!("{} benchmark goal(s) not met", unmet.len()));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{part}: {message}")]
    Part { part: &'static str, message: String },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

impl BenchError {
    fn part(part: &'static str, message: impl std::fmt::Display) -> Self {
        BenchError::Part {
            part,
            message: message.to_string(),
        }
    }
}

/// Names the part of the bench a failure happened in: `result.part(PART)?`.
trait InPart<T> {
    fn part(self, part: &'static str) -> Result<T, BenchError>;
}

impl<T, E: std::fmt::Display> InPart<T> for Result<T, E> {
    fn part(self, part: &'static str) -> Result<T, BenchError> {
        self.map_err(|e| BenchError::part(part, e))
    }
}

/// Which parts to run and how long.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// A few seconds per part, small scale: for tests and smoke runs. Figures are not meaningful.
    pub quick: bool,
    pub out_dir: PathBuf,
    /// Parts to run: any of `serve`, `parse`, `scale`, `live`, `slowapi`, `prometheus`,
    /// `hostile`, `page`, `spread`, `soak`, `deletion-cost`, `predictions`, `memory`.
    pub parts: Vec<String>,
    /// The binary to start as the scale part's exporter (`<exe> bench-exporter ...`).
    pub exe: PathBuf,
    /// How the run was started, for the report.
    pub command: String,
}

impl BenchOptions {
    fn wants(&self, part: &str) -> bool {
        self.parts.is_empty() || self.parts.iter().any(|p| p == part)
    }
}

/// Durations and sizes for one run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub serve_warmup: Duration,
    pub serve_run: Duration,
    pub serve_repeats: usize,
    pub serve_connections: usize,
    pub parse_min_time: Duration,
    pub parse_sizes: Vec<usize>,
    pub scale: scale::ScalePlan,
    pub live: live::LivePlan,
    pub slowapi: slowapi::SlowApiPlan,
}

impl Plan {
    pub fn new(quick: bool) -> Self {
        if quick {
            Plan {
                serve_warmup: Duration::from_millis(200),
                serve_run: Duration::from_millis(600),
                serve_repeats: 1,
                serve_connections: 16,
                parse_min_time: Duration::from_millis(100),
                parse_sizes: vec![256 * 1024],
                scale: scale::ScalePlan::quick(),
                live: live::LivePlan::new(true),
                slowapi: slowapi::SlowApiPlan::new(true),
            }
        } else {
            Plan {
                serve_warmup: Duration::from_secs(1),
                serve_run: Duration::from_secs(5),
                serve_repeats: 2,
                serve_connections: 64,
                parse_min_time: Duration::from_millis(1500),
                parse_sizes: vec![1 << 20, 10 << 20],
                scale: scale::ScalePlan::full(),
                live: live::LivePlan::new(false),
                slowapi: slowapi::SlowApiPlan::new(false),
            }
        }
    }
}

/// Run the selected parts and write `BENCHMARKS.md` and `benchmarks.json` into `out_dir`.
///
/// Must be called outside any tokio runtime: each part builds runtimes with pinned worker
/// counts so the adapter and its baseline get the same CPU arrangement.
pub fn run(opts: &BenchOptions) -> Result<Report, BenchError> {
    let plan = Plan::new(opts.quick);
    let mut report = Report::new(opts);
    // Scale first: it reads this process's resident memory, which should not include what the
    // other parts allocated and freed.
    if opts.wants("scale") {
        eprintln!("bench: scale ({} targets)...", plan.scale.targets);
        report.scale = Some(scale::run(&plan.scale, &opts.exe)?);
    }
    if opts.wants("memory") {
        eprintln!("bench: memory ({} targets)...", plan.scale.targets);
        let memory = memory_attribution::MemoryPlan::of(&plan.scale);
        report.memory = Some(memory_attribution::run(&memory, &opts.exe)?);
    }
    if opts.wants("parse") {
        eprintln!("bench: parse...");
        report.parse = Some(parse::run(&plan)?);
    }
    if opts.wants("serve") {
        eprintln!("bench: serve...");
        report.serve = Some(serve::run(&plan)?);
    }
    if opts.wants("live") {
        eprintln!(
            "bench: serve under live load ({} targets)...",
            plan.live.targets
        );
        report.live = Some(live::run(&plan, &opts.exe)?);
    }
    if opts.wants("slowapi") {
        eprintln!("bench: slow Kubernetes API...");
        report.slowapi = Some(slowapi::run(&plan, &opts.exe)?);
    }
    if opts.wants("hostile") {
        eprintln!("bench: hostile connections...");
        let plan = hostile::HostilePlan::new(opts.quick);
        report.hostile = Some(hostile::run(&plan, &opts.exe)?);
        eprintln!("bench: hostile connections, idle and slowloris only...");
        let plan = plan.with_mix(hostile::AttackMix::IdleAndSlowloris);
        report.hostile_held = Some(hostile::run(&plan, &opts.exe)?);
    }
    if opts.wants("big-pages") {
        eprintln!("bench: big pages...");
        report.big_pages = Some(big_pages::run(opts.quick, &opts.exe)?);
    }
    if opts.wants("prometheus") {
        eprintln!("bench: prometheus...");
        report.prometheus = Some(prometheus::run()?);
    }
    if opts.wants("page") {
        eprintln!("bench: status page...");
        // Its memory figure is a VmRSS delta, which means something only in a process whose
        // allocator has not yet freed memory to refill: before any other part ran.
        let alone = [
            report.scale.is_none(),
            report.parse.is_none(),
            report.serve.is_none(),
            report.live.is_none(),
            report.slowapi.is_none(),
            report.hostile.is_none(),
            report.prometheus.is_none(),
        ]
        .iter()
        .all(|none| *none);
        report.page = Some(page::run(opts.quick, alone));
    }
    if opts.wants("spread") {
        let plan = spread::SpreadPlan::new(opts.quick);
        eprintln!("bench: spread ({} targets)...", plan.targets);
        report.spread = Some(spread::run(&plan, &opts.exe)?);
    }
    if opts.wants("soak") {
        let plan = soak::SoakPlan::new(opts.quick);
        eprintln!("bench: soak ({} rounds)...", plan.rounds);
        report.soak = Some(soak::run(&plan, &opts.exe)?);
    }
    if opts.wants("deletion-cost") {
        let churn = deletion_cost::DeletionCostPlan::new(opts.quick);
        eprintln!("bench: deletion cost ({} pods churning)...", churn.pods);
        report.deletion_cost = Some(deletion_cost::run(&plan, &churn, &opts.exe)?);
    }
    if opts.wants("predictions") {
        eprintln!("bench: HPA predictions...");
        report.predictions = Some(predictions::run(opts.quick));
    }
    report.build_figures();
    report.write(&opts.out_dir)?;
    Ok(report)
}

/// Run `exe <subcommand> <args>` (a part's child process, whose memory is its own) and read
/// the figures it prints as JSON on stdout; its stderr passes through.
pub fn child_figures<T: serde::de::DeserializeOwned>(
    exe: &std::path::Path,
    subcommand: &str,
    args: &[String],
) -> Result<T, String> {
    let output = std::process::Command::new(exe)
        .arg(subcommand)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("starting {} {subcommand}: {e}", exe.display()))?;
    if !output.status.success() {
        return Err(format!("the {subcommand} child failed ({})", output.status));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("reading the {subcommand} child's figures: {e}"))
}

/// Resident memory of this process from /proc/self/status: (VmRSS, VmHWM) in bytes.
pub fn memory() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU time this process has used, in nanoseconds of on-CPU time summed over its live threads
/// (/proc/self/task/*/schedstat). The alternative, /proc/self/stat, counts exited threads too
/// but in 10 ms ticks, too coarse for short rounds; the threads measured here (tokio workers)
/// live for the whole measurement.
pub fn cpu_time() -> Option<Duration> {
    threads_cpu_time(std::process::id(), "")
}

/// On-CPU time of the live threads of process `pid` whose name starts with `prefix`
/// (/proc/<pid>/task/*/schedstat; `prefix` "" takes every thread).
pub fn threads_cpu_time(pid: u32, prefix: &str) -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(task) = task else { continue };
        let named = std::fs::read_to_string(task.path().join("comm"))
            .is_ok_and(|comm| comm.trim_end().starts_with(prefix));
        if !named {
            continue;
        }
        // A thread that exits between the listing and the read simply stops counting.
        total += task_cpu_ns(&task.path()).unwrap_or(0);
    }
    Some(Duration::from_nanos(total))
}

/// On-CPU nanoseconds of one thread, from its task directory (`/proc/<pid>/task/<tid>`); `None`
/// once the thread has exited.
pub fn task_cpu_ns(task: &std::path::Path) -> Option<u64> {
    let stat = std::fs::read_to_string(task.join("schedstat")).ok()?;
    stat.split_whitespace().next()?.parse::<u64>().ok()
}

/// User + system CPU time from /proc/self/stat (all threads, exited ones included), in USER_HZ
/// ticks: 100 per second on every Linux ABI, so 10 ms resolution. A cross-check of [`cpu_time`].
pub fn cpu_time_ticks() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may contain spaces and parentheses; fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of proc(5) are utime and stime; `rest` starts at field 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// `q`-quantile of sorted microsecond latencies (nearest rank).
pub fn quantile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1])
}
