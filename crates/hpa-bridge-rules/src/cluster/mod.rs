//! What the engine needs to know from Kubernetes, behind one trait: which pods exist and who
//! owns them, a workload's `spec.replicas` and a StatefulSet's `spec.ordinals.start`.
//!
//! The kube watchers (`source::discovery`) implement it; so do the simulator and the tests.
//! Nothing here does I/O: implementations answer from memory (watch caches), so no answer waits on the API server.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

mod workload_kind;

pub use workload_kind::{OtherKind, WorkloadKind};

/// The workload a pod belongs to, when Kubernetes says so.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WorkloadRef {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
}

/// The annotation a Deployment carries to let hpa-bridge rank its pods for scale-in by their
/// stateful index (docs/deletion-cost.md).
pub const DELETION_COST_OPT_IN: &str = "hpa-bridge.io/deletion-cost";
/// The only value of `DELETION_COST_OPT_IN` that opts in.
pub const DELETION_COST_FROM_INDEX: &str = "stateful-index";
/// The annotation the ReplicaSet controller ranks pods by on scale-in (lower goes first).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The cost the ReplicaSet controller reads from the annotation, as `GetDeletionCostFromPodAnnotations`
/// parses it: a decimal int32 without a plus sign or leading zeros; absent or invalid is 0.
pub fn deletion_cost(annotation: Option<&str>) -> i32 {
    let Some(value) = annotation else {
        return 0;
    };
    let valid_first = match value.as_bytes().first() {
        Some(b'-') => true,
        Some(b'0') => value == "0",
        Some(b'1'..=b'9') => true,
        _ => false,
    };
    if !valid_first {
        return 0;
    }
    value.parse::<i32>().unwrap_or(0)
}

/// What Kubernetes says about one existing pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFacts {
    /// `status.phase` is Running: only such a pod has an exporter Prometheus could scrape, so
    /// only it makes the evidence incomplete while Prometheus has no series for it.
    pub running: bool,
    /// The owning workload (a ReplicaSet's pods resolve to their Deployment).
    pub workload: Option<WorkloadRef>,
    /// The pod's `Ready` condition is True: the ReplicaSet controller deletes a pod that is not
    /// Ready before any Ready one, whatever its deletion cost.
    pub ready: bool,
    /// `controller.kubernetes.io/pod-deletion-cost` as the watch shows it, unparsed.
    pub deletion_cost: Option<String>,
    /// The ReplicaSet that controls the pod, by name (a Deployment's pods).
    pub replica_set: Option<String>,
    /// `status.phase` is Succeeded or Failed (an evicted pod, say): not an active pod.
    pub terminated: bool,
}

/// What Kubernetes says about one ReplicaSet a Deployment controls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaSetFacts {
    pub name: String,
    /// `spec.replicas` (the API server defaults it to 1). Above 0, the deployment controller
    /// gives the ReplicaSet its share of a scale-down, whether or not its pods exist yet.
    pub replicas: u64,
}

/// Pods by name, as a cluster lists them. Shared: a cluster that keeps its pods' facts
/// between changes hands the same set to every answer instead of a copy per answer.
pub type PodSet = Arc<BTreeMap<String, PodFacts>>;

/// Cluster facts for the engine; absent without Kubernetes.
pub trait Cluster: Send + Sync {
    /// Every pod object that exists in `namespace`, whatever its phase, by name; `None` while
    /// unknown (then every Prometheus series within `retainFor` counts and no pod is reported
    /// unknown). Prometheus keeps a series for as long as it is asked to look back and cannot
    /// tell a deleted pod from a failing one; with the pod set, series of deleted pods stop
    /// counting at once.
    fn pods(&self, _namespace: &str) -> Option<PodSet> {
        None
    }

    /// The pods of `workload`: those `pods(&workload.namespace)` lists whose `workload` it is;
    /// `None` when `pods` is `None`. A rule about one workload's pods asks this, so a cluster that
    /// keeps its pods by workload need not go over the namespace's on every answer.
    fn workload_pods(&self, workload: &WorkloadRef) -> Option<PodSet> {
        self.pods(&workload.namespace).map(|pods| {
            Arc::new(
                pods.iter()
                    .filter(|(_, f)| f.workload.as_ref() == Some(workload))
                    .map(|(name, f)| (name.clone(), f.clone()))
                    .collect(),
            )
        })
    }

    /// `spec.replicas` of the workload (what its scale subresource reports), from memory.
    fn current_replicas(&self, workload: &WorkloadRef) -> Option<u64>;

    /// `spec.ordinals.start` of a StatefulSet (0 otherwise).
    fn ordinals_start(&self, workload: &WorkloadRef) -> u64;

    /// A number that moves whenever any of the facts above may have changed, so an answer
    /// that read them can be reused while it stands; `None` when the facts cannot tell, and
    /// then no answer is reused.
    fn version(&self) -> Option<u64> {
        None
    }

    /// Whether every watch behind these facts is live. While one fails, its mirror keeps the
    /// last state it saw, which a rule that needs the pods' state now (the Deployment floor)
    /// must not trust.
    fn facts_current(&self) -> bool {
        true
    }

    /// Whether the workload is a Deployment annotated `hpa-bridge.io/deletion-cost:
    /// "stateful-index"`: its floor is then the count of pods holding state, which protects
    /// them only while their deletion cost ranks them last (docs/deletion-cost.md).
    fn deletion_cost_opt_in(&self, _workload: &WorkloadRef) -> bool {
        false
    }

    /// Whether `workload` names a ReplicaSet whose pods the facts could not follow to their
    /// controller: the ReplicaSet is not (yet) in the watch cache, or it is controlled by a
    /// Deployment though its pods were attributed to the ReplicaSet before that was known.
    /// Such pods may be an opted-in Deployment's, whose floor counts holding pods rather than
    /// taking the highest index, so no floor over them is complete.
    fn owner_unresolved(&self, _workload: &WorkloadRef) -> bool {
        false
    }

    /// The ReplicaSets whose controller is `deployment`, by name; `None` while not known. The
    /// default is `None`, not an empty list: an implementation that cannot tell must leave an
    /// opted-in Deployment's floor incomplete, never complete it by saying "no rollout".
    fn replica_sets(&self, _deployment: &WorkloadRef) -> Option<Vec<ReplicaSetFacts>> {
        None
    }
}
