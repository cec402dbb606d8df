//! A prediction against what the HPA then did. The HPA's status does not say when it last
//! synced, so a prediction is checked once, just after the sync it is about is due: the HPA's
//! `status.desiredReplicas` then is that sync's count. An HPA that did not sync at all (a
//! paused controller, a broken RBAC) keeps its old count, which misses whenever a change was
//! predicted.

use serde::Serialize;

use hpa_bridge_rules::clock::{rfc3339, Millis};

/// How long after a sync is due its result is read, at most: the controller writes its status
/// within a few hundred milliseconds of a sync. At most half a period, so that the check reads
/// the sync it is about and not the one after.
pub const SETTLE_MS: Millis = 3_000;

/// A prediction waiting for the sync it is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub desired: i32,
    /// When that sync is due.
    pub due_ms: Millis,
    /// The HPA's sync period.
    pub period_ms: Millis,
}

impl Pending {
    /// When the sync it is about has happened and settled.
    pub fn ripe_at(&self) -> Millis {
        self.due_ms + SETTLE_MS.min(self.period_ms / 2)
    }

    pub fn ripe(&self, now_ms: Millis) -> bool {
        now_ms >= self.ripe_at()
    }
}

/// What the HPA did with the predictions checked so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PredictionCheck {
    /// The newest prediction checked, and what the HPA set.
    pub predicted: Option<i32>,
    pub actual: Option<i32>,
    /// When it was checked (RFC 3339).
    pub checked_at: Option<String>,
    pub hits: u64,
    pub misses: u64,
    /// Checked syncs in a row that missed; 0 after a hit.
    pub misses_in_a_row: u32,
}

impl PredictionCheck {
    /// Check `pending` against the `desiredReplicas` the HPA shows at `now_ms`; whether it hit.
    pub fn record(&mut self, pending: Pending, actual: i32, now_ms: Millis) -> bool {
        let hit = pending.desired == actual;
        self.predicted = Some(pending.desired);
        self.actual = Some(actual);
        self.checked_at = Some(rfc3339(now_ms));
        if hit {
            self.hits += 1;
            self.misses_in_a_row = 0;
        } else {
            self.misses += 1;
            self.misses_in_a_row += 1;
        }
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prediction_ripens_after_its_sync_settles_and_misses_count_in_a_row() {
        let p = Pending {
            desired: 4,
            due_ms: 10_000,
            period_ms: 15_000,
        };
        assert!(!p.ripe(10_000));
        assert!(!p.ripe(10_000 + SETTLE_MS - 1));
        assert!(p.ripe(10_000 + SETTLE_MS));
        // A one-second period is read half a period after the sync, before the next one.
        let fast = Pending {
            period_ms: 1_000,
            ..p
        };
        assert_eq!(fast.ripe_at(), 10_500);
        let mut c = PredictionCheck::default();
        assert!(!c.record(p, 3, 13_000));
        assert!(!c.record(p, 5, 28_000));
        assert_eq!((c.misses, c.misses_in_a_row, c.hits), (2, 2, 0));
        assert_eq!((c.predicted, c.actual), (Some(4), Some(5)));
        assert!(c.record(p, 4, 43_000));
        assert_eq!((c.misses, c.misses_in_a_row, c.hits), (2, 0, 1));
        assert_eq!(c.checked_at.as_deref(), Some("1970-01-01T00:00:43Z"));
    }
}
