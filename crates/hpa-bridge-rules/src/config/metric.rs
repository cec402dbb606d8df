//! The `metrics` section: one served external metric per entry, typed by its `kind`.
//!
//! Each kind is its own struct with `deny_unknown_fields`, so a key that does not belong to the
//! kind (`upPerReplica` on a recommendation) is a parse error naming the key, and the kind's
//! required keys are required by the type.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{invalid, ConfigError, HumanDuration};
use crate::selector::is_prometheus_label_name;

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MetricKind {
    /// An absolute replica recommendation: max over fresh series, never sum.
    Recommendation,
    /// The highest retained one-based stateful index across the workload's pods.
    StatefulFloor,
    /// max(recommendation, floor), with the safety rules of both.
    Target,
    /// Load total divided by per-replica capacity, with separate up and down thresholds.
    Threshold,
}

impl MetricKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Recommendation => "recommendation",
            MetricKind::StatefulFloor => "stateful-floor",
            MetricKind::Target => "target",
            MetricKind::Threshold => "threshold",
        }
    }
}

/// A gate that must hold for a recommendation to be allowed to lower the target.
#[derive(Clone, Debug, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ValidWhen {
    /// The gate series, read from the same targets.
    pub series: String,
    /// The value at which the gate is open.
    pub equals: f64,
}

/// Wait until a direction held in `fraction` of the evaluations within its window.
#[derive(Clone, Debug, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Sustain {
    /// The window a scale-up must hold for.
    #[serde(default)]
    pub up: Option<HumanDuration>,
    /// The window a scale-down must hold for.
    #[serde(default)]
    pub down: Option<HumanDuration>,
    /// The share of evaluations in the window that must agree (0 to 1).
    #[serde(default = "default_fraction")]
    pub fraction: f64,
}

fn default_fraction() -> f64 {
    0.5
}

fn default_namespace_label() -> String {
    "namespace".into()
}

/// One served external metric.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum MetricSpec {
    /// An absolute replica recommendation: the max over the fresh series, never the sum.
    Recommendation(RecommendationSpec),
    /// The highest retained one-based stateful index across the workload's pods: a scale-down
    /// floor.
    StatefulFloor(FloorSpec),
    /// max(recommendation, floor), with the safety rules of both.
    Target(TargetSpec),
    /// The load total over per-replica capacity, with separate up and down thresholds
    /// (docs/policies.md).
    Threshold(ThresholdSpec),
}

/// `kind: recommendation`: the max over fresh source series.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RecommendationSpec {
    /// The served metric name (lower-case; the HPA's `metric.name`).
    pub name: String,
    /// Source series names (any of them counts as the same input).
    #[serde(default)]
    pub series: Vec<String>,
    /// Which label holds the namespace a request is scoped by.
    #[serde(default = "default_namespace_label")]
    pub namespace_label: String,
    /// While this gate is not open, the answer may raise the workload but never lower it.
    #[serde(default)]
    pub valid_when: Option<ValidWhen>,
    /// Without Kubernetes: the current replica count, for a closed `validWhen` gate.
    #[serde(default)]
    pub current_series: Option<String>,
    /// The label holding the recommender's leader epoch: only series of the newest epoch
    /// count (policy/epoch_fence.rs).
    #[serde(default)]
    pub epoch_label: Option<String>,
    /// How far above the newest older epoch whose producers are still fresh a newest epoch
    /// may be and still fence them (default 1): a leader that far ahead is not trusted.
    #[serde(default)]
    pub epoch_step: Option<u64>,
    /// A series on the same page holding when the recommendation was made (Unix seconds):
    /// its age counts from then, so a recommender stuck behind a live endpoint goes stale.
    #[serde(default)]
    pub timestamp_series: Option<String>,
}

/// `kind: stateful-floor`: the highest retained one-based stateful index.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FloorSpec {
    /// The served metric name (lower-case; the HPA's `metric.name`).
    pub name: String,
    /// Source series names of the per-pod stateful index (any of them counts as the same
    /// input).
    #[serde(default)]
    pub series: Vec<String>,
    /// Which label holds the namespace a request is scoped by.
    #[serde(default = "default_namespace_label")]
    pub namespace_label: String,
}

/// `kind: target`: max(recommendation or combine, floor) over other served metrics.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetSpec {
    /// The served metric name (lower-case; the HPA's `metric.name`).
    pub name: String,
    /// The served recommendation metric.
    #[serde(default)]
    pub recommendation: Option<String>,
    /// The served stateful-floor metric.
    #[serde(default)]
    pub floor: Option<String>,
    /// Several recommendation metrics whose valid values are combined by max.
    #[serde(default)]
    pub combine: Vec<String>,
    /// Which label holds the namespace a request is scoped by.
    #[serde(default = "default_namespace_label")]
    pub namespace_label: String,
}

/// `kind: threshold`: load total over per-replica capacity, with hysteresis.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ThresholdSpec {
    /// The served metric name (lower-case; the HPA's `metric.name`).
    pub name: String,
    /// Source series of the per-pod load, summed over the workload's pods.
    #[serde(default)]
    pub series: Vec<String>,
    /// Which label holds the namespace a request is scoped by.
    #[serde(default = "default_namespace_label")]
    pub namespace_label: String,
    /// While this gate is not open, the answer may raise the workload but never lower it.
    #[serde(default)]
    pub valid_when: Option<ValidWhen>,
    /// Without Kubernetes: the current replica count.
    #[serde(default)]
    pub current_series: Option<String>,
    /// Per-replica capacity above which a replica is added.
    pub up_per_replica: f64,
    /// Per-replica load below which a replica is removed (defaults to `upPerReplica`).
    #[serde(default)]
    pub down_per_replica: Option<f64>,
    /// Wait until a direction held for a while before taking it.
    #[serde(default)]
    pub sustain: Option<Sustain>,
    /// The most replicas one answer moves from the current count.
    #[serde(default)]
    pub max_step: Option<u32>,
    /// The smallest answer (default 1).
    #[serde(default)]
    pub min: Option<u32>,
    /// The largest answer.
    #[serde(default)]
    pub max: Option<u32>,
}

impl MetricSpec {
    fn recommendation(name: &str, series: &[&str]) -> Self {
        MetricSpec::Recommendation(RecommendationSpec {
            name: name.into(),
            series: series.iter().map(|s| s.to_string()).collect(),
            namespace_label: default_namespace_label(),
            valid_when: None,
            current_series: None,
            epoch_label: None,
            epoch_step: None,
            timestamp_series: None,
        })
    }

    pub fn name(&self) -> &str {
        match self {
            MetricSpec::Recommendation(m) => &m.name,
            MetricSpec::StatefulFloor(m) => &m.name,
            MetricSpec::Target(m) => &m.name,
            MetricSpec::Threshold(m) => &m.name,
        }
    }

    pub fn kind(&self) -> MetricKind {
        match self {
            MetricSpec::Recommendation(_) => MetricKind::Recommendation,
            MetricSpec::StatefulFloor(_) => MetricKind::StatefulFloor,
            MetricSpec::Target(_) => MetricKind::Target,
            MetricSpec::Threshold(_) => MetricKind::Threshold,
        }
    }

    /// The source series the metric reads itself; none for a target.
    pub fn series(&self) -> &[String] {
        match self {
            MetricSpec::Recommendation(m) => &m.series,
            MetricSpec::StatefulFloor(m) => &m.series,
            MetricSpec::Target(_) => &[],
            MetricSpec::Threshold(m) => &m.series,
        }
    }

    /// Every series set a rule of this metric reads in its scope: its own series, its
    /// `validWhen` gate and its `currentSeries`. A reused answer must cover all of them.
    pub fn read_series(&self) -> impl Iterator<Item = &[String]> {
        let (gate, current) = match self {
            MetricSpec::Recommendation(m) => (m.valid_when.as_ref(), m.current_series.as_ref()),
            MetricSpec::Threshold(m) => (m.valid_when.as_ref(), m.current_series.as_ref()),
            _ => (None, None),
        };
        [self.series()]
            .into_iter()
            .chain(gate.map(|g| std::slice::from_ref(&g.series)))
            .chain(current.map(std::slice::from_ref))
    }

    pub fn namespace_label(&self) -> &str {
        match self {
            MetricSpec::Recommendation(m) => &m.namespace_label,
            MetricSpec::StatefulFloor(m) => &m.namespace_label,
            MetricSpec::Target(m) => &m.namespace_label,
            MetricSpec::Threshold(m) => &m.namespace_label,
        }
    }

    pub fn valid_when(&self) -> Option<&ValidWhen> {
        match self {
            MetricSpec::Recommendation(m) => m.valid_when.as_ref(),
            MetricSpec::Threshold(m) => m.valid_when.as_ref(),
            _ => None,
        }
    }

    pub fn current_series(&self) -> Option<&str> {
        match self {
            MetricSpec::Recommendation(m) => m.current_series.as_deref(),
            MetricSpec::Threshold(m) => m.current_series.as_deref(),
            _ => None,
        }
    }

    /// A recommendation's `epochLabel`: its series are fenced by the epoch in this label.
    pub fn epoch_label(&self) -> Option<&str> {
        match self {
            MetricSpec::Recommendation(m) => m.epoch_label.as_deref(),
            _ => None,
        }
    }

    /// A recommendation's fencing: its `epochLabel` and `epochStep` (1 unless set).
    pub fn fence(&self) -> Option<(&str, u64)> {
        match self {
            MetricSpec::Recommendation(m) => m
                .epoch_label
                .as_deref()
                .map(|label| (label, m.epoch_step.unwrap_or(1))),
            _ => None,
        }
    }

    /// A recommendation's `timestampSeries`.
    pub fn timestamp_series(&self) -> Option<&str> {
        match self {
            MetricSpec::Recommendation(m) => m.timestamp_series.as_deref(),
            _ => None,
        }
    }

    /// A target's floor metric.
    pub fn floor(&self) -> Option<&str> {
        match self {
            MetricSpec::Target(m) => m.floor.as_deref(),
            _ => None,
        }
    }
}

/// The three metrics served when `metrics:` is omitted (docs/hpa-behaviour.md §4.1 names and aliases).
pub fn default_metrics() -> Vec<MetricSpec> {
    vec![
        MetricSpec::recommendation(
            "hpa_expect_replicas",
            &[
                "hpa_expect_replicas",
                "hpa_expect_replicas_count",
                "atframework_hpa_expect_replicas",
            ],
        ),
        MetricSpec::StatefulFloor(FloorSpec {
            name: "hpa_stateful_floor".into(),
            series: [
                "hpa_stateful_index",
                "hpa_stateful_index_count",
                "atframework_hpa_stateful_index",
            ]
            .map(String::from)
            .to_vec(),
            namespace_label: default_namespace_label(),
        }),
        MetricSpec::Target(TargetSpec {
            name: "hpa_target_replicas".into(),
            recommendation: Some("hpa_expect_replicas".into()),
            floor: Some("hpa_stateful_floor".into()),
            combine: Vec::new(),
            namespace_label: default_namespace_label(),
        }),
    ]
}

/// Every metric entry is valid on its own and names only metrics of the right kind.
pub(super) fn validate_metrics(metrics: &[MetricSpec]) -> Result<(), ConfigError> {
    if metrics.is_empty() {
        return Err(invalid("metrics", "at least one metric must be served"));
    }
    let mut seen = BTreeSet::new();
    for (i, m) in metrics.iter().enumerate() {
        let key = format!("metrics[{i}]");
        if !is_valid_metric_name(m.name()) {
            return Err(invalid(
                format!("{key}.name"),
                format!(
                    "{:?} must be a lower-case path segment ([a-z0-9_.:-]); client-go lower-cases the metric name in the request path",
                    m.name()
                ),
            ));
        }
        if !seen.insert(m.name()) {
            return Err(invalid(
                format!("{key}.name"),
                format!("duplicate metric name {:?}", m.name()),
            ));
        }
        validate_metric(metrics, &key, m)?;
    }
    Ok(())
}

fn validate_metric(all: &[MetricSpec], key: &str, m: &MetricSpec) -> Result<(), ConfigError> {
    let refers_to = |field: &str, name: &str, allowed: &[MetricKind]| match all
        .iter()
        .find(|o| o.name() == name)
    {
        None => Err(invalid(
            format!("{key}.{field}"),
            format!("refers to undefined metric {name:?}"),
        )),
        Some(o) if !allowed.contains(&o.kind()) => Err(invalid(
            format!("{key}.{field}"),
            format!(
                "metric {name:?} is of kind {}, expected one of {}",
                o.kind().as_str(),
                allowed
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        Some(_) => Ok(()),
    };
    if let MetricSpec::Target(t) = m {
        let recommenders = [MetricKind::Recommendation, MetricKind::Threshold];
        if let Some(r) = &t.recommendation {
            refers_to("recommendation", r, &recommenders)?;
        }
        for (j, r) in t.combine.iter().enumerate() {
            refers_to(&format!("combine[{j}]"), r, &recommenders)?;
        }
        if t.recommendation.is_none() && t.combine.is_empty() {
            return Err(invalid(
                format!("{key}.recommendation"),
                "a target needs a recommendation (or combine)",
            ));
        }
        if let Some(f) = &t.floor {
            refers_to("floor", f, &[MetricKind::StatefulFloor])?;
        }
        return Ok(());
    }
    if m.series().is_empty() {
        return Err(invalid(
            format!("{key}.series"),
            "needs at least one source series name",
        ));
    }
    for s in m.series() {
        if !is_valid_series_name(s) {
            return Err(invalid(
                format!("{key}.series"),
                format!("{s:?} is not a valid Prometheus metric name"),
            ));
        }
    }
    if let MetricSpec::Threshold(t) = m {
        validate_threshold(key, t)?;
    }
    if let Some(ts) = m.timestamp_series() {
        if !is_valid_series_name(ts) || m.series().iter().any(|s| s == ts) {
            return Err(invalid(
                format!("{key}.timestampSeries"),
                format!(
                    "{ts:?} must be a valid Prometheus metric name other than the metric's series"
                ),
            ));
        }
    }
    if let Some(current) = m.current_series() {
        if !is_valid_series_name(current) {
            return Err(invalid(
                format!("{key}.currentSeries"),
                format!("{current:?} is not a valid Prometheus metric name"),
            ));
        }
    }
    if let Some(gate) = m.valid_when() {
        if !is_valid_series_name(&gate.series) {
            return Err(invalid(
                format!("{key}.validWhen.series"),
                format!("{:?} is not a valid Prometheus metric name", gate.series),
            ));
        }
    }
    if let Some(label) = m.epoch_label() {
        if !is_prometheus_label_name(label) {
            return Err(invalid(
                format!("{key}.epochLabel"),
                format!("{label:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)"),
            ));
        }
    }
    if let MetricSpec::Recommendation(r) = m {
        match (r.epoch_step, &r.epoch_label) {
            (Some(0), _) => {
                return Err(invalid(
                    format!("{key}.epochStep"),
                    "must be at least 1: a new leader's epoch is above the last",
                ))
            }
            (Some(_), None) => {
                return Err(invalid(
                    format!("{key}.epochStep"),
                    "applies only with epochLabel",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn validate_threshold(key: &str, t: &ThresholdSpec) -> Result<(), ConfigError> {
    let up = t.up_per_replica;
    let down = t.down_per_replica.unwrap_or(up);
    if !(up.is_finite() && up > 0.0) {
        return Err(invalid(
            format!("{key}.upPerReplica"),
            "must be a positive number",
        ));
    }
    if !(down.is_finite() && down > 0.0 && down <= up) {
        return Err(invalid(
            format!("{key}.downPerReplica"),
            "must be positive and at most upPerReplica",
        ));
    }
    if let Some(s) = &t.sustain {
        if !(s.fraction > 0.0 && s.fraction <= 1.0) {
            return Err(invalid(
                format!("{key}.sustain.fraction"),
                "must be in (0, 1]",
            ));
        }
    }
    if let (Some(lo), Some(hi)) = (t.min, t.max) {
        if lo > hi {
            return Err(invalid(format!("{key}.min"), "is greater than max"));
        }
    }
    if let Some(s) = &t.sustain {
        if s.up.is_none() && s.down.is_none() {
            return Err(invalid(
                format!("{key}.sustain"),
                "set up, down or both (e.g. {up: 1m, down: 2m})",
            ));
        }
    }
    if t.max_step == Some(0) {
        return Err(invalid(
            format!("{key}.maxStep"),
            "must be at least 1 (0 would freeze the answer)",
        ));
    }
    Ok(())
}

/// For a key that exists but belongs to other kinds: which kinds take it.
fn belongs_to(field: &str) -> Option<&'static str> {
    Some(match field {
        "upPerReplica" | "downPerReplica" | "sustain" | "maxStep" | "min" | "max" => {
            "upPerReplica/downPerReplica/sustain/maxStep/min/max apply only to kind threshold"
        }
        "recommendation" | "floor" | "combine" => {
            "recommendation/floor/combine apply only to kind target"
        }
        "validWhen" => {
            "validWhen applies to recommenders (kinds recommendation and threshold); gate the recommendation the target reads"
        }
        "currentSeries" => "currentSeries applies only to kinds recommendation and threshold",
        "epochLabel" | "epochStep" => "epochLabel/epochStep apply only to kind recommendation",
        "series" => "a target reads other served metrics (recommendation, floor), not series",
        _ => return None,
    })
}

/// A parse error inside `metrics`, restated with the entry's index and the offending key: the
/// typed parse says which key is unknown, this says where it is and which kind takes it.
pub(super) fn explain_entry_error(text: &str) -> Option<ConfigError> {
    let doc: yaml_serde::Value = yaml_serde::from_str(text).ok()?;
    let entries = doc.get("metrics")?.as_sequence()?;
    for (i, entry) in entries.iter().enumerate() {
        let Err(e) = yaml_serde::from_value::<MetricSpec>(entry.clone()) else {
            continue;
        };
        let message = e.to_string();
        let field = message
            .split_once("unknown field `")
            .and_then(|(_, rest)| rest.split_once('`'))
            .map(|(field, _)| field.to_string())?;
        let kind = entry
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("?")
            .to_string();
        let message = match belongs_to(&field) {
            Some(hint) => format!("not a key of kind {kind}: {hint}"),
            None => message,
        };
        return Some(invalid(format!("metrics[{i}].{field}"), message));
    }
    None
}

fn is_valid_metric_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-' | b':')
        })
}

pub(super) fn is_valid_series_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_' || b == b':')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
}
