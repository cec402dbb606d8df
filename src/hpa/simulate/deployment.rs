//! The simulated Deployment (docs/hpa-behaviour.md §9): its ReplicaSets and their pods, the
//! split of a new `spec.replicas` among the ReplicaSets, each ReplicaSet's choice of the pods it
//! deletes, a rollout, the deletion-cost writer, and the pod facts the adapter's watch shows.

use super::*;
use hpa_bridge_hpa_model::{
    pods_to_delete, scale as split_among_replica_sets, DeploymentScale, PodPhase, RankedPod,
    RankingGates, ReplicaSetScale,
};
use hpa_bridge_rules::cluster::{deletion_cost, PodFacts, ReplicaSetFacts};

/// Every simulated pod runs on one node, so the ranking's node step (§9.1 step 5) never tells
/// two pods apart.
const NODE: &str = "node-0";
/// The simulated rollout's `maxSurge`; its `maxUnavailable` is 0.
const MAX_SURGE: i32 = 1;
/// The model's clock starts a day before the scenario: the initial pods were all created, and
/// became Ready, at that one instant.
const MODEL_EPOCH_BEFORE_START: Millis = 24 * 3600 * 1000;

pub(super) struct SimReplicaSet {
    pub(super) name: String,
    /// `spec.replicas`.
    pub(super) replicas: i32,
    /// The `desired-replicas` and `max-replicas` annotations the deployment controller leaves.
    pub(super) desired: i32,
    pub(super) max_replicas: i32,
}

pub(super) struct SimDeployment {
    /// In creation order: the last is the ReplicaSet of the current template.
    pub(super) replica_sets: Vec<SimReplicaSet>,
    pub(super) next_serial: u32,
    /// How often a ReplicaSet has ranked its pods: every ranking draws a new listing order.
    pub(super) draws: u64,
    pub(super) gates: RankingGates,
    pub(super) rollout_started: bool,
}

impl SimDeployment {
    pub(super) fn new(w: &WorkloadSpec, gates: RankingGates) -> SimDeployment {
        let n = w.initial_replicas;
        SimDeployment {
            replica_sets: vec![SimReplicaSet {
                name: format!("{}-rs1", w.name),
                replicas: n,
                desired: n,
                max_replicas: n + MAX_SURGE,
            }],
            next_serial: n.max(0) as u32,
            draws: 0,
            gates,
            rollout_started: false,
        }
    }
}

fn model_time(t: Millis) -> Duration {
    Duration::from_millis(t.saturating_add(MODEL_EPOCH_BEFORE_START).max(0) as u64)
}

/// A pod's UID, drawn from the seed.
pub(super) fn pod_uid(seed: u64, serial: u32) -> String {
    format!("{:016x}", splitmix64(splitmix64(seed) ^ u64::from(serial)))
}

/// Fisher–Yates over `items`, driven by `key`: the order an informer happens to list pods in.
fn shuffle<T>(items: &mut [T], key: u64) {
    for i in (1..items.len()).rev() {
        let j = (splitmix64(key ^ (i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D)) % (i as u64 + 1))
            as usize;
        items.swap(i, j);
    }
}

impl Runner {
    /// The pod's Ready condition: past its readiness delay and not held False by a fault.
    pub(super) fn pod_ready(&self, p: &Pod, t: Millis) -> bool {
        let w = &self.scenario.workload;
        p.ready(w, t) && !self.scenario.not_ready_at(&p.name(&w.name), t)
    }

    fn ranked(&self, p: &Pod, t: Millis) -> RankedPod {
        let w = &self.scenario.workload;
        let ready = self.pod_ready(p, t);
        RankedPod {
            name: p.name(&w.name),
            uid: p.uid.clone(),
            node: Some(NODE.into()),
            phase: PodPhase::Running,
            ready,
            ready_since: ready
                .then(|| model_time(p.created_at.saturating_add(ms(w.readiness_delay)))),
            deletion_cost: p.cost.clone(),
            max_restarts: 0,
            max_sidecar_restarts: 0,
            created_at: Some(model_time(p.created_at)),
        }
    }

    fn replica_set_name(&self, rs: usize) -> String {
        self.deployment
            .as_ref()
            .and_then(|d| d.replica_sets.get(rs))
            .map(|r| r.name.clone())
            .unwrap_or_default()
    }

    /// A new pod of ReplicaSet `rs`, numbered after every pod before it.
    async fn create_deployment_pod(&mut self, rs: usize, t: Millis) -> Result<(), SimulateError> {
        let Some(d) = self.deployment.as_mut() else {
            return Ok(());
        };
        let serial = d.next_serial;
        d.next_serial += 1;
        self.add_pod(serial, t, rs).await
    }

    /// Every ReplicaSet's pods follow its `spec.replicas`: missing pods are created, and extra
    /// ones deleted by the ReplicaSet's ranking (§9.1), ties in an order drawn from the seed.
    /// Deleting a pod that holds state is a violation, whatever the cause.
    async fn reconcile_replica_sets(
        &mut self,
        t: Millis,
        cause: &str,
    ) -> Result<(), SimulateError> {
        let Some(count) = self.deployment.as_ref().map(|d| d.replica_sets.len()) else {
            return Ok(());
        };
        for rs in 0..count {
            let Some(want) = self
                .deployment
                .as_ref()
                .map(|d| d.replica_sets[rs].replicas.max(0) as usize)
            else {
                continue;
            };
            let mut members: Vec<u32> = self
                .pods
                .values()
                .filter(|p| p.replica_set == rs)
                .map(|p| p.ordinal)
                .collect();
            if members.len() < want {
                for _ in members.len()..want {
                    self.create_deployment_pod(rs, t).await?;
                }
                continue;
            }
            if members.len() == want {
                continue;
            }
            let Some(d) = self.deployment.as_mut() else {
                continue;
            };
            d.draws += 1;
            let (key, gates) = (
                splitmix64(self.scenario.seed ^ splitmix64(d.draws)),
                d.gates,
            );
            shuffle(&mut members, key);
            let pods: Vec<RankedPod> = members
                .iter()
                .map(|o| self.ranked(&self.pods[o], t))
                .collect();
            let related: Vec<RankedPod> = self.pods.values().map(|p| self.ranked(p, t)).collect();
            let chosen =
                pods_to_delete(&pods, &related, members.len() - want, model_time(t), gates);
            for i in chosen {
                self.delete_pod(members[i], rs, t, cause);
            }
        }
        Ok(())
    }

    fn delete_pod(&mut self, ordinal: u32, rs: usize, t: Millis, cause: &str) {
        let Some(p) = self.pods.remove(&ordinal) else {
            return;
        };
        let name = p.name(&self.scenario.workload.name);
        let rs = self.replica_set_name(rs);
        let state = if p.truth_index > 0 {
            format!("holds index {}", p.truth_index)
        } else {
            "idle".to_string()
        };
        self.report.pod_notes.push(format!(
            "{cause} deleted {name} of {rs} at {}: {state}, cost {}",
            fmt_t(t),
            p.cost.as_deref().unwrap_or("unset")
        ));
        if p.truth_index > 0 {
            self.violation(
                "holder-deleted",
                t,
                format!("{cause} deleted {name} of {rs}, which {state}"),
            );
        }
    }

    /// The HPA wrote `replicas`: the deployment controller splits it among the ReplicaSets
    /// (§9.3), and they create or delete pods.
    pub(super) async fn scale_deployment(
        &mut self,
        replicas: i32,
        t: Millis,
    ) -> Result<(), SimulateError> {
        let available: Vec<i32> = match &self.deployment {
            Some(d) => (0..d.replica_sets.len())
                .map(|rs| {
                    self.pods
                        .values()
                        .filter(|p| p.replica_set == rs && self.pod_ready(p, t))
                        .count() as i32
                })
                .collect(),
            None => return Ok(()),
        };
        let Some(d) = self.deployment.as_mut() else {
            return Ok(());
        };
        let sets: Vec<ReplicaSetScale> = d
            .replica_sets
            .iter()
            .enumerate()
            .map(|(i, r)| ReplicaSetScale {
                name: r.name.clone(),
                replicas: r.replicas,
                created: i as u64,
                desired: r.desired,
                max_replicas: r.max_replicas,
                available: available[i],
            })
            .collect();
        let scale = DeploymentScale {
            replicas,
            max_surge: MAX_SURGE,
            rolling: true,
        };
        let sizes = split_among_replica_sets(scale, &sets, Some(sets.len() - 1));
        for (r, size) in d.replica_sets.iter_mut().zip(sizes) {
            if r.replicas > 0 || size > 0 {
                r.desired = replicas;
                r.max_replicas = replicas + MAX_SURGE;
            }
            r.replicas = size;
        }
        self.reconcile_replica_sets(t, "scale").await
    }

    /// One step of the rollout while its fault is active: a new ReplicaSet at the start, then
    /// `rolloutRolling` with maxSurge 1 and maxUnavailable 0: the new ReplicaSet grows while the
    /// total stays within `spec + 1`, and the old ones shrink by as many pods as are Ready
    /// beyond `spec`. After the fault the rollout is paused where it stands.
    async fn rollout_step(&mut self, t: Millis) -> Result<(), SimulateError> {
        if self.scenario.rollout_at(t).is_none() {
            return Ok(());
        }
        let spec = self.spec_replicas;
        let ready = self.pods.values().filter(|p| self.pod_ready(p, t)).count() as i32;
        let w = self.scenario.workload.name.clone();
        let Some(d) = self.deployment.as_mut() else {
            return Ok(());
        };
        if !d.rollout_started {
            d.rollout_started = true;
            let n = d.replica_sets.len() + 1;
            d.replica_sets.push(SimReplicaSet {
                name: format!("{w}-rs{n}"),
                replicas: 0,
                desired: spec,
                max_replicas: spec + MAX_SURGE,
            });
        }
        let new = d.replica_sets.len() - 1;
        let total: i32 = d.replica_sets.iter().map(|r| r.replicas).sum();
        let up = (spec + MAX_SURGE - total).min(spec - d.replica_sets[new].replicas);
        if up > 0 {
            d.replica_sets[new].replicas += up;
        }
        let mut down = ready - spec;
        for r in d.replica_sets[..new].iter_mut() {
            if down <= 0 {
                break;
            }
            let k = down.min(r.replicas);
            r.replicas -= k;
            down -= k;
        }
        for r in d.replica_sets.iter_mut().filter(|r| r.replicas > 0) {
            r.desired = spec;
            r.max_replicas = spec + MAX_SURGE;
        }
        self.reconcile_replica_sets(t, "rollout").await
    }

    /// The deletion-cost writer: once a scrape has shown a pod's index, the annotation the
    /// watch shows follows it `writeDelay` later. A pod whose index is not fresh keeps its
    /// annotation.
    fn write_costs(&mut self, t: Millis) {
        let Some(spec) = self.scenario.workload.deletion_cost.clone() else {
            return;
        };
        if !spec.writer {
            return;
        }
        let stale_after = self.stale_after;
        for p in self.pods.values_mut() {
            let fresh = p
                .delivered
                .last
                .as_ref()
                .filter(|(at, _)| t - at <= stale_after)
                .and_then(|(_, v)| v.replicas())
                .map(|v| v.to_string());
            let Some(v) = fresh else {
                continue;
            };
            if p.cost.as_deref() == Some(v.as_str()) {
                p.cost_pending = None;
                continue;
            }
            if p.cost_pending
                .as_ref()
                .is_none_or(|(_, pending)| *pending != v)
            {
                p.cost_pending = Some((t + ms(spec.write_delay), v));
            }
            if let Some((due, v)) = p.cost_pending.clone() {
                if due <= t {
                    p.cost = Some(v);
                    p.cost_pending = None;
                }
            }
        }
    }

    /// What the adapter's watch shows of the Deployment's pods and ReplicaSets.
    fn publish_pods(&self, t: Millis) {
        let Some(state) = &self.workload_state else {
            return;
        };
        let w = &self.scenario.workload;
        let workload = WorkloadRef {
            kind: w.kind.as_str().into(),
            namespace: self.scenario.namespace.clone(),
            name: w.name.clone(),
        };
        let facts: BTreeMap<String, PodFacts> = self
            .pods
            .values()
            .map(|p| {
                (
                    p.name(&w.name),
                    PodFacts {
                        running: true,
                        workload: Some(workload.clone()),
                        ready: self.pod_ready(p, t),
                        deletion_cost: p.cost.clone(),
                        replica_set: Some(self.replica_set_name(p.replica_set)),
                        terminated: false,
                    },
                )
            })
            .collect();
        if let Ok(mut pods) = state.pods.lock() {
            *pods = Some(facts);
        }
        let replica_sets = self.deployment.as_ref().map(|d| {
            d.replica_sets
                .iter()
                .map(|r| ReplicaSetFacts {
                    name: r.name.clone(),
                    replicas: r.replicas.max(0) as u64,
                })
                .collect()
        });
        if let Ok(mut sets) = state.replica_sets.lock() {
            *sets = replica_sets;
        }
    }

    /// The Deployment at `t`: the rollout moves, the writer writes, the watch shows the pods.
    pub(super) async fn advance_deployment(&mut self, t: Millis) -> Result<(), SimulateError> {
        if self.deployment.is_none() {
            return Ok(());
        }
        let before: Vec<u32> = self.pods.keys().copied().collect();
        self.rollout_step(t).await?;
        self.write_costs(t);
        self.publish_pods(t);
        if self.pods.keys().copied().ne(before) {
            self.sync_targets(t);
        }
        Ok(())
    }

    /// Ground truth for a Deployment: the pods that hold state (its floor is their count).
    pub(super) fn holders(&self) -> impl Iterator<Item = &Pod> + '_ {
        self.pods.values().filter(|p| p.truth_index > 0)
    }

    /// What makes a scale-in of the Deployment unsafe at `t`, whatever the adapter knows: a
    /// holding pod that is not Ready goes before every Ready pod (§9.1 step 3); pods in more
    /// than one ReplicaSet split a scale-down across them (§9.3); and, with the opt-in, a pod
    /// whose cost is not its index is ranked by something else (§9.2).
    pub(super) fn deployment_hazards(&self, t: Millis) -> Vec<String> {
        let Some(d) = &self.deployment else {
            return Vec::new();
        };
        let w = &self.scenario.workload;
        let mut hazards: Vec<String> = self
            .holders()
            .filter(|p| !self.pod_ready(p, t))
            .map(|p| format!("{} holds state but is not Ready", p.name(&w.name)))
            .collect();
        let with_pods = (0..d.replica_sets.len())
            .filter(|rs| self.pods.values().any(|p| p.replica_set == *rs))
            .count();
        if with_pods > 1 {
            hazards.push(format!("pods in {with_pods} ReplicaSets"));
        }
        if w.deletion_cost.as_ref().is_some_and(|c| c.opt_in) {
            for p in self.pods.values() {
                let cost = deletion_cost(p.cost.as_deref());
                if i64::from(cost) != p.truth_index {
                    hazards.push(format!(
                        "{} cost {cost} is not its index {}",
                        p.name(&w.name),
                        p.truth_index
                    ));
                }
            }
        }
        hazards
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_differ_by_key_and_repeat_for_the_same_key() {
        let base: Vec<u32> = (0..6).collect();
        let draw = |key| {
            let mut v = base.clone();
            shuffle(&mut v, key);
            v
        };
        assert_eq!(draw(7), draw(7));
        let distinct: std::collections::BTreeSet<Vec<u32>> = (0..20).map(draw).collect();
        assert!(distinct.len() > 10, "{distinct:?}");
        for v in distinct {
            let mut sorted = v.clone();
            sorted.sort();
            assert_eq!(sorted, base);
        }
    }
}
