//! Epoch fencing: a recommendation follows only the newest leader.
//!
//! A recommender that elects a leader may leave a former leader exporting its last value for as
//! long as it is scraped. Taking the max is safe while that value is lower than the new leader's,
//! but a former leader stuck higher pins the workload up until it stops exporting. A recommender
//! that labels each recommendation with its leader's epoch (SeaTunnel's `masterEpoch`,
//! docs/hpa-behaviour.md §4.2) says which series is the leader's, and a recommendation of an older
//! epoch must be rejected.
//!
//! - The newest epoch, E*, is the highest among the scope's series the store still holds, fresh
//!   or stale. A stale series of E* still defines it: the newest leader's state being unknown
//!   never hands the answer back to an older leader, which is exactly the value to avoid.
//! - Series of older epochs are fenced: never counted, and noted as fenced. The max rule then
//!   runs over the series of E* as it would over all series: unknown input that could be higher
//!   blocks, and no fresh series of E* refuses as stale.
//! - A series whose epoch cannot be read (the label missing, or not a non-negative integer)
//!   could be the newest leader's, so nothing can be fenced: the answer is refused as invalid.
//!
//! A series no longer exported by its target is no input at all (recommendation.rs), so it
//! neither defines E* nor is fenced: a retained series from a since-corrected epoch label would
//! otherwise block every answer for as long as the store retains it.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::answer::{Answer, RefusalKind};
use super::input_notes::InputNotes;
use super::observation::{read, target_list, QueryContext, Reading};
use super::producer_quote::{attach, quote_producers};
use super::recommendation::{max_rule, status_text, Epoch};
use crate::config::MetricKind;
use crate::evidence::{invalid_reason, Evidence, Observation, TargetId};

const RULE: &str = "max over fresh series of the newest epoch (never sum)";

/// Label values cited in messages are the exporter's: cut to this many characters.
const SHOWN_VALUE_CHARS: usize = 32;

/// The epoch `o` carries in `label`, or what is wrong with it.
fn epoch_of(o: &Observation, label: &str) -> Result<u64, String> {
    // An empty label value is no label, as in Prometheus.
    let Some(value) = o.id.labels.get(label).filter(|v| !v.is_empty()) else {
        return Err(format!("has no {label} label"));
    };
    // Digits only: `+4`, ` 4` and `4.0` are not how an epoch is written, and a value this
    // adapter would read differently from the recommender is no epoch to fence by.
    if value.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(epoch) = value.parse::<u64>() {
            return Ok(epoch);
        }
    }
    let shown: String = value.chars().take(SHOWN_VALUE_CHARS).collect();
    let cut = if shown.len() < value.len() { "..." } else { "" };
    Err(format!(
        "has {label}={shown:?}{cut}, not a non-negative integer"
    ))
}

/// What stands in the way of fencing by the newest epoch, if anything: an exported epoch
/// more than `step` above the newest older one still fresh, a series its producer stopped
/// exporting whose epoch is newer than any exported, or a producer exporting an older epoch
/// than one it stopped exporting. `epochs` are the observations' (`None` when not exported).
fn ambiguity(
    q: &QueryContext<'_>,
    ev: &Evidence,
    label: &str,
    step: u64,
    newest: u64,
) -> Option<String> {
    for o in ev.observations.iter().filter(|o| !o.present) {
        let Ok(gone) = epoch_of(o, label) else {
            continue;
        };
        if gone > newest {
            return Some(format!(
                "{} no longer exports {} at {label} {gone}, newer than any exported ({newest}): the newest leader's state is unknown",
                o.id.target, o.id.series
            ));
        }
        let back = ev.observations.iter().find(|p| {
            p.present && p.id.target == o.id.target && epoch_of(p, label).is_ok_and(|e| e < gone)
        });
        if let Some(p) = back {
            return Some(format!(
                "the {label} of {} went back from {gone} to {}: which leader is newest is unknown",
                o.id.target,
                epoch_of(p, label).unwrap_or_default()
            ));
        }
    }
    let next = ev
        .observations
        .iter()
        .filter(|o| {
            !matches!(
                read(q, o, invalid_reason),
                Reading::Gone | Reading::Stale { .. }
            )
        })
        .filter_map(|o| epoch_of(o, label).ok())
        .filter(|e| *e < newest)
        .max()?;
    (newest - next > step).then(|| {
        format!(
            "{label} {newest} is more than {step} above {next}, whose producers are still fresh: a leader that far ahead is not trusted to fence them"
        )
    })
}

/// The epoch that decides a fenced recommendation, if one does unambiguously: the newest
/// exported, every exported epoch readable, and no `ambiguity`.
fn deciding_epoch(q: &QueryContext<'_>, ev: &Evidence, label: &str, step: u64) -> Option<u64> {
    let mut newest = None;
    for o in ev.observations.iter().filter(|o| o.present) {
        let e = epoch_of(o, label).ok()?;
        newest = newest.max(Some(e));
    }
    let newest = newest?;
    ambiguity(q, ev, label, step, newest)
        .is_none()
        .then_some(newest)
}

/// The targets whose series of the deciding epoch decide a fenced recommendation: only their
/// `validWhen` and `currentSeries` series count, so a fenced producer's gate never opens it.
/// Empty when no epoch decides.
pub fn deciding_producers(
    q: &QueryContext<'_>,
    ev: &Evidence,
    label: &str,
    step: u64,
) -> Vec<TargetId> {
    let Some(newest) = deciding_epoch(q, ev, label, step) else {
        return Vec::new();
    };
    let mut producers: Vec<TargetId> = ev
        .observations
        .iter()
        .filter(|o| o.present && epoch_of(o, label) == Ok(newest))
        .map(|o| o.id.target.clone())
        .collect();
    producers.dedup();
    producers
}

/// The recommendation over the series of the newest epoch in `label`.
pub(super) fn fenced(q: &QueryContext<'_>, ev: &Evidence, label: &str, step: u64) -> Answer {
    // Read once: the epoch of each input still exported (`None` for one no longer exported).
    let epochs: Vec<Option<Result<u64, String>>> = ev
        .observations
        .iter()
        .map(|o| o.present.then(|| epoch_of(o, label)))
        .collect();
    // The engine reads a fenced metric's evidence listed: a summary drops the labels that
    // carry the epochs. Should one arrive here, its series' epochs are unknown.
    let summarized = ev.clean_tail.map_or(0, |t| t.series);
    debug_assert_eq!(
        summarized, 0,
        "a fenced recommendation reads its inputs listed"
    );
    if summarized > 0 || epochs.iter().flatten().any(Result::is_err) {
        return unreadable(q, ev, label, &epochs, summarized);
    }
    let newest = epochs.iter().flatten().flatten().copied().max();
    let Some(newest) = newest else {
        // Nothing exported: the max rule says so.
        return max_rule(q, ev, ev.observations.iter(), RULE, None);
    };
    if let Some(why) = ambiguity(q, ev, label, step, newest) {
        return held(q, ev, why);
    }
    let mut current = Vec::with_capacity(ev.observations.len());
    let mut fenced = Vec::new();
    for (o, epoch) in ev.observations.iter().zip(&epochs) {
        match epoch {
            Some(Ok(e)) if *e < newest => fenced.push((o, *e)),
            _ => current.push(o),
        }
    }
    let epoch = Epoch {
        label,
        newest,
        fenced: fenced.len(),
    };
    let mut answer = max_rule(q, ev, current.into_iter(), RULE, Some(&epoch));
    // The fenced inputs are noted after those the max read, within the same limit.
    let mut notes = InputNotes {
        kept: std::mem::take(&mut answer.inputs),
        omitted: Default::default(),
    };
    for (o, e) in fenced {
        let status = format!("fenced: epoch {e}, older than the newest epoch {newest}");
        notes.push(q, o, status, false);
    }
    notes.into_answer(&mut answer);
    answer
}

/// Refused: the epochs do not say unambiguously which leader is newest, and fencing would
/// lower the answer below the plain max on that guess.
fn held(q: &QueryContext<'_>, ev: &Evidence, why: String) -> Answer {
    let mut answer = Answer::refused(
        q.metric,
        MetricKind::Recommendation,
        RefusalKind::Partial,
        None,
        RULE,
        format!(
            "{} matching {} cannot be fenced: {why}",
            q.series_names(),
            q.scope
        ),
    );
    let mut notes = InputNotes::for_inputs(q, ev.observations.len());
    for o in ev.observations.iter().filter(|o| o.present) {
        notes.push(q, o, status_text(q, o, read(q, o, invalid_reason)), false);
    }
    notes.into_answer(&mut answer);
    attach(&mut answer, ev);
    answer
}

/// Refused: some input's epoch cannot be read, so which series are the newest leader's is
/// unknown.
fn unreadable(
    q: &QueryContext<'_>,
    ev: &Evidence,
    label: &str,
    epochs: &[Option<Result<u64, String>>],
    summarized: usize,
) -> Answer {
    let bad: Vec<(&Observation, &str)> = ev
        .observations
        .iter()
        .zip(epochs)
        .filter_map(|(o, e)| match e {
            Some(Err(why)) => Some((o, why.as_str())),
            _ => None,
        })
        .collect();
    let mut why = target_list(
        bad.iter()
            .map(|(o, why)| format!("{} from {} {why}", o.id.series, o.id.target)),
    );
    if summarized > 0 {
        if !why.is_empty() {
            why.push_str("; ");
        }
        let _ = write!(why, "{summarized} series were read without their labels");
    }
    let mut reason = format!(
        "the epoch of {} series of {} matching {} cannot be read from {label}: {why}; any of them could be the newest leader's, so no series can be fenced",
        bad.len() + summarized,
        q.series_names(),
        q.scope,
    );
    quote_producers(&mut reason, ev, bad.iter().map(|(o, _)| &o.id.target));
    let mut answer = Answer::refused(
        q.metric,
        MetricKind::Recommendation,
        RefusalKind::Invalid,
        None,
        RULE,
        reason,
    );
    let mut notes = InputNotes::for_inputs(q, ev.observations.len());
    for (o, epoch) in ev.observations.iter().zip(epochs) {
        let status: Cow<'static, str> = match epoch {
            None => continue,
            Some(Err(why)) => format!("invalid: {why}").into(),
            Some(Ok(_)) => status_text(q, o, read(q, o, invalid_reason)),
        };
        notes.push(q, o, status, false);
    }
    notes.into_answer(&mut answer);
    attach(&mut answer, ev);
    answer
}

#[cfg(test)]
mod tests {
    use super::super::recommendation;
    use super::*;
    use crate::policy::fixtures::*;

    const LABEL: &str = "master_epoch";

    /// `obs` of `target` with `master_epoch` set to `epoch` (none for `None`).
    fn at(target: &str, value: f64, age_ms: i64, epoch: Option<&str>) -> Observation {
        labelled(obs(target, value, age_ms), &[(LABEL, epoch)])
    }

    fn fenced_answer(observations: Vec<Observation>) -> Answer {
        let s = series();
        recommendation(&ctx(&s), &ev(observations), Some(LABEL))
    }

    #[test]
    fn follows_the_newest_epoch_even_when_an_older_one_is_higher() {
        let old_high = at("http://old/m", 9.0, 0, Some("3"));
        let new_low = at("http://new/m", 4.0, 0, Some("4"));
        let a = fenced_answer(vec![old_high.clone(), new_low.clone()]);
        assert_eq!(a.value(), Some(4), "{}", a.reason);
        assert_eq!(
            a.reason,
            "1 fresh series of hpa_expect_replicas at master_epoch 4 matches \
             namespace=default,hpa_target_name=lobby: value 4; 1 series of older epochs fenced"
        );
        assert_eq!(a.rule, RULE);
        let fenced = a
            .inputs
            .iter()
            .find(|i| &*i.id.target.0 == "http://old/m")
            .expect("the fenced series is noted");
        assert_eq!(
            fenced.status,
            "fenced: epoch 3, older than the newest epoch 4"
        );
        assert!(!fenced.used);
        // Without the label the same evidence gives the max, the known limit.
        let s = series();
        let unfenced = recommendation(&ctx(&s), &ev(vec![old_high, new_low]), None);
        assert_eq!(unfenced.value(), Some(9));
        // The epoch is a number, not text: 10 is newer than 9.
        let a = fenced_answer(vec![
            at("http://a/m", 7.0, 0, Some("9")),
            at("http://b/m", 2.0, 0, Some("10")),
            at("http://c/m", 3.0, 0, Some("010")),
        ]);
        assert_eq!(a.value(), Some(3), "{}", a.reason);
    }

    #[test]
    fn no_fresh_series_of_the_newest_epoch_is_stale_naming_it() {
        let a = fenced_answer(vec![
            at("http://old/m", 9.0, 0, Some("3")),
            at("http://new/m", 4.0, 60_000, Some("4")),
        ]);
        assert_eq!(a.refusal(), Some(RefusalKind::Stale), "{}", a.reason);
        assert_eq!(
            a.reason,
            "1 series of hpa_expect_replicas at master_epoch 4 match \
             namespace=default,hpa_target_name=lobby but the newest is 60s old (staleAfter 45s): \
             the newest leader's state is unknown; 1 series of older epochs fenced"
        );
    }

    #[test]
    fn a_stale_series_of_the_newest_epoch_still_fences_a_fresh_older_one() {
        // The fresh epoch-3 series is not served while epoch 4's state is unknown, even though
        // it is lower: a stale newest leader never hands the answer to an older one.
        let a = fenced_answer(vec![
            at("http://old/m", 2.0, 0, Some("3")),
            at("http://new/m", 5.0, 60_000, Some("4")),
        ]);
        assert_eq!(a.refusal(), Some(RefusalKind::Stale), "{}", a.reason);
        // Fresh and stale series of the newest epoch follow the max rule among themselves: a
        // stale one that may be higher blocks, a lower one is ignored.
        let a = fenced_answer(vec![
            at("http://old/m", 9.0, 0, Some("3")),
            at("http://a/m", 4.0, 0, Some("4")),
            at("http://b/m", 6.0, 60_000, Some("4")),
        ]);
        assert_eq!(a.refusal(), Some(RefusalKind::Partial), "{}", a.reason);
        let a = fenced_answer(vec![
            at("http://old/m", 9.0, 0, Some("3")),
            at("http://a/m", 4.0, 0, Some("4")),
            at("http://b/m", 3.0, 60_000, Some("4")),
        ]);
        assert_eq!(a.value(), Some(4), "{}", a.reason);
    }

    #[test]
    fn an_unreadable_epoch_is_invalid_naming_the_series() {
        for (epoch, why) in [
            (None, "has no master_epoch label"),
            (Some(""), "has no master_epoch label"),
            (
                Some("x"),
                "has master_epoch=\"x\", not a non-negative integer",
            ),
            (
                Some("-1"),
                "has master_epoch=\"-1\", not a non-negative integer",
            ),
            (
                Some("+4"),
                "has master_epoch=\"+4\", not a non-negative integer",
            ),
            (
                Some("4.0"),
                "has master_epoch=\"4.0\", not a non-negative integer",
            ),
            (
                Some("99999999999999999999"),
                "has master_epoch=\"99999999999999999999\", not a non-negative integer",
            ),
        ] {
            let a = fenced_answer(vec![
                at("http://new/m", 4.0, 0, Some("4")),
                at("http://bad/m", 2.0, 0, epoch),
            ]);
            assert_eq!(a.refusal(), Some(RefusalKind::Invalid), "{epoch:?}");
            assert!(
                a.reason
                    .contains(&format!("hpa_expect_replicas from http://bad/m {why}")),
                "{}",
                a.reason
            );
            let bad = a
                .inputs
                .iter()
                .find(|i| &*i.id.target.0 == "http://bad/m")
                .unwrap();
            assert_eq!(bad.status, format!("invalid: {why}"));
        }
        // Stale series are in scope too: one of an unreadable epoch refuses as well.
        let a = fenced_answer(vec![
            at("http://new/m", 4.0, 0, Some("4")),
            at("http://bad/m", 2.0, 60_000, None),
        ]);
        assert_eq!(a.refusal(), Some(RefusalKind::Invalid), "{}", a.reason);
        // A series no longer exported is no input: its label does not matter.
        let mut gone = at("http://bad/m", 2.0, 0, None);
        gone.present = false;
        let a = fenced_answer(vec![at("http://new/m", 4.0, 0, Some("4")), gone]);
        assert_eq!(a.value(), Some(4), "{}", a.reason);
        // A long label value is cut in the message.
        let long = "7".repeat(10) + &"x".repeat(100);
        let a = fenced_answer(vec![at("http://bad/m", 2.0, 0, Some(&long))]);
        assert!(a.reason.len() < 400, "{}", a.reason);
    }

    #[test]
    fn without_an_epoch_label_the_rule_is_the_max() {
        let s = series();
        let observations = vec![
            at("http://a/m", 9.0, 0, Some("3")),
            at("http://b/m", 4.0, 0, Some("4")),
            at("http://c/m", 5.0, 0, None),
        ];
        let a = recommendation(&ctx(&s), &ev(observations), None);
        assert_eq!(a.value(), Some(9));
        assert_eq!(a.rule, "max over fresh series (never sum)");
        assert!(a.inputs.iter().all(|i| i.status == "fresh"));
    }

    #[test]
    fn nothing_exported_is_no_match_as_without_fencing() {
        let a = fenced_answer(vec![]);
        assert_eq!(a.refusal(), Some(RefusalKind::NoMatch));
        let mut gone = at("http://a/m", 2.0, 0, Some("3"));
        gone.present = false;
        let a = fenced_answer(vec![gone]);
        assert_eq!(a.refusal(), Some(RefusalKind::NoMatch), "{}", a.reason);
    }

    #[test]
    fn fenced_inputs_are_counted_past_the_noted_ones() {
        let s = series();
        let mut q = ctx(&s);
        q.notes_kept = 1;
        let a = recommendation(
            &q,
            &ev(vec![
                at("http://a/m", 4.0, 0, Some("4")),
                at("http://b/m", 9.0, 0, Some("3")),
                at("http://c/m", 9.0, 0, Some("2")),
            ]),
            Some(LABEL),
        );
        assert_eq!(a.value(), Some(4));
        assert_eq!(a.inputs.len(), 1);
        assert_eq!(a.omitted_inputs.fenced, 2);
    }
}
