//! The scope of an Object metric query (custom.metrics.k8s.io): the workload it names.
//!
//! An External query is scoped by a selector the operator writes; an Object query names the
//! workload itself, so the engine builds the scope (docs/hpa-behaviour.md §6.5):
//! - series whose workload labels (`hpa_target_kind`, `hpa_target_name`,
//!   `hpa_target_api_version` by default) name it, read exactly as an External query with the
//!   selector `hpa_target_kind=<kind>,hpa_target_name=<name>` plus `metricLabelSelector` would
//!   be, unknown targets included; a series whose api-version label names another group is
//!   dropped;
//! - with discovery, also every series from the workload's own pods (Pod → StatefulSet, or
//!   Pod → ReplicaSet → Deployment), and each never-scraped pod of the workload as unknown.
//!
//! The result is ordinary `Evidence`, so every rule (max-not-sum, the floor, refusals, gates,
//! threshold, combine) runs unchanged: one engine, two front doors.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::sync::Arc;

use crate::clock::Millis;
use crate::cluster::{PodFacts, WorkloadKind, WorkloadRef};
use crate::config::WorkloadLabels;
use crate::evidence::{Evidence, Observation, Scope, SeriesId, TargetId};
use crate::selector::{LabelSelector, Operator, Requirement};
use crate::source::{EvidenceSource, ReadMode, SourceError};

/// The label every pod-attributed series carries: set by discovery on scrape targets, and the
/// label the Prometheus source's pod set uses.
const POD_LABEL: &str = "pod";

/// The workload kinds an Object metric may describe: the closed part of `WorkloadKind` that
/// a custom metrics path names by resource (`statefulsets.apps`, `deployments.apps`). A pod's
/// owner may be of any kind, so that one is open; this one converts into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    StatefulSet,
    Deployment,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 2] = [ObjectKind::StatefulSet, ObjectKind::Deployment];

    pub fn kind(self) -> &'static str {
        match self {
            ObjectKind::StatefulSet => "StatefulSet",
            ObjectKind::Deployment => "Deployment",
        }
    }

    pub fn api_version(self) -> &'static str {
        "apps/v1"
    }

    /// The resource as it appears in a custom metrics path (`<plural>.<group>`).
    pub fn resource(self) -> &'static str {
        match self {
            ObjectKind::StatefulSet => "statefulsets.apps",
            ObjectKind::Deployment => "deployments.apps",
        }
    }

    pub fn from_resource(resource: &str) -> Option<ObjectKind> {
        ObjectKind::ALL
            .into_iter()
            .find(|k| k.resource() == resource)
    }
}

/// An Object metric's kind is the workload kind of the pods it reads.
impl From<ObjectKind> for WorkloadKind {
    fn from(kind: ObjectKind) -> Self {
        match kind {
            ObjectKind::StatefulSet => WorkloadKind::StatefulSet,
            ObjectKind::Deployment => WorkloadKind::Deployment,
        }
    }
}

/// The workload an Object metric query names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn workload(&self) -> WorkloadRef {
        WorkloadRef {
            kind: self.kind.into(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

/// Do these series labels name the object? Kind and name must be set and equal; the
/// api-version label, when set, must be the object's.
fn named_by_labels(
    labels: &BTreeMap<String, String>,
    object: &ObjectRef,
    wl: &WorkloadLabels,
) -> bool {
    labels.get(&wl.kind).map(String::as_str) == Some(object.kind.kind())
        && labels.get(&wl.name) == Some(&object.name)
        && labels
            .get(&wl.api_version)
            .is_none_or(|v| v == object.kind.api_version())
}

/// `selector` plus equality on the workload's kind and name labels, so the source reads (and
/// Prometheus filters) only those series. `None` when the name cannot be a label value (over
/// 63 characters): then the caller filters after reading the broader scope.
fn with_workload_labels(
    selector: &LabelSelector,
    object: &ObjectRef,
    wl: &WorkloadLabels,
) -> Option<LabelSelector> {
    let eq = |key: &str, value: &str| Requirement {
        key: key.into(),
        operator: Operator::Equals,
        values: vec![value.into()],
    };
    LabelSelector::from_requirements(
        selector
            .requirements()
            .iter()
            .cloned()
            .chain([eq(&wl.kind, object.kind.kind()), eq(&wl.name, &object.name)]),
    )
    .ok()
}

/// The Object scope as two selectors: the series whose workload labels name `object`, and
/// those among them whose api-version label names another group (which the Object scope
/// drops). `None` when the name cannot be a label value.
pub(crate) fn label_scopes(
    selector: &LabelSelector,
    object: &ObjectRef,
    wl: &WorkloadLabels,
) -> Option<(LabelSelector, LabelSelector)> {
    let named = with_workload_labels(selector, object, wl)?;
    // `apps/v1` is not a valid label value, so this selector is built, not validated.
    let foreign = LabelSelector::from_series_requirements(
        named
            .requirements()
            .iter()
            .cloned()
            .chain([
                Requirement {
                    key: wl.api_version.clone(),
                    operator: Operator::Exists,
                    values: Vec::new(),
                },
                Requirement {
                    key: wl.api_version.clone(),
                    operator: Operator::NotEquals,
                    values: vec![object.kind.api_version().into()],
                },
            ])
            .collect(),
    );
    Some((named, foreign))
}

/// The evidence of `object` from a read of its named scope alone (no pod set), which may be
/// summarized: exact only when that scope holds no series of another group, which the caller
/// has checked.
pub(crate) fn from_labels(
    object: &ObjectRef,
    wl: &WorkloadLabels,
    by_labels: Evidence,
) -> Evidence {
    combine_read(
        object,
        wl,
        by_labels,
        None,
        None,
        LabelRead::NamedAndChecked,
    )
}

/// What `combine` may assume of the label-scoped read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LabelRead {
    /// Any source's read, of the named scope or (for a name that cannot be a label value) a
    /// broader one: its series are filtered to the object's and sorted.
    Unchecked,
    /// The store's read of the named scope, which the caller checked holds no series of
    /// another group: every series in it is the object's (as the summarized tail, which
    /// cannot be filtered, already assumes), listed in the store's (target, series, labels)
    /// order, so filtering and sorting would keep it as it is.
    NamedAndChecked,
}

/// The pod a target id names, for ids of the form `<namespace>/<pod>` (discovered targets and
/// the Prometheus source's unknown pods).
fn pod_of_target<'a>(id: &'a str, namespace: &str) -> Option<&'a str> {
    id.strip_prefix(namespace)?.strip_prefix('/')
}

/// The evidence in `scope` (its series, namespace and `metricLabelSelector`) that belongs to
/// `object`.
/// `pods` are the pods as the cluster lists them (the namespace's, or the object's own: only
/// those count), `None` without a pod set.
pub(crate) async fn evidence(
    source: &dyn EvidenceSource,
    pods: Option<&BTreeMap<String, PodFacts>>,
    wl: &WorkloadLabels,
    object: &ObjectRef,
    scope: &Scope<'_>,
    now: Millis,
) -> Result<Evidence, SourceError> {
    let labelled = with_workload_labels(scope.selector, object, wl);
    let by_labels = source
        .evidence(
            &Scope {
                selector: labelled.as_ref().unwrap_or(scope.selector),
                ..scope.clone()
            },
            ReadMode::Listed,
            now,
        )
        .await?;
    let by_pods = match pods {
        Some(pods) => {
            // `combine` keeps the broad read's series of the object's own pods only, so the
            // source need list no others: a read the size of the workload, not the namespace.
            let me = object.workload();
            let own: BTreeSet<String> = pods
                .iter()
                .filter(|(_, f)| f.workload.as_ref() == Some(&me))
                .map(|(pod, _)| pod.clone())
                .collect();
            let read = ReadMode::Labelled {
                label: POD_LABEL,
                values: &own,
            };
            Some(source.evidence(scope, read, now).await?)
        }
        None => None,
    };
    Ok(combine(object, wl, by_labels, by_pods, pods))
}

/// Pure: the label-scoped evidence, plus (with the pod set) the series and never-scraped pods
/// of the object's own pods from the broader read.
pub(crate) fn combine(
    object: &ObjectRef,
    wl: &WorkloadLabels,
    by_labels: Evidence,
    by_pods: Option<Evidence>,
    pods: Option<&BTreeMap<String, PodFacts>>,
) -> Evidence {
    combine_read(object, wl, by_labels, by_pods, pods, LabelRead::Unchecked)
}

fn combine_read(
    object: &ObjectRef,
    wl: &WorkloadLabels,
    by_labels: Evidence,
    by_pods: Option<Evidence>,
    pods: Option<&BTreeMap<String, PodFacts>>,
    read: LabelRead,
) -> Evidence {
    let checked = read == LabelRead::NamedAndChecked;
    let merged = by_pods.is_some();
    let me = object.workload();
    let owned = |pod: &str| {
        pods.and_then(|p| p.get(pod))
            .and_then(|f| f.workload.as_ref())
            == Some(&me)
    };
    // The broad read holds every series of the workload's own pods, so its silent pods are
    // the ones with nothing in scope at all.
    let silent_pods = by_pods
        .as_ref()
        .map_or(&by_labels.silent_pods, |b| &b.silent_pods)
        .iter()
        .filter(|s| s.workload == me)
        .cloned()
        .collect();
    let mut ev = Evidence {
        observations: if checked {
            by_labels.observations
        } else {
            by_labels
                .observations
                .into_iter()
                .filter(|o| named_by_labels(&o.id.labels, object, wl))
                .collect()
        },
        unknown_targets: by_labels.unknown_targets,
        workloads: Arc::from([me.clone()]),
        silent_pods,
        // Only a read of the named scope alone may be summarized (`from_labels`); the broad
        // read of the pods is listed.
        clean_tail: by_labels.clean_tail,
        producer_reasons: Vec::new(),
    };
    // A summarized read is of the named scope alone, whose every series is the object's
    // (`from_labels`): its reasons all stand. Otherwise a reason stands with its target's series.
    let mut reasons = by_labels.producer_reasons;
    let from_labels = if ev.clean_tail.is_some_and(|t| t.series > 0) {
        reasons.len()
    } else {
        0
    };
    // Duplicates are looked up by identity, not by a pass over the listed ones per item: a
    // workload may have thousands of series over many pods, each pod with a reason.
    if let Some(broad) = by_pods {
        let mut reasoned: HashSet<TargetId> = reasons.iter().map(|r| r.target.clone()).collect();
        for r in broad.producer_reasons {
            if reasoned.insert(r.target.clone()) {
                reasons.push(r);
            }
        }
        // A series both reads hold is kept once.
        let mut listed: HashSet<SeriesId> =
            ev.observations.iter().map(|e| (*e.id).clone()).collect();
        for o in broad.observations {
            let own = o.id.labels.get(POD_LABEL).is_some_and(|p| owned(p));
            if own && listed.insert((*o.id).clone()) {
                ev.observations.push(o);
            }
        }
        let mut unknown: HashSet<TargetId> = ev
            .unknown_targets
            .iter()
            .map(|u| u.target.clone())
            .collect();
        for u in broad.unknown_targets {
            let own = pod_of_target(&u.target.0, &object.namespace).is_some_and(owned);
            if own && unknown.insert(u.target.clone()) {
                ev.unknown_targets.push(u);
            }
        }
    }
    let order = |a: &Observation, b: &Observation| {
        (&a.id.target, &a.id.series, &a.id.labels).cmp(&(&b.id.target, &b.id.series, &b.id.labels))
    };
    if checked && !merged {
        debug_assert!(ev.observations.is_sorted_by(|a, b| order(a, b).is_le()));
    } else {
        ev.observations.sort_by(order);
    }
    // The observations are sorted by target first, so a target's are found by halving.
    let observed = |target: &TargetId| {
        ev.observations
            .binary_search_by(|o| o.id.target.cmp(target))
            .is_ok()
    };
    let kept = reasons
        .into_iter()
        .enumerate()
        .filter(|(i, r)| *i < from_labels || observed(&r.target))
        .map(|(_, r)| r)
        .collect();
    ev.producer_reasons = kept;
    ev
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MetricQuery;
    use crate::evidence::{Observation, TargetId, UnknownTarget};

    fn lobby() -> ObjectRef {
        ObjectRef {
            kind: ObjectKind::StatefulSet,
            namespace: "games".into(),
            name: "lobby".into(),
        }
    }

    fn ob(target: &str, labels: &[(&str, &str)]) -> Observation {
        Observation {
            id: crate::evidence::SeriesRef::new(
                TargetId(target.into()),
                "hpa_expect_replicas".into(),
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>()
                    .into(),
            ),
            value: 3.0,
            observed_at_ms: 0,
            scraped_mono_ms: Some(0),
            last_valid: Some((3, 0)),
            present: true,
            target_failing: false,
            unusable: None,
            valid_until_ms: None,
        }
    }

    fn unknown(target: &str) -> UnknownTarget {
        UnknownTarget {
            target: TargetId(target.into()),
            last_error: None,
        }
    }

    fn pod_set() -> BTreeMap<String, PodFacts> {
        let of = |name: &str, kind: &str| PodFacts {
            running: true,
            workload: Some(WorkloadRef {
                kind: kind.into(),
                namespace: "games".into(),
                name: name.into(),
            }),
            ..PodFacts::default()
        };
        [
            ("lobby-0".to_string(), of("lobby", "StatefulSet")),
            ("lobby-1".to_string(), of("lobby", "StatefulSet")),
            ("chat-0".to_string(), of("chat", "StatefulSet")),
            ("lobby-7d9f-x".to_string(), of("lobby", "Deployment")),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn labels_name_the_workload_exactly() {
        let wl = WorkloadLabels::default();
        let sts = [
            ("hpa_target_kind", "StatefulSet"),
            ("hpa_target_name", "lobby"),
        ];
        assert!(named_by_labels(
            &sts.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            &lobby(),
            &wl
        ));
        let other_group: BTreeMap<String, String> = sts
            .iter()
            .chain(&[("hpa_target_api_version", "example.com/v1")])
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(!named_by_labels(&other_group, &lobby(), &wl));
        let deployment: BTreeMap<String, String> = [
            ("hpa_target_kind", "Deployment"),
            ("hpa_target_name", "lobby"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert!(!named_by_labels(&deployment, &lobby(), &wl));
    }

    #[test]
    fn without_discovery_only_the_labels_count() {
        let wl = WorkloadLabels::default();
        let by_labels = Evidence {
            observations: vec![
                ob(
                    "games/lobby-0",
                    &[
                        ("hpa_target_kind", "StatefulSet"),
                        ("hpa_target_name", "lobby"),
                        ("hpa_target_api_version", "apps/v1"),
                    ],
                ),
                ob(
                    "games/lobby-1",
                    &[
                        ("hpa_target_kind", "StatefulSet"),
                        ("hpa_target_name", "lobby"),
                        ("hpa_target_api_version", "other/v1"),
                    ],
                ),
            ],
            unknown_targets: vec![unknown("http://static/metrics")],
            workloads: Arc::from([]),
            silent_pods: Vec::new(),
            clean_tail: None,
            producer_reasons: vec![said("games/lobby-0"), said("games/lobby-1")],
        };
        let ev = combine(&lobby(), &wl, by_labels, None, None);
        assert_eq!(ev.observations.len(), 1);
        assert_eq!(&*ev.observations[0].id.target.0, "games/lobby-0");
        assert_eq!(ev.unknown_targets.len(), 1, "unknown input stays unknown");
        assert_eq!(*ev.workloads, [lobby().workload()]);
        // A reason stands with its target's series.
        assert_eq!(ev.producer_reasons, [said("games/lobby-0")]);
    }

    #[test]
    fn with_discovery_the_workloads_own_pods_count_and_no_other_pods_do() {
        let wl = WorkloadLabels::default();
        let pods = pod_set();
        let broad = Evidence {
            observations: vec![
                ob("games/lobby-0", &[("pod", "lobby-0")]),
                ob("games/chat-0", &[("pod", "chat-0")]),
                // A Deployment of the same name is another workload.
                ob("games/lobby-7d9f-x", &[("pod", "lobby-7d9f-x")]),
            ],
            unknown_targets: vec![unknown("games/lobby-1"), unknown("games/chat-1")],
            workloads: Arc::from([]),
            silent_pods: Vec::new(),
            clean_tail: None,
            producer_reasons: vec![said("games/chat-0"), said("games/lobby-0")],
        };
        let ev = combine(&lobby(), &wl, Evidence::default(), Some(broad), Some(&pods));
        let targets: Vec<&str> = ev.observations.iter().map(|o| &*o.id.target.0).collect();
        assert_eq!(targets, ["games/lobby-0"]);
        let unknown: Vec<&str> = ev.unknown_targets.iter().map(|u| &*u.target.0).collect();
        assert_eq!(unknown, ["games/lobby-1"]);
        assert_eq!(ev.producer_reasons, [said("games/lobby-0")]);
    }

    fn said(target: &str) -> crate::evidence::ProducerReason {
        crate::evidence::ProducerReason {
            target: TargetId(target.into()),
            reason: format!("{target} is busy").into(),
        }
    }

    #[test]
    fn a_series_found_both_ways_counts_once() {
        let wl = WorkloadLabels::default();
        let pods = pod_set();
        let both = ob(
            "games/lobby-0",
            &[
                ("pod", "lobby-0"),
                ("hpa_target_kind", "StatefulSet"),
                ("hpa_target_name", "lobby"),
            ],
        );
        let labelled = Evidence {
            observations: vec![both.clone()],
            ..Default::default()
        };
        let broad = Evidence {
            observations: vec![both],
            ..Default::default()
        };
        let ev = combine(&lobby(), &wl, labelled, Some(broad), Some(&pods));
        assert_eq!(ev.observations.len(), 1);
    }

    #[test]
    fn the_selector_gains_the_workload_labels() {
        let wl = WorkloadLabels::default();
        let s = LabelSelector::parse("zone=a").unwrap();
        assert_eq!(
            with_workload_labels(&s, &lobby(), &wl).unwrap().to_string(),
            "hpa_target_kind=StatefulSet,hpa_target_name=lobby,zone=a"
        );
        let long = ObjectRef {
            name: "a".repeat(100),
            ..lobby()
        };
        assert!(with_workload_labels(&s, &long, &wl).is_none());
    }

    #[test]
    fn resources() {
        assert_eq!(
            ObjectKind::from_resource("statefulsets.apps"),
            Some(ObjectKind::StatefulSet)
        );
        assert_eq!(
            ObjectKind::from_resource("deployments.apps"),
            Some(ObjectKind::Deployment)
        );
        assert_eq!(ObjectKind::from_resource("pods"), None);
        for kind in ObjectKind::ALL {
            assert_eq!(WorkloadKind::from(kind).as_str(), kind.kind());
            assert_eq!(WorkloadKind::from(kind.kind()), WorkloadKind::from(kind));
        }
        assert_eq!(pod_of_target("games/lobby-0", "games"), Some("lobby-0"));
        assert_eq!(pod_of_target("gamesx/lobby-0", "games"), None);
    }

    /// The scrape store, every read listed, as a source without an index of the pod label.
    struct ListedOnly(std::sync::Arc<crate::store::Store>);

    impl EvidenceSource for ListedOnly {
        fn evidence<'a>(
            &'a self,
            scope: &'a Scope<'a>,
            _read: ReadMode<'a>,
            now: Millis,
        ) -> futures::future::BoxFuture<'a, Result<Evidence, SourceError>> {
            EvidenceSource::evidence(&*self.0, scope, ReadMode::Listed, now)
        }
    }

    /// The pods' read narrowed to the object's own pods (`ReadMode::Labelled`) merges into the
    /// same evidence as the namespace's listed read, with the namespace's pod set or only the
    /// workload's, and alone (an empty named read, so everything comes from the pods' read):
    /// series found both ways, a static target's series naming an own pod, reasons of own
    /// pods, of a target whose only series are named by the workload labels and of another
    /// workload's pod, a never-scraped own pod and one of another workload, and an own pod's
    /// name on a series outside the scope.
    #[tokio::test]
    async fn the_narrowed_pods_read_merges_as_the_listed_one() {
        use crate::exposition::ExposedSample;
        use crate::store::{Page, ScrapeTarget, Store};

        let wl = WorkloadLabels::default();
        let store = std::sync::Arc::new(Store::new());
        let sts = |name: &str| WorkloadRef {
            kind: "StatefulSet".into(),
            namespace: "games".into(),
            name: name.into(),
        };
        let pod = |name: &str, of: &str| ScrapeTarget {
            format: Default::default(),
            id: TargetId(format!("games/{name}").into()),
            url: format!("http://{name}/metrics"),
            labels: [("namespace", "games"), ("pod", name)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            workload: Some(sts(of)),
        };
        let static_target = |url: &str, namespace: &str| ScrapeTarget {
            format: Default::default(),
            id: TargetId(url.into()),
            url: url.into(),
            labels: [("namespace".to_string(), namespace.to_string())].into(),
            workload: None,
        };
        let ctl = static_target("http://ctl/metrics", "games");
        let (named_only, elsewhere) = (
            static_target("http://named/metrics", "games"),
            static_target("http://elsewhere/metrics", "other"),
        );
        let targets = vec![
            pod("lobby-0", "lobby"),
            pod("lobby-1", "lobby"),
            pod("lobby-2", "lobby"),
            pod("chat-0", "chat"),
            pod("chat-1", "chat"),
            ctl.clone(),
            named_only.clone(),
            elsewhere.clone(),
        ];
        store.set_targets(targets.clone());
        let sample = ExposedSample::scraped;
        let named = [
            ("hpa_target_kind", "StatefulSet"),
            ("hpa_target_name", "lobby"),
        ];
        let page = |samples: Vec<ExposedSample>, reason: Option<&str>| Page {
            samples,
            valid_until_ms: None,
            reason: reason.map(Into::into),
        };
        store.record_success(
            &targets[0],
            1_000,
            1,
            page(
                vec![sample("hpa_stateful_index", &named, 1.0)],
                Some("warming"),
            ),
        );
        store.record_success(
            &targets[1],
            1_000,
            1,
            page(vec![sample("hpa_stateful_index", &[], 2.0)], Some("busy")),
        );
        store.record_success(
            &targets[3],
            1_000,
            1,
            page(vec![sample("hpa_stateful_index", &[], 1.0)], Some("chat")),
        );
        store.record_success(
            &ctl,
            1_000,
            1,
            page(
                vec![
                    sample("hpa_expect_replicas", &named, 3.0),
                    sample("hpa_stateful_index", &[("pod", "lobby-1"), ("x", "y")], 2.0),
                ],
                Some("leader"),
            ),
        );
        store.record_success(
            &named_only,
            1_000,
            1,
            page(
                vec![sample("hpa_expect_replicas", &named, 4.0)],
                Some("named-only"),
            ),
        );
        store.record_success(
            &elsewhere,
            1_000,
            1,
            page(
                vec![sample("hpa_stateful_index", &[("pod", "lobby-1")], 5.0)],
                Some("elsewhere"),
            ),
        );
        let facts = |of: &str| PodFacts {
            running: true,
            workload: Some(sts(of)),
            ..PodFacts::default()
        };
        let namespace_pods: BTreeMap<String, PodFacts> = [
            ("lobby-0", "lobby"),
            ("lobby-1", "lobby"),
            ("lobby-2", "lobby"),
            ("chat-0", "chat"),
            ("chat-1", "chat"),
        ]
        .iter()
        .map(|(p, of)| (p.to_string(), facts(of)))
        .collect();
        let own_pods: BTreeMap<String, PodFacts> = namespace_pods
            .iter()
            .filter(|(_, f)| f.workload == Some(sts("lobby")))
            .map(|(p, f)| (p.clone(), f.clone()))
            .collect();
        let series = vec![
            "hpa_expect_replicas".to_string(),
            "hpa_stateful_index".to_string(),
        ];
        let everything = LabelSelector::everything();
        let scope = Scope {
            series: &series,
            namespace_label: "namespace",
            namespace: "games",
            selector: &everything,
        };
        let json = |ev: Evidence| serde_json::to_value(ev).unwrap();
        let listed = ListedOnly(store.clone());
        let plain = json(
            evidence(&listed, Some(&namespace_pods), &wl, &lobby(), &scope, 2_000)
                .await
                .unwrap(),
        );
        for pods in [&namespace_pods, &own_pods] {
            let narrowed = evidence(&*store, Some(pods), &wl, &lobby(), &scope, 2_000)
                .await
                .unwrap();
            assert_eq!(json(narrowed), plain);
        }
        // The case is not empty: the own pods' series, the static target's series naming one
        // with its reason, the named-only target's reason, the unknown own pod.
        let text = plain.to_string();
        for wanted in [
            "games/lobby-1",
            "\"x\":\"y\"",
            "leader",
            "busy",
            "named-only",
            "games/lobby-2",
        ] {
            assert!(text.contains(wanted), "{wanted} in {text}");
        }
        // chat's pods are another workload's; the named read leaves out its never-scraped
        // chat-1 because that read's workloads are lobby's (lobby-0's series are named).
        assert!(!text.contains("chat"), "{text}");
        assert!(!text.contains("elsewhere"), "{text}");

        // The pods' read alone, merged into an empty named read: the narrowed read must bring
        // every own series, reason and unknown pod the listed one brings, and nothing else.
        let own: BTreeSet<String> = own_pods.keys().cloned().collect();
        let labelled = ReadMode::Labelled {
            label: POD_LABEL,
            values: &own,
        };
        let alone = |raw: Evidence| {
            json(combine(
                &lobby(),
                &wl,
                Evidence::default(),
                Some(raw),
                Some(&namespace_pods),
            ))
        };
        let listed_read = EvidenceSource::evidence(&*store, &scope, ReadMode::Listed, 2_000);
        let from_listed = alone(listed_read.await.unwrap());
        let labelled_read = EvidenceSource::evidence(&*store, &scope, labelled, 2_000);
        assert_eq!(alone(labelled_read.await.unwrap()), from_listed);
        let text = from_listed.to_string();
        for wanted in ["busy", "leader", "games/lobby-2", "\"x\":\"y\""] {
            assert!(text.contains(wanted), "{wanted} in {text}");
        }
    }

    /// The selector-typo scenario: a StatefulSet and a Deployment both named `lobby` in one
    /// namespace. The External selector `hpa_target_name=lobby` (the kind label dropped) mixes
    /// them; the Object query for each workload does not.
    #[tokio::test]
    async fn an_object_query_does_not_mix_two_workloads_that_share_a_name() {
        use crate::store::ScrapeTarget;

        let adapter = crate::engine::fixtures::default_adapter();
        let store = adapter.scrape_store();
        let target = |id: &str| ScrapeTarget {
            format: Default::default(),
            id: TargetId(id.into()),
            url: format!("http://{id}/metrics"),
            labels: [("namespace".to_string(), "games".to_string())].into(),
            workload: None,
        };
        let page = |kind: &str, expect: f64, index: f64| {
            crate::engine::fixtures::workload_page(kind, "lobby", expect, index)
        };
        let (sts, deploy) = (target("sts"), target("deploy"));
        store.set_targets(vec![sts.clone(), deploy.clone()]);
        store.record_success(&sts, 1_000_000, 1, page("StatefulSet", 3.0, 2.0));
        store.record_success(&deploy, 1_000_000, 1, page("Deployment", 9.0, 1.0));

        let loose = LabelSelector::parse("hpa_target_name=lobby").unwrap();
        let external = adapter
            .answer_computed(&MetricQuery::external(
                "hpa_target_replicas",
                "games",
                loose.clone(),
            ))
            .await
            .unwrap();
        assert_eq!(
            external.value(),
            Some(9),
            "the loose selector mixes both workloads"
        );

        let everything = LabelSelector::everything();
        let object = |kind| ObjectRef {
            kind,
            namespace: "games".into(),
            name: "lobby".into(),
        };
        let sts_answer = adapter
            .answer_computed(&MetricQuery::object(
                "hpa_target_replicas",
                object(ObjectKind::StatefulSet),
                everything.clone(),
            ))
            .await
            .unwrap();
        assert_eq!(sts_answer.value(), Some(3));
        let deploy_answer = adapter
            .answer_computed(&MetricQuery::object(
                "hpa_target_replicas",
                object(ObjectKind::Deployment),
                everything.clone(),
            ))
            .await
            .unwrap();
        assert_eq!(deploy_answer.value(), Some(9));
        let missing = ObjectRef {
            name: "chat".into(),
            ..object(ObjectKind::StatefulSet)
        };
        let none = adapter
            .answer_computed(&MetricQuery::object(
                "hpa_target_replicas",
                missing.clone(),
                everything.clone(),
            ))
            .await
            .unwrap();
        assert!(
            none.value().is_none(),
            "no series for the workload is a refusal"
        );
        // metricLabelSelector narrows further.
        let narrowed = adapter
            .answer_computed(&MetricQuery::object(
                "hpa_expect_replicas",
                object(ObjectKind::StatefulSet),
                LabelSelector::parse("hpa_target_api_version").unwrap(),
            ))
            .await
            .unwrap();
        assert_eq!(narrowed.value(), Some(3));
    }
}
