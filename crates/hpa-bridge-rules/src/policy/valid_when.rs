//! Rules that let a recommendation raise the target but never lower it on input that is not
//! known to be good: the `validWhen` gate, `combine` over several recommenders, and the
//! current replica count both fall back to. Pure: evidence in, `Answer` out.
//!
//! Both follow the HPA's own rule for invalid metrics (docs/hpa-behaviour.md §1.6): an unknown input
//! freezes scale-in but still allows scale-out. Here that becomes `max(known values, current
//! spec.replicas)` when the current count is known, and a refusal (which the HPA turns into
//! exactly that freeze) when it is not.

use std::fmt::Write as _;

use serde::Serialize;

use super::answer::*;
use super::input_notes::InputNotes;
use super::observation::*;
use super::producer_quote::{keep_reasons, quote_producers};
use crate::config::{MetricKind, ValidWhen};
use crate::evidence::{invalid_reason, Evidence};

/// The workload's current replica count and where it came from, for explanations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentReplicas {
    pub value: u64,
    /// e.g. `spec.replicas of StatefulSet default/lobby`.
    pub source: String,
}

/// The current count from a configured `currentSeries` (e.g. SeaTunnel's
/// `seatunnel_autoscaler_current_workers`, docs/hpa-behaviour.md §4.2): the max over fresh valid series,
/// since a former master may keep exporting an older, smaller count (as in §4.1).
pub fn current_from_series(
    q: &QueryContext<'_>,
    ev: &Evidence,
) -> (Result<CurrentReplicas, String>, InputNotes) {
    let mut best: Option<u64> = None;
    let mut notes = InputNotes::default();
    let mut problems = Vec::new();
    for o in &ev.observations {
        let status = match read(q, o, invalid_reason) {
            Reading::Gone => continue,
            Reading::Stale { .. } => {
                problems.push(format!(
                    "{} from {} is {}",
                    o.id.series,
                    o.id.target,
                    StaleText(q, o)
                ));
                format!("current: stale, {}", StaleText(q, o))
            }
            Reading::Invalid(why) => {
                problems.push(format!(
                    "{} from {} is {} ({why})",
                    o.id.series,
                    o.id.target,
                    fmt_value(o.value)
                ));
                format!("current: invalid, {why}")
            }
            Reading::Fresh(value) => {
                let v = value as u64;
                best = Some(best.map_or(v, |b| b.max(v)));
                "current: fresh".into()
            }
        };
        let used = status == "current: fresh";
        notes.push(q, o, status, used);
    }
    // A target never scraped may export a higher count: the max of the others is no count.
    let unknown = ev.unknown_targets.iter();
    if unknown.clone().next().is_some() {
        let result = Err(format!(
            "{} target(s) that may export {} have never been scraped successfully: {}",
            unknown.clone().count(),
            q.series_names(),
            target_list(unknown.map(|t| t.target.to_string()))
        ));
        return (result, notes);
    }
    let result = match best {
        Some(v) => Ok(CurrentReplicas {
            value: v,
            source: format!("{} (max over fresh series)", q.series_names()),
        }),
        None if problems.is_empty() => Err(format!(
            "no series of {} match {}",
            q.searched_names(),
            q.scope
        )),
        None => Err(format!(
            "no fresh valid series of {} match {}: {}",
            q.series_names(),
            q.scope,
            problems.join("; ")
        )),
    };
    (result, notes)
}

/// Whether a `validWhen` gate holds, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct GateCheck {
    pub open: bool,
    /// `validWhen seatunnel_autoscaler_metrics_valid == 1 holds (1 fresh series)` or why not.
    pub reason: String,
    pub inputs: InputNotes,
    /// What the producers of the gate's series said (a JSON source's `reason`).
    pub producer_reasons: Vec<crate::evidence::ProducerReason>,
}

/// The gate holds only when every gate series in scope is fresh and equals the configured
/// value, and at least one exists. Stale, missing, unknown (a target never scraped) or any
/// series with another value closes it: a recommender that cannot vouch for its inputs must not
/// shrink the workload (docs/hpa-behaviour.md §4.2: SeaTunnel's `metrics_valid = 0` blocks scale-in).
pub fn check_gate(gate: &ValidWhen, q: &QueryContext<'_>, ev: &Evidence) -> GateCheck {
    let condition = format!("validWhen {} == {}", gate.series, fmt_value(gate.equals));
    let mut inputs = InputNotes::default();
    let mut failures = Vec::new();
    let mut causes = Vec::new();
    let mut holding = 0usize;
    for o in &ev.observations {
        // A gate series is compared, not counted: any value is readable.
        let status = match read(q, o, |_| None) {
            Reading::Gone => continue,
            Reading::Stale { .. } => {
                failures.push(format!(
                    "{} from {} is {}",
                    o.id.series,
                    o.id.target,
                    StaleText(q, o)
                ));
                "gate: stale".to_string()
            }
            Reading::Invalid(why) => {
                failures.push(format!(
                    "{} from {} is {} ({why})",
                    o.id.series,
                    o.id.target,
                    fmt_value(o.value)
                ));
                format!("gate: invalid: {why}")
            }
            Reading::Fresh(v) if v != gate.equals => {
                failures.push(format!(
                    "{} from {} is {}",
                    o.id.series,
                    o.id.target,
                    fmt_value(o.value)
                ));
                "gate: false".to_string()
            }
            Reading::Fresh(_) => {
                holding += 1;
                "gate: true".to_string()
            }
        };
        let used = status == "gate: true";
        if !used {
            causes.push(&o.id.target);
        }
        inputs.push(q, o, status, used);
    }
    for t in &ev.unknown_targets {
        failures.push(format!("{} has never been scraped successfully", t.target));
    }
    let (open, reason) = if !failures.is_empty() {
        let mut reason = format!("{condition} does not hold: {}", failures.join("; "));
        quote_producers(&mut reason, ev, causes);
        (false, reason)
    } else if holding == 0 {
        (
            false,
            format!(
                "{condition} does not hold: no such series matches {}",
                q.scope
            ),
        )
    } else {
        (true, format!("{condition} holds ({holding} fresh series)"))
    };
    GateCheck {
        open,
        reason,
        inputs,
        producer_reasons: ev.producer_reasons.clone(),
    }
}

/// Apply a gate to a recommender's answer: while it is closed the answer may raise the target
/// but never lower it, `max(answer, current)`; without a known current count, refuse.
pub fn apply_gate(
    mut answer: Answer,
    kind: MetricKind,
    gate: GateCheck,
    current: Result<&CurrentReplicas, &str>,
) -> Answer {
    if gate.open {
        let _ = write!(answer.reason, "; {}", gate.reason);
        gate.inputs.into_answer(&mut answer);
        keep_reasons(&mut answer, gate.producer_reasons);
        return answer;
    }
    let Some(value) = answer.value() else {
        // Already a refusal: the HPA freezes scale-in either way (docs/hpa-behaviour.md §1.6).
        let _ = write!(answer.reason, "; also {}", gate.reason);
        gate.inputs.into_answer(&mut answer);
        keep_reasons(&mut answer, gate.producer_reasons);
        return answer;
    };
    let timestamp = answer.timestamp_ms().unwrap_or_default();
    let metric = answer.metric.clone();
    let mut gated = match current {
        Ok(c) => {
            let v = value.max(c.value);
            let effect = if c.value > value {
                format!("holding at current {} (scale-in blocked)", c.value)
            } else {
                format!("serving the recommendation {value} (scale-out allowed)")
            };
            Answer::valued(
                &metric,
                kind,
                v,
                timestamp,
                "max(recommendation, current replicas) while validWhen does not hold",
                format!(
                    "{}; recommendation {value}, current {} from {}: {effect}",
                    gate.reason, c.value, c.source
                ),
            )
        }
        Err(why) => Answer::refused(
            &metric,
            kind,
            RefusalKind::GateClosed,
            Some(value),
            "max(recommendation, current replicas) while validWhen does not hold",
            format!(
                "{}; recommendation {value} could lower the workload and the current replica count is unknown ({why})",
                gate.reason
            ),
        ),
    };
    gate.inputs.into_answer(&mut gated);
    keep_reasons(&mut gated, gate.producer_reasons);
    gated.parts.push(answer);
    gated
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Observation, TargetId, UnknownTarget};
    use crate::policy::fixtures::ev;
    use crate::policy::fixtures::{cur, rec, refused};

    fn ctx(series: &[String]) -> QueryContext<'_> {
        crate::policy::fixtures::ctx_with(series, "namespace=default,cluster=a", 30_000)
    }

    fn obs(target: &str, series: &str, value: f64, age_ms: crate::clock::Millis) -> Observation {
        crate::policy::fixtures::obs_of(target, series, value, age_ms)
    }

    fn gate() -> ValidWhen {
        ValidWhen {
            series: "valid".into(),
            equals: 1.0,
        }
    }

    #[test]
    fn gate_opens_only_when_every_series_is_fresh_and_equal() {
        let s = vec!["valid".to_string()];
        assert!(check_gate(&gate(), &ctx(&s), &ev(vec![obs("a", "valid", 1.0, 0)])).open);
        let zero = check_gate(&gate(), &ctx(&s), &ev(vec![obs("a", "valid", 0.0, 0)]));
        assert!(!zero.open);
        assert!(zero.reason.contains("valid from a is 0"), "{}", zero.reason);
        let stale = check_gate(&gate(), &ctx(&s), &ev(vec![obs("a", "valid", 1.0, 31_000)]));
        assert!(
            !stale.open && stale.reason.contains("31s old"),
            "{}",
            stale.reason
        );
        let missing = check_gate(&gate(), &ctx(&s), &ev(vec![]));
        assert!(!missing.open && missing.reason.contains("no such series"));
        let mixed = check_gate(
            &gate(),
            &ctx(&s),
            &ev(vec![
                obs("a", "valid", 1.0, 0),
                obs("b", "valid", f64::NAN, 0),
            ]),
        );
        assert!(!mixed.open, "{}", mixed.reason);
        let mut unknown = ev(vec![obs("a", "valid", 1.0, 0)]);
        unknown.unknown_targets.push(UnknownTarget {
            target: TargetId("b".into()),
            last_error: None,
        });
        assert!(!check_gate(&gate(), &ctx(&s), &unknown).open);
    }

    #[test]
    fn a_closed_gate_raises_but_never_lowers() {
        let s = vec!["valid".to_string()];
        let closed = || check_gate(&gate(), &ctx(&s), &ev(vec![obs("a", "valid", 0.0, 0)]));
        let k = MetricKind::Recommendation;
        // Lower than current: held.
        let a = apply_gate(rec("r", 3), k, closed(), Ok(&cur(5)));
        assert_eq!(a.value(), Some(5));
        assert!(a.reason.contains("scale-in blocked"), "{}", a.reason);
        assert_eq!(a.parts[0].value(), Some(3));
        // Higher than current: served.
        let a = apply_gate(rec("r", 8), k, closed(), Ok(&cur(5)));
        assert_eq!(a.value(), Some(8));
        // Unknown current: refused, with the recommendation as the known lower bound.
        let a = apply_gate(rec("r", 3), k, closed(), Err("no currentSeries configured"));
        assert_eq!(
            a.outcome,
            crate::policy::Outcome::Refused {
                kind: RefusalKind::GateClosed,
                known_lower_bound: Some(3)
            }
        );
        // An open gate changes nothing but the explanation.
        let open = check_gate(&gate(), &ctx(&s), &ev(vec![obs("a", "valid", 1.0, 0)]));
        let a = apply_gate(rec("r", 3), k, open, Ok(&cur(5)));
        assert_eq!(a.value(), Some(3));
        assert!(a.reason.contains("holds"), "{}", a.reason);
        // A refusal stays a refusal.
        let a = apply_gate(refused("r"), k, closed(), Ok(&cur(5)));
        assert_eq!(a.refusal(), Some(RefusalKind::Stale));
    }

    #[test]
    fn current_series_is_the_max_over_fresh_valid_series() {
        let s = vec!["current".to_string()];
        let (c, notes) = current_from_series(
            &ctx(&s),
            &ev(vec![
                obs("a", "current", 4.0, 0),
                obs("b", "current", 6.0, 0),
                obs("c", "current", 9.0, 60_000),
            ]),
        );
        assert_eq!(c.unwrap().value, 6);
        assert_eq!(notes.len(), 3);
        let (c, _) = current_from_series(&ctx(&s), &ev(vec![obs("c", "current", 9.0, 60_000)]));
        assert!(c.unwrap_err().contains("60s old"));
        let (c, _) = current_from_series(&ctx(&s), &ev(vec![]));
        assert!(c.unwrap_err().starts_with("no series"));
    }
}
