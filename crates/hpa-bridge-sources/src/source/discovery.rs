//! Pod discovery through the Kubernetes API: which pods to scrape, which labels their samples
//! carry, and which workload owns them.
//!
//! Pods, ReplicaSets and StatefulSets are mirrored by kube-runtime reflectors (list, then
//! watch with bookmarks, with the watcher's own backoff); every change recomputes the target
//! set and hands it to the store's writer (`StoreWriter::set_targets`), which retires the
//! retained index of a pod that is gone and keeps it for a pod that merely fails its scrape
//! (docs/hpa-behaviour.md §4.1).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::{watch, Notify};

use hpa_bridge_rules::cluster::{
    Cluster, PodFacts, PodSet, ReplicaSetFacts, WorkloadKind, DELETION_COST_FROM_INDEX,
    DELETION_COST_OPT_IN, POD_DELETION_COST,
};
use hpa_bridge_rules::config::{KubernetesDiscoveryConfig, JSON_CONFIG_ANNOTATION};
use hpa_bridge_rules::evidence::TargetId;
use hpa_bridge_store::store::{PageFormat, ScrapeTarget, StoreWriter, WorkloadRef};

pub use hpa_bridge_rules::config::RESERVED_LABELS;

const ANNOTATION_SCRAPE: &str = "prometheus.io/scrape";
const ANNOTATION_PORT: &str = "prometheus.io/port";
const ANNOTATION_PATH: &str = "prometheus.io/path";
const ANNOTATION_SCHEME: &str = "prometheus.io/scheme";

/// How long the target publisher waits before trying a failed round again, at first and at
/// most (it doubles on each failure in a row).
const PUBLISH_RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
const PUBLISH_RETRY_LAST: std::time::Duration = std::time::Duration::from_secs(60);

/// The wait after `retry` failed too.
fn next_retry(retry: std::time::Duration) -> std::time::Duration {
    (retry * 2).min(PUBLISH_RETRY_LAST)
}

/// When a failed round is tried again after a wait of `retry`: not before the first bound, at
/// the second at the latest, and between them as soon as the cluster changes.
fn retry_window(retry: std::time::Duration) -> (std::time::Duration, std::time::Duration) {
    ((retry / 2).max(PUBLISH_RETRY_FIRST).min(retry), retry)
}

/// Why a pod is not scraped; only for debug logs.
#[derive(Debug, PartialEq, Eq)]
pub enum Skip {
    NotRunning,
    NoIp,
    NotAnnotated,
    NoPort,
    UnsupportedScheme(String),
}

/// The owning workload of a pod: its controller owner reference, followed through a
/// ReplicaSet to the Deployment that controls it.
pub fn owner_workload(
    pod: &Pod,
    replicaset: &dyn Fn(&str, &str) -> Option<Arc<ReplicaSet>>,
) -> Option<WorkloadRef> {
    let namespace = pod.namespace().unwrap_or_default();
    let owner = controller_of(pod.owner_references())?;
    if owner.kind == WorkloadKind::ReplicaSet.as_str() {
        if let Some(rs) = replicaset(&namespace, &owner.name) {
            if let Some(deploy) = controller_of(rs.owner_references()) {
                if deploy.kind == WorkloadKind::Deployment.as_str() {
                    return Some(WorkloadRef {
                        kind: WorkloadKind::Deployment,
                        namespace,
                        name: deploy.name.clone(),
                    });
                }
            }
        }
    }
    Some(WorkloadRef {
        kind: owner.kind.as_str().into(),
        namespace,
        name: owner.name.clone(),
    })
}

/// What the engine needs to know about one pod. Pure: the caller supplies the ReplicaSet
/// lookup.
pub fn pod_facts(
    pod: &Pod,
    replicaset: &dyn Fn(&str, &str) -> Option<Arc<ReplicaSet>>,
) -> PodFacts {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let replica_set = controller_of(pod.owner_references())
        .filter(|o| o.kind == WorkloadKind::ReplicaSet.as_str())
        .map(|o| o.name.clone());
    let phase = status.and_then(|s| s.phase.as_deref());
    PodFacts {
        running: phase == Some("Running"),
        terminated: matches!(phase, Some("Succeeded" | "Failed")),
        workload: owner_workload(pod, replicaset),
        ready,
        deletion_cost: pod.annotations().get(POD_DELETION_COST).cloned(),
        replica_set,
    }
}

/// The facts of `pods` by namespace, and the names of each workload's pods. Pure.
pub fn pod_facts_index(
    pods: &[Arc<Pod>],
    replicaset: &dyn Fn(&str, &str) -> Option<Arc<ReplicaSet>>,
) -> PodFactsIndex {
    let mut by_namespace: BTreeMap<String, BTreeMap<String, PodFacts>> = BTreeMap::new();
    let mut by_workload: BTreeMap<WorkloadRef, BTreeMap<String, PodFacts>> = BTreeMap::new();
    // A pod object always has a namespace; one without is no namespace's pod.
    for p in pods {
        let Some(namespace) = p.namespace() else {
            continue;
        };
        let facts = pod_facts(p, replicaset);
        let name = p.name_any();
        if let Some(w) = &facts.workload {
            by_workload
                .entry(w.clone())
                .or_default()
                .insert(name.clone(), facts.clone());
        }
        by_namespace
            .entry(namespace)
            .or_default()
            .insert(name, facts);
    }
    PodFactsIndex {
        by_namespace: by_namespace
            .into_iter()
            .map(|(ns, pods)| (ns, Arc::new(pods)))
            .collect(),
        by_workload: by_workload
            .into_iter()
            .map(|(w, pods)| (w, Arc::new(pods)))
            .collect(),
    }
}

/// What `pod_facts_index` finds.
#[derive(Debug, Default)]
pub struct PodFactsIndex {
    by_namespace: BTreeMap<String, PodSet>,
    by_workload: BTreeMap<WorkloadRef, PodSet>,
}

impl PodFactsIndex {
    /// Every pod in `namespace`, by name.
    pub fn namespace(&self, namespace: &str) -> PodSet {
        self.by_namespace
            .get(namespace)
            .cloned()
            .unwrap_or_default()
    }

    /// The pods whose workload is `w`, by name.
    pub fn workload(&self, w: &WorkloadRef) -> PodSet {
        self.by_workload.get(w).cloned().unwrap_or_default()
    }
}

/// The ReplicaSets among `replica_sets` whose controller is `deployment`, with their
/// `spec.replicas` (absent is 1, as the API server defaults it), by name. Pure.
pub fn replica_sets_of(
    deployment: &WorkloadRef,
    replica_sets: &[Arc<ReplicaSet>],
) -> Vec<ReplicaSetFacts> {
    let mut facts: Vec<ReplicaSetFacts> = replica_sets
        .iter()
        .filter(|rs| rs.namespace().as_deref() == Some(deployment.namespace.as_str()))
        .filter(|rs| {
            controller_of(rs.owner_references()).is_some_and(|o| {
                o.kind == WorkloadKind::Deployment.as_str() && o.name == deployment.name
            })
        })
        .map(|rs| ReplicaSetFacts {
            name: rs.name_any(),
            replicas: rs
                .spec
                .as_ref()
                .and_then(|s| s.replicas)
                .unwrap_or(1)
                .max(0) as u64,
        })
        .collect();
    facts.sort_by(|a, b| a.name.cmp(&b.name));
    facts
}

/// A Deployment that asked for its pods' deletion cost to follow their stateful index.
pub fn opted_in(deployment: &Deployment) -> bool {
    deployment
        .annotations()
        .get(DELETION_COST_OPT_IN)
        .is_some_and(|v| v == DELETION_COST_FROM_INDEX)
}

/// The value of a Deployment's `hpa-bridge.io/deletion-cost` annotation when it is there but
/// does not opt in.
pub fn unknown_deletion_cost_value(deployment: &Deployment) -> Option<&str> {
    deployment
        .annotations()
        .get(DELETION_COST_OPT_IN)
        .map(String::as_str)
        .filter(|v| *v != DELETION_COST_FROM_INDEX)
}

fn controller_of(owners: &[OwnerReference]) -> Option<&OwnerReference> {
    owners
        .iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| owners.first())
}

/// The scrape target for one pod, or why it has none. Pure: the caller supplies the
/// ReplicaSet lookup.
pub fn pod_target(
    pod: &Pod,
    config: &KubernetesDiscoveryConfig,
    replicaset: &dyn Fn(&str, &str) -> Option<Arc<ReplicaSet>>,
) -> Result<ScrapeTarget, Skip> {
    let status = pod.status.as_ref();
    // Only Running pods are scraped: a Pending pod has no exporter yet and a finished one has
    // no state to protect.
    if status.and_then(|s| s.phase.as_deref()) != Some("Running") {
        return Err(Skip::NotRunning);
    }
    let ip = status
        .and_then(|s| s.pod_ip.as_deref())
        .filter(|ip| !ip.is_empty())
        .ok_or(Skip::NoIp)?;
    let annotations = pod.annotations();
    let port = match &config.port_name {
        Some(name) => named_port(pod, name).ok_or(Skip::NoPort)?,
        None => {
            if annotations.get(ANNOTATION_SCRAPE).map(String::as_str) != Some("true") {
                return Err(Skip::NotAnnotated);
            }
            match annotations.get(ANNOTATION_PORT) {
                Some(p) => p.trim().parse::<u16>().map_err(|_| Skip::NoPort)?,
                None => single_port(pod).ok_or(Skip::NoPort)?,
            }
        }
    };
    let path = annotations
        .get(ANNOTATION_PATH)
        .filter(|p| p.starts_with('/'))
        .cloned()
        .unwrap_or_else(|| config.path.clone());
    let scheme = annotations
        .get(ANNOTATION_SCHEME)
        .cloned()
        .or_else(|| config.scheme.clone())
        .unwrap_or_else(|| "http".into());
    if scheme != "http" {
        return Err(Skip::UnsupportedScheme(scheme));
    }
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let mut labels = BTreeMap::new();
    let pod_labels = pod.labels();
    for key in &config.copy_labels {
        if let Some(v) = pod_labels.get(key) {
            labels.insert(key.clone(), v.clone());
        }
    }
    labels.insert("namespace".into(), namespace.clone());
    labels.insert("pod".into(), name.clone());
    let workload = owner_workload(pod, replicaset);
    if let Some(w) = &workload {
        labels.insert("workload_kind".into(), w.kind.to_string());
        labels.insert("workload_name".into(), w.name.clone());
    }
    // The annotation chooses a JSON block; a name the config does not hold fails each scrape
    // with that said, so the pod is unknown rather than read as exposition text.
    let format = match annotations.get(JSON_CONFIG_ANNOTATION) {
        None => PageFormat::Exposition,
        Some(name) => match config.json_configs.get(name.as_str()) {
            Some(x) => PageFormat::Json(x.clone()),
            None => PageFormat::UnusableJsonConfig(
                format!(
                    "the pod's annotation {JSON_CONFIG_ANNOTATION} names {:?}, which jsonConfigs does not hold",
                    name.chars().take(64).collect::<String>()
                )
                .into(),
            ),
        },
    };
    Ok(ScrapeTarget {
        format,
        id: TargetId(format!("{namespace}/{name}").into()),
        url: format!("http://{host}:{port}{path}"),
        labels,
        workload,
    })
}

fn named_port(pod: &Pod, name: &str) -> Option<u16> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(name))
        .and_then(|p| u16::try_from(p.container_port).ok())
}

/// Without a port annotation, a pod that declares exactly one TCP port is scraped on it.
fn single_port(pod: &Pod) -> Option<u16> {
    let spec = pod.spec.as_ref()?;
    let ports: Vec<i32> = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .map(|p| p.container_port)
        .collect();
    match ports.as_slice() {
        [p] => u16::try_from(*p).ok(),
        _ => None,
    }
}

/// `spec.ordinals.start` of a StatefulSet; 0 when unset (docs/hpa-behaviour.md §4.1).
pub fn ordinals_start_of(sts: &StatefulSet) -> u64 {
    sts.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .and_then(|s| u64::try_from(s).ok())
        .unwrap_or(0)
}

/// The reflector stores of one resource, one per watched namespace (or one for all).
struct Mirrors<K: Resource<DynamicType = ()> + Clone + 'static> {
    stores: Vec<reflector::Store<K>>,
}

impl<K> Mirrors<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let key = ObjectRef::new(name).within(namespace);
        self.stores.iter().find_map(|s| s.get(&key))
    }

    fn all(&self) -> Vec<Arc<K>> {
        self.stores.iter().flat_map(|s| s.state()).collect()
    }

    async fn wait_until_ready(&self) {
        for s in &self.stores {
            // Only fails when the writer is dropped, i.e. the runtime is shutting down.
            let _ = s.wait_until_ready().await;
        }
    }
}

/// Running discovery: the mirrored objects, the scale cache, and the sync signal.
pub struct Discovery {
    config: KubernetesDiscoveryConfig,
    pods: Mirrors<Pod>,
    replicasets: Mirrors<ReplicaSet>,
    statefulsets: Mirrors<StatefulSet>,
    /// Watched for `spec.replicas` only, so no answer waits on the API server.
    deployments: Mirrors<Deployment>,
    synced: watch::Receiver<bool>,
    changed: Arc<Changed>,
    /// The pods' facts as of a count of the mirrors' changes (`Changed::count`): a workload's
    /// pods are then found without going over every pod of the cluster on each answer. Once
    /// asked for, the publisher works them out again after each burst of changes, off the
    /// async workers (`tokio::task::spawn_blocking`), so that an answer after a change
    /// rarely pays for it; an ask that finds them behind the count works them out itself.
    pod_facts: std::sync::Mutex<Option<(u64, Arc<PodFactsIndex>)>>,
    pod_facts_asked: std::sync::atomic::AtomicBool,
    pod_facts_built: [std::sync::atomic::AtomicU64; 2],
}

/// Who worked out the pods' facts (`Discovery::pod_facts_builds`).
#[derive(Clone, Copy, Debug)]
enum Builder {
    Ask = 0,
    Publisher = 1,
}

/// How often the pods' facts were worked out, and where.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodFactsBuilds {
    /// By an ask that found them behind the mirrors: an answer (or the deletion-cost writer)
    /// paid for them.
    pub on_ask: u64,
    /// By the publisher, ahead of the asks, off the async workers.
    pub ahead: u64,
}

/// Wakes the target publisher, and counts the mirrors' changes so that an answer that read
/// the cluster's facts is reused only while none moved (`Cluster::version`). Each reflector
/// applies an event to its store before passing it on, so a count read before the facts
/// never hides a change the answer did not see.
#[derive(Default)]
struct Changed {
    notify: Notify,
    count: std::sync::atomic::AtomicU64,
    /// Watches failing now: their mirrors show the last state they saw, of unknown age.
    failing: std::sync::atomic::AtomicUsize,
}

impl Changed {
    fn mark(&self) {
        self.count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.notify.notify_one();
    }
}

impl Discovery {
    /// Start the reflectors and the task that publishes targets to `store`. `fixed` targets
    /// (from `scrape.static`) are kept beside the discovered ones.
    pub fn start(
        client: Client,
        config: KubernetesDiscoveryConfig,
        store: StoreWriter,
        fixed: Vec<ScrapeTarget>,
    ) -> Arc<Discovery> {
        let changed = Arc::new(Changed::default());
        let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
            vec![None]
        } else {
            config.namespaces.iter().cloned().map(Some).collect()
        };
        let mut pod_config = watcher::Config::default();
        if let Some(sel) = &config.pod_selector {
            pod_config = pod_config.labels(sel);
        }
        let pods = Mirrors {
            stores: scopes
                .iter()
                .map(|ns| mirror::<Pod>(&client, ns, pod_config.clone(), &changed))
                .collect(),
        };
        let replicasets = Mirrors {
            stores: scopes
                .iter()
                .map(|ns| mirror::<ReplicaSet>(&client, ns, watcher::Config::default(), &changed))
                .collect(),
        };
        let statefulsets = Mirrors {
            stores: scopes
                .iter()
                .map(|ns| mirror::<StatefulSet>(&client, ns, watcher::Config::default(), &changed))
                .collect(),
        };
        let deployments = Mirrors {
            stores: scopes
                .iter()
                .map(|ns| mirror::<Deployment>(&client, ns, watcher::Config::default(), &changed))
                .collect(),
        };
        let (synced_tx, synced) = watch::channel(false);
        let discovery = Arc::new(Discovery {
            config,
            pods,
            replicasets,
            statefulsets,
            deployments,
            synced,
            changed: changed.clone(),
            pod_facts: std::sync::Mutex::new(None),
            pod_facts_asked: Default::default(),
            pod_facts_built: Default::default(),
        });
        let d = discovery.clone();
        tokio::spawn(async move {
            d.pods.wait_until_ready().await;
            d.replicasets.wait_until_ready().await;
            d.statefulsets.wait_until_ready().await;
            d.deployments.wait_until_ready().await;
            tracing::info!("kubernetes discovery synced");
            let mut retry = PUBLISH_RETRY_FIRST;
            loop {
                // Both passes go over every pod: off the async workers that serve answers.
                let (work, fixed, store) = (d.clone(), fixed.clone(), store.clone());
                let published = tokio::task::spawn_blocking(move || {
                    let mut targets = fixed;
                    targets.extend(work.targets());
                    let count = targets.len();
                    let change = store.set_targets(targets);
                    if work
                        .pod_facts_asked
                        .load(std::sync::atomic::Ordering::Relaxed)
                    {
                        work.pod_facts_at_count(Builder::Publisher);
                    }
                    (count, change)
                })
                .await;
                let (count, change) = match published {
                    Ok(published) => published,
                    Err(e) => {
                        // Only a panic gets here. The round is tried again without waiting
                        // for another change, which may not come (and before the first
                        // publication, `wait_synced` waits on it); a round that keeps failing
                        // is tried less and less often, up to `PUBLISH_RETRY_LAST`. A change
                        // of the cluster (which may be what the round needs) brings the retry
                        // forward, but only past half the wait: a large cluster changes all the
                        // time, and would otherwise retry a failing round as often as at first.
                        let (at_least, at_most) = retry_window(retry);
                        tracing::error!(error = %e, retry_within_s = at_most.as_secs(), "publishing discovered targets failed");
                        tokio::time::sleep(at_least).await;
                        tokio::select! {
                            _ = tokio::time::sleep(at_most - at_least) => {}
                            _ = changed.notify.notified() => {}
                        }
                        retry = next_retry(retry);
                        continue;
                    }
                };
                retry = PUBLISH_RETRY_FIRST;
                if *synced_tx.borrow() && (change.added > 0 || change.removed > 0) {
                    tracing::info!(
                        targets = count,
                        added = change.added,
                        removed = change.removed,
                        "discovered targets changed"
                    );
                }
                if !*synced_tx.borrow() {
                    tracing::info!(targets = count, "first discovered target set published");
                    let _ = synced_tx.send(true);
                }
                // Notify keeps one permit, so changes during the recomputation are not lost and
                // a burst of events coalesces into one recomputation.
                changed.notify.notified().await;
            }
        });
        discovery
    }

    /// The Deployments annotated `hpa-bridge.io/deletion-cost` with a value other than
    /// `stateful-index`, and that value, sorted: they are not opted in, which their owner
    /// most likely meant them to be.
    pub fn unknown_deletion_cost_values(&self) -> Vec<(WorkloadRef, String)> {
        let mut out: Vec<(WorkloadRef, String)> = self
            .deployments
            .all()
            .iter()
            .filter_map(|d| {
                let value = unknown_deletion_cost_value(d)?;
                Some((
                    WorkloadRef {
                        kind: WorkloadKind::Deployment,
                        namespace: d.namespace().unwrap_or_default(),
                        name: d.name_any(),
                    },
                    value.to_string(),
                ))
            })
            .collect();
        out.sort();
        out
    }

    /// The Deployments that opted in to deletion cost, each with its pods as the watch shows
    /// them; empty before the first sync.
    pub fn opted_in_deployments(&self) -> Vec<(WorkloadRef, PodSet)> {
        if !*self.synced.borrow() {
            return Vec::new();
        }
        let opted: BTreeSet<WorkloadRef> = self
            .deployments
            .all()
            .iter()
            .filter(|d| opted_in(d))
            .map(|d| WorkloadRef {
                kind: WorkloadKind::Deployment,
                namespace: d.namespace().unwrap_or_default(),
                name: d.name_any(),
            })
            .collect();
        if opted.is_empty() {
            return Vec::new();
        }
        let index = self.pod_facts_index();
        opted
            .into_iter()
            .map(|w| {
                let pods = index.workload(&w);
                (w, pods)
            })
            .collect()
    }

    /// Resolves once the first complete target set is in the store.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.clone();
        // Only fails when the publisher task is gone (runtime shutdown).
        let _ = rx.wait_for(|s| *s).await;
    }

    /// The current discovered targets, sorted by id.
    pub fn targets(&self) -> Vec<ScrapeTarget> {
        let lookup = |ns: &str, name: &str| self.replicasets.get(ns, name);
        let mut targets: Vec<ScrapeTarget> = self
            .pods
            .all()
            .iter()
            .filter_map(|pod| match pod_target(pod, &self.config, &lookup) {
                Ok(t) => Some(t),
                Err(why) => {
                    tracing::trace!(pod = %pod.name_any(), reason = ?why, "pod not scraped");
                    None
                }
            })
            .collect();
        targets.sort_by(|a, b| a.id.cmp(&b.id));
        targets.dedup_by(|a, b| a.id == b.id);
        targets
    }
}

impl Discovery {
    /// The pods' facts as the mirrors show them. Read at a count of changes, they stand for
    /// every later read at the same count: a reflector applies an event to its store before
    /// it is counted, so a snapshot worked out after reading the count holds every change
    /// counted until then, as an answer reused at an unchanged `Cluster::version` does.
    fn pod_facts_index(&self) -> Arc<PodFactsIndex> {
        self.pod_facts_asked
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.pod_facts_at_count(Builder::Ask)
    }

    /// How often the pods' facts were worked out since the start, by an ask and ahead of
    /// one.
    pub fn pod_facts_builds(&self) -> PodFactsBuilds {
        let built = |b: Builder| {
            self.pod_facts_built[b as usize].load(std::sync::atomic::Ordering::Acquire)
        };
        PodFactsBuilds {
            on_ask: built(Builder::Ask),
            ahead: built(Builder::Publisher),
        }
    }

    /// `pod_facts_index`'s snapshot, worked out by `by` if the kept one is behind the count.
    fn pod_facts_at_count(&self, by: Builder) -> Arc<PodFactsIndex> {
        let count = self
            .changed
            .count
            .load(std::sync::atomic::Ordering::Acquire);
        if let Some((at, index)) = &*self.pod_facts.lock().unwrap_or_else(|e| e.into_inner()) {
            if *at == count {
                return index.clone();
            }
        }
        let lookup = |ns: &str, name: &str| self.replicasets.get(ns, name);
        let index = Arc::new(pod_facts_index(&self.pods.all(), &lookup));
        let mut kept = self.pod_facts.lock().unwrap_or_else(|e| e.into_inner());
        // A slower reader of an older count must not replace a newer snapshot.
        let replaced = if kept.as_ref().is_none_or(|(at, _)| *at <= count) {
            kept.replace((count, index.clone()))
        } else {
            None
        };
        // Counted once kept: a count seen moving means facts at least this new are kept.
        self.pod_facts_built[by as usize].fetch_add(1, std::sync::atomic::Ordering::Release);
        // Freeing every pod's facts is long: not while an ask waits on the lock.
        drop(kept);
        drop(replaced);
        index
    }

    /// Whether the mirrors hold `namespace`'s objects: synced, and the namespace watched.
    fn mirrors_synced(&self, namespace: &str) -> bool {
        *self.synced.borrow()
            && (self.config.namespaces.is_empty()
                || self.config.namespaces.iter().any(|n| n == namespace))
    }
}

impl Cluster for Discovery {
    /// `spec.replicas` from the watch cache, which is what the scale subresource reports for
    /// these kinds: no answer waits on the API server (a watch that breaks re-lists, and the
    /// last known object keeps answering meanwhile). `None` while the workload is not in the
    /// cache, which the engine refuses rather than guesses.
    fn current_replicas(&self, w: &WorkloadRef) -> Option<u64> {
        let replicas = match w.kind {
            WorkloadKind::StatefulSet => self
                .statefulsets
                .get(&w.namespace, &w.name)?
                .spec
                .as_ref()
                .map(|s| s.replicas),
            WorkloadKind::Deployment => self
                .deployments
                .get(&w.namespace, &w.name)?
                .spec
                .as_ref()
                .map(|s| s.replicas),
            WorkloadKind::ReplicaSet => self
                .replicasets
                .get(&w.namespace, &w.name)?
                .spec
                .as_ref()
                .map(|s| s.replicas),
            WorkloadKind::Other(_) => return None,
        };
        // The API server defaults spec.replicas to 1, so an object without it means 1.
        u64::try_from(replicas.flatten().unwrap_or(1)).ok()
    }

    fn version(&self) -> Option<u64> {
        let count = self
            .changed
            .count
            .load(std::sync::atomic::Ordering::Acquire);
        Some(count * 2 + u64::from(*self.synced.borrow()))
    }

    fn facts_current(&self) -> bool {
        self.changed
            .failing
            .load(std::sync::atomic::Ordering::Acquire)
            == 0
    }

    fn deletion_cost_opt_in(&self, w: &WorkloadRef) -> bool {
        w.kind == WorkloadKind::Deployment
            && self
                .deployments
                .get(&w.namespace, &w.name)
                .is_some_and(|d| opted_in(&d))
    }

    /// A pod is attributed to its ReplicaSet when the mirror does not hold that ReplicaSet
    /// (`owner_workload`); until the mirror holds it with no Deployment over it, the pod may be
    /// a Deployment's.
    fn owner_unresolved(&self, w: &WorkloadRef) -> bool {
        if w.kind != WorkloadKind::ReplicaSet {
            return false;
        }
        if !self.mirrors_synced(&w.namespace) {
            return true;
        }
        match self.replicasets.get(&w.namespace, &w.name) {
            None => true,
            Some(rs) => controller_of(rs.owner_references())
                .is_some_and(|o| o.kind == WorkloadKind::Deployment.as_str()),
        }
    }

    /// From the ReplicaSet mirror, under the same conditions as `pods`: unknown before the
    /// first sync and for a namespace that is not watched.
    fn replica_sets(&self, deployment: &WorkloadRef) -> Option<Vec<ReplicaSetFacts>> {
        if deployment.kind != WorkloadKind::Deployment
            || !self.mirrors_synced(&deployment.namespace)
        {
            return None;
        }
        Some(replica_sets_of(deployment, &self.replicasets.all()))
    }

    fn ordinals_start(&self, workload: &WorkloadRef) -> u64 {
        if workload.kind != WorkloadKind::StatefulSet {
            return 0;
        }
        self.statefulsets
            .get(&workload.namespace, &workload.name)
            .map(|s| ordinals_start_of(&s))
            .unwrap_or(0)
    }

    /// Every mirrored pod object in `namespace`, whatever its phase: a pod that exists but is
    /// not Running (crash loop, exporter down) may still hold an ordinal, so its retained
    /// index must stay (docs/hpa-behaviour.md §4.1). Unknown before the first sync and for a namespace
    /// that is not watched, so Prometheus series are then not filtered at all.
    fn pods(&self, namespace: &str) -> Option<PodSet> {
        if !self.mirrors_synced(namespace) {
            return None;
        }
        Some(self.pod_facts_index().namespace(namespace))
    }

    /// As `pods`, of one workload's pods.
    fn workload_pods(&self, workload: &WorkloadRef) -> Option<PodSet> {
        if !self.mirrors_synced(&workload.namespace) {
            return None;
        }
        Some(self.pod_facts_index().workload(workload))
    }
}

/// A reflector for `K` in one namespace (or all), driven by its own task; every change to the
/// mirror wakes the publisher.
fn mirror<K>(
    client: &Client,
    namespace: &Option<String>,
    config: watcher::Config,
    changed: &Arc<Changed>,
) -> reflector::Store<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<K> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (reader, writer) = reflector::store();
    let kind = K::kind(&()).into_owned();
    let stream = reflector::reflector(
        writer,
        watcher(api, config)
            .modify(|o| o.meta_mut().managed_fields = None)
            .default_backoff(),
    );
    tokio::spawn(drive(stream, kind, namespace.clone(), changed.clone()));
    reader
}

async fn drive<K, S>(stream: S, kind: String, namespace: Option<String>, changed: Arc<Changed>)
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let ns = namespace.as_deref().unwrap_or("*").to_string();
    let mut stream = std::pin::pin!(stream);
    let mut failing = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::InitDone)
            | Ok(watcher::Event::Apply(_))
            | Ok(watcher::Event::Delete(_)) => {
                if failing {
                    tracing::info!(%kind, namespace = %ns, "watch recovered");
                    failing = false;
                    changed
                        .failing
                        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                }
                changed.mark();
            }
            Ok(_) => {}
            Err(e) => {
                // The backoff retries; log the first failure of a run, not every retry.
                if !failing {
                    tracing::warn!(%kind, namespace = %ns, error = %e, "watch failed; retrying with backoff");
                    failing = true;
                    changed
                        .failing
                        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                    changed.mark();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failing_publisher_round_is_retried_ever_less_often_however_the_cluster_churns() {
        let windows: Vec<(u64, u64)> =
            std::iter::successors(Some(PUBLISH_RETRY_FIRST), |r| Some(next_retry(*r)))
                .take(9)
                .map(retry_window)
                .map(|(least, most)| (least.as_secs(), most.as_secs()))
                .collect();
        assert_eq!(
            windows,
            [
                (1, 1),
                (1, 2),
                (2, 4),
                (4, 8),
                (8, 16),
                (16, 32),
                (30, 60),
                (30, 60),
                (30, 60)
            ]
        );
    }

    fn config() -> KubernetesDiscoveryConfig {
        yaml_serde::from_str("copyLabels: [app]").unwrap()
    }

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn running(annotations: serde_json::Value, owner: serde_json::Value) -> Pod {
        pod(json!({
            "metadata": {"name": "lobby-1", "namespace": "games", "labels": {"app": "lobby", "other": "x"},
                          "annotations": annotations, "ownerReferences": owner},
            "spec": {"containers": [{"name": "c", "ports": [{"name": "metrics", "containerPort": 9100}, {"name": "game", "containerPort": 7000}]}]},
            "status": {"phase": "Running", "podIP": "10.0.0.7"}
        }))
    }

    fn none(_: &str, _: &str) -> Option<Arc<ReplicaSet>> {
        None
    }

    /// The index of pod facts gives what a pass over every pod gives: a namespace's pods, and
    /// a workload's as those of its namespace whose workload it is (StatefulSet pods, a
    /// Deployment's through its ReplicaSet, a ReplicaSet no Deployment controls, orphans, the
    /// same names in two namespaces).
    #[test]
    fn the_pod_facts_index_gives_what_a_pass_over_every_pod_gives() {
        let owned = |ns: &str, name: &str, owner: Option<(&str, &str)>| {
            let owners = match owner {
                Some((kind, owner)) => {
                    json!([{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": "u", "controller": true}])
                }
                None => json!([]),
            };
            Arc::new(pod(json!({
                "metadata": {"name": name, "namespace": ns, "ownerReferences": owners},
                "status": {"phase": "Running"}
            })))
        };
        let pods = vec![
            owned("games", "lobby-0", Some(("StatefulSet", "lobby"))),
            owned("games", "lobby-1", Some(("StatefulSet", "lobby"))),
            owned("other", "lobby-0", Some(("StatefulSet", "lobby"))),
            owned("games", "web-5d4f-a", Some(("ReplicaSet", "web-5d4f"))),
            owned("games", "web-5d4f-b", Some(("ReplicaSet", "web-5d4f"))),
            owned("games", "bare-x", Some(("ReplicaSet", "bare"))),
            owned("games", "orphan", None),
            // No pod object lacks a namespace; one that did would be no namespace's pod.
            Arc::new(pod(json!({
                "metadata": {"name": "loose", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lobby", "uid": "u", "controller": true}]},
                "status": {"phase": "Running"}
            }))),
        ];
        let rs: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": "web-5d4f", "namespace": "games",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d", "controller": true}]}}))
        .unwrap();
        let rs = Arc::new(rs);
        let lookup =
            |ns: &str, name: &str| (ns == "games" && name == "web-5d4f").then(|| rs.clone());
        let index = pod_facts_index(&pods, &lookup);
        let plain = |ns: &str| -> BTreeMap<String, PodFacts> {
            pods.iter()
                .filter(|p| p.namespace().as_deref() == Some(ns))
                .map(|p| (p.name_any(), pod_facts(p, &lookup)))
                .collect()
        };
        for ns in ["games", "other", "none", ""] {
            assert_eq!(*index.namespace(ns), plain(ns), "{ns}");
        }
        let workload = |kind: WorkloadKind, ns: &str, name: &str| WorkloadRef {
            kind,
            namespace: ns.into(),
            name: name.into(),
        };
        let workloads = [
            workload(WorkloadKind::StatefulSet, "games", "lobby"),
            workload(WorkloadKind::StatefulSet, "other", "lobby"),
            workload(WorkloadKind::Deployment, "games", "web"),
            workload(WorkloadKind::ReplicaSet, "games", "bare"),
            workload(WorkloadKind::ReplicaSet, "games", "web-5d4f"),
            workload(WorkloadKind::Deployment, "games", "gone"),
            workload(WorkloadKind::StatefulSet, "", "lobby"),
        ];
        let mut found = 0;
        for w in &workloads {
            let want: BTreeMap<String, PodFacts> = plain(&w.namespace)
                .into_iter()
                .filter(|(_, f)| f.workload.as_ref() == Some(w))
                .collect();
            found += want.len();
            assert_eq!(*index.workload(w), want, "{w:?}");
        }
        assert_eq!(found, 6, "every owned pod is some workload's");
    }

    /// A pod chooses its JSON block by annotation; a name the config does not hold makes
    /// every scrape of it fail, saying so, rather than read the page as exposition text.
    #[test]
    fn the_json_config_annotation_chooses_a_block_from_json_configs() {
        let config = hpa_bridge_rules::config::Config::from_yaml(
            "scrape: {kubernetes: {}}\njsonConfigs:\n  st: {samples: [{series: rec, value: $.a}]}\n",
        )
        .unwrap();
        let k = config.scrape.kubernetes.unwrap();
        let annotated = |name: &str| {
            running(
                json!({"prometheus.io/scrape": "true", "prometheus.io/port": "9100", JSON_CONFIG_ANNOTATION: name}),
                json!([]),
            )
        };
        let t = pod_target(&annotated("st"), &k, &none).unwrap();
        assert!(
            matches!(&t.format, PageFormat::Json(x) if x.name == "jsonConfigs.st"),
            "{:?}",
            t.format
        );
        let t = pod_target(&annotated("nope"), &k, &none).unwrap();
        assert_eq!(
            t.format,
            PageFormat::UnusableJsonConfig(
                "the pod's annotation hpa-bridge.io/json-config names \"nope\", which jsonConfigs does not hold".into()
            )
        );
    }

    #[test]
    fn annotations_choose_port_and_path_and_labels_are_copied() {
        let p = running(
            json!({"prometheus.io/scrape": "true", "prometheus.io/port": "9100", "prometheus.io/path": "/m"}),
            json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lobby", "uid": "u", "controller": true}]),
        );
        let t = pod_target(&p, &config(), &none).unwrap();
        assert_eq!(t.url, "http://10.0.0.7:9100/m");
        assert_eq!(&*t.id.0, "games/lobby-1");
        let want: BTreeMap<String, String> = [
            ("app", "lobby"),
            ("namespace", "games"),
            ("pod", "lobby-1"),
            ("workload_kind", "StatefulSet"),
            ("workload_name", "lobby"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(t.labels, want);
        assert_eq!(t.workload.unwrap().name, "lobby");
    }

    #[test]
    fn unannotated_pods_are_skipped_unless_a_port_name_is_configured() {
        let p = running(json!({}), json!([]));
        assert_eq!(pod_target(&p, &config(), &none), Err(Skip::NotAnnotated));
        let mut c = config();
        c.port_name = Some("metrics".into());
        let t = pod_target(&p, &c, &none).unwrap();
        assert_eq!(t.url, "http://10.0.0.7:9100/metrics");
        assert_eq!(t.workload, None);
        c.port_name = Some("nope".into());
        assert_eq!(pod_target(&p, &c, &none), Err(Skip::NoPort));
    }

    #[test]
    fn pods_that_are_not_running_or_have_no_ip_are_skipped() {
        let mut p = running(
            json!({"prometheus.io/scrape": "true", "prometheus.io/port": "9100"}),
            json!([]),
        );
        p.status.as_mut().unwrap().pod_ip = None;
        assert_eq!(pod_target(&p, &config(), &none), Err(Skip::NoIp));
        p.status.as_mut().unwrap().phase = Some("Pending".into());
        assert_eq!(pod_target(&p, &config(), &none), Err(Skip::NotRunning));
    }

    #[test]
    fn a_replicaset_owner_resolves_to_its_deployment() {
        let p = running(
            json!({"prometheus.io/scrape": "true", "prometheus.io/port": "9100"}),
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f", "uid": "u", "controller": true}]),
        );
        let rs: Arc<ReplicaSet> = Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "web-5d4f", "namespace": "games",
                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d", "controller": true}]}
            }))
            .unwrap(),
        );
        let lookup =
            |ns: &str, name: &str| (ns == "games" && name == "web-5d4f").then(|| rs.clone());
        let t = pod_target(&p, &config(), &lookup).unwrap();
        assert_eq!(t.labels["workload_kind"], "Deployment");
        assert_eq!(t.labels["workload_name"], "web");
        // Before the ReplicaSet is known, the pod is attributed to the ReplicaSet itself.
        let t = pod_target(&p, &config(), &none).unwrap();
        assert_eq!(t.labels["workload_kind"], "ReplicaSet");
        assert_eq!(t.labels["workload_name"], "web-5d4f");
    }

    /// A Deployment's ReplicaSets are those it controls in its namespace, with spec.replicas
    /// as written (absent is the API server's default, 1), whether or not they have pods.
    #[test]
    fn replica_sets_of_a_deployment_are_those_it_controls() {
        let rs = |ns: &str, name: &str, owner: &str, replicas: Option<i32>| -> Arc<ReplicaSet> {
            let mut v = json!({
                "metadata": {"name": name, "namespace": ns,
                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "uid": "d", "controller": true}]},
                "spec": {"selector": {}}
            });
            if let Some(r) = replicas {
                v["spec"]["replicas"] = json!(r);
            }
            Arc::new(serde_json::from_value(v).unwrap())
        };
        let all = [
            rs("games", "web-new", "web", Some(2)),
            rs("games", "web-old", "web", Some(0)),
            rs("games", "web-bare", "web", None),
            rs("games", "api-1", "api", Some(3)),
            rs("other", "web-elsewhere", "web", Some(4)),
        ];
        let web = WorkloadRef {
            kind: "Deployment".into(),
            namespace: "games".into(),
            name: "web".into(),
        };
        let got: Vec<(String, u64)> = replica_sets_of(&web, &all)
            .into_iter()
            .map(|f| (f.name, f.replicas))
            .collect();
        assert_eq!(
            got,
            [
                ("web-bare".to_string(), 1),
                ("web-new".into(), 2),
                ("web-old".into(), 0)
            ]
        );
    }

    /// The facts the Deployment floor stands on come from the pod object as the API server
    /// writes it: the Ready condition, the cost annotation, and the controlling ReplicaSet.
    #[test]
    fn pod_facts_read_readiness_the_cost_annotation_and_the_replicaset() {
        let mut p = running(
            json!({POD_DELETION_COST: "3"}),
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f", "uid": "u", "controller": true}]),
        );
        let f = pod_facts(&p, &none);
        assert!(f.running && !f.ready, "{f:?}");
        assert_eq!(f.deletion_cost.as_deref(), Some("3"));
        assert_eq!(f.replica_set.as_deref(), Some("web-5d4f"));
        p.status.as_mut().unwrap().conditions = Some(
            serde_json::from_value(json!([
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"}
            ]))
            .unwrap(),
        );
        assert!(pod_facts(&p, &none).ready);
        p.status.as_mut().unwrap().conditions =
            Some(serde_json::from_value(json!([{"type": "Ready", "status": "False"}])).unwrap());
        assert!(!pod_facts(&p, &none).ready);
        let orphan = pod_facts(&running(json!({}), json!([])), &none);
        assert_eq!((orphan.deletion_cost, orphan.replica_set), (None, None));

        let deployment = |annotations: serde_json::Value| -> Deployment {
            serde_json::from_value(json!({"metadata": {"name": "web", "annotations": annotations}}))
                .unwrap()
        };
        assert!(opted_in(&deployment(
            json!({DELETION_COST_OPT_IN: "stateful-index"})
        )));
        assert!(!opted_in(&deployment(json!({DELETION_COST_OPT_IN: "yes"}))));
        assert!(!opted_in(&deployment(json!({}))));
        assert_eq!(
            unknown_deletion_cost_value(&deployment(json!({DELETION_COST_OPT_IN: "max-index"}))),
            Some("max-index")
        );
        assert_eq!(
            unknown_deletion_cost_value(&deployment(
                json!({DELETION_COST_OPT_IN: "stateful-index"})
            )),
            None
        );
        assert_eq!(unknown_deletion_cost_value(&deployment(json!({}))), None);
    }

    #[test]
    fn ipv6_addresses_are_bracketed_and_other_schemes_are_refused() {
        let mut p = running(
            json!({"prometheus.io/scrape": "true", "prometheus.io/port": "9100"}),
            json!([]),
        );
        p.status.as_mut().unwrap().pod_ip = Some("fd00::7".into());
        assert_eq!(
            pod_target(&p, &config(), &none).unwrap().url,
            "http://[fd00::7]:9100/metrics"
        );
        p.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(ANNOTATION_SCHEME.into(), "https".into());
        assert_eq!(
            pod_target(&p, &config(), &none),
            Err(Skip::UnsupportedScheme("https".into()))
        );
    }

    #[test]
    fn ordinals_start_defaults_to_zero() {
        let sts: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "lobby"},
            "spec": {"selector": {}, "serviceName": "", "template": {}, "ordinals": {"start": 3}}
        }))
        .unwrap();
        assert_eq!(ordinals_start_of(&sts), 3);
        assert_eq!(ordinals_start_of(&StatefulSet::default()), 0);
    }
}
