//! The kind of workload that owns a pod.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::Serialize;

/// The kind of a pod's controlling owner, as Kubernetes names it. The kinds hpa-bridge reads
/// (replicas, ordinals, ReplicaSets, deletion cost) are variants; any other controller (a
/// DaemonSet, a Job, an operator's own resource) is kept by name, because its pods are still
/// scraped and labelled with it.
///
/// Order goes by the name, so maps keyed by workload keep the order of the names.
#[derive(Clone, Debug)]
pub enum WorkloadKind {
    StatefulSet,
    Deployment,
    ReplicaSet,
    Other(OtherKind),
}

/// A kind that is none of the named variants. Made only by `WorkloadKind::from`, so it never
/// holds one of their names: a `match` on the variants sees every StatefulSet.
#[derive(Clone, Debug)]
pub struct OtherKind(Arc<str>);

impl OtherKind {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl WorkloadKind {
    pub fn as_str(&self) -> &str {
        match self {
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::Other(other) => other.as_str(),
        }
    }
}

impl From<&str> for WorkloadKind {
    fn from(name: &str) -> Self {
        match name {
            "StatefulSet" => WorkloadKind::StatefulSet,
            "Deployment" => WorkloadKind::Deployment,
            "ReplicaSet" => WorkloadKind::ReplicaSet,
            other => WorkloadKind::Other(OtherKind(other.into())),
        }
    }
}

impl PartialEq for WorkloadKind {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for WorkloadKind {}

impl Hash for WorkloadKind {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for WorkloadKind {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for WorkloadKind {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for WorkloadKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn a_known_name_is_its_variant_and_any_other_is_kept() {
        assert!(matches!(
            WorkloadKind::from("StatefulSet"),
            WorkloadKind::StatefulSet
        ));
        assert!(matches!(
            WorkloadKind::from("Deployment"),
            WorkloadKind::Deployment
        ));
        assert!(matches!(
            WorkloadKind::from("ReplicaSet"),
            WorkloadKind::ReplicaSet
        ));
        let game = WorkloadKind::from("GameServerSet");
        assert!(matches!(&game, WorkloadKind::Other(n) if n.as_str() == "GameServerSet"));
        assert_eq!(game.to_string(), "GameServerSet");
        assert_eq!(serde_json::to_string(&game).unwrap(), r#""GameServerSet""#);
        assert_eq!(
            serde_json::to_string(&WorkloadKind::Deployment).unwrap(),
            r#""Deployment""#
        );
    }

    /// A `BTreeMap` keyed by workload iterates in the order of the kinds' names, and equal
    /// names are equal kinds with equal hashes.
    #[test]
    fn order_and_identity_are_the_names() {
        let names = [
            "ReplicaSet",
            "DaemonSet",
            "StatefulSet",
            "Deployment",
            "Job",
        ];
        let mut kinds: Vec<WorkloadKind> = names.iter().map(|n| (*n).into()).collect();
        kinds.sort();
        let mut sorted = names.to_vec();
        sorted.sort();
        assert_eq!(
            kinds.iter().map(WorkloadKind::as_str).collect::<Vec<_>>(),
            sorted
        );
        let state = std::collections::hash_map::RandomState::new();
        for name in names {
            let (a, b) = (WorkloadKind::from(name), WorkloadKind::from(name));
            assert_eq!(a, b);
            assert_eq!(state.hash_one(&a), state.hash_one(&b));
        }
        assert_ne!(WorkloadKind::from("Job"), WorkloadKind::from("DaemonSet"));
    }
}
