//! Prometheus HTTP API responses: the envelope, result types and the errors a query can end in.

use super::*;

/// How one query to Prometheus failed. The text reaches the refusal, `/status` and the log.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PromQueryError {
    #[error("timed out after {0:?} (source.prometheus.timeout)")]
    Timeout(Duration),
    #[error("request failed: {0}")]
    Request(String),
    #[error("HTTP status {status}: {detail}")]
    Status { status: u16, detail: String },
    #[error("query failed ({error_type}): {error}")]
    Api { error_type: String, error: String },
    #[error("response is not Prometheus API JSON: {0}")]
    NotJson(String),
    #[error("expected resultType {expected:?}, got {got:?}")]
    ResultType { expected: &'static str, got: String },
    #[error("malformed result: {0}")]
    Malformed(String),
    /// Prometheus (or Thanos, Mimir...) answered but says the data may be incomplete.
    #[error("partial result, Prometheus returned warnings: {}", .0.join("; "))]
    Warnings(Vec<String>),
    #[error("response exceeds {limit} bytes (scrape.maxBodyBytes)")]
    TooLarge { limit: u64 },
    #[error("cannot read source.prometheus.bearerTokenFile {path}: {error}")]
    Token { path: String, error: String },
}

impl PromQueryError {
    /// A low-cardinality label for `hpa_bridge_prometheus_queries_total{outcome}`.
    pub fn outcome(&self) -> &'static str {
        match self {
            PromQueryError::Timeout(_) => "timeout",
            PromQueryError::Request(_) => "connect",
            PromQueryError::Status { .. } => "http_status",
            PromQueryError::Api { .. } => "api_error",
            PromQueryError::NotJson(_)
            | PromQueryError::ResultType { .. }
            | PromQueryError::Malformed(_) => "bad_response",
            PromQueryError::Warnings(_) => "warnings",
            PromQueryError::TooLarge { .. } => "too_large",
            PromQueryError::Token { .. } => "token",
        }
    }
}

/// One series as Prometheus returned it: all labels including `__name__`, and its samples
/// (one for a vector, the raw samples for a matrix), oldest first.
#[derive(Clone, Debug, PartialEq)]
pub struct PromSeries {
    pub labels: BTreeMap<String, String>,
    pub samples: Vec<(Millis, f64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultType {
    Vector,
    Matrix,
}

impl ResultType {
    fn as_str(self) -> &'static str {
        match self {
            ResultType::Vector => "vector",
            ResultType::Matrix => "matrix",
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct ApiEnvelope {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default, rename = "errorType")]
    pub(crate) error_type: Option<String>,
    #[serde(default)]
    pub(crate) error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
pub(crate) struct ApiData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
pub(crate) struct VectorItem {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

#[derive(Deserialize)]
pub(crate) struct MatrixItem {
    metric: BTreeMap<String, String>,
    values: Vec<(f64, String)>,
}

/// Prometheus renders sample values as strings, with `NaN`, `+Inf` and `-Inf` spelled out.
pub(crate) fn parse_value(s: &str) -> Result<f64, PromQueryError> {
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => s
            .parse::<f64>()
            .map_err(|_| PromQueryError::Malformed(format!("sample value {s:?} is not a number"))),
    }
}

pub(crate) fn parse_time(t: f64) -> Result<Millis, PromQueryError> {
    if !t.is_finite() || t < 0.0 {
        return Err(PromQueryError::Malformed(format!(
            "sample timestamp {t} is not a valid time"
        )));
    }
    Ok((t * 1000.0).round() as Millis)
}

pub(crate) fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if body.len() > 200 {
        format!("{}...", text.trim())
    } else {
        text.trim().to_string()
    }
}

/// Parses a `/api/v1/query` response body. Anything but a clean success of the expected type
/// is an error: a partial or surprising answer must never become an empty success.
pub fn parse_response(body: &[u8], expect: ResultType) -> Result<Vec<PromSeries>, PromQueryError> {
    let env: ApiEnvelope = serde_json::from_slice(body)
        .map_err(|e| PromQueryError::NotJson(format!("{e} (body starts {:?})", snippet(body))))?;
    if env.status != "success" {
        return Err(PromQueryError::Api {
            error_type: env.error_type.unwrap_or_else(|| "unknown".into()),
            error: env
                .error
                .unwrap_or_else(|| format!("status {:?} without an error message", env.status)),
        });
    }
    if !env.warnings.is_empty() {
        return Err(PromQueryError::Warnings(env.warnings));
    }
    let data = env
        .data
        .ok_or_else(|| PromQueryError::Malformed("success without data".into()))?;
    if data.result_type != expect.as_str() {
        return Err(PromQueryError::ResultType {
            expected: expect.as_str(),
            got: data.result_type,
        });
    }
    let bad = |e: serde_json::Error| {
        PromQueryError::Malformed(format!("{} result: {e}", expect.as_str()))
    };
    match expect {
        ResultType::Vector => {
            let items: Vec<VectorItem> = serde_json::from_value(data.result).map_err(bad)?;
            items
                .into_iter()
                .map(|i| {
                    Ok(PromSeries {
                        labels: i.metric,
                        samples: vec![(parse_time(i.value.0)?, parse_value(&i.value.1)?)],
                    })
                })
                .collect()
        }
        ResultType::Matrix => {
            let items: Vec<MatrixItem> = serde_json::from_value(data.result).map_err(bad)?;
            items
                .into_iter()
                .map(|i| {
                    let mut samples = i
                        .values
                        .iter()
                        .map(|(t, v)| Ok((parse_time(*t)?, parse_value(v)?)))
                        .collect::<Result<Vec<_>, PromQueryError>>()?;
                    samples.sort_by_key(|(t, _)| *t);
                    Ok(PromSeries {
                        labels: i.metric,
                        samples,
                    })
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_other_than_a_clean_success_are_precise_errors() {
        let err = |body: &str, t| parse_response(body.as_bytes(), t).unwrap_err();
        assert_eq!(
            err(
                r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
                ResultType::Vector
            ),
            PromQueryError::Api {
                error_type: "bad_data".into(),
                error: "parse error".into()
            }
        );
        assert!(
            matches!(err("<html>proxy</html>", ResultType::Vector), PromQueryError::NotJson(m) if m.contains("<html>"))
        );
        assert_eq!(
            err(
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}"#,
                ResultType::Vector
            ),
            PromQueryError::ResultType {
                expected: "vector",
                got: "scalar".into()
            }
        );
        assert_eq!(
            err(
                r#"{"status":"success","warnings":["store unavailable"],"data":{"resultType":"vector","result":[]}}"#,
                ResultType::Vector
            ),
            PromQueryError::Warnings(vec!["store unavailable".into()])
        );
        assert!(matches!(
            err(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"seven"]}]}}"#, ResultType::Vector),
            PromQueryError::Malformed(m) if m.contains("seven")
        ));
        assert!(matches!(
            err(
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
                ResultType::Vector
            ),
            PromQueryError::Malformed(_)
        ));
        assert!(matches!(
            err(r#"{"status":"success"}"#, ResultType::Vector),
            PromQueryError::Malformed(_)
        ));
        assert_eq!(
            err(r#"{"status":"success"}"#, ResultType::Vector).outcome(),
            "bad_response"
        );
    }

    #[test]
    fn special_values_and_timestamps_parse() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"a"},"values":[[1700000001.5,"NaN"],[1700000000.25,"+Inf"],[1700000002,"-Inf"],[1700000003.001,"4"]]}]}}"#;
        let s = parse_response(body.as_bytes(), ResultType::Matrix).unwrap();
        let samples = &s[0].samples;
        assert_eq!(samples[0], (1_700_000_000_250, f64::INFINITY));
        assert_eq!(samples[1].0, 1_700_000_001_500);
        assert!(samples[1].1.is_nan());
        assert_eq!(samples[2], (1_700_000_002_000, f64::NEG_INFINITY));
        assert_eq!(samples[3], (1_700_000_003_001, 4.0));
        assert_eq!(prom_time(1_700_000_003_001), "1700000003.001");
        assert_eq!(prom_time(5), "0.005");
    }
}
