//! Latency when the Kubernetes API is slow: the HPA's request through the real
//! request path (TLS, front-proxy authentication, `serve_api`, no answer reuse) of an adapter
//! whose targets and workloads come from real discovery (`source::discovery::Discovery`,
//! kube-runtime reflectors) against the kit's loopback API server (crates/hpa-bridge-kit/src/kube_api.rs) that delays
//! every response, against the same with a prompt API server. Nothing on the request path may
//! wait on the API: `spec.replicas` comes from the watch caches, so the p99 must not move.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::exporter::ExporterSpec;
use super::figure::{Figure, Goal};
use super::fleet::{self, ExporterProcess};
use super::kube_objects::Objects;
use super::serve::{self, Client, LoadFigures, Pki, ServerThread};
use super::{BenchError, InPart, Plan};
use hpa_bridge_engine::engine::MetricQuery;
use hpa_bridge_kit::kube_api::KubeApi;
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_server::api::ApiHandler;
use hpa_bridge_sources::source::discovery::Discovery;

/// What the HPA asks for: a recommendation behind a `validWhen` gate that never opens (no
/// pod's stateful index is 99), so every answer is `max(recommendation, current)` and needs
/// the workload's current replica count, which comes from the StatefulSet watch cache. The
/// default `hpa_target_replicas` never reads it, so it could not show a wait on the API.
const METRIC: &str = "hpa_gated_replicas";
const GATED_METRIC: &str = "metrics:
  - name: hpa_gated_replicas
    kind: recommendation
    series: [hpa_expect_replicas]
    validWhen: {series: hpa_stateful_index, equals: 99}
";

#[derive(Clone, Debug)]
pub struct SlowApiPlan {
    pub targets: usize,
    pub workloads: usize,
    pub delay: Duration,
}

impl SlowApiPlan {
    pub fn new(quick: bool) -> Self {
        if quick {
            SlowApiPlan {
                targets: 40,
                workloads: 4,
                delay: Duration::from_millis(500),
            }
        } else {
            SlowApiPlan {
                targets: 1000,
                workloads: 40,
                delay: Duration::from_secs(2),
            }
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlowApiResult {
    pub targets: usize,
    pub workloads: usize,
    pub delay_seconds: f64,
    pub connections: usize,
    pub arrangement: String,
    pub prompt: LoadFigures,
    pub delayed: LoadFigures,
    pub p99_ratio: f64,
    /// From start to the first complete target set and one scrape round, per side.
    pub prompt_sync_seconds: f64,
    pub delayed_sync_seconds: f64,
    /// Requests the delayed API answered while the load ran (each after the delay).
    pub delayed_lists_during: u64,
    pub delayed_watches_during: u64,
}

const PART: &str = "slowapi";

/// How long a watch stays open before the server ends it (the real one ends watches after
/// minutes; ending them quickly makes the reflectors ask again, and wait again, all the time).
const WATCH_SECONDS: u64 = 1;

/// One adapter with its own API server, discovery and scraped store.
struct Side {
    /// The side's API server, which counts the lists and watches it answered.
    api: KubeApi,
    server: ServerThread,
    sync_seconds: f64,
    // Dropped after the server: the reflectors and the API server live as long as the side.
    _discovery: Arc<Discovery>,
    _runtime: tokio::runtime::Runtime,
    _api_server: ServerThread,
}

impl Side {
    fn start(
        name: &str,
        delay: Duration,
        spec: &ExporterSpec,
        exporter: &ExporterProcess,
        pki: &Pki,
    ) -> Result<Side, BenchError> {
        let api = Objects::new(spec, exporter.port())
            .api(delay, Some(Duration::from_secs(WATCH_SECONDS)));
        let api_server = {
            let api = api.clone();
            ServerThread::start(&format!("kubeapi-{name}"), move |listener| {
                api.serve_plain(listener)
            })?
        };
        // Samples stay fresh for the whole part after one round, so no scrape loop competes
        // with the measurement; the reflectors keep running.
        let config = fleet::config(
            Duration::from_secs(10),
            &format!("  staleAfter: 1h\n  kubernetes:\n    namespaces: [default]\n{GATED_METRIC}"),
        )?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("bench-discovery-{name}"))
            .enable_all()
            .build()
            .part(PART)?;
        let started = Instant::now();
        let url = format!("http://{}", api_server.addr);
        let (engine, discovery) = runtime.block_on(async {
            let fleet::Discovered {
                engine, discovery, ..
            } = fleet::discovered(&url, config).await?;
            let scraper = engine
                .scraper()
                .ok_or_else(|| BenchError::part(PART, "the engine built no scraper"))?;
            scraper.scrape_round().await;
            // The point of the part: the answer takes spec.replicas from the watch cache.
            let selector = LabelSelector::parse("hpa_target_name=w0").part(PART)?;
            let answer = engine
                .adapter()
                .answer_computed(&MetricQuery::external(METRIC, "default", selector.clone()))
                .await
                .part(PART)?;
            let explained = serde_json::to_string(&answer.answer).part(PART)?;
            if answer.value().is_none() || !explained.contains("spec.replicas of") {
                return Err(BenchError::part(PART, format!(
                    "{name}: the answer for w0 does not use the watch cache's spec.replicas: {explained}"
                )));
            }
            Ok::<_, BenchError>((engine, discovery))
        })?;
        let store = engine.targets();
        fleet::all_discovered_and_scraped(&store, spec.targets, "targets")
            .map_err(|e| format!("{name}: {e}"))
            .part(PART)?;
        let sync_seconds = started.elapsed().as_secs_f64();
        // Every request computes its answer, so every one asks the cluster for spec.replicas.
        let handler = Arc::new(ApiHandler::new(engine.adapter().clone()).without_answer_reuse());
        let server = serve::start_adapter(&format!("adapter-{name}"), pki, handler)?;
        Ok(Side {
            api,
            server,
            sync_seconds,
            _discovery: discovery,
            _runtime: runtime,
            _api_server: api_server,
        })
    }
}

pub fn run(plan: &Plan, exe: &Path) -> Result<SlowApiResult, BenchError> {
    let slow = &plan.slowapi;
    let (spec, exporter) = fleet::start_exporter(exe, slow.targets, slow.workloads, 4 * 1024, 10)?;
    let pki = Pki::generate()?;
    let prompt = Side::start("prompt", Duration::ZERO, &spec, &exporter, &pki)?;
    let delayed = Side::start("delayed", slow.delay, &spec, &exporter, &pki)?;
    let paths = serve::workload_paths(METRIC, slow.workloads);
    let client = Arc::new(Client::new(&pki, paths, None)?);
    let lists = delayed.api.answered().0;
    let watches = delayed.api.answered().1;
    let [prompt_load, delayed_load]: [LoadFigures; 2] = serve::measure_alternately(
        client,
        &[&prompt.server, &delayed.server],
        plan.serve_connections,
        plan.serve_warmup,
        plan.serve_run,
        plan.serve_repeats,
    )?
    .try_into()
    .map_err(|_| BenchError::part(PART, "expected two measurements"))?;
    Ok(SlowApiResult {
        targets: slow.targets,
        workloads: slow.workloads,
        delay_seconds: slow.delay.as_secs_f64(),
        connections: plan.serve_connections,
        arrangement: serve::arrangement(plan, plan.serve_run),
        p99_ratio: delayed_load.p99_us / prompt_load.p99_us.max(1.0),
        prompt: prompt_load,
        delayed: delayed_load,
        prompt_sync_seconds: prompt.sync_seconds,
        delayed_sync_seconds: delayed.sync_seconds,
        delayed_lists_during: delayed.api.answered().0 - lists,
        delayed_watches_during: delayed.api.answered().1 - watches,
    })
}

pub fn figures(r: &SlowApiResult) -> Vec<Figure> {
    vec![
        Figure::new(
            "slowapi",
            format!(
                "Slow Kubernetes API: p99 of an HPA request that needs spec.replicas, every API response delayed {} s (vs a prompt API)",
                r.delay_seconds
            ),
            "µs",
        )
        .compare(r.prompt.p99_us, r.delayed.p99_us, Some(Goal::AtMost(1.5))),
        Figure::new(
            "slowapi",
            "Slow Kubernetes API: requests/s (vs a prompt API)",
            "req/s",
        )
        .compare(
            r.prompt.requests_per_second,
            r.delayed.requests_per_second,
            None,
        ),
    ]
}

pub fn note(r: &SlowApiResult) -> String {
    format!(
        "**Slow Kubernetes API.** Two adapters, each with `source::discovery::Discovery` (kube-runtime \
         reflectors on pods, StatefulSets, ReplicaSets and Deployments in `default`) against its own \
         loopback API server: the test kit's stand-in for kube-apiserver (crates/hpa-bridge-kit/src/kube_api.rs; a \
         real API server cannot be made to delay every answer on demand), serving \
         schema-valid lists and watches (k8s-openapi objects) of {} Running pods annotated for scraping \
         and {} StatefulSets owning them. One API answers promptly; the other delays every response \
         {} s, and ends every watch after {} s so the reflectors keep asking (while the load ran it \
         answered {} lists and {} watches, each after the delay). Each adapter scraped the discovered \
         pods once from the bench exporter process (synced and scraped in {:.1} s prompt, {:.1} s \
         delayed), then the serve part's client (TLS, front-proxy authentication, {} connections) asked \
         `{METRIC}` for the workloads round-robin: `hpa_expect_replicas` behind a `validWhen` gate \
         that never opens, so every answer is max(recommendation, current replicas) and reads \
         `spec.replicas` from the cluster (checked before the load: the answer's explanation names \
         `spec.replicas` of the StatefulSet), with answer reuse off so that every request computes it. Arrangement: {}. Requests: prompt {}, delayed {}.\n",
        r.targets,
        r.workloads,
        r.delay_seconds,
        WATCH_SECONDS,
        r.delayed_lists_during,
        r.delayed_watches_during,
        r.prompt_sync_seconds,
        r.delayed_sync_seconds,
        r.connections,
        r.arrangement,
        r.prompt.requests,
        r.delayed.requests
    )
}
