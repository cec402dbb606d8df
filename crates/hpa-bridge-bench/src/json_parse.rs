//! The JSON source's parse (`JsonExtraction::read`) on a SeaTunnel-shaped status document, and
//! on two hostile ones: nested 90 levels deep, and carrying 100,000 extra keys. Each is timed
//! per page and set against the normal document in the same run.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::throughput::throughputs;
use super::{BenchError, Plan};
use hpa_bridge_exposition::{self as exposition, json_page::JsonExtraction};
use hpa_bridge_rules::config::JsonSourceConfig;

/// The status document of the SeaTunnel autoscaler design, as the tests read it.
const STATUS: &str = include_str!("../../../tests/fixtures/json/seatunnel-status.json");

/// The `json:` block of examples/seatunnel-rest.yaml.
const BLOCK: &str = "
samples:
  - series: seatunnel_autoscaler_recommended_workers
    value: $.recommendedWorkers
    timestamp: $.timestamp
    labels: {master_epoch: $.masterEpoch, action: $.action}
  - series: seatunnel_autoscaler_current_workers
    value: $.currentWorkers
    timestamp: $.timestamp
  - series: seatunnel_autoscaler_metrics_valid
    value: $.metricsSnapshot.metricsValid
    timestamp: $.timestamp
reason: $.reason
validUntil: $.validUntil
";

pub const NESTING: usize = 90;
pub const EXTRA_KEYS: usize = 100_000;

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JsonDocument {
    /// `seatunnel-status`, `nested-90` or `keys-100000`.
    pub document: String,
    pub bytes: usize,
    pub samples: usize,
    pub us_per_page: f64,
    /// Time per page over the normal document's, measured in the same run.
    pub ratio_to_status: f64,
    /// `serde_json::from_slice` into a `Value` alone: no reader of the paths can do better.
    pub value_only_us_per_page: f64,
}

/// The normal document with `extra` beside its fields.
fn with(extra: impl FnOnce(&mut Map<String, Value>)) -> Result<Vec<u8>, BenchError> {
    let mut doc: Map<String, Value> =
        serde_json::from_str(STATUS).map_err(|e| BenchError::part("parse", e))?;
    extra(&mut doc);
    serde_json::to_vec(&doc).map_err(|e| BenchError::part("parse", e))
}

pub fn run(plan: &Plan) -> Result<Vec<JsonDocument>, BenchError> {
    let config: JsonSourceConfig =
        yaml_serde::from_str(BLOCK).map_err(|e| BenchError::part("parse", e))?;
    let extraction: JsonExtraction = config
        .compile("bench.json")
        .map_err(|e| BenchError::part("parse", e))?;
    let nested = with(|doc| {
        let mut deep = json!({"level": NESTING});
        for level in (1..NESTING).rev() {
            deep = json!({ "level": level, "inner": deep });
        }
        doc.insert("trace".into(), deep);
    })?;
    let keys = with(|doc| {
        for i in 0..EXTRA_KEYS {
            doc.insert(format!("extra_{i:06}"), json!(i));
        }
    })?;
    let documents = [
        ("seatunnel-status".to_string(), STATUS.as_bytes().to_vec()),
        (format!("nested-{NESTING}"), nested),
        (format!("keys-{EXTRA_KEYS}"), keys),
    ];
    // Budgets a config may set (`scrape.maxJsonDepth` at most 100), wide enough that both
    // hostile documents are read in full rather than refused at the default budget: what is
    // measured is the cost of reading them.
    let limits = exposition::Limits {
        max_json_depth: 100,
        max_json_nodes: 1_000_000,
        ..exposition::Limits::DEFAULT
    };
    let read = |body: &[u8]| {
        extraction
            .read(body, &|_| true, &limits, None)
            .map(|page| page.samples.len())
    };
    // The figures compare the same job: every document must give the normal one's samples.
    let mut samples = Vec::new();
    for (name, body) in &documents {
        let n = read(body).map_err(|e| BenchError::part("parse", format!("{name}: {e}")))?;
        samples.push(n);
    }
    if samples.iter().any(|n| *n != samples[0] || *n == 0) {
        return Err(BenchError::part(
            "parse",
            format!("the JSON documents gave different samples: {samples:?}"),
        ));
    }
    let [status, deep, wide] = documents.each_ref().map(|(_, body)| {
        let body = body.as_slice();
        move || read(body).unwrap_or(0)
    });
    let [status_value, deep_value, wide_value] = documents.each_ref().map(|(_, body)| {
        let body = body.as_slice();
        move || {
            serde_json::from_slice::<Value>(body)
                .map(|v| v.as_object().map_or(0, Map::len))
                .unwrap_or(0)
        }
    });
    // With one byte per call the rate is calls per microsecond.
    let rates = throughputs(
        1,
        plan.parse_min_time,
        [
            &status,
            &deep,
            &wide,
            &status_value,
            &deep_value,
            &wide_value,
        ],
    );
    let us = rates.map(|r| 1.0 / r);
    Ok(documents
        .iter()
        .enumerate()
        .map(|(i, (document, body))| JsonDocument {
            document: document.clone(),
            bytes: body.len(),
            samples: samples[i],
            us_per_page: us[i],
            ratio_to_status: us[i] / us[0],
            value_only_us_per_page: us[i + 3],
        })
        .collect())
}
