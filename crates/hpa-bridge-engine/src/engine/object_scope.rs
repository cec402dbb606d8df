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
//! With a pod set and the scrape store, the scope may also be read as two disjoint selector
//! scopes (`split_scopes`), each summarized as an External read is (`from_split`).
//!
//! The result is ordinary `Evidence`, so every rule (max-not-sum, the floor, refusals, gates,
//! threshold, combine) runs unchanged: one engine, two front doors.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use hpa_bridge_rules::clock::Millis;
use hpa_bridge_rules::cluster::{PodFacts, WorkloadKind, WorkloadRef};
use hpa_bridge_rules::config::WorkloadLabels;
use hpa_bridge_rules::evidence::{Evidence, Observation, Read, Scope, TargetId};
use hpa_bridge_rules::selector::{LabelSelector, Operator, Requirement};
use hpa_bridge_sources::source::{EvidenceSource, SourceError};

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
    let foreign = of_another_group(&named, object, wl);
    Some((named, foreign))
}

/// The series of `scope` whose api-version label names another group than `object`'s.
fn of_another_group(
    scope: &LabelSelector,
    object: &ObjectRef,
    wl: &WorkloadLabels,
) -> LabelSelector {
    // `apps/v1` is not a valid label value, so this selector is built, not validated.
    LabelSelector::from_series_requirements(
        scope
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
    )
}

/// An Object scope with a pod set as two disjoint selectors, so that each can be read as a
/// summary: the series of the object's own pods out of the query's whole scope, and the series
/// its workload labels name that are not of those pods; plus the series of the latter that
/// name another group (which the Object scope drops, and a summary's counted tail could not).
#[derive(Debug, PartialEq)]
pub(crate) struct SplitScopes {
    pub(crate) own: LabelSelector,
    pub(crate) others: LabelSelector,
    pub(crate) others_foreign: LabelSelector,
}

/// The names of the pods in `pods` whose workload is `object`, distinct and in order.
pub(crate) fn own_pods<'p>(
    pods: &'p BTreeMap<String, PodFacts>,
    object: &ObjectRef,
) -> Vec<&'p str> {
    let me = object.workload();
    pods.iter()
        .filter(|(_, f)| f.workload.as_ref() == Some(&me))
        .map(|(pod, _)| pod.as_str())
        .collect()
}

/// `SplitScopes` of `object` under `selector`, whose own pods are `own` (distinct). `None`
/// without own pods (`pod in ()` selects nothing a selector can say) or when the name cannot
/// be a label value.
pub(crate) fn split_scopes(
    selector: &LabelSelector,
    object: &ObjectRef,
    wl: &WorkloadLabels,
    own: &[&str],
) -> Option<SplitScopes> {
    if own.is_empty() {
        return None;
    }
    let named = with_workload_labels(selector, object, wl)?;
    // Pod names need not be label values (a pod name may be longer), so these are built.
    let pods = |operator| Requirement {
        key: POD_LABEL.into(),
        operator,
        values: own.iter().map(|p| p.to_string()).collect(),
    };
    // Each is read through a kept resolution keyed by its text; spelling out the pods would
    // make every answer write and compare keys the size of the workload.
    static TAGS: AtomicU64 = AtomicU64::new(0);
    let tagged = |requirements: Vec<Requirement>| {
        LabelSelector::tagged(requirements, TAGS.fetch_add(1, AtomicOrdering::Relaxed))
    };
    let with = |scope: &LabelSelector, r: Requirement| {
        scope
            .requirements()
            .iter()
            .cloned()
            .chain([r])
            .collect::<Vec<_>>()
    };
    let others = with(&named, pods(Operator::NotIn));
    let others_foreign = of_another_group(
        &LabelSelector::from_series_requirements(others.clone()),
        object,
        wl,
    );
    Some(SplitScopes {
        own: tagged(with(selector, pods(Operator::In))),
        others_foreign: tagged(others_foreign.requirements().to_vec()),
        others: tagged(others),
    })
}

/// The evidence of `object` from its split scopes (`SplitScopes`), each read as a summary, with
/// the never-scraped targets of its named scope and the silent and never-scraped pods of the
/// query's whole scope as `evidence` would read them: the same evidence, counted where it would
/// list. Exact only when the other pods' named series name no other group and no read gave a
/// producer reason (their order would be the reads', not `evidence`'s), which the caller
/// has checked.
pub(crate) fn from_split(
    object: &ObjectRef,
    wl: &WorkloadLabels,
    pods: &BTreeMap<String, PodFacts>,
    reads: SplitReads,
) -> Evidence {
    let SplitReads {
        named_wide,
        scope_wide,
        others,
        own,
    } = reads;
    let clean_tail = match (others.clean_tail, own.clean_tail) {
        (Some(mut a), Some(b)) => {
            a.add(b.series, b.max_value, b.newest_at_ms, b.oldest_mono_ms);
            Some(a)
        }
        (a, b) => a.or(b),
    };
    let by_labels = Evidence {
        observations: others.observations,
        unknown_targets: named_wide.unknown_targets,
        unknown_bystanders: named_wide.unknown_bystanders,
        silent_targets: named_wide.silent_targets,
        clean_tail,
        ..Evidence::default()
    };
    let by_pods = Evidence {
        observations: own.observations,
        unknown_targets: scope_wide.unknown_targets,
        unknown_bystanders: scope_wide.unknown_bystanders,
        silent_pods: scope_wide.silent_pods,
        ..Evidence::default()
    };
    combine_read(
        object,
        wl,
        by_labels,
        Some(by_pods),
        Some(pods),
        LabelRead::Unchecked,
        PodsRead::Narrowed,
    )
}

/// The reads `from_split` combines.
pub(crate) struct SplitReads {
    /// The named scope's whole-scope part (`Read::Whole`).
    pub(crate) named_wide: Evidence,
    /// The query's whole scope's whole-scope part.
    pub(crate) scope_wide: Evidence,
    /// `SplitScopes::others`, summarized.
    pub(crate) others: Evidence,
    /// `SplitScopes::own`, summarized.
    pub(crate) own: Evidence,
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
        PodsRead::Listed,
    )
}

/// What `combine_read` may assume of the label-scoped read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LabelRead {
    /// Any source's read, of the named scope or (for a name that cannot be a label value) a
    /// broader one: its listed series are filtered to the object's and sorted (a counted
    /// tail comes only from scopes the caller checked: `from_split`).
    Unchecked,
    /// The store's read of the named scope, which the caller checked holds no series of
    /// another group: every series in it is the object's (as the summarized tail, which
    /// cannot be filtered, already assumes), listed in the store's (target, series, labels)
    /// order, so filtering and sorting would keep it as it is.
    NamedAndChecked,
}

/// What `combine_read` may assume of the pods' read (there may be none: `from_labels`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PodsRead {
    /// Any source's read: its series are filtered to the object's own pods'.
    Listed,
    /// A read narrowed to the own pods' names by a source that lists only those
    /// (`EvidenceSource::narrows_by_label`): the names are the pods whose workload is the
    /// object, which is what the filter would keep.
    Narrowed,
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
        .read(
            &Scope {
                selector: labelled.as_ref().unwrap_or(scope.selector),
                ..scope.clone()
            },
            Read::Listed,
            now,
        )
        .await?;
    let by_pods = match pods {
        Some(pods) => {
            // `combine` keeps the broad read's series of the object's own pods only, so the
            // source need list no others: a read the size of the workload, not the namespace.
            let own = own_pods(pods, object);
            let read = Read::Labelled {
                label: POD_LABEL,
                values: &own,
            };
            Some(source.read(scope, read, now).await?)
        }
        None => None,
    };
    let pods_read = match source.narrows_by_label() {
        true => PodsRead::Narrowed,
        false => PodsRead::Listed,
    };
    Ok(combine_read(
        object,
        wl,
        by_labels,
        by_pods,
        pods,
        LabelRead::Unchecked,
        pods_read,
    ))
}

/// Pure: the label-scoped evidence, plus (with the pod set) the series and never-scraped pods
/// of the object's own pods from the broader read, as any source lists them.
#[cfg(test)]
pub(crate) fn combine(
    object: &ObjectRef,
    wl: &WorkloadLabels,
    by_labels: Evidence,
    by_pods: Option<Evidence>,
    pods: Option<&BTreeMap<String, PodFacts>>,
) -> Evidence {
    combine_read(
        object,
        wl,
        by_labels,
        by_pods,
        pods,
        LabelRead::Unchecked,
        PodsRead::Listed,
    )
}

fn combine_read(
    object: &ObjectRef,
    wl: &WorkloadLabels,
    by_labels: Evidence,
    by_pods: Option<Evidence>,
    pods: Option<&BTreeMap<String, PodFacts>>,
    read: LabelRead,
    pods_read: PodsRead,
) -> Evidence {
    let checked = read == LabelRead::NamedAndChecked;
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
    let named = by_labels.observations;
    let mut ev = Evidence {
        observations: Vec::new(),
        unknown_targets: by_labels.unknown_targets,
        unknown_bystanders: by_labels.unknown_bystanders,
        workloads: Arc::from([me.clone()]),
        silent_pods,
        silent_targets: by_labels.silent_targets,
        // Only reads whose every series is the object's are summarized (`from_labels`,
        // `from_split`), and their tail comes with the named read.
        clean_tail: by_labels.clean_tail,
        producer_reasons: Vec::new(),
    };
    // A summarized read's series are all the object's (`from_labels`; `from_split` reads give
    // no reason, or the caller lists instead): its reasons all stand. Otherwise a reason
    // stands with its target's series.
    let mut reasons = by_labels.producer_reasons;
    let from_labels = if ev.clean_tail.is_some_and(|t| t.series > 0) {
        reasons.len()
    } else {
        0
    };
    ev.observations = match by_pods {
        None if checked => {
            debug_assert!(named.is_sorted_by(|a, b| series_order(a, b).is_le()));
            named
        }
        None => {
            let mut kept: Vec<Observation> = named
                .into_iter()
                .filter(|o| named_by_labels(&o.id.labels, object, wl))
                .collect();
            kept.sort_by(series_order);
            kept
        }
        Some(broad) => {
            // Duplicates are looked up by identity, not by a pass over the listed ones per
            // item, which would grow with the square of the workload's pods.
            let mut reasoned: HashSet<TargetId> =
                reasons.iter().map(|r| r.target.clone()).collect();
            for r in broad.producer_reasons {
                if reasoned.insert(r.target.clone()) {
                    reasons.push(r);
                }
            }
            let mut unknown: HashSet<TargetId> =
                ev.unknown_to_floor().map(|u| u.target.clone()).collect();
            for u in broad.unknown_targets {
                let own = pod_of_target(&u.target.0, &object.namespace).is_some_and(owned);
                if own && unknown.insert(u.target.clone()) {
                    ev.unknown_targets.push(u);
                }
            }
            for u in broad.unknown_bystanders {
                let own = pod_of_target(&u.target.0, &object.namespace).is_some_and(owned);
                if own && unknown.insert(u.target.clone()) {
                    ev.unknown_bystanders.push(u);
                }
            }
            let own: Vec<Observation> = match pods_read {
                PodsRead::Narrowed => broad.observations,
                PodsRead::Listed => broad
                    .observations
                    .into_iter()
                    .filter(|o| o.id.labels.get(POD_LABEL).is_some_and(|p| owned(p)))
                    .collect(),
            };
            merge(named, own, |o| named_by_labels(&o.id.labels, object, wl))
        }
    };
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

/// The order every read lists its series in: by target, then name, then labels. Handles to
/// the same strings compare equal without reading them: the two reads of an Object query
/// share most of their series, and in a large store their strings sit on cold lines.
fn series_order(a: &Observation, b: &Observation) -> Ordering {
    fn by<T: Ord + ?Sized>(a: &Arc<T>, b: &Arc<T>) -> Ordering {
        if Arc::ptr_eq(a, b) {
            Ordering::Equal
        } else {
            a.cmp(b)
        }
    }
    by(&a.id.target.0, &b.id.target.0)
        .then_with(|| by(&a.id.series, &b.id.series))
        .then_with(|| a.id.labels.cmp(&b.id.labels))
}

/// The named read's series that `keep_named` keeps, and the own pods' series, in
/// `series_order`. A series both reads list is an own pod's, so it stands whatever its labels
/// name, once, as the pods' read gives it; a series one read lists twice is kept once from
/// the pods' read (the first listing) and as often as listed from the named read.
fn merge(
    mut named: Vec<Observation>,
    mut own: Vec<Observation>,
    keep_named: impl Fn(&Observation) -> bool,
) -> Vec<Observation> {
    // A read that lists one shared list in its order (the store's) is in series order, each
    // series once, which is seen without reading the identities; any other read is sorted,
    // stably, so a repeated series keeps its first listing first.
    let in_order = |read: &[Observation]| read.windows(2).all(|w| w[1].id.follows(&w[0].id));
    if !in_order(&named) {
        named.sort_by(series_order);
    }
    if !in_order(&own) {
        own.sort_by(series_order);
        own.dedup_by(|later, first| series_order(first, later).is_eq());
    }
    let mut merged = Vec::with_capacity(named.len().max(own.len()));
    let mut named = named.into_iter().peekable();
    let mut own = own.into_iter().peekable();
    loop {
        let step = match (named.peek(), own.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(a), Some(b)) => series_order(a, b),
        };
        match step {
            Ordering::Less => merged.extend(named.next().filter(|a| keep_named(a))),
            Ordering::Equal | Ordering::Greater => {
                let Some(b) = own.next() else { break };
                if step.is_eq() {
                    while named.next_if(|a| series_order(a, &b).is_eq()).is_some() {}
                }
                merged.push(b);
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests;
