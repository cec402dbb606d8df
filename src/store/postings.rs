//! The store's index: for each series name, which targets hold a series with a given label
//! value. An answer reads only the targets its scope can name (its namespace and its equality
//! requirements), so its cost follows the series in scope, not the size of the cluster.
//!
//! Counts, not sets: a target holds many series with the same label (every series of a pod
//! carries its `namespace`), and the entry goes only when the last of them does.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::TargetId;
use crate::selector::Operator;

type Holders = HashMap<TargetId, u32>;

#[derive(Debug, Default)]
pub(super) struct Postings {
    /// series name -> targets holding any series of that name.
    by_name: HashMap<String, Holders>,
    /// series name -> label name -> label value -> targets holding such a series.
    by_label: HashMap<String, HashMap<String, HashMap<String, Holders>>>,
}

fn add(holders: &mut Holders, target: &TargetId) {
    *holders.entry(target.clone()).or_insert(0) += 1;
}

/// Returns whether `holders` became empty.
fn remove(holders: &mut Holders, target: &TargetId) -> bool {
    if let Some(n) = holders.get_mut(target) {
        *n -= 1;
        if *n == 0 {
            holders.remove(target);
        }
    }
    holders.is_empty()
}

/// One requirement's candidate targets: the union of the postings of its values.
struct Candidates<'a> {
    lists: Vec<&'a Holders>,
}

impl Candidates<'_> {
    fn len(&self) -> usize {
        self.lists.iter().map(|h| h.len()).sum()
    }
}

impl Postings {
    pub(super) fn insert(
        &mut self,
        target: &TargetId,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) {
        add(self.by_name.entry(name.to_string()).or_default(), target);
        let by_key = self.by_label.entry(name.to_string()).or_default();
        for (k, v) in labels {
            let by_value = by_key.entry(k.clone()).or_default();
            add(by_value.entry(v.clone()).or_default(), target);
        }
    }

    pub(super) fn remove(
        &mut self,
        target: &TargetId,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) {
        if let Some(h) = self.by_name.get_mut(name) {
            if remove(h, target) {
                self.by_name.remove(name);
            }
        }
        let Some(by_key) = self.by_label.get_mut(name) else {
            return;
        };
        for (k, v) in labels {
            let Some(by_value) = by_key.get_mut(k) else {
                continue;
            };
            if let Some(h) = by_value.get_mut(v) {
                if remove(h, target) {
                    by_value.remove(v);
                }
            }
            if by_value.is_empty() {
                by_key.remove(k);
            }
        }
        if by_key.is_empty() {
            self.by_label.remove(name);
        }
    }

    /// Targets that may hold a series of `name` whose `namespace_label` is `namespace` and
    /// whose labels satisfy every equality requirement: the smallest of those posting lists.
    /// A superset of the matching targets; the caller still checks each series.
    pub(super) fn candidates<'a>(
        &'a self,
        names: &[String],
        namespace_label: &str,
        namespace: &str,
        requirements: &[crate::selector::Requirement],
    ) -> BTreeSet<&'a TargetId> {
        let mut out = BTreeSet::new();
        for name in names {
            let Some(all) = self.by_name.get(name) else {
                continue;
            };
            let by_key = self.by_label.get(name);
            let values = |key: &str, vals: &mut dyn Iterator<Item = &str>| -> Candidates<'a> {
                let lists = by_key
                    .and_then(|m| m.get(key))
                    .map(|by_value| vals.filter_map(|v| by_value.get(v)).collect())
                    .unwrap_or_default();
                Candidates { lists }
            };
            let mut best = Candidates { lists: vec![all] };
            let mut consider = |c: Candidates<'a>| {
                if c.len() < best.len() {
                    best = c;
                }
            };
            consider(values(namespace_label, &mut std::iter::once(namespace)));
            for r in requirements {
                if matches!(r.operator, Operator::Equals | Operator::In) {
                    consider(values(&r.key, &mut r.values.iter().map(String::as_str)));
                }
            }
            for holders in best.lists {
                out.extend(holders.keys());
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

    /// Entries held, for measuring the index's size.
    #[cfg(test)]
    pub(super) fn entries(&self) -> usize {
        self.by_name.values().map(|h| h.len()).sum::<usize>()
            + self
                .by_label
                .values()
                .flat_map(|k| k.values())
                .flat_map(|v| v.values())
                .map(|h| h.len())
                .sum::<usize>()
    }
}
