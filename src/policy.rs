//! The decision rules. Pure: evidence and a clock value in, an `Answer` out.
//!
//! The refusal is a first-class answer. An HPA that gets an error (any non-2xx) treats the
//! metric as invalid, and an invalid metric freezes scale-in while still allowing scale-out
//! through other metrics (REFERENCE.md §1.6). A served 0 or a guess would instead drive a
//! scale-in, so every path that cannot prove a value refuses, with the reason.

use std::fmt::Write as _;

use serde::Serialize;

use crate::clock::{rfc3339, Millis};
use crate::config::MetricKind;
use crate::store::{invalid_reason, Evidence, Observation};

/// Why no value can be served. The API maps each to a Kubernetes `Status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RefusalKind {
    /// Nothing in scope at all.
    NoMatch,
    /// Inputs exist but are too old.
    Stale,
    /// Some inputs are unknown (stale, invalid, never scraped) and could hold a higher value.
    Partial,
    /// Some pod's stateful index is unknown.
    IncompleteFloor,
    /// Every fresh input is invalid (NaN, negative, fractional, ...).
    Invalid,
    /// The source itself could not be read (for example Prometheus is down).
    SourceUnavailable,
    /// A `validWhen` gate is false, stale or missing and the current replica count is unknown,
    /// so a value could lower the workload on input its own recommender calls invalid.
    GateClosed,
}

impl RefusalKind {
    /// HTTP status: "not found" for nothing in scope, "unavailable" for data that is unknown
    /// right now and may come back.
    pub fn http_code(self) -> u16 {
        match self {
            RefusalKind::NoMatch => 404,
            _ => 503,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Outcome {
    Value {
        value: u64,
        timestamp_ms: Millis,
    },
    Refused {
        kind: RefusalKind,
        /// The largest value that is certain, when some inputs are unknown: the answer can
        /// only be higher than this, never lower.
        known_lower_bound: Option<u64>,
    },
}

/// How one input was used.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InputNote {
    pub target: String,
    pub series: String,
    pub labels: std::collections::BTreeMap<String, String>,
    /// The raw newest value as text, so NaN and Inf survive JSON.
    pub value: String,
    pub age_seconds: f64,
    pub status: String,
    pub used: bool,
}

/// A served value or a refusal, and everything needed to explain it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub metric: String,
    pub kind: &'static str,
    pub outcome: Outcome,
    /// The rule that produced the outcome, e.g. `max over fresh series`.
    pub rule: String,
    /// One human-readable sentence: why this value, or why no value.
    pub reason: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputNote>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Answer>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Answer {
    pub fn value(&self) -> Option<u64> {
        match self.outcome {
            Outcome::Value { value, .. } => Some(value),
            Outcome::Refused { .. } => None,
        }
    }

    pub fn timestamp_ms(&self) -> Option<Millis> {
        match self.outcome {
            Outcome::Value { timestamp_ms, .. } => Some(timestamp_ms),
            Outcome::Refused { .. } => None,
        }
    }

    pub fn refusal(&self) -> Option<RefusalKind> {
        match self.outcome {
            Outcome::Refused { kind, .. } => Some(kind),
            Outcome::Value { .. } => None,
        }
    }

    pub(crate) fn refused(
        metric: &str,
        kind: MetricKind,
        refusal: RefusalKind,
        known_lower_bound: Option<u64>,
        rule: &str,
        reason: String,
    ) -> Answer {
        Answer {
            metric: metric.into(),
            kind: kind.as_str(),
            outcome: Outcome::Refused {
                kind: refusal,
                known_lower_bound,
            },
            rule: rule.into(),
            reason,
            inputs: Vec::new(),
            parts: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub(crate) fn valued(
        metric: &str,
        kind: MetricKind,
        value: u64,
        timestamp_ms: Millis,
        rule: &str,
        reason: String,
    ) -> Answer {
        Answer {
            metric: metric.into(),
            kind: kind.as_str(),
            outcome: Outcome::Value {
                value,
                timestamp_ms,
            },
            rule: rule.into(),
            reason,
            inputs: Vec::new(),
            parts: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// The source could not be read at all: refuse with its error.
pub fn source_unavailable(metric: &str, kind: MetricKind, error: &str) -> Answer {
    Answer::refused(
        metric,
        kind,
        RefusalKind::SourceUnavailable,
        None,
        "source must answer",
        error.to_string(),
    )
}

/// What a query asked for, for messages: `namespace=default,hpa_target_name=lobby`.
#[derive(Clone, Debug)]
pub struct QueryContext<'a> {
    pub metric: &'a str,
    pub series: &'a [String],
    pub scope: String,
    pub now: Millis,
    pub stale_after_ms: Millis,
}

impl QueryContext<'_> {
    pub(crate) fn series_names(&self) -> String {
        self.series.join("|")
    }
}

pub(crate) fn age_s(now: Millis, at: Millis) -> f64 {
    ((now - at).max(0) as f64) / 1000.0
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
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

pub(crate) fn note(q: &QueryContext<'_>, o: &Observation, status: String, used: bool) -> InputNote {
    InputNote {
        target: o.target.to_string(),
        series: o.series.clone(),
        labels: (*o.labels).clone(),
        value: fmt_value(o.value),
        age_seconds: age_s(q.now, o.observed_at_ms),
        status,
        used,
    }
}

fn target_list(ids: impl Iterator<Item = String>) -> String {
    let ids: Vec<String> = ids.collect();
    let shown: Vec<&str> = ids.iter().take(3).map(String::as_str).collect();
    let mut s = shown.join(", ");
    if ids.len() > 3 {
        let _ = write!(s, " and {} more", ids.len() - 3);
    }
    s
}

/// An absolute replica recommendation: the max over fresh, valid series, never the sum.
///
/// Several series per workload are normal: a former controller keeps exporting its last value
/// (REFERENCE.md §4.1), and the HPA would sum every item it receives (§1.2), so exactly one
/// value, the max, is served. A series that is unknown (stale or invalid) and might hold a
/// higher value than the fresh max blocks the answer: serving the lower fresh max would let
/// partial data shrink the workload.
pub fn recommendation(q: &QueryContext<'_>, ev: &Evidence) -> Answer {
    const RULE: &str = "max over fresh series (never sum)";
    let kind = MetricKind::Recommendation;
    let mut inputs = Vec::new();
    let mut best: Option<(u64, Millis)> = None;
    let mut newest_used: Millis = Millis::MIN;
    let mut stale: Vec<&Observation> = Vec::new();
    let mut invalid: Vec<(&Observation, &'static str)> = Vec::new();
    let mut gone = 0usize;
    for o in &ev.observations {
        if !o.present {
            gone += 1;
            continue;
        }
        let age_ms = q.now - o.observed_at_ms;
        if age_ms > q.stale_after_ms {
            stale.push(o);
        } else if let Some(why) = invalid_reason(o.value) {
            invalid.push((o, why));
        } else {
            let v = o.value as u64;
            if best.is_none_or(|(b, _)| v > b) {
                best = Some((v, o.observed_at_ms));
            }
            newest_used = newest_used.max(o.observed_at_ms);
        }
    }
    let best_value = best.map(|(v, _)| v);
    for o in ev.observations.iter().filter(|o| o.present) {
        let age_ms = q.now - o.observed_at_ms;
        let status = if age_ms > q.stale_after_ms {
            format!(
                "stale: {:.0}s old (staleAfter {}){}",
                age_ms as f64 / 1000.0,
                fmt_limit(q.stale_after_ms),
                if o.target_failing {
                    ", target failing"
                } else {
                    ""
                }
            )
        } else if let Some(why) = invalid_reason(o.value) {
            format!("invalid: {why}")
        } else {
            "fresh".into()
        };
        let used = status == "fresh";
        inputs.push(note(q, o, status, used));
    }

    let present = ev.observations.len() - gone;
    let mut answer = if present == 0 {
        let mut reason = format!("no series of {} match {}", q.series_names(), q.scope);
        if gone > 0 {
            let _ = write!(
                reason,
                " ({gone} series are no longer exported by their targets)"
            );
        }
        if !ev.unknown_targets.is_empty() {
            let _ = write!(
                reason,
                "; {} target(s) that may export them have never been scraped successfully: {}",
                ev.unknown_targets.len(),
                target_list(ev.unknown_targets.iter().map(|t| t.target.to_string()))
            );
            Answer::refused(q.metric, kind, RefusalKind::Partial, None, RULE, reason)
        } else {
            Answer::refused(q.metric, kind, RefusalKind::NoMatch, None, RULE, reason)
        }
    } else if let Some(best_value) = best_value {
        // Unknown inputs that could be higher than the fresh max.
        let blockers_stale: Vec<&&Observation> = stale
            .iter()
            .filter(|o| o.last_valid.is_none_or(|(v, _)| v > best_value))
            .collect();
        if !invalid.is_empty() || !blockers_stale.is_empty() {
            let mut why = Vec::new();
            for (o, reason) in &invalid {
                why.push(format!(
                    "{} from {} is {} ({})",
                    o.series,
                    o.target,
                    fmt_value(o.value),
                    reason
                ));
            }
            for o in &blockers_stale {
                why.push(format!(
                    "{} from {} is {:.0}s old (staleAfter {}) with last value {}",
                    o.series,
                    o.target,
                    age_s(q.now, o.observed_at_ms),
                    fmt_limit(q.stale_after_ms),
                    o.last_valid
                        .map(|(v, _)| v.to_string())
                        .unwrap_or_else(|| "unknown".into())
                ));
            }
            let reason = format!(
                "the fresh max of {} for {} is {best_value}, but {}: serving {best_value} could shrink the workload on unknown input",
                q.series_names(),
                q.scope,
                why.join("; ")
            );
            Answer::refused(
                q.metric,
                kind,
                RefusalKind::Partial,
                Some(best_value),
                RULE,
                reason,
            )
        } else {
            let fresh = inputs.iter().filter(|i| i.used).count();
            let mut reason = if fresh == 1 {
                format!(
                    "1 fresh series of {} matches {}: value {best_value}",
                    q.series_names(),
                    q.scope
                )
            } else {
                format!(
                    "max of {fresh} fresh series of {} matching {} is {best_value}",
                    q.series_names(),
                    q.scope
                )
            };
            if !stale.is_empty() {
                let _ = write!(
                    reason,
                    "; {} stale series ignored, all with lower last values",
                    stale.len()
                );
            }
            Answer::valued(q.metric, kind, best_value, newest_used, RULE, reason)
        }
    } else if !stale.is_empty() {
        let newest = stale
            .iter()
            .map(|o| o.observed_at_ms)
            .max()
            .unwrap_or(q.now);
        let reason = format!(
            "{} series of {} match {} but the newest is {:.0}s old (staleAfter {}){}",
            stale.len(),
            q.series_names(),
            q.scope,
            age_s(q.now, newest),
            fmt_limit(q.stale_after_ms),
            if invalid.is_empty() {
                String::new()
            } else {
                format!(", and {} fresh series are invalid", invalid.len())
            }
        );
        Answer::refused(q.metric, kind, RefusalKind::Stale, None, RULE, reason)
    } else {
        let reason = format!(
            "every fresh series of {} matching {} is invalid: {}",
            q.series_names(),
            q.scope,
            invalid
                .iter()
                .map(|(o, why)| format!("{} from {} ({why})", fmt_value(o.value), o.target))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Answer::refused(q.metric, kind, RefusalKind::Invalid, None, RULE, reason)
    };
    answer.inputs = inputs;
    answer
}

/// The stateful floor: the highest retained one-based index across the workload's pods.
///
/// `hpa_stateful_index` is `ordinal + 1` while a pod holds state and 0 otherwise
/// (REFERENCE.md §4.1), so the largest retained value is the smallest replica count that keeps
/// the highest state-owning ordinal. With `spec.ordinals.start = s` the floor is `index - s`.
/// A pod whose scrape fails keeps its last valid index; a pod whose index has never been seen
/// makes the floor incomplete, which is refused rather than under-reported.
pub fn stateful_floor(q: &QueryContext<'_>, ev: &Evidence, ordinals_start: u64) -> Answer {
    const RULE: &str = "max retained index over pods";
    let kind = MetricKind::StatefulFloor;
    let mut inputs = Vec::new();
    let mut best: Option<(u64, Millis)> = None;
    let mut never_valid: Vec<&Observation> = Vec::new();
    let mut retained_from_failing = 0usize;
    for o in &ev.observations {
        match o.last_valid {
            Some((v, at)) => {
                let fresh = q.now - o.observed_at_ms <= q.stale_after_ms;
                let status = if let Some(why) = invalid_reason(o.value) {
                    format!(
                        "retained {v} (newest value {} is {why})",
                        fmt_value(o.value)
                    )
                } else if o.target_failing || !fresh {
                    retained_from_failing += 1;
                    format!(
                        "retained {v} from {:.0}s ago (target failing)",
                        age_s(q.now, at)
                    )
                } else if !o.present {
                    format!("retained {v} (series no longer exported; pod still exists)")
                } else {
                    "fresh".into()
                };
                inputs.push(note(q, o, status, true));
                if best.is_none_or(|(b, _)| v > b) {
                    best = Some((v, at));
                }
            }
            None => {
                inputs.push(note(
                    q,
                    o,
                    format!("unknown: no valid index seen ({})", fmt_value(o.value)),
                    false,
                ));
                never_valid.push(o);
            }
        }
    }
    let offset = |v: u64| v.saturating_sub(ordinals_start);
    let mut answer = if !ev.unknown_targets.is_empty() || !never_valid.is_empty() {
        let mut unknown: Vec<String> = ev
            .unknown_targets
            .iter()
            .map(|t| match &t.last_error {
                Some(e) => format!("{} ({e})", t.target),
                None => format!("{} (not scraped yet)", t.target),
            })
            .collect();
        unknown.extend(
            never_valid
                .iter()
                .map(|o| format!("{} (index {} never valid)", o.target, fmt_value(o.value))),
        );
        let reason = format!(
            "the floor for {} is incomplete: {} target(s) never reported a valid index: {}{}",
            q.scope,
            unknown.len(),
            target_list(unknown.into_iter()),
            match best {
                Some((v, _)) => format!("; the known floor is at least {}", offset(v)),
                None => String::new(),
            }
        );
        Answer::refused(
            q.metric,
            kind,
            RefusalKind::IncompleteFloor,
            best.map(|(v, _)| offset(v)),
            RULE,
            reason,
        )
    } else if let Some((v, _)) = best {
        let newest = ev
            .observations
            .iter()
            .map(|o| o.observed_at_ms)
            .max()
            .unwrap_or(q.now);
        let pods = inputs.len();
        let mut reason = format!(
            "highest retained index of {} over {pods} series matching {} is {v}",
            q.series_names(),
            q.scope
        );
        if ordinals_start > 0 {
            let _ = write!(
                reason,
                "; minus ordinals start {ordinals_start} gives {}",
                offset(v)
            );
        }
        if retained_from_failing > 0 {
            let _ = write!(
                reason,
                "; {retained_from_failing} retained from failing targets"
            );
        }
        Answer::valued(q.metric, kind, offset(v), newest, RULE, reason)
    } else {
        Answer::refused(
            q.metric,
            kind,
            RefusalKind::NoMatch,
            None,
            RULE,
            format!("no series of {} match {}", q.series_names(), q.scope),
        )
    };
    answer.inputs = inputs;
    answer
}

/// The served target: `max(recommendation, floor)`.
///
/// A refused recommendation refuses the target: the HPA then keeps its replicas (§1.6). An
/// incomplete floor refuses too, unless the workload's current `spec.replicas` is known: then
/// `max(recommendation, known floor, current)` allows scale-out and blocks scale-in.
pub fn target(
    metric: &str,
    recommendation: Answer,
    floor: Option<Answer>,
    current_replicas: Option<u64>,
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
            format!(
                "recommendation {} = {r} (no floor configured)",
                recommendation.metric
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
                    format!(
                        "max(recommendation {} = {r}, floor {} = {value}) = {v} ({winner})",
                        recommendation.metric, f.metric
                    ),
                )
            }
            Outcome::Refused {
                kind: RefusalKind::IncompleteFloor,
                known_lower_bound,
            } if current_replicas.is_some() => {
                let current = current_replicas.unwrap_or_default();
                let known = known_lower_bound.unwrap_or(0);
                let v = (*r).max(known).max(current);
                Answer::valued(
                    metric,
                    kind,
                    v,
                    recommendation.timestamp_ms().unwrap_or_default(),
                    "max(recommendation, known floor, current spec.replicas) while the floor is incomplete",
                    format!(
                        "floor {} is incomplete ({}); holding at max(recommendation {r}, known floor {known}, current spec.replicas {current}) = {v}: scale-out allowed, scale-in blocked",
                        f.metric, f.reason
                    ),
                )
            }
            Outcome::Refused { kind: code, .. } => Answer::refused(
                metric,
                kind,
                code,
                Some(*r),
                RULE,
                format!("floor {} has no value: {}", f.metric, f.reason),
            ),
        },
    };
    answer.parts.push(recommendation);
    answer.parts.extend(floor);
    answer
}

/// `scope` text for messages: `namespace=default,hpa_target_name=lobby`.
pub fn describe_scope(namespace_label: &str, namespace: &str, selector: &str) -> String {
    if selector.is_empty() {
        format!("{namespace_label}={namespace}")
    } else {
        format!("{namespace_label}={namespace},{selector}")
    }
}

/// A short line for logs.
pub fn summary(a: &Answer) -> String {
    match &a.outcome {
        Outcome::Value {
            value,
            timestamp_ms,
        } => format!("{} = {value} at {}", a.metric, rfc3339(*timestamp_ms)),
        Outcome::Refused { kind, .. } => format!("{} refused ({kind:?}): {}", a.metric, a.reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{TargetId, UnknownTarget};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    const NOW: Millis = 1_000_000;
    const STALE: Millis = 45_000;

    fn ctx<'a>(series: &'a [String]) -> QueryContext<'a> {
        QueryContext {
            metric: "m",
            series,
            scope: "namespace=default,hpa_target_name=lobby".into(),
            now: NOW,
            stale_after_ms: STALE,
        }
    }

    fn obs(target: &str, value: f64, age_ms: Millis) -> Observation {
        let valid = invalid_reason(value).is_none().then_some(value as u64);
        Observation {
            target: TargetId(target.into()),
            series: "hpa_expect_replicas".into(),
            labels: Arc::new(BTreeMap::new()),
            value,
            observed_at_ms: NOW - age_ms,
            last_valid: valid.map(|v| (v, NOW - age_ms)),
            present: true,
            target_failing: false,
        }
    }

    fn ev(observations: Vec<Observation>) -> Evidence {
        Evidence {
            observations,
            ..Evidence::default()
        }
    }

    fn series() -> Vec<String> {
        vec!["hpa_expect_replicas".into()]
    }

    #[test]
    fn recommendation_is_max_never_sum() {
        let s = series();
        let a = recommendation(&ctx(&s), &ev(vec![obs("a", 3.0, 0), obs("b", 7.0, 1000)]));
        assert_eq!(a.value(), Some(7));
        assert!(a.reason.contains("max of 2 fresh series"), "{}", a.reason);
    }

    #[test]
    fn all_stale_is_refused_with_age() {
        let s = series();
        let a = recommendation(
            &ctx(&s),
            &ev(vec![obs("a", 3.0, 93_000), obs("b", 4.0, 100_000)]),
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
        let a = recommendation(&ctx(&s), &ev(vec![obs("a", 3.0, 0), obs("b", 9.0, 60_000)]));
        assert_eq!(a.refusal(), Some(RefusalKind::Partial));
        assert!(a.reason.contains("last value 9"), "{}", a.reason);
        // A lower stale series cannot hide a higher value: ignored.
        let a = recommendation(&ctx(&s), &ev(vec![obs("a", 9.0, 0), obs("b", 3.0, 60_000)]));
        assert_eq!(a.value(), Some(9));
    }

    #[test]
    fn invalid_values_are_never_served() {
        let s = series();
        for bad in [f64::NAN, f64::INFINITY, -1.0, 2.5, 1e15] {
            let a = recommendation(&ctx(&s), &ev(vec![obs("a", bad, 0)]));
            assert_eq!(a.refusal(), Some(RefusalKind::Invalid), "{bad}");
            let a = recommendation(&ctx(&s), &ev(vec![obs("a", 5.0, 0), obs("b", bad, 0)]));
            assert_eq!(a.refusal(), Some(RefusalKind::Partial), "{bad}");
            assert!(a.inputs.iter().any(|i| i.status.starts_with("invalid")));
        }
    }

    #[test]
    fn nothing_matched_is_not_found_and_unknown_targets_are_partial() {
        let s = series();
        let a = recommendation(&ctx(&s), &ev(vec![]));
        assert_eq!(a.refusal(), Some(RefusalKind::NoMatch));
        let mut e = ev(vec![]);
        e.unknown_targets.push(UnknownTarget {
            target: TargetId("http://x/m".into()),
            last_error: None,
        });
        assert_eq!(
            recommendation(&ctx(&s), &e).refusal(),
            Some(RefusalKind::Partial)
        );
    }

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

    #[test]
    fn target_is_max_and_refuses_on_unknown() {
        let s = series();
        let rec = recommendation(&ctx(&s), &ev(vec![obs("a", 2.0, 0)]));
        let floor = stateful_floor(&ctx(&s), &ev(vec![obs("p", 5.0, 0)]), 0);
        let t = target("t", rec.clone(), Some(floor), None);
        assert_eq!(t.value(), Some(5));
        assert_eq!(t.parts.len(), 2);

        let stale = recommendation(&ctx(&s), &ev(vec![obs("a", 9.0, 90_000)]));
        let floor = stateful_floor(&ctx(&s), &ev(vec![obs("p", 5.0, 0)]), 0);
        assert_eq!(
            target("t", stale, Some(floor), Some(3)).refusal(),
            Some(RefusalKind::Stale)
        );

        let mut e = ev(vec![obs("p", 4.0, 0)]);
        e.unknown_targets.push(UnknownTarget {
            target: TargetId("new".into()),
            last_error: None,
        });
        let incomplete = stateful_floor(&ctx(&s), &e, 0);
        assert_eq!(
            target("t", rec.clone(), Some(incomplete.clone()), None).refusal(),
            Some(RefusalKind::IncompleteFloor)
        );
        let held = target("t", rec, Some(incomplete), Some(6));
        assert_eq!(held.value(), Some(6));
        assert!(held.reason.contains("scale-in blocked"));
    }
}
