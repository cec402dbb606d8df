//! A producer's own account of its values (a JSON source's `reason`, docs/json-source.md),
//! carried to where operators look: beside each answer its values fed
//! (`Answer::producer_reasons`), and quoted in the message of a refusal or hold its target
//! caused, which the HPA shows in its events through the Status message. The page already cut
//! each reason to `REASON_MAX_CHARS`; quoting escapes what is not printable, so a producer
//! cannot forge the rest of a message.

use std::fmt::Write as _;

use super::answer::Answer;
use crate::evidence::{Evidence, ProducerReason, TargetId};

/// Producers quoted in one message; the rest are counted. A recommender publishes its status
/// from one or a few endpoints, and a message names each cause once.
const QUOTED: usize = 3;

/// Append to `message` what the producers of `causes` said, each producer once, in the order
/// first named.
pub(crate) fn quote_producers<'a>(
    message: &mut String,
    ev: &Evidence,
    causes: impl IntoIterator<Item = &'a TargetId>,
) {
    if ev.producer_reasons.is_empty() {
        return;
    }
    let mut seen: Vec<&ProducerReason> = Vec::new();
    for target in causes {
        if seen.iter().any(|r| r.target == *target) {
            continue;
        }
        if let Some(r) = ev.producer_reasons.iter().find(|r| r.target == *target) {
            seen.push(r);
        }
    }
    for r in seen.iter().take(QUOTED) {
        let _ = write!(message, "; producer {} says {:?}", r.target, &*r.reason);
    }
    if seen.len() > QUOTED {
        let _ = write!(
            message,
            "; {} more producers gave reasons (see /status)",
            seen.len() - QUOTED
        );
    }
}

/// Keep beside `answer` what the producers of its evidence said.
pub(crate) fn attach(answer: &mut Answer, ev: &Evidence) {
    keep_reasons(answer, ev.producer_reasons.iter().cloned());
}

/// Keep `reasons` beside `answer`, each producer once.
pub(crate) fn keep_reasons(answer: &mut Answer, reasons: impl IntoIterator<Item = ProducerReason>) {
    for r in reasons {
        if !answer.producer_reasons.iter().any(|a| a.target == r.target) {
            answer.producer_reasons.push(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::policy::fixtures::{ev, obs};

    fn said(target: &str, reason: &str) -> ProducerReason {
        ProducerReason {
            target: TargetId(target.into()),
            reason: Arc::from(reason),
        }
    }

    #[test]
    fn each_cause_is_quoted_once_escaped_and_the_rest_counted() {
        let mut e = ev(vec![obs("a", 1.0, 0)]);
        e.producer_reasons = vec![
            said("a", "backlog \"drained\"\nfor 300s"),
            said("b", "b"),
            said("c", "c"),
            said("d", "d"),
            said("e", "e"),
        ];
        let t = |s: &str| TargetId(s.into());
        let causes = [t("a"), t("a"), t("x"), t("b"), t("c"), t("d"), t("e")];
        let mut m = String::from("stale");
        quote_producers(&mut m, &e, &causes);
        assert_eq!(
            m,
            "stale; producer a says \"backlog \\\"drained\\\"\\nfor 300s\"; producer b says \"b\"; producer c says \"c\"; 2 more producers gave reasons (see /status)"
        );
        let mut quiet = String::from("stale");
        quote_producers(&mut quiet, &e, &[t("x")]);
        assert_eq!(quiet, "stale");
    }

    /// The rules quote the producer of each input that keeps them from a value, and keep
    /// every producer's reason beside the answer, valued or not.
    #[test]
    fn rules_quote_the_producers_that_caused_a_refusal_or_hold() {
        let s = crate::policy::fixtures::series();
        let q = crate::policy::fixtures::ctx(&s);
        let reasons = vec![said("a", "loop stuck"), said("b", "all good")];
        let mut stale = ev(vec![obs("a", 3.0, 60_000)]);
        stale.producer_reasons = reasons.clone();
        let a = crate::policy::recommendation(&q, &stale, None);
        assert_eq!(a.refusal(), Some(crate::policy::RefusalKind::Stale));
        assert!(
            a.reason.ends_with("; producer a says \"loop stuck\""),
            "{}",
            a.reason
        );
        assert_eq!(a.producer_reasons, reasons);

        // A fresh b beside a stale a that could be higher: a caused it, b did not.
        let mut partial = ev(vec![obs("a", 9.0, 60_000), obs("b", 3.0, 0)]);
        partial.producer_reasons = reasons.clone();
        let a = crate::policy::recommendation(&q, &partial, None);
        assert_eq!(a.refusal(), Some(crate::policy::RefusalKind::Partial));
        assert!(a.reason.contains("producer a says"), "{}", a.reason);
        assert!(!a.reason.contains("producer b says"), "{}", a.reason);

        let mut fresh = ev(vec![obs("b", 3.0, 0)]);
        fresh.producer_reasons = vec![said("b", "all good")];
        let a = crate::policy::recommendation(&q, &fresh, None);
        assert_eq!(a.value(), Some(3));
        assert!(!a.reason.contains("says"), "{}", a.reason);
        assert_eq!(a.producer_reasons, fresh.producer_reasons);

        // A closed gate quotes the producer whose gate series is false.
        let gate = crate::config::ValidWhen {
            series: "metrics_valid".into(),
            equals: 1.0,
        };
        let mut closed = ev(vec![obs("a", 0.0, 0)]);
        closed.producer_reasons = vec![said("a", "metrics lag behind")];
        let check = crate::policy::valid_when::check_gate(&gate, &q, &closed);
        assert!(!check.open);
        assert!(
            check
                .reason
                .ends_with("; producer a says \"metrics lag behind\""),
            "{}",
            check.reason
        );
        let held = crate::policy::valid_when::apply_gate(
            crate::policy::fixtures::rec("r", 3),
            crate::config::MetricKind::Recommendation,
            check,
            Err("unknown"),
        );
        assert_eq!(held.producer_reasons, closed.producer_reasons);

        // A floor whose index from a is never valid quotes a.
        let mut floor = ev(vec![obs("a", f64::NAN, 0)]);
        floor.producer_reasons = vec![said("a", "restoring state")];
        let f = crate::policy::stateful_floor(&q, &floor, 0);
        assert_eq!(
            f.refusal(),
            Some(crate::policy::RefusalKind::IncompleteFloor)
        );
        assert!(
            f.reason.ends_with("; producer a says \"restoring state\""),
            "{}",
            f.reason
        );
    }
}
