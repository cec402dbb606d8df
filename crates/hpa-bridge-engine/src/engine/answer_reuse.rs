//! Served answers kept for the next request that asks the same query, reused only while a
//! fresh computation would give the same answer. Many HPAs and adapter replicas ask the same
//! question every 15 s; recomputing the evidence and the rendering for each would dominate
//! the serve path.
//!
//! An entry is reused while all of these hold, so a reused answer is exactly the one the
//! rules would give now (tests/integration/differential.rs compares every served answer with a
//! fresh computation):
//! - its `Version` is unchanged: every series any rule of any metric reads in its scope, and
//!   the cluster's facts (`Engine::version`);
//! - every input it read keeps the freshness it had, on both clocks (`FreshWindow`);
//! - it is under `REUSE_MS` old, which bounds reuse over a Prometheus source, whose data the
//!   scrape store does not hold.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::bounded_lru::bounded_lru;

use crate::clock::{FreshWindow, Millis, Now};

use super::metric_query::Served;
use super::query_key::QueryKey;

pub const REUSE_MS: Millis = 1000;
/// Bounds the entries: keys are what authorised callers ask, a handful per HPA. Past it the
/// least recently used goes: an evicted answer is computed again, never served differently.
const MAX_ENTRIES: NonZeroUsize = NonZeroUsize::new(4096).unwrap();

/// What a reused answer depends on besides its scope's series: every write to the store (a
/// shortcut: while none happened, nothing changed) and the cluster's facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Version {
    pub(super) store: u64,
    pub(super) cluster: u64,
}

pub(super) struct AnswerReuse {
    /// Keys from authorised requests, bounded: a seeded fast hash will do.
    entries: Mutex<LruCache<QueryKey, Entry, foldhash::fast::RandomState>>,
}

impl Default for AnswerReuse {
    fn default() -> Self {
        AnswerReuse {
            entries: Mutex::new(bounded_lru(MAX_ENTRIES)),
        }
    }
}

#[derive(Clone)]
pub(super) struct Entry {
    pub(super) version: Version,
    /// The store generation read before `version` was: while it has not moved, no write
    /// happened, so the version is still `version` without computing it.
    pub(super) generation: Version,
    /// When it was computed, on the monotonic clock.
    at_ms: Millis,
    fresh: FreshWindow,
    pub(super) served: Arc<Served>,
}

impl AnswerReuse {
    /// The entry for `key` that is still young and fresh at `now`, whatever its version.
    pub(super) fn young(&self, key: &QueryKey, now: Now) -> Option<Entry> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|e| (0..REUSE_MS).contains(&(now.mono - e.at_ms)) && e.fresh.holds(now))
            .cloned()
    }

    /// `key`'s entry, still at `version`, was checked at `generation`.
    pub(super) fn checked(&self, key: &QueryKey, version: Version, generation: Version) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.peek_mut(key).filter(|e| e.version == version) {
            e.generation = generation;
        }
    }

    pub(super) fn keep(
        &self,
        key: QueryKey,
        version: Version,
        generation: Version,
        computed_at: Now,
        fresh: FreshWindow,
        served: Arc<Served>,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.put(
            key,
            Entry {
                version,
                generation,
                at_ms: computed_at.mono,
                fresh,
                served,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MetricKind;

    fn key(n: usize) -> QueryKey {
        QueryKey {
            metric: "m".into(),
            namespace: "default".into(),
            selector: format!("w={n}"),
            object: None,
        }
    }

    fn keep(reuse: &AnswerReuse, n: usize) {
        let version = Version {
            store: 0,
            cluster: 0,
        };
        let answer = crate::policy::source_unavailable("m", MetricKind::Target, "e");
        reuse.keep(
            key(n),
            version,
            version,
            Now::from(0),
            FreshWindow::default(),
            Arc::new(Served::new(answer, 15, None)),
        );
    }

    #[test]
    fn a_full_cache_forgets_the_least_recently_asked_answer() {
        let reuse = AnswerReuse::default();
        let now = Now::from(1);
        for n in 0..MAX_ENTRIES.get() {
            keep(&reuse, n);
        }
        assert!(reuse.young(&key(0), now).is_some());
        keep(&reuse, MAX_ENTRIES.get());
        assert!(
            reuse.young(&key(0), now).is_some(),
            "the answer just asked stays"
        );
        assert!(reuse.young(&key(1), now).is_none(), "the least recent goes");
        assert!(reuse.young(&key(MAX_ENTRIES.get()), now).is_some());
    }
}
