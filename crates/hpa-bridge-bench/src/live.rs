//! Serve under live load: the serve part's request path (TLS keep-alive, front-proxy
//! authentication, the real `AuthGate`) over a store of thousands of targets that the real
//! `Scraper` keeps rewriting, querying many workloads round-robin, against the bare server.
//! Measured with the rendered-answer reuse on (as served) and off (every request computes its
//! answer: what a store that changes between any two requests costs).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::figure::{Figure, Goal};
use super::fleet::{self, Scraped};
use super::serve::{self, Client, LoadFigures, Pki};
use super::{BenchError, InPart, Plan};
use hpa_bridge_server::api::ApiHandler;

#[derive(Clone, Debug)]
pub struct LivePlan {
    pub targets: usize,
    pub workloads: usize,
    pub wanted_series: usize,
    pub page_bytes: usize,
    pub interval: Duration,
    /// Each measured run lasts one interval, so it holds exactly one scrape round.
    pub run: Duration,
}

impl LivePlan {
    pub fn new(quick: bool) -> Self {
        if quick {
            LivePlan {
                targets: 100,
                workloads: 10,
                wanted_series: 10,
                page_bytes: 4 * 1024,
                interval: Duration::from_millis(500),
                run: Duration::from_millis(500),
            }
        } else {
            LivePlan {
                targets: 5000,
                workloads: 200,
                wanted_series: 10,
                page_bytes: 8 * 1024,
                interval: Duration::from_secs(10),
                run: Duration::from_secs(10),
            }
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveResult {
    pub targets: usize,
    pub workloads: usize,
    pub tracked_series: usize,
    pub interval_seconds: f64,
    pub connections: usize,
    pub arrangement: String,
    pub baseline: LoadFigures,
    pub reuse_on: LoadFigures,
    pub reuse_off: LoadFigures,
    /// The same load through the custom metrics API (Object queries).
    pub object: ObjectLoad,
    /// Store generations per second over the measurement: how live the store was.
    pub generations_per_second: f64,
    /// Scrape intervals elapsed during the measurement.
    pub intervals: f64,
    /// Recommendations changed per second during the measurement (each workload's once per
    /// interval), so reused answers must follow real changes, not only new timestamps.
    pub value_changes_per_second: f64,
}

const PART: &str = "live";

pub fn run(plan: &Plan, exe: &Path) -> Result<LiveResult, BenchError> {
    let live = &plan.live;
    let (spec, exporter) = fleet::start_exporter(
        exe,
        live.targets,
        live.workloads,
        live.page_bytes,
        live.wanted_series,
    )?;
    // The scrape loop runs on its own 1-worker runtime for the whole part, so the baseline
    // and both adapter runs share the machine with it alike; only the adapters read the store
    // it rewrites.
    let scrape_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-scrape")
        .enable_all()
        .build()
        .part(PART)?;
    let scraped = Scraped::new(&spec, &exporter, live.interval, fleet::SCRAPE_CONCURRENCY)?;
    scrape_runtime.block_on(scraped.scraper.scrape_round());
    if scraped.failed_targets() > 0 {
        return Err(BenchError::part(
            PART,
            format!(
                "{} of {} targets failed the first scrape",
                scraped.failed_targets(),
                live.targets
            ),
        ));
    }
    let scrape_loop = {
        let _entered = scrape_runtime.enter();
        scraped.spawn_loop(live.interval)
    };
    // Each workload's leading controller changes its recommendation once per interval, the
    // workloads taking turns, on the scrape runtime (the exporter is another process).
    let value_changes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let changer = {
        let _entered = scrape_runtime.enter();
        let control = exporter.control().to_string();
        let (workloads, changes) = (live.workloads.max(1), value_changes.clone());
        let period = live.interval / workloads as u32;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            for n in 0usize.. {
                tick.tick().await;
                let w = n % workloads;
                let raised = (n / workloads) % 2 == 0;
                let value = super::exporter::initial_recommendation(w) + u32::from(raised);
                if fleet::set_value(&control, w, value).await.is_ok() {
                    changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        })
    };

    let pki = Pki::generate()?;
    let reuse_on = serve::start_adapter(
        "adapter-reuse",
        &pki,
        Arc::new(ApiHandler::new(scraped.adapter.clone())),
    )?;
    let reuse_off = serve::start_adapter(
        "adapter-fresh",
        &pki,
        Arc::new(ApiHandler::new(scraped.adapter.clone()).without_answer_reuse()),
    )?;
    // Each client asks every workload's query round-robin against the bare server returning
    // the first one's answer and the two adapters. Answers differ by workload and change with
    // every scrape: each response must be a 200.
    let measure = |paths: Vec<String>| -> Result<_, BenchError> {
        let (baseline, _) = serve::start_baseline(&pki, reuse_on.addr, &paths[0])?;
        let client = Arc::new(Client::new(&pki, paths, None)?);
        let measured = serve::measure_alternately(
            client,
            &[&baseline, &reuse_on, &reuse_off],
            plan.serve_connections,
            plan.serve_warmup,
            live.run,
            plan.serve_repeats,
        );
        Ok((baseline, measured))
    };
    let generation_before = scraped.store.generation();
    let changes_before = value_changes.load(std::sync::atomic::Ordering::Relaxed);
    let started = Instant::now();
    let (baseline, measured) =
        measure(serve::workload_paths("hpa_target_replicas", live.workloads))?;
    let generations = scraped.store.generation() - generation_before;
    let changes = value_changes.load(std::sync::atomic::Ordering::Relaxed) - changes_before;
    let seconds = started.elapsed().as_secs_f64();
    // The same load through the custom metrics API: each workload's Object query.
    let (object_baseline, object_measured) =
        measure(serve::object_paths("hpa_target_replicas", live.workloads))?;
    drop(object_baseline);
    changer.abort();
    let intervals = seconds / live.interval.as_secs_f64();
    scrape_loop.abort();
    drop(reuse_on);
    drop(reuse_off);
    drop(baseline);
    scrape_runtime.shutdown_background();
    let [baseline, reuse_on, reuse_off]: [LoadFigures; 3] = measured?
        .try_into()
        .map_err(|_| BenchError::part(PART, "expected three measurements"))?;
    let [object_baseline, object_reuse_on, object_reuse_off]: [LoadFigures; 3] = object_measured?
        .try_into()
        .map_err(|_| BenchError::part(PART, "expected three Object measurements"))?;
    Ok(LiveResult {
        targets: live.targets,
        workloads: live.workloads,
        tracked_series: scraped.tracked_series(),
        interval_seconds: live.interval.as_secs_f64(),
        connections: plan.serve_connections,
        arrangement: serve::arrangement(plan, live.run),
        baseline,
        reuse_on,
        reuse_off,
        object: ObjectLoad {
            baseline: object_baseline,
            reuse_on: object_reuse_on,
            reuse_off: object_reuse_off,
        },
        generations_per_second: generations as f64 / seconds,
        intervals,
        value_changes_per_second: changes as f64 / seconds,
    })
}

/// The Object queries' load, measured after the External one over the same live store.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectLoad {
    pub baseline: LoadFigures,
    pub reuse_on: LoadFigures,
    pub reuse_off: LoadFigures,
}

pub fn figures(r: &LiveResult) -> Vec<Figure> {
    let what = format!(
        "{} targets scraped every {} s, {} workloads round-robin",
        r.targets, r.interval_seconds, r.workloads
    );
    let mut f = Vec::new();
    let fronts = [
        ("", &r.baseline, &r.reuse_off, &r.reuse_on),
        (
            "Object queries, ",
            &r.object.baseline,
            &r.object.reuse_off,
            &r.object.reuse_on,
        ),
    ];
    for (front, b, off, on) in fronts {
        for (reuse, a, goals) in [
            (
                "answer reuse off",
                off,
                [Some(Goal::AtLeast(0.5)), Some(Goal::AtMost(3.0))],
            ),
            ("answer reuse on", on, [None, None]),
        ] {
            let reuse = format!("{front}{reuse}");
            f.push(
                Figure::new(
                    "live",
                    format!("Serve under live load: requests/s ({what}; {reuse})"),
                    "req/s",
                )
                .compare(b.requests_per_second, a.requests_per_second, goals[0]),
            );
            for (name, base, this, goal) in [
                ("p50", b.p50_us, a.p50_us, None),
                ("p99", b.p99_us, a.p99_us, goals[1]),
                ("p99.9", b.p999_us, a.p999_us, None),
            ] {
                f.push(
                    Figure::new(
                        "live",
                        format!("Serve under live load: {name} latency ({reuse})"),
                        "µs",
                    )
                    .compare(base, this, goal),
                );
            }
            // What bounds the ratio above while the adapter's one worker is saturated, and
            // what does not move with the machine's other load: the CPU time a request costs.
            if let (Some(base), Some(this)) =
                (b.server_cpu_us_per_request, a.server_cpu_us_per_request)
            {
                f.push(
                    Figure::new(
                        "live",
                        format!("Serve under live load: server CPU per request ({reuse})"),
                        "µs",
                    )
                    .compare(base, this, None),
                );
            }
        }
    }
    f
}

pub fn note(r: &LiveResult) -> String {
    format!(
        "**Serve under live load.** The serve part's client (TLS 1.3 keep-alive from {} connections, \
         front-proxy client certificate and `X-Remote-*` headers) asks `hpa_target_replicas` for {} \
         workloads round-robin, each connection from its own starting point, and requires status 200. \
         The adapter is `serve_api` with the real `AuthGate` over the store of {} targets ({} series) \
         that the real `Scraper` (built by `EngineBuilder` as `serve` builds it) rescrapes every {} s \
         from the bench exporter process, on its own 1-worker runtime for the whole part, so the \
         baseline runs beside the same scrape load. The baseline is the bare hyper + rustls server \
         returning the first workload's answer bytes. Answer reuse on: `ApiHandler` as served; off: \
         `ApiHandler::without_answer_reuse`, every request computes its answer. The scraper \
         runs as `serve` runs it (`Scraper::run`: each target at its own phase of the interval), \
         so the store changed continuously: {:.0} generations per second on average over {:.1} \
         intervals of measurement. Meanwhile each workload's leading controller changed its \
         recommendation once per interval, the workloads taking turns ({:.1} changes per second), \
         so a reused answer had to follow value changes, not only new timestamps; reuse is keyed \
         on the workload's own series (`Engine::version`) and lasts at most 1 s. \
         Server CPU per request: the time each server's runtime threads ran on a CPU during the \
         measured runs (the kernel's `schedstat`), over the requests answered; with the \
         adapter's one worker saturated, its requests per second are about one over this. \
         Arrangement: {}. Requests: baseline \
         {}, reuse on {}, reuse off {}. Then the same clients asked each workload's Object \
         query (`/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/statefulsets.apps/wN/\
         hpa_target_replicas`) over the same live store, against a baseline returning the first \
         workload's Object answer: requests baseline {}, reuse on {}, reuse off {}.\n",
        r.connections,
        r.workloads,
        r.targets,
        r.tracked_series,
        r.interval_seconds,
        r.generations_per_second,
        r.intervals,
        r.value_changes_per_second,
        r.arrangement,
        r.baseline.requests,
        r.reuse_on.requests,
        r.reuse_off.requests,
        r.object.baseline.requests,
        r.object.reuse_on.requests,
        r.object.reuse_off.requests
    )
}
