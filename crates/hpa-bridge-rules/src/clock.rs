//! Time as a parameter: the real clocks for `serve`, a manual clock for `simulate` and tests.
//!
//! Two clocks, for two questions. The wall clock says what time it is: it is shown, written
//! into answers, and compared with times a producer wrote itself (an exposition timestamp, a
//! Prometheus sample). The monotonic clock says how long ago this process did something, such
//! as scraping a sample: the wall clock may be stepped (NTP, an operator, a VM resumed), and a
//! step back by D would keep a dead exporter's last value fresh for staleAfter + D.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (wall), or on the monotonic clock.
pub type Millis = i64;

/// One reading of both clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Now {
    /// Wall-clock time, for display, timestamps and producer-written times.
    pub wall: Millis,
    /// Monotonic time, for the age of what this process observed.
    pub mono: Millis,
}

impl Now {
    /// The age at this reading of a sample the wall clock puts at `wall_at`: measured on the
    /// monotonic clock from `scraped_mono` when this process took the sample (it gave no time
    /// of its own), else on the wall clock from the time its producer wrote.
    pub fn age_ms(&self, wall_at: Millis, scraped_mono: Option<Millis>) -> Millis {
        match scraped_mono {
            Some(mono) => self.mono - mono,
            None => self.wall - wall_at,
        }
    }
}

/// A reading of clocks that agree (nothing stepped the wall clock): the form tests and
/// simulations give times in.
impl From<Millis> for Now {
    fn from(ms: Millis) -> Now {
        Now { wall: ms, mono: ms }
    }
}

/// The clock readings over which every input an answer read keeps its freshness: within
/// it, the same evidence gives the same answer. A scraped sample turns stale at a moment of the
/// monotonic clock. A producer's own timestamp turns stale at a moment of the wall clock, and
/// a stale one turns fresh again if the wall clock is stepped back past it; so the window has
/// a wall-clock floor as well as a ceiling. Ordinary drift between the two clocks (they are
/// read apart, to the millisecond) ends nothing; only crossing an input's threshold does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreshWindow {
    /// The last monotonic reading at which every scraped input fresh at the start still is.
    pub until_mono: Millis,
    /// The first wall reading at which every timestamped input stale at the start still is.
    pub from_wall: Millis,
    /// The last wall reading at which every timestamped input fresh at the start still is.
    pub until_wall: Millis,
}

impl Default for FreshWindow {
    /// No input: time changes nothing.
    fn default() -> Self {
        FreshWindow {
            until_mono: Millis::MAX,
            from_wall: Millis::MIN,
            until_wall: Millis::MAX,
        }
    }
}

impl FreshWindow {
    /// Narrow the window, read at `now`, by one input last seen at `wall_at` (its producer's
    /// time) or scraped at `scraped_mono`, which is fresh while its age is at most
    /// `stale_after_ms` (`Now::age_ms`).
    pub fn narrow(
        &mut self,
        now: Now,
        wall_at: Millis,
        scraped_mono: Option<Millis>,
        stale_after_ms: Millis,
    ) {
        let fresh = now.age_ms(wall_at, scraped_mono) <= stale_after_ms;
        match scraped_mono {
            // The monotonic clock never goes back: a stale input stays stale.
            Some(mono) if fresh => {
                self.until_mono = self.until_mono.min(mono.saturating_add(stale_after_ms));
            }
            Some(_) => {}
            None if fresh => {
                self.until_wall = self.until_wall.min(wall_at.saturating_add(stale_after_ms));
            }
            None => {
                let first_stale = wall_at.saturating_add(stale_after_ms).saturating_add(1);
                self.from_wall = self.from_wall.max(first_stale);
            }
        }
    }

    /// Narrow the window by one input its producer declared valid until `until` (wall
    /// clock): it reads the same on whichever side of that time `now` lies.
    pub fn narrow_until(&mut self, now: Now, until: Millis) {
        if now.wall > until {
            self.from_wall = self.from_wall.max(until.saturating_add(1));
        } else {
            self.until_wall = self.until_wall.min(until);
        }
    }

    /// Whether `now` lies within the window.
    pub fn holds(&self, now: Now) -> bool {
        now.mono <= self.until_mono && (self.from_wall..=self.until_wall).contains(&now.wall)
    }
}

pub trait Clock: Send + Sync + 'static {
    /// Wall-clock time.
    fn now_ms(&self) -> Millis;
    /// Monotonic time: never goes back, whatever the wall clock does.
    fn mono_ms(&self) -> Millis;
    /// Both clocks, read together.
    fn now(&self) -> Now {
        Now {
            wall: self.now_ms(),
            mono: self.mono_ms(),
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

fn wall_now() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        wall_now()
    }

    /// Starts at the wall reading of its first use, so the two clocks read alike until the
    /// wall clock is stepped.
    fn mono_ms(&self) -> Millis {
        static START: OnceLock<(Instant, Millis)> = OnceLock::new();
        let (start, wall) = START.get_or_init(|| (Instant::now(), wall_now()));
        wall + start.elapsed().as_millis() as Millis
    }
}

/// A clock that only moves when told to, so a 30-minute scenario runs in seconds. Both clocks
/// start at the same reading; `advance` moves both, `step_wall` the wall clock alone.
#[derive(Debug)]
pub struct ManualClock {
    wall: AtomicI64,
    mono: AtomicI64,
}

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        ManualClock {
            wall: AtomicI64::new(start),
            mono: AtomicI64::new(start),
        }
    }

    /// Set the wall clock to `now`; the monotonic clock moves forward by as much, and never
    /// back (a `set` into the past is a step of the wall clock).
    pub fn set(&self, now: Millis) {
        let before = self.wall.swap(now, Ordering::SeqCst);
        self.mono
            .fetch_add(now.saturating_sub(before).max(0), Ordering::SeqCst);
    }

    /// Time moves on by `by` on both clocks; the monotonic one never goes back, so a negative
    /// `by` steps only the wall clock back.
    pub fn advance(&self, by: Millis) {
        self.wall.fetch_add(by, Ordering::SeqCst);
        self.mono.fetch_add(by.max(0), Ordering::SeqCst);
    }

    /// Step the wall clock by `by` (either way) while no time passes: what NTP or an operator
    /// does to a host's clock.
    pub fn step_wall(&self, by: Millis) {
        self.wall.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.wall.load(Ordering::SeqCst)
    }

    fn mono_ms(&self) -> Millis {
        self.mono.load(Ordering::SeqCst)
    }
}

/// RFC 3339 UTC with second precision, the form the external metrics API uses (docs/hpa-behaviour.md §2).
/// A whole second has no fraction, so `time`'s own RFC 3339 writer (which writes one only when
/// there is one) gives exactly that form; it also refuses years outside 0000–9999, which RFC 3339
/// cannot write, and those read as the epoch, as times `time` cannot hold do.
pub fn rfc3339(ms: Millis) -> String {
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
}

/// RFC 3339 UTC to the millisecond, the fraction written only when there is one (so a whole
/// second reads as [`rfc3339`] writes it). The answer history uses it: `explain` replays the
/// HPA's syncs from it, and a controller syncing every second needs more than whole seconds.
pub fn rfc3339_ms(ms: Millis) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_time_keeps_its_milliseconds_and_a_whole_second_has_no_fraction() {
        assert_eq!(rfc3339_ms(1_000_123), "1970-01-01T00:16:40.123Z");
        assert_eq!(rfc3339_ms(1_000_000), rfc3339(1_000_000));
        assert_eq!(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_ms(Millis::MAX), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn the_monotonic_clock_never_follows_the_wall_clock_back() {
        let c = ManualClock::new(1_000);
        c.advance(500);
        assert_eq!(c.now(), Now::from(1_500));
        c.step_wall(-10_000);
        c.set(c.now_ms() - 1);
        c.advance(-1);
        assert_eq!(
            c.now(),
            Now {
                wall: -8_502,
                mono: 1_500
            }
        );
        c.set(-8_000);
        c.step_wall(60_000);
        assert_eq!(
            c.now(),
            Now {
                wall: 52_000,
                mono: 2_002
            }
        );
        let s = SystemClock;
        let (a, b) = (s.mono_ms(), s.mono_ms());
        assert!(b >= a);
    }

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_032_800_123), "2026-11-30T10:00:00Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn four_digit_years_are_written_in_full() {
        assert_eq!(rfc3339(253_402_300_799_000), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339(-62_167_219_200_000), "0000-01-01T00:00:00Z");
    }

    /// RFC 3339 has four-digit years only: a time before year 0 or after 9999 is written as
    /// the epoch, never as a string the HPA's parser would refuse.
    #[test]
    fn years_rfc_3339_cannot_write_read_as_the_epoch() {
        assert_eq!(rfc3339(-62_167_219_200_001), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(253_402_300_800_000), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(Millis::MIN), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(Millis::MAX), "1970-01-01T00:00:00Z");
    }

    /// Across the whole writable range, sampled in uneven steps (about 40,000 seconds): the
    /// form is `YYYY-MM-DDTHH:MM:SSZ`, no fraction, and it reads back as the second it was
    /// written from.
    #[test]
    fn seconds_across_the_range_read_back_as_written() {
        use time::format_description::well_known::Rfc3339;
        let (first, last) = (-62_167_219_200_i64, 253_402_300_799_i64);
        let mut s = first;
        while s <= last {
            let text = rfc3339(s * 1000 + 999);
            assert_eq!(text.len(), 20, "{text}");
            assert!(text.ends_with('Z') && !text.contains('.'), "{text}");
            let back = time::OffsetDateTime::parse(&text, &Rfc3339).unwrap();
            assert_eq!(back.unix_timestamp(), s, "{text}");
            s += 7_777_777;
        }
    }

    /// Exhaustive over small clocks: the window holds at a reading exactly when every input
    /// reads as fresh or stale as it did at the start (the plain rule, `Now::age_ms`).
    #[test]
    fn a_fresh_window_holds_exactly_while_every_input_reads_alike() {
        let stale_after = 3;
        let start = Now { wall: 10, mono: 10 };
        let inputs: Vec<(Millis, Option<Millis>)> =
            (4..=16).flat_map(|t| [(t, None), (t, Some(t))]).collect();
        for a in &inputs {
            for b in &inputs {
                let mut w = FreshWindow::default();
                for &(at, mono) in [a, b] {
                    w.narrow(start, at, mono, stale_after);
                }
                let reads = |now: Now| {
                    [a, b]
                        .map(|&(at, mono)| now.age_ms(at, mono) <= stale_after)
                        .to_vec()
                };
                for mono in 10..=20 {
                    for wall in 0..=30 {
                        let now = Now { wall, mono };
                        assert_eq!(
                            w.holds(now),
                            reads(now) == reads(start),
                            "{a:?} {b:?} at {now:?}: {w:?}"
                        );
                    }
                }
            }
        }
        // The two clocks a millisecond apart: nothing read ends.
        let mut w = FreshWindow::default();
        w.narrow(start, 9, Some(9), stale_after);
        w.narrow(start, 9, None, stale_after);
        assert!(w.holds(Now { wall: 11, mono: 10 }));
    }
}
