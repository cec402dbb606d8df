//! Which pods a ReplicaSet deletes when it has more than `spec.replicas`
//! (docs/hpa-behaviour.md §9): `getPodsToDelete` ranks the active pods with
//! `ActivePodsWithRanks.Less` and deletes the first `diff`.
//!
//! Go's `sort.Sort` is not stable, so pods that no step tells apart go in an order set by the
//! order the informer listed them in, which nothing promises. The model sorts stably: the
//! caller's order breaks ties, and a simulator that shuffles the pods with a seed explores the
//! orders a cluster may produce.

use std::cmp::Ordering;
use std::time::Duration;

use hpa_bridge_rules::cluster::deletion_cost;

/// `status.phase` of an active pod (`Succeeded` and `Failed` pods are not active and never
/// ranked). The order is `podPhaseToOrdinal`: Pending before Unknown before Running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PodPhase {
    Pending,
    Unknown,
    Running,
}

/// What the ReplicaSet controller reads of one active pod when it ranks it. Instants are
/// durations since the caller's epoch; `None` is Go's zero `metav1.Time`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankedPod {
    pub name: String,
    /// `metadata.uid`: the tie-break among pods of the same logarithmic age.
    pub uid: String,
    /// `spec.nodeName`; `None` while the pod is unscheduled.
    pub node: Option<String>,
    pub phase: PodPhase,
    /// The `Ready` condition is True.
    pub ready: bool,
    /// `lastTransitionTime` of the True `Ready` condition.
    pub ready_since: Option<Duration>,
    /// `controller.kubernetes.io/pod-deletion-cost`, unparsed.
    pub deletion_cost: Option<String>,
    /// The highest `restartCount` among the pod's regular containers (`containerStatuses`).
    pub max_restarts: u32,
    /// The highest `restartCount` among its restartable init containers (sidecars: init
    /// containers with `restartPolicy: Always`), compared only between pods whose regular
    /// counts are equal.
    pub max_sidecar_restarts: u32,
    pub created_at: Option<Duration>,
}

/// The feature gates the ranking reads (docs/hpa-behaviour.md §9.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankingGates {
    /// `PodDeletionCost`: alpha (off) in 1.21, beta and on from 1.22.
    pub pod_deletion_cost: bool,
    /// `LogarithmicScaleDown`: alpha (off) in 1.21, beta and on from 1.22.
    pub logarithmic_scale_down: bool,
}

impl RankingGates {
    /// The defaults of a Kubernetes 1.`minor` kube-controller-manager.
    pub fn for_kube_minor(minor: u32) -> Self {
        RankingGates {
            pod_deletion_cost: minor >= 22,
            logarithmic_scale_down: minor >= 22,
        }
    }
}

/// `ActivePodsWithRanks.Less` as an ordering: `Less` means `a` is deleted before `b`. `rank_a`
/// and `rank_b` are the pods' node ranks ([`node_ranks`]); `now` is the reference instant of
/// the logarithmic comparisons (`metav1.Now()` when the controller ranks).
pub fn compare(
    a: &RankedPod,
    rank_a: usize,
    b: &RankedPod,
    rank_b: usize,
    now: Duration,
    gates: RankingGates,
) -> Ordering {
    // 1. Unassigned before assigned.
    if a.node != b.node && (a.node.is_none() || b.node.is_none()) {
        return if a.node.is_none() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    // 2. Pending before Unknown before Running.
    if a.phase != b.phase {
        return a.phase.cmp(&b.phase);
    }
    // 3. Not ready before ready.
    if a.ready != b.ready {
        return if a.ready {
            Ordering::Greater
        } else {
            Ordering::Less
        };
    }
    // 4. Lower deletion cost first.
    if gates.pod_deletion_cost {
        let (ca, cb) = (
            deletion_cost(a.deletion_cost.as_deref()),
            deletion_cost(b.deletion_cost.as_deref()),
        );
        if ca != cb {
            return ca.cmp(&cb);
        }
    }
    // 5. More related pods on the same node first ("doubled up").
    if rank_a != rank_b {
        return rank_b.cmp(&rank_a);
    }
    // 6. Both ready: ready for a shorter time first.
    if a.ready && b.ready && a.ready_since != b.ready_since {
        return newer_first(a, a.ready_since, b, b.ready_since, now, gates);
    }
    // 7. More container restarts first: regular containers, then sidecars.
    if a.max_restarts != b.max_restarts {
        return b.max_restarts.cmp(&a.max_restarts);
    }
    if a.max_sidecar_restarts != b.max_sidecar_restarts {
        return b.max_sidecar_restarts.cmp(&a.max_sidecar_restarts);
    }
    // 8. Created more recently first.
    if a.created_at != b.created_at {
        return newer_first(a, a.created_at, b, b.created_at, now, gates);
    }
    Ordering::Equal
}

/// Steps 6 and 8: a zero time first, then the later instant, or with `LogarithmicScaleDown`
/// the smaller `floor(log2(age in ns))`, the lower UID among equals.
fn newer_first(
    a: &RankedPod,
    ta: Option<Duration>,
    b: &RankedPod,
    tb: Option<Duration>,
    now: Duration,
    gates: RankingGates,
) -> Ordering {
    let (Some(ta), Some(tb)) = (ta, tb) else {
        // `afterOrZero`: the zero time comes first.
        return if ta.is_none() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    };
    if !gates.logarithmic_scale_down || now.is_zero() {
        return tb.cmp(&ta);
    }
    match log_age(ta, now).cmp(&log_age(tb, now)) {
        Ordering::Equal => a.uid.cmp(&b.uid),
        o => o,
    }
}

/// `int64(math.Log2(float64(now - t)))` in nanoseconds, -1 for an instant not in the past.
fn log_age(t: Duration, now: Duration) -> i64 {
    match now.checked_sub(t) {
        Some(age) if !age.is_zero() => (age.as_nanos() as f64).log2() as i64,
        _ => -1,
    }
}

/// `getPodsRankedByRelatedPodsOnSameNode`: each pod's rank is the number of `related` pods
/// (the active pods of every ReplicaSet of the same owner) on its node. Unscheduled pods share
/// the empty node name.
pub fn node_ranks(pods: &[RankedPod], related: &[RankedPod]) -> Vec<usize> {
    pods.iter()
        .map(|p| related.iter().filter(|r| r.node == p.node).count())
        .collect()
}

/// `getPodsToDelete`: the indices into `pods` (the ReplicaSet's active pods) of the `diff` to
/// delete, in deletion order. All of them when `diff` covers them (the controller does not
/// sort then). Ties keep the order of `pods`.
pub fn pods_to_delete(
    pods: &[RankedPod],
    related: &[RankedPod],
    diff: usize,
    now: Duration,
    gates: RankingGates,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..pods.len()).collect();
    if diff < pods.len() {
        let ranks = node_ranks(pods, related);
        order.sort_by(|&i, &j| compare(&pods[i], ranks[i], &pods[j], ranks[j], now, gates));
    }
    order.truncate(diff);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: RankingGates = RankingGates {
        pod_deletion_cost: true,
        logarithmic_scale_down: true,
    };
    const NOW: Duration = Duration::from_secs(100_000);

    fn pod(name: &str) -> RankedPod {
        RankedPod {
            name: name.into(),
            uid: name.into(),
            node: Some("node-a".into()),
            phase: PodPhase::Running,
            ready: true,
            ready_since: Some(Duration::from_secs(1000)),
            deletion_cost: None,
            max_restarts: 0,
            max_sidecar_restarts: 0,
            created_at: Some(Duration::from_secs(900)),
        }
    }

    fn first(a: &RankedPod, b: &RankedPod) -> Ordering {
        compare(a, 1, b, 1, NOW, ON)
    }

    #[test]
    fn step_1_unscheduled_goes_first_whatever_else() {
        let mut a = pod("a");
        a.node = None;
        a.deletion_cost = Some("1000".into());
        let mut b = pod("b");
        b.ready = false;
        assert_eq!(first(&a, &b), Ordering::Less);
        assert_eq!(first(&b, &a), Ordering::Greater);
        // Two scheduled pods on different nodes are not told apart here.
        let mut c = pod("c");
        c.node = Some("node-b".into());
        assert_eq!(first(&pod("a"), &c), Ordering::Equal);
    }

    #[test]
    fn step_2_pending_then_unknown_then_running() {
        let (mut p, mut u, r) = (pod("p"), pod("u"), pod("r"));
        p.phase = PodPhase::Pending;
        u.phase = PodPhase::Unknown;
        u.deletion_cost = Some("-5".into());
        assert_eq!(first(&p, &u), Ordering::Less);
        assert_eq!(first(&u, &r), Ordering::Less);
        assert_eq!(first(&r, &p), Ordering::Greater);
    }

    #[test]
    fn step_3_not_ready_goes_before_any_ready_pod_whatever_its_cost() {
        let mut holding = pod("holding");
        holding.ready = false;
        holding.deletion_cost = Some("6".into());
        let idle = pod("idle");
        assert_eq!(first(&holding, &idle), Ordering::Less);
    }

    #[test]
    fn step_4_lower_cost_first_only_with_the_gate() {
        let mut holding = pod("holding");
        holding.deletion_cost = Some("3".into());
        let mut idle = pod("idle");
        idle.deletion_cost = Some("0".into());
        // A newer holding pod would go first without the cost (step 8).
        holding.created_at = Some(Duration::from_secs(99_000));
        assert_eq!(first(&idle, &holding), Ordering::Less);
        let off = RankingGates {
            pod_deletion_cost: false,
            ..ON
        };
        assert_eq!(compare(&idle, 1, &holding, 1, NOW, off), Ordering::Greater);
        // An absent annotation counts as 0.
        assert_eq!(first(&pod("bare"), &holding), Ordering::Less);
    }

    #[test]
    fn invalid_costs_read_as_zero() {
        assert_eq!(deletion_cost(Some("42")), 42);
        assert_eq!(deletion_cost(Some("-7")), -7);
        assert_eq!(deletion_cost(Some("0")), 0);
        for bad in ["+1", "007", "", "1.5", "x", "2147483648"] {
            assert_eq!(deletion_cost(Some(bad)), 0, "{bad:?}");
        }
        assert_eq!(deletion_cost(None), 0);
    }

    #[test]
    fn step_5_doubled_up_goes_first() {
        let (a, b) = (pod("a"), pod("b"));
        assert_eq!(compare(&a, 3, &b, 1, NOW, ON), Ordering::Less);
        assert_eq!(compare(&a, 1, &b, 3, NOW, ON), Ordering::Greater);
        let mut far = pod("far");
        far.node = Some("node-b".into());
        let related = vec![pod("a"), pod("b"), far.clone()];
        assert_eq!(node_ranks(&[pod("a"), far], &related), vec![2, 1]);
    }

    #[test]
    fn step_6_ready_more_recently_first_on_a_log_scale() {
        let mut recent = pod("z-recent");
        recent.ready_since = Some(NOW - Duration::from_secs(10));
        let old = pod("a-old");
        assert_eq!(first(&recent, &old), Ordering::Less);
        // Within the same power of two of age the lower UID goes first.
        let mut near = pod("b-near");
        near.ready_since = Some(NOW - Duration::from_secs(11));
        assert_eq!(first(&recent, &near), Ordering::Greater);
        // Without the gate, the later instant first.
        let linear = RankingGates {
            logarithmic_scale_down: false,
            ..ON
        };
        assert_eq!(compare(&recent, 1, &near, 1, NOW, linear), Ordering::Less);
    }

    #[test]
    fn step_7_more_restarts_first() {
        let mut crashy = pod("crashy");
        crashy.max_restarts = 4;
        crashy.created_at = Some(Duration::from_secs(1));
        assert_eq!(first(&crashy, &pod("calm")), Ordering::Less);
    }

    /// `compareMaxContainerRestarts` (pkg/controller/controller_utils.go, 1.37.2): sidecar
    /// restarts decide only between pods with the same regular count.
    #[test]
    fn step_7_sidecar_restarts_decide_after_regular_restarts() {
        let mut sidecar = pod("sidecar");
        sidecar.max_sidecar_restarts = 9;
        sidecar.created_at = Some(Duration::from_secs(1));
        assert_eq!(first(&sidecar, &pod("calm")), Ordering::Less);
        // A regular restart outranks any number of sidecar restarts.
        let mut crashy = pod("crashy");
        crashy.max_restarts = 1;
        assert_eq!(first(&crashy, &sidecar), Ordering::Less);
        // Equal on both: on to step 8 (the younger pod first).
        let mut young = sidecar.clone();
        young.created_at = Some(NOW - Duration::from_secs(5));
        assert_eq!(first(&young, &sidecar), Ordering::Less);
    }

    #[test]
    fn step_8_created_more_recently_first_and_zero_time_before_all() {
        let mut young = pod("young");
        young.created_at = Some(NOW - Duration::from_secs(5));
        assert_eq!(first(&young, &pod("old")), Ordering::Less);
        let mut zero = pod("zero");
        zero.created_at = None;
        assert_eq!(first(&zero, &young), Ordering::Less);
        // Nothing tells two identical pods apart.
        assert_eq!(first(&pod("x"), &pod("x")), Ordering::Equal);
    }

    #[test]
    fn pods_to_delete_takes_the_first_diff_and_keeps_the_given_order_on_ties() {
        let mut pods: Vec<RankedPod> = ["a", "b", "c", "d"].into_iter().map(pod).collect();
        for p in &mut pods {
            p.uid = "same".into();
        }
        pods[2].ready = false;
        let chosen = pods_to_delete(&pods, &pods, 2, NOW, ON);
        assert_eq!(chosen, vec![2, 0]);
        let mut reversed = pods.clone();
        reversed.reverse();
        assert_eq!(pods_to_delete(&reversed, &reversed, 2, NOW, ON), vec![1, 0]);
        // Deleting all: no ranking at all.
        assert_eq!(pods_to_delete(&pods, &pods, 9, NOW, ON), vec![0, 1, 2, 3]);
    }

    #[test]
    fn gates_follow_the_kubernetes_version() {
        assert!(!RankingGates::for_kube_minor(21).pod_deletion_cost);
        assert_eq!(RankingGates::for_kube_minor(22), ON);
    }
}
