//! The stateful floor rule: the highest retained one-based index across the pods.

use std::fmt::Write as _;

use super::answer::*;
use super::input_notes::InputNotes;
use super::observation::*;
use super::producer_quote::{attach, quote_producers};
use super::reason_text::reason;
use crate::clock::Millis;
use crate::config::MetricKind;
use crate::evidence::{invalid_reason, Evidence, Observation};

/// The stateful floor: the highest retained one-based index across the workload's pods.
///
/// `hpa_stateful_index` is `ordinal + 1` while a pod holds state and 0 otherwise
/// (docs/hpa-behaviour.md §4.1), so the largest retained value is the smallest replica count that keeps
/// the highest state-owning ordinal. With `spec.ordinals.start = s` the floor is `index - s`.
/// A pod whose scrape fails keeps its last valid index; a pod whose index has never been seen
/// makes the floor incomplete, which is refused rather than under-reported.
pub fn stateful_floor(q: &QueryContext<'_>, ev: &Evidence, ordinals_start: u64) -> Answer {
    let mut inputs = InputNotes::for_inputs(q, ev.observations.len());
    let retained = Retained::read(q, ev, &mut inputs);
    let mut answer = if let Some(refused) = incomplete(q, ev, &retained, ordinals_start) {
        refused
    } else if let Some((v, _)) = retained.best {
        held(q, ev, &retained, v, ordinals_start, inputs.len())
    } else {
        Answer::refused(
            q.metric,
            KIND,
            RefusalKind::NoMatch,
            None,
            RULE,
            format!("no series of {} match {}", q.searched_names(), q.scope),
        )
    };
    inputs.into_answer(&mut answer);
    attach(&mut answer, ev);
    answer
}

const RULE: &str = "max retained index over pods";
const KIND: MetricKind = MetricKind::StatefulFloor;

/// What the pods' indices retain: the highest and when it was seen, the pods that never
/// reported a valid one, and how many are held from failing targets.
struct Retained<'o> {
    best: Option<(u64, Millis)>,
    never_valid: Vec<&'o Observation>,
    from_failing: usize,
}

impl<'o> Retained<'o> {
    fn read(q: &QueryContext<'_>, ev: &'o Evidence, inputs: &mut InputNotes) -> Retained<'o> {
        let mut r = Retained {
            best: None,
            never_valid: Vec::new(),
            from_failing: 0,
        };
        for o in &ev.observations {
            // An index exported twice in one page, or otherwise unusable (from the future, of
            // no known time), may be any value: holding a lower one could release a pod that
            // owns state, so the floor is incomplete until the page is clean.
            let last_valid = if o.unusable.is_some() {
                None
            } else {
                o.last_valid
            };
            match last_valid {
                Some((v, at)) => {
                    let status = r.retained_status(q, o, v, at);
                    inputs.push(q, o, status, true);
                    r.hold(v, at);
                }
                None => {
                    let status = if let Some(u) = o.unusable {
                        format!("unknown: {}", u.why())
                    } else {
                        format!("unknown: no valid index seen ({})", fmt_value(o.value))
                    };
                    inputs.push(q, o, status, false);
                    r.never_valid.push(o);
                }
            }
        }
        // Series the store summarized: each a fresh, exported, valid index, retained as it
        // reads.
        let tail = ev.clean_tail.unwrap_or_default();
        if tail.series > 0 {
            inputs.count_fresh(q, &tail);
            r.hold(tail.max_value, tail.newest_at_ms);
        }
        r
    }

    fn hold(&mut self, v: u64, at: Millis) {
        if self.best.is_none_or(|(b, _)| v > b) {
            self.best = Some((v, at));
        }
    }

    /// Why `o`'s index `v` (seen at `at`) is held, counting one from a failing target.
    fn retained_status(
        &mut self,
        q: &QueryContext<'_>,
        o: &Observation,
        v: u64,
        at: Millis,
    ) -> std::borrow::Cow<'static, str> {
        let fresh = o.age_ms(q.now) <= q.stale_after_ms && !o.expired(q.now);
        if let Some(why) = invalid_reason(o.value) {
            format!(
                "retained {v} (newest value {} is {why})",
                fmt_value(o.value)
            )
            .into()
        } else if o.target_failing || !fresh {
            self.from_failing += 1;
            format!(
                "retained {v} from {:.0}s ago (target failing)",
                // When the value was seen, as the wall clock shows it.
                age_s(q.now.wall - at)
            )
            .into()
        } else if !o.present {
            format!("retained {v} (series no longer exported; pod still exists)").into()
        } else {
            "fresh".into()
        }
    }
}

/// The floor is incomplete while a pod in scope may hold state it has not reported: a target
/// never scraped, an index never valid, a pod or static target whose pages carry no index.
fn incomplete(
    q: &QueryContext<'_>,
    ev: &Evidence,
    r: &Retained<'_>,
    ordinals_start: u64,
) -> Option<Answer> {
    let silent = ev
        .silent_pods
        .iter()
        .filter(|s| ev.workloads.contains(&s.workload));
    if ev.unknown_to_floor().next().is_none()
        && r.never_valid.is_empty()
        && silent.clone().next().is_none()
        && ev.silent_targets.is_empty()
    {
        return None;
    }
    let mut unknown: Vec<String> = ev
        .unknown_to_floor()
        .map(|t| match &t.last_error {
            Some(e) => format!("{} ({e})", t.target),
            None => format!("{} (not scraped yet)", t.target),
        })
        .collect();
    unknown.extend(r.never_valid.iter().map(|o| match o.unusable {
        Some(u) => format!("{} (index {})", o.id.target, u.why()),
        None => format!("{} (index {} never valid)", o.id.target, fmt_value(o.value)),
    }));
    // A pod whose pages carry no index at all is as unknown as one never scraped: it may
    // hold state it does not report. So is a static target whose own labels put it in
    // scope.
    unknown.extend(
        ev.silent_targets
            .iter()
            .map(|t| format!("{t} (scraped, but no {} exported)", q.searched_names())),
    );
    for s in silent {
        let w = &s.workload;
        unknown.extend((0..s.pods).map(|_| {
            format!(
                "a pod of {} {}/{} (scraped, but no {} exported)",
                w.kind,
                w.namespace,
                w.name,
                q.searched_names()
            )
        }));
    }
    let offset = |v: u64| v.saturating_sub(ordinals_start);
    let mut reason = format!(
        "the floor for {} is incomplete: {} target(s) never reported a valid index: {}{}",
        q.scope,
        unknown.len(),
        target_list(unknown.into_iter()),
        match r.best {
            Some((v, _)) => format!("; the known floor is at least {}", offset(v)),
            None => String::new(),
        }
    );
    quote_producers(&mut reason, ev, r.never_valid.iter().map(|o| &o.id.target));
    Some(Answer::refused(
        q.metric,
        KIND,
        RefusalKind::IncompleteFloor,
        r.best.map(|(v, _)| offset(v)),
        RULE,
        reason,
    ))
}

/// Every pod known: the highest retained index `v` over `pods` series, less the ordinals'
/// start.
fn held(
    q: &QueryContext<'_>,
    ev: &Evidence,
    r: &Retained<'_>,
    v: u64,
    ordinals_start: u64,
    pods: usize,
) -> Answer {
    let tail = ev.clean_tail.unwrap_or_default();
    let newest = ev
        .observations
        .iter()
        .map(|o| o.observed_at_ms)
        .chain((tail.series > 0).then_some(tail.newest_at_ms))
        .max()
        .unwrap_or(q.now.wall);
    let floor = v.saturating_sub(ordinals_start);
    let mut reason = reason!(
        "highest retained index of ",
        q.series_names(),
        " over ",
        pods,
        " series matching ",
        q.scope,
        " is ",
        v
    );
    if ordinals_start > 0 {
        let _ = write!(
            reason,
            "; minus ordinals start {ordinals_start} gives {floor}"
        );
    }
    if r.from_failing > 0 {
        let _ = write!(reason, "; {} retained from failing targets", r.from_failing);
    }
    Answer::valued(q.metric, KIND, floor, newest, RULE, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{TargetId, UnknownTarget};
    use crate::policy::fixtures::*;

    #[test]
    fn floor_retains_failing_targets_and_ignores_zero() {
        let s = series();
        let mut failing = obs("pod-2", 3.0, 120_000);
        failing.target_failing = true;
        let a = stateful_floor(
            &ctx(&s),
            &ev(vec![obs("pod-0", 1.0, 0), obs("pod-1", 0.0, 0), failing]),
            0,
        );
        assert_eq!(a.value(), Some(3));
        assert!(a.reason.contains("retained from failing"), "{}", a.reason);
    }

    #[test]
    fn an_index_exported_twice_makes_the_floor_incomplete() {
        let s = series();
        let mut twice = obs("pod-1", f64::NAN, 0);
        twice.last_valid = Some((2, NOW - 15_000));
        twice.unusable = Some(hpa_bridge_exposition::Unusable::Duplicated);
        let a = stateful_floor(&ctx(&s), &ev(vec![obs("pod-0", 1.0, 0), twice]), 0);
        assert_eq!(a.value(), None);
        assert!(a.reason.contains("ambiguous"), "{}", a.reason);
    }

    #[test]
    fn floor_is_incomplete_while_a_target_never_reported() {
        let s = series();
        let mut e = ev(vec![obs("pod-0", 1.0, 0)]);
        e.unknown_targets.push(UnknownTarget {
            target: TargetId("pod-1".into()),
            last_error: Some("connection refused".into()),
        });
        let a = stateful_floor(&ctx(&s), &e, 0);
        assert_eq!(
            a.outcome,
            Outcome::Refused {
                kind: RefusalKind::IncompleteFloor,
                known_lower_bound: Some(1)
            }
        );
        assert!(a.reason.contains("connection refused"), "{}", a.reason);
        // Garbage-only index series are unknown too.
        let a = stateful_floor(&ctx(&s), &ev(vec![obs("p", f64::NAN, 0)]), 0);
        assert_eq!(a.refusal(), Some(RefusalKind::IncompleteFloor));
    }

    #[test]
    fn floor_subtracts_the_ordinal_start() {
        let s = series();
        let a = stateful_floor(&ctx(&s), &ev(vec![obs("web-4", 5.0, 0)]), 3);
        assert_eq!(a.value(), Some(2));
    }
}
