//! `combine`: several recommenders for one target, the max of the valid ones.

use super::answer::*;
use super::valid_when::CurrentReplicas;
use crate::config::MetricKind;

/// The name a combined recommendation goes by in explanations: `combine(cpu, queue)`.
pub fn combined_name(names: &[&str]) -> String {
    format!("combine({})", names.join(", "))
}

/// Several recommenders for one target: the max of the valid ones. An input without a value
/// might be the one that wants more, so it blocks a decrease: `max(valid values, current)` when
/// the current count is known, a refusal otherwise. With no valid input at all there is nothing
/// to serve, and the refusal lets the HPA hold on its own (docs/hpa-behaviour.md §1.6).
pub fn combine(
    name: &str,
    kind: MetricKind,
    parts: Vec<Answer>,
    current: Result<&CurrentReplicas, &str>,
) -> Answer {
    const RULE: &str = "max over combined recommenders; an invalid one blocks a decrease";
    let valued: Vec<(&str, u64)> = parts
        .iter()
        .filter_map(|p| p.value().map(|v| (p.metric.as_str(), v)))
        .collect();
    let refused: Vec<&Answer> = parts.iter().filter(|p| p.value().is_none()).collect();
    let timestamp = parts
        .iter()
        .filter_map(Answer::timestamp_ms)
        .max()
        .unwrap_or_default();
    let best = valued.iter().max_by_key(|(_, v)| *v).copied();
    let listed = valued
        .iter()
        .map(|(m, v)| format!("{m} = {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut answer = match (best, refused.is_empty()) {
        (Some((winner, v)), true) => Answer::valued(
            name,
            kind,
            v,
            timestamp,
            RULE,
            format!("max({listed}) = {v} ({winner})"),
        ),
        (None, _) => Answer::refused(
            name,
            kind,
            refused
                .first()
                .and_then(|p| p.refusal())
                .unwrap_or(RefusalKind::NoMatch),
            None,
            RULE,
            format!(
                "no combined recommender has a value: {}",
                refused
                    .iter()
                    .map(|p| format!("{}: {}", p.metric, p.reason))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ),
        (Some((winner, v)), false) => {
            let blockers = refused
                .iter()
                .map(|p| format!("{}: {}", p.metric, p.reason))
                .collect::<Vec<_>>()
                .join("; ");
            match current {
                Ok(c) => {
                    let served = v.max(c.value);
                    let effect = if c.value > v {
                        format!("holding at current {} (scale-in blocked)", c.value)
                    } else {
                        format!("{winner} raises to {v} (scale-out allowed)")
                    };
                    Answer::valued(
                        name,
                        kind,
                        served,
                        timestamp,
                        RULE,
                        format!(
                            "max of valid inputs ({listed}) = {v}, but {} input(s) have no value ({blockers}); current {} from {}: {effect}",
                            refused.len(),
                            c.value,
                            c.source
                        ),
                    )
                }
                Err(why) => Answer::refused(
                    name,
                    kind,
                    refused[0].refusal().unwrap_or(RefusalKind::Partial),
                    Some(v),
                    RULE,
                    format!(
                        "max of valid inputs ({listed}) = {v}, but {} input(s) have no value ({blockers}) and the current replica count is unknown ({why}): serving {v} could shrink the workload",
                        refused.len()
                    ),
                ),
            }
        }
    };
    answer.parts = parts;
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::fixtures::{cur, rec, refused};

    #[test]
    fn combine_is_the_max_and_an_invalid_input_blocks_a_decrease() {
        let k = MetricKind::Target;
        let a = combine("c", k, vec![rec("a", 3), rec("b", 7)], Err("x"));
        assert_eq!(a.value(), Some(7));
        assert_eq!(a.parts.len(), 2);
        assert!(a.reason.contains("(b)"), "{}", a.reason);
        // One invalid: max(valid, current).
        let a = combine("c", k, vec![rec("a", 3), refused("b")], Ok(&cur(6)));
        assert_eq!(a.value(), Some(6));
        assert!(a.reason.contains("scale-in blocked"), "{}", a.reason);
        let a = combine("c", k, vec![rec("a", 9), refused("b")], Ok(&cur(6)));
        assert_eq!(a.value(), Some(9));
        // One invalid and no current: refused, the valid max is a lower bound.
        let a = combine("c", k, vec![rec("a", 3), refused("b")], Err("unknown"));
        assert_eq!(
            a.outcome,
            crate::policy::Outcome::Refused {
                kind: RefusalKind::Stale,
                known_lower_bound: Some(3)
            }
        );
        // None valid: refused even with a current count.
        let a = combine("c", k, vec![refused("a"), refused("b")], Ok(&cur(6)));
        assert_eq!(a.refusal(), Some(RefusalKind::Stale));
    }
}
