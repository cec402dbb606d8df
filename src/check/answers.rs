//! What the adapter answers for each query the HPA will send (docs/hpa-behaviour.md §1.6).

use super::*;

pub(super) fn check_answers(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    ns: &str,
    name: &str,
) {
    let answers: Vec<AdapterAnswer> = ctx
        .inputs
        .answers
        .iter()
        .filter(|a| a.query.namespace == ns && a.query.hpa == name)
        .cloned()
        .collect();
    for a in answers {
        let q = &a.query;
        let field = q.field();
        let asked = format!(
            "GET {} {}",
            q.metric,
            if q.selector.is_empty() {
                "(no selector)".to_string()
            } else {
                format!("with labelSelector {:?}", q.selector)
            }
        );
        match &a.reply {
            AdapterReply::Values { items: 1, .. } => {}
            AdapterReply::Values { items, value } => ctx.push(
                rules::ADAPTER_REFUSES,
                Severity::Error,
                object,
                field,
                format!("{asked}: the answer has {items} items (first value {value:?})"),
                "the HPA sums every item and treats an empty list as an error (docs/hpa-behaviour.md §1.2): an absolute count must be exactly one item",
                "check which adapter answers (APIService) and its version",
                src,
            ),
            AdapterReply::Error { code: 404, reason, message } => ctx.push(
                rules::NO_SERIES,
                Severity::Error,
                object,
                field,
                format!("{asked}: the adapter answers 404 {reason}: {message}"),
                "no series matches the selector, so the metric is invalid on every sync: the HPA cannot scale down, and scales up only through other metrics (docs/hpa-behaviour.md §1.6)",
                "make the selector match the labels the workload's series carry (see the adapter's /status), or fix the scrape configuration",
                src,
            ),
            AdapterReply::Error { code, reason, message } => ctx.push(
                rules::ADAPTER_REFUSES,
                Severity::Error,
                object,
                field,
                format!("{asked}: the adapter answers {code} {reason}: {message}"),
                "an error makes the metric invalid: scale-in is frozen while it lasts (docs/hpa-behaviour.md §1.6); hpa-bridge refuses rather than guess, and the message says which input is unknown",
                "fix the input the message names (stale or failing targets, invalid values); the adapter's /status explains every answer",
                src,
            ),
        }
    }
}
