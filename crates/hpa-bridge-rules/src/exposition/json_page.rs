//! Reading a recommender's JSON status document (`scrape.static[].json`, `jsonConfigs`) as
//! samples, so that from here on they flow through the same store and rules as exposition
//! samples. Pure: the document, the compiled paths and the limits in, samples out.
//!
//! Paths are RFC 9535 JSONPath, evaluated by `jsonpath-rust`. A path is a question about one
//! value: matching nothing means the value is absent from this page, matching several means
//! the page does not say which it means, so the page is refused rather than guessed at.

use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::query::js_path_process;
use serde_json::Value;

use super::{ExposedSample, Limits, Unusable};

mod strict_value;

/// One compiled JSONPath and the text it was written as (for messages).
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPath {
    text: String,
    query: JpQuery,
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let query = jsonpath_rust::parser::parse_json_path(text)
            .map_err(|e| format!("{text:?} is not an RFC 9535 JSONPath: {e}"))?;
        Ok(JsonPath {
            text: text.to_owned(),
            query,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The one node the path selects, `None` for none, an error for several.
    fn one<'a>(&self, doc: &'a Value) -> Result<Option<&'a Value>, JsonPageError> {
        let found = js_path_process(&self.query, doc)
            .map_err(|e| JsonPageError::Path(format!("{}: {e}", self.text)))?;
        match found.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one.clone().val())),
            many => Err(JsonPageError::Path(format!(
                "{} matches {} values; it must select at most one",
                self.text,
                many.len()
            ))),
        }
    }
}

/// How numeric timestamps are written; strings are always RFC 3339.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub enum TimestampUnit {
    #[default]
    #[serde(rename = "ms")]
    Millis,
    #[serde(rename = "s")]
    Seconds,
}

/// One series read from the document.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonSampleRule {
    pub series: String,
    pub value: JsonPath,
    pub timestamp: Option<JsonPath>,
    /// Label name, and the path of its value.
    pub labels: Vec<(String, JsonPath)>,
}

/// A compiled `json:` block.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonExtraction {
    /// Where it was configured (`scrape.static[0].json`, `jsonConfigs.seatunnel`).
    pub name: String,
    pub samples: Vec<JsonSampleRule>,
    pub reason: Option<JsonPath>,
    pub valid_until: Option<JsonPath>,
    pub timestamp_unit: TimestampUnit,
}

/// A document read as a page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonPage {
    pub samples: Vec<ExposedSample>,
    /// Unix milliseconds.
    pub valid_until_ms: Option<i64>,
    /// The producer's reason, cut to `REASON_MAX_CHARS`.
    pub reason: Option<String>,
}

/// A producer's reason is shown on /status and quoted in refusals; a longer one is cut.
pub const REASON_MAX_CHARS: usize = 200;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum JsonPageError {
    #[error("body is not JSON: {0}")]
    NotJson(String),
    #[error("JSONPath {0}")]
    Path(String),
    #[error("{0}")]
    Label(String),
    #[error("validUntil {0}")]
    ValidUntil(String),
    #[error("{0}")]
    Limit(String),
}

impl JsonPageError {
    /// The scrape error counter's reason, as for exposition pages.
    pub fn is_limit(&self) -> bool {
        matches!(self, JsonPageError::Limit(_))
    }
}

impl JsonExtraction {
    /// Read `body` as this block says. Only the series in `wanted` are kept, as an exposition
    /// page's other families are skipped.
    pub fn read(
        &self,
        body: &[u8],
        wanted: &dyn Fn(&str) -> bool,
        limits: &Limits,
    ) -> Result<JsonPage, JsonPageError> {
        // serde_json refuses documents nested deeper than 128 levels, so a hostile document
        // can neither overflow the stack nor make the paths below walk deep; the body itself
        // is bounded by scrape.maxBodyBytes before it gets here.
        let doc =
            strict_value::from_slice(body).map_err(|e| JsonPageError::NotJson(e.to_string()))?;
        let mut page = JsonPage::default();
        if let Some(path) = &self.reason {
            page.reason = path.one(&doc)?.map(|v| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                text.chars().take(REASON_MAX_CHARS).collect()
            });
        }
        if let Some(path) = &self.valid_until {
            page.valid_until_ms = match path.one(&doc)? {
                None => None,
                Some(v) => Some(self.time_ms(v).ok_or_else(|| {
                    JsonPageError::ValidUntil(format!(
                        "{}: {} is not a time ({})",
                        path.as_str(),
                        shown(v),
                        self.unit_text()
                    ))
                })?),
            };
        }
        for rule in &self.samples {
            if !wanted(&rule.series) {
                continue;
            }
            let Some(raw) = rule.value.one(&doc)? else {
                continue;
            };
            let (value, mut unusable) = match number(raw) {
                Some(v) => (v, None),
                None => (f64::NAN, Some(Unusable::NotANumber)),
            };
            let timestamp_ms = match &rule.timestamp {
                None => None,
                Some(path) => match path.one(&doc)?.and_then(|v| self.time_ms(v)) {
                    Some(t) => Some(t),
                    None => {
                        unusable = unusable.or(Some(Unusable::NoProducerTime));
                        None
                    }
                },
            };
            let mut labels = Vec::with_capacity(rule.labels.len());
            for (name, path) in &rule.labels {
                let Some(v) = path.one(&doc)? else { continue };
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
                    other => {
                        return Err(JsonPageError::Label(format!(
                            "label {name} from {}: {} is neither a string nor an integer",
                            path.as_str(),
                            shown(other)
                        )))
                    }
                };
                if text.len() > limits.max_label_value_bytes {
                    return Err(JsonPageError::Limit(format!(
                        "label {name} from {} is {} bytes, over scrape.maxLabelValueBytes ({})",
                        path.as_str(),
                        text.len(),
                        limits.max_label_value_bytes
                    )));
                }
                labels.push((name.clone(), text));
            }
            page.samples.push(ExposedSample {
                name: rule.series.clone(),
                labels,
                value,
                timestamp_ms,
                unusable,
            });
        }
        Ok(page)
    }

    fn unit_text(&self) -> &'static str {
        match self.timestamp_unit {
            TimestampUnit::Millis => "a number of Unix milliseconds or an RFC 3339 string",
            TimestampUnit::Seconds => "a number of Unix seconds or an RFC 3339 string",
        }
    }

    /// A time as Unix milliseconds: a number in `timestampUnit`, or an RFC 3339 string.
    fn time_ms(&self, v: &Value) -> Option<i64> {
        match v {
            Value::Number(n) => {
                let n = n.as_f64()?;
                let ms = match self.timestamp_unit {
                    TimestampUnit::Millis => n,
                    TimestampUnit::Seconds => n * 1000.0,
                };
                // Far outside any clock's reach (year 5138): garbage, not a time.
                (ms.is_finite() && (0.0..1e14).contains(&ms)).then_some(ms.round() as i64)
            }
            Value::String(s) => {
                let t =
                    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                        .ok()?;
                i64::try_from(t.unix_timestamp_nanos() / 1_000_000)
                    .ok()
                    .filter(|ms| *ms >= 0)
            }
            _ => None,
        }
    }
}

/// A JSON value as a sample value: a number as it is, `true`/`false` as 1/0, a numeric string
/// parsed. Anything else is not a number.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// A value for a message, cut short: a hostile document's values can be long.
fn shown(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 64 {
        let cut: String = text.chars().take(64).collect();
        format!("{cut}...")
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
