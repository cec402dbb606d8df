//! The store's write half. As kube-runtime's reflector splits its store into one `Writer` and
//! cloneable readers, only the ingest holds a `StoreWriter`: discovery (target sets), the
//! scraper (pages) and the memory a predecessor wrote. Everything that answers or shows holds
//! the read half, an `Arc<Store>`, whose methods outside this crate only read. So the types
//! say what can move an answer: the engine, the API and the deletion-cost writer cannot.

use std::ops::Deref;
use std::sync::Arc;

use hpa_bridge_rules::clock::{Millis, Now};

use super::{Memory, Page, PageOutcome, ScrapeTarget, Store, TargetSetChange};

/// The write half of a store. Its clones write to the same store; `reader` gives the read half.
#[derive(Clone, Default)]
pub struct StoreWriter {
    store: Arc<Store>,
}

impl StoreWriter {
    pub fn new(store: Store) -> StoreWriter {
        StoreWriter {
            store: Arc::new(store),
        }
    }

    /// The read half: a handle on the same store that cannot write to it.
    pub fn reader(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// Replace the target set (`Store::set_targets`).
    pub fn set_targets(&self, targets: Vec<ScrapeTarget>) -> TargetSetChange {
        self.store.set_targets(targets)
    }

    /// Record a successful scrape of `target` (`Store::record_success`).
    pub fn record_success(
        &self,
        target: &ScrapeTarget,
        scraped_at: impl Into<Now>,
        duration_ms: u64,
        page: impl Into<Page>,
    ) -> PageOutcome {
        self.store
            .record_success(target, scraped_at, duration_ms, page)
    }

    /// Record a failed scrape of `target` (`Store::record_failure`).
    pub fn record_failure(
        &self,
        target: &ScrapeTarget,
        at: Millis,
        duration_ms: u64,
        error: String,
    ) {
        self.store.record_failure(target, at, duration_ms, error)
    }

    /// Give the store the memory a predecessor wrote (`Store::remember`).
    pub fn remember(&self, memory: Memory) -> usize {
        self.store.remember(memory)
    }

    /// Stop reading targets from the memory (`Store::forget_memory`).
    pub fn forget_memory(&self) -> usize {
        self.store.forget_memory()
    }
}

/// The writer reads too: the scraper schedules from the target set it fills.
impl Deref for StoreWriter {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}
