//! A scale event as the controller remembers it for its rate policies, and the time
//! comparisons the controller's Go code makes on such events (docs/hpa-behaviour.md §1.7.4).

use std::time::Duration;

/// A scale event kept for rate policies; `change` is positive in both lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleEvent {
    pub change: i32,
    pub at: Duration,
    pub outdated: bool,
}

/// `ts.After(now - window)` without underflow.
pub(super) fn is_after(ts: Duration, now: Duration, window: Duration) -> bool {
    ts + window > now
}

/// `ts.Before(now - window)` without underflow.
pub(super) fn is_before(ts: Duration, now: Duration, window: Duration) -> bool {
    ts + window < now
}

pub(super) fn secs(s: i32) -> Duration {
    Duration::from_secs(s.max(0) as u64)
}
