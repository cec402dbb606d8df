//! The task that writes deletion costs: once per scrape interval it reads each opted-in
//! Deployment's pods from the watch cache and their indices from the store, and patches the
//! annotation where it differs, paced across the cluster's pods and backing off per pod on failure.
//! It writes only while this replica holds the deletion-cost Lease (`lease.rs`), checked before
//! each patch, so the pace is the cluster's, not each replica's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use tokio::time::Instant;

use super::cost_patch::{cost_patches, CostPatch, FIELD_MANAGER};
use crate::lease::Leadership;
use hpa_bridge_rules::clock::{Clock, Millis};
use hpa_bridge_rules::cluster::{WorkloadRef, POD_DELETION_COST};
use hpa_bridge_rules::config::{Config, MetricSpec};
use hpa_bridge_rules::evidence::{Evidence, Read, Scope};
use hpa_bridge_rules::policy::{pod_indices, QueryContext};
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_sources::source::discovery::Discovery;
use hpa_bridge_store::store::Store;
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// How long a written cost may take to show in the watch before it is written again: long
/// enough for the watch to catch up, short enough that a value another writer changed is put
/// back soon. Each further send of the same value that the watch still does not show waits
/// twice as long, up to `BACKOFF_MAX`: while the pod watch is down no write shows, and
/// resending every pod's cost at the full pace would spend the cluster's write budget on them.
const CONFIRM_WAIT: Duration = Duration::from_secs(5);
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// Writes `pod-deletion-cost` on the pods of opted-in Deployments.
pub struct DeletionCostWriter {
    client: Client,
    discovery: Arc<Discovery>,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    metrics: Arc<SelfMetrics>,
    /// Whether this replica is the one writer.
    leadership: Arc<Leadership>,
    /// The floor metrics' series, grouped by the label that carries their namespace.
    floors: Vec<(String, Vec<String>)>,
    stale_after_ms: Millis,
    interval: Duration,
    /// Time between two patches (1 / `--deletion-cost-qps`); one replica writes at a time.
    gap: Duration,
}

/// Per pod: the cost last sent, when, and how many times in a row; and how its failures back
/// off.
#[derive(Default)]
struct PodWrites {
    sent: HashMap<(String, String), (i32, Instant, u32)>,
    failing: HashMap<(String, String), (u32, Instant)>,
}

/// Where a round over `plan` (in `WorkloadRef` order: namespace, then name) starts: at the
/// first Deployment after `last`, the one the previous round started at, wrapping to the first.
fn rotation_start(plan: &[(WorkloadRef, Vec<CostPatch>)], last: Option<&WorkloadRef>) -> usize {
    last.and_then(|last| plan.iter().position(|(d, _)| d > last))
        .unwrap_or(0)
}

/// The wait after the `n`th failure, or after the `n`th send of a value yet to show.
fn doubling(first: Duration, n: u32) -> Duration {
    first
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(BACKOFF_MAX)
}

impl DeletionCostWriter {
    /// It writes through the client `leadership` holds its lease with.
    pub fn new(
        discovery: Arc<Discovery>,
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        metrics: Arc<SelfMetrics>,
        leadership: Arc<Leadership>,
        config: &Config,
        qps: f64,
    ) -> DeletionCostWriter {
        let mut floors: Vec<(String, Vec<String>)> = Vec::new();
        for m in &config.metrics {
            if let MetricSpec::StatefulFloor(f) = m {
                match floors.iter_mut().find(|(l, _)| *l == f.namespace_label) {
                    Some((_, series)) => series.extend(f.series.iter().cloned()),
                    None => floors.push((f.namespace_label.clone(), f.series.clone())),
                }
            }
        }
        DeletionCostWriter {
            client: leadership.client(),
            discovery,
            store,
            clock,
            metrics,
            leadership,
            floors,
            stale_after_ms: config.scrape.stale_after().as_millis() as Millis,
            interval: config.scrape.interval.0,
            gap: Duration::from_secs_f64(1.0 / qps),
        }
    }

    /// Run until the process ends.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            tracing::info!(
                qps = 1.0 / self.gap.as_secs_f64(),
                "writing pod-deletion-cost on Deployments annotated hpa-bridge.io/deletion-cost"
            );
            let mut writes = PodWrites::default();
            let mut next_patch = Instant::now();
            // The Deployment the last round started at.
            let mut started_at: Option<WorkloadRef> = None;
            let mut tick = tokio::time::interval(self.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if !self.leadership.leading() {
                    continue;
                }
                let planned = Instant::now();
                // A round ends after an interval: each starts at the Deployment after the one
                // the last started at, so one with many pods to write cannot keep the others
                // waiting round after round.
                let mut plan = self.plan();
                writes.forget_unplanned(&plan);
                let first = rotation_start(&plan, started_at.as_ref());
                plan.rotate_left(first);
                started_at = plan.first().map(|(d, _)| d.clone());
                'plan: for (deployment, patches) in plan {
                    for p in patches {
                        // A plan older than an interval may write an index the store has
                        // since replaced: plan again instead.
                        if next_patch.max(Instant::now()) > planned + self.interval {
                            break 'plan;
                        }
                        let key = (deployment.namespace.clone(), p.pod.clone());
                        if !writes.due(&key, p.cost, Instant::now()) {
                            continue;
                        }
                        tokio::time::sleep_until(next_patch).await;
                        // Checked before every patch, not once per plan: a replica that lost
                        // the lease while pacing drops the rest of its plan at once.
                        let Some((_permit, lead_left)) = self.leadership.permit().await else {
                            break 'plan;
                        };
                        next_patch = Instant::now().max(next_patch) + self.gap;
                        // A patch held up (API priority and fairness, a slow link) is abandoned
                        // when this replica's term would end without another renewal: it then
                        // stops writing so that another replica may take over, and a shutdown
                        // waits for the patch before releasing the lease. The server may still
                        // apply one it had already received.
                        let result = tokio::time::timeout(lead_left, self.patch(&deployment, &p))
                            .await
                            .unwrap_or_else(|_| {
                                tracing::warn!(
                                    namespace = %deployment.namespace,
                                    pod = %p.pod,
                                    waited = ?lead_left,
                                    "a pod-deletion-cost patch was not answered before this replica's renew deadline; abandoned"
                                );
                                Err("timeout")
                            });
                        writes.record(key, p.cost, result.is_ok(), Instant::now());
                        self.metrics
                            .deletion_cost_patch(result.err().unwrap_or("success"));
                    }
                }
            }
        })
    }

    /// For each opted-in Deployment, the patches its pods need now.
    fn plan(&self) -> Vec<(WorkloadRef, Vec<CostPatch>)> {
        let everything = LabelSelector::everything();
        let now = self.clock.now();
        self.discovery
            .opted_in_deployments()
            .into_iter()
            .filter_map(|(deployment, pods)| {
                let mut ev = Evidence::default();
                for (label, series) in &self.floors {
                    let scope = Scope {
                        series,
                        namespace_label: label,
                        namespace: &deployment.namespace,
                        selector: &everything,
                    };
                    ev.observations
                        .extend(self.store.read(&scope, Read::Glance).observations);
                }
                let q = QueryContext {
                    metric: "deletion-cost",
                    series: &[],
                    scope: "".into(),
                    now,
                    stale_after_ms: self.stale_after_ms,
                    notes_kept: 0,
                };
                let patches = cost_patches(&pods, &pod_indices(&q, &ev));
                (!patches.is_empty()).then_some((deployment, patches))
            })
            .collect()
    }

    /// One merge patch of the annotation; the error is the metric's result label.
    async fn patch(&self, deployment: &WorkloadRef, p: &CostPatch) -> Result<(), &'static str> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &deployment.namespace);
        let body = serde_json::json!({
            "metadata": {"annotations": {POD_DELETION_COST: p.cost.to_string()}}
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        match pods.patch(&p.pod, &params, &Patch::Merge(&body)).await {
            Ok(_) => {
                tracing::debug!(namespace = %deployment.namespace, pod = %p.pod, cost = p.cost, "pod-deletion-cost written");
                Ok(())
            }
            Err(e) => {
                let result = match &e {
                    kube::Error::Api(s) if s.code == 404 => "not_found",
                    kube::Error::Api(s) if s.code == 403 => "forbidden",
                    kube::Error::Api(s) if s.code == 409 => "conflict",
                    _ => "error",
                };
                tracing::warn!(
                    namespace = %deployment.namespace,
                    deployment = %deployment.name,
                    pod = %p.pod,
                    cost = p.cost,
                    error = %e,
                    "writing pod-deletion-cost failed"
                );
                Err(result)
            }
        }
    }
}

impl PodWrites {
    /// Forget what was sent to the pods `plan` no longer lists: their cost shows in the watch,
    /// their index is unknown, or they are gone. A later send of the same value is then a first
    /// send again, not one more unconfirmed resend; an index that flickers between unknown and
    /// known while the pod watch is down therefore resends at the first wait each time it
    /// returns, paced by --deletion-cost-qps like every patch.
    fn forget_unplanned(&mut self, plan: &[(WorkloadRef, Vec<CostPatch>)]) {
        let planned: std::collections::HashSet<(&str, &str)> = plan
            .iter()
            .flat_map(|(d, patches)| {
                patches
                    .iter()
                    .map(|p| (d.namespace.as_str(), p.pod.as_str()))
            })
            .collect();
        self.sent
            .retain(|(ns, pod), _| planned.contains(&(ns.as_str(), pod.as_str())));
    }

    /// Whether `cost` should be sent to the pod now: not while a failure backs off, and not
    /// again while the same value, just sent, has yet to show in the watch.
    fn due(&self, key: &(String, String), cost: i32, now: Instant) -> bool {
        if self.failing.get(key).is_some_and(|(_, until)| now < *until) {
            return false;
        }
        !self
            .sent
            .get(key)
            .is_some_and(|(c, at, sends)| *c == cost && now < *at + doubling(CONFIRM_WAIT, *sends))
    }

    fn record(&mut self, key: (String, String), cost: i32, ok: bool, now: Instant) {
        if ok {
            self.failing.remove(&key);
            let sends = match self.sent.get(&key) {
                Some((c, _, n)) if *c == cost => n + 1,
                _ => 1,
            };
            self.sent.insert(key, (cost, now, sends));
        } else {
            let failures = self.failing.get(&key).map_or(0, |(n, _)| *n) + 1;
            let wait = doubling(BACKOFF_FIRST, failures + 1);
            self.sent.remove(&key);
            self.failing.insert(key, (failures, now + wait));
        }
        // Pods come and go: forget failures whose wait is over. (`sent` holds only pods the
        // current plan lists: `forget_unplanned`.)
        if self.failing.len() > 100_000 {
            self.failing.retain(|_, (_, until)| now < *until);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (String, String) {
        ("games".into(), "web-0".into())
    }

    /// A value sent again while the watch does not show it waits twice as long each time, up
    /// to the cap; a new value goes at once; failures back off from 2 s, doubling.
    #[test]
    fn unconfirmed_sends_and_failures_back_off() {
        let mut w = PodWrites::default();
        let mut now = Instant::now();
        // Seconds until `cost` is due again, in half-second steps.
        let wait = |w: &PodWrites, now: &mut Instant, cost: i32| {
            let from = *now;
            while !w.due(&key(), cost, *now) {
                *now += Duration::from_millis(500);
            }
            (*now - from).as_secs()
        };
        assert!(w.due(&key(), 3, now));
        let mut waits = Vec::new();
        for _ in 0..9 {
            w.record(key(), 3, true, now);
            assert!(w.due(&key(), 4, now), "another value is due at once");
            waits.push(wait(&w, &mut now, 3));
        }
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        w.record(key(), 4, true, now);
        assert_eq!(
            wait(&w, &mut now, 4),
            5,
            "a new value starts again at the first wait"
        );

        let mut failures = Vec::new();
        for _ in 0..3 {
            w.record(key(), 4, false, now);
            failures.push(wait(&w, &mut now, 4));
        }
        assert_eq!(failures, [2, 4, 8]);
    }

    /// A pod the plan no longer lists had its cost confirmed: the same value, needed again
    /// later (another writer changed it), is sent at once.
    #[test]
    fn a_pod_the_plan_no_longer_lists_starts_its_resends_over() {
        let mut w = PodWrites::default();
        let now = Instant::now();
        for _ in 0..3 {
            w.record(key(), 3, true, now);
        }
        assert!(!w.due(&key(), 3, now + Duration::from_secs(19)));
        let web = WorkloadRef {
            kind: hpa_bridge_rules::cluster::WorkloadKind::Deployment,
            namespace: "games".into(),
            name: "web".into(),
        };
        let other = CostPatch {
            pod: "web-1".into(),
            cost: 1,
        };
        w.forget_unplanned(&[(
            web.clone(),
            vec![CostPatch {
                pod: "web-0".into(),
                cost: 3,
            }],
        )]);
        assert!(
            !w.due(&key(), 3, now + Duration::from_secs(19)),
            "still planned: kept"
        );
        w.forget_unplanned(&[(web, vec![other])]);
        assert!(w.due(&key(), 3, now));
    }

    /// Each round starts after the Deployment the last one started at, whatever came or went.
    #[test]
    fn rounds_rotate_over_the_deployments() {
        let d = |ns: &str, name: &str| {
            (
                WorkloadRef {
                    kind: hpa_bridge_rules::cluster::WorkloadKind::Deployment,
                    namespace: ns.into(),
                    name: name.into(),
                },
                Vec::new(),
            )
        };
        let plan = [d("a", "x"), d("b", "a"), d("b", "c")];
        assert_eq!(rotation_start(&plan, None), 0);
        assert_eq!(rotation_start(&[], Some(&plan[0].0)), 0);
        assert_eq!(rotation_start(&plan, Some(&plan[0].0)), 1);
        assert_eq!(rotation_start(&plan, Some(&plan[2].0)), 0, "wraps");
        // The last start has gone: the one after where it stood.
        assert_eq!(rotation_start(&plan, Some(&d("b", "b").0)), 2);
        assert_eq!(rotation_start(&plan, Some(&d("c", "a").0)), 0);
    }
}
