//! Which series a scope holds, worked out once and kept while the scope's membership stands.
//!
//! In a live cluster every scrape rewrites values, but a scope gains or loses series only when
//! a pod comes or goes or an exporter changes its label sets. Resolving a scope (intersecting
//! its postings, checking its other requirements, ordering the result) was most of an answer's
//! cost over a large store (BENCHMARKS.md, "Answer path, third pass"), so it is done again
//! only when `Postings::membership` says the scope's series changed. The values are always
//! read fresh from the slots: this keeps which series to read, never what they said.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use super::series_slots::SlotId;
use super::{ScrapeTarget, SeriesId};

/// The series of one scope, by target in target order, each target's in rank order.
#[derive(Debug)]
pub(super) struct ResolvedScope {
    /// `Postings::membership` (with the unscraped set's stamp) when this was worked out.
    pub(super) membership: u64,
    pub(super) targets: Vec<ResolvedTarget>,
    /// Who each of those series is, in the same order, shared by the observations of every
    /// answer over the scope (series_id.rs).
    pub(super) ids: Arc<[SeriesId]>,
}

/// A target with series in the scope, held directly: looking each up by name in the store's
/// ordered map compared URL strings on every answer. Safe to hold: a target replaced or removed
/// loses its series first, which changes the membership of every scope that listed it.
#[derive(Debug)]
pub(super) struct ResolvedTarget {
    pub(super) target: Arc<ScrapeTarget>,
    pub(super) failing: Arc<AtomicBool>,
    pub(super) slots: Box<[SlotId]>,
}

/// A scope as a cache key: series names, namespace label, namespace and selector text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct ScopeKey {
    pub(super) series: Vec<String>,
    pub(super) namespace_label: String,
    pub(super) namespace: String,
    pub(super) selector: String,
}

/// Scopes kept at most; past this the cache starts over. HPAs ask about a fixed set of scopes,
/// so a cluster that needs more than this many is rare, and a client that invents scopes costs
/// a resolution per request, which is what every request cost before this cache.
pub(super) const MAX_RESOLVED_SCOPES: usize = 4096;

#[derive(Debug, Default)]
pub(super) struct ResolvedScopes {
    map: Mutex<HashMap<ScopeKey, Arc<ResolvedScope>>>,
}

impl ResolvedScopes {
    /// The resolution of `key` if it was worked out at `membership`.
    pub(super) fn get(&self, key: &ScopeKey, membership: u64) -> Option<Arc<ResolvedScope>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key).filter(|r| r.membership == membership).cloned()
    }

    pub(super) fn put(&self, key: ScopeKey, resolved: Arc<ResolvedScope>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_RESOLVED_SCOPES && !map.contains_key(&key) {
            map.clear();
        }
        map.insert(key, resolved);
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
