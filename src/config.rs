//! The YAML configuration: typed, defaulted and validated once, at the edge.
//!
//! Every key is checked at startup (`deny_unknown_fields`), and every error names the key that
//! caused it, so a typo never silently falls back to a default.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config: {0}")]
    Yaml(String),
    #[error("invalid config: {key}: {message}")]
    Invalid { key: String, message: String },
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}

/// A duration written as `500ms`, `10s`, `2m`, `1h` or a concatenation such as `1m30s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("empty duration".into());
        }
        let mut total = Duration::ZERO;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| format!("duration {text:?} lacks a unit (ms, s, m, h)"))?;
            if digits == 0 {
                return Err(format!("duration {text:?} must start with a number"));
            }
            let number: f64 = rest[..digits]
                .parse()
                .map_err(|_| format!("bad number in duration {text:?}"))?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let seconds = match &rest[..unit_len] {
                "ms" => number / 1000.0,
                "s" => number,
                "m" => number * 60.0,
                "h" => number * 3600.0,
                other => {
                    return Err(format!(
                        "unknown unit {other:?} in duration {text:?} (use ms, s, m, h)"
                    ))
                }
            };
            rest = &rest[unit_len..];
            if !seconds.is_finite() || seconds > 1e9 {
                return Err(format!("duration {text:?} is out of range"));
            }
            total += Duration::from_secs_f64(seconds);
        }
        Ok(HumanDuration(total))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            write!(f, "{ms}ms")
        } else {
            write!(f, "{}s", ms / 1000)
        }
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        HumanDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    #[serde(default)]
    pub scrape: ScrapeConfig,
    #[serde(default)]
    pub source: Option<SourceConfig>,
    #[serde(default = "default_metrics")]
    pub metrics: Vec<MetricSpec>,
    /// Start the built-in demo exporter inside `serve` (the local demo; never in production).
    #[serde(default)]
    pub demo: Option<DemoConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DemoConfig {
    #[serde(default = "default_demo_listen")]
    pub listen: String,
    #[serde(default = "default_demo_workload")]
    pub workload: String,
    #[serde(default = "default_demo_pods")]
    pub pods: u32,
    #[serde(default = "default_demo_period")]
    pub period: HumanDuration,
}

fn default_demo_listen() -> String {
    "127.0.0.1:9101".into()
}
fn default_demo_workload() -> String {
    "lobby".into()
}
fn default_demo_pods() -> u32 {
    6
}
fn default_demo_period() -> HumanDuration {
    HumanDuration(Duration::from_secs(120))
}

/// Alternative sources to direct scraping. Exactly one source is active.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SourceConfig {
    #[serde(default)]
    pub prometheus: Option<PrometheusSourceConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrometheusSourceConfig {
    pub url: String,
    #[serde(default = "default_prom_timeout")]
    pub timeout: HumanDuration,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub bearer_token_file: Option<String>,
    #[serde(default)]
    pub tls: PrometheusTls,
    /// How long identical queries share one answer.
    #[serde(default = "default_cache_ttl")]
    pub cache_ttl: HumanDuration,
    /// Without Kubernetes discovery, `max_over_time` over this window stands in for the retained
    /// floor.
    #[serde(default = "default_retain_for")]
    pub retain_for: HumanDuration,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrometheusTls {
    #[serde(default)]
    pub ca_file: Option<String>,
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

fn default_prom_timeout() -> HumanDuration {
    HumanDuration(Duration::from_secs(5))
}
fn default_cache_ttl() -> HumanDuration {
    HumanDuration(Duration::from_secs(5))
}
fn default_retain_for() -> HumanDuration {
    HumanDuration(Duration::from_secs(600))
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScrapeConfig {
    #[serde(default = "default_interval")]
    pub interval: HumanDuration,
    /// Unset means 3s, or the interval if that is shorter; read it through `timeout()`.
    #[serde(default)]
    pub timeout: Option<HumanDuration>,
    /// Defaults to three intervals.
    #[serde(default)]
    pub stale_after: Option<HumanDuration>,
    #[serde(default = "default_max_body")]
    pub max_body_bytes: u64,
    /// Parse limits for the lines of wanted series (issue 13: every scraped pod may be
    /// hostile); a page that exceeds one fails its scrape with an error naming the limit.
    #[serde(default = "default_max_line_bytes")]
    pub max_line_bytes: usize,
    #[serde(default = "default_max_labels_per_series")]
    pub max_labels_per_series: usize,
    #[serde(default = "default_max_label_name_bytes")]
    pub max_label_name_bytes: usize,
    #[serde(default = "default_max_label_value_bytes")]
    pub max_label_value_bytes: usize,
    #[serde(default, rename = "static")]
    pub static_targets: Vec<StaticTarget>,
    /// Pod discovery. With `source.prometheus` nothing is scraped: discovery then only says
    /// which pods exist (series of deleted pods stop holding the floor at once, a Running pod
    /// with no series yet makes the floor incomplete) and which workload owns them
    /// (`spec.replicas` from the scale subresource, `ordinals.start`). The series need the pod
    /// name in a `pod` label, and `namespaces`/`podSelector` must cover every pod that exports
    /// them: a pod outside `podSelector` counts as deleted.
    #[serde(default)]
    pub kubernetes: Option<KubernetesDiscoveryConfig>,
}

impl Default for ScrapeConfig {
    fn default() -> Self {
        ScrapeConfig {
            interval: default_interval(),
            timeout: None,
            stale_after: None,
            max_body_bytes: default_max_body(),
            max_line_bytes: default_max_line_bytes(),
            max_labels_per_series: default_max_labels_per_series(),
            max_label_name_bytes: default_max_label_name_bytes(),
            max_label_value_bytes: default_max_label_value_bytes(),
            static_targets: Vec::new(),
            kubernetes: None,
        }
    }
}

impl ScrapeConfig {
    /// The scrape deadline. Prometheus clamps an unset `scrape_timeout` to the interval, so a
    /// short interval alone is a valid config; an explicit timeout above it is refused instead.
    pub fn timeout(&self) -> Duration {
        self.timeout
            .map(|d| d.0)
            .unwrap_or_else(|| default_timeout().min(self.interval.0))
    }

    pub fn stale_after(&self) -> Duration {
        self.stale_after.map(|d| d.0).unwrap_or(self.interval.0 * 3)
    }

    pub fn limits(&self) -> crate::exposition::Limits {
        crate::exposition::Limits {
            // A line cannot be longer than the body that holds it.
            max_line_bytes: self
                .max_line_bytes
                .min(usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX)),
            max_labels_per_series: self.max_labels_per_series,
            max_label_name_bytes: self.max_label_name_bytes,
            max_label_value_bytes: self.max_label_value_bytes,
        }
    }
}

fn default_interval() -> HumanDuration {
    HumanDuration(Duration::from_secs(10))
}
fn default_timeout() -> Duration {
    Duration::from_secs(3)
}
fn default_max_body() -> u64 {
    16 * 1024 * 1024
}
fn default_max_line_bytes() -> usize {
    crate::exposition::Limits::DEFAULT.max_line_bytes
}
fn default_max_labels_per_series() -> usize {
    crate::exposition::Limits::DEFAULT.max_labels_per_series
}
fn default_max_label_name_bytes() -> usize {
    crate::exposition::Limits::DEFAULT.max_label_name_bytes
}
fn default_max_label_value_bytes() -> usize {
    crate::exposition::Limits::DEFAULT.max_label_value_bytes
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StaticTarget {
    pub url: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Pod discovery through the Kubernetes API.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubernetesDiscoveryConfig {
    /// Namespaces to watch; empty means all.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// A Kubernetes label selector for the pods to scrape.
    #[serde(default)]
    pub pod_selector: Option<String>,
    /// A named container port to scrape instead of the `prometheus.io/*` annotations.
    #[serde(default)]
    pub port_name: Option<String>,
    #[serde(default = "default_metrics_path")]
    pub path: String,
    #[serde(default)]
    pub scheme: Option<String>,
    /// Pod labels copied onto every sample of the pod.
    #[serde(default)]
    pub copy_labels: Vec<String>,
}

fn validate_kubernetes(k: &KubernetesDiscoveryConfig) -> Result<(), ConfigError> {
    for (i, ns) in k.namespaces.iter().enumerate() {
        let dns_label = !ns.is_empty()
            && ns.len() <= 63
            && ns
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !ns.starts_with('-')
            && !ns.ends_with('-');
        if !dns_label {
            return Err(invalid(
                format!("scrape.kubernetes.namespaces[{i}]"),
                format!("{ns:?} is not a namespace name (RFC 1123 label)"),
            ));
        }
    }
    if let Some(sel) = &k.pod_selector {
        crate::selector::LabelSelector::parse(sel)
            .map_err(|e| invalid("scrape.kubernetes.podSelector", format!("{sel:?}: {e}")))?;
    }
    if let Some(port) = &k.port_name {
        if port.is_empty() || port.len() > 15 {
            return Err(invalid(
                "scrape.kubernetes.portName",
                format!("{port:?} is not a container port name (1-15 characters)"),
            ));
        }
    }
    if !k.path.starts_with('/') {
        return Err(invalid(
            "scrape.kubernetes.path",
            format!("{:?} must start with /", k.path),
        ));
    }
    if let Some(scheme) = &k.scheme {
        if scheme != "http" {
            return Err(invalid(
                "scrape.kubernetes.scheme",
                format!("{scheme:?} is not supported (use http)"),
            ));
        }
    }
    for (i, l) in k.copy_labels.iter().enumerate() {
        if crate::source::discovery::RESERVED_LABELS.contains(&l.as_str()) {
            return Err(invalid(
                format!("scrape.kubernetes.copyLabels[{i}]"),
                format!("{l:?} is set by discovery itself and cannot be copied from pod labels"),
            ));
        }
        if l.is_empty() {
            return Err(invalid(
                format!("scrape.kubernetes.copyLabels[{i}]"),
                "must not be empty",
            ));
        }
    }
    Ok(())
}

fn default_metrics_path() -> String {
    "/metrics".into()
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
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
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ValidWhen {
    pub series: String,
    pub equals: f64,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Sustain {
    #[serde(default)]
    pub up: Option<HumanDuration>,
    #[serde(default)]
    pub down: Option<HumanDuration>,
    #[serde(default = "default_fraction")]
    pub fraction: f64,
}

fn default_fraction() -> f64 {
    0.5
}

/// One served external metric.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricSpec {
    pub name: String,
    pub kind: MetricKind,
    /// Source series names (any of them counts as the same input).
    #[serde(default)]
    pub series: Vec<String>,
    /// For `target`: the served recommendation metric.
    #[serde(default)]
    pub recommendation: Option<String>,
    /// For `target`: the served stateful-floor metric.
    #[serde(default)]
    pub floor: Option<String>,
    /// For `target`: several recommendation metrics whose valid values are combined by max.
    #[serde(default)]
    pub combine: Vec<String>,
    /// Which label holds the namespace (Prometheus source).
    #[serde(default = "default_namespace_label")]
    pub namespace_label: String,
    #[serde(default)]
    pub valid_when: Option<ValidWhen>,
    /// For `threshold`: per-replica capacity above which a replica is added.
    #[serde(default)]
    pub up_per_replica: Option<f64>,
    /// For `threshold`: per-replica load below which a replica is removed.
    #[serde(default)]
    pub down_per_replica: Option<f64>,
    /// For `threshold` and gated recommendations without Kubernetes: the current replica count.
    #[serde(default)]
    pub current_series: Option<String>,
    #[serde(default)]
    pub sustain: Option<Sustain>,
    #[serde(default)]
    pub max_step: Option<u32>,
    #[serde(default)]
    pub min: Option<u32>,
    #[serde(default)]
    pub max: Option<u32>,
}

fn default_namespace_label() -> String {
    "namespace".into()
}

impl MetricSpec {
    pub fn new(name: &str, kind: MetricKind, series: &[&str]) -> Self {
        MetricSpec {
            name: name.into(),
            kind,
            series: series.iter().map(|s| s.to_string()).collect(),
            recommendation: None,
            floor: None,
            combine: Vec::new(),
            namespace_label: default_namespace_label(),
            valid_when: None,
            up_per_replica: None,
            down_per_replica: None,
            current_series: None,
            sustain: None,
            max_step: None,
            min: None,
            max: None,
        }
    }
}

/// The three metrics served when `metrics:` is omitted (REFERENCE.md §4.1 names and aliases).
pub fn default_metrics() -> Vec<MetricSpec> {
    let mut target = MetricSpec::new("hpa_target_replicas", MetricKind::Target, &[]);
    target.recommendation = Some("hpa_expect_replicas".into());
    target.floor = Some("hpa_stateful_floor".into());
    vec![
        MetricSpec::new(
            "hpa_expect_replicas",
            MetricKind::Recommendation,
            &[
                "hpa_expect_replicas",
                "hpa_expect_replicas_count",
                "atframework_hpa_expect_replicas",
            ],
        ),
        MetricSpec::new(
            "hpa_stateful_floor",
            MetricKind::StatefulFloor,
            &[
                "hpa_stateful_index",
                "hpa_stateful_index_count",
                "atframework_hpa_stateful_index",
            ],
        ),
        target,
    ]
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Config::from_yaml(&text)
    }

    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = if text.trim().is_empty() {
            serde_yaml::from_str("{}")
        } else {
            serde_yaml::from_str(text)
        }
        .map_err(|e| ConfigError::Yaml(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    pub fn metric(&self, name: &str) -> Option<&MetricSpec> {
        self.metrics
            .iter()
            .find(|m| m.name.eq_ignore_ascii_case(name))
    }

    /// Every source series name any served metric reads, for skipping the rest while parsing.
    pub fn wanted_series(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for m in &self.metrics {
            names.extend(m.series.iter().cloned());
            if let Some(gate) = &m.valid_when {
                names.insert(gate.series.clone());
            }
            if let Some(current) = &m.current_series {
                names.insert(current.clone());
            }
        }
        names
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let s = &self.scrape;
        if s.interval.0 < Duration::from_millis(100) {
            return Err(invalid("scrape.interval", "must be at least 100ms"));
        }
        if let Some(timeout) = s.timeout {
            if timeout.0.is_zero() {
                return Err(invalid("scrape.timeout", "must be greater than zero"));
            }
            if timeout.0 > s.interval.0 {
                return Err(invalid(
                    "scrape.timeout",
                    format!("{timeout} is longer than scrape.interval {}", s.interval),
                ));
            }
        }
        if let Some(stale) = s.stale_after {
            if stale.0 < s.interval.0 {
                return Err(invalid(
                    "scrape.staleAfter",
                    format!(
                        "{stale} is shorter than scrape.interval {}: every sample would go stale between scrapes",
                        s.interval
                    ),
                ));
            }
        }
        if s.max_body_bytes < 1024 {
            return Err(invalid("scrape.maxBodyBytes", "must be at least 1024"));
        }
        // Zero would refuse every line or label; there is no "unlimited": all work is bounded.
        for (key, value, min) in [
            ("scrape.maxLineBytes", s.max_line_bytes, 128),
            ("scrape.maxLabelsPerSeries", s.max_labels_per_series, 1),
            ("scrape.maxLabelNameBytes", s.max_label_name_bytes, 1),
            ("scrape.maxLabelValueBytes", s.max_label_value_bytes, 1),
        ] {
            if value < min {
                return Err(invalid(key, format!("must be at least {min}")));
            }
        }
        // Each URL is one target and one series identity: a second entry with the same URL
        // (or one differing only in its password, which ids do not show) would silently
        // replace the first, whose workload would then answer 404.
        let mut seen_urls: BTreeMap<String, usize> = BTreeMap::new();
        for (i, t) in s.static_targets.iter().enumerate() {
            let key = format!("scrape.static[{i}].url");
            let shown = crate::telemetry::redact_url(&t.url);
            let uri: http::Uri = t
                .url
                .parse()
                .map_err(|e| invalid(&key, format!("{shown:?} is not a URL: {e}")))?;
            match uri.scheme_str() {
                Some("http") => {}
                Some(other) => {
                    return Err(invalid(
                        &key,
                        format!("scheme {other:?} is not supported (use http)"),
                    ))
                }
                None => return Err(invalid(&key, format!("{shown:?} has no scheme"))),
            }
            if uri.host().is_none() {
                return Err(invalid(&key, format!("{shown:?} has no host")));
            }
            if let Some(first) = seen_urls.insert(shown.clone().into_owned(), i) {
                return Err(invalid(
                    &key,
                    format!(
                        "{shown:?} is already scrape.static[{first}].url: one URL is one target, so merge the two entries' labels into one"
                    ),
                ));
            }
        }
        if let Some(k) = &s.kubernetes {
            validate_kubernetes(k)?;
        }
        if let Some(source) = &self.source {
            match &source.prometheus {
                None => {
                    return Err(invalid(
                        "source",
                        "name exactly one source (source.prometheus)",
                    ))
                }
                Some(p) => {
                    if !s.static_targets.is_empty() {
                        return Err(invalid(
                            "source.prometheus",
                            "exactly one source may be active: remove scrape.static or source.prometheus",
                        ));
                    }
                    let uri: http::Uri = p.url.parse().map_err(|e| {
                        invalid("source.prometheus.url", format!("{:?}: {e}", p.url))
                    })?;
                    if !matches!(uri.scheme_str(), Some("http") | Some("https")) {
                        return Err(invalid(
                            "source.prometheus.url",
                            "must be an http:// or https:// URL",
                        ));
                    }
                    if p.timeout.0.is_zero() {
                        return Err(invalid(
                            "source.prometheus.timeout",
                            "must be greater than zero",
                        ));
                    }
                }
            }
        }
        if let Some(demo) = &self.demo {
            if demo.listen.parse::<std::net::SocketAddr>().is_err() {
                return Err(invalid(
                    "demo.listen",
                    format!("{:?} is not host:port", demo.listen),
                ));
            }
            if demo.pods == 0 || demo.pods > 1000 {
                return Err(invalid("demo.pods", "must be between 1 and 1000"));
            }
            if demo.period.0 < Duration::from_secs(1) {
                return Err(invalid("demo.period", "must be at least 1s"));
            }
        }
        if self.metrics.is_empty() {
            return Err(invalid("metrics", "at least one metric must be served"));
        }
        let mut seen = BTreeSet::new();
        for (i, m) in self.metrics.iter().enumerate() {
            let key = format!("metrics[{i}]");
            if !is_valid_metric_name(&m.name) {
                return Err(invalid(
                    format!("{key}.name"),
                    format!(
                        "{:?} must be a lower-case path segment ([a-z0-9_.:-]); client-go lower-cases the metric name in the request path",
                        m.name
                    ),
                ));
            }
            if !seen.insert(m.name.clone()) {
                return Err(invalid(
                    format!("{key}.name"),
                    format!("duplicate metric name {:?}", m.name),
                ));
            }
            self.validate_metric(&key, m)?;
        }
        Ok(())
    }

    fn validate_metric(&self, key: &str, m: &MetricSpec) -> Result<(), ConfigError> {
        let refers_to = |field: &str, name: &str, allowed: &[MetricKind]| match self
            .metrics
            .iter()
            .find(|o| o.name == name)
        {
            None => Err(invalid(
                format!("{key}.{field}"),
                format!("refers to undefined metric {name:?}"),
            )),
            Some(o) if !allowed.contains(&o.kind) => Err(invalid(
                format!("{key}.{field}"),
                format!(
                    "metric {name:?} is of kind {}, expected one of {}",
                    o.kind.as_str(),
                    allowed
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            Some(_) => Ok(()),
        };
        match m.kind {
            MetricKind::Recommendation | MetricKind::StatefulFloor | MetricKind::Threshold => {
                if m.series.is_empty() {
                    return Err(invalid(
                        format!("{key}.series"),
                        "needs at least one source series name",
                    ));
                }
                for s in &m.series {
                    if !is_valid_series_name(s) {
                        return Err(invalid(
                            format!("{key}.series"),
                            format!("{s:?} is not a valid Prometheus metric name"),
                        ));
                    }
                }
                if m.recommendation.is_some() || m.floor.is_some() || !m.combine.is_empty() {
                    return Err(invalid(
                        key,
                        format!(
                            "recommendation/floor/combine apply only to kind target, not {}",
                            m.kind.as_str()
                        ),
                    ));
                }
            }
            MetricKind::Target => {
                if !m.series.is_empty() {
                    return Err(invalid(
                        format!("{key}.series"),
                        "a target reads other served metrics (recommendation, floor), not series",
                    ));
                }
                let recommenders = [MetricKind::Recommendation, MetricKind::Threshold];
                if let Some(r) = &m.recommendation {
                    refers_to("recommendation", r, &recommenders)?;
                }
                for (j, r) in m.combine.iter().enumerate() {
                    refers_to(&format!("combine[{j}]"), r, &recommenders)?;
                }
                if m.recommendation.is_none() && m.combine.is_empty() {
                    return Err(invalid(
                        format!("{key}.recommendation"),
                        "a target needs a recommendation (or combine)",
                    ));
                }
                if let Some(f) = &m.floor {
                    refers_to("floor", f, &[MetricKind::StatefulFloor])?;
                }
            }
        }
        if m.kind == MetricKind::Threshold {
            let up = m.up_per_replica.ok_or_else(|| {
                invalid(format!("{key}.upPerReplica"), "required for kind threshold")
            })?;
            let down = m.down_per_replica.unwrap_or(up);
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
        } else if m.up_per_replica.is_some() || m.down_per_replica.is_some() {
            return Err(invalid(
                key,
                "upPerReplica/downPerReplica apply only to kind threshold",
            ));
        }
        if let Some(s) = &m.sustain {
            if !(s.fraction > 0.0 && s.fraction <= 1.0) {
                return Err(invalid(
                    format!("{key}.sustain.fraction"),
                    "must be in (0, 1]",
                ));
            }
        }
        if let (Some(lo), Some(hi)) = (m.min, m.max) {
            if lo > hi {
                return Err(invalid(format!("{key}.min"), "is greater than max"));
            }
        }
        if m.kind != MetricKind::Threshold
            && (m.sustain.is_some() || m.max_step.is_some() || m.min.is_some() || m.max.is_some())
        {
            return Err(invalid(
                key,
                "sustain/maxStep/min/max apply only to kind threshold",
            ));
        }
        if let Some(s) = &m.sustain {
            if s.up.is_none() && s.down.is_none() {
                return Err(invalid(
                    format!("{key}.sustain"),
                    "set up, down or both (e.g. {up: 1m, down: 2m})",
                ));
            }
        }
        if m.max_step == Some(0) {
            return Err(invalid(
                format!("{key}.maxStep"),
                "must be at least 1 (0 would freeze the answer)",
            ));
        }
        if let Some(current) = &m.current_series {
            if matches!(m.kind, MetricKind::StatefulFloor | MetricKind::Target) {
                return Err(invalid(
                    format!("{key}.currentSeries"),
                    "applies only to kinds recommendation and threshold",
                ));
            }
            if !is_valid_series_name(current) {
                return Err(invalid(
                    format!("{key}.currentSeries"),
                    format!("{current:?} is not a valid Prometheus metric name"),
                ));
            }
        }
        if m.valid_when.is_some()
            && matches!(m.kind, MetricKind::StatefulFloor | MetricKind::Target)
        {
            return Err(invalid(
                format!("{key}.validWhen"),
                "applies to recommenders (kinds recommendation and threshold); gate the recommendation the target reads",
            ));
        }
        if let Some(gate) = &m.valid_when {
            if !is_valid_series_name(&gate.series) {
                return Err(invalid(
                    format!("{key}.validWhen.series"),
                    format!("{:?} is not a valid Prometheus metric name", gate.series),
                ));
            }
        }
        Ok(())
    }
}

fn is_valid_metric_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-' | b':')
        })
}

fn is_valid_series_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_' || b == b':')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            HumanDuration::parse("500ms").unwrap().0,
            Duration::from_millis(500)
        );
        assert_eq!(
            HumanDuration::parse("10s").unwrap().0,
            Duration::from_secs(10)
        );
        assert_eq!(
            HumanDuration::parse("2m").unwrap().0,
            Duration::from_secs(120)
        );
        assert_eq!(
            HumanDuration::parse("1m30s").unwrap().0,
            Duration::from_secs(90)
        );
        for bad in ["", "10", "s", "10x", "-1s", "1e400s"] {
            assert!(HumanDuration::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn empty_config_gets_the_three_default_metrics() {
        let c = Config::from_yaml("").unwrap();
        let names: Vec<_> = c.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "hpa_expect_replicas",
                "hpa_stateful_floor",
                "hpa_target_replicas"
            ]
        );
        assert_eq!(c.scrape.stale_after(), Duration::from_secs(30));
        assert!(c.wanted_series().contains("hpa_stateful_index_count"));
    }

    fn err(yaml: &str) -> String {
        Config::from_yaml(yaml).unwrap_err().to_string()
    }

    #[test]
    fn kubernetes_discovery_errors_name_the_key() {
        let k = |body: &str| err(&format!("scrape: {{kubernetes: {{{body}}}}}"));
        assert!(k("namespaces: [Games]").contains("scrape.kubernetes.namespaces[0]"));
        assert!(k("podSelector: 'a in (x'").contains("scrape.kubernetes.podSelector"));
        assert!(k("scheme: https").contains("scrape.kubernetes.scheme"));
        assert!(k("path: metrics").contains("scrape.kubernetes.path"));
        assert!(k("portName: ''").contains("scrape.kubernetes.portName"));
        assert!(k("copyLabels: [app, pod]").contains("scrape.kubernetes.copyLabels[1]"));
        assert!(k("namespace: [x]").contains("namespace"));
        let ok = Config::from_yaml(
            "scrape: {kubernetes: {namespaces: [games], podSelector: 'app in (lobby)', copyLabels: [app.kubernetes.io/name]}}",
        )
        .unwrap();
        let kube = ok.scrape.kubernetes.unwrap();
        assert_eq!(kube.path, "/metrics");
        assert_eq!(kube.namespaces, ["games"]);
    }

    #[test]
    fn an_unset_timeout_is_clamped_to_the_interval_and_a_set_one_is_not() {
        let timeout = |yaml: &str| Config::from_yaml(yaml).unwrap().scrape.timeout();
        assert_eq!(timeout(""), Duration::from_secs(3));
        assert_eq!(
            timeout("scrape: {interval: 500ms}"),
            Duration::from_millis(500)
        );
        assert_eq!(timeout("scrape: {interval: 1m}"), Duration::from_secs(3));
        assert_eq!(
            timeout("scrape: {interval: 500ms, timeout: 200ms}"),
            Duration::from_millis(200)
        );
        let e = err("scrape: {interval: 500ms, timeout: 3s}");
        assert!(
            e.contains("scrape.timeout") && e.contains("longer than scrape.interval"),
            "{e}"
        );
    }

    #[test]
    fn parse_limits_are_configurable_and_bounded() {
        let c = Config::from_yaml(
            "scrape: {maxLineBytes: 4096, maxLabelsPerSeries: 16, maxLabelNameBytes: 64, maxLabelValueBytes: 256}",
        )
        .unwrap();
        assert_eq!(
            c.scrape.limits(),
            crate::exposition::Limits {
                max_line_bytes: 4096,
                max_labels_per_series: 16,
                max_label_name_bytes: 64,
                max_label_value_bytes: 256,
            }
        );
        assert_eq!(
            Config::from_yaml("").unwrap().scrape.limits(),
            crate::exposition::Limits::DEFAULT
        );
        assert!(err("scrape: {maxLabelsPerSeries: 0}").contains("scrape.maxLabelsPerSeries"));
        assert!(err("scrape: {maxLineBytes: 0}").contains("scrape.maxLineBytes"));
        assert!(err("scrape: {maxLabelValueBytes: 0}").contains("scrape.maxLabelValueBytes"));
        assert!(err("scrape: {maxLabelNameBytes: 0}").contains("scrape.maxLabelNameBytes"));
        let small = Config::from_yaml("scrape: {maxBodyBytes: 4096}").unwrap();
        assert_eq!(small.scrape.limits().max_line_bytes, 4096);
    }

    #[test]
    fn errors_name_the_key() {
        assert!(err("scrape: {intervall: 10s}").contains("intervall"));
        assert!(err("scrape: {interval: 10 s}").contains("unknown unit"));
        assert!(err("scrape: {interval: 1s, timeout: 3s}").contains("scrape.timeout"));
        assert!(err("scrape: {interval: 1s, timeout: 0s}").contains("scrape.timeout"));
        assert!(err("scrape: {interval: 10s, staleAfter: 5s}").contains("scrape.staleAfter"));
        let dup = err(
            "scrape: {static: [{url: 'http://a/m', labels: {pod: a}}, {url: 'http://b/m'}, {url: 'http://c/m'}, {url: 'http://a/m', labels: {pod: b}}]}",
        );
        assert!(
            dup.contains("scrape.static[3].url") && dup.contains("scrape.static[0].url"),
            "{dup}"
        );
        let dup =
            err("scrape: {static: [{url: 'http://u:hunter1@a/m'}, {url: 'http://u:hunter2@a/m'}]}");
        assert!(dup.contains("scrape.static[1].url") && dup.contains("scrape.static[0].url"));
        assert!(!dup.contains("hunter"), "{dup}");
        assert!(!err("scrape: {static: [{url: 'http://u:secret@'}]}").contains("secret"));
        assert!(
            err("scrape: {static: [{url: 'ftp://x/metrics'}]}").contains("scrape.static[0].url")
        );
        let dup = "metrics: [{name: a, kind: recommendation, series: [x]}, {name: a, kind: recommendation, series: [y]}]";
        assert!(err(dup).contains("duplicate metric name"));
        let undefined = "metrics: [{name: t, kind: target, recommendation: nope}]";
        let e = err(undefined);
        assert!(
            e.contains("metrics[0].recommendation") && e.contains("nope"),
            "{e}"
        );
        assert!(
            err("metrics: [{name: Upper, kind: recommendation, series: [x]}]")
                .contains("lower-case")
        );
        assert!(err("metrics: [{name: a, kind: sum, series: [x]}]").contains("unknown variant"));
        let wrong_kind = "metrics: [{name: f, kind: stateful-floor, series: [x]}, {name: t, kind: target, recommendation: f}]";
        assert!(err(wrong_kind).contains("kind stateful-floor"));
        assert!(err("metrics: [{name: t, kind: threshold, series: [x]}]").contains("upPerReplica"));
        assert!(err(
            "metrics: [{name: t, kind: threshold, series: [x], upPerReplica: 10, downPerReplica: 20}]"
        )
        .contains("downPerReplica"));
        assert!(
            err("metrics: [{name: r, kind: recommendation, series: [x], maxStep: 2}]")
                .contains("apply only to kind threshold")
        );
        assert!(err(
            "metrics: [{name: t, kind: threshold, series: [x], upPerReplica: 1, maxStep: 0}]"
        )
        .contains("metrics[0].maxStep"));
        assert!(err(
            "metrics: [{name: t, kind: threshold, series: [x], upPerReplica: 1, sustain: {fraction: 0.5}}]"
        )
        .contains("metrics[0].sustain"));
        assert!(err(
            "metrics: [{name: f, kind: stateful-floor, series: [x], validWhen: {series: v, equals: 1}}]"
        )
        .contains("metrics[0].validWhen"));
        assert!(err(
            "source: {prometheus: {url: 'http://p:9090'}}\nscrape: {static: [{url: 'http://a/m'}]}"
        )
        .contains("exactly one source"));
        // Kubernetes discovery beside Prometheus supplies the pod set and workload state.
        let both = Config::from_yaml(
            "source: {prometheus: {url: 'http://p:9090'}}\nscrape: {kubernetes: {namespaces: [games]}}",
        )
        .unwrap();
        assert!(both.scrape.kubernetes.is_some() && both.source.is_some());
        assert!(err(
            "source: {prometheus: {url: 'http://p:9090'}}\nscrape: {kubernetes: {namespaces: [Games]}}"
        )
        .contains("scrape.kubernetes.namespaces[0]"));
    }
}
