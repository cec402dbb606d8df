//! Test fixtures shared by the engine's tests: an adapter, and what one pod of a workload
//! exports.

use std::sync::Arc;

use super::Adapter;
use hpa_bridge_exposition::ExposedSample;
use hpa_bridge_rules::clock::ManualClock;
use hpa_bridge_rules::cluster::Cluster;
use hpa_bridge_rules::config::Config;
use hpa_bridge_rules::evidence::TargetId;
use hpa_bridge_sources::source::EvidenceSource;
use hpa_bridge_store::store::{ScrapeTarget, StoreWriter, WorkloadRef};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// An adapter over the default config answering from `source`, at a fixed time (1,000 s).
pub fn adapter_on(source: Arc<dyn EvidenceSource>) -> Adapter {
    adapter_knowing(source, None)
}

/// As `adapter_on`, knowing the cluster's facts from `cluster`.
pub fn adapter_with(source: Arc<dyn EvidenceSource>, cluster: Arc<dyn Cluster>) -> Adapter {
    adapter_knowing(source, Some(cluster))
}

fn adapter_knowing(source: Arc<dyn EvidenceSource>, cluster: Option<Arc<dyn Cluster>>) -> Adapter {
    let config = Config::from_yaml("").unwrap();
    Adapter::new(
        config,
        source,
        cluster,
        Arc::new(ManualClock::new(1_000_000)),
        Arc::new(SelfMetrics::new()),
    )
}

/// A pod's page: its workload's recommendation `expect` and its stateful index `index`, both
/// labelled with the workload (`hpa_target_*`).
pub fn workload_page(kind: &str, name: &str, expect: f64, index: f64) -> Vec<ExposedSample> {
    let labels = vec![
        ("hpa_target_kind".to_string(), kind.to_string()),
        ("hpa_target_name".to_string(), name.to_string()),
        ("hpa_target_api_version".to_string(), "apps/v1".to_string()),
    ];
    let sample = |name: &str, value: f64| ExposedSample {
        name: name.into(),
        labels: labels.clone(),
        value,
        timestamp_ms: None,
        unusable: None,
    };
    vec![
        sample("hpa_expect_replicas", expect),
        sample("hpa_stateful_index", index),
    ]
}

/// `n` pods of the StatefulSet `games/lobby`, in target order (`games/lobby-00`, ...).
pub fn lobby_pods(n: usize) -> Vec<ScrapeTarget> {
    (0..n)
        .map(|i| ScrapeTarget {
            format: Default::default(),
            id: TargetId(format!("games/lobby-{i:02}").into()),
            url: format!("http://10.0.0.{i}/metrics"),
            labels: [("namespace".to_string(), "games".to_string())].into(),
            workload: Some(WorkloadRef {
                kind: "StatefulSet".into(),
                namespace: "games".into(),
                name: "lobby".into(),
            }),
        })
        .collect()
}

/// Scrape `targets` (lobby pods) at 990 s: pod `i` exports the stateful index `index(i)`, and
/// the first `recommenders` of them a recommendation of 2.
pub fn scrape_lobby(
    store: &StoreWriter,
    targets: &[ScrapeTarget],
    recommenders: usize,
    index: impl Fn(usize) -> f64,
) {
    for (i, t) in targets.iter().enumerate() {
        let mut page = workload_page("StatefulSet", "lobby", 2.0, index(i));
        if i >= recommenders {
            page.retain(|s| s.name != "hpa_expect_replicas");
        }
        store.record_success(t, 990_000, 1, page);
    }
}
