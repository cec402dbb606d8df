//! Scale: many targets scraped from a separate exporter process, measured on the adapter side
//! only (this process's CPU time and resident memory).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::answer_cost;
use super::exporter::ExporterSpec;
use super::fleet::{self, ExporterProcess, Scraped};
use serde_json::json;

use super::kube_objects::Objects;
use super::serve::ServerThread;
use super::{cpu_time, cpu_time_ticks, memory, quantile, BenchError, InPart};
use hpa_bridge_engine::engine::{Assembly, MetricQuery};
use hpa_bridge_kit::kube_api::KubeApi;
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_sources::source::discovery::Discovery;

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
    pub wanted_series: usize,
    /// Answers timed after a pod change, and as many with none (`after_change`).
    pub after_change_samples: usize,
}

/// The small store the answer cost is compared against: as many targets as the serve part's
/// `lobby` store, one workload.
const SMALL_STORE_TARGETS: usize = 8;

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
            answer_time: Duration::from_secs(2),
            wanted_series: 10,
            after_change_samples: 40,
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
            wanted_series: 10,
            after_change_samples: 3,
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
    pub wanted_series_per_target: usize,
    /// One in-process `hpa_target_replicas` answer over this store against one over a small
    /// store (no HTTP).
    pub answer_cost: answer_cost::AnswerCost,
    /// The same, for the Object query naming the workload (custom.metrics.k8s.io).
    pub object_answer_cost: answer_cost::AnswerCost,
    /// The Object query again, over stores whose targets and workloads come from discovery,
    /// so its scope adds the series of the workload's own pods out of the namespace's.
    pub object_discovered_answer_cost: answer_cost::AnswerCost,
    /// The discovered Object answer over the large store a while after a pod changed, against
    /// the same answer with nothing changed.
    pub object_answer_after_change: AfterChange,
}

/// One answer timed `pause_ms` after a pod event reached discovery (an HPA asks seconds after
/// the last change, not at once), against one timed after the same pause with no change.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AfterChange {
    pub samples: usize,
    pub pause_ms: u64,
    pub unchanged_p50_us: f64,
    pub changed_p50_us: f64,
    pub changed_p90_us: f64,
    /// Who worked out discovery's pods' facts over the samples (`Discovery::pod_facts_builds`).
    pub facts_built_on_ask: u64,
    pub facts_built_ahead: u64,
}

/// The pause between a change reaching discovery and the answer timed: far under the 15 s
/// between an HPA's asks, and long enough for discovery's publisher to have gone over every
/// pod once.
const AFTER_CHANGE_PAUSE: Duration = Duration::from_millis(300);

/// Alternately: one answer after a pause with nothing changed, and one after a pause that
/// follows a pod's MODIFIED event reaching discovery (its `Cluster::version` moved).
async fn after_change(
    store: &DiscoveredStore,
    workloads: usize,
    samples: usize,
) -> Result<AfterChange, BenchError> {
    use hpa_bridge_rules::cluster::Cluster;
    let adapter = store.engine.adapter();
    let discovery = &store.discovery;
    let before = discovery.pod_facts_builds();
    let mut unchanged = Vec::with_capacity(samples);
    let mut changed = Vec::with_capacity(samples);
    for i in 0..samples {
        let query = answer_cost::Front::Object.query(i % workloads.max(1))?;
        let timed = || async {
            tokio::time::sleep(AFTER_CHANGE_PAUSE).await;
            let started = Instant::now();
            let answer = adapter.answer_computed(&query).await.part(PART)?;
            let spent = started.elapsed();
            if answer.value().is_none() {
                return Err(BenchError::part(PART, format!("w{i} was refused")));
            }
            Ok::<_, BenchError>(spent.as_secs_f64() * 1e6)
        };
        let change = || async {
            let version = discovery.version();
            let deadline = Instant::now() + Duration::from_secs(10);
            let rv = 2 + i as u64;
            let pod = store.objects.pod_name(i);
            let annotation =
                json!({"metadata": {"annotations": {"bench/changed": rv.to_string()}}});
            if !store.api.merge_pod("default", &pod, &annotation) {
                return Err(BenchError::part(PART, format!("no pod {pod} to change")));
            }
            while discovery.version() == version {
                if Instant::now() > deadline {
                    return Err(BenchError::part(
                        PART,
                        "a pod event never reached discovery",
                    ));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok(())
        };
        // Each kind goes first in turn, so neither always follows the other's answer.
        if i % 2 == 0 {
            unchanged.push(timed().await?);
            change().await?;
            changed.push(timed().await?);
        } else {
            change().await?;
            changed.push(timed().await?);
            unchanged.push(timed().await?);
        }
    }
    let p = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        let at = (v.len().saturating_sub(1) as f64 * q).round() as usize;
        v.get(at).copied().unwrap_or(0.0)
    };
    let after = discovery.pod_facts_builds();
    Ok(AfterChange {
        samples,
        pause_ms: AFTER_CHANGE_PAUSE.as_millis() as u64,
        unchanged_p50_us: p(&mut unchanged, 0.5),
        changed_p50_us: p(&mut changed, 0.5),
        changed_p90_us: p(&mut changed, 0.9),
        facts_built_on_ask: after.on_ask - before.on_ask,
        facts_built_ahead: after.ahead - before.ahead,
    })
}

const PART: &str = "scale";

pub fn run(plan: &ScalePlan, exe: &Path) -> Result<ScaleResult, BenchError> {
    let (spec, exporter) = fleet::start_exporter(
        exe,
        plan.targets,
        plan.workloads,
        plan.page_bytes,
        plan.wanted_series,
    )?;
    let runtime = fleet::default_runtime(PART)?;
    let (rss_before, _) = memory().unwrap_or_default();
    let result = runtime.block_on(measure(plan, &spec, &exporter, exe));
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
    exe: &Path,
) -> Result<ScaleResult, BenchError> {
    let fleet = Scraped::new(spec, exporter, plan.interval, plan.concurrency)?;
    let adapter = fleet.adapter.clone();
    let scraper = fleet.scraper.clone();
    let failed = || fleet.failed_targets();
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
    let tracked_series = fleet.tracked_series();
    let cold_round = rounds.remove(0);
    if let Some(bad) = rounds.iter().find(|r| r.failed_targets > 0) {
        return Err(BenchError::part(
            PART,
            format!(
                "{} of {} targets failed their scrape; see the warnings above",
                bad.failed_targets, plan.targets
            ),
        ));
    }
    let cpu_seconds_per_round =
        rounds.iter().map(|r| r.cpu_seconds).sum::<f64>() / rounds.len().max(1) as f64;
    let max_round_seconds = rounds.iter().map(|r| r.seconds).fold(0.0, f64::max);

    // Freshness: the scrape loop runs as in `serve`; the exporter's value changes at offsets
    // spread over the interval and the answer is polled until it carries the new value.
    let scrape_loop = fleet.spawn_loop(plan.interval);
    let selector = LabelSelector::parse("hpa_target_name=w0").part(PART)?;
    let offsets = [0.13, 0.71, 0.42, 0.93, 0.27, 0.58];
    let mut delays = Vec::new();
    for j in 0..plan.freshness_changes {
        tokio::time::sleep(plan.interval.mul_f64(offsets[j % offsets.len()])).await;
        let value = 100 + j as u32;
        fleet::set_value(exporter.control(), 0, value).await?;
        let changed = Instant::now();
        let give_up = changed + plan.interval * 3 + Duration::from_secs(5);
        loop {
            let answer = adapter
                .answer_computed(&MetricQuery::external(
                    "hpa_expect_replicas",
                    "default",
                    selector.clone(),
                ))
                .await
                .part(PART)?;
            if answer.value() == Some(u64::from(value)) {
                delays.push(changed.elapsed().as_secs_f64());
                break;
            }
            if Instant::now() > give_up {
                scrape_loop.abort();
                return Err(BenchError::part(
                    PART,
                    format!(
                        "the change to {value} never reached the answer (last: {})",
                        hpa_bridge_rules::policy::summary(&answer)
                    ),
                ));
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

    // What one HPA query costs over a store this size, against the same query over small
    // stores filled the same way (their own exporters and scrapers) in the same run: one whose
    // workload has as many series in scope (its 8 pods export more of them), so only the size
    // of the store differs, and one with as many series per pod, so its scope is smaller too.
    let large_scope = plan.targets / plan.workloads.max(1) * plan.wanted_series;
    let per_pod_same_scope = large_scope.div_ceil(SMALL_STORE_TARGETS);
    let small = small_store(plan, exe, per_pod_same_scope).await?;
    let few = small_store(plan, exe, plan.wanted_series).await?;
    let mut costs = Vec::new();
    for front in [answer_cost::Front::External, answer_cost::Front::Object] {
        let sides = answer_cost::Sides {
            large: (
                answer_cost::Side::new(&adapter, plan.workloads, front).await?,
                large_scope,
            ),
            small: (
                answer_cost::Side::new(&small.0.adapter, 1, front).await?,
                SMALL_STORE_TARGETS * per_pod_same_scope,
            ),
            few: (
                answer_cost::Side::new(&few.0.adapter, 1, front).await?,
                SMALL_STORE_TARGETS * plan.wanted_series,
            ),
            small_targets: SMALL_STORE_TARGETS,
        };
        costs.push(answer_cost::compare(sides, plan.answer_time).await?);
    }
    let [answer_cost, object_answer_cost]: [answer_cost::AnswerCost; 2] = costs
        .try_into()
        .map_err(|_| BenchError::part("answer cost", "expected two measurements"))?;
    drop(small);
    drop(few);

    // The Object query once more over the same three shapes, each store now filled through
    // discovery of the pods a loopback API server lists (crates/hpa-bridge-kit/src/kube_api.rs), as `serve` with
    // `scrape.kubernetes` fills it: the query's pod set is the namespace's pods of the
    // workload, read from the watch caches.
    let large = discovered_store(plan, spec, exporter).await?;
    let (small_spec, small_exporter) = fleet::start_exporter(
        exe,
        SMALL_STORE_TARGETS,
        1,
        plan.page_bytes,
        per_pod_same_scope,
    )?;
    let small = discovered_store(plan, &small_spec, &small_exporter).await?;
    let (few_spec, few_exporter) = fleet::start_exporter(
        exe,
        SMALL_STORE_TARGETS,
        1,
        plan.page_bytes,
        plan.wanted_series,
    )?;
    let few = discovered_store(plan, &few_spec, &few_exporter).await?;
    let object = answer_cost::Front::Object;
    let sides = answer_cost::Sides {
        large: (
            answer_cost::Side::new(large.engine.adapter(), plan.workloads, object).await?,
            large_scope,
        ),
        small: (
            answer_cost::Side::new(small.engine.adapter(), 1, object).await?,
            SMALL_STORE_TARGETS * per_pod_same_scope,
        ),
        few: (
            answer_cost::Side::new(few.engine.adapter(), 1, object).await?,
            SMALL_STORE_TARGETS * plan.wanted_series,
        ),
        small_targets: SMALL_STORE_TARGETS,
    };
    let object_discovered_answer_cost = answer_cost::compare(sides, plan.answer_time).await?;
    let object_answer_after_change =
        after_change(&large, plan.workloads, plan.after_change_samples).await?;
    drop((large, small, few, small_exporter, few_exporter));

    Ok(ScaleResult {
        targets: plan.targets,
        workloads: plan.workloads,
        page_bytes: plan.page_bytes,
        wanted_series_per_target: plan.wanted_series,
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
        answer_cost,
        object_answer_cost,
        object_discovered_answer_cost,
        object_answer_after_change,
    })
}

/// An engine whose targets and workloads come from discovery (kube-runtime reflectors)
/// against its own loopback API server listing the exporter's pods and StatefulSets, scraped
/// once. Dropped in field order: the engine, then the reflectors, then the API server.
struct DiscoveredStore {
    engine: Assembly,
    discovery: Arc<Discovery>,
    _server: ServerThread,
    /// What the API server lists, and changes pods in.
    objects: Objects,
    api: KubeApi,
}

async fn discovered_store(
    plan: &ScalePlan,
    spec: &ExporterSpec,
    exporter: &ExporterProcess,
) -> Result<DiscoveredStore, BenchError> {
    let objects = Objects::new(spec, exporter.port());
    let api = objects.api(Duration::ZERO, None);
    let served = api.clone();
    let server = ServerThread::start("kubeapi-scale", move |listener| {
        served.serve_plain(listener)
    })?;
    // Samples stay fresh for the whole measurement after one round.
    let config = fleet::config(
        plan.interval,
        "  staleAfter: 1h\n  kubernetes:\n    namespaces: [default]\n",
    )?;
    let fleet::Discovered {
        engine, discovery, ..
    } = fleet::discovered(&format!("http://{}", server.addr), config).await?;
    engine
        .scraper()
        .ok_or_else(|| BenchError::part(PART, "the discovered engine built no scraper"))?
        .scrape_round()
        .await;
    let failed = fleet::failed_targets(&engine.targets());
    if failed > 0 {
        return Err(BenchError::part(
            PART,
            format!(
                "{failed} of {} discovered targets failed their scrape",
                spec.targets
            ),
        ));
    }
    Ok(DiscoveredStore {
        engine,
        discovery,
        _server: server,
        objects,
        api,
    })
}

/// An 8-target store of one workload whose pods export `wanted_series` each, scraped once.
async fn small_store(
    plan: &ScalePlan,
    exe: &Path,
    wanted_series: usize,
) -> Result<(Scraped, ExporterProcess), BenchError> {
    let (spec, exporter) =
        fleet::start_exporter(exe, SMALL_STORE_TARGETS, 1, plan.page_bytes, wanted_series)?;
    let small = Scraped::new(&spec, &exporter, plan.interval, plan.concurrency)?;
    small.scraper.scrape_round().await;
    if small.failed_targets() > 0 {
        return Err(BenchError::part(
            PART,
            "a small store's exporter failed its scrape",
        ));
    }
    Ok((small, exporter))
}
