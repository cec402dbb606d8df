//! The bench report: one table of figures (baseline, adapter, ratio, goal, met?) as Markdown in
//! `BENCHMARKS.md` and the full measurements as JSON in `benchmarks.json`.

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use super::figure::{Figure, Goal};
use super::parse::ParseResult;
use super::prometheus::PrometheusResult;
use super::scale::ScaleResult;
use super::serve::ServeResult;
use super::{BenchError, BenchOptions};
use hpa_bridge_rules::clock::{rfc3339, Clock, SystemClock};

/// Everything below this line in an existing BENCHMARKS.md is kept when the file is rewritten,
/// so hand-written notes (profiles, before/after records) survive a re-run.
pub const NOTES_MARKER: &str =
    "<!-- Notes below this line are kept when `bench` rewrites the file. -->";

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    pub cores: usize,
    pub cpu_model: String,
    /// /proc/loadavg when the run started and ended: other work on the machine shows here.
    pub load_average_start: String,
    pub load_average_end: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub command: String,
    pub date: String,
    pub quick: bool,
    pub machine: Machine,
    pub note: String,
    pub figures: Vec<Figure>,
    pub serve: Option<ServeResult>,
    pub parse: Option<ParseResult>,
    pub scale: Option<ScaleResult>,
    pub prometheus: Option<PrometheusResult>,
    pub live: Option<super::live::LiveResult>,
    pub slowapi: Option<super::slowapi::SlowApiResult>,
    pub hostile: Option<super::hostile::HostileResult>,
    /// The hostile part again with idle and slowloris connections only, held up to the caps.
    pub hostile_held: Option<super::hostile::HostileResult>,
    pub big_pages: Option<super::big_pages::BigPagesResult>,
    pub page: Option<super::page::PageResult>,
    pub predictions: Option<super::predictions::PredictionsResult>,
    pub soak: Option<super::soak::SoakResult>,
    pub spread: Option<super::spread::SpreadResult>,
    pub deletion_cost: Option<super::deletion_cost::DeletionCostResult>,
    pub memory: Option<super::memory_attribution::MemoryResult>,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn size_label(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{:.0} MiB", bytes as f64 / f64::from(1 << 20))
    } else if bytes >= 1024 {
        format!("{:.0} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} bytes")
    }
}

impl Report {
    pub fn new(opts: &BenchOptions) -> Self {
        Report {
            command: opts.command.clone(),
            date: rfc3339(SystemClock.now_ms()),
            quick: opts.quick,
            machine: Machine {
                cores: std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1),
                cpu_model: cpu_model(),
                load_average_start: load_average(),
                load_average_end: String::new(),
            },
            note: "Other processes (builds and tests of parallel work) were running on the machine \
                   during the measurement; the load averages show how busy it was. Ratios are \
                   measured side by side in the same run, which is why the goals are stated as ratios."
                .into(),
            figures: Vec::new(),
            serve: None,
            parse: None,
            scale: None,
            prometheus: None,
            live: None,
            slowapi: None,
            hostile: None,
            hostile_held: None,
            big_pages: None,
            page: None,
            predictions: None,
            soak: None,
            spread: None,
            deletion_cost: None,
            memory: None,
        }
    }

    pub fn build_figures(&mut self) {
        self.machine.load_average_end = load_average();
        let mut f = Vec::new();
        if let Some(s) = &self.serve {
            let conns = s.connections;
            let once = "gatekeeper verifies each client certificate once";
            f.push(
                Figure::new(
                    "serve",
                    format!("Serve: requests/s ({conns} TLS keep-alive connections, front-proxy auth; {once})"),
                    "req/s",
                )
                .compare(s.baseline.requests_per_second, s.adapter.requests_per_second, Some(Goal::AtLeast(0.8))),
            );
            f.push(
                Figure::new("serve", format!("Serve: p50 latency ({once})"), "µs").compare(
                    s.baseline.p50_us,
                    s.adapter.p50_us,
                    None,
                ),
            );
            f.push(
                Figure::new("serve", format!("Serve: p99 latency ({once})"), "µs").compare(
                    s.baseline.p99_us,
                    s.adapter.p99_us,
                    Some(Goal::AtMost(1.5)),
                ),
            );
            f.push(
                Figure::new("serve", format!("Serve: p99.9 latency ({once})"), "µs").compare(
                    s.baseline.p999_us,
                    s.adapter.p999_us,
                    None,
                ),
            );
            let every = "gatekeeper re-verifies the chain on every request";
            let e = &s.adapter_verify_every_request;
            f.push(
                // Without the verdict memo, for comparison: not the adapter's path, so it
                // carries no goal.
                Figure::new("serve", format!("Serve: requests/s ({every})"), "req/s").compare(
                    s.baseline.requests_per_second,
                    e.requests_per_second,
                    None,
                ),
            );
            f.push(
                Figure::new("serve", format!("Serve: p99 latency ({every})"), "µs").compare(
                    s.baseline.p99_us,
                    e.p99_us,
                    None,
                ),
            );
        }
        if let Some(p) = &self.parse {
            for page in &p.pages {
                let size = size_label(page.bytes);
                f.push(
                    Figure::new(
                        "parse",
                        format!(
                            "Parse {size} page ({} series, {} wanted) vs memchr newline scan",
                            page.series, page.wanted_series
                        ),
                        "MB/s",
                    )
                    .compare(
                        page.newline_scan_mb_s,
                        page.adapter_mb_s,
                        Some(Goal::AtLeast(0.3)),
                    ),
                );
                f.push(
                    Figure::new(
                        "parse",
                        format!("Parse {size} page vs full parse (`parse_all`)"),
                        "MB/s",
                    )
                    .compare(page.parse_all_mb_s, page.adapter_mb_s, None),
                );
            }
            for page in &p.adversarial {
                f.push(
                    Figure::new(
                        "parse",
                        format!(
                            "Parse adversarial {} page ({} lines of {} labels, each just under {} bytes) vs memchr newline scan",
                            size_label(page.bytes),
                            page.lines,
                            page.labels_per_line,
                            page.line_bytes_limit
                        ),
                        "MB/s",
                    )
                    .compare(page.newline_scan_mb_s, page.adapter_mb_s, None),
                );
            }
            // Linear parsing keeps the rate when the page grows tenfold; a quadratic parser's
            // rate would fall with the line and page size.
            if let [small, .., large] = p.adversarial.as_slice() {
                f.push(
                    Figure::new(
                        "parse",
                        format!(
                            "Parse adversarial: rate on the {} page vs the {} page",
                            size_label(large.bytes),
                            size_label(small.bytes)
                        ),
                        "MB/s",
                    )
                    .compare(
                        small.adapter_mb_s,
                        large.adapter_mb_s,
                        Some(Goal::AtLeast(0.5)),
                    ),
                );
            }
            // A hostile document costs what its size costs: the paths never walk the extra keys or
            // levels, so time per page grows no faster than the bytes parsed.
            for doc in &p.json {
                f.push(
                    Figure::new(
                        "parse",
                        format!(
                            "Parse JSON {} document ({}) vs `serde_json::from_slice` into a Value alone",
                            doc.document,
                            size_label(doc.bytes)
                        ),
                        "µs/page",
                    )
                    .compare(doc.value_only_us_per_page, doc.us_per_page, None),
                );
            }
            if let [status, hostile @ ..] = p.json.as_slice() {
                for doc in hostile {
                    f.push(
                        Figure::new(
                            "parse",
                            format!(
                                "Parse JSON {} document ({}) vs the SeaTunnel status document ({})",
                                doc.document,
                                size_label(doc.bytes),
                                size_label(status.bytes)
                            ),
                            "µs/page",
                        )
                        .compare(status.us_per_page, doc.us_per_page, None),
                    );
                }
            }
        }
        if let Some(s) = &self.scale {
            let n = s.targets;
            let interval = s.interval_seconds;
            f.push(
                Figure::new(
                    "scale",
                    format!("Scale: CPU per round, {n} targets (limit: one core for the {interval} s interval)"),
                    "CPU s",
                )
                .compare(interval, s.cpu_seconds_per_round, Some(Goal::Below(1.0))),
            );
            f.push(
                Figure::new(
                    "scale",
                    format!("Scale: longest round, {n} targets (limit: the interval)"),
                    "s",
                )
                .compare(interval, s.max_round_seconds, Some(Goal::AtMost(1.0))),
            );
            f.push(
                Figure::new(
                    "scale",
                    format!(
                        "Scale: peak resident memory, VmHWM, {n} targets × {} wanted series (limit 256 MiB)",
                        s.wanted_series_per_target
                    ),
                    "MiB",
                )
                .compare(
                    256.0,
                    s.hwm_bytes as f64 / f64::from(1 << 20),
                    Some(Goal::Below(1.0)),
                ),
            );
            f.push(
                Figure::new(
                    "scale",
                    format!(
                        "Scale: RSS growth per tracked series ({} series)",
                        s.tracked_series
                    ),
                    "bytes",
                )
                .value(s.bytes_per_series),
            );
            f.push(
                Figure::new("scale", "Scale: RSS growth per target", "bytes")
                    .value(s.bytes_per_target),
            );
            f.push(
                Figure::new(
                    "scale",
                    "Scale: first round CPU (opens every connection)",
                    "CPU s",
                )
                .value(s.cold_round.cpu_seconds),
            );
            f.push(
                Figure::new(
                    "scale",
                    format!(
                        "Freshness: slowest change to answer, {} changes (limit: interval + round)",
                        s.freshness.delays_seconds.len()
                    ),
                    "s",
                )
                .compare(
                    s.freshness.limit_seconds,
                    s.freshness.max_seconds,
                    Some(Goal::AtMost(1.0)),
                ),
            );
            f.push(
                Figure::new(
                    "scale",
                    "Freshness: median change to answer (vs the interval)",
                    "s",
                )
                .compare(interval, s.freshness.p50_seconds, None),
            );
            let a = &s.answer_cost;
            f.push(
                Figure::new(
                    "scale",
                    format!(
                        "Answer cost: one hpa_target_replicas answer over the {n}-target store ({} series) vs an {}-target store, {} vs {} series in scope (in-process)",
                        s.tracked_series, a.small_targets, a.large_scope_series, a.small_scope_series
                    ),
                    "µs",
                )
                .compare(a.small_us, a.large_us, Some(Goal::AtMost(2.0))),
            );
            // The same small store with the large one's series per pod: its one workload has
            // fewer pods, so fewer series in scope, and the ratio mixes scope and store size.
            f.push(
                Figure::new(
                    "scale",
                    format!(
                        "Answer cost: the same over an {}-target store with {} series per pod, {} vs {} series in scope",
                        a.small_targets, s.wanted_series_per_target, a.large_scope_series, a.few_scope_series
                    ),
                    "µs",
                )
                .compare(a.few_us, a.large_us, None),
            );
            let objects = [
                (
                    &s.object_answer_cost,
                    "Object answer cost: one hpa_target_replicas Object query (statefulsets.apps/wN)",
                ),
                (
                    &s.object_discovered_answer_cost,
                    "Object answer cost with discovery: the same query, its pod set from the watch caches,",
                ),
            ];
            for (o, what) in objects {
                f.push(
                    Figure::new(
                        "scale",
                        format!(
                            "{what} over the {n}-target store vs an {}-target store, {} vs {} series in scope (in-process)",
                            o.small_targets, o.large_scope_series, o.small_scope_series
                        ),
                        "µs",
                    )
                    .compare(o.small_us, o.large_us, Some(Goal::AtMost(2.0))),
                );
            }
            let c = &s.object_answer_after_change;
            f.push(
                Figure::new(
                    "scale",
                    format!(
                        "Object answer with discovery {} ms after a pod changed, over the {n}-target store (p50 of {}, vs the same pause with nothing changed)",
                        c.pause_ms, c.samples
                    ),
                    "µs",
                )
                .compare(c.unchanged_p50_us, c.changed_p50_us, Some(Goal::AtMost(2.0))),
            );
            f.push(
                Figure::new(
                    "scale",
                    format!(
                        "Answer cost per series in scope ({} vs {} series)",
                        a.large_scope_series, a.few_scope_series
                    ),
                    "µs",
                )
                .compare(
                    a.few_us / a.few_scope_series.max(1) as f64,
                    a.large_us / a.large_scope_series.max(1) as f64,
                    None,
                ),
            );
        }
        if let Some(p) = &self.prometheus {
            let n = p.concurrent_requests;
            // Goal: about one query round per burst. Two rounds per 100 requests of the naive
            // count is the bound (a request arriving just as the shared query completes may
            // start a second one when the cache is off).
            let goal = Some(Goal::AtMost(2.0 / f64::from(n)));
            if let Some(q) = p.queries_per_request {
                f.push(
                    Figure::new(
                        "prometheus",
                        format!(
                            "Prometheus: queries per HPA request, {n} concurrent identical requests, cacheTtl 0 (vs a naive adapter)"
                        ),
                        "queries",
                    )
                    .compare(p.naive_queries_per_request, q, goal),
                );
            }
            f.push(
                Figure::new(
                    "prometheus",
                    format!(
                        "Prometheus: queries per HPA request, {n} concurrent identical requests, cacheTtl 10s (vs a naive adapter)"
                    ),
                    "queries",
                )
                .compare(
                    p.naive_queries_per_request,
                    p.queries_per_request_with_cache,
                    goal,
                ),
            );
        }
        if let Some(l) = &self.live {
            f.extend(super::live::figures(l));
        }
        if let Some(k) = &self.slowapi {
            f.extend(super::slowapi::figures(k));
        }
        for h in self.hostile.iter().chain(&self.hostile_held) {
            f.extend(super::hostile::figures(h));
        }
        if let Some(b) = &self.big_pages {
            f.extend(super::big_pages::figures(b));
        }
        if let Some(p) = &self.predictions {
            f.extend(super::predictions::figures(p));
        }
        if let Some(p) = &self.page {
            f.extend(super::page::figures(p));
        }
        if let Some(s) = &self.spread {
            f.extend(super::spread::figures(s));
        }
        if let Some(s) = &self.soak {
            f.extend(super::soak::figures(s));
        }
        if let Some(d) = &self.deletion_cost {
            f.extend(super::deletion_cost::figures(d));
        }
        if let Some(m) = &self.memory {
            f.extend(super::memory_attribution::figures(m));
        }
        self.figures = f;
    }

    /// Figures whose goal is not met.
    pub fn unmet(&self) -> Vec<&Figure> {
        self.figures
            .iter()
            .filter(|f| f.met == Some(false))
            .collect()
    }

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# Benchmarks\n");
        let _ = writeln!(
            md,
            "Generated by `{}`{}. Each figure is measured side by side with its limit in the same run; \
             the ratio is adapter / baseline and the goal applies to the ratio.\n",
            self.command,
            if self.quick { " (--quick: short smoke run, figures not meaningful)" } else { "" }
        );
        let _ = writeln!(md, "- Date: {}", self.date);
        let _ = writeln!(
            md,
            "- Machine: {} cores, {}",
            self.machine.cores, self.machine.cpu_model
        );
        let _ = writeln!(
            md,
            "- Load average (1/5/15 min) at start: {}; at end: {}",
            self.machine.load_average_start, self.machine.load_average_end
        );
        let _ = writeln!(md, "- Note: {}\n", self.note);
        let _ = writeln!(
            md,
            "| Figure | Unit | Baseline / limit | Adapter | Ratio | Goal | Met? |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|---|---|");
        let num = |v: Option<f64>| v.map(fmt_num).unwrap_or_else(|| "—".into());
        for fig in &self.figures {
            let met = match fig.met {
                Some(true) => "yes".to_string(),
                Some(false) => "**no**".to_string(),
                None if fig.note.is_some() => fig.note.clone().unwrap_or_default(),
                None => "—".to_string(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                fig.name,
                fig.unit,
                num(fig.baseline),
                num(fig.adapter),
                fig.ratio
                    .map(|r| format!("{r:.3}"))
                    .unwrap_or_else(|| "—".into()),
                fig.goal.map(Goal::text).unwrap_or_else(|| "—".into()),
                met
            );
        }
        let _ = writeln!(md, "\n## How each figure was measured\n");
        if let Some(s) = &self.serve {
            let _ = writeln!(
                md,
                "**Serve.** `GET {}` ({} response bytes) over TLS 1.3 keep-alive HTTP/1.1 from {} connections, \
                 each presenting a front-proxy client certificate and `X-Remote-User`/`X-Remote-Group` headers. \
                 The adapter is `api::server::serve_api` with a gatekeeper; the baseline is hyper's HTTP/1.1 \
                 connection driver behind the same rustls `ServerConfig` (same client-certificate verifier) \
                 returning the adapter's exact bytes and headers. The load generator checks every response \
                 (status 200, identical body). Arrangement: {}. Gatekeeper: {}. Baseline {} requests in {:.1} s, \
                 adapter {} requests in {:.1} s, adapter re-verifying every request {} requests in {:.1} s.\n",
                s.path,
                s.response_bytes,
                s.connections,
                s.arrangement,
                s.gatekeeper,
                s.baseline.requests,
                s.baseline.seconds,
                s.adapter.requests,
                s.adapter.seconds,
                s.adapter_verify_every_request.requests,
                s.adapter_verify_every_request.seconds
            );
        }
        if let Some(p) = &self.parse {
            let _ = writeln!(
                md,
                "**Parse.** Generated pages of ~5,000 series in families of 50 with HELP/TYPE lines and long \
                 label sets full of escapes (`\\\"`, `\\\\`, `\\n`, braces and commas inside quotes), with 10 \
                 wanted `hpa_expect_replicas` series in the middle. Limit: `memchr` counting every newline of \
                 the same bytes. Adapter: `exposition::parse` with the default metrics' wanted set, exactly as \
                 the scraper calls it. Full parse: `exposition::parse_all`. Each repeated for at least the \
                 minimum time after one warm-up call.\n"
            );
            for page in &p.pages {
                let _ = writeln!(
                    md,
                    "- {} bytes: newline scan {:.0} MB/s, adapter {:.0} MB/s, parse_all {:.0} MB/s",
                    page.bytes, page.newline_scan_mb_s, page.adapter_mb_s, page.parse_all_mb_s
                );
            }
            for page in &p.adversarial {
                let _ = writeln!(
                    md,
                    "- adversarial {} bytes: {} lines, each a wanted `hpa_expect_replicas` sample with {} escape-heavy labels \
                     filling it to just under the {}-byte line cap (the most the default limits admit); \
                     newline scan {:.0} MB/s, `exposition::parse_with` with the default limits {:.0} MB/s",
                    page.bytes, page.lines, page.labels_per_line, page.line_bytes_limit,
                    page.newline_scan_mb_s, page.adapter_mb_s
                );
            }
            for doc in &p.json {
                let _ = writeln!(
                    md,
                    "- JSON `{}` ({} bytes, {} samples): `JsonExtraction::read` with the `json:` block of \
                     examples/seatunnel-rest.yaml, {:.1} µs per page ({:.1}× the status document); \
                     `serde_json::from_slice` into a `Value` alone {:.1} µs",
                    doc.document,
                    doc.bytes,
                    doc.samples,
                    doc.us_per_page,
                    doc.ratio_to_status,
                    doc.value_only_us_per_page
                );
            }
            let _ = writeln!(md);
        }
        if let Some(s) = &self.scale {
            let _ = writeln!(
                md,
                "**Scale.** {} targets over {} workloads ({} bytes per page: ~40 escape-heavy unwanted series \
                 plus {} wanted series: each pod's `hpa_stateful_index`, for two controllers per workload \
                 the deciding `hpa_expect_replicas`, and further `hpa_expect_replicas` of 1 from other \
                 controller instances, which the store holds and the answer reads but which never \
                 change the maximum), served by `hpa-bridge-bench bench-exporter` as a separate process {} so its \
                 CPU is not counted. The adapter side is `source::scrape::Scraper` (concurrency {}) filling \
                 `Adapter`'s store on a default multi-thread tokio runtime, as `serve` runs it. CPU is this \
                 process's user+system time (/proc/self/stat) around each round; memory is VmRSS/VmHWM from \
                 /proc/self/status (the scale part runs first, so nothing else has grown the heap). The first \
                 round opens every connection and is reported separately; {} rounds were measured after it.\n",
                s.targets,
                s.workloads,
                s.page_bytes,
                s.wanted_series_per_target,
                if s.distinct_hosts {
                    "with one loopback address per target (127.77.x.y, as pods have distinct IPs, so the client's per-host pool keeps one connection per target)"
                } else {
                    "on one loopback address (distinct addresses were unavailable)"
                },
                s.concurrency,
                s.rounds.len()
            );
            for (i, r) in std::iter::once(&s.cold_round).chain(&s.rounds).enumerate() {
                let _ = writeln!(
                    md,
                    "- round {i}{}: {:.3} s wall, {:.2} CPU s, {} failed targets",
                    if i == 0 { " (cold)" } else { "" },
                    r.seconds,
                    r.cpu_seconds,
                    r.failed_targets
                );
            }
            let _ = writeln!(
                md,
                "- RSS before the store: {:.1} MiB; after the rounds: {:.1} MiB (VmHWM {:.1} MiB); {} tracked series",
                s.rss_bytes_before as f64 / f64::from(1 << 20),
                s.rss_bytes as f64 / f64::from(1 << 20),
                s.hwm_bytes as f64 / f64::from(1 << 20),
                s.tracked_series
            );
            let _ = writeln!(
                md,
                "- Freshness: the exporter's value for one workload was changed at offsets spread over the \
                 interval while the scrape loop ran every {} s; delay until `Adapter::answer` carried it \
                 (polled every 5 ms): {} s\n",
                s.interval_seconds,
                s.freshness
                    .delays_seconds
                    .iter()
                    .map(|d| format!("{d:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let a = &s.answer_cost;
            let _ = writeln!(
                md,
                "**Answer cost.** `Adapter::answer(\"hpa_target_replicas\", \"default\", hpa_target_name=wN)` \
                 in-process (no HTTP, no answer reuse), round-robin over the workloads, on the store above \
                 ({} targets, {} series, {} workloads: {} pods and {} wanted series per workload) against two \
                 stores of {} targets in one workload, filled the same way by their own exporter processes \
                 and `Scraper`s in the same run: one whose pods export {} wanted series each, so that its \
                 workload has as many series in scope as a large-store workload and the two differ only in \
                 the size of the store (the goal), and one whose pods export {} each as on the large store \
                 ({} series in scope). The three alternate in 20 ms slices until each has run {:.1} s: {} \
                 answers over the large store, {} and {} over the small ones. Every workload was first \
                 checked to get a value, not a refusal.\n",
                s.targets,
                s.tracked_series,
                s.workloads,
                s.targets / s.workloads.max(1),
                a.large_scope_series,
                a.small_targets,
                a.small_scope_series / a.small_targets.max(1),
                s.wanted_series_per_target,
                a.few_scope_series,
                a.budget_seconds,
                a.large_answers,
                a.small_answers,
                a.few_answers
            );
            let o = &s.object_answer_cost;
            let _ = writeln!(
                md,
                "**Object answer cost.** The same three stores and slices, each answer the Object \
                 query naming StatefulSet `wN` (custom.metrics.k8s.io, no `metricLabelSelector`, \
                 no discovery, so the scope is the series whose workload labels name it): {} \
                 answers over the large store, {} and {} over the small ones; {:.1} µs against \
                 {:.1} µs.\n",
                o.large_answers, o.small_answers, o.few_answers, o.large_us, o.small_us
            );
            let d = &s.object_discovered_answer_cost;
            let _ = writeln!(
                md,
                "**Object answer cost with discovery.** The Object query again over three stores \
                 of the same shapes filled through discovery (kube-runtime reflectors against a \
                 loopback API server listing the exporters' pods and StatefulSets), so its scope \
                 also holds the series of the workload's own pods in the namespace: {} answers \
                 over the large store, {} and {} over the small ones; {:.1} µs against {:.1} µs.\n",
                d.large_answers, d.small_answers, d.few_answers, d.large_us, d.small_us
            );
            let c = &s.object_answer_after_change;
            let _ = writeln!(
                md,
                "**Object answer after a pod change.** Over the large discovered store, {} times, each first in turn: one Object answer {} ms after nothing changed, and one {} ms after a pod's MODIFIED event (a new annotation, sent by the loopback API server on the open pod watch) reached discovery (`Cluster::version` moved); an HPA asks seconds after the last change, not at once. p50 {:.1} µs unchanged, {:.1} µs changed (p90 {:.1} µs). Discovery's pods' facts were worked out {} times by an answer's ask and {} times ahead of the asks by its publisher.\n",
                c.samples,
                c.pause_ms,
                c.pause_ms,
                c.unchanged_p50_us,
                c.changed_p50_us,
                c.changed_p90_us,
                c.facts_built_on_ask,
                c.facts_built_ahead
            );
        }
        if let Some(l) = &self.live {
            let _ = writeln!(md, "{}", super::live::note(l));
        }
        if let Some(k) = &self.slowapi {
            let _ = writeln!(md, "{}", super::slowapi::note(k));
        }
        for h in self.hostile.iter().chain(&self.hostile_held) {
            let _ = writeln!(md, "{}", super::hostile::note(h));
        }
        if let Some(b) = &self.big_pages {
            let _ = writeln!(md, "{}", super::big_pages::note(b));
        }
        if let Some(p) = &self.prometheus {
            let _ = writeln!(
                md,
                "**Prometheus.** {} Burst wall time with cacheTtl 0: {:.1} ms; cache hits (shared \
                 queries) counted by the source: {}. Every request answered {}.\n",
                p.note, p.burst_ms, p.cache_hits_coalescing_only, p.answer
            );
        }
        if let Some(p) = &self.predictions {
            let _ = writeln!(md, "{}", super::predictions::note(p));
        }
        if let Some(p) = &self.page {
            let _ = writeln!(md, "{}", super::page::note(p));
        }
        if let Some(s) = &self.spread {
            let _ = writeln!(md, "{}", super::spread::note(s));
        }
        if let Some(s) = &self.soak {
            let _ = writeln!(md, "{}", super::soak::note(s));
        }
        if let Some(d) = &self.deletion_cost {
            let _ = writeln!(md, "{}", super::deletion_cost::note(d));
        }
        if let Some(m) = &self.memory {
            let _ = writeln!(md, "{}", super::memory_attribution::note(m));
        }
        md
    }

    /// Write `BENCHMARKS.md` (keeping notes below [`NOTES_MARKER`]) and `benchmarks.json`.
    pub fn write(&self, dir: &Path) -> Result<(), BenchError> {
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|source| BenchError::Write {
                path: path.display().to_string(),
                source,
            })
        };
        std::fs::create_dir_all(dir).map_err(|source| BenchError::Write {
            path: dir.display().to_string(),
            source,
        })?;
        let mut md = self.markdown();
        let kept = std::fs::read_to_string(dir.join("BENCHMARKS.md"))
            .ok()
            .and_then(|old| old.split_once(NOTES_MARKER).map(|(_, n)| n.to_owned()));
        md.push_str(NOTES_MARKER);
        md.push_str(kept.as_deref().unwrap_or("\n"));
        write("BENCHMARKS.md", &md)?;
        let json = serde_json::to_string_pretty(self).map_err(|e| BenchError::Write {
            path: "benchmarks.json".into(),
            source: std::io::Error::other(e),
        })?;
        write("benchmarks.json", &(json + "\n"))
    }
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}
