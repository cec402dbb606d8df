//! The store's index: for each series name and label value, the series that carry it, grouped
//! by target. An answer reads only the series its scope can name (its namespace and its
//! equality requirements), so its cost follows the series in scope, not the size of the
//! cluster, nor the size of one target that exports thousands of workloads' series.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::series_slots::{SlotId, SlotSet};
use super::{SeriesLabels, TargetId};
use hpa_bridge_rules::selector::Requirement;

/// The series of one name that carry one label value (or all of that name), by target.
#[derive(Debug, Default)]
struct Posting {
    series: usize,
    by_target: HashMap<TargetId, SlotSet>,
    /// The store generation of the last change to any series listed here (added, removed, or
    /// read differently by an answer), so a rendered answer can tell it is still current.
    changed: u64,
    /// The store generation of the last series added or removed here: the same argument as
    /// `changed`, for which series a scope holds rather than what they read.
    members: u64,
}

impl Posting {
    fn add(&mut self, target: &TargetId, slot: SlotId, stamp: u64) {
        self.changed = stamp;
        self.members = stamp;
        if self
            .by_target
            .entry(target.clone())
            .or_default()
            .insert(slot)
        {
            self.series += 1;
        }
    }

    /// Returns whether the posting became empty.
    fn remove(&mut self, target: &TargetId, slot: SlotId, stamp: u64) -> bool {
        self.changed = stamp;
        self.members = stamp;
        if let Some(set) = self.by_target.get_mut(target) {
            if set.remove(&slot) {
                self.series -= 1;
            }
            if set.is_empty() {
                self.by_target.remove(target);
            }
        }
        self.by_target.is_empty()
    }
}

#[derive(Debug, Default)]
pub(super) struct Postings {
    /// series name -> every series of that name.
    by_name: HashMap<String, Posting>,
    /// series name -> label name -> label value -> the series carrying it.
    by_label: HashMap<String, HashMap<String, HashMap<String, Posting>>>,
    /// The store generation at which a posting was last dropped: which posting a
    /// scope reads may change then.
    structure: u64,
    /// The store generation of the last series added or removed anywhere: while it stands,
    /// no scope's `Stamp::Members` can have moved (resolved_scope.rs checks this first).
    members_anywhere: u64,
}

/// Which change a scope's stamp follows (`Postings::newest`).
#[derive(Clone, Copy, Debug)]
pub(super) enum Stamp {
    /// Any change to what an answer reads (value, presence, retained value, target health,
    /// membership): unchanged means unchanged evidence, up to the passing of time.
    Changed,
    /// Series joining or leaving: unchanged means the scope holds the same series (slots,
    /// whose names and labels never change) as before.
    Members,
}

/// The series a query must read, by target.
pub(super) type Candidates<'a> = BTreeMap<&'a TargetId, Vec<SlotId>>;

impl Postings {
    pub(super) fn insert(
        &mut self,
        target: &TargetId,
        name: &str,
        labels: &SeriesLabels,
        slot: SlotId,
        stamp: u64,
    ) {
        self.members_anywhere = stamp;
        self.by_name
            .entry(name.to_string())
            .or_default()
            .add(target, slot, stamp);
        let by_key = self.by_label.entry(name.to_string()).or_default();
        for (k, v) in labels.iter() {
            by_key
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .add(target, slot, stamp);
        }
    }

    pub(super) fn remove(
        &mut self,
        target: &TargetId,
        name: &str,
        labels: &SeriesLabels,
        slot: SlotId,
        stamp: u64,
    ) {
        self.members_anywhere = stamp;
        if let Some(p) = self.by_name.get_mut(name) {
            if p.remove(target, slot, stamp) {
                self.by_name.remove(name);
                self.structure = stamp;
            }
        }
        let Some(by_key) = self.by_label.get_mut(name) else {
            return;
        };
        for (k, v) in labels.iter() {
            let Some(by_value) = by_key.get_mut(k) else {
                continue;
            };
            if by_value
                .get_mut(v)
                .is_some_and(|p| p.remove(target, slot, stamp))
            {
                by_value.remove(v);
                self.structure = stamp;
            }
            if by_value.is_empty() {
                by_key.remove(k);
            }
        }
        if by_key.is_empty() {
            self.by_label.remove(name);
        }
    }

    /// A listed series now reads differently (its value, presence or target health changed).
    /// The store generation of the last series added or removed anywhere.
    pub(super) fn members_anywhere(&self) -> u64 {
        self.members_anywhere
    }

    pub(super) fn touch(&mut self, name: &str, labels: &SeriesLabels, stamp: u64) {
        if let Some(p) = self.by_name.get_mut(name) {
            p.changed = stamp;
        }
        let Some(by_key) = self.by_label.get_mut(name) else {
            return;
        };
        for (k, v) in labels.iter() {
            if let Some(p) = by_key.get_mut(k).and_then(|m| m.get_mut(v)) {
                p.changed = stamp;
            }
        }
    }

    /// For series `name`, the postings of the scope's namespace and of each of its indexed
    /// equality requirements, a group each (for `in`, the postings of its values). Every in-scope series
    /// of that name is listed in every group.
    fn groups<'a: 's, 's>(
        &'a self,
        name: &str,
        namespace_label: &'s str,
        namespace: &'s str,
        requirements: &'s [Requirement],
    ) -> impl Iterator<Item = Vec<&'a Posting>> + 's {
        fn lookup<'a, 'v>(
            by_key: Option<&'a HashMap<String, HashMap<String, Posting>>>,
            key: &str,
            values: impl Iterator<Item = &'v str>,
        ) -> Vec<&'a Posting> {
            let by_value = by_key.and_then(|m| m.get(key));
            values.filter_map(|v| by_value?.get(v)).collect()
        }
        let by_key = self.by_label.get(name);
        std::iter::once(lookup(by_key, namespace_label, std::iter::once(namespace))).chain(
            requirements
                .iter()
                .filter(|r| r.indexed())
                .map(move |r| lookup(by_key, &r.key, r.values.iter().map(String::as_str))),
        )
    }

    /// The scope's newest `kind` stamp. An in-scope series is listed in every group
    /// (`groups`), and a change to it stamps every posting that lists it, all with one stamp
    /// larger than any before. So after such a change the smallest of the groups' newest
    /// stamps has grown; a change outside the scope may grow it too (a needless recomputation)
    /// but an unchanged value means no change of that kind in the scope. A posting created is
    /// stamped by the series that creates it, which the argument covers; a posting dropped
    /// takes its stamp with it, so a group's newest stamp could fall back to an older value,
    /// and the drop moves `structure` instead.
    pub(super) fn newest(
        &self,
        names: &[String],
        namespace_label: &str,
        namespace: &str,
        requirements: &[Requirement],
        kind: Stamp,
    ) -> u64 {
        let stamp = |p: &Posting| match kind {
            Stamp::Changed => p.changed,
            Stamp::Members => p.members,
        };
        names
            .iter()
            .map(|name| {
                self.groups(name, namespace_label, namespace, requirements)
                    .map(|group| group.iter().map(|p| stamp(p)).max().unwrap_or(0))
                    .min()
                    .unwrap_or(0)
            })
            .fold(self.structure, u64::max)
    }

    /// The series of `names` that carry the scope's namespace and satisfy each of its
    /// equality requirements (`=`, `in`), by target: exactly those, so the caller checks only
    /// the other requirements. Walks the smallest group's postings and keeps a series only if
    /// the other groups list it for the same target: membership in a small slot set instead
    /// of a label lookup per series, whose string comparisons miss the cache in a large store.
    pub(super) fn candidates<'a>(
        &'a self,
        names: &'a [String],
        namespace_label: &str,
        namespace: &str,
        requirements: &[Requirement],
    ) -> Candidates<'a> {
        let mut out: Candidates<'a> = BTreeMap::new();
        for name in names {
            let groups: Vec<Vec<&Posting>> = self
                .groups(name, namespace_label, namespace, requirements)
                .collect();
            let size = |g: &[&Posting]| g.iter().map(|p| p.series).sum::<usize>();
            let Some((smallest, _)) = groups.iter().enumerate().min_by_key(|(_, g)| size(g)) else {
                continue;
            };
            // The other groups' slot sets for one target, flat, with where each group ends.
            let mut sets: Vec<&SlotSet> = Vec::new();
            let mut ends: Vec<usize> = Vec::new();
            let mut kept: Vec<SlotId> = Vec::new();
            for posting in &groups[smallest] {
                'targets: for (target, slots) in &posting.by_target {
                    sets.clear();
                    ends.clear();
                    for (i, group) in groups.iter().enumerate() {
                        if i == smallest {
                            continue;
                        }
                        let before = sets.len();
                        sets.extend(group.iter().filter_map(|p| p.by_target.get(target)));
                        if sets.len() == before {
                            continue 'targets;
                        }
                        ends.push(sets.len());
                    }
                    let listed = |slot: &SlotId| {
                        let mut start = 0;
                        ends.iter().all(|&end| {
                            let hit = sets[start..end].iter().any(|set| set.contains(slot));
                            start = end;
                            hit
                        })
                    };
                    kept.clear();
                    kept.extend(slots.iter().copied().filter(listed));
                    if !kept.is_empty() {
                        out.entry(target).or_default().extend_from_slice(&kept);
                    }
                }
            }
        }
        out
    }

    /// Distinct values of `label` over the series named in `names`.
    pub(super) fn label_values(&self, names: &[String], label: &str) -> BTreeSet<String> {
        names
            .iter()
            .filter_map(|n| self.by_label.get(n))
            .filter_map(|by_key| by_key.get(label))
            .flat_map(|by_value| by_value.keys().cloned())
            .collect()
    }

    /// Series entries held, for tests of the index's upkeep.
    #[cfg(test)]
    pub(super) fn entries(&self) -> usize {
        self.by_name.values().map(|p| p.series).sum::<usize>()
            + self
                .by_label
                .values()
                .flat_map(|k| k.values())
                .flat_map(|v| v.values())
                .map(|p| p.series)
                .sum::<usize>()
    }
}
