//! The store's index: for each series name and label value, the series that carry it, grouped
//! by target. An answer reads only the series its scope can name (its namespace and its
//! equality requirements), so its cost follows the series in scope, not the size of the
//! cluster, nor the size of one target that exports thousands of workloads' series.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::series_slots::SlotId;
use super::{SeriesLabels, TargetId};
use crate::selector::{Operator, Requirement};

/// The series of one name that carry one label value (or all of that name), by target.
#[derive(Debug, Default)]
struct Posting {
    series: usize,
    by_target: HashMap<TargetId, HashSet<SlotId>>,
}

impl Posting {
    fn add(&mut self, target: &TargetId, slot: SlotId) {
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
    fn remove(&mut self, target: &TargetId, slot: SlotId) -> bool {
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
    ) {
        self.by_name
            .entry(name.to_string())
            .or_default()
            .add(target, slot);
        let by_key = self.by_label.entry(name.to_string()).or_default();
        for (k, v) in labels.iter() {
            by_key
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .add(target, slot);
        }
    }

    pub(super) fn remove(
        &mut self,
        target: &TargetId,
        name: &str,
        labels: &SeriesLabels,
        slot: SlotId,
    ) {
        if let Some(p) = self.by_name.get_mut(name) {
            if p.remove(target, slot) {
                self.by_name.remove(name);
            }
        }
        let Some(by_key) = self.by_label.get_mut(name) else {
            return;
        };
        for (k, v) in labels.iter() {
            let Some(by_value) = by_key.get_mut(k) else {
                continue;
            };
            if by_value.get_mut(v).is_some_and(|p| p.remove(target, slot)) {
                by_value.remove(v);
            }
            if by_value.is_empty() {
                by_key.remove(k);
            }
        }
        if by_key.is_empty() {
            self.by_label.remove(name);
        }
    }

    /// The series that may be in scope: per name, the smallest of the postings for the
    /// namespace and for each equality requirement (an `in` requirement is the union of its
    /// values). A superset of the matching series; the caller still checks each one.
    pub(super) fn candidates<'a>(
        &'a self,
        names: &'a [String],
        namespace_label: &str,
        namespace: &str,
        requirements: &[Requirement],
    ) -> Candidates<'a> {
        let mut out: Candidates<'a> = BTreeMap::new();
        for name in names {
            let Some(all) = self.by_name.get(name) else {
                continue;
            };
            let by_key = self.by_label.get(name);
            let values = |key: &str, vals: &mut dyn Iterator<Item = &str>| -> Vec<&'a Posting> {
                by_key
                    .and_then(|m| m.get(key))
                    .map(|by_value| vals.filter_map(|v| by_value.get(v)).collect())
                    .unwrap_or_default()
            };
            let size = |lists: &[&Posting]| lists.iter().map(|p| p.series).sum::<usize>();
            let mut best: Vec<&'a Posting> = vec![all];
            let mut consider = |lists: Vec<&'a Posting>| {
                if size(&lists) < size(&best) {
                    best = lists;
                }
            };
            consider(values(namespace_label, &mut std::iter::once(namespace)));
            for r in requirements {
                if matches!(r.operator, Operator::Equals | Operator::In) {
                    consider(values(&r.key, &mut r.values.iter().map(String::as_str)));
                }
            }
            for posting in best {
                for (target, series) in &posting.by_target {
                    out.entry(target)
                        .or_default()
                        .extend(series.iter().copied());
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
