//! The latest samples per target and series, scrape health, and the last valid value of every
//! series (which is what the stateful floor retains while a target fails).
//!
//! The store holds no policy: it answers "which evidence is in scope for this query" and leaves
//! the decision to `policy`.

mod family_digest;
mod postings;
mod resolved_scope;
mod series_slots;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, RwLock};

use serde::Serialize;

use crate::clock::{Millis, Now};
pub use crate::cluster::WorkloadRef;
/// A scrape target's identity is the one its evidence names.
pub use crate::evidence::TargetId;
use crate::evidence::{
    invalid_reason, ByLabels, CleanTail, Evidence, Observation, ProducerReason, SeriesId,
    SeriesLabels, SeriesRef, SilentPods, UnknownTarget, Unusable,
};
pub use crate::evidence::{Scope, ScopeKey, Summarize};
use crate::exposition::json_page::JsonExtraction;
use crate::exposition::ExposedSample;
use crate::selector::Operator;
use family_digest::{Families, TargetCell};
use postings::{Postings, Stamp};
use resolved_scope::{ResolvedScope, ResolvedScopes, ResolvedTarget};

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
    s.serialize_str(&crate::redaction::redact_url(url))
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

use series_slots::{SeriesSlots, SlotId};

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

impl Scope<'_> {
    #[cfg(test)]
    fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.series.iter().any(|s| s == name)
            && labels.get(self.namespace_label).map(String::as_str) == Some(self.namespace)
            && self.selector.matches(labels)
    }

    /// The requirements the index does not decide (`Postings::candidates` settles the name,
    /// the namespace and every `=` and `in`).
    fn matches_beyond_index(&self, labels: &SeriesLabels) -> bool {
        self.selector
            .requirements()
            .iter()
            .filter(|r| !matches!(r.operator, Operator::Equals | Operator::In))
            .all(|r| r.matches(labels))
    }

    /// Could a target with these labels export in-scope series? Requirements on keys the
    /// target does not define are unknown until it is scraped, so they count as satisfiable.
    fn possibly_matches(&self, target_labels: &BTreeMap<String, String>) -> bool {
        // An empty target label is no label (`merge_labels`).
        let label = |key: &str| target_labels.get(key).filter(|v| !v.is_empty());
        if let Some(ns) = label(self.namespace_label) {
            if ns != self.namespace {
                return false;
            }
        }
        self.selector.requirements().iter().all(|r| {
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
}

#[derive(Debug, Default)]
pub struct Store {
    inner: RwLock<Inner>,
    /// Bumped on every change, so callers can tell that an answer computed earlier may differ.
    generation: std::sync::atomic::AtomicU64,
    /// Bumped when the target set is replaced, so the scrape schedule is rebuilt only then.
    target_set: std::sync::atomic::AtomicU64,
    /// Each asked-about scope's series, while its membership stands (resolved_scope.rs).
    resolved: ResolvedScopes,
    clock_skew: ClockSkew,
    /// `scrape.staleAfter`: a series whose value was older than this before a page may have
    /// read as stale, so the page that refreshes it changes answers even with the same value.
    stale_after_ms: Millis,
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
    /// The generation of the last change to `unscraped` or to one of its targets' errors:
    /// every scope may read them.
    unscraped_changed: u64,
}

impl Inner {
    /// The target no longer counts among its workload's reported pods (gone, or replaced and
    /// unknown again).
    fn forget_report(&mut self, id: &TargetId) {
        let Some(w) = self
            .targets
            .get(id)
            .and_then(|r| r.target.workload.as_ref())
        else {
            return;
        };
        if let Some(pods) = self.reported.get_mut(w) {
            pods.remove(id);
            if pods.is_empty() {
                self.reported.remove(w);
            }
        }
    }

    fn forget_series(&mut self, id: &TargetId, stamp: u64) {
        if let Some(rec) = self.targets.get_mut(id) {
            for (name, by_labels) in &rec.series {
                for (labels, slot) in by_labels {
                    self.postings.remove(id, name, labels, *slot, stamp);
                    self.slots.remove(*slot);
                }
            }
            rec.series.clear();
            rec.cell.refresh(&rec.series, &self.slots);
        }
    }
}

/// Merge sample labels with target labels. On a conflict the target's label wins and the
/// exporter's value is kept as `exported_<name>`, as Prometheus does with honor_labels off.
/// A label with an empty value is no label, on either side, as in Prometheus (whose source
/// must read the same series the same way): `k=""` and no `k` are one series, and a selector
/// sees neither as having `k`.
pub fn merge_labels(
    sample: &[(String, String)],
    target: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged: BTreeMap<String, String> = target
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in sample.iter().filter(|(_, v)| !v.is_empty()) {
        match target.get(k).filter(|tv| !tv.is_empty()) {
            Some(tv) if tv != v => {
                merged.insert(format!("exported_{k}"), v.clone());
            }
            Some(_) => {}
            None => {
                merged.insert(k.clone(), v.clone());
            }
        }
    }
    merged
}

/// Series a target no longer exports are retained (the floor keeps a pod's index while the
/// pod exists, docs/hpa-behaviour.md §4.1), but only this many per target: an exporter that
/// churns label sets would otherwise grow the store by a page's worth of series per scrape.
/// Honest pods export one index each, and a gone recommendation is never used, so only a
/// churning target loses anything, and it loses the series it stopped exporting longest ago.
pub const MAX_RETAINED_ABSENT_SERIES: usize = 1024;

/// One successful page: its samples, and what its producer said of the page as a whole.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    pub samples: Vec<ExposedSample>,
    /// Past this wall-clock time every sample of the page reads as stale (`validUntil`).
    pub valid_until_ms: Option<Millis>,
    /// The producer's own account of its value (a JSON source's `reason`), shown beside the
    /// target's health and the answers its series feed.
    pub reason: Option<Arc<str>>,
}

impl From<Vec<ExposedSample>> for Page {
    fn from(samples: Vec<ExposedSample>) -> Self {
        Page {
            samples,
            ..Page::default()
        }
    }
}

/// How far in the future a producer's timestamp may lie before its sample is not trusted
/// (`scrape.maxClockSkew`); within it, the time is read as the scrape's.
#[derive(Clone, Copy, Debug)]
struct ClockSkew(Millis);

impl Default for ClockSkew {
    fn default() -> Self {
        ClockSkew(crate::config::DEFAULT_MAX_CLOCK_SKEW_MS)
    }
}

/// What one successful page did to the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageOutcome {
    /// Series the page held more than once.
    pub duplicates: u64,
    /// Retained series dropped to keep the target within `MAX_RETAINED_ABSENT_SERIES`.
    pub forgotten: u64,
}

/// Drop the target's absent series (last seen, slot) beyond `MAX_RETAINED_ABSENT_SERIES`,
/// longest unseen first.
fn forget_longest_unseen(
    rec: &mut TargetRecord,
    postings: &mut Postings,
    slots: &mut SeriesSlots,
    stamp: u64,
    mut absent: Vec<(Millis, SlotId)>,
) -> u64 {
    if absent.len() <= MAX_RETAINED_ABSENT_SERIES {
        return 0;
    }
    let excess = absent.len() - MAX_RETAINED_ABSENT_SERIES;
    absent.select_nth_unstable(excess - 1);
    for &(_, slot) in &absent[..excess] {
        let Some(state) = slots.remove(slot) else {
            continue;
        };
        postings.remove(&rec.target.id, &state.name, &state.labels, slot, stamp);
        if let Some(by_labels) = rec.series.get_mut(&state.name) {
            by_labels.remove(&state.labels);
            if by_labels.is_empty() {
                rec.series.remove(&state.name);
            }
        }
    }
    excess as u64
}

/// Number a target's series in (name, labels) order. Runs only when a page brought a new
/// series, so a steady target pays nothing, and a churning one pays for its own page.
fn rank_series(rec: &TargetRecord, slots: &mut SeriesSlots) {
    let mut order: Vec<SlotId> = rec
        .series
        .values()
        .flat_map(|m| m.values().copied())
        .collect();
    order.sort_by(|a, b| {
        let key = |id: &SlotId| slots.get(*id).map(|s| (&s.name, &s.labels));
        key(a).cmp(&key(b))
    });
    for (rank, slot) in order.into_iter().enumerate() {
        if let Some(s) = slots.get_mut(slot) {
            s.rank = rank as u32;
        }
    }
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

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Replace the target set. Targets that are gone take their retained values with them;
    /// targets that stay keep theirs (docs/hpa-behaviour.md §4.1: the floor outlives failed scrapes).
    pub fn set_targets(&self, targets: Vec<ScrapeTarget>) {
        let mut inner = self.write();
        let stamp = self.stamp();
        inner.unscraped_changed = stamp;
        let keep: HashSet<TargetId> = targets.iter().map(|t| t.id.clone()).collect();
        let gone: Vec<TargetId> = inner
            .targets
            .keys()
            .filter(|id| !keep.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            inner.forget_series(&id, stamp);
            inner.forget_report(&id);
            inner.targets.remove(&id);
            inner.unscraped.remove(&id);
        }
        for t in targets {
            let id = t.id.clone();
            match inner.targets.get(&id).map(|rec| *rec.target == t) {
                Some(true) => {}
                Some(false) => {
                    // Labels or URL changed (e.g. a StatefulSet pod recreated under the same
                    // name): series identities change with them, and until the new endpoint
                    // is scraped nobody knows what it exports, so it starts over as unknown.
                    inner.forget_series(&id, stamp);
                    inner.forget_report(&id);
                    if let Some(rec) = inner.targets.get_mut(&id) {
                        rec.target = Arc::new(t);
                        rec.health = TargetHealth::default();
                        rec.cell
                            .failing
                            .store(false, std::sync::atomic::Ordering::Relaxed);
                    }
                    inner.unscraped.insert(id);
                }
                None => {
                    inner.targets.insert(
                        id.clone(),
                        TargetRecord {
                            target: Arc::new(t),
                            health: TargetHealth::default(),
                            cell: Default::default(),
                            series: HashMap::new(),
                        },
                    );
                    inner.unscraped.insert(id);
                }
            }
        }
        // After the write: a reader that sees the new version also sees the new set.
        drop(inner);
        self.target_set
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Changes with every write to the store.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Changes whenever the target set is replaced (not on scrapes).
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

    /// Changes whenever anything an answer over these scopes reads from the store changes,
    /// other than the passing of time (a series re-scraped with the same value and state
    /// leaves it unchanged). Cheap: a few index lookups per scope, whatever its size, under
    /// one read lock.
    pub fn scope_version<'a>(&self, scopes: impl IntoIterator<Item = Scope<'a>>) -> u64 {
        let inner = self.read();
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

    pub fn targets(&self) -> Vec<Arc<ScrapeTarget>> {
        self.read()
            .targets
            .values()
            .map(|r| r.target.clone())
            .collect()
    }

    /// Whether `id` is in the target set.
    pub fn has_target(&self, id: &TargetId) -> bool {
        self.read().targets.contains_key(id)
    }

    pub fn target_health(&self) -> Vec<(Arc<ScrapeTarget>, TargetHealth)> {
        self.read()
            .targets
            .values()
            .map(|r| (r.target.clone(), r.health.clone()))
            .collect()
    }

    /// Record a successful scrape: the page replaces the target's series set.
    pub fn record_success(
        &self,
        target: &ScrapeTarget,
        scraped_at: impl Into<Now>,
        duration_ms: u64,
        page: impl Into<Page>,
    ) -> PageOutcome {
        let page_now: Now = scraped_at.into();
        let Now {
            wall: scraped_at,
            mono: scraped_mono,
        } = page_now;
        let Page {
            samples,
            valid_until_ms,
            reason,
        } = page.into();
        let max_skew = self.clock_skew.0;
        let mut duplicates = 0u64;
        let mut forgotten = 0u64;
        self.with_scraped_record(target, |rec, postings, slots, stamp| {
            let was_failing = rec.health.last_error.is_some();
            rec.health.last_attempt_ms = Some(scraped_at);
            rec.health.last_success_ms = Some(scraped_at);
            rec.health.last_error = None;
            // A new reason changes what every answer this target feeds shows beside itself,
            // so no answer from before may be reused for them.
            let reason_changed = rec.health.producer_reason != reason;
            rec.cell.set_reason(reason.clone());
            rec.health.producer_reason = reason;
            rec.cell
                .failing
                .store(false, std::sync::atomic::Ordering::Relaxed);
            rec.health.last_duration_ms = Some(duration_ms);
            rec.health.consecutive_failures = 0;
            // How each series read before the page, to stamp the postings of those it changes:
            // its reading, and whether it may have read as stale by now (then a page with the
            // same value still turns it fresh, which no answer from before may hide).
            let stale_after = self.stale_after_ms;
            let before: Vec<(SlotId, Reading, bool)> = rec
                .series
                .values()
                .flat_map(HashMap::values)
                .filter_map(|slot| {
                    slots.get(*slot).map(|s| {
                        let age = page_now.age_ms(s.latest_at, s.latest_mono);
                        let expired = s.valid_until.is_some_and(|u| scraped_at > u);
                        (*slot, s.reading(), age > stale_after || expired)
                    })
                })
                .collect();
            for slot in rec.series.values().flat_map(HashMap::values) {
                if let Some(s) = slots.get_mut(*slot) {
                    s.present = false;
                    s.unusable = None;
                }
            }
            let mut inserted = false;
            for sample in samples {
                let labels = SeriesLabels::new(merge_labels(&sample.labels, &rec.target.labels));
                // An exporter-supplied timestamp says when the value was measured. One further in
                // the future than clocks drift would never age, so the sample is not trusted; a
                // nearer one reads as the scrape's time, and absurd past ones (before 1970) are
                // kept from overflowing ages.
                let from_the_future = sample
                    .timestamp_ms
                    .is_some_and(|t| t > scraped_at.saturating_add(max_skew));
                let unusable = sample
                    .unusable
                    .or(from_the_future.then_some(Unusable::FromTheFuture));
                let at = sample
                    .timestamp_ms
                    .map(|t| t.clamp(0, scraped_at))
                    .unwrap_or(scraped_at);
                let mono = sample.timestamp_ms.is_none().then_some(scraped_mono);
                let name: Arc<str> = match rec.series.get_key_value(sample.name.as_str()) {
                    Some((name, _)) => name.clone(),
                    None => Arc::from(sample.name.as_str()),
                };
                let by_labels = rec.series.entry(name.clone()).or_default();
                let slot = match by_labels.entry(labels.clone()) {
                    std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        let slot = slots.insert(SeriesState {
                            name,
                            labels: labels.clone(),
                            latest: f64::NAN,
                            latest_at: at,
                            latest_mono: mono,
                            last_valid: None,
                            last_valid_before_page: None,
                            present: false,
                            unusable: None,
                            valid_until: None,
                            rank: 0,
                        });
                        postings.insert(&rec.target.id, &sample.name, &labels, slot, stamp);
                        inserted = true;
                        *e.insert(slot)
                    }
                };
                let Some(state) = slots.get_mut(slot) else {
                    continue;
                };
                // Every series was marked absent before the page, so one already present was
                // seen earlier in this page: the same series twice. Prometheus keeps the first
                // and reports the page; here neither value is trusted, and the retained value
                // stays the last one seen unambiguously, so the duplicate never lowers an answer.
                if state.present {
                    if state.unusable != Some(Unusable::Duplicated) {
                        duplicates += 1;
                    }
                    state.unusable = Some(Unusable::Duplicated);
                    state.latest = f64::NAN;
                    state.last_valid = state.last_valid_before_page;
                    continue;
                }
                state.latest = sample.value;
                state.latest_at = at;
                state.latest_mono = mono;
                state.present = true;
                state.unusable = unusable;
                state.valid_until = valid_until_ms;
                state.last_valid_before_page = state.last_valid;
                // An unusable sample's value is not retained either: a floor holding it could
                // be lower than the state the pod holds now.
                if unusable.is_none() && invalid_reason(sample.value).is_none() {
                    state.last_valid = Some((sample.value as u64, at));
                }
            }
            // Series added by this page are present, so the absent ones are all in `before`.
            let mut absent = Vec::new();
            for (slot, reading, may_have_been_stale) in before {
                if let Some(s) = slots.get(slot) {
                    // A target that recovers changes how every series of it reads.
                    if was_failing
                        || reason_changed
                        || may_have_been_stale
                        || s.reading() != reading
                    {
                        postings.touch(&s.name, &s.labels, stamp);
                    }
                    if !s.present {
                        absent.push((s.latest_at, slot));
                    }
                }
            }
            forgotten = forget_longest_unseen(rec, postings, slots, stamp, absent);
            if inserted {
                rank_series(rec, slots);
            }
            rec.cell.refresh(&rec.series, slots);
        });
        PageOutcome {
            duplicates,
            forgotten,
        }
    }

    pub fn record_failure(
        &self,
        target: &ScrapeTarget,
        at: Millis,
        duration_ms: u64,
        error: String,
    ) {
        self.with_scraped_record(target, |rec, postings, slots, stamp| {
            if rec.health.last_error.is_none() {
                // Every series of a target that starts failing reads as from a failing target.
                for slot in rec.series.values().flat_map(HashMap::values) {
                    if let Some(s) = slots.get(*slot) {
                        postings.touch(&s.name, &s.labels, stamp);
                    }
                }
            }
            rec.health.last_attempt_ms = Some(at);
            rec.health.last_error = Some(error);
            rec.cell
                .failing
                .store(true, std::sync::atomic::Ordering::Relaxed);
            rec.health.last_duration_ms = Some(duration_ms);
            rec.health.consecutive_failures = rec.health.consecutive_failures.saturating_add(1);
        });
    }

    /// Apply a scrape result to the target's record, unless the target is gone or was
    /// replaced while it was being scraped (a pod recreated under the same name): that page
    /// belongs to the old one and must not mark the new one as scraped.
    fn with_scraped_record(
        &self,
        target: &ScrapeTarget,
        apply: impl FnOnce(&mut TargetRecord, &mut Postings, &mut SeriesSlots, u64),
    ) {
        let mut guard = self.write();
        let stamp = self.stamp();
        let inner = &mut *guard;
        if let Some(rec) = inner
            .targets
            .get_mut(&target.id)
            .filter(|r| *r.target == *target)
        {
            let unscraped = inner.unscraped.contains(&target.id);
            let error_before = unscraped.then(|| rec.health.last_error.clone());
            apply(rec, &mut inner.postings, &mut inner.slots, stamp);
            // An unscraped target's error is part of every answer that hears of it, and its
            // first page takes it out of them.
            if unscraped
                && (rec.health.ever_succeeded()
                    || error_before.as_ref() != Some(&rec.health.last_error))
            {
                inner.unscraped_changed = stamp;
            }
            if rec.health.ever_succeeded() && inner.unscraped.remove(&target.id) {
                if let Some(w) = &rec.target.workload {
                    inner
                        .reported
                        .entry(w.clone())
                        .or_default()
                        .insert(target.id.clone());
                }
            }
        }
    }

    /// Counts for self-metrics: (tracked series, stale series).
    pub fn series_counts(&self, now: impl Into<Now>, stale_after_ms: Millis) -> (usize, usize) {
        let now = now.into();
        let inner = self.read();
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
                if now.age_ms(s.latest_at, s.latest_mono) > stale_after_ms {
                    stale += 1;
                }
            }
        }
        (total, stale)
    }

    /// Distinct values of `label` over the series named in `series` (present or retained).
    pub fn label_values(&self, series: &[String], label: &str) -> BTreeSet<String> {
        self.read().postings.label_values(series, label)
    }

    /// The series `scope` holds, from the cache while its membership stands, else worked out
    /// from the postings (under the same read lock, so the two agree).
    fn resolve(
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
                scope
                    .matches_beyond_index(&s.labels)
                    .then_some((s.rank, *slot, s))
            }));
            if in_scope.is_empty() {
                continue;
            }
            // Deterministic order makes explanations stable and tests exact: targets in their
            // order, and each target's series by rank, which is their (name, labels) order.
            // Ranks shift when a target gains series, but never reorder the ones it had.
            in_scope.sort_unstable_by_key(|(rank, slot, _)| (*rank, *slot));
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
        });
        if keep {
            self.resolved.put(key.clone(), resolved.clone());
        }
        resolved
    }

    /// The evidence in scope for a query. Reads only the series the index names for the
    /// scope, plus the never-scraped targets.
    pub fn evidence(&self, scope: &Scope<'_>) -> Evidence {
        self.evidence_kept(scope, &scope.key(), true, None)
    }

    /// As `evidence`, for a one-off look (the status page's namespace-wide scan): the scope's
    /// resolution is not kept, so it cannot push the HPAs' scopes out of the cache.
    pub fn evidence_once(&self, scope: &Scope<'_>) -> Evidence {
        self.evidence_kept(scope, &scope.key(), false, None)
    }

    /// As `evidence`, but a target whose in-scope series are whole families that all read as
    /// fresh, valid inputs under `s` is counted in `Evidence::clean_tail` instead of listed,
    /// once `s.after` present series are listed (family_digest.rs).
    pub fn evidence_summarized(&self, scope: &Scope<'_>, s: Summarize) -> Evidence {
        self.evidence_kept(scope, &scope.key(), true, Some(s))
    }

    /// The evidence of `scope`, whose key is `key` (`Scope::key`, which the adapter already
    /// built for its own cache).
    pub(crate) fn evidence_kept(
        &self,
        scope: &Scope<'_>,
        key: &ScopeKey,
        keep: bool,
        summarize: Option<Summarize>,
    ) -> Evidence {
        let inner = self.read();
        let mut ev = Evidence::default();
        let resolved = self.resolve(&inner, scope, key, keep);
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
                    .filter_map(|(slot, i)| {
                        Some((inner.slots.get(*slot)?, SeriesRef::at(&resolved.ids, i)?))
                    })
                    .map(|(s, id)| Observation {
                        id,
                        value: s.latest,
                        observed_at_ms: s.latest_at,
                        scraped_mono_ms: s.latest_mono,
                        last_valid: s.last_valid,
                        present: s.present,
                        target_failing: failing,
                        unusable: s.unusable,
                        valid_until_ms: s.valid_until,
                    }),
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
        ev.workloads = resolved.workloads.clone();
        // A workload's pods with a series in scope are listed in the resolution, which stands
        // while the scope's series do; the pods that have had a page are counted as they come
        // and go, so a pod whose pages hold nothing in scope shows as a difference.
        for (w, listed) in resolved.workloads.iter().zip(resolved.pods_listed.iter()) {
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
            .filter(|rec| scope.possibly_matches(&rec.target.labels))
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
        let mut named: Vec<WorkloadRef> = Vec::new();
        for (u, workload) in unknown {
            match workload {
                Some(w) if observed > 0 && !ev.workloads.contains(w) => continue,
                Some(w) if observed == 0 && !named.contains(w) => named.push(w.clone()),
                _ => {}
            }
            ev.unknown_targets.push(u);
        }
        if observed == 0 && !named.is_empty() {
            ev.workloads = named.into();
        }
        debug_assert!(ev.observations.is_sorted_by(|a, b| {
            (&a.id.target, &a.id.series, &a.id.labels) <= (&b.id.target, &b.id.series, &b.id.labels)
        }));
        ev
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
