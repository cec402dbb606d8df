//! The target rule: max(recommendation, floor).

use super::answer::*;
use super::reason_text::reason;
use crate::config::MetricKind;

/// The served target: `max(recommendation, floor)`.
///
/// A refused recommendation refuses the target: the HPA then keeps its replicas (§1.6). An
/// incomplete floor refuses too, unless the workload's current `spec.replicas` is known: then
/// `max(recommendation, known floor, current)` allows scale-out and blocks scale-in. So does a
/// floor no series of which exists: a workload scaled to zero has no pod to report one, and
/// without this hold it could never be scaled up again (docs/hpa-behaviour.md §7). When the
/// count is not known, `current_replicas` says why (e.g. the workload is not in the watch cache
/// yet), and the refusal says so: never a guess.
pub fn target(
    metric: &str,
    recommendation: Answer,
    floor: Option<Answer>,
    current_replicas: Result<u64, &str>,
) -> Answer {
    const RULE: &str = "max(recommendation, floor)";
    let kind = MetricKind::Target;
    let rec_value = recommendation.value();
    let mut answer = match (&rec_value, &floor) {
        (None, _) => {
            let code = recommendation.refusal().unwrap_or(RefusalKind::NoMatch);
            Answer::refused(
                metric,
                kind,
                code,
                None,
                RULE,
                format!(
                    "recommendation {} has no value: {}",
                    recommendation.metric, recommendation.reason
                ),
            )
        }
        (Some(r), None) => Answer::valued(
            metric,
            kind,
            *r,
            recommendation.timestamp_ms().unwrap_or_default(),
            RULE,
            reason!(
                "recommendation ",
                recommendation.metric,
                " = ",
                *r,
                " (no floor configured)"
            ),
        ),
        (Some(r), Some(f)) => match f.outcome {
            Outcome::Value {
                value,
                timestamp_ms,
            } => {
                let v = (*r).max(value);
                let ts = timestamp_ms.max(recommendation.timestamp_ms().unwrap_or_default());
                let winner = if value > *r {
                    "floor"
                } else {
                    "recommendation"
                };
                Answer::valued(
                    metric,
                    kind,
                    v,
                    ts,
                    RULE,
                    reason!(
                        "max(recommendation ",
                        recommendation.metric,
                        " = ",
                        *r,
                        ", floor ",
                        f.metric,
                        " = ",
                        value,
                        ") = ",
                        v,
                        " (",
                        winner,
                        ")"
                    ),
                )
            }
            Outcome::Refused {
                kind: code @ (RefusalKind::IncompleteFloor | RefusalKind::NoMatch),
                known_lower_bound,
            } if current_replicas.is_ok() => {
                let current = current_replicas.unwrap_or_default();
                let known = known_lower_bound.unwrap_or(0);
                let v = (*r).max(known).max(current);
                let (rule, state) = match code {
                    RefusalKind::NoMatch => (
                        "max(recommendation, current spec.replicas) while no pod reports an index",
                        "has no series",
                    ),
                    _ => (
                        "max(recommendation, known floor, current spec.replicas) while the floor is incomplete",
                        "is incomplete",
                    ),
                };
                Answer::valued(
                    metric,
                    kind,
                    v,
                    recommendation.timestamp_ms().unwrap_or_default(),
                    rule,
                    format!(
                        "floor {} {state} ({}); holding at max(recommendation {r}, known floor {known}, current spec.replicas {current}) = {v}: scale-out allowed, scale-in blocked",
                        f.metric, f.reason
                    ),
                )
            }
            Outcome::Refused { kind: code, .. } => {
                let mut reason = format!("floor {} has no value: {}", f.metric, f.reason);
                if let (RefusalKind::IncompleteFloor, Err(why)) = (code, current_replicas) {
                    reason.push_str(&format!("; cannot hold at the current count: {why}"));
                }
                Answer::refused(metric, kind, code, Some(*r), RULE, reason)
            }
        },
    };
    answer.parts.push(recommendation);
    answer.parts.extend(floor);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{TargetId, UnknownTarget};
    use crate::policy::fixtures::*;
    use crate::policy::{recommendation, stateful_floor};

    #[test]
    fn target_is_max_and_refuses_on_unknown() {
        let s = series();
        let rec = recommendation(&ctx(&s), &ev(vec![obs("a", 2.0, 0)]), None);
        let floor = stateful_floor(&ctx(&s), &ev(vec![obs("p", 5.0, 0)]), 0);
        let t = target("t", rec.clone(), Some(floor), Err("unused"));
        assert_eq!(t.value(), Some(5));
        assert_eq!(t.parts.len(), 2);
        // The healthy sentences, whole (written piece by piece: reason_text.rs).
        let scope = "namespace=default,hpa_target_name=lobby";
        assert_eq!(
            t.parts[0].reason,
            format!("1 fresh series of hpa_expect_replicas matches {scope}: value 2")
        );
        assert_eq!(
            t.parts[1].reason,
            format!(
                "highest retained index of hpa_expect_replicas over 1 series matching {scope} is 5"
            )
        );
        assert_eq!(
            t.reason,
            "max(recommendation m = 2, floor m = 5) = 5 (floor)"
        );
        assert_eq!(
            target("t", rec.clone(), None, Err("unused")).reason,
            "recommendation m = 2 (no floor configured)"
        );

        let stale = recommendation(&ctx(&s), &ev(vec![obs("a", 9.0, 90_000)]), None);
        let floor = stateful_floor(&ctx(&s), &ev(vec![obs("p", 5.0, 0)]), 0);
        assert_eq!(
            target("t", stale, Some(floor), Ok(3)).refusal(),
            Some(RefusalKind::Stale)
        );

        let mut e = ev(vec![obs("p", 4.0, 0)]);
        e.unknown_targets.push(UnknownTarget {
            target: TargetId("new".into()),
            last_error: None,
        });
        let incomplete = stateful_floor(&ctx(&s), &e, 0);
        let refused = target(
            "t",
            rec.clone(),
            Some(incomplete.clone()),
            Err("the workload is not in the watch cache"),
        );
        assert_eq!(refused.refusal(), Some(RefusalKind::IncompleteFloor));
        assert!(
            refused.reason.ends_with(
                "cannot hold at the current count: the workload is not in the watch cache"
            ),
            "{}",
            refused.reason
        );
        let held = target("t", rec.clone(), Some(incomplete), Ok(6));
        assert_eq!(held.value(), Some(6));
        assert!(held.reason.contains("scale-in blocked"));

        // No index series at all (a workload at zero): with the count known, the hold lets the
        // recommendation scale it up; without it, the refusal stands (404).
        let absent = stateful_floor(&ctx(&s), &ev(vec![]), 0);
        assert_eq!(absent.refusal(), Some(RefusalKind::NoMatch));
        let from_zero = target("t", rec.clone(), Some(absent.clone()), Ok(0));
        assert_eq!(from_zero.value(), Some(2), "{}", from_zero.reason);
        assert!(
            from_zero.reason.contains("has no series"),
            "{}",
            from_zero.reason
        );
        assert_eq!(
            target("t", rec.clone(), Some(absent.clone()), Ok(5)).value(),
            Some(5)
        );
        assert_eq!(
            target("t", rec, Some(absent), Err("no workload")).refusal(),
            Some(RefusalKind::NoMatch)
        );
    }
}
