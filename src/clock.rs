//! Time as a parameter: the real wall clock for `serve`, a manual clock for `simulate`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> Millis;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to, so a 30-minute scenario runs in seconds.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        ManualClock(AtomicI64::new(start))
    }
    pub fn set(&self, now: Millis) {
        self.0.store(now, Ordering::SeqCst);
    }
    pub fn advance(&self, by: Millis) {
        self.0.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// RFC 3339 UTC with second precision, the form the external metrics API uses (docs/hpa-behaviour.md §2).
pub fn rfc3339(ms: Millis) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    // Every served value carries one: its digits are written in place, for the years that
    // have four (the format below writes the others).
    if (0..=9999).contains(&t.year()) {
        let mut out = [0u8; 20];
        let fields = [
            (0, 4, t.year() as u32),
            (5, 2, u32::from(u8::from(t.month()))),
            (8, 2, u32::from(t.day())),
            (11, 2, u32::from(t.hour())),
            (14, 2, u32::from(t.minute())),
            (17, 2, u32::from(t.second())),
        ];
        for (at, width, mut value) in fields {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        }
        for (at, separator) in [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'Z'),
        ] {
            out[at] = separator;
        }
        return out.iter().map(|&b| b as char).collect();
    }
    let f = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    t.format(&f)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_032_800_123), "2026-11-30T10:00:00Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn digits_written_in_place_are_what_the_format_writes() {
        let f = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
        // Steps that are not round numbers walk every field through its range, from the
        // first year to the last with four digits.
        let first = -62_167_219_200_000i64; // 0000-01-01
        let last = 253_402_300_799_000i64; // 9999-12-31T23:59:59
        let mut ms = first;
        while ms <= last {
            let t = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000)).unwrap();
            assert_eq!(rfc3339(ms), t.format(&f).unwrap(), "{ms}");
            ms += 86_399_999_937;
        }
        assert_eq!(rfc3339(last), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339(first), "0000-01-01T00:00:00Z");
        // Outside four-digit years the format writes them, as before.
        let before = first - 1000;
        let t = time::OffsetDateTime::from_unix_timestamp(before / 1000).unwrap();
        assert_eq!(rfc3339(before), t.format(&f).unwrap());
    }
}
