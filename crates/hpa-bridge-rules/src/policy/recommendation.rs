//! The recommendation rule: the max over fresh series, never the sum.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::answer::*;
use super::input_notes::InputNotes;
use super::observation::*;
use super::producer_quote::{attach, quote_producers};
use super::reason_text::reason;
use crate::clock::Millis;
use crate::config::MetricKind;
use crate::evidence::{invalid_reason, Evidence, Observation};

const RULE: &str = "max over fresh series (never sum)";

/// An absolute replica recommendation: the max over fresh, valid series, never the sum.
///
/// Several series per workload are normal: a former controller keeps exporting its last value
/// (docs/hpa-behaviour.md §4.1), and the HPA would sum every item it receives (§1.2), so exactly one
/// value, the max, is served. A series that is unknown (stale or invalid) and might hold a
/// higher value than the fresh max blocks the answer: serving the lower fresh max would let
/// partial data shrink the workload.
pub(super) fn max_over_fresh(q: &QueryContext<'_>, ev: &Evidence) -> Answer {
    max_rule(q, ev, ev.observations.iter(), RULE, None)
}

/// The newest epoch of a fenced answer, for its messages.
pub(super) struct Epoch<'a> {
    pub(super) label: &'a str,
    pub(super) newest: u64,
    /// Series of older epochs, fenced.
    pub(super) fenced: usize,
}

impl Epoch<'_> {
    /// The inputs a reason cites: `rec at master_epoch 4`.
    pub(super) fn series_text(&self, q: &QueryContext<'_>) -> String {
        format!("{} at {} {}", q.series_names(), self.label, self.newest)
    }

    /// Say how many series were fenced, after a reason.
    pub(super) fn note_fenced(&self, reason: &mut String) {
        if self.fenced > 0 {
            let _ = write!(reason, "; {} series of older epochs fenced", self.fenced);
        }
    }
}

/// How an input reads, as its note says it.
pub(super) fn status_text(
    q: &QueryContext<'_>,
    o: &Observation,
    reading: Reading,
) -> Cow<'static, str> {
    match reading {
        Reading::Stale { .. } => format!(
            "stale: {}{}",
            StaleText(q, o),
            if o.target_failing {
                ", target failing"
            } else {
                ""
            }
        )
        .into(),
        Reading::Invalid(why) => format!("invalid: {why}").into(),
        Reading::Fresh(_) | Reading::Gone => Cow::Borrowed("fresh"),
    }
}

/// The series names a reason cites: with fencing, those of the newest epoch.
enum Inputs<'a> {
    All(SeriesNames<'a>),
    OfEpoch(String),
}

impl TextParts for Inputs<'_> {
    fn each(&self, mut put: impl FnMut(&str)) {
        match self {
            Inputs::All(names) => names.each(put),
            Inputs::OfEpoch(text) => put(text),
        }
    }
}

impl std::fmt::Display for Inputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inputs::All(names) => names.fmt(f),
            Inputs::OfEpoch(text) => f.write_str(text),
        }
    }
}

/// The max over `observations` (all of the evidence's, or the newest epoch's), with the
/// evidence's summarized tail and unknown targets.
pub(super) fn max_rule<'o>(
    q: &QueryContext<'_>,
    ev: &Evidence,
    observations: impl ExactSizeIterator<Item = &'o Observation>,
    rule: &'static str,
    epoch: Option<&Epoch<'_>>,
) -> Answer {
    let mut inputs = InputNotes::for_inputs(q, observations.len());
    let tally = Tally::read(q, ev, observations, &mut inputs);
    let names = match epoch {
        None => Inputs::All(q.series_names()),
        Some(e) => Inputs::OfEpoch(e.series_text(q)),
    };
    let mut answer = if tally.present() == 0 {
        no_series(q, ev, tally.gone, rule)
    } else if let Some((best, _)) = tally.best {
        fresh_max(q, ev, &tally, best, &names, rule)
    } else if !tally.stale.is_empty() {
        all_stale(q, ev, &tally, &names, rule, epoch.is_some())
    } else {
        all_invalid(q, ev, &tally, &names, rule)
    };
    attach(&mut answer, ev);
    if let Some(e) = epoch {
        e.note_fenced(&mut answer.reason);
    }
    inputs.into_answer(&mut answer);
    answer
}

const KIND: MetricKind = MetricKind::Recommendation;

/// What the inputs read: the fresh max and when it was observed, and the inputs that are not
/// fresh, each read once.
struct Tally<'o> {
    listed: usize,
    best: Option<(u64, Millis)>,
    newest_used: Millis,
    stale: Vec<&'o Observation>,
    invalid: Vec<(&'o Observation, &'static str)>,
    gone: usize,
    fresh: usize,
    /// Series the store summarized: fresh and valid, and counted in `fresh`.
    summarized: usize,
}

impl<'o> Tally<'o> {
    /// One reading per input both decides and notes it in `inputs`.
    fn read(
        q: &QueryContext<'_>,
        ev: &Evidence,
        observations: impl ExactSizeIterator<Item = &'o Observation>,
        inputs: &mut InputNotes,
    ) -> Tally<'o> {
        let mut t = Tally {
            listed: observations.len(),
            best: None,
            newest_used: Millis::MIN,
            stale: Vec::new(),
            invalid: Vec::new(),
            gone: 0,
            fresh: 0,
            summarized: 0,
        };
        for o in observations {
            let reading = read(q, o, invalid_reason);
            match reading {
                Reading::Gone => {
                    t.gone += 1;
                    continue;
                }
                Reading::Stale { .. } => t.stale.push(o),
                Reading::Invalid(why) => t.invalid.push((o, why)),
                Reading::Fresh(value) => t.count_fresh(value as u64, o.observed_at_ms, 1),
            }
            let status = status_text(q, o, reading);
            inputs.push(q, o, status, matches!(reading, Reading::Fresh(_)));
        }
        // Series the store summarized read as fresh and valid, as each would above.
        let tail = ev.clean_tail.unwrap_or_default();
        if tail.series > 0 {
            t.count_fresh(tail.max_value, tail.newest_at_ms, tail.series);
            t.summarized = tail.series;
            inputs.count_fresh(q, &tail);
        }
        t
    }

    fn count_fresh(&mut self, value: u64, at_ms: Millis, series: usize) {
        self.fresh += series;
        if self.best.is_none_or(|(b, _)| value > b) {
            self.best = Some((value, at_ms));
        }
        self.newest_used = self.newest_used.max(at_ms);
    }

    /// The series still exported, listed or summarized.
    fn present(&self) -> usize {
        self.listed - self.gone + self.summarized
    }
}

/// No series in scope: nothing to take the max of.
fn no_series(q: &QueryContext<'_>, ev: &Evidence, gone: usize, rule: &'static str) -> Answer {
    let mut reason = format!("no series of {} match {}", q.searched_names(), q.scope);
    if gone > 0 {
        let _ = write!(
            reason,
            " ({gone} series are no longer exported by their targets)"
        );
    }
    let unknown = ev.unknown_targets.iter();
    if unknown.clone().next().is_some() {
        let _ = write!(
            reason,
            "; {} target(s) that may export them have never been scraped successfully: {}",
            unknown.clone().count(),
            target_list(unknown.map(|t| t.target.to_string()))
        );
        Answer::refused(q.metric, KIND, RefusalKind::Partial, None, rule, reason)
    } else {
        Answer::refused(q.metric, KIND, RefusalKind::NoMatch, None, rule, reason)
    }
}

/// A fresh max: served, unless an input that is not known could be higher (docs/unknown-input.md):
/// an invalid one, a stale one whose last value was higher, or a target never scraped.
fn fresh_max(
    q: &QueryContext<'_>,
    ev: &Evidence,
    t: &Tally<'_>,
    best: u64,
    names: &Inputs<'_>,
    rule: &'static str,
) -> Answer {
    let blockers_stale: Vec<&Observation> = t
        .stale
        .iter()
        .copied()
        .filter(|o| o.last_valid.is_none_or(|(v, _)| v > best))
        .collect();
    // A target never scraped since this process started may export any value: one it
    // exported before a restart, higher than the fresh max, is not known to be gone. A
    // never-scraped pod of a workload none of whose pods carries a series in scope is
    // not among them (the store leaves it out, or counts it in `unknown_bystanders`, a
    // floor's only): it keeps the answer live when an unrelated pod fails for good, at the
    // cost docs/unknown-input.md states.
    let unknown = ev.unknown_targets.iter();
    if t.invalid.is_empty() && blockers_stale.is_empty() && unknown.clone().next().is_none() {
        let mut reason = if t.fresh == 1 {
            reason!(
                "1 fresh series of ",
                *names,
                " matches ",
                q.scope,
                ": value ",
                best
            )
        } else {
            reason!(
                "max of ",
                t.fresh,
                " fresh series of ",
                *names,
                " matching ",
                q.scope,
                " is ",
                best
            )
        };
        if !t.stale.is_empty() {
            let _ = write!(
                reason,
                "; {} stale series ignored, all with lower last values",
                t.stale.len()
            );
        }
        return Answer::valued(q.metric, KIND, best, t.newest_used, rule, reason);
    }
    let mut why = Vec::new();
    for (o, reason) in &t.invalid {
        why.push(format!(
            "{} from {} is {} ({})",
            o.id.series,
            o.id.target,
            fmt_value(o.value),
            reason
        ));
    }
    for o in &blockers_stale {
        why.push(format!(
            "{} from {} is {} with last value {}",
            o.id.series,
            o.id.target,
            StaleText(q, o),
            o.last_valid
                .map(|(v, _)| v.to_string())
                .unwrap_or_else(|| "unknown".into())
        ));
    }
    let never = unknown.clone().count();
    if never > 0 {
        why.push(format!(
            "{never} target(s) that may export them have never been scraped successfully: {}",
            target_list(unknown.map(|t| match &t.last_error {
                Some(e) => format!("{} ({e})", t.target),
                None => format!("{} (not scraped yet)", t.target),
            }))
        ));
    }
    let mut reason = format!(
        "the fresh max of {} for {} is {best}, but {}: serving {best} could shrink the workload on unknown input",
        names,
        q.scope,
        why.join("; ")
    );
    let causes = t.invalid.iter().map(|(o, _)| *o);
    let causes = causes.chain(blockers_stale.iter().copied());
    quote_producers(&mut reason, ev, causes.map(|o| &o.id.target));
    Answer::refused(
        q.metric,
        KIND,
        RefusalKind::Partial,
        Some(best),
        rule,
        reason,
    )
}

/// No fresh input and some stale: the newest known state is too old to serve.
fn all_stale(
    q: &QueryContext<'_>,
    ev: &Evidence,
    t: &Tally<'_>,
    names: &Inputs<'_>,
    rule: &'static str,
    fenced: bool,
) -> Answer {
    let youngest = t.stale.iter().map(|o| o.age_ms(q.now)).min().unwrap_or(0);
    let expired = t.stale.iter().filter(|o| o.expired(q.now)).count();
    let mut reason = format!(
        "{} series of {} match {} but the newest is {:.0}s old (staleAfter {}){}{}{}",
        t.stale.len(),
        names,
        q.scope,
        age_s(youngest),
        fmt_limit(q.stale_after_ms),
        if expired > 0 {
            format!(", and {expired} are past the validUntil their producer gave")
        } else {
            String::new()
        },
        if t.invalid.is_empty() {
            String::new()
        } else {
            format!(", and {} series not stale are invalid", t.invalid.len())
        },
        if fenced {
            ": the newest leader's state is unknown"
        } else {
            ""
        }
    );
    let causes = t
        .stale
        .iter()
        .copied()
        .chain(t.invalid.iter().map(|(o, _)| *o));
    quote_producers(&mut reason, ev, causes.map(|o| &o.id.target));
    Answer::refused(q.metric, KIND, RefusalKind::Stale, None, rule, reason)
}

/// Every input that is not stale is invalid, and none is stale.
fn all_invalid(
    q: &QueryContext<'_>,
    ev: &Evidence,
    t: &Tally<'_>,
    names: &Inputs<'_>,
    rule: &'static str,
) -> Answer {
    let mut reason = format!(
        "every series of {} matching {} that is not stale is invalid: {}",
        names,
        q.scope,
        t.invalid
            .iter()
            .map(|(o, why)| format!("{} from {} ({why})", fmt_value(o.value), o.id.target))
            .collect::<Vec<_>>()
            .join(", ")
    );
    quote_producers(&mut reason, ev, t.invalid.iter().map(|(o, _)| &o.id.target));
    Answer::refused(q.metric, KIND, RefusalKind::Invalid, None, rule, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{TargetId, UnknownTarget};
    use crate::policy::fixtures::*;
    use crate::policy::recommendation;

    #[test]
    fn recommendation_is_max_never_sum() {
        let s = series();
        let a = recommendation(
            &ctx(&s),
            &ev(vec![obs("a", 3.0, 0), obs("b", 7.0, 1000)]),
            None,
        );
        assert_eq!(a.value(), Some(7));
        assert_eq!(
            a.reason,
            "max of 2 fresh series of hpa_expect_replicas matching \
             namespace=default,hpa_target_name=lobby is 7"
        );
    }

    #[test]
    fn all_stale_is_refused_with_age() {
        let s = series();
        let a = recommendation(
            &ctx(&s),
            &ev(vec![obs("a", 3.0, 93_000), obs("b", 4.0, 100_000)]),
            None,
        );
        assert_eq!(a.refusal(), Some(RefusalKind::Stale));
        assert_eq!(
            a.reason,
            "2 series of hpa_expect_replicas match namespace=default,hpa_target_name=lobby but the newest is 93s old (staleAfter 45s)"
        );
    }

    #[test]
    fn a_stale_series_that_may_be_higher_blocks() {
        let s = series();
        let a = recommendation(
            &ctx(&s),
            &ev(vec![obs("a", 3.0, 0), obs("b", 9.0, 60_000)]),
            None,
        );
        assert_eq!(a.refusal(), Some(RefusalKind::Partial));
        assert!(a.reason.contains("last value 9"), "{}", a.reason);
        // A lower stale series cannot hide a higher value: ignored.
        let a = recommendation(
            &ctx(&s),
            &ev(vec![obs("a", 9.0, 0), obs("b", 3.0, 60_000)]),
            None,
        );
        assert_eq!(a.value(), Some(9));
    }

    /// A series whose exporter sends samples older than the one it holds keeps that sample's
    /// time: however old it grows, it reads as unknown, not as stale with a lower retained value.
    #[test]
    fn a_series_out_of_order_blocks_whatever_its_age() {
        let s = series();
        let out_of_order = Observation {
            unusable: Some(hpa_bridge_exposition::Unusable::OutOfOrder),
            ..obs("b", f64::NAN, 60_000)
        };
        let b = Observation {
            last_valid: Some((3, NOW - 60_000)),
            ..out_of_order
        };
        let a = recommendation(&ctx(&s), &ev(vec![obs("a", 5.0, 0), b]), None);
        assert_eq!(a.refusal(), Some(RefusalKind::Partial));
        assert!(a.reason.contains("out of order"), "{}", a.reason);
    }

    #[test]
    fn invalid_values_are_never_served() {
        let s = series();
        for bad in [f64::NAN, f64::INFINITY, -1.0, 2.5, 1e15] {
            let a = recommendation(&ctx(&s), &ev(vec![obs("a", bad, 0)]), None);
            assert_eq!(a.refusal(), Some(RefusalKind::Invalid), "{bad}");
            let a = recommendation(
                &ctx(&s),
                &ev(vec![obs("a", 5.0, 0), obs("b", bad, 0)]),
                None,
            );
            assert_eq!(a.refusal(), Some(RefusalKind::Partial), "{bad}");
            assert!(a.inputs.iter().any(|i| i.status.starts_with("invalid")));
        }
    }

    #[test]
    fn nothing_matched_is_not_found_and_unknown_targets_are_partial() {
        let s = series();
        let a = recommendation(&ctx(&s), &ev(vec![]), None);
        assert_eq!(a.refusal(), Some(RefusalKind::NoMatch));
        let mut e = ev(vec![]);
        e.unknown_targets.push(UnknownTarget {
            target: TargetId("http://x/m".into()),
            last_error: None,
        });
        assert_eq!(
            recommendation(&ctx(&s), &e, None).refusal(),
            Some(RefusalKind::Partial)
        );
    }
}
