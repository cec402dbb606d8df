//! `Reusing<P>`: a provider whose served answers are kept for the next request that asks the
//! same query, reused only while a fresh computation would give the same answer. Many HPAs
//! and adapter replicas ask the same question every 15 s; recomputing the evidence and the
//! rendering for each would dominate the serve path. Without this layer the provider answers
//! every request afresh (`Adapter::answer_computed`), which the bench and the differential
//! test compare it with.
//!
//! An entry is reused while all of these hold, so a reused answer is exactly the one the
//! rules would give now (tests/integration/differential.rs compares every served answer with a
//! fresh computation):
//! - its `Version` is unchanged: every series any rule of any metric reads in its scope, and
//!   the cluster's facts (`MetricsProvider::version`);
//! - every input it read keeps the freshness it had, on both clocks (`FreshWindow`);
//! - it is under `REUSE_MS` old, which bounds reuse over a Prometheus source, whose data the
//!   scrape store does not hold.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::bounded_lru::bounded_lru;

use hpa_bridge_rules::clock::{Clock, FreshWindow, Millis, Now};

use super::metric_query::{MetricQuery, Served};
use super::provider::{Answered, MetricsProvider, QueryError, Version};
use super::query_key::QueryKey;

pub const REUSE_MS: Millis = 1000;
/// Bounds the entries: keys are what authorised callers ask, a handful per HPA. Past it the
/// least recently used goes: an evicted answer is computed again, never served differently.
const MAX_ENTRIES: NonZeroUsize = NonZeroUsize::new(4096).unwrap();

pub struct Reusing<P> {
    inner: P,
    clock: Arc<dyn Clock>,
    /// Keys from authorised requests, bounded: a seeded fast hash will do.
    entries: Mutex<LruCache<QueryKey, Entry, foldhash::fast::RandomState>>,
}

impl<P: MetricsProvider> Reusing<P> {
    pub(super) fn new(inner: P, clock: Arc<dyn Clock>) -> Self {
        Reusing {
            inner,
            clock,
            entries: Mutex::new(bounded_lru(MAX_ENTRIES)),
        }
    }

    /// The provider without this layer.
    pub(super) fn inner(&self) -> &P {
        &self.inner
    }
}

impl<P: MetricsProvider> MetricsProvider for Reusing<P> {
    /// The kept answer while it is exact (above), else the inner provider's, kept.
    async fn answer(&self, query: &MetricQuery) -> Result<Answered, QueryError> {
        // Read before the version: a write after it moves the generation.
        let Some(generation) = self.inner.generation() else {
            return self.inner.answer(query).await;
        };
        let key = query.key();
        let now = self.clock.now();
        let young = self.young(&key, now);
        if let Some(e) = young.as_ref().filter(|e| e.generation == generation) {
            return Ok(e.reused(now));
        }
        let Some(version) = self.inner.version(query) else {
            return self.inner.answer(query).await;
        };
        if let Some(e) = young.filter(|e| e.version == version) {
            self.checked(&key, version, generation);
            return Ok(e.reused(now));
        }
        let answered = self.inner.answer(query).await?;
        let kept = answered.served.clone();
        self.keep(key, version, generation, now, answered.fresh, kept);
        Ok(answered)
    }

    fn version(&self, query: &MetricQuery) -> Option<Version> {
        self.inner.version(query)
    }

    fn generation(&self) -> Option<Version> {
        self.inner.generation()
    }

    fn metrics(&self) -> Vec<String> {
        self.inner.metrics()
    }
}

#[derive(Clone)]
struct Entry {
    version: Version,
    /// The store generation read before `version` was: while it has not moved, no write
    /// happened, so the version is still `version` without computing it.
    generation: Version,
    /// When it was computed, on the monotonic clock.
    at_ms: Millis,
    fresh: FreshWindow,
    served: Arc<Served>,
}

impl Entry {
    /// The kept answer, served again at `now`.
    fn reused(&self, now: Now) -> Answered {
        Answered {
            served: self.served.clone(),
            fresh: self.fresh,
            at: now,
        }
    }
}

impl<P> Reusing<P> {
    /// The entry for `key` that is still young and fresh at `now`, whatever its version.
    fn young(&self, key: &QueryKey, now: Now) -> Option<Entry> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|e| (0..REUSE_MS).contains(&(now.mono - e.at_ms)) && e.fresh.holds(now))
            .cloned()
    }

    /// `key`'s entry, still at `version`, was checked at `generation`.
    fn checked(&self, key: &QueryKey, version: Version, generation: Version) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.peek_mut(key).filter(|e| e.version == version) {
            e.generation = generation;
        }
    }

    fn keep(
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
    use hpa_bridge_rules::config::MetricKind;

    fn key(n: usize) -> QueryKey {
        QueryKey {
            metric: "m".into(),
            namespace: "default".into(),
            selector: format!("w={n}"),
            object: None,
        }
    }

    /// The layer's cache alone: no provider under it.
    fn reusing() -> Reusing<()> {
        Reusing {
            inner: (),
            clock: Arc::new(hpa_bridge_rules::clock::ManualClock::new(0)),
            entries: Mutex::new(bounded_lru(MAX_ENTRIES)),
        }
    }

    fn keep(reuse: &Reusing<()>, n: usize) {
        let version = Version {
            store: 0,
            cluster: 0,
        };
        let answer = hpa_bridge_rules::policy::source_unavailable("m", MetricKind::Target, "e");
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
        let reuse = reusing();
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
