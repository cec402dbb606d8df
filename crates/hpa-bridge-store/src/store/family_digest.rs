//! What each of a target's series families (its series of one name) reads as, worked out on
//! every page, so an answer need not read every series of a healthy pod.
//!
//! In a live cluster almost every in-scope series is clean: present, exported once, a valid integer
//! equal to its retained value, scraped within `staleAfter`. The recommendation and the floor treat
//! every such series alike past the few inputs they note in full (a fresh input of the max; a fresh
//! retained index), so they need only how many there are, the highest value and the newest time
//! (`CleanTail`). Reading each of them costs a cache miss apiece under live load; the digest costs
//! one walk over a page's series per scrape, which the scrape already made, and an answer reads one
//! cell per target (one cache line for a target of one family, an aligned pair for more).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::series_slots::{SeriesSlots, SlotId};
use hpa_bridge_rules::clock::Millis;
use hpa_bridge_rules::evidence::{invalid_reason, ByLabels, SeriesLabels, Summarize};

/// Families a target's cell describes; a target with more is never summarized (its series
/// are listed one by one). Exporters of replica counts publish one to three.
const FAMILIES: usize = 3;

/// `count` of a target with more families than the cell holds.
const TOO_MANY: u8 = u8::MAX;

/// `max` of a family with a series that does not read as clean.
const UNCLEAN: u64 = u32::MAX as u64;

/// What an answer reads of a target besides its series, shared by the target's record (the
/// only writer, under the store's write lock) and the resolved scopes that list it (readers,
/// under the read lock). Every field is atomic so both can hold it without `unsafe`; the
/// store's lock orders the writes before the reads, so relaxed accesses suffice.
/// 128-byte aligned: the cell spans two lines once it holds a second family, and the
/// processor's adjacent-line prefetch fetches an aligned pair of lines together.
#[derive(Debug, Default)]
#[repr(C, align(128))]
pub(super) struct TargetCell {
    /// The target's last scrape failed: every series of it reads as from a failing target.
    pub(super) failing: AtomicBool,
    count: AtomicU8,
    families: [FamilyCell; FAMILIES],
    /// Whether the producer's last page gave a reason, so that an answer locks `reason` only
    /// for the few targets that give one (JSON sources with `reason:`).
    has_reason: AtomicBool,
    /// What the producer last said of its values, quoted beside the answers they feed.
    reason: Mutex<Option<Arc<str>>>,
}

/// One family: which (by the address of the target's own name string, which the resolved
/// scope holds on to, so the address cannot be reused for another name while it looks),
/// how many series, the highest value or `UNCLEAN`, when the longest unscraped series was
/// scraped (on the monotonic clock, which ages it) and the newest sample time (on the wall
/// clock, which an answer's timestamp is written in).
#[derive(Debug, Default)]
struct FamilyCell {
    name: AtomicUsize,
    series_and_max: AtomicU64,
    oldest_mono: AtomicI64,
    newest_at: AtomicI64,
}

fn address(name: &Arc<str>) -> usize {
    Arc::as_ptr(name) as *const u8 as usize
}

impl TargetCell {
    pub(super) fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    pub(super) fn set_reason(&self, reason: Option<Arc<str>>) {
        self.has_reason.store(reason.is_some(), Ordering::Relaxed);
        // A poisoned lock holds a whole `Option`: nothing is half-written.
        *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason;
    }

    /// The producer's reason, if its last page gave one.
    pub(super) fn reason(&self) -> Option<Arc<str>> {
        if !self.has_reason.load(Ordering::Relaxed) {
            return None;
        }
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Work out the digest of every family of a target.
    pub(super) fn refresh(
        &self,
        series: &HashMap<Arc<str>, HashMap<SeriesLabels, SlotId, ByLabels>>,
        slots: &SeriesSlots,
    ) {
        if series.len() > FAMILIES {
            self.count.store(TOO_MANY, Ordering::Relaxed);
            return;
        }
        for ((name, by_labels), cell) in series.iter().zip(&self.families) {
            let mut clean = true;
            let mut max = 0u64;
            let (mut oldest, mut newest) = (Millis::MAX, Millis::MIN);
            for s in by_labels.values().filter_map(|slot| slots.get(*slot)) {
                let value = s.latest as u64;
                // A sample with a time of its own ages on the wall clock, which the digest
                // does not track: its family is listed, and each series read as it reads.
                clean &= s.present
                    && s.unusable.is_none()
                    && s.valid_until.is_none()
                    && invalid_reason(s.latest).is_none()
                    && s.last_valid == Some((value, s.latest_at))
                    && s.latest_mono.is_some();
                max = max.max(value);
                oldest = oldest.min(s.latest_mono.unwrap_or(Millis::MIN));
                newest = newest.max(s.latest_at);
            }
            // Valid values are at most MAX_REPLICA_VALUE, far below UNCLEAN.
            let max = if clean { max.min(UNCLEAN - 1) } else { UNCLEAN };
            let packed = (by_labels.len() as u64) << 32 | max;
            cell.name.store(address(name), Ordering::Relaxed);
            cell.series_and_max.store(packed, Ordering::Relaxed);
            cell.oldest_mono.store(oldest, Ordering::Relaxed);
            cell.newest_at.store(newest, Ordering::Relaxed);
        }
        self.count.store(series.len() as u8, Ordering::Relaxed);
    }

    /// The highest value and newest time of `families` (as `Families` holds them), if every
    /// series of them reads as a fresh, valid input under `s` and the target is not failing.
    pub(super) fn clean_and_fresh(
        &self,
        families: &Families,
        s: &Summarize,
    ) -> Option<(u64, Millis, Millis)> {
        if self.failing() || families.whole.is_empty() {
            return None;
        }
        let count = usize::from(self.count.load(Ordering::Relaxed));
        let cells = self.families.get(..count)?;
        let mut out: Option<(u64, Millis, Millis)> = None;
        for (name, series) in &families.whole {
            let cell = cells
                .iter()
                .find(|c| c.name.load(Ordering::Relaxed) == address(name))?;
            let packed = cell.series_and_max.load(Ordering::Relaxed);
            let (n, max) = (packed >> 32, packed & UNCLEAN);
            let oldest = cell.oldest_mono.load(Ordering::Relaxed);
            // A family that grew since resolution holds a series outside the scope; the age
            // test is `policy::observation::read`'s: stale once older than staleAfter, on the
            // monotonic clock for a scraped sample (a clean family holds no other kind).
            if n != u64::from(*series) || max == UNCLEAN || s.now.mono - oldest > s.stale_after_ms {
                return None;
            }
            let newest = cell.newest_at.load(Ordering::Relaxed);
            out = Some(match out {
                None => (max, newest, oldest),
                Some((v, at, old)) => (v.max(max), at.max(newest), old.min(oldest)),
            });
        }
        out
    }
}

/// A resolved target's in-scope families with their sizes at resolution, when they are whole
/// families (nothing of those names on the target is outside the scope); else empty.
#[derive(Debug, Default)]
pub(super) struct Families {
    whole: Box<[(Arc<str>, u32)]>,
}

impl Families {
    pub(super) fn of(
        in_scope: &[Arc<str>],
        series: &HashMap<Arc<str>, HashMap<SeriesLabels, SlotId, ByLabels>>,
    ) -> Families {
        let mut whole: Vec<(Arc<str>, u32)> = Vec::new();
        for name in in_scope {
            match whole.iter_mut().find(|(n, _)| Arc::ptr_eq(n, name)) {
                Some((_, count)) => *count += 1,
                None => whole.push((name.clone(), 1)),
            }
        }
        let is_whole = whole.iter().all(|(name, count)| {
            series
                .get_key_value(&**name)
                .is_some_and(|(key, by_labels)| {
                    Arc::ptr_eq(key, name) && by_labels.len() == *count as usize
                })
        });
        Families {
            whole: if is_whole {
                whole.into_boxed_slice()
            } else {
                Box::default()
            },
        }
    }
}
