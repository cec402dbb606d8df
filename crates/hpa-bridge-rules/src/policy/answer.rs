//! The answer a rule gives: a served value or a refusal, and everything needed to explain it.

use std::borrow::Cow;

use serde::Serialize;

use crate::clock::{rfc3339, Millis};
use crate::config::MetricKind;

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

    /// The kind's name as the `outcome` label of the answer counter writes it: its Rust name
    /// (a test holds them equal), as a static string.
    pub fn label(self) -> &'static str {
        match self {
            RefusalKind::NoMatch => "NoMatch",
            RefusalKind::Stale => "Stale",
            RefusalKind::Partial => "Partial",
            RefusalKind::IncompleteFloor => "IncompleteFloor",
            RefusalKind::Invalid => "Invalid",
            RefusalKind::SourceUnavailable => "SourceUnavailable",
            RefusalKind::GateClosed => "GateClosed",
        }
    }
}

/// Serialized by hand (below): the camelCase keys beside the snake_case ones they replace.
#[derive(Clone, Debug, PartialEq)]
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

/// `/status` keys are camelCase, and times RFC 3339 like every other time there: `timestamp`
/// and `knownLowerBound`. The snake_case keys they replace are still written, deprecated, for
/// one release (CHANGELOG.md), so a reader can move over before they go.
impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            Outcome::Value {
                value,
                timestamp_ms,
            } => {
                m.serialize_entry("state", "value")?;
                m.serialize_entry("value", value)?;
                m.serialize_entry("timestamp", &rfc3339(*timestamp_ms))?;
                m.serialize_entry("timestamp_ms", timestamp_ms)?;
            }
            Outcome::Refused {
                kind,
                known_lower_bound,
            } => {
                m.serialize_entry("state", "refused")?;
                m.serialize_entry("kind", kind)?;
                m.serialize_entry("knownLowerBound", known_lower_bound)?;
                m.serialize_entry("known_lower_bound", known_lower_bound)?;
            }
        }
        m.end()
    }
}

/// How one input was used.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InputNote {
    /// The target, name and labels (read through it: `n.id.target`). Shared with the store
    /// rather than copied, and through the scope's list of identities (evidence/series_id.rs):
    /// one reference count on a line the answer already touched, not three on the store's
    /// cold lines.
    #[serde(flatten)]
    pub id: crate::evidence::SeriesRef,
    /// The raw newest value, as text in JSON so NaN and Inf survive.
    pub value: RawValue,
    pub age_seconds: f64,
    /// Borrowed for the common statuses (`fresh`), so that noting each of hundreds of inputs
    /// does not allocate.
    pub status: std::borrow::Cow<'static, str>,
    pub used: bool,
}

/// A sample value as exposed, which may be NaN, infinite, negative or fractional. Kept as a
/// number and printed only when shown, so noting an input costs no formatting.
#[derive(Clone, Copy, Debug)]
pub struct RawValue(pub f64);

impl PartialEq for RawValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits() || (self.0.is_nan() && other.0.is_nan())
    }
}

impl std::fmt::Display for RawValue {
    /// `NaN`, `+Inf` and `-Inf` as in the exposition format; whole numbers without a fraction.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        if v.is_nan() {
            f.write_str("NaN")
        } else if v.is_infinite() {
            f.write_str(if v > 0.0 { "+Inf" } else { "-Inf" })
        } else if v.fract() == 0.0 && v.abs() < 1e15 && !(v == 0.0 && v.is_sign_negative()) {
            // Replica counts are whole numbers: printed as integers, the same text as `{v}`
            // gives (`3`, not `3.0`) without float formatting.
            write!(f, "{}", v as i64)
        } else {
            write!(f, "{v}")
        }
    }
}

impl Serialize for RawValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A served value or a refusal, and everything needed to explain it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub metric: String,
    pub kind: &'static str,
    pub outcome: Outcome,
    /// The rule that produced the outcome, e.g. `max over fresh series`.
    pub rule: Cow<'static, str>,
    /// One human-readable sentence: why this value, or why no value.
    pub reason: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputNote>,
    /// Inputs counted but not noted, by status: a served answer notes only its first few
    /// (input_notes.rs).
    #[serde(skip_serializing_if = "super::InputCounts::is_empty")]
    pub omitted_inputs: super::InputCounts,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Answer>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What the producers of this answer's inputs said of their values (a JSON source's
    /// `reason`), beside the answer they fed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub producer_reasons: Vec<crate::evidence::ProducerReason>,
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

    pub fn refused(
        metric: &str,
        kind: MetricKind,
        refusal: RefusalKind,
        known_lower_bound: Option<u64>,
        rule: impl Into<Cow<'static, str>>,
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
            omitted_inputs: Default::default(),
            parts: Vec::new(),
            warnings: Vec::new(),
            producer_reasons: Vec::new(),
        }
    }

    pub fn valued(
        metric: &str,
        kind: MetricKind,
        value: u64,
        timestamp_ms: Millis,
        rule: impl Into<Cow<'static, str>>,
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
            omitted_inputs: Default::default(),
            parts: Vec::new(),
            warnings: Vec::new(),
            producer_reasons: Vec::new(),
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
    use super::RefusalKind::*;

    #[test]
    fn a_refusal_label_is_the_kind_s_rust_name() {
        // `label` matches every kind, so a new one is named there before it compiles.
        let all = [
            NoMatch,
            Stale,
            Partial,
            IncompleteFloor,
            Invalid,
            SourceUnavailable,
            GateClosed,
        ];
        for kind in all {
            assert_eq!(kind.label(), format!("{kind:?}"));
        }
    }

    #[test]
    fn an_outcome_has_camel_case_keys_and_its_deprecated_twins() {
        use super::{Outcome, RefusalKind};
        let v = serde_json::to_value(Outcome::Value {
            value: 3,
            timestamp_ms: 1_000,
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"state": "value", "value": 3, "timestamp": "1970-01-01T00:00:01Z", "timestamp_ms": 1000})
        );
        let v = serde_json::to_value(Outcome::Refused {
            kind: RefusalKind::Stale,
            known_lower_bound: Some(2),
        })
        .unwrap();
        assert_eq!(v["state"], "refused");
        assert_eq!(v["knownLowerBound"], 2);
        assert_eq!(v["known_lower_bound"], 2);
    }
}
