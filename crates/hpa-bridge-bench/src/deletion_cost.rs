//! `deletion-cost`: the pod-deletion-cost writer under churn. One opted-in
//! Deployment with a ReplicaSet of Running, Ready pods, each exporting its stateful index from
//! the bench exporter process; real discovery (kube-runtime reflectors) against a loopback API
//! server that applies the writer's merge patches and shows them to the watches
//! (the kit's, crates/hpa-bridge-kit/src/kube_api.rs); the real `Scraper` and the real `DeletionCostWriter`, assembled as
//! `serve --write-deletion-cost` assembles them. Each scrape interval a share of the pods flip
//! their index between 0 and their ordinal + 1, spread over the interval.
//!
//! Two sides over the same store, one after the other: the writer on, then the writer off
//! with each cost set by the bench in the API server's object at the moment of the change (a
//! writer with no lag, no planning and no requests, so both sides carry one MODIFIED event
//! per change). The floor's answer latency through the serve path is measured on both.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector as Selector, ObjectMeta, OwnerReference,
};
use serde::Serialize;
use serde_json::{json, Value};

use super::exporter::{self, ExporterSpec};
use super::figure::{Figure, Goal};
use super::fleet::{self, ExporterProcess};
use super::kube_objects::{meta, typed_json};
use super::serve::{self, Client, LoadFigures, Pki, ServerThread};
use super::{quantile, BenchError, InPart, Plan};
use hpa_bridge_duties::deletion_cost::{
    DeletionCostWriter, Leadership, LeaseTimings, DEFAULT_LEASE_NAME, FIELD_MANAGER,
};
use hpa_bridge_engine::engine::{Adapter, MetricQuery};
use hpa_bridge_kit::kube_api::{KubeApi, Patched};
use hpa_bridge_rules::clock::{Clock, SystemClock};
use hpa_bridge_rules::cluster::{
    DELETION_COST_FROM_INDEX, DELETION_COST_OPT_IN, POD_DELETION_COST,
};
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_server::api::ApiHandler;
use hpa_bridge_sources::source::discovery::Discovery;
use hpa_bridge_store::store::Store;
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

const PART: &str = "deletion-cost";
const METRIC: &str = "hpa_stateful_floor";
const DEPLOYMENT: &str = "w0";
const REPLICA_SET: &str = "w0-5d4f8";
/// Coprime with every pod count used, so `i * STEP mod pods` visits each pod once per cycle,
/// scattered over the ordinals.
const STEP: usize = 7919;

#[derive(Clone, Debug)]
pub struct DeletionCostPlan {
    pub pods: usize,
    pub interval: Duration,
    pub qps: f64,
    /// Pods whose index changes per scrape interval, in percent of the pods.
    pub churn_percent: usize,
    /// Scrape intervals of churn on each side.
    pub rounds: usize,
    /// Connections asking for the floor meanwhile.
    pub connections: usize,
    /// The window the peak patch rate is counted over.
    pub rate_window: Duration,
}

impl DeletionCostPlan {
    pub fn new(quick: bool) -> Self {
        if quick {
            DeletionCostPlan {
                pods: 40,
                interval: Duration::from_millis(500),
                qps: 50.0,
                churn_percent: 10,
                rounds: 4,
                connections: 2,
                rate_window: Duration::from_secs(1),
            }
        } else {
            // `serve`'s defaults: a 10 s scrape interval and 10 patches per second.
            DeletionCostPlan {
                pods: 1000,
                interval: Duration::from_secs(10),
                qps: 10.0,
                churn_percent: 5,
                rounds: 6,
                connections: 4,
                rate_window: Duration::from_secs(5),
            }
        }
    }

    fn changes_per_round(&self) -> usize {
        (self.pods * self.churn_percent / 100).max(1)
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionCostResult {
    pub pods: usize,
    pub interval_seconds: f64,
    pub qps: f64,
    pub churn_percent: usize,
    pub rounds: usize,
    pub connections: usize,
    /// Index changes while the writer ran, and the patches it sent meanwhile (until every
    /// change was written or the drain gave up).
    pub changes: usize,
    pub patches: usize,
    pub patches_per_change: f64,
    /// Changes never written by the end of the drain.
    pub unwritten: usize,
    /// Patches without the writer's field manager or annotation (must be 0).
    pub foreign_patches: usize,
    /// The patches over the minutes of churn: the steady rate of a cluster churning so.
    pub patches_per_minute: f64,
    /// From the writer's start to its stop: the churn, the drain and one interval more.
    pub writer_seconds: f64,
    /// From an index change to its patch arriving at the API server.
    pub change_to_patch_p50_seconds: f64,
    pub change_to_patch_p99_seconds: f64,
    pub change_to_patch_max_seconds: f64,
    pub rate_window_seconds: f64,
    /// The most patches in any rate window, per second.
    pub peak_patches_per_second: f64,
    pub writer_on: LoadFigures,
    pub writer_off: LoadFigures,
    /// Share of the floor answers sampled in-process (every `SAMPLE_EVERY`) that had a value.
    pub complete_share_writer_on: f64,
    pub complete_share_writer_off: f64,
    pub sync_seconds: f64,
}

/// The objects: the opted-in Deployment, its one ReplicaSet and its Running, Ready pods, each
/// annotated for scraping at its page and, for a pod that holds state, with its cost already
/// written (the steady state the churn starts from).
fn objects(spec: &ExporterSpec, port: u16) -> Result<Vec<(&'static str, Value)>, BenchError> {
    let labels = std::collections::BTreeMap::from([("app".to_string(), DEPLOYMENT.to_string())]);
    let selector = Selector {
        match_labels: Some(labels.clone()),
        ..Default::default()
    };
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels.clone()),
            ..Default::default()
        }),
        spec: None,
    };
    let owner = |kind: &str, name: &str| OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(true),
        ..Default::default()
    };
    let mut deployment = meta(DEPLOYMENT.into(), labels.clone());
    deployment.annotations = Some(
        [(DELETION_COST_OPT_IN, DELETION_COST_FROM_INDEX)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let replicas = Some(spec.targets as i32);
    let mut rs_meta = meta(REPLICA_SET.into(), labels.clone());
    rs_meta.owner_references = Some(vec![owner("Deployment", DEPLOYMENT)]);
    let mut out = vec![
        (
            "deployments",
            typed_json(
                &Deployment {
                    metadata: deployment,
                    spec: Some(DeploymentSpec {
                        replicas,
                        selector: selector.clone(),
                        template: template.clone(),
                        ..Default::default()
                    }),
                    status: None,
                },
                "apps/v1",
                "Deployment",
            ),
        ),
        (
            "replicasets",
            typed_json(
                &ReplicaSet {
                    metadata: rs_meta,
                    spec: Some(ReplicaSetSpec {
                        replicas,
                        selector,
                        template: Some(template),
                        ..Default::default()
                    }),
                    status: None,
                },
                "apps/v1",
                "ReplicaSet",
            ),
        ),
    ];
    for i in 0..spec.targets {
        let (w, k) = exporter::workload_of(i, spec.workloads);
        let mut metadata = meta(format!("w{w}-{k}"), labels.clone());
        metadata.owner_references = Some(vec![owner("ReplicaSet", REPLICA_SET)]);
        let mut annotations: std::collections::BTreeMap<String, String> = [
            ("prometheus.io/scrape", "true".to_string()),
            ("prometheus.io/port", port.to_string()),
            ("prometheus.io/path", format!("/t/{i}")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let index = exporter::initial_index(i, spec.workloads);
        if index > 0 {
            annotations.insert(POD_DELETION_COST.into(), index.to_string());
        }
        metadata.annotations = Some(annotations);
        let pod = Pod {
            metadata,
            spec: None,
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some(exporter::target_ip(i, spec.shared_host).to_string()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        out.push(("pods", typed_json(&pod, "v1", "Pod")));
    }
    out.into_iter()
        .map(|(r, v)| {
            v.map(|v| (r, v))
                .ok_or_else(|| BenchError::part(PART, "serializing an object"))
        })
        .collect()
}

/// One index change: when the exporter's page said it, which pod, and the new index.
#[derive(Clone, Debug)]
struct Change {
    at: Instant,
    pod: String,
    index: usize,
}

/// Who keeps the costs on a side: the real writer, or the bench at the moment of each change.
#[derive(Clone, Copy, PartialEq)]
enum Costs {
    Writer,
    SetByBench,
}

/// The churn of `rounds` intervals from round `first`: each round changes
/// [`DeletionCostPlan::changes_per_round`] pods, spread evenly over the interval.
async fn churn(
    plan: DeletionCostPlan,
    control: String,
    api: KubeApi,
    indices: Arc<Vec<AtomicU64>>,
    first: usize,
    costs: Costs,
) -> Result<Vec<Change>, BenchError> {
    let per_round = plan.changes_per_round();
    let mut tick = tokio::time::interval(plan.interval / per_round as u32);
    let mut changes = Vec::new();
    for n in first * per_round..(first + plan.rounds) * per_round {
        tick.tick().await;
        let i = n * STEP % plan.pods;
        let index = match indices[i].load(Ordering::Relaxed) {
            0 => i + 1,
            _ => 0,
        };
        fleet::set_index(&control, i, index).await?;
        let at = Instant::now();
        indices[i].store(index as u64, Ordering::Relaxed);
        let pod = format!("w0-{i}");
        if costs == Costs::SetByBench {
            let patch =
                json!({"metadata": {"annotations": {POD_DELETION_COST: index.to_string()}}});
            if !api.merge_pod("default", &pod, &patch) {
                return Err(BenchError::part(
                    PART,
                    format!("no pod {pod} to set the cost of"),
                ));
            }
        }
        changes.push(Change { at, pod, index });
    }
    Ok(changes)
}

/// How often the floor is sampled for a value: often enough to see the short complete spells.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Samples whether the floor has a value every `SAMPLE_EVERY` until `stop`: the share that had
/// one.
async fn complete_share(adapter: Arc<Adapter>, query: MetricQuery, stop: Arc<AtomicBool>) -> f64 {
    let (mut valued, mut all) = (0u32, 0u32);
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        if let Ok(a) = adapter.answer_computed(&query).await {
            all += 1;
            valued += u32::from(a.value().is_some());
        }
    }
    f64::from(valued) / f64::from(all.max(1))
}

/// Everything one run stands on, dropped in reverse order of need.
struct Bench {
    pki: Pki,
    /// The exporter's control address, and each pod's index as it exports it now.
    control: String,
    indices: Arc<Vec<AtomicU64>>,
    /// Pods that hold state before the churn.
    holding: u64,
    api: KubeApi,
    adapter: Arc<Adapter>,
    server: ServerThread,
    discovery: Arc<Discovery>,
    targets: Arc<Store>,
    client: kube::Client,
    config: hpa_bridge_rules::config::Config,
    runtime: tokio::runtime::Runtime,
    _api_server: ServerThread,
    _exporter: ExporterProcess,
}

fn query() -> Result<MetricQuery, BenchError> {
    let selector = LabelSelector::parse(&format!("hpa_target_name={DEPLOYMENT}")).part(PART)?;
    Ok(MetricQuery::external(METRIC, "default", selector))
}

impl Bench {
    fn start(plan: &DeletionCostPlan, exe: &Path) -> Result<Bench, BenchError> {
        let pki = Pki::generate()?;
        let mut spec = fleet::exporter_spec(plan.pods, 1, 1024, 1)?;
        spec.deployment = true;
        let exporter = ExporterProcess::start(exe, &spec)?;
        let control = exporter.control().to_string();
        let api = KubeApi::new(None);
        for (_, object) in objects(&spec, exporter.port())? {
            api.apply_json(object);
        }
        let api_server = {
            let api = api.clone();
            ServerThread::start("kubeapi", move |listener| api.serve_plain(listener))?
        };
        let config = fleet::config(plan.interval, "  kubernetes:\n    namespaces: [default]\n")?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("bench-cluster")
            .enable_all()
            .build()
            .part(PART)?;
        let url = format!("http://{}", api_server.addr);
        let built = runtime.block_on(async {
            // The writer goes on the same client and target store, as `serve` wires it.
            let fleet::Discovered {
                client,
                discovery,
                engine,
            } = fleet::discovered(&url, config.clone()).await?;
            let targets = engine.targets().reader();
            let scraper = Arc::new(
                engine
                    .scraper()
                    .cloned()
                    .ok_or_else(|| BenchError::part(PART, "the engine built no scraper"))?,
            );
            scraper.scrape_round().await;
            let adapter = engine.adapter().clone();
            // Readiness is the API port's: nothing here asks /readyz.
            tokio::spawn(async move { scraper.run(config.scrape.interval.0, || {}).await });
            Ok::<_, BenchError>((client, discovery, targets, adapter))
        })?;
        let (client, discovery, targets, adapter) = built;
        fleet::all_discovered_and_scraped(&targets, plan.pods, "pods").part(PART)?;
        // Every request computes its answer from the store and the watch cache of that moment.
        let handler = Arc::new(ApiHandler::new(adapter.clone()).without_answer_reuse());
        let server = serve::start_adapter("adapter-deletion-cost", &pki, handler)?;
        let indices: Vec<u64> = (0..plan.pods)
            .map(|i| exporter::initial_index(i, spec.workloads) as u64)
            .collect();
        Ok(Bench {
            pki,
            control,
            holding: indices.iter().filter(|i| **i > 0).count() as u64,
            indices: Arc::new(indices.into_iter().map(AtomicU64::new).collect()),
            api,
            adapter,
            server,
            discovery,
            targets,
            client,
            config,
            runtime,
            _api_server: api_server,
            _exporter: exporter,
        })
    }

    /// The floor as the HPA would read it now, after waiting up to `within` for a value.
    fn floor_within(&self, within: Duration) -> Result<Option<u64>, BenchError> {
        let query = query()?;
        let deadline = Instant::now() + within;
        self.runtime.block_on(async {
            loop {
                let value = self
                    .adapter
                    .answer_computed(&query)
                    .await
                    .part(PART)?
                    .value();
                if value.is_some() || Instant::now() > deadline {
                    return Ok(value);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    }

    /// One side: the churn of `plan.rounds` intervals from round `first`, with the floor asked
    /// over HTTP all along. Returns the changes, the load and the share of complete floors.
    fn side(
        &self,
        plan: &DeletionCostPlan,
        serve_plan: &Plan,
        first: usize,
        costs: Costs,
    ) -> Result<(Vec<Change>, LoadFigures, f64), BenchError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (churner, sampler) = {
            let _entered = self.runtime.enter();
            let churner = tokio::spawn(churn(
                plan.clone(),
                self.control.clone(),
                self.api.clone(),
                self.indices.clone(),
                first,
                costs,
            ));
            let sampler =
                tokio::spawn(complete_share(self.adapter.clone(), query()?, stop.clone()));
            (churner, sampler)
        };
        let paths = serve::workload_paths(METRIC, 1);
        let client = Arc::new(Client::new(&self.pki, paths, None)?.accepting_refusals());
        let run = plan.interval * plan.rounds as u32;
        let load = serve::measure_alternately(
            client,
            &[&self.server],
            plan.connections,
            serve_plan.serve_warmup.min(run / 4),
            run.saturating_sub(serve_plan.serve_warmup.min(run / 4)),
            1,
        )?
        .pop()
        .ok_or_else(|| BenchError::part(PART, "no load measured"))?;
        let changes = self.runtime.block_on(churner).part(PART)??;
        stop.store(true, Ordering::Relaxed);
        let share = self.runtime.block_on(sampler).part(PART)?;
        Ok((changes, load, share))
    }
}

/// Per change, the delay until the first patch of the pod to its new index arrived.
/// The `pod-deletion-cost` annotation a patch sets, if it sets one.
fn cost(patch: &Patched) -> Option<String> {
    patch.patch["metadata"]["annotations"][POD_DELETION_COST]
        .as_str()
        .map(String::from)
}

fn delays(changes: &[Change], patches: &[Patched]) -> Vec<Option<Duration>> {
    changes
        .iter()
        .map(|c| {
            let index = c.index.to_string();
            patches
                .iter()
                .find(|p| {
                    p.name == c.pod && p.at >= c.at && cost(p).as_deref() == Some(index.as_str())
                })
                .map(|p| p.at - c.at)
        })
        .collect()
}

/// The most patches arriving in any `window` starting at a patch, per second.
fn peak_rate(patches: &[Patched], window: Duration) -> f64 {
    let at: Vec<Instant> = patches.iter().map(|p| p.at).collect();
    let most = at
        .iter()
        .enumerate()
        .map(|(i, t)| at[i..].iter().take_while(|u| **u < *t + window).count())
        .max()
        .unwrap_or(0);
    most as f64 / window.as_secs_f64()
}

pub fn run(
    serve_plan: &Plan,
    plan: &DeletionCostPlan,
    exe: &Path,
) -> Result<DeletionCostResult, BenchError> {
    let started = Instant::now();
    let bench = Bench::start(plan, exe)?;
    let holding = bench.holding;
    // The steady state: every cost already says its pod's index, so the floor is complete.
    let floor = bench.floor_within(plan.interval * 3)?;
    if floor != Some(holding) {
        return Err(BenchError::part(
            PART,
            format!("the floor before the churn is {floor:?}, not {holding}"),
        ));
    }
    let sync_seconds = started.elapsed().as_secs_f64();

    // The writer's side first, so that the bench's own cost writes never precede it.
    let writer = {
        let _entered = bench.runtime.enter();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let metrics = Arc::new(SelfMetrics::new());
        // Writes only while it holds the lease, renewed every retry period, as `serve` runs it.
        let leadership = Leadership::start(
            hpa_bridge_duties::lease::Duty::DeletionCost,
            bench.client.clone(),
            ("hpa-bridge", DEFAULT_LEASE_NAME),
            "bench-writer".into(),
            LeaseTimings::default(),
            clock.clone(),
            metrics.clone(),
        );
        DeletionCostWriter::new(
            bench.discovery.clone(),
            bench.targets.clone(),
            clock,
            metrics,
            leadership,
            &bench.config,
            plan.qps,
        )
        .spawn()
    };
    let writer_started = Instant::now();
    let (changes, writer_on, complete_on) = bench.side(plan, serve_plan, 0, Costs::Writer)?;
    // Drain: give the writer up to three intervals to write the last changes.
    let drain_until = Instant::now() + plan.interval * 3;
    let mut delays_on = delays(&changes, &bench.api.patches());
    while delays_on.iter().any(Option::is_none) && Instant::now() < drain_until {
        std::thread::sleep(Duration::from_millis(100));
        delays_on = delays(&changes, &bench.api.patches());
    }
    // Patches keep arriving only for changes: wait one more interval for any late re-send.
    std::thread::sleep(plan.interval);
    writer.abort();
    let writer_seconds = writer_started.elapsed().as_secs_f64();
    let patches = bench.api.patches();
    let foreign = patches
        .iter()
        .filter(|p| p.field_manager.as_deref() != Some(FIELD_MANAGER) || cost(p).is_none())
        .count();

    let (_, writer_off, complete_off) =
        bench.side(plan, serve_plan, plan.rounds, Costs::SetByBench)?;

    let mut written: Vec<f64> = delays_on
        .iter()
        .flatten()
        .map(Duration::as_secs_f64)
        .collect();
    written.sort_by(f64::total_cmp);
    let micros: Vec<u32> = written.iter().map(|s| (s * 1e6) as u32).collect();
    let q = |p: f64| quantile(&micros, p) / 1e6;
    Ok(DeletionCostResult {
        pods: plan.pods,
        interval_seconds: plan.interval.as_secs_f64(),
        qps: plan.qps,
        churn_percent: plan.churn_percent,
        rounds: plan.rounds,
        connections: plan.connections,
        changes: changes.len(),
        patches: patches.len(),
        patches_per_change: patches.len() as f64 / changes.len().max(1) as f64,
        unwritten: delays_on.iter().filter(|d| d.is_none()).count(),
        foreign_patches: foreign,
        patches_per_minute: patches.len() as f64 * 60.0
            / (plan.interval * plan.rounds as u32).as_secs_f64(),
        writer_seconds,
        change_to_patch_p50_seconds: q(0.5),
        change_to_patch_p99_seconds: q(0.99),
        change_to_patch_max_seconds: written.last().copied().unwrap_or(0.0),
        rate_window_seconds: plan.rate_window.as_secs_f64(),
        peak_patches_per_second: peak_rate(&patches, plan.rate_window),
        writer_on,
        writer_off,
        complete_share_writer_on: complete_on,
        complete_share_writer_off: complete_off,
        sync_seconds,
    })
}

pub fn figures(r: &DeletionCostResult) -> Vec<Figure> {
    let what = format!(
        "{} pods, {}% change index per {} s interval",
        r.pods, r.churn_percent, r.interval_seconds
    );
    vec![
        Figure::new(
            PART,
            format!(
                "Deletion cost: patches per index change ({what}; {:.0} patches/min)",
                r.patches_per_minute
            ),
            "patches",
        )
        .compare(r.changes as f64, r.patches as f64, Some(Goal::AtMost(1.05))),
        Figure::new(
            PART,
            "Deletion cost: p50 index change to patch (vs the scrape interval)",
            "s",
        )
        .compare(r.interval_seconds, r.change_to_patch_p50_seconds, None),
        Figure::new(
            PART,
            "Deletion cost: p99 index change to patch (vs the scrape interval; limit 2.5: one interval to scrape, one to the writer's round, half one for its paced queue)",
            "s",
        )
        .compare(r.interval_seconds, r.change_to_patch_p99_seconds, Some(Goal::AtMost(2.5))),
        Figure::new(
            PART,
            format!(
                "Deletion cost: peak patch rate over {} s (vs --deletion-cost-qps)",
                r.rate_window_seconds
            ),
            "patches/s",
        )
        .compare(r.qps, r.peak_patches_per_second, Some(Goal::AtMost(1.05))),
        Figure::new(
            PART,
            "Deletion cost: p50 latency of the Deployment's floor, writer on (vs writer off, costs set by the bench at each change)",
            "µs",
        )
        .compare(r.writer_off.p50_us, r.writer_on.p50_us, None),
        Figure::new(
            PART,
            "Deletion cost: p99 latency of the Deployment's floor, writer on (vs writer off, costs set by the bench at each change)",
            "µs",
        )
        .compare(r.writer_off.p99_us, r.writer_on.p99_us, Some(Goal::AtMost(1.5))),
    ]
}

pub fn note(r: &DeletionCostResult) -> String {
    format!(
        "**Deletion cost.** One Deployment annotated `{DELETION_COST_OPT_IN}: \"{DELETION_COST_FROM_INDEX}\"` \
         with one ReplicaSet of {} Running, Ready pods, served with its watches by a loopback API \
         server that applies JSON merge patches and sends MODIFIED events (the test kit's stand-in, \
         crates/hpa-bridge-kit/src/kube_api.rs: a thousand pods whose index and cost change without a kubelet or \
         controllers in the way); each pod's `hpa_stateful_index` on its own page of the bench exporter \
         process. `source::discovery::Discovery`, the `Scraper` (every {} s) and \
         `DeletionCostWriter` (`--deletion-cost-qps {}`, holding its Lease, renewed every {} s, \
         from the same loopback API server) are assembled as `serve \
         --write-deletion-cost` assembles them (discovered, scraped and the floor complete in \
         {:.1} s). The churn starts from the steady state (every holding pod's cost already \
         written): each interval {}% of the pods, spread over the interval and each pod at most \
         once, flip their index between 0 and their ordinal + 1. Writer on, {} intervals: {} \
         changes; {} patches from the writer's start until it stopped {:.0} s later (the churn, a \
         drain until every change was written, at most 3 intervals, and one interval more for \
         any late re-send), {} changes never written, {} patches without field manager \
         `hpa-bridge` or the annotation; {:.0} patches per minute of churn; change to patch \
         {:.1} s p50, {:.1} s p99, {:.1} s at most. The peak rate is the most patches arriving at the API server in any {} s window. Answer latency: {} \
         connections of the serve part's client asked the floor (`{METRIC}`, \
         `hpa_target_name=w0`) through TLS and front-proxy authentication with answer reuse off \
         for the whole churn of each side, accepting 200 and the incomplete floor's 503. The \
         baseline is the same run's next {} intervals of churn with the writer stopped and each \
         cost set by the bench in the API server's object at the moment of the change: the same \
         MODIFIED event per change, no planning, no requests, no lag. Its cost leads the scraped \
         index by up to an interval where the writer's trails it, so the floor is complete for a \
         different share of the time (sampled every 100 ms: {:.0}% with the writer, {:.0}% \
         without); an incomplete floor's answer lists what is unconfirmed. Requests: writer on \
         {}, off {}.\n",
        r.pods,
        r.interval_seconds,
        r.qps,
        LeaseTimings::default().retry_period.as_secs(),
        r.sync_seconds,
        r.churn_percent,
        r.rounds,
        r.changes,
        r.patches,
        r.writer_seconds,
        r.unwritten,
        r.foreign_patches,
        r.patches_per_minute,
        r.change_to_patch_p50_seconds,
        r.change_to_patch_p99_seconds,
        r.change_to_patch_max_seconds,
        r.rate_window_seconds,
        r.connections,
        r.rounds,
        r.complete_share_writer_on * 100.0,
        r.complete_share_writer_off * 100.0,
        r.writer_on.requests,
        r.writer_off.requests,
    )
}
