//! Who may write deletion costs: leader election on a `coordination.k8s.io/v1` Lease, decided
//! as client-go's `leaderelection` with a `LeaseLock` decides it (docs/deletion-cost.md, "One
//! writer"). Pure: the lease as read and the clocks come in, the write to send goes out; the
//! reading and writing live in `lease.rs`.
//!
//! The rules, and why:
//! - A candidate takes a lease held by another only once it has seen the same record, unchanged,
//!   for the record's `leaseDurationSeconds` on its own monotonic clock. The `renewTime` in the
//!   record is another node's wall clock and is never compared with this one, so skew between
//!   nodes does not matter (only a difference in their clocks' rates does).
//! - A lease with no holder (released, or never held) may be taken at once.
//! - Every write replaces the record read, carrying its `resourceVersion`: of two candidates
//!   the API server accepts one and answers the other 409 Conflict.
//! - The holder leads only while its last successful renewal was sent less than `renewDeadline`
//!   ago. `renewDeadline < leaseDuration`, so it stops before any candidate may take over.

use hpa_bridge_rules::clock::{Millis, Now};

/// The Lease's spec as the election reads and writes it (client-go's `LeaderElectionRecord`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `holderIdentity`; empty when nobody holds the lease.
    pub holder: String,
    /// `leaseDurationSeconds`: how long a candidate waits, on its own clock, for a renewal.
    pub duration_s: i32,
    /// `acquireTime` (wall clock of the replica that took the lease); shown, never compared.
    pub acquire_ms: Option<Millis>,
    /// `renewTime` (wall clock of the holder); shown, never compared.
    pub renew_ms: Option<Millis>,
    /// `leaseTransitions`: incremented at each change of holder.
    pub transitions: i32,
}

/// The write a round calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No lease exists: create it, held by this replica.
    Create(LeaseRecord),
    /// Replace the lease just read with this record, carrying its `resourceVersion`: a renewal
    /// when this replica holds it, else taking it over.
    Replace(LeaseRecord),
    /// Another replica holds the lease and it has not expired by this replica's observation.
    Wait,
}

/// One replica's view of the election.
#[derive(Clone, Debug)]
pub struct Election {
    identity: String,
    duration_s: i32,
    renew_deadline_ms: Millis,
    /// The record last read or written, and the monotonic time this replica first saw it.
    observed: Option<(LeaseRecord, Millis)>,
    /// When (monotonic) the last successful write that made or kept this replica the holder
    /// was sent: the server may have applied it at any moment after.
    renewed_mono: Option<Millis>,
}

impl Election {
    /// `duration_s` is written into the lease as `leaseDurationSeconds`.
    pub fn new(identity: String, duration_s: i32, renew_deadline_ms: Millis) -> Election {
        Election {
            identity,
            duration_s,
            renew_deadline_ms,
            observed: None,
            renewed_mono: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The holder as this replica last saw the lease (`None`: nobody, or not read yet).
    pub fn holder(&self) -> Option<&str> {
        self.observed
            .as_ref()
            .map(|(r, _)| r.holder.as_str())
            .filter(|h| !h.is_empty())
    }

    /// Whether this replica may write now: it holds the lease, and its last renewal was sent
    /// less than `renewDeadline` ago.
    pub fn leading(&self, now_mono: Millis) -> bool {
        self.lead_left_ms(now_mono).is_some()
    }

    /// How much longer this replica leads without another renewal, while it leads.
    pub fn lead_left_ms(&self, now_mono: Millis) -> Option<Millis> {
        self.renewed_mono
            .map(|at| at + self.renew_deadline_ms - now_mono)
            .filter(|left| *left > 0)
    }

    /// What to write, having read `current` (`None`: the lease does not exist) at `now`.
    pub fn step(&mut self, current: Option<&LeaseRecord>, now: Now) -> Step {
        let Some(current) = current else {
            // A lease that is gone is held by nobody, this replica included.
            self.renewed_mono = None;
            self.observed = None;
            return Step::Create(self.record(now, None));
        };
        // Expiry is timed from when this replica first saw this exact record: any change
        // (a renewal moves renewTime) starts the wait again.
        let observed_at = match &self.observed {
            Some((seen, at)) if seen == current => *at,
            _ => now.mono,
        };
        self.observed = Some((current.clone(), observed_at));
        if current.holder == self.identity {
            return Step::Replace(self.record(now, Some(current)));
        }
        // Someone else's name is on the lease: this replica does not lead, whatever it wrote.
        self.renewed_mono = None;
        let expires = observed_at + Millis::from(current.duration_s) * 1000;
        if !current.holder.is_empty() && now.mono < expires {
            return Step::Wait;
        }
        Step::Replace(self.record(now, Some(current)))
    }

    /// The record this replica writes to hold the lease: a renewal keeps `acquireTime` and the
    /// transition count; taking it from another (or from nobody) starts a new term.
    fn record(&self, now: Now, current: Option<&LeaseRecord>) -> LeaseRecord {
        match current {
            Some(c) if c.holder == self.identity => LeaseRecord {
                holder: self.identity.clone(),
                duration_s: self.duration_s,
                acquire_ms: c.acquire_ms,
                renew_ms: Some(now.wall),
                transitions: c.transitions,
            },
            _ => LeaseRecord {
                holder: self.identity.clone(),
                duration_s: self.duration_s,
                acquire_ms: Some(now.wall),
                renew_ms: Some(now.wall),
                transitions: current.map_or(0, |c| c.transitions.saturating_add(1)),
            },
        }
    }

    /// A write sent at `sent_mono` was accepted; the server holds `written` from `now_mono`.
    pub fn written(&mut self, written: LeaseRecord, sent_mono: Millis, now_mono: Millis) {
        self.renewed_mono = (written.holder == self.identity).then_some(sent_mono);
        self.observed = Some((written, now_mono));
    }

    /// A write was refused. A 409 Conflict (`conflict`) means the lease changed since it was
    /// read, most likely another replica took it: stop leading at once, and let the next read
    /// tell. Any other failure keeps a holder leading until its renew deadline.
    pub fn refused(&mut self, conflict: bool) {
        if conflict {
            self.renewed_mono = None;
        }
    }

    /// The record that gives the lease up on a clean shutdown (client-go's `ReleaseOnCancel`):
    /// no holder, so a candidate takes it at once; `None` when this replica does not hold the
    /// lease it last saw. Stops leading at once.
    pub fn release(&mut self, now: Now) -> Option<LeaseRecord> {
        self.renewed_mono = None;
        let (seen, _) = self.observed.as_ref()?;
        (seen.holder == self.identity).then(|| LeaseRecord {
            holder: String::new(),
            duration_s: 1,
            acquire_ms: Some(now.wall),
            renew_ms: Some(now.wall),
            transitions: seen.transitions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DURATION_S: i32 = 15;
    const DEADLINE_MS: Millis = 10_000;

    fn me() -> Election {
        Election::new("me_1".into(), DURATION_S, DEADLINE_MS)
    }

    /// Wall and monotonic clocks far apart, so a rule that mixes them shows.
    fn at(mono: Millis) -> Now {
        Now {
            wall: 1_700_000_000_000 + mono,
            mono,
        }
    }

    fn held_by(holder: &str, renew_ms: Millis, transitions: i32) -> LeaseRecord {
        LeaseRecord {
            holder: holder.into(),
            duration_s: DURATION_S,
            acquire_ms: Some(1_000),
            renew_ms: Some(renew_ms),
            transitions,
        }
    }

    fn replaced(step: Step) -> LeaseRecord {
        match step {
            Step::Replace(r) => r,
            other => panic!("expected a replace, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_lease_is_created_held_by_this_replica() {
        let mut e = me();
        let Step::Create(r) = e.step(None, at(5)) else {
            panic!("expected a create")
        };
        assert_eq!(
            r,
            LeaseRecord {
                holder: "me_1".into(),
                duration_s: DURATION_S,
                acquire_ms: Some(at(5).wall),
                renew_ms: Some(at(5).wall),
                transitions: 0,
            }
        );
        assert!(!e.leading(5), "not before the create is accepted");
        e.written(r, 5, 7);
        assert!(e.leading(7));
        assert_eq!(e.holder(), Some("me_1"));
    }

    #[test]
    fn a_lease_with_no_holder_is_taken_at_once_and_counts_a_transition() {
        let mut e = me();
        let released = LeaseRecord {
            holder: String::new(),
            duration_s: 1,
            transitions: 4,
            ..LeaseRecord::default()
        };
        let r = replaced(e.step(Some(&released), at(0)));
        assert_eq!(r.holder, "me_1");
        assert_eq!(r.transitions, 5);
        assert_eq!(r.acquire_ms, Some(at(0).wall));
        assert_eq!(e.holder(), None);
    }

    #[test]
    fn the_holder_renews_keeping_its_acquire_time_and_the_transition_count() {
        let mut e = me();
        let mine = held_by("me_1", 123, 7);
        let r = replaced(e.step(Some(&mine), at(50)));
        assert_eq!(r.acquire_ms, Some(1_000));
        assert_eq!(r.renew_ms, Some(at(50).wall));
        assert_eq!(r.transitions, 7);
        assert_eq!(r.duration_s, DURATION_S);
    }

    #[test]
    fn another_holder_is_waited_for_until_the_record_is_unchanged_for_its_duration() {
        let mut e = me();
        let theirs = held_by("other_2", 0, 3);
        assert_eq!(e.step(Some(&theirs), at(100)), Step::Wait);
        assert_eq!(e.holder(), Some("other_2"));
        assert_eq!(e.step(Some(&theirs), at(100 + 14_999)), Step::Wait);
        let r = replaced(e.step(Some(&theirs), at(100 + 15_000)));
        assert_eq!(r.holder, "me_1");
        assert_eq!(r.transitions, 4, "a change of holder is counted");
        assert_eq!(r.acquire_ms, Some(at(15_100).wall));
    }

    #[test]
    fn expiry_is_timed_on_this_replicas_clock_never_from_the_records_renew_time() {
        // The record says it was renewed long ago by its holder's (skewed) wall clock; this
        // replica has only just seen it, so it waits the whole duration.
        let mut e = me();
        let old = held_by("other_2", 0, 0);
        assert_eq!(e.step(Some(&old), at(1_000_000)), Step::Wait);
        // And a renewTime in this replica's future does not extend the wait.
        let mut e = me();
        let future = held_by("other_2", at(10_000_000).wall, 0);
        assert_eq!(e.step(Some(&future), at(0)), Step::Wait);
        assert!(matches!(
            e.step(Some(&future), at(15_000)),
            Step::Replace(_)
        ));
    }

    #[test]
    fn a_changed_record_starts_the_wait_again() {
        let mut e = me();
        assert_eq!(e.step(Some(&held_by("other_2", 1, 0)), at(0)), Step::Wait);
        // The holder renewed (renewTime moved) just before the wait ran out.
        let renewed = held_by("other_2", 2, 0);
        assert_eq!(e.step(Some(&renewed), at(14_000)), Step::Wait);
        assert_eq!(e.step(Some(&renewed), at(28_999)), Step::Wait);
        assert!(matches!(
            e.step(Some(&renewed), at(29_000)),
            Step::Replace(_)
        ));
    }

    #[test]
    fn the_records_duration_governs_the_wait_not_this_replicas() {
        let mut e = me();
        let long = LeaseRecord {
            duration_s: 60,
            ..held_by("other_2", 0, 0)
        };
        assert_eq!(e.step(Some(&long), at(0)), Step::Wait);
        assert_eq!(e.step(Some(&long), at(59_999)), Step::Wait);
        assert!(matches!(e.step(Some(&long), at(60_000)), Step::Replace(_)));
    }

    #[test]
    fn the_leader_stops_when_no_renewal_succeeded_within_the_renew_deadline() {
        let mut e = me();
        let r = replaced(e.step(Some(&held_by("me_1", 0, 0)), at(1_000)));
        e.written(r, 1_000, 1_200);
        assert!(e.leading(1_000 + DEADLINE_MS - 1));
        // Failures other than a conflict keep the term until the deadline.
        e.refused(false);
        assert!(e.leading(1_000 + DEADLINE_MS - 1));
        assert!(
            !e.leading(1_000 + DEADLINE_MS),
            "timed from when the renewal was sent, not answered"
        );
        // What a patch may wait for: the rest of the term, none past it.
        assert_eq!(e.lead_left_ms(1_200), Some(DEADLINE_MS - 200));
        assert_eq!(e.lead_left_ms(1_000 + DEADLINE_MS - 1), Some(1));
        assert_eq!(e.lead_left_ms(1_000 + DEADLINE_MS), None);
    }

    #[test]
    fn a_conflict_ends_the_term_at_once() {
        let mut e = me();
        let r = replaced(e.step(Some(&held_by("me_1", 0, 0)), at(0)));
        e.written(r, 0, 0);
        assert!(e.leading(1));
        e.refused(true);
        assert!(!e.leading(1));
    }

    #[test]
    fn a_conflict_on_taking_over_leaves_this_replica_a_candidate() {
        let mut e = me();
        let free = LeaseRecord::default();
        let _ = replaced(e.step(Some(&free), at(0)));
        e.refused(true);
        assert!(!e.leading(1));
        // The winner's record is new to this replica: it waits the whole duration for it.
        assert_eq!(e.step(Some(&held_by("other_2", 5, 1)), at(10)), Step::Wait);
        assert_eq!(e.holder(), Some("other_2"));
    }

    #[test]
    fn reading_another_holder_ends_the_term_before_the_deadline() {
        let mut e = me();
        let r = replaced(e.step(Some(&held_by("me_1", 0, 0)), at(0)));
        e.written(r, 0, 0);
        assert_eq!(e.step(Some(&held_by("other_2", 5, 1)), at(100)), Step::Wait);
        assert!(!e.leading(100));
        // So does finding the lease deleted.
        let mut e = me();
        let r = replaced(e.step(Some(&held_by("me_1", 0, 0)), at(0)));
        e.written(r, 0, 0);
        assert!(matches!(e.step(None, at(100)), Step::Create(_)));
        assert!(!e.leading(100));
    }

    #[test]
    fn release_clears_the_holder_and_keeps_the_transition_count() {
        let mut e = me();
        let r = replaced(e.step(Some(&held_by("me_1", 0, 6)), at(0)));
        e.written(r, 0, 0);
        let released = e.release(at(500)).expect("this replica holds it");
        assert_eq!(released.holder, "");
        assert_eq!(released.transitions, 6);
        assert!(!e.leading(501));
        // Nothing to release when another holds the lease.
        let mut e = me();
        assert_eq!(e.step(Some(&held_by("other_2", 0, 0)), at(0)), Step::Wait);
        assert_eq!(e.release(at(1)), None);
    }

    #[test]
    fn a_written_record_is_the_new_observation() {
        // After its own write, a replica that is not the holder (it released) times a later
        // takeover of the unchanged record from the write.
        let mut e = me();
        let r = replaced(e.step(Some(&held_by("me_1", 0, 0)), at(0)));
        e.written(r.clone(), 0, 10);
        assert_eq!(e.holder(), Some("me_1"));
        let released = e.release(at(20)).unwrap();
        e.written(released.clone(), 20, 30);
        assert!(!e.leading(31));
        assert_eq!(e.holder(), None);
        assert!(matches!(e.step(Some(&released), at(40)), Step::Replace(_)));
    }
}
