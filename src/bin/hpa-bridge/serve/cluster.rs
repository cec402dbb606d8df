//! What `serve` runs against the cluster beside the engine when it discovers pods
//! (scrape.kubernetes): discovery, the memory across restarts, the deletion-cost writer, the
//! leases that elect their one writer, and the client the HPA watch uses.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hpa_bridge_duties::deletion_cost::{self, DeletionCostWriter, Leadership, LeaseName};
use hpa_bridge_duties::lease::Duty;
use hpa_bridge_duties::memory::{MemoryKeeper, MemoryObject, MemoryTimings};
use hpa_bridge_engine::engine::StatusSection;
use hpa_bridge_rules::clock::SystemClock;
use hpa_bridge_rules::config::{Config, KubernetesDiscoveryConfig};
use hpa_bridge_sources::source::discovery::Discovery;
use hpa_bridge_store::store::{ScrapeTarget, StoreWriter};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

use super::args::ServeArgs;
use super::auth::kubeconfig_file;

/// The cluster duties running, and what they show on `/status`.
pub(crate) struct ClusterDuties {
    pub(crate) client: kube::Client,
    pub(crate) discovery: Arc<Discovery>,
    /// `/status` sections, in the order they are shown.
    pub(crate) sections: Vec<StatusSection>,
    /// Given up at shutdown, so another replica takes over writing at once.
    pub(crate) leases: Vec<Arc<Leadership>>,
}

/// Refuse flags that need a cluster the config does not discover.
pub(crate) fn check_flags(args: &ServeArgs, config: &Config) -> Result<()> {
    if args.write_deletion_cost && config.scrape.kubernetes.is_none() {
        bail!("--write-deletion-cost needs scrape.kubernetes in the config: it writes to the pods discovery finds");
    }
    Ok(())
}

/// Start discovery, and the memory and deletion-cost writer when asked, feeding `targets`.
/// The memory is read before discovery starts, so that no target set reaches the store before
/// it: a remembered target is never seen unscraped by an answer.
pub(crate) async fn start(
    args: &ServeArgs,
    k: &KubernetesDiscoveryConfig,
    config: &Config,
    targets: &StoreWriter,
    static_targets: Vec<ScrapeTarget>,
    clock: &Arc<SystemClock>,
    metrics: &Arc<SelfMetrics>,
) -> Result<ClusterDuties> {
    let client = discovery_client(args.kubeconfig.as_deref()).await?;
    let namespace_of = |name: &LeaseName| {
        name.namespace
            .clone()
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .unwrap_or_else(|| client.default_namespace().to_string())
    };
    let lease = |duty: Duty, name: &LeaseName| {
        Leadership::start(
            duty,
            client.clone(),
            (&namespace_of(name), &name.name),
            deletion_cost::identity(),
            args.lease_timings(),
            clock.clone(),
            metrics.clone(),
        )
    };
    let memory = (!args.no_memory).then(|| {
        MemoryObject::new(
            client.clone(),
            &namespace_of(&args.memory_config_map),
            &args.memory_config_map.name,
        )
    });
    let memory_read = match &memory {
        Some(object) => Some(read_memory(object, targets).await),
        None => None,
    };
    let discovery = Discovery::start(client.clone(), k.clone(), targets.clone(), static_targets);

    let annotated = discovery.clone();
    let mut sections: Vec<StatusSection> = vec![(
        "deletionCostAnnotationsUnknown",
        Arc::new(move || unknown_deletion_cost_json(&annotated)),
    )];
    tokio::spawn(warn_unknown_deletion_cost(discovery.clone()));
    let mut leases = Vec::new();
    let mut memory_section = None;
    if let Some(object) = memory {
        let memory_lease = lease(Duty::Memory, &args.memory_lease);
        let keeper = MemoryKeeper::new(
            targets.clone(),
            object,
            memory_lease.clone(),
            clock.clone(),
            metrics.clone(),
            MemoryTimings {
                write_interval: args.memory_write_interval,
                hold: Duration::from_secs(300),
            },
        );
        if let Some(outcome) = memory_read {
            keeper.read_at_start(outcome);
        }
        memory_section = Some(("memory", Arc::new(keeper.status()) as _));
        keeper.spawn();
        leases.push(memory_lease);
    }
    if args.write_deletion_cost {
        let writer_lease = lease(Duty::DeletionCost, &args.deletion_cost_lease);
        DeletionCostWriter::new(
            discovery.clone(),
            targets.reader(),
            clock.clone(),
            metrics.clone(),
            writer_lease.clone(),
            config,
            args.deletion_cost_qps,
        )
        .spawn();
        let shown = writer_lease.clone();
        sections.push(("deletionCostLease", Arc::new(move || shown.status())));
        leases.push(writer_lease);
    }
    sections.extend(memory_section);
    Ok(ClusterDuties {
        client,
        discovery,
        sections,
        leases,
    })
}

/// The Deployments whose `hpa-bridge.io/deletion-cost` value opts nothing in, for `/status`.
fn unknown_deletion_cost_json(discovery: &Discovery) -> serde_json::Value {
    discovery
        .unknown_deletion_cost_values()
        .into_iter()
        .map(|(w, value)| {
            serde_json::json!({
                "namespace": w.namespace,
                "name": w.name,
                "value": value,
                "expected": hpa_bridge_rules::cluster::DELETION_COST_FROM_INDEX,
            })
        })
        .collect()
}

/// Logs each Deployment annotated `hpa-bridge.io/deletion-cost` with a value that opts nothing
/// in, once per Deployment and value: its owner meant to opt in, and nothing else would say
/// that its pods get no deletion cost.
async fn warn_unknown_deletion_cost(discovery: Arc<Discovery>) {
    discovery.wait_synced().await;
    let mut warned = std::collections::BTreeSet::new();
    loop {
        for (w, value) in discovery.unknown_deletion_cost_values() {
            if warned.insert((w.clone(), value.clone())) {
                tracing::warn!(
                    deployment = %format!("{}/{}", w.namespace, w.name),
                    annotation = hpa_bridge_rules::cluster::DELETION_COST_OPT_IN,
                    %value,
                    expected = hpa_bridge_rules::cluster::DELETION_COST_FROM_INDEX,
                    "unknown deletion-cost annotation value: the Deployment is not opted in"
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
}

/// Read the memory a predecessor wrote and give it to the store, retrying for up to 10 s (an
/// API server that is slow to answer a starting pod); after that this replica goes on without
/// it. Returns the memory's time, or why it could not be read.
async fn read_memory(object: &MemoryObject, store: &StoreWriter) -> Result<Option<i64>, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match object.read().await {
            Ok(Some(memory)) => {
                let written_at = memory.written_at;
                tracing::info!(config_map = %object.describe(), targets = memory.targets.len(), series = memory.series_count(), written_at = %hpa_bridge_rules::clock::rfc3339(written_at), "read the memory: targets never scraped since this start hold their remembered series");
                store.remember(memory);
                return Ok(Some(written_at));
            }
            Ok(None) => {
                tracing::info!(config_map = %object.describe(), "no memory written yet");
                return Ok(None);
            }
            Err(e)
                if tokio::time::Instant::now() >= deadline
                    || matches!(e.kind(), "forbidden" | "malformed") =>
            {
                tracing::warn!(error = %e, "the memory could not be read: going on without it; a target never scraped since this start is ruled in or out by its workload alone (docs/unknown-input.md)");
                return Err(e.to_string());
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading the memory failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// The Kubernetes client for discovery: an explicit kubeconfig, or whatever `Config::infer`
/// finds (KUBECONFIG, ~/.kube/config, then the in-cluster service account).
async fn discovery_client(kubeconfig: Option<&Path>) -> Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => kubeconfig_file(path, "--kubeconfig").await?,
        None => kube::Config::infer()
            .await
            .context("scrape.kubernetes: no Kubernetes configuration found (in-cluster, KUBECONFIG or --kubeconfig)")?,
    };
    tracing::info!(server = %config.cluster_url, "kubernetes discovery enabled");
    kube::Client::try_from(config).context("building the Kubernetes client")
}
