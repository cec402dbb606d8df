//! The `json:` block of a target (`scrape.static[].json`, and the named blocks of the
//! top-level `jsonConfigs:` that discovered pods choose by annotation): how a recommender's
//! JSON status document becomes samples. Its paths are compiled and checked at startup.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{invalid, ConfigError};
use crate::selector::is_prometheus_label_name;
use hpa_bridge_exposition::json_page::{JsonExtraction, JsonPath, JsonSampleRule, TimestampUnit};

/// Read a recommender's JSON status document rather than exposition text (docs/json-source.md).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JsonSourceConfig {
    /// The series read from the document (at least one).
    pub samples: Vec<JsonSampleConfig>,
    /// The producer's own account of its value, shown on /status and quoted in refusals.
    #[serde(default)]
    pub reason: Option<String>,
    /// After this time every sample of the page reads as stale.
    #[serde(default)]
    pub valid_until: Option<String>,
    /// The unit of numeric timestamps: `ms` (default) or `s`; strings are RFC 3339.
    #[serde(default)]
    pub timestamp_unit: TimestampUnit,
}

/// One series read from the document.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JsonSampleConfig {
    /// The series name the value is stored under.
    pub series: String,
    /// An RFC 9535 JSONPath to the value (a number, a boolean or a numeric string).
    pub value: String,
    /// A JSONPath to when the value was made (a number in `timestampUnit`, or RFC 3339).
    #[serde(default)]
    pub timestamp: Option<String>,
    /// Label names and the JSONPaths of their values (a string or an integer).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// The annotation by which a discovered pod names its block in `jsonConfigs`.
pub const JSON_CONFIG_ANNOTATION: &str = "hpa-bridge.io/json-config";

impl JsonSourceConfig {
    /// The block compiled; `key` is where it sits in the file, for errors and for /status.
    pub fn compile(&self, key: &str) -> Result<JsonExtraction, ConfigError> {
        let path = |field: String, text: &str| {
            JsonPath::parse(text).map_err(|e| invalid(format!("{key}.{field}"), e))
        };
        if self.samples.is_empty() {
            return Err(invalid(
                format!("{key}.samples"),
                "must list at least one series",
            ));
        }
        let mut samples = Vec::with_capacity(self.samples.len());
        for (i, s) in self.samples.iter().enumerate() {
            let at = format!("samples[{i}]");
            if !super::metric::is_valid_series_name(&s.series) {
                return Err(invalid(
                    format!("{key}.{at}.series"),
                    format!("{:?} is not a Prometheus metric name", s.series),
                ));
            }
            let mut labels = Vec::with_capacity(s.labels.len());
            for (name, text) in &s.labels {
                if !is_prometheus_label_name(name) {
                    return Err(invalid(
                        format!("{key}.{at}.labels.{name}"),
                        format!("{name:?} is not a label name"),
                    ));
                }
                labels.push((name.clone(), path(format!("{at}.labels.{name}"), text)?));
            }
            samples.push(JsonSampleRule {
                series: s.series.clone(),
                value: path(format!("{at}.value"), &s.value)?,
                timestamp: s
                    .timestamp
                    .as_deref()
                    .map(|t| path(format!("{at}.timestamp"), t))
                    .transpose()?,
                labels,
            });
        }
        Ok(JsonExtraction {
            name: key.to_owned(),
            samples,
            reason: self
                .reason
                .as_deref()
                .map(|t| path("reason".into(), t))
                .transpose()?,
            valid_until: self
                .valid_until
                .as_deref()
                .map(|t| path("validUntil".into(), t))
                .transpose()?,
            timestamp_unit: self.timestamp_unit,
        })
    }
}
