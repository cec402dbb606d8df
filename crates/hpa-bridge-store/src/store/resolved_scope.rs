//! Which series a scope holds, worked out once and kept while the scope's membership stands.
//!
//! In a live cluster every scrape rewrites values, but a scope gains or loses series only when a
//! pod comes or goes or an exporter changes its label sets. Resolving a scope (intersecting its
//! postings, checking its other requirements, ordering the result) costs more than reading its
//! series over a large store, so it is done again only when `Postings::newest(.., Stamp::Members)`
//! says the scope's series changed. The values are always read fresh from the slots: this keeps
//! which series to read, never what they said.

use lru::LruCache;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use super::family_digest::{Families, TargetCell};
use super::label_index::LabelIndex;
use super::series_slots::SlotId;
use super::{SeriesId, WorkloadRef};
use hpa_bridge_rules::evidence::ScopeKey;

/// The series of one scope, by target in target order, each target's in rank order.
#[derive(Debug)]
pub(super) struct ResolvedScope {
    /// `Postings::newest(.., Stamp::Members)` when this was worked out (never-scraped targets
    /// are read fresh on every answer, so they need no stamp here).
    pub(super) membership: u64,
    /// `Postings::members_anywhere` when `membership` was last found current: while no series
    /// is added or removed anywhere, the scope's membership needs no recomputing (a steady
    /// cluster rescrapes hundreds of targets a second but adds or drops series only as pods
    /// come and go).
    pub(super) confirmed: AtomicU64,
    pub(super) targets: Vec<ResolvedTarget>,
    /// Who each of those series is, in the same order (so by target, then name, then labels,
    /// each series once: `SeriesRef::follows` relies on it), shared by the observations of
    /// every answer over the scope (evidence/series_id.rs).
    pub(super) ids: Arc<[SeriesId]>,
    /// The targets' workloads, each once, in target order (a target that changes workload
    /// is a new target, and loses its series first).
    pub(super) workloads: Arc<[WorkloadRef]>,
    /// How many of `targets` belong to each of `workloads`, in the same order.
    pub(super) pods_listed: Box<[u32]>,
    /// Where each value of one label sits among `ids`, for reads narrowed by that label;
    /// built by the first such read.
    pub(super) by_label: OnceLock<LabelIndex>,
    /// Where each of `workloads` sits, for reads that keep one workload's silent pods (a
    /// namespace-wide scope may list hundreds); built by the first such read.
    pub(super) workload_at: OnceLock<HashMap<WorkloadRef, usize, foldhash::fast::RandomState>>,
    /// The store's `static_changed` when this scope was last found to have no silent static
    /// target (read.rs), so the common case costs one atomic load per read.
    pub(super) no_silent_static_at: AtomicU64,
    /// The silent static targets found, at that `static_changed`, when there are some.
    pub(super) silent_static: Mutex<Option<(u64, Arc<[hpa_bridge_rules::evidence::TargetId]>)>>,
}

impl ResolvedScope {
    /// The index of `label` over this scope's series: the kept one, built now if this is the
    /// first read narrowed by a label; built for this read alone if the kept one is of
    /// another label (every narrowed read names the same one, so that is not expected).
    pub(super) fn label_index(&self, label: &str) -> std::borrow::Cow<'_, LabelIndex> {
        let build = || LabelIndex::build(label, &self.ids, self.targets.iter().map(|t| &*t.slots));
        let kept = self.by_label.get_or_init(build);
        if kept.label() == label {
            std::borrow::Cow::Borrowed(kept)
        } else {
            std::borrow::Cow::Owned(build())
        }
    }

    /// Where `w` sits in `workloads`, if there.
    pub(super) fn workload_position(&self, w: &WorkloadRef) -> Option<usize> {
        self.workload_at
            .get_or_init(|| self.workloads.iter().cloned().zip(0..).collect())
            .get(w)
            .copied()
    }
}

/// A target with series in the scope, held by what an answer reads of it (whether it is failing,
/// and its family digests: family_digest.rs) rather than by name, because looking each up in the
/// store's ordered map would compare URL strings on every answer. Safe to hold: a target replaced
/// or removed loses its series first, which changes the membership of every scope that listed it.
#[derive(Debug)]
pub(super) struct ResolvedTarget {
    pub(super) cell: Arc<TargetCell>,
    pub(super) slots: Box<[SlotId]>,
    /// The families `slots` are, when they are whole families: only then does a family's
    /// digest describe exactly the in-scope series.
    pub(super) families: Families,
}

/// Scopes kept at most; past this the least recently asked goes. HPAs ask about a fixed set of
/// scopes, so a cluster that needs more than this many is rare, and a client that invents
/// scopes costs no more than a resolution per request, as if nothing were kept.
pub(super) const MAX_RESOLVED_SCOPES: usize = 4096;

/// Series held over all kept resolutions at most (each an identity and a slot).
/// Scopes are bounded in number above, but one scope may name a whole namespace, so a client
/// allowed to query could otherwise make thousands of namespace-wide resolutions stay.
pub(super) const MAX_RESOLVED_SERIES: usize = 1_000_000;

#[derive(Debug, Default)]
pub(super) struct ResolvedScopes {
    map: Mutex<Kept>,
}

#[derive(Debug)]
struct Kept {
    /// Scopes of authorised requests and the config, bounded (`MAX_RESOLVED_SCOPES`,
    /// `MAX_RESOLVED_SERIES`): a seeded fast hash will do.
    scopes: LruCache<ScopeKey, Arc<ResolvedScope>, foldhash::fast::RandomState>,
    /// Series over all of `scopes`.
    series: usize,
}

impl Default for Kept {
    fn default() -> Self {
        // The bounds are kept by `put`, which counts series as it evicts.
        Kept {
            scopes: LruCache::unbounded_with_hasher(Default::default()),
            series: 0,
        }
    }
}

impl ResolvedScopes {
    /// The kept resolution of `key`, whatever membership it was worked out at.
    pub(super) fn get(&self, key: &ScopeKey) -> Option<Arc<ResolvedScope>> {
        let mut kept = self.map.lock().unwrap_or_else(|e| e.into_inner());
        kept.scopes.get(key).cloned()
    }

    /// Keep `resolved`, unless it alone is over the series budget; past either bound the
    /// least recently asked scopes go until it fits.
    pub(super) fn put(&self, key: ScopeKey, resolved: Arc<ResolvedScope>) {
        let size = resolved.ids.len();
        let mut kept = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = kept.scopes.pop(&key) {
            kept.series -= old.ids.len();
        }
        if size > MAX_RESOLVED_SERIES {
            return;
        }
        while kept.scopes.len() >= MAX_RESOLVED_SCOPES || kept.series + size > MAX_RESOLVED_SERIES {
            let Some((_, old)) = kept.scopes.pop_lru() else {
                break;
            };
            kept.series -= old.ids.len();
        }
        kept.series += size;
        kept.scopes.push(key, resolved);
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .scopes
            .len()
    }

    #[cfg(test)]
    fn series(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).series
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_bridge_rules::evidence::{SeriesLabels, TargetId};

    fn key(selector: &str) -> ScopeKey {
        ScopeKey::of(&["s".into()], "namespace", "default", selector)
    }

    fn resolved(series: usize) -> Arc<ResolvedScope> {
        let id = SeriesId {
            target: TargetId("http://a/m".into()),
            series: "s".into(),
            labels: SeriesLabels::default(),
        };
        Arc::new(ResolvedScope {
            membership: 1,
            confirmed: AtomicU64::new(1),
            targets: Vec::new(),
            ids: vec![id; series].into(),
            workloads: Arc::from([]),
            pods_listed: Box::new([]),
            by_label: OnceLock::new(),
            workload_at: OnceLock::new(),
            no_silent_static_at: AtomicU64::new(u64::MAX),
            silent_static: Mutex::new(None),
        })
    }

    #[test]
    fn kept_resolutions_stay_within_the_scope_and_series_bounds() {
        let kept = ResolvedScopes::default();
        for i in 0..MAX_RESOLVED_SCOPES + 10 {
            kept.put(key(&format!("app=a{i}")), resolved(1));
        }
        assert!(kept.len() <= MAX_RESOLVED_SCOPES);
        assert_eq!(kept.series(), kept.len());
        // Replacing a scope's resolution counts it once.
        kept.put(key("app=a0"), resolved(3));
        kept.put(key("app=a0"), resolved(2));
        assert_eq!(kept.series(), kept.len() + 1);
        // A scope over the whole budget is not kept; two halves and a bit start over.
        kept.put(key("big"), resolved(1));
        kept.put(key("big"), resolved(MAX_RESOLVED_SERIES + 1));
        assert!(kept.get(&key("big")).is_none());
        kept.put(key("half-1"), resolved(MAX_RESOLVED_SERIES / 2));
        kept.put(key("half-2"), resolved(MAX_RESOLVED_SERIES / 2));
        kept.put(key("more"), resolved(1));
        assert!(kept.series() <= MAX_RESOLVED_SERIES);
        assert!(kept.get(&key("more")).is_some());
    }

    #[test]
    fn a_full_cache_forgets_the_least_recently_asked_scopes() {
        let kept = ResolvedScopes::default();
        for i in 0..MAX_RESOLVED_SCOPES {
            kept.put(key(&format!("app=a{i}")), resolved(1));
        }
        assert!(kept.get(&key("app=a0")).is_some());
        kept.put(key("new"), resolved(1));
        assert_eq!(kept.len(), MAX_RESOLVED_SCOPES);
        assert!(
            kept.get(&key("app=a0")).is_some(),
            "the scope just asked stays"
        );
        assert!(kept.get(&key("app=a1")).is_none(), "the least recent goes");
        // Past the series budget, as many of the least recent go as make room, no more.
        kept.put(key("app=a0"), resolved(MAX_RESOLVED_SERIES / 2));
        kept.put(key("big"), resolved(MAX_RESOLVED_SERIES / 2));
        assert!(kept.get(&key("app=a0")).is_some());
        assert!(kept.get(&key("app=a2")).is_none());
        assert_eq!(kept.series(), MAX_RESOLVED_SERIES);
        assert_eq!(kept.len(), 2);
        // "app=a0" was just asked, so "big" is the least recent now.
        kept.put(key("small"), resolved(1));
        assert!(kept.get(&key("big")).is_none(), "the least recent goes");
        assert!(kept.get(&key("app=a0")).is_some());
        assert_eq!(kept.series(), MAX_RESOLVED_SERIES / 2 + 1);
    }
}
