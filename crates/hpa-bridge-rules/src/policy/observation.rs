//! What a query asked for, and how one observation reads at query time: gone, stale, invalid
//! or fresh. Every rule classifies its inputs through `read`, so "stale" and "invalid" mean
//! the same thing in every explanation.

use std::fmt::Write as _;

use super::answer::{InputNote, RawValue};
use crate::clock::{Millis, Now};
use crate::evidence::Observation;

/// What a query asked for, for messages: `namespace=default,hpa_target_name=lobby`.
#[derive(Clone, Debug)]
pub struct QueryContext<'a> {
    pub metric: &'a str,
    pub series: &'a [String],
    pub scope: ScopeText<'a>,
    /// Both clocks at the query: the wall clock for timestamps, ages by `Observation::age_ms`.
    pub now: Now,
    pub stale_after_ms: Millis,
    /// Inputs each rule notes in full (input_notes.rs): all when explaining, a few when serving.
    pub notes_kept: usize,
}

impl<'a> QueryContext<'a> {
    /// The series a reason names: the metric's first series.
    pub(crate) fn series_names(&self) -> SeriesNames<'a> {
        SeriesNames(self.series)
    }

    /// Every series name the query looked for, for a reason that says none matched.
    pub(crate) fn searched_names(&self) -> SearchedNames<'a> {
        SearchedNames(self.series)
    }
}

/// Message text kept as its parts, written in order by `each`: `Display` and
/// `reason_text::Piece` both write them, so a reason reads as the `Display` text.
pub(crate) trait TextParts {
    fn each(&self, put: impl FnMut(&str));
}

fn display_parts(parts: &impl TextParts, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    let mut written = Ok(());
    parts.each(|part| written = written.and_then(|()| f.write_str(part)));
    written
}

/// A metric's series as a reason names it: the first configured name only. Aliases are config,
/// and every input in /status names the series it was read from, so a reason that listed them all
/// would repeat them in every line of the page's "why" column. Written straight into the message:
/// reasons are built for every answer served.
#[derive(Clone, Copy, Debug)]
pub struct SeriesNames<'a>(&'a [String]);

/// Every name a query looked for, `a (or b, c)`, for reasons that say nothing matched: there the
/// aliases are the diagnosis (an exporter on an alias nobody configured).
#[derive(Clone, Copy, Debug)]
pub struct SearchedNames<'a>(&'a [String]);

impl<'a> SeriesNames<'a> {
    #[cfg(test)]
    pub(crate) fn of(names: &'a [String]) -> Self {
        SeriesNames(names)
    }
}

impl TextParts for SeriesNames<'_> {
    fn each(&self, mut put: impl FnMut(&str)) {
        if let Some(first) = self.0.first() {
            put(first);
        }
    }
}

impl std::fmt::Display for SeriesNames<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        display_parts(self, f)
    }
}

impl<'a> SearchedNames<'a> {
    #[cfg(test)]
    pub(crate) fn of(names: &'a [String]) -> Self {
        SearchedNames(names)
    }
}

impl TextParts for SearchedNames<'_> {
    fn each(&self, mut put: impl FnMut(&str)) {
        let mut names = self.0.iter();
        if let Some(first) = names.next() {
            put(first);
        }
        for (i, alias) in names.enumerate() {
            put(if i == 0 { " (or " } else { ", " });
            put(alias);
        }
        if self.0.len() > 1 {
            put(")");
        }
    }
}

impl std::fmt::Display for SearchedNames<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        display_parts(self, f)
    }
}

/// A query's scope for messages, `namespace=default,hpa_target_name=lobby`, written where it
/// is used rather than built for every rule an answer runs.
#[derive(Clone, Copy, Debug)]
pub enum ScopeText<'a> {
    /// The namespace label, the namespace and the selector text.
    Parts(&'a str, &'a str, &'a str),
    /// Text as it is (tests, and scopes described elsewhere).
    Text(&'a str),
}

impl<'a> From<&'a str> for ScopeText<'a> {
    fn from(text: &'a str) -> Self {
        ScopeText::Text(text)
    }
}

impl TextParts for ScopeText<'_> {
    fn each(&self, mut put: impl FnMut(&str)) {
        match *self {
            ScopeText::Parts(label, namespace, selector) => {
                put(label);
                put("=");
                put(namespace);
                if !selector.is_empty() {
                    put(",");
                    put(selector);
                }
            }
            ScopeText::Text(text) => put(text),
        }
    }
}

impl std::fmt::Display for ScopeText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        display_parts(self, f)
    }
}

/// Why a stale input is stale, for messages: `45s old (staleAfter 30s)`, or that its producer's
/// `validUntil` has passed.
pub(crate) struct StaleText<'a>(pub &'a QueryContext<'a>, pub &'a Observation);

impl std::fmt::Display for StaleText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let StaleText(q, o) = *self;
        match o.valid_until_ms.filter(|_| o.expired(q.now)) {
            Some(until) => write!(
                f,
                "past the validUntil its producer gave, by {:.0}s",
                age_s(q.now.wall - until)
            ),
            None => write!(
                f,
                "{:.0}s old (staleAfter {})",
                age_s(o.age_ms(q.now)),
                fmt_limit(q.stale_after_ms)
            ),
        }
    }
}

/// An age in seconds, for messages.
pub(crate) fn age_s(age_ms: Millis) -> f64 {
    (age_ms.max(0) as f64) / 1000.0
}

/// `45s`, or `1.5s` when the limit is not whole seconds.
pub(crate) fn fmt_limit(ms: Millis) -> String {
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

pub(crate) fn fmt_value(v: f64) -> String {
    RawValue(v).to_string()
}

pub(crate) fn note(
    q: &QueryContext<'_>,
    o: &Observation,
    status: impl Into<std::borrow::Cow<'static, str>>,
    used: bool,
) -> InputNote {
    InputNote {
        id: o.id.clone(),
        value: RawValue(o.value),
        age_seconds: age_s(o.age_ms(q.now)),
        status: status.into(),
        used,
    }
}

pub(crate) fn target_list(ids: impl Iterator<Item = String>) -> String {
    let ids: Vec<String> = ids.collect();
    let shown: Vec<&str> = ids.iter().take(3).map(String::as_str).collect();
    let mut s = shown.join(", ");
    if ids.len() > 3 {
        let _ = write!(s, " and {} more", ids.len() - 3);
    }
    s
}

/// Why a series exported twice in one page is not used: which of its values is meant is
/// unknown, and unknown input never lowers an answer.
pub const DUPLICATED: &str = hpa_bridge_exposition::Unusable::Duplicated.why();

/// How one observation reads at query time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reading {
    /// The series is no longer exported by its target.
    Gone,
    /// Older than `staleAfter`, or past the `validUntil` its producer gave.
    Stale { age_ms: Millis },
    /// Fresh, or exported out of order, but the value cannot be used (the reason says why).
    Invalid(&'static str),
    /// Fresh and usable.
    Fresh(f64),
}

/// Classify `o` for query `q`; `invalid` says why a fresh value cannot be used, if it cannot.
pub fn read(
    q: &QueryContext<'_>,
    o: &Observation,
    invalid: fn(f64) -> Option<&'static str>,
) -> Reading {
    if !o.present {
        return Reading::Gone;
    }
    // An out-of-order sample leaves the series' time at the newer one it held, so its age says
    // nothing of what the producer sends now: read by age, the series would turn stale and
    // offer a retained value lower than the one it exports.
    if let Some(u) = o.unusable.filter(|u| u.keeps_held_time()) {
        return Reading::Invalid(u.why());
    }
    let age_ms = o.age_ms(q.now);
    if age_ms > q.stale_after_ms || o.expired(q.now) {
        Reading::Stale { age_ms }
    } else if let Some(u) = o.unusable {
        Reading::Invalid(u.why())
    } else if let Some(why) = invalid(o.value) {
        Reading::Invalid(why)
    } else {
        Reading::Fresh(o.value)
    }
}
