//! Where in each scrape interval a target is scraped.
//!
//! Scraping every target at the top of the interval makes a burst: thousands of connections,
//! pages and parses in the same few hundred milliseconds, then nothing until the next interval.
//! Prometheus spreads its targets instead: each target gets a phase within the interval from a
//! stable hash of the target, and is scraped at that phase of every interval
//! (docs/hpa-behaviour.md §5.1). hpa-bridge does the same, so the load is flat, and a target
//! keeps its phase across target-set changes and across restarts.
//!
//! Phases are measured against wall-clock time, like Prometheus' `now % interval`, so two
//! windows that together cover `k` whole intervals make every target due exactly `k` times.

use std::sync::Arc;
use std::time::Duration;

use hpa_bridge_rules::clock::Millis;
use hpa_bridge_store::store::ScrapeTarget;

/// The targets of one target set, sorted by their phase within the interval.
#[derive(Debug, Default)]
pub struct ScrapeSchedule {
    interval_ms: u64,
    by_phase: Vec<(u64, Arc<ScrapeTarget>)>,
}

/// FNV-1a, 64 bit: stable across builds, platforms and Rust versions (std's hasher promises
/// none of these), so a target's phase does not move when the adapter is upgraded.
fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl ScrapeSchedule {
    pub fn new(interval: Duration, targets: impl IntoIterator<Item = Arc<ScrapeTarget>>) -> Self {
        let interval_ms = (interval.as_millis() as u64).max(1);
        let mut by_phase: Vec<(u64, Arc<ScrapeTarget>)> = targets
            .into_iter()
            .map(|t| (Self::phase(interval_ms, &t.id.0), t))
            .collect();
        by_phase.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
        ScrapeSchedule {
            interval_ms,
            by_phase,
        }
    }

    /// The target's phase: how many milliseconds into each interval it is scraped.
    pub fn phase(interval_ms: u64, target_id: &str) -> u64 {
        stable_hash(target_id.as_bytes()) % interval_ms.max(1)
    }

    pub fn len(&self) -> usize {
        self.by_phase.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_phase.is_empty()
    }

    /// The targets due in the wall-clock window `[from, to)`: those whose phase recurs in it.
    /// A window of a whole interval or more makes every target due once (a late tick scrapes
    /// each target once, not once per missed interval); an empty or backwards window (the
    /// clock stepped back) makes none due.
    pub fn due(&self, from: Millis, to: Millis) -> impl Iterator<Item = &Arc<ScrapeTarget>> {
        let interval = self.interval_ms;
        let ranges: [(u64, u64); 2] = if to <= from {
            [(0, 0), (0, 0)]
        } else if (to - from) as u64 >= interval {
            [(0, interval), (0, 0)]
        } else {
            let a = from.rem_euclid(interval as i64) as u64;
            let b = to.rem_euclid(interval as i64) as u64;
            if a < b {
                [(a, b), (0, 0)]
            } else {
                [(a, interval), (0, b)]
            }
        };
        ranges.into_iter().flat_map(move |(lo, hi)| {
            let start = self.by_phase.partition_point(|(p, _)| *p < lo);
            let end = self.by_phase.partition_point(|(p, _)| *p < hi);
            self.by_phase[start..end.max(start)].iter().map(|(_, t)| t)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_bridge_rules::evidence::TargetId;
    use std::collections::{BTreeMap, HashMap};

    fn target(id: &str) -> Arc<ScrapeTarget> {
        Arc::new(ScrapeTarget {
            format: Default::default(),
            id: TargetId(id.into()),
            url: format!("http://{id}/metrics"),
            labels: BTreeMap::new(),
            workload: None,
        })
    }

    fn schedule(interval_ms: u64, n: usize) -> ScrapeSchedule {
        ScrapeSchedule::new(
            Duration::from_millis(interval_ms),
            (0..n).map(|i| target(&format!("10.0.{}.{}:8080", i / 250, i % 250))),
        )
    }

    fn due_ids(s: &ScrapeSchedule, from: Millis, to: Millis) -> Vec<String> {
        s.due(from, to).map(|t| t.id.to_string()).collect()
    }

    #[test]
    fn the_phase_is_stable_and_within_the_interval() {
        // FNV-1a of "a" is a published test vector; pinning it pins the phases across releases.
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        for id in ["a", "10.0.0.1:8080", "pod/x"] {
            assert!(ScrapeSchedule::phase(10_000, id) < 10_000);
            assert_eq!(
                ScrapeSchedule::phase(10_000, id),
                ScrapeSchedule::phase(10_000, id)
            );
        }
    }

    #[test]
    fn consecutive_windows_make_every_target_due_once_per_interval() {
        let s = schedule(10_000, 2_000);
        // Uneven windows from an arbitrary wall-clock start, covering exactly 3 intervals.
        let start: Millis = 1_764_547_200_123;
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut at = start;
        let steps = [1, 99, 100, 250, 7, 1_000, 3_333, 17];
        let mut i = 0;
        while at < start + 30_000 {
            let next = (at + steps[i % steps.len()]).min(start + 30_000);
            for id in due_ids(&s, at, next) {
                *counts.entry(id).or_default() += 1;
            }
            at = next;
            i += 1;
        }
        assert_eq!(counts.len(), 2_000);
        assert!(counts.values().all(|c| *c == 3), "{counts:?}");
    }

    #[test]
    fn the_load_is_spread_over_the_interval() {
        // 5,000 targets in 100 windows of 100 ms: a burst would put all of them in one window;
        // spread, no window holds more than a few times the mean of 50.
        let s = schedule(10_000, 5_000);
        let busiest = (0..100)
            .map(|w| s.due(w * 100, (w + 1) * 100).count())
            .max()
            .unwrap();
        assert!(busiest < 150, "busiest window has {busiest} targets");
        let empty = (0..100)
            .filter(|w| s.due(w * 100, (w + 1) * 100).count() == 0)
            .count();
        assert_eq!(empty, 0);
    }

    #[test]
    fn late_and_backwards_windows() {
        let s = schedule(1_000, 300);
        assert_eq!(
            due_ids(&s, 5_000, 9_000).len(),
            300,
            "late: each target once"
        );
        assert!(due_ids(&s, 5_000, 4_000).is_empty(), "clock stepped back");
        assert!(due_ids(&s, 5_000, 5_000).is_empty());
        // A window wrapping the interval boundary takes both ends.
        let wrapped = due_ids(&s, 1_900, 2_100).len();
        let parts = due_ids(&s, 1_900, 2_000).len() + due_ids(&s, 2_000, 2_100).len();
        assert_eq!(wrapped, parts);
        assert!(ScrapeSchedule::new(Duration::from_secs(1), Vec::new()).is_empty());
    }
}
