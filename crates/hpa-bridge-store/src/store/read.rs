//! Scoped reads: the series and evidence a query's scope holds, under the store's read lock.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::family_digest::Families;
use super::postings::Stamp;
use super::resolved_scope::{ResolvedScope, ResolvedTarget};
use super::series_slots::SlotId;
use super::{Inner, SeriesState, Store, WorkloadRef};
use hpa_bridge_rules::clock::{Millis, Now};
use hpa_bridge_rules::evidence::{
    CleanTail, Evidence, Observation, ProducerReason, Read, Scope, ScopeKey, SeriesId,
    SeriesLabels, SeriesRef, SilentPods, Summarize, TargetId, UnknownTarget,
};
use hpa_bridge_rules::selector::Operator;

/// The requirements the index does not decide (`Postings::candidates` settles the name,
/// the namespace and every `Requirement::indexed` one).
fn matches_beyond_index(scope: &Scope<'_>, labels: &SeriesLabels) -> bool {
    scope
        .selector
        .requirements()
        .iter()
        .filter(|r| !r.indexed())
        .all(|r| r.matches_series(labels))
}

/// Could a target with these labels export in-scope series? Requirements on keys the
/// target does not define are unknown until it is scraped, so they count as satisfiable.
fn possibly_matches(scope: &Scope<'_>, target_labels: &BTreeMap<String, String>) -> bool {
    // An empty target label is no label (`merge_labels`).
    let label = |key: &str| target_labels.get(key).filter(|v| !v.is_empty());
    if let Some(ns) = label(scope.namespace_label) {
        if ns != scope.namespace {
            return false;
        }
    }
    scope.selector.requirements().iter().all(|r| {
        // Target labels win on conflict, so only keys the target sets can rule it out.
        let Some(value) = label(&r.key) else {
            return true;
        };
        let listed = r.values.iter().any(|v| v == value);
        match r.operator {
            Operator::Equals | Operator::In => listed,
            Operator::NotEquals | Operator::NotIn => !listed,
            Operator::Exists => true,
            Operator::DoesNotExist => false,
        }
    })
}

/// Is every series a target with these labels exports in scope, whatever its exporter writes?
/// Its own labels must set the namespace and satisfy every requirement: target labels win
/// over the exporter's, and only the keys the target sets are settled before a page.
fn surely_in_scope(scope: &Scope<'_>, target_labels: &BTreeMap<String, String>) -> bool {
    let label = |key: &str| target_labels.get(key).filter(|v| !v.is_empty());
    label(scope.namespace_label).is_some_and(|ns| ns == scope.namespace)
        && scope
            .selector
            .requirements()
            .iter()
            .all(|r| label(&r.key).is_some() && r.matches_series(target_labels))
}

/// The static targets with a page whose own labels put them in `scope` but that hold no
/// series of it (`Evidence::silent_targets`). Worked out again only when the targets with a
/// page change, or the scope's series do (a new resolution).
fn silent_static(inner: &Inner, resolved: &ResolvedScope, scope: &Scope<'_>) -> Arc<[TargetId]> {
    let version = inner.static_changed;
    if resolved.no_silent_static_at.load(Relaxed) == version {
        return Arc::from([]);
    }
    let mut kept = resolved
        .silent_static
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((_, found)) = kept.as_ref().filter(|(at, _)| *at == version) {
        return found.clone();
    }
    let listed: HashSet<&TargetId> = resolved.ids.iter().map(|id| &id.target).collect();
    let found: Arc<[TargetId]> = inner
        .static_reported
        .iter()
        .filter(|id| !listed.contains(id))
        .filter(|id| {
            inner
                .targets
                .get(*id)
                .is_some_and(|rec| surely_in_scope(scope, &rec.target.labels))
        })
        .cloned()
        .collect();
    if found.is_empty() {
        resolved.no_silent_static_at.store(version, Relaxed);
        *kept = None;
    } else {
        *kept = Some((version, found.clone()));
    }
    found
}

impl Store {
    /// Changes whenever anything an answer over these scopes reads from the store changes,
    /// other than the passing of time (a series re-scraped with the same value and state
    /// leaves it unchanged). Cheap: a few index lookups per scope, whatever its size, under
    /// one read lock.
    pub fn scope_version<'a>(&self, scopes: impl IntoIterator<Item = Scope<'a>>) -> u64 {
        let inner = self.locked();
        scopes
            .into_iter()
            .map(|scope| {
                inner.postings.newest(
                    scope.series,
                    scope.namespace_label,
                    scope.namespace,
                    scope.selector.requirements(),
                    Stamp::Changed,
                )
            })
            .fold(inner.unscraped_changed, u64::max)
    }

    /// Counts for self-metrics: (tracked series, stale series).
    pub fn series_counts(&self, now: impl Into<Now>, stale_after_ms: Millis) -> (usize, usize) {
        let now = now.into();
        let inner = self.locked();
        let mut total = 0;
        let mut stale = 0;
        for rec in inner.targets.values() {
            for s in rec
                .series
                .values()
                .flat_map(HashMap::values)
                .filter_map(|slot| inner.slots.get(*slot))
                .filter(|s| s.present)
            {
                total += 1;
                if now.age_ms(s.latest_at, s.latest_mono) > stale_after_ms && s.can_go_stale() {
                    stale += 1;
                }
            }
        }
        (total, stale)
    }

    /// Distinct values of `label` over the series named in `series` (present or retained).
    pub fn label_values(&self, series: &[String], label: &str) -> BTreeSet<String> {
        self.locked().postings.label_values(series, label)
    }

    /// The series `scope` holds, from the cache while its membership stands, else worked out
    /// from the postings (under the same read lock, so the two agree).
    pub(super) fn resolve(
        &self,
        inner: &Inner,
        scope: &Scope<'_>,
        key: &ScopeKey,
        keep: bool,
    ) -> Arc<ResolvedScope> {
        let requirements = scope.selector.requirements();
        let anywhere = inner.postings.members_anywhere();
        let kept = self.resolved.get(key);
        if let Some(hit) = kept
            .as_ref()
            .filter(|r| r.confirmed.load(Relaxed) == anywhere)
        {
            return hit.clone();
        }
        let membership = inner.postings.newest(
            scope.series,
            scope.namespace_label,
            scope.namespace,
            requirements,
            Stamp::Members,
        );
        if let Some(hit) = kept.filter(|r| r.membership == membership) {
            // Concurrent readers may both store: the same value, under the same read lock.
            hit.confirmed.store(anywhere, Relaxed);
            return hit;
        }
        let candidates = inner.postings.candidates(
            scope.series,
            scope.namespace_label,
            scope.namespace,
            requirements,
        );
        let mut targets = Vec::with_capacity(candidates.len());
        let mut ids = Vec::new();
        let mut workloads = Vec::new();
        let mut pods_listed: Vec<u32> = Vec::new();
        let mut in_scope: Vec<(u32, SlotId, &SeriesState)> = Vec::new();
        for (id, slots) in candidates {
            let Some(rec) = inner.targets.get(id) else {
                continue;
            };
            in_scope.clear();
            in_scope.extend(slots.iter().filter_map(|slot| {
                let s = inner.slots.get(*slot)?;
                matches_beyond_index(scope, &s.labels).then_some((s.rank, *slot, s))
            }));
            if in_scope.is_empty() {
                continue;
            }
            // Deterministic order makes explanations stable and tests exact: targets in their
            // order, and each target's series by rank, which is their (name, labels) order.
            // Ranks shift when a target gains series, but never reorder the ones it had.
            in_scope.sort_unstable_by_key(|(rank, slot, _)| (*rank, *slot));
            // A scope that names a series twice (`series: [x, x]`) gets its slots once per
            // name from the postings; each series is listed once (`SeriesRef::follows`).
            in_scope.dedup_by_key(|(_, slot, _)| *slot);
            let names: Vec<Arc<str>> = in_scope.iter().map(|(_, _, s)| s.name.clone()).collect();
            ids.extend(in_scope.iter().map(|(_, _, s)| SeriesId {
                target: id.clone(),
                series: s.name.clone(),
                labels: s.labels.clone(),
            }));
            targets.push(ResolvedTarget {
                cell: rec.cell.clone(),
                slots: in_scope.iter().map(|(_, slot, _)| *slot).collect(),
                families: Families::of(&names, &rec.series),
            });
            if let Some(w) = &rec.target.workload {
                match workloads.iter().position(|x| x == w) {
                    Some(i) => pods_listed[i] += 1,
                    None => {
                        workloads.push(w.clone());
                        pods_listed.push(1);
                    }
                }
            }
        }
        let resolved = Arc::new(ResolvedScope {
            membership,
            confirmed: std::sync::atomic::AtomicU64::new(anywhere),
            targets,
            ids: ids.into(),
            workloads: workloads.into(),
            pods_listed: pods_listed.into(),
            by_label: std::sync::OnceLock::new(),
            workload_at: std::sync::OnceLock::new(),
            no_silent_static_at: std::sync::atomic::AtomicU64::new(u64::MAX),
            silent_static: std::sync::Mutex::new(None),
        });
        if keep {
            self.resolved.put(key.clone(), resolved.clone());
        }
        resolved
    }

    /// The evidence `read` asks of `scope`. Reads only the series the index names for the
    /// scope, plus the never-scraped targets. A `Labelled` read, once the scope's resolution
    /// and its index of the label are built (after the scope's series change, the first read
    /// builds them), reads as many series as it lists, whatever the scope holds
    /// (label_index.rs).
    pub fn read(&self, scope: &Scope<'_>, read: Read<'_>) -> Evidence {
        let inner = self.locked();
        read_one(self, &inner, scope, read)
    }

    /// Several reads under one read lock, so in one snapshot: no scrape is recorded between
    /// them, and a check made by one holds for the others.
    pub fn read_together(&self, reads: &[(&Scope<'_>, Read<'_>)]) -> Vec<Evidence> {
        let inner = self.locked();
        (reads.iter())
            .map(|(scope, read)| read_one(self, &inner, scope, *read))
            .collect()
    }
}

/// One read under the lock its caller holds. Each scope's resolution is kept for the next
/// read, but a glance's.
fn read_one(store: &Store, inner: &Inner, scope: &Scope<'_>, read: Read<'_>) -> Evidence {
    let keep = !matches!(read, Read::Glance);
    let resolved = store.resolve(inner, scope, &scope.key(), keep);
    let (series, whole) = match read {
        Read::Listed | Read::Glance => (Some(None), Some(None)),
        Read::Summarized(s) => (Some(Some(s)), Some(None)),
        Read::Series(s) => (Some(s), None),
        Read::Whole { silent_of } => (None, Some(silent_of)),
        Read::Labelled { label, values } => {
            let mut ev = labelled_evidence(inner, &resolved, label, values);
            scope_wide(inner, &resolved, scope, None, &mut ev);
            return ev;
        }
    };
    let mut ev = match series {
        Some(summarize) => series_evidence(inner, &resolved, summarize),
        None => Evidence::default(),
    };
    if let Some(silent_of) = whole {
        scope_wide(inner, &resolved, scope, silent_of, &mut ev);
    }
    ev
}

/// Of the in-scope series only those whose `label` is one of `values`, with only their
/// targets' producer reasons; no scope-wide part.
fn labelled_evidence(
    inner: &Inner,
    resolved: &ResolvedScope,
    label: &str,
    values: &[&str],
) -> Evidence {
    let positions = resolved
        .label_index(label)
        .positions(values.iter().copied());
    let mut ev = Evidence {
        observations: Vec::with_capacity(positions.len()),
        ..Evidence::default()
    };
    let (mut last_target, mut failing) = (None, false);
    for p in positions {
        let Some(t) = resolved.targets.get(p.target as usize) else {
            continue;
        };
        let i = p.series as usize;
        if last_target != Some(p.target) {
            last_target = Some(p.target);
            failing = t.cell.failing();
            if let (Some(reason), Some(id)) = (t.cell.reason(), resolved.ids.get(i)) {
                ev.producer_reasons.push(ProducerReason {
                    target: id.target.clone(),
                    reason,
                });
            }
        }
        ev.observations
            .extend(observation(inner, &resolved.ids, p.slot, i, failing));
    }
    ev
}

/// The series of `resolved` as a listed read lists them (and the producer reasons of
/// their targets), summarized under `summarize`; no scope-wide part.
fn series_evidence(
    inner: &Inner,
    resolved: &ResolvedScope,
    summarize: Option<Summarize>,
) -> Evidence {
    let mut ev = Evidence::default();
    // A summary lists about its first `after` inputs and the unclean rest: room for those
    // and a target's worth more saves the growth steps in the common, healthy case, and
    // is made only once something is listed (a summary may list nothing).
    let room = match &summarize {
        None => resolved.ids.len(),
        Some(s) => resolved.ids.len().min(s.after + 16),
    };
    let mut tail = CleanTail::new(summarize.unwrap_or_default());
    let mut listed_present = 0usize;
    let mut index = 0;
    for t in &resolved.targets {
        let first = index;
        index += t.slots.len();
        let failing = t.cell.failing();
        if let Some(reason) = t.cell.reason() {
            if let Some(id) = resolved.ids.get(first).filter(|_| !t.slots.is_empty()) {
                ev.producer_reasons.push(ProducerReason {
                    target: id.target.clone(),
                    reason,
                });
            }
        }
        if let Some(s) = summarize.as_ref().filter(|s| listed_present >= s.after) {
            if let Some((max, newest, oldest)) = t.cell.clean_and_fresh(&t.families, s) {
                tail.add(t.slots.len(), max, newest, oldest);
                continue;
            }
        }
        let listed = ev.observations.len();
        if ev.observations.capacity() == 0 {
            ev.observations.reserve(room);
        }
        ev.observations.extend(
            t.slots
                .iter()
                .zip(first..)
                .filter_map(|(slot, i)| observation(inner, &resolved.ids, *slot, i, failing)),
        );
        if summarize.is_some() {
            listed_present += ev.observations[listed..]
                .iter()
                .filter(|o| o.present)
                .count();
        }
    }
    if tail.series > 0 {
        ev.clean_tail = Some(tail);
    }
    ev
}

/// Series `i` of a resolution whose ids are `ids`, as its slot reads now.
fn observation(
    inner: &Inner,
    ids: &Arc<[SeriesId]>,
    slot: SlotId,
    i: usize,
    target_failing: bool,
) -> Option<Observation> {
    let s = inner.slots.get(slot)?;
    Some(Observation {
        id: SeriesRef::at(ids, i)?,
        value: s.latest,
        observed_at_ms: s.latest_at,
        scraped_mono_ms: s.latest_mono,
        last_valid: s.last_valid,
        present: s.present,
        target_failing,
        unusable: s.unusable,
        valid_until_ms: s.valid_until,
    })
}

/// What a read of `scope` gives of the scope as a whole, whatever series it lists: the
/// workloads, their silent pods (of `silent_of` alone when given), and the never-scraped
/// targets that could hold its series.
fn scope_wide(
    inner: &Inner,
    resolved: &ResolvedScope,
    scope: &Scope<'_>,
    silent_of: Option<&WorkloadRef>,
    ev: &mut Evidence,
) {
    ev.workloads = resolved.workloads.clone();
    // A workload's pods with a series in scope are listed in the resolution, which stands
    // while the scope's series do; the pods that have had a page are counted as they come
    // and go, so a pod whose pages hold nothing in scope shows as a difference.
    let listed = resolved.workloads.iter().zip(resolved.pods_listed.iter());
    let (skip, take) = match silent_of.map(|w| resolved.workload_position(w)) {
        None => (0, usize::MAX),
        Some(Some(at)) => (at, 1),
        Some(None) => (0, 0),
    };
    for (w, listed) in listed.skip(skip).take(take) {
        let reported = inner.reported.get(w).map_or(0, BTreeSet::len);
        if reported > *listed as usize {
            ev.silent_pods.push(SilentPods {
                workload: w.clone(),
                pods: reported - *listed as usize,
            });
        }
    }
    let unknown: Vec<(UnknownTarget, Option<&WorkloadRef>)> = inner
        .unscraped
        .iter()
        .filter_map(|id| inner.targets.get(id))
        .filter(|rec| possibly_matches(scope, &rec.target.labels))
        .map(|rec| {
            (
                UnknownTarget {
                    target: rec.target.id.clone(),
                    last_error: rec.health.last_error.clone(),
                },
                rec.target.workload.as_ref(),
            )
        })
        .collect();
    // With workloads known, a never-scraped pod matters only if it belongs to a workload
    // whose pods are in scope: a new pod of another workload in the same namespace cannot
    // hold this workload's state. Without in-scope workloads, every candidate counts.
    let observed = ev.workloads.len();
    let series_without_workload = observed == 0 && !resolved.ids.is_empty();
    let mut named: Vec<WorkloadRef> = Vec::new();
    for (u, workload) in unknown {
        match workload {
            Some(_) if series_without_workload => {
                ev.unknown_bystanders.push(u);
                continue;
            }
            // Left out of every rule: it keeps answers live when an unrelated pod fails for
            // good. A recommender pod unreachable since this process started whose workload has
            // no other pod carrying the series would be left out too; the memory reads it as
            // carrying its remembered series instead (docs/unknown-input.md).
            Some(w) if observed > 0 && !ev.workloads.contains(w) => continue,
            Some(w) if observed == 0 && !named.contains(w) => named.push(w.clone()),
            _ => {}
        }
        ev.unknown_targets.push(u);
    }
    if observed == 0 && !named.is_empty() {
        ev.workloads = named.into();
    }
    ev.silent_targets = silent_static(inner, resolved, scope).to_vec();
    debug_assert!(ev.observations.is_sorted_by(|a, b| {
        (&a.id.target, &a.id.series, &a.id.labels) < (&b.id.target, &b.id.series, &b.id.labels)
    }));
}
