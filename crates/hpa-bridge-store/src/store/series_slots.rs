//! Where the store keeps every series' state: one slot each, addressed by number.
//!
//! The index (postings.rs) names series by slot, so an answer reaches each in-scope series
//! directly instead of hashing its name and label set to find it again: over a large store
//! those lookups would be most of an answer's cost.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use super::SeriesState;

/// A series' place in `SeriesSlots`, valid until the series is removed.
pub(super) type SlotId = u32;

/// A set of slots, hashed by one multiplication: slot numbers are handed out here, never
/// chosen by an exporter, so they need no keyed hash against collisions, and the index asks
/// such a set about each in-scope series of every answer.
pub(super) type SlotSet = HashSet<SlotId, BuildHasherDefault<SlotHasher>>;

#[derive(Default)]
pub(super) struct SlotHasher(u64);

impl Hasher for SlotHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: spreads consecutive numbers over the high bits the table reads.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[derive(Debug, Default)]
pub(super) struct SeriesSlots {
    states: Vec<Option<SeriesState>>,
    /// Emptied slots, reused first so the table does not grow with churn.
    free: Vec<SlotId>,
}

impl SeriesSlots {
    pub(super) fn insert(&mut self, state: SeriesState) -> SlotId {
        match self.free.pop() {
            Some(id) => {
                self.states[id as usize] = Some(state);
                id
            }
            None => {
                self.states.push(Some(state));
                // Series are bounded by targets x page limits, far below u32::MAX.
                (self.states.len() - 1) as SlotId
            }
        }
    }

    pub(super) fn get(&self, id: SlotId) -> Option<&SeriesState> {
        self.states.get(id as usize).and_then(Option::as_ref)
    }

    pub(super) fn get_mut(&mut self, id: SlotId) -> Option<&mut SeriesState> {
        self.states.get_mut(id as usize).and_then(Option::as_mut)
    }

    pub(super) fn remove(&mut self, id: SlotId) -> Option<SeriesState> {
        let state = self.states.get_mut(id as usize)?.take()?;
        self.free.push(id);
        Some(state)
    }

    /// Series held, for tests of the store's upkeep.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.states.len() - self.free.len()
    }
}
