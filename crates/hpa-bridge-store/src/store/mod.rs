//! The latest samples per target and series, scrape health, and the last valid value of every
//! series (which is what the stateful floor retains while a target fails).
//!
//! The store holds no policy: it answers "which evidence is in scope for this query" and leaves
//! the decision to `policy`.

mod family_digest;
mod ingest;
mod label_index;
mod memory;
mod postings;
mod read;
mod resolved_scope;
mod series_slots;
mod writer;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use serde::Serialize;

use family_digest::TargetCell;
use hpa_bridge_exposition::json_page::JsonExtraction;
use hpa_bridge_exposition::Unusable;
use hpa_bridge_rules::clock::Millis;
pub use hpa_bridge_rules::cluster::WorkloadRef;
/// A scrape target's identity is the one its evidence names.
pub use hpa_bridge_rules::evidence::TargetId;
use hpa_bridge_rules::evidence::{ByLabels, SeriesId, SeriesLabels};
pub use hpa_bridge_rules::evidence::{Read, Scope, ScopeKey, Summarize};
use ingest::ClockSkew;
pub use ingest::{merge_labels, Page, PageOutcome, TargetSetChange, MAX_RETAINED_ABSENT_SERIES};
pub use memory::{fingerprint, Memory, RememberedSeries, RememberedTarget};
use postings::Postings;
use resolved_scope::ResolvedScopes;
use series_slots::{SeriesSlots, SlotId};
pub use writer::StoreWriter;

/// Something to scrape, and the labels attached to every sample it yields.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScrapeTarget {
    pub id: TargetId,
    #[serde(serialize_with = "serialize_redacted_url")]
    pub url: String,
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadRef>,
    /// How its pages are read: exposition text unless a `json:` block says otherwise.
    #[serde(skip_serializing_if = "PageFormat::is_exposition")]
    pub format: PageFormat,
}

/// How a target's pages are read.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum PageFormat {
    #[default]
    Exposition,
    /// A JSON status document, read as its block says.
    Json(Arc<JsonExtraction>),
    /// The target asks for a JSON block that cannot be used (a pod's annotation names one
    /// `jsonConfigs` does not hold): each scrape fails with this text, so the target counts
    /// as unknown rather than read the wrong way.
    UnusableJsonConfig(Arc<str>),
}

impl PageFormat {
    fn is_exposition(&self) -> bool {
        matches!(self, PageFormat::Exposition)
    }
}

impl Serialize for PageFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PageFormat::Exposition => s.serialize_str("exposition"),
            PageFormat::Json(x) => s.serialize_str(&format!("json ({})", x.name)),
            PageFormat::UnusableJsonConfig(why) => s.serialize_str(&format!("json ({why})")),
        }
    }
}

fn serialize_redacted_url<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hpa_bridge_rules::redaction::redact_url(url))
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetHealth {
    pub last_attempt_ms: Option<Millis>,
    pub last_success_ms: Option<Millis>,
    pub last_error: Option<String>,
    pub last_duration_ms: Option<u64>,
    pub consecutive_failures: u32,
    /// What the producer last said of its value (a JSON source's `reason`), if it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer_reason: Option<Arc<str>>,
}

impl TargetHealth {
    pub fn ever_succeeded(&self) -> bool {
        self.last_success_ms.is_some()
    }
}

/// Laid out for the answer path: what an answer reads of each in-scope series (the value, its
/// time, the retained value and two flags) comes first, and each state starts a cache line,
/// so reading one series misses the cache once, not twice.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
struct SeriesState {
    latest: f64,
    latest_at: Millis,
    last_valid: Option<(u64, Millis)>,
    /// When this process scraped `latest`, on the monotonic clock, unless the page gave the
    /// sample a time of its own (`Observation::scraped_mono_ms`).
    latest_mono: Option<Millis>,
    /// False once a successful scrape no longer contained the series: the exporter dropped it.
    present: bool,
    /// Why the last successful page's sample cannot be used whatever its value (held twice,
    /// from the future, ...): it reads as invalid until a page holds it usably.
    unusable: Option<Unusable>,
    /// The producer said its page holds only until then (a JSON source's `validUntil`): past
    /// it the series reads as stale, however recently it was scraped.
    valid_until: Option<Millis>,
    /// Position among its target's series in (name, labels) order, kept up to date on every
    /// insertion, so an answer orders its inputs without comparing label sets.
    rank: u32,
    name: Arc<str>,
    labels: SeriesLabels,
    /// `last_valid` before the current page, restored if the page turns out to hold the series
    /// twice.
    last_valid_before_page: Option<(u64, Millis)>,
    /// What a later sample's own time must not be below (else it is out of order): the held
    /// sample's time as its producer gave it, unclamped, so that a step of this process's wall
    /// clock does not put an exporter's next sample out of order; the scrape's time when the
    /// held sample had no usable time of its own.
    order_at: Millis,
    /// The held sample's value as its page gave it: a later sample at `order_at` with
    /// other bits is a duplicate sample, as Prometheus compares them.
    held_bits: u64,
}

#[derive(Debug)]
struct TargetRecord {
    target: Arc<ScrapeTarget>,
    health: TargetHealth,
    /// Whether `health` holds an error, and how each family of `series` reads, shared with
    /// the resolved scopes that list this target (resolved_scope.rs), so an answer need not
    /// look the target up by name. Written only under the store's write lock, so it is
    /// steady while an answer holds the read lock.
    cell: Arc<TargetCell>,
    /// By series name, then labels: where a scraped sample's series lives. Answers reach the
    /// slots through the postings instead.
    series: HashMap<Arc<str>, HashMap<SeriesLabels, SlotId, ByLabels>>,
}

/// What of a series an answer reads, apart from the passing of time: its value, whether it
/// is exported, whether its page held it twice, and its retained value.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Reading {
    value_bits: u64,
    present: bool,
    unusable: Option<Unusable>,
    valid_until: Option<Millis>,
    last_valid: Option<u64>,
}

impl SeriesState {
    /// Whether time can turn its reading stale: not once it is out of order, which the rules
    /// read as unknown whatever its age (policy/observation.rs).
    fn can_go_stale(&self) -> bool {
        !self.unusable.is_some_and(Unusable::keeps_held_time)
    }

    fn reading(&self) -> Reading {
        Reading {
            value_bits: self.latest.to_bits(),
            present: self.present,
            unusable: self.unusable,
            valid_until: self.valid_until,
            last_valid: self.last_valid.map(|(v, _)| v),
        }
    }
}

/// Outside this crate a `Store` only reads: writes go through its `StoreWriter` (writer.rs).
#[derive(Debug, Default)]
pub struct Store {
    inner: RwLock<Inner>,
    /// Bumped on every change, so callers can tell that an answer computed earlier may differ.
    generation: std::sync::atomic::AtomicU64,
    /// Bumped when the target set is replaced, so the scrape schedule is rebuilt only then.
    target_set: std::sync::atomic::AtomicU64,
    /// Held by `set_targets` from comparing to applying, so the difference it finds under the
    /// read lock is still the difference when it writes (ingest.rs).
    replacing: std::sync::Mutex<()>,
    /// Each asked-about scope's series, while its membership stands (resolved_scope.rs).
    resolved: ResolvedScopes,
    clock_skew: ClockSkew,
    /// `scrape.staleAfter`: a series whose value was older than this before a page may have
    /// read as stale, so the page that refreshes it changes answers even with the same value.
    stale_after_ms: Millis,
    /// The memory a predecessor wrote, while targets may still be read from it (memory.rs).
    /// Taken after `inner`'s write lock, never before it.
    memory: std::sync::Mutex<Option<Memory>>,
    /// How many targets were read from it.
    memory_read: std::sync::atomic::AtomicUsize,
}

#[derive(Debug, Default)]
struct Inner {
    targets: BTreeMap<TargetId, TargetRecord>,
    slots: SeriesSlots,
    /// Which targets hold which series, so an answer reads only its scope (postings.rs).
    postings: Postings,
    /// Targets never scraped successfully: nobody knows what they export, so every query
    /// they could belong to must hear of them. Few in a steady cluster, so a query scans them.
    unscraped: BTreeSet<TargetId>,
    /// Per workload, its pods that have had a page: a pod in this set that has no series in
    /// a floor's scope exported no index at all, and is as unknown as one never scraped.
    reported: BTreeMap<WorkloadRef, BTreeSet<TargetId>>,
    /// The targets of no workload that have had a page: one whose own labels put it in a
    /// scope and that holds no series there never reported them.
    static_reported: BTreeSet<TargetId>,
    /// The generation of the last change to `static_reported`.
    static_changed: u64,
    /// The generation of the last change to `unscraped` or to one of its targets' errors:
    /// every scope may read them.
    unscraped_changed: u64,
}

impl Store {
    pub fn new() -> Self {
        Store::default()
    }

    /// A store that trusts producers' timestamps up to `max_ms` in the future.
    pub fn with_max_clock_skew(max_ms: Millis) -> Self {
        Store {
            clock_skew: ClockSkew(max_ms),
            ..Store::default()
        }
    }

    /// The age past which answers read a series as stale (`scrape.staleAfter`). Without it
    /// every page that arrives after any time has passed counts as a change.
    pub fn with_stale_after(self, stale_after_ms: Millis) -> Self {
        Store {
            stale_after_ms,
            ..self
        }
    }

    fn locked(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes with every write to the store.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Changes whenever the target set is replaced by one that differs (not on scrapes).
    pub fn target_set_version(&self) -> u64 {
        self.target_set.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The generation of a write, taken under the write lock so that stamps follow the order
    /// in which writes are applied; a reader that sees a generation has seen every write
    /// stamped up to it.
    fn stamp(&self) -> u64 {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            + 1
    }

    pub fn targets(&self) -> Vec<Arc<ScrapeTarget>> {
        self.locked()
            .targets
            .values()
            .map(|r| r.target.clone())
            .collect()
    }

    /// Whether `id` is in the target set.
    pub fn has_target(&self, id: &TargetId) -> bool {
        self.locked().targets.contains_key(id)
    }

    pub fn target_health(&self) -> Vec<(Arc<ScrapeTarget>, TargetHealth)> {
        self.locked()
            .targets
            .values()
            .map(|r| (r.target.clone(), r.health.clone()))
            .collect()
    }
}

/// Target-set changes shared by the store's and the rules' property tests.
#[cfg(test)]
pub(crate) mod churn {
    use super::{ScrapeTarget, Store};

    /// Target `t`'s pod comes back in the other namespace (`n0` and `n1`).
    pub fn move_namespace(store: &Store, targets: &mut [ScrapeTarget], t: usize) {
        let ns = if targets[t].labels["namespace"] == "n0" {
            "n1"
        } else {
            "n0"
        };
        targets[t].labels.insert("namespace".into(), ns.into());
        store.set_targets(targets.to_vec());
    }

    /// Target `t` goes away; the others stay.
    pub fn drop_target(store: &Store, targets: &[ScrapeTarget], t: usize) {
        let kept = targets
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != t)
            .map(|(_, x)| x.clone())
            .collect();
        store.set_targets(kept);
    }
}

#[cfg(test)]
mod tests;
