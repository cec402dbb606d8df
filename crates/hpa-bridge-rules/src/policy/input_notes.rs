//! The inputs an answer notes: every one when the answer is explained (`/status`), only the
//! first few when it is served to an HPA, with the rest counted.
//!
//! Serving is the hot path: an HPA asks about each workload every 15 s, and a note shares three of
//! the store's strings, whose reference counts sit on cold cache lines in a large store. What
//! serving keeps of its notes is the history's first few and the counts (engine/history.rs), so
//! building a note for each of hundreds of inputs would be waste. The decision never reads the
//! notes: each rule decides from the observations themselves.

use std::borrow::Cow;

use serde::Serialize;

use super::answer::{Answer, InputNote};
use super::observation::{note, QueryContext};
use crate::evidence::{CleanTail, Observation};

/// Inputs noted in full per rule while serving: as many as the history keeps of an answer.
pub const NOTES_KEPT_WHEN_SERVING: usize = 8;

/// How the inputs behind one answer were read, counted by their status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InputCounts {
    pub fresh: u32,
    pub stale: u32,
    pub retained: u32,
    pub unknown: u32,
    /// Series of an older leader epoch than the newest, never counted (epoch_fence.rs).
    #[serde(skip_serializing_if = "is_zero")]
    pub fenced: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl InputCounts {
    /// Count the inputs of an answer and of the answers it was built from, noted or not.
    pub fn of(answer: &Answer) -> InputCounts {
        let mut c = InputCounts::default();
        c.add(answer);
        c
    }

    fn add(&mut self, answer: &Answer) {
        for input in &answer.inputs {
            self.count(&input.status);
        }
        self.merge(&answer.omitted_inputs);
        for part in &answer.parts {
            self.add(part);
        }
    }

    fn count(&mut self, status: &str) {
        self.count_state(InputState::of(status));
    }

    fn count_state(&mut self, state: InputState) {
        let slot = match state {
            InputState::Fresh => &mut self.fresh,
            InputState::Stale => &mut self.stale,
            InputState::Retained => &mut self.retained,
            InputState::Fenced => &mut self.fenced,
            InputState::Unknown => &mut self.unknown,
        };
        *slot = slot.saturating_add(1);
    }

    fn merge(&mut self, other: &InputCounts) {
        self.fresh = self.fresh.saturating_add(other.fresh);
        self.stale = self.stale.saturating_add(other.stale);
        self.retained = self.retained.saturating_add(other.retained);
        self.unknown = self.unknown.saturating_add(other.unknown);
        self.fenced = self.fenced.saturating_add(other.fenced);
    }

    pub fn total(&self) -> usize {
        [
            self.fresh,
            self.stale,
            self.retained,
            self.unknown,
            self.fenced,
        ]
        .iter()
        .map(|n| *n as usize)
        .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
}

/// How an input was read, as its note's status starts: `fresh` (alone, or followed by `:` and
/// what else the rule says of it), `stale`, `retained` or `fenced`; anything else is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputState {
    Fresh,
    Stale,
    Retained,
    Fenced,
    Unknown,
}

impl InputState {
    pub fn of(status: &str) -> InputState {
        if status == "fresh" || status.starts_with("fresh:") {
            InputState::Fresh
        } else if status.starts_with("stale") {
            InputState::Stale
        } else if status.starts_with("retained") {
            InputState::Retained
        } else if status.starts_with("fenced") {
            InputState::Fenced
        } else {
            InputState::Unknown
        }
    }
}

/// Inputs noted in full by `answer` and the answers it was built from.
pub fn notes_in(answer: &Answer) -> usize {
    answer.inputs.len() + answer.parts.iter().map(notes_in).sum::<usize>()
}

/// A rule's notes: the first `QueryContext::notes_kept` in full, the rest counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InputNotes {
    pub kept: Vec<InputNote>,
    pub omitted: InputCounts,
}

impl InputNotes {
    /// Notes with room for as many as `listed` inputs yield under `q`: a served answer builds
    /// them for every rule it runs.
    pub(crate) fn for_inputs(q: &QueryContext<'_>, listed: usize) -> InputNotes {
        InputNotes {
            kept: Vec::with_capacity(q.notes_kept.min(listed)),
            omitted: InputCounts::default(),
        }
    }

    pub(crate) fn push(
        &mut self,
        q: &QueryContext<'_>,
        o: &Observation,
        status: impl Into<Cow<'static, str>>,
        used: bool,
    ) {
        if self.kept.len() < q.notes_kept {
            self.kept.push(note(q, o, status, used));
        } else {
            self.omitted.count(&status.into());
        }
    }

    /// As `push`, for a status that costs a formatted string: built only when the note is
    /// kept, and otherwise counted as `state`, which is what the status reads as.
    pub(crate) fn push_built(
        &mut self,
        q: &QueryContext<'_>,
        o: &Observation,
        state: InputState,
        used: bool,
        status: impl FnOnce() -> Cow<'static, str>,
    ) {
        if self.kept.len() < q.notes_kept {
            let status = status();
            debug_assert_eq!(InputState::of(&status), state, "{status}");
            self.kept.push(note(q, o, status, used));
        } else {
            self.omitted.count_state(state);
        }
    }

    /// Count `n` fresh, used inputs that were summarized, not listed (`Evidence::clean_tail`).
    /// The store summarizes only past the inputs a rule notes in full, so these would have
    /// been counted, not noted.
    pub(crate) fn count_fresh(&mut self, q: &QueryContext<'_>, tail: &CleanTail) {
        if tail.series == 0 {
            return;
        }
        // Summarized under other terms than the rule reads by, the series could read
        // otherwise (stale, or noted in full): the engine builds both from one request.
        debug_assert_eq!(
            (tail.under.now, tail.under.stale_after_ms, tail.under.after),
            (q.now, q.stale_after_ms, q.notes_kept)
        );
        debug_assert!(self.kept.len() >= q.notes_kept);
        self.omitted.fresh = self.omitted.fresh.saturating_add(tail.series as u32);
    }

    pub fn append(&mut self, other: InputNotes) {
        self.kept.extend(other.kept);
        self.omitted.merge(&other.omitted);
    }

    /// Inputs noted, kept or counted.
    pub fn len(&self) -> usize {
        self.kept.len() + self.omitted.total()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hand the notes to `answer`, after any it already has.
    pub fn into_answer(self, answer: &mut Answer) {
        if answer.inputs.is_empty() {
            answer.inputs = self.kept;
        } else {
            answer.inputs.extend(self.kept);
        }
        answer.omitted_inputs.merge(&self.omitted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::fixtures::{ctx, obs};

    #[test]
    fn past_the_limit_inputs_are_counted_not_noted() {
        let series = vec!["hpa_expect_replicas".to_string()];
        let mut q = ctx(&series);
        q.notes_kept = 2;
        let mut notes = InputNotes::default();
        for (status, age) in [("fresh", 0), ("fresh", 0), ("stale: 60s old", 60_000)] {
            notes.push(&q, &obs("http://a/m", 3.0, age), status, true);
        }
        notes.push(&q, &obs("http://b/m", 3.0, 0), "retained 3", true);
        assert_eq!(notes.kept.len(), 2);
        assert_eq!(notes.len(), 4);
        assert_eq!(
            notes.omitted,
            InputCounts {
                stale: 1,
                retained: 1,
                ..InputCounts::default()
            }
        );
        let mut answer = crate::policy::fixtures::rec("r", 3);
        notes.into_answer(&mut answer);
        let counts = InputCounts::of(&answer);
        assert_eq!((counts.fresh, counts.stale, counts.retained), (2, 1, 1));
    }
}
