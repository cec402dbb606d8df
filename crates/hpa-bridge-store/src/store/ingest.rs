//! Ingestion: target sets and scrape results written into the store, under its write lock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::postings::Postings;
use super::series_slots::{SeriesSlots, SlotId};
use super::{Inner, Reading, ScrapeTarget, SeriesState, Store, TargetHealth, TargetRecord};
use hpa_bridge_exposition::{ExposedSample, Unusable};
use hpa_bridge_rules::clock::{Millis, Now};
use hpa_bridge_rules::evidence::{invalid_reason, SeriesLabels, TargetId};

impl Inner {
    /// The target no longer counts among its workload's reported pods (gone, or replaced and
    /// unknown again).
    fn forget_report(&mut self, id: &TargetId, stamp: u64) {
        if self.static_reported.remove(id) {
            self.static_changed = stamp;
        }
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
pub(super) struct ClockSkew(pub(super) Millis);

impl Default for ClockSkew {
    fn default() -> Self {
        ClockSkew(hpa_bridge_rules::config::DEFAULT_MAX_CLOCK_SKEW_MS)
    }
}

/// What one successful page did to the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageOutcome {
    /// Series the page held more than once.
    pub duplicates: u64,
    /// Series whose sample on the page was older than the one they held, or as old with
    /// another value.
    pub out_of_order: u64,
    /// Retained series dropped to keep the target within `MAX_RETAINED_ABSENT_SERIES`.
    pub forgotten: u64,
}

/// When a page was scraped, and how far ahead of it a producer's clock may run.
struct PageTime {
    now: Now,
    max_skew: Millis,
}

/// One sample's times, as the page's time and the producer's timestamp give them.
struct SampleTime {
    /// When the value was measured: the producer's time, kept within 1970 and the scrape.
    at: Millis,
    /// The scrape's monotonic reading, for a sample without a producer's time.
    mono: Option<i64>,
    /// The time the series is ordered by: the producer's, unless it is from the future.
    order_at: Millis,
    unusable: Option<Unusable>,
}

impl PageTime {
    /// An exporter-supplied timestamp says when the value was measured. One further in the
    /// future than clocks drift would never age, so the sample is not trusted; a nearer one
    /// reads as the scrape's time, and absurd past ones (before 1970) are kept from
    /// overflowing ages.
    fn of(&self, sample: &ExposedSample) -> SampleTime {
        let scraped_at = self.now.wall;
        let from_the_future = sample
            .timestamp_ms
            .is_some_and(|t| t > scraped_at.saturating_add(self.max_skew));
        SampleTime {
            at: sample
                .timestamp_ms
                .map(|t| t.clamp(0, scraped_at))
                .unwrap_or(scraped_at),
            mono: sample.timestamp_ms.is_none().then_some(self.now.mono),
            order_at: sample
                .timestamp_ms
                .filter(|_| !from_the_future)
                .unwrap_or(scraped_at),
            unusable: sample
                .unusable
                .or(from_the_future.then_some(Unusable::FromTheFuture)),
        }
    }
}

/// What one sample of a page did to its series.
enum SampleFate {
    Taken,
    /// The series was on the page before.
    Duplicate,
    /// Out of order, or a second value at the same time.
    Refused,
}

/// The target's health after a successful scrape. True when every series of the target may
/// read differently for it: the target recovers, or its producer's reason changed (which
/// every answer it feeds shows beside itself, so no answer from before may be reused).
fn mark_success(
    rec: &mut TargetRecord,
    scraped_at: Millis,
    duration_ms: u64,
    reason: Option<Arc<str>>,
) -> bool {
    let was_failing = rec.health.last_error.is_some();
    rec.health.last_attempt_ms = Some(scraped_at);
    rec.health.last_success_ms = Some(scraped_at);
    rec.health.last_error = None;
    let reason_changed = rec.health.producer_reason != reason;
    rec.cell.set_reason(reason.clone());
    rec.health.producer_reason = reason;
    rec.cell
        .failing
        .store(false, std::sync::atomic::Ordering::Relaxed);
    rec.health.last_duration_ms = Some(duration_ms);
    rec.health.consecutive_failures = 0;
    was_failing || reason_changed
}

/// How each series of the target read before the page, to stamp the postings of those it
/// changes: its reading, and whether it may have read as stale by now (then a page with the
/// same value still turns it fresh, which no answer from before may hide). Every series is
/// then marked absent until the page shows it.
fn readings_before(
    rec: &TargetRecord,
    slots: &mut SeriesSlots,
    page_now: Now,
    stale_after: Millis,
) -> Vec<(SlotId, Reading, bool)> {
    let before = rec
        .series
        .values()
        .flat_map(HashMap::values)
        .filter_map(|slot| {
            slots.get(*slot).map(|s| {
                let age = page_now.age_ms(s.latest_at, s.latest_mono);
                let expired = s.valid_until.is_some_and(|u| page_now.wall > u);
                let aged = (age > stale_after || expired) && s.can_go_stale();
                (*slot, s.reading(), aged)
            })
        })
        .collect();
    for slot in rec.series.values().flat_map(HashMap::values) {
        if let Some(s) = slots.get_mut(*slot) {
            s.present = false;
            s.unusable = None;
        }
    }
    before
}

/// The slot of the sample's series, created (and posted) when the target has not held it;
/// true when created.
fn slot_for(
    rec: &mut TargetRecord,
    postings: &mut Postings,
    slots: &mut SeriesSlots,
    stamp: u64,
    sample: &ExposedSample,
    time: &SampleTime,
) -> (SlotId, bool) {
    let labels = SeriesLabels::new(merge_labels(&sample.labels, &rec.target.labels));
    let name: Arc<str> = match rec.series.get_key_value(sample.name.as_str()) {
        Some((name, _)) => name.clone(),
        None => Arc::from(sample.name.as_str()),
    };
    let by_labels = rec.series.entry(name.clone()).or_default();
    match by_labels.entry(labels.clone()) {
        std::collections::hash_map::Entry::Occupied(e) => (*e.get(), false),
        std::collections::hash_map::Entry::Vacant(e) => {
            let slot = slots.insert(SeriesState {
                name,
                labels: labels.clone(),
                latest: f64::NAN,
                latest_at: time.at,
                latest_mono: time.mono,
                last_valid: None,
                last_valid_before_page: None,
                present: false,
                unusable: None,
                valid_until: None,
                rank: 0,
                order_at: time.order_at,
                held_bits: sample.value.to_bits(),
            });
            postings.insert(&rec.target.id, &sample.name, &labels, slot, stamp);
            (*e.insert(slot), true)
        }
    }
}

/// The sample read into its series.
fn apply_sample(
    state: &mut SeriesState,
    sample: &ExposedSample,
    time: &SampleTime,
    valid_until_ms: Option<Millis>,
) -> SampleFate {
    // Every series was marked absent before the page, so one already present was seen earlier
    // in this page: the same series twice. Prometheus keeps the first and reports the page;
    // here neither value is trusted, and the retained value stays the last one seen
    // unambiguously, so the duplicate never lowers an answer.
    if state.present {
        // An out-of-order first copy keeps the series out of order: its time is still the held
        // sample's, and only that reading stays unknown however old the held sample grows.
        if !state.unusable.is_some_and(Unusable::keeps_held_time) {
            state.unusable = Some(Unusable::Duplicated);
        }
        state.latest = f64::NAN;
        state.last_valid = state.last_valid_before_page;
        return SampleFate::Duplicate;
    }
    state.last_valid_before_page = state.last_valid;
    // A producer's time older than the one the series holds is out of order, and the same
    // time with another value is a duplicate sample: Prometheus rejects both. Neither value is
    // trusted: the series keeps its time and its retained value (policy/observation.rs reads
    // it as unknown).
    let refused = sample.timestamp_ms.and_then(|t| {
        if t < state.order_at {
            Some(Unusable::OutOfOrder)
        } else if t == state.order_at && sample.value.to_bits() != state.held_bits {
            Some(Unusable::DuplicateTimestamp)
        } else {
            None
        }
    });
    if let Some(why) = refused {
        state.present = true;
        state.unusable = Some(why);
        state.latest = f64::NAN;
        return SampleFate::Refused;
    }
    state.held_bits = sample.value.to_bits();
    state.latest = sample.value;
    state.latest_at = time.at;
    state.order_at = time.order_at;
    state.latest_mono = time.mono;
    state.present = true;
    state.unusable = time.unusable;
    state.valid_until = valid_until_ms;
    // An unusable sample's value is not retained either: a floor holding it could be lower
    // than the state the pod holds now.
    if time.unusable.is_none() && invalid_reason(sample.value).is_none() {
        state.last_valid = Some((sample.value as u64, time.at));
    }
    SampleFate::Taken
}

/// Stamps the postings of every series the page changed, and returns the absent ones (last
/// seen, slot). Series added by the page are present, so the absent ones are all in `before`.
fn touch_changed(
    postings: &mut Postings,
    slots: &SeriesSlots,
    stamp: u64,
    before: Vec<(SlotId, Reading, bool)>,
    reads_anew: bool,
) -> Vec<(Millis, SlotId)> {
    let mut absent = Vec::new();
    for (slot, reading, may_have_been_stale) in before {
        if let Some(s) = slots.get(slot) {
            if reads_anew || may_have_been_stale || s.reading() != reading {
                postings.touch(&s.name, &s.labels, stamp);
            }
            if !s.present {
                absent.push((s.latest_at, slot));
            }
        }
    }
    absent
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

/// What `Store::set_targets` changed: targets new to the store, gone from it, and kept under
/// their name with other labels or another URL (which start over unscraped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetSetChange {
    pub added: usize,
    pub removed: usize,
    pub replaced: usize,
}

impl Store {
    /// Replace the target set. Targets that are gone take their retained values with them;
    /// targets that stay keep theirs (docs/hpa-behaviour.md §4.1: the floor outlives failed scrapes).
    ///
    /// What differs is worked out under the read lock, so answers go on while a large set is
    /// compared; the write lock is held only to apply the difference, and not
    /// at all when nothing differs (a publisher's round after a change that moved no target).
    /// Returns what changed, for the caller's log.
    pub(crate) fn set_targets(&self, targets: Vec<ScrapeTarget>) -> TargetSetChange {
        // Only this call changes which targets there are and what each is, so while it holds
        // this lock the difference found under the read lock stays the difference.
        let _replacing = self.replacing.lock().unwrap_or_else(|e| e.into_inner());
        let (gone, differ) = {
            let inner = self.locked();
            let keep: HashSet<&TargetId> = targets.iter().map(|t| &t.id).collect();
            let gone: Vec<TargetId> = inner
                .targets
                .keys()
                .filter(|id| !keep.contains(*id))
                .cloned()
                .collect();
            let listed_twice = keep.len() != targets.len();
            drop(keep);
            let differs =
                |t: &ScrapeTarget| inner.targets.get(&t.id).is_none_or(|rec| *rec.target != *t);
            if listed_twice {
                // A target listed twice takes each of its versions in turn, as the whole
                // list is applied in order; when every version is the kept one, no turn
                // changes anything.
                let changes = !gone.is_empty() || targets.iter().any(differs);
                drop(inner);
                if !changes {
                    return TargetSetChange::default();
                }
                return self.apply_targets(gone, targets);
            }
            let differ: Vec<ScrapeTarget> = targets.into_iter().filter(|t| differs(t)).collect();
            (gone, differ)
        };
        if gone.is_empty() && differ.is_empty() {
            return TargetSetChange::default();
        }
        self.apply_targets(gone, differ)
    }

    /// Drop the targets `gone`, and add or replace each of `targets` in order.
    fn apply_targets(&self, gone: Vec<TargetId>, targets: Vec<ScrapeTarget>) -> TargetSetChange {
        let mut inner = self.write();
        let stamp = self.stamp();
        inner.unscraped_changed = stamp;
        let mut change = TargetSetChange {
            removed: gone.len(),
            ..TargetSetChange::default()
        };
        for id in gone {
            inner.forget_series(&id, stamp);
            inner.forget_report(&id, stamp);
            inner.targets.remove(&id);
            inner.unscraped.remove(&id);
        }
        for t in targets {
            let id = t.id.clone();
            match inner.targets.get(&id).map(|rec| *rec.target == t) {
                Some(true) => {}
                Some(false) => {
                    change.replaced += 1;
                    // Labels or URL changed (e.g. a StatefulSet pod recreated under the same
                    // name): series identities change with them, and until the new endpoint
                    // is scraped nobody knows what it exports, so it starts over as unknown.
                    inner.forget_series(&id, stamp);
                    inner.forget_report(&id, stamp);
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
                    change.added += 1;
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
        // A target new to the set that a predecessor remembered is read from memory before
        // any answer can see it unscraped.
        if change.added + change.replaced > 0 {
            let mut pending = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            self.read_memory_in(&mut inner, &mut pending);
        }
        // After the write: a reader that sees the new version also sees the new set.
        drop(inner);
        self.target_set
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        change
    }

    /// Record a successful scrape: the page replaces the target's series set.
    pub(crate) fn record_success(
        &self,
        target: &ScrapeTarget,
        scraped_at: impl Into<Now>,
        duration_ms: u64,
        page: impl Into<Page>,
    ) -> PageOutcome {
        let mut inner = self.write();
        self.record_success_in(
            &mut inner,
            target,
            scraped_at.into(),
            duration_ms,
            page.into(),
        )
    }

    pub(super) fn record_success_in(
        &self,
        inner: &mut Inner,
        target: &ScrapeTarget,
        page_now: Now,
        duration_ms: u64,
        page: Page,
    ) -> PageOutcome {
        let Page {
            samples,
            valid_until_ms,
            reason,
        } = page;
        let time = PageTime {
            now: page_now,
            max_skew: self.clock_skew.0,
        };
        let stale_after = self.stale_after_ms;
        let mut outcome = PageOutcome::default();
        self.with_scraped_record(inner, target, |rec, postings, slots, stamp| {
            let reads_anew = mark_success(rec, page_now.wall, duration_ms, reason);
            let before = readings_before(rec, slots, page_now, stale_after);
            // Series counted as held twice on this page: one out of order keeps that reason, so
            // its reason cannot tell whether it was counted.
            let mut counted_twice: HashSet<SlotId> = HashSet::new();
            let mut inserted = false;
            for sample in samples {
                let stamped = time.of(&sample);
                let (slot, new) = slot_for(rec, postings, slots, stamp, &sample, &stamped);
                inserted |= new;
                let Some(state) = slots.get_mut(slot) else {
                    continue;
                };
                match apply_sample(state, &sample, &stamped, valid_until_ms) {
                    SampleFate::Taken => {}
                    SampleFate::Duplicate => {
                        if counted_twice.insert(slot) {
                            outcome.duplicates += 1;
                        }
                    }
                    SampleFate::Refused => outcome.out_of_order += 1,
                }
            }
            let absent = touch_changed(postings, slots, stamp, before, reads_anew);
            outcome.forgotten = forget_longest_unseen(rec, postings, slots, stamp, absent);
            if inserted {
                rank_series(rec, slots);
            }
            rec.cell.refresh(&rec.series, slots);
        });
        outcome
    }

    pub(crate) fn record_failure(
        &self,
        target: &ScrapeTarget,
        at: Millis,
        duration_ms: u64,
        error: String,
    ) {
        let mut inner = self.write();
        self.record_failure_in(&mut inner, target, at, duration_ms, error);
    }

    pub(super) fn record_failure_in(
        &self,
        inner: &mut Inner,
        target: &ScrapeTarget,
        at: Millis,
        duration_ms: u64,
        error: String,
    ) {
        self.with_scraped_record(inner, target, |rec, postings, slots, stamp| {
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
        inner: &mut Inner,
        target: &ScrapeTarget,
        apply: impl FnOnce(&mut TargetRecord, &mut Postings, &mut SeriesSlots, u64),
    ) {
        let stamp = self.stamp();
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
                match &rec.target.workload {
                    Some(w) => {
                        inner
                            .reported
                            .entry(w.clone())
                            .or_default()
                            .insert(target.id.clone());
                    }
                    None => {
                        inner.static_reported.insert(target.id.clone());
                        inner.static_changed = stamp;
                    }
                }
            }
        }
    }
}
