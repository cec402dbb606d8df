//! The floor of a Deployment that ranks its pods for scale-in by deletion cost: how many of
//! its pods hold state, served only while the ReplicaSet controller is sure to remove idle
//! pods first (docs/deletion-cost.md).

use std::collections::{BTreeMap, HashMap};

use super::answer::*;
use super::input_notes::{InputNotes, InputState};
use super::observation::*;
use super::producer_quote::{attach, quote_producers};
use crate::cluster::{deletion_cost, PodFacts, ReplicaSetFacts, WorkloadRef};
use crate::config::MetricKind;
use crate::evidence::{invalid_reason, Evidence, TargetId};

/// The label that names an observation's pod (discovery's target labels).
const POD_LABEL: &str = "pod";

const RULE: &str = "count of pods holding state, ranked last by deletion cost";

/// The floor of an opted-in Deployment: the number of its pods whose fresh index is above 0.
///
/// A ReplicaSet removes pods in rank order (docs/hpa-behaviour.md §9): not Ready before Ready,
/// then lower `pod-deletion-cost` first. Scaling to the number of holding pods removes only
/// idle ones while every pod's cost is its index (idle 0, holding ≥ 1) as the watch shows it,
/// every holding pod is Ready, one ReplicaSet holds every pod, and that ReplicaSet is the one
/// of the Deployment with `spec.replicas` above 0: a rollout splits a scale-down across the
/// ReplicaSets that have replicas by their size, not by cost (docs/hpa-behaviour.md §9.3),
/// and a new ReplicaSet has replicas before any of its pods exist. Anything else, or a pod
/// whose index is not fresh, makes the floor incomplete: the count of holding pods known is
/// then only a lower bound, and the target holds.
///
/// `pods` is the pod list from the watch cache (the namespace's, or the Deployment's own:
/// only those count) and `replica_sets` the Deployment's ReplicaSets, each `None` while it is
/// not known.
pub fn deployment_floor(
    q: &QueryContext<'_>,
    ev: &Evidence,
    deployment: &WorkloadRef,
    pods: Option<&BTreeMap<String, PodFacts>>,
    replica_sets: Option<&[ReplicaSetFacts]>,
) -> Answer {
    let name = format!("Deployment {}/{}", deployment.namespace, deployment.name);
    let Some(pods) = pods else {
        return Answer::refused(
            q.metric,
            KIND,
            RefusalKind::IncompleteFloor,
            None,
            RULE,
            format!(
                "the floor for {} is incomplete: the pods of {name} are not known now (a watch has not synced, or is failing)",
                q.scope
            ),
        );
    };
    // Succeeded and Failed pods are not active: the ReplicaSet neither counts nor deletes
    // them (docs/hpa-behaviour.md §9.1), and they export nothing. In name order, so the
    // problems a reason shows first are the same on every answer.
    let members: Vec<(&str, &PodFacts)> = pods
        .iter()
        .filter(|(_, f)| f.workload.as_ref() == Some(deployment) && !f.terminated)
        .map(|(n, f)| (n.as_str(), f))
        .collect();
    let mut inputs = InputNotes::for_inputs(q, ev.observations.len());
    let mut count = Count::default();
    let index = count.read_indices(q, ev, &members, &name, &mut inputs);
    for u in ev.unknown_to_floor() {
        count
            .problems
            .push(format!("{} has not been scraped", u.target));
    }
    let replica_sets_of_pods = count.holding_pods(&members, &index);
    count.check_replica_sets(&name, replica_sets, &replica_sets_of_pods);
    let mut answer = count.answer(q, ev, &name, members.len());
    inputs.into_answer(&mut answer);
    attach(&mut answer, ev);
    answer
}

const KIND: MetricKind = MetricKind::StatefulFloor;

/// The count of a Deployment's pods holding state, and every problem that makes it only a
/// lower bound.
#[derive(Default)]
struct Count<'e> {
    holding: u64,
    problems: Vec<String>,
    /// The targets of inputs that are not fresh, whose producers' reasons are quoted.
    causes: Vec<&'e TargetId>,
}

impl<'e> Count<'e> {
    /// Each member's index as `series_index` gives it, merged over its inputs; `None` while no
    /// input names the pod. Notes every input.
    fn read_indices(
        &mut self,
        q: &QueryContext<'_>,
        ev: &'e Evidence,
        members: &[(&str, &PodFacts)],
        name: &str,
        inputs: &mut InputNotes,
    ) -> Vec<Option<Option<u64>>> {
        let place: HashMap<&str, usize> = members
            .iter()
            .enumerate()
            .map(|(at, (pod, _))| (*pod, at))
            .collect();
        let mut index: Vec<Option<Option<u64>>> = vec![None; members.len()];
        for o in &ev.observations {
            let pod = o.id.labels.get(POD_LABEL).map(String::as_str);
            let Some(at) = pod.and_then(|p| place.get(p)).copied() else {
                inputs.push_built(q, o, InputState::Unknown, false, || {
                    format!("not a pod of {name}").into()
                });
                self.problems.push(format!(
                    "{} exports {} but is not a pod of {name}",
                    o.id.target, o.id.series
                ));
                continue;
            };
            let facts = members[at].1;
            let reading = read(q, o, invalid_reason);
            let value = series_index(reading);
            index[at] = Some(index[at].map_or(value, |merged| merge(merged, value)));
            let fresh = matches!(reading, Reading::Fresh(_));
            if !fresh {
                self.causes.push(&o.id.target);
            }
            let state = if fresh {
                InputState::Fresh
            } else {
                InputState::Unknown
            };
            // Built only for the notes kept: a served answer counts the rest by state alone.
            inputs.push_built(q, o, state, fresh, || match reading {
                Reading::Fresh(v) => {
                    let cost = facts.deletion_cost.as_deref();
                    let confirmed = if cost_confirms(cost, v as u64) {
                        "confirmed by the watch"
                    } else {
                        "not confirmed"
                    };
                    format!(
                        "fresh: index {v}, deletion cost {} ({confirmed})",
                        cost.unwrap_or("absent")
                    )
                    .into()
                }
                Reading::Gone => "unknown: no longer exported".into(),
                Reading::Stale { .. } => format!("unknown: {}", StaleText(q, o)).into(),
                Reading::Invalid(why) => format!("unknown: {why}").into(),
            });
        }
        index
    }

    /// Count the members holding state, checking each is ranked last: Ready, its deletion cost
    /// its index. Returns the ReplicaSets the members are in, in order of first appearance.
    fn holding_pods<'m>(
        &mut self,
        members: &[(&str, &'m PodFacts)],
        index: &[Option<Option<u64>>],
    ) -> Vec<Option<&'m str>> {
        let mut replica_sets_of_pods: Vec<Option<&str>> = Vec::new();
        for ((pod, facts), index) in members.iter().zip(index) {
            match index.flatten() {
                None => self
                    .problems
                    .push(format!("{pod} has no fresh, valid index")),
                Some(i) => {
                    if i > 0 {
                        self.holding += 1;
                        if !facts.ready {
                            self.problems.push(format!(
                                "{pod} holds state (index {i}) but is not Ready, so it goes before any Ready pod"
                            ));
                        }
                    }
                    if !cost_confirms(facts.deletion_cost.as_deref(), i) {
                        self.problems.push(format!(
                            "{pod}'s deletion cost is {} in the watch, not its index {i}",
                            facts.deletion_cost.as_deref().unwrap_or("absent")
                        ));
                    }
                }
            }
            let rs = facts.replica_set.as_deref();
            if !replica_sets_of_pods.contains(&rs) {
                replica_sets_of_pods.push(rs);
            }
        }
        replica_sets_of_pods
    }

    /// One ReplicaSet must hold every pod and be the only one with replicas: a rollout splits
    /// a scale-down across the ReplicaSets with replicas by size, not by cost
    /// (docs/hpa-behaviour.md §9.3).
    fn check_replica_sets(
        &mut self,
        name: &str,
        replica_sets: Option<&[ReplicaSetFacts]>,
        replica_sets_of_pods: &[Option<&str>],
    ) {
        if replica_sets_of_pods.len() > 1 {
            self.problems.push(format!(
                "the pods of {name} are in {} ReplicaSets (a rollout scales each down by its size, not by cost)",
                replica_sets_of_pods.len()
            ));
        }
        let Some(sets) = replica_sets else {
            self.problems
                .push(format!("the ReplicaSets of {name} are not known now"));
            return;
        };
        let writers: Vec<&ReplicaSetFacts> = sets.iter().filter(|r| r.replicas > 0).collect();
        if writers.len() > 1 {
            let shown: Vec<String> = writers
                .iter()
                .map(|r| format!("{} has {}", r.name, r.replicas))
                .collect();
            self.problems.push(format!(
                "{} ReplicaSets of {name} have replicas ({}), so a scale-down is split between them by size, not by cost, whether or not their pods exist yet",
                writers.len(),
                shown.join(", ")
            ));
        }
        // When the pods' ReplicaSet has no replicas, its pods all go whatever their cost:
        // a Recreate rollout scales it to 0 before the new one gets any, and at
        // maxUnavailable 100% the new one may have them all at once.
        if let [Some(of_pods)] = replica_sets_of_pods {
            match &writers[..] {
                [] => self.problems.push(format!(
                    "no ReplicaSet of {name} has replicas, so its pods in {of_pods} are removed whatever their cost"
                )),
                [only] if only.name != *of_pods => self.problems.push(format!(
                    "the pods of {name} are in ReplicaSet {of_pods}, but {} is the one with replicas ({}), so they are removed whatever their cost",
                    only.name, only.replicas
                )),
                _ => {}
            }
        }
    }

    /// The count, served only without a problem; otherwise the floor is incomplete and the
    /// count a lower bound.
    fn answer(self, q: &QueryContext<'_>, ev: &Evidence, name: &str, members: usize) -> Answer {
        let holding = self.holding;
        if !self.problems.is_empty() {
            let shown = self.problems.len().min(8);
            let more = self.problems.len() - shown;
            let mut reason = format!(
                "the floor for {} is incomplete: {}{}; at least {holding} pod(s) of {name} hold state",
                q.scope,
                self.problems[..shown].join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            );
            quote_producers(&mut reason, ev, self.causes);
            return Answer::refused(
                q.metric,
                KIND,
                RefusalKind::IncompleteFloor,
                Some(holding),
                RULE,
                reason,
            );
        }
        if members == 0 {
            return Answer::refused(
                q.metric,
                KIND,
                RefusalKind::NoMatch,
                None,
                RULE,
                format!("{name} has no pods in {}", q.scope),
            );
        }
        let newest = ev
            .observations
            .iter()
            .map(|o| o.observed_at_ms)
            .max()
            .unwrap_or(q.now.wall);
        Answer::valued(
            q.metric,
            KIND,
            holding,
            newest,
            RULE,
            format!(
                "{holding} of the {members} pods of {name} hold state by {}; every pod's deletion cost is its index, every holding pod is Ready, one ReplicaSet holds every pod and is the only one with replicas",
                q.series_names()
            ),
        )
    }
}

/// A floor whose series come from several workloads, one of them a Deployment that opted in
/// to deletion cost: incomplete, since neither the count of its holding pods nor a highest
/// index over the mix tells how many of its pods must stay.
pub fn mixed_workloads_floor(
    q: &QueryContext<'_>,
    deployment: &WorkloadRef,
    workloads: &[WorkloadRef],
) -> Answer {
    let names: Vec<String> = workloads
        .iter()
        .map(|w| format!("{} {}/{}", w.kind, w.namespace, w.name))
        .collect();
    incomplete_before_counting(
        q,
        format!(
            "the floor for {} is incomplete: its series come from {} workloads ({}), and Deployment {}/{} counts its own pods only; narrow the selector to it",
            q.scope,
            names.len(),
            names.join(", "),
            deployment.namespace,
            deployment.name
        ),
    )
}

/// A floor over pods whose ReplicaSet the cluster facts could not follow to its controller
/// (`Cluster::owner_unresolved`): incomplete, since if that controller is an opted-in
/// Deployment the floor is the count of its holding pods, which the highest index can be below.
pub fn unresolved_owner_floor(q: &QueryContext<'_>, replica_set: &WorkloadRef) -> Answer {
    incomplete_before_counting(
        q,
        format!(
            "the floor for {} is incomplete: pods of ReplicaSet {}/{} are not yet followed to their Deployment (the ReplicaSet is not in the watch cache, or their targets predate it), so whether that Deployment counts pods by deletion cost is unknown",
            q.scope, replica_set.namespace, replica_set.name
        ),
    )
}

/// An incomplete floor refused before any pod was counted, so with no known lower bound.
fn incomplete_before_counting(q: &QueryContext<'_>, reason: String) -> Answer {
    Answer::refused(
        q.metric,
        MetricKind::StatefulFloor,
        RefusalKind::IncompleteFloor,
        None,
        RULE,
        reason,
    )
}

/// Each pod's index, by the pod label of its series: the highest while every series of the
/// pod reads fresh and valid, `None` once any does not. The deletion-cost writer writes it;
/// the floor merges its members' series by the same `series_index` and `merge`, so both see
/// one index per pod.
pub fn pod_indices<'e>(q: &QueryContext<'_>, ev: &'e Evidence) -> HashMap<&'e str, Option<u64>> {
    let mut index: HashMap<&str, Option<u64>> = HashMap::with_capacity(ev.observations.len());
    for o in &ev.observations {
        let Some(pod) = o.id.labels.get(POD_LABEL) else {
            continue;
        };
        let value = series_index(read(q, o, invalid_reason));
        index
            .entry(pod.as_str())
            .and_modify(|merged| *merged = merge(*merged, value))
            .or_insert(value);
    }
    index
}

/// What one series of a pod says of its index: its value while it reads fresh and valid.
fn series_index(reading: Reading) -> Option<u64> {
    match reading {
        Reading::Fresh(v) => Some(v as u64),
        _ => None,
    }
}

/// A pod's index from what its series so far say and what one more says: the highest, and
/// unknown once any is.
fn merge(merged: Option<u64>, value: Option<u64>) -> Option<u64> {
    merged.zip(value).map(|(a, b)| a.max(b))
}

/// Whether the cost the ReplicaSet controller reads from a pod's annotation is `index`: an
/// absent or invalid annotation is 0 (`cluster::deletion_cost`).
pub fn cost_confirms(annotation: Option<&str>, index: u64) -> bool {
    i64::from(deletion_cost(annotation)) == index as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Observation, TargetId, UnknownTarget};
    use crate::policy::fixtures::*;
    use crate::policy::InputCounts;

    fn web() -> WorkloadRef {
        WorkloadRef {
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: "web".into(),
        }
    }

    fn pod(ready: bool, cost: Option<&str>, rs: &str) -> PodFacts {
        PodFacts {
            running: true,
            workload: Some(web()),
            ready,
            deletion_cost: cost.map(Into::into),
            replica_set: Some(rs.into()),
            terminated: false,
        }
    }

    fn index_of(pod: &str, value: f64, age_ms: i64) -> Observation {
        let mut o = obs(pod, value, age_ms);
        o.id = crate::evidence::SeriesRef::new(
            TargetId(format!("default/{pod}").into()),
            "hpa_stateful_index".into(),
            BTreeMap::from([(POD_LABEL.to_string(), pod.to_string())]).into(),
        );
        o
    }

    /// Six pods, three holding (indices 1..3) with their cost written, three idle.
    fn six() -> (BTreeMap<String, PodFacts>, Vec<Observation>) {
        let mut pods = BTreeMap::new();
        let mut observations = Vec::new();
        for i in 0..6u64 {
            let name = format!("web-{i}");
            let index = if i < 3 { i + 1 } else { 0 };
            let cost = (index > 0).then(|| index.to_string());
            pods.insert(name.clone(), pod(true, cost.as_deref(), "web-5d4f"));
            observations.push(index_of(&name, index as f64, 1_000));
        }
        (pods, observations)
    }

    /// The ReplicaSet of `six`'s pods, at their count.
    fn one_replica_set() -> Vec<ReplicaSetFacts> {
        vec![rs("web-5d4f", 6)]
    }

    fn rs(name: &str, replicas: u64) -> ReplicaSetFacts {
        ReplicaSetFacts {
            name: name.into(),
            replicas,
        }
    }

    fn floor(pods: &BTreeMap<String, PodFacts>, observations: Vec<Observation>) -> Answer {
        floor_with(pods, observations, Some(&one_replica_set()))
    }

    fn floor_with(
        pods: &BTreeMap<String, PodFacts>,
        observations: Vec<Observation>,
        replica_sets: Option<&[ReplicaSetFacts]>,
    ) -> Answer {
        let s = series();
        deployment_floor(
            &ctx(&s),
            &ev(observations),
            &web(),
            Some(pods),
            replica_sets,
        )
    }

    #[test]
    fn the_floor_counts_holding_pods_when_every_condition_holds() {
        let (pods, o) = six();
        let a = floor(&pods, o);
        assert_eq!(a.value(), Some(3), "{}", a.reason);
        assert!(a.reason.contains("3 of the 6 pods"), "{}", a.reason);
        assert_eq!(
            a.inputs[1].status,
            "fresh: index 2, deletion cost 2 (confirmed by the watch)"
        );
    }

    /// A served answer notes its first inputs and counts the rest: a pod read fresh is
    /// counted fresh whether its note is kept or not, and one read stale is unknown.
    #[test]
    fn inputs_past_the_kept_notes_are_counted_as_they_read() {
        let (pods, mut o) = six();
        o[5] = index_of("web-5", 0.0, STALE + 1);
        let s = series();
        let mut q = ctx(&s);
        q.notes_kept = 2;
        let a = deployment_floor(&q, &ev(o), &web(), Some(&pods), Some(&one_replica_set()));
        assert_eq!(a.inputs.len(), 2);
        assert!(a
            .inputs
            .iter()
            .all(|i| i.status.starts_with("fresh: index ")));
        assert_eq!(
            a.omitted_inputs,
            InputCounts {
                fresh: 3,
                unknown: 1,
                ..InputCounts::default()
            }
        );
        assert_eq!(InputCounts::of(&a).fresh, 5);
        // Every note kept reads as the count would have.
        q.notes_kept = usize::MAX;
        let (pods, mut o) = six();
        o[5] = index_of("web-5", 0.0, STALE + 1);
        let all = deployment_floor(&q, &ev(o), &web(), Some(&pods), Some(&one_replica_set()));
        assert_eq!(InputCounts::of(&all), InputCounts::of(&a));
    }

    /// A pod with several series has the highest of their indices while each reads fresh and
    /// valid, and none once any does not: the floor and the writer (`pod_indices`) agree.
    #[test]
    fn a_pod_s_index_is_the_highest_of_its_series_until_one_is_unknown() {
        let s = series();
        let q = ctx(&s);
        let second = |value: f64, age_ms: i64| {
            let mut o = index_of("web-2", value, age_ms);
            o.id = crate::evidence::SeriesRef::new(
                o.id.target.clone(),
                "hpa_stateful_index".into(),
                BTreeMap::from([
                    (POD_LABEL.to_string(), "web-2".to_string()),
                    ("shard".to_string(), "b".to_string()),
                ])
                .into(),
            );
            o
        };
        // web-2 holds index 3 with its cost written; a second series saying 1 changes nothing.
        let (pods, mut o) = six();
        o.insert(3, second(1.0, 0));
        assert_eq!(pod_indices(&q, &ev(o.clone())).get("web-2"), Some(&Some(3)));
        assert_eq!(floor(&pods, o).value(), Some(3));
        // A second series saying 5 raises it past the cost the watch shows.
        let (pods, mut o) = six();
        o.insert(3, second(5.0, 0));
        assert_eq!(pod_indices(&q, &ev(o.clone())).get("web-2"), Some(&Some(5)));
        let a = floor(&pods, o);
        assert!(
            a.reason
                .contains("web-2's deletion cost is 3 in the watch, not its index 5"),
            "{}",
            a.reason
        );
        // A stale second series makes the pod's index unknown.
        let (pods, mut o) = six();
        o.insert(3, second(3.0, STALE + 1));
        assert_eq!(pod_indices(&q, &ev(o.clone())).get("web-2"), Some(&None));
        let a = floor(&pods, o);
        assert!(
            a.reason.contains("web-2 has no fresh, valid index"),
            "{}",
            a.reason
        );
    }

    #[test]
    fn each_broken_condition_makes_it_incomplete_at_the_known_count() {
        let incomplete =
            |pods: &BTreeMap<String, PodFacts>, o: Vec<Observation>, says: &str, known: u64| {
                let a = floor(pods, o);
                assert_eq!(
                    a.outcome,
                    Outcome::Refused {
                        kind: RefusalKind::IncompleteFloor,
                        known_lower_bound: Some(known)
                    },
                    "{}",
                    a.reason
                );
                assert!(a.reason.contains(says), "{says:?} not in {}", a.reason);
            };
        // A holding pod that is not Ready.
        let (mut pods, o) = six();
        pods.get_mut("web-1").unwrap().ready = false;
        incomplete(&pods, o, "web-1 holds state (index 2) but is not Ready", 3);
        // An idle pod that is not Ready goes first anyway: still complete.
        let (mut pods, o) = six();
        pods.get_mut("web-4").unwrap().ready = false;
        assert_eq!(floor(&pods, o).value(), Some(3));
        // A cost not yet written, or stale from when an idle pod held state.
        let (mut pods, o) = six();
        pods.get_mut("web-2").unwrap().deletion_cost = None;
        incomplete(
            &pods,
            o,
            "web-2's deletion cost is absent in the watch, not its index 3",
            3,
        );
        let (mut pods, o) = six();
        pods.get_mut("web-5").unwrap().deletion_cost = Some("7".into());
        incomplete(&pods, o, "web-5's deletion cost is 7", 3);
        // A rollout.
        let (mut pods, o) = six();
        pods.get_mut("web-5").unwrap().replica_set = Some("web-77aa".into());
        incomplete(&pods, o, "in 2 ReplicaSets", 3);
        // A pod with no index, a stale one, an invalid one, one never scraped.
        let (pods, mut o) = six();
        o.remove(4);
        incomplete(&pods, o, "web-4 has no fresh, valid index", 3);
        let (pods, mut o) = six();
        o[0] = index_of("web-0", 1.0, STALE + 1);
        incomplete(&pods, o, "web-0 has no fresh, valid index", 2);
        let (pods, mut o) = six();
        o[3] = index_of("web-3", 0.5, 0);
        incomplete(&pods, o, "web-3 has no fresh, valid index", 3);
        let (pods, o) = six();
        let mut e = ev(o);
        e.unknown_targets.push(UnknownTarget {
            target: TargetId("default/web-9".into()),
            last_error: None,
        });
        let s = series();
        let a = deployment_floor(&ctx(&s), &e, &web(), Some(&pods), Some(&one_replica_set()));
        assert!(a.reason.contains("has not been scraped"), "{}", a.reason);
        // A series from a pod that is not the Deployment's.
        let (pods, mut o) = six();
        o.push(index_of("stranger", 4.0, 0));
        incomplete(&pods, o, "is not a pod of Deployment default/web", 3);
    }

    /// A rollout's new ReplicaSet has replicas before any of its pods exist: scaling 8 to 3
    /// then splits the scale-down by size (old 6 to 2, new 2 to 1), and the old ReplicaSet
    /// deletes four pods with three idle. An old ReplicaSet scaled to 0 takes no share.
    #[test]
    fn a_second_replica_set_with_replicas_makes_it_incomplete_even_without_pods() {
        // Refused at the three holding pods, for `why`.
        let refused_at_three = |sets: Option<&[ReplicaSetFacts]>, why: &str| {
            let (pods, o) = six();
            let a = floor_with(&pods, o, sets);
            assert_eq!(
                a.outcome,
                Outcome::Refused {
                    kind: RefusalKind::IncompleteFloor,
                    known_lower_bound: Some(3)
                },
                "{}",
                a.reason
            );
            assert!(a.reason.contains(why), "{}", a.reason);
        };
        refused_at_three(
            Some(&[rs("web-5d4f", 6), rs("web-77aa", 2)]),
            "2 ReplicaSets of Deployment default/web have replicas (web-5d4f has 6, web-77aa has 2)",
        );
        let (pods, o) = six();
        let sets = [rs("web-0ld0", 0), rs("web-5d4f", 6)];
        assert_eq!(floor_with(&pods, o, Some(&sets)).value(), Some(3));
        // The pods' ReplicaSet at 0, with the replicas elsewhere or nowhere: all of these
        // pods go, whatever their cost.
        refused_at_three(
            Some(&[rs("web-5d4f", 0), rs("web-77aa", 0)]),
            "no ReplicaSet of Deployment default/web has replicas, so its pods in web-5d4f are removed whatever their cost",
        );
        refused_at_three(
            Some(&[rs("web-5d4f", 0), rs("web-77aa", 6)]),
            "the pods of Deployment default/web are in ReplicaSet web-5d4f, but web-77aa is the one with replicas (6)",
        );
        refused_at_three(
            None,
            "the ReplicaSets of Deployment default/web are not known now",
        );
    }

    #[test]
    fn finished_pods_are_not_members_and_a_mix_of_workloads_is_refused() {
        let (mut pods, o) = six();
        pods.insert(
            "web-evicted".into(),
            PodFacts {
                terminated: true,
                ..pod(false, None, "web-5d4f")
            },
        );
        assert_eq!(floor(&pods, o).value(), Some(3));
        let s = series();
        let other = WorkloadRef {
            name: "api".into(),
            ..web()
        };
        let a = mixed_workloads_floor(&ctx(&s), &web(), &[web(), other]);
        assert_eq!(a.refusal(), Some(RefusalKind::IncompleteFloor));
        assert!(a.reason.contains("2 workloads"), "{}", a.reason);
    }

    #[test]
    fn an_unknown_pod_list_and_an_empty_deployment_are_refused() {
        let s = series();
        let (_, o) = six();
        let a = deployment_floor(&ctx(&s), &ev(o), &web(), None, Some(&one_replica_set()));
        assert_eq!(a.refusal(), Some(RefusalKind::IncompleteFloor));
        assert!(a.reason.contains("not known now"), "{}", a.reason);
        let a = floor(&BTreeMap::new(), Vec::new());
        assert_eq!(a.refusal(), Some(RefusalKind::NoMatch));
    }

    #[test]
    fn a_cost_confirms_an_index_as_the_replicaset_controller_reads_it() {
        assert!(cost_confirms(None, 0));
        assert!(!cost_confirms(None, 1));
        assert!(cost_confirms(Some("0"), 0));
        assert!(cost_confirms(Some("3"), 3));
        // The controller reads "+3" and "03" as invalid, hence 0: they confirm no holding pod.
        assert!(!cost_confirms(Some("+3"), 3));
        assert!(!cost_confirms(Some("03"), 3));
        assert!(cost_confirms(Some("+3"), 0));
        assert!(!cost_confirms(Some("3.0"), 3));
        assert!(cost_confirms(Some("x"), 0));
        assert!(!cost_confirms(Some("2147483648"), 2_147_483_648));
    }
}
