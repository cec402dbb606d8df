//! The in-scope series a source counted instead of listing, and the terms it judged them under.

use serde::Serialize;

use crate::clock::{Millis, Now};

/// In-scope series an answer did not list one by one, each of which reads as a fresh, valid
/// input at the query's time (`Summarize`): present, exported once, a valid value equal to
/// its retained value, its target not failing, and observed within `staleAfter`. Only series
/// after the first `Summarize::after` listed present ones are summarized, so a rule that notes
/// its first inputs in full notes the same ones either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanTail {
    pub series: usize,
    pub max_value: u64,
    pub newest_at_ms: Millis,
    /// The oldest of their scrape times on the monotonic clock: the summary holds only until
    /// that one turns stale.
    pub oldest_mono_ms: Millis,
    /// What the series were judged under: a rule must read them under the same terms.
    #[serde(skip)]
    pub under: Summarize,
}

impl CleanTail {
    pub fn new(under: Summarize) -> CleanTail {
        CleanTail {
            under,
            ..CleanTail::default()
        }
    }

    pub fn add(&mut self, series: usize, max_value: u64, newest_at: Millis, oldest_mono: Millis) {
        if self.series == 0 {
            self.max_value = max_value;
            self.newest_at_ms = newest_at;
            self.oldest_mono_ms = oldest_mono;
        } else {
            self.max_value = self.max_value.max(max_value);
            self.newest_at_ms = self.newest_at_ms.max(newest_at);
            self.oldest_mono_ms = self.oldest_mono_ms.min(oldest_mono);
        }
        self.series += series;
    }
}

/// When a store may summarize clean series instead of listing them (`CleanTail`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summarize {
    /// Present series listed before any is summarized: the inputs a rule notes in full.
    pub after: usize,
    pub now: Now,
    pub stale_after_ms: Millis,
}
