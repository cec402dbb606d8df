//! The answer a rule gives: a served value or a refusal, and everything needed to explain it.

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
    // Shared with the store rather than copied: an answer notes every input, and copying each
    // label map was most of an answer's cost (the bench's serve-under-live-load profile).
    pub target: crate::store::TargetId,
    pub series: String,
    pub labels: crate::store::SeriesLabels,
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
