//! Reading a recommender's JSON status document (`scrape.static[].json`, `jsonConfigs`) as
//! samples, so that from here on they flow through the same store and rules as exposition
//! samples. Pure: the document, the compiled paths and the limits in, samples out.
//!
//! A path is a question about one value, so it is an RFC 9535 *singular query*: names and
//! non-negative indices only (`$.a.b`, `$['a'][0]`). Matching nothing means the value is absent
//! from this page. `..`, `*`, slices, filters and lists select any number of values, which a
//! question about one value cannot use, and they are refused when the config is read rather
//! than evaluated on a page: a singular path follows one branch, so the whole document is read
//! in one bounded pass (bounded_walk.rs) whatever the paths and the page are.

use std::sync::atomic::AtomicBool;

use jsonpath_rust::parser::model::{Segment, Selector};

use super::{ExposedSample, Limits, Unusable};
use bounded_walk::{Budget, Found};

mod bounded_walk;

/// One step of a singular path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Name(String),
    Index(usize),
}

/// One compiled JSONPath and the text it was written as (for messages).
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPath {
    text: String,
    steps: Vec<Step>,
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let query = jsonpath_rust::parser::parse_json_path(text)
            .map_err(|e| format!("{text:?} is not an RFC 9535 JSONPath: {e}"))?;
        let not_singular = |what: &str| {
            format!(
                "{text:?}: {what}; a path here names one value, with names and indices only \
                 (an RFC 9535 singular query such as $.status.workers or $.jobs[0].workers)"
            )
        };
        let mut steps = Vec::with_capacity(query.segments.len());
        for segment in &query.segments {
            let selector = match segment {
                Segment::Selector(s) => s,
                Segment::Selectors(list) if list.len() == 1 => &list[0],
                Segment::Selectors(_) => {
                    return Err(not_singular("a list of selectors selects several values"))
                }
                Segment::Descendant(_) => {
                    return Err(not_singular(
                        "`..` (descendant) selects every match at any depth",
                    ))
                }
            };
            steps.push(match selector {
                Selector::Name(name) => Step::Name(name.clone()),
                Selector::Index(i) => Step::Index(usize::try_from(*i).map_err(|_| {
                    not_singular(
                        "a negative index counts from the end of an array, which is known only \
                         once all of it is read; count from the start",
                    )
                })?),
                Selector::Wildcard => {
                    return Err(not_singular("`*` (wildcard) selects every member"))
                }
                Selector::Slice(..) => return Err(not_singular("a slice selects several values")),
                Selector::Filter(_) => {
                    return Err(not_singular("a filter selects every member it matches"))
                }
            });
        }
        Ok(JsonPath {
            text: text.to_owned(),
            steps,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// How numeric timestamps are written; strings are always RFC 3339.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
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
    #[error("{0}")]
    Label(String),
    #[error("validUntil {0}")]
    ValidUntil(String),
    #[error("{0}")]
    Limit(String),
    #[error("parsing cancelled: the scrape deadline passed")]
    Cancelled,
}

impl JsonPageError {
    /// The scrape error counter's reason, as for exposition pages.
    pub fn is_limit(&self) -> bool {
        matches!(self, JsonPageError::Limit(_))
    }
}

impl JsonExtraction {
    /// Read `body` as this block says. Only the series in `wanted` are kept, as an exposition
    /// page's other families are skipped. `limits` bound the walk (`scrape.maxJsonNodes`,
    /// `scrape.maxJsonDepth`); once `cancel` is set the read stops at the next value.
    pub fn read(
        &self,
        body: &[u8],
        wanted: &dyn Fn(&str) -> bool,
        limits: &Limits,
        cancel: Option<&AtomicBool>,
    ) -> Result<JsonPage, JsonPageError> {
        let rules: Vec<&JsonSampleRule> =
            self.samples.iter().filter(|r| wanted(&r.series)).collect();
        // Every path the page is asked, in the order they are taken back out below.
        let mut paths: Vec<&[Step]> = Vec::new();
        paths.extend(self.reason.iter().map(|p| p.steps.as_slice()));
        paths.extend(self.valid_until.iter().map(|p| p.steps.as_slice()));
        for rule in &rules {
            paths.push(&rule.value.steps);
            paths.extend(rule.timestamp.iter().map(|p| p.steps.as_slice()));
            paths.extend(rule.labels.iter().map(|(_, p)| p.steps.as_slice()));
        }
        let mut found = bounded_walk::walk(body, &paths, &Budget::new(limits, cancel))?.into_iter();
        let mut next = |path: Option<&JsonPath>| path.and_then(|_| found.next().flatten());
        let mut page = JsonPage {
            reason: next(self.reason.as_ref()).map(|v| {
                let text = match v {
                    Found::String(s) => s,
                    other => shown(&other),
                };
                text.chars().take(REASON_MAX_CHARS).collect()
            }),
            ..JsonPage::default()
        };
        if let Some(path) = &self.valid_until {
            page.valid_until_ms = match next(Some(path)) {
                None => None,
                Some(v) => Some(self.time_ms(&v).ok_or_else(|| {
                    JsonPageError::ValidUntil(format!(
                        "{}: {} is not a time ({})",
                        path.as_str(),
                        shown(&v),
                        self.unit_text()
                    ))
                })?),
            };
        }
        for rule in rules {
            let raw = next(Some(&rule.value));
            let time = rule.timestamp.as_ref().map(|path| next(Some(path)));
            let found_labels: Vec<Option<Found>> =
                rule.labels.iter().map(|(_, p)| next(Some(p))).collect();
            let Some(raw) = raw else { continue };
            let mut labels = Vec::with_capacity(rule.labels.len());
            for ((name, path), v) in rule.labels.iter().zip(found_labels) {
                let Some(v) = v else { continue };
                let text = match v {
                    Found::String(s) => s,
                    Found::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
                    other => {
                        return Err(JsonPageError::Label(format!(
                            "label {name} from {}: {} is neither a string nor an integer",
                            path.as_str(),
                            shown(&other)
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
            let (value, mut unusable) = match number(&raw) {
                Some(v) => (v, None),
                None => (f64::NAN, Some(Unusable::NotANumber)),
            };
            let timestamp_ms = match time {
                None => None,
                Some(t) => match t.and_then(|v| self.time_ms(&v)) {
                    Some(t) => Some(t),
                    None => {
                        unusable = unusable.or(Some(Unusable::NoProducerTime));
                        None
                    }
                },
            };
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
    fn time_ms(&self, v: &Found) -> Option<i64> {
        match v {
            Found::Number(n) => {
                let n = n.as_f64()?;
                let ms = match self.timestamp_unit {
                    TimestampUnit::Millis => n,
                    TimestampUnit::Seconds => n * 1000.0,
                };
                // Far outside any clock's reach (year 5138): garbage, not a time.
                (ms.is_finite() && (0.0..1e14).contains(&ms)).then_some(ms.round() as i64)
            }
            Found::String(s) => {
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
fn number(v: &Found) -> Option<f64> {
    match v {
        Found::Number(n) => n.as_f64(),
        Found::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Found::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// A value for a message, cut short: a hostile document's values can be long. A container is
/// named by its kind: the walk keeps no more of it.
fn shown(v: &Found) -> String {
    let text = match v {
        Found::Null => "null".to_owned(),
        Found::Bool(b) => b.to_string(),
        Found::Number(n) => n.to_string(),
        Found::String(s) => serde_json::Value::from(s.as_str()).to_string(),
        Found::Array => "an array".to_owned(),
        Found::Object => "an object".to_owned(),
    };
    if text.chars().count() > 64 {
        let cut: String = text.chars().take(64).collect();
        format!("{cut}...")
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
