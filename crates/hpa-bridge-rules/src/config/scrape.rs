//! The `scrape` section: the embedded scraper's timing, limits and targets (static or
//! discovered through Kubernetes).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{invalid, ConfigError, HumanDuration};

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
    /// How far a producer's timestamp may lie ahead of this process's clock. A sample timed
    /// further ahead is invalid: its clock or its value is wrong, and it would never age.
    #[serde(default = "default_max_clock_skew")]
    pub max_clock_skew: HumanDuration,
    /// Parse limits for the lines of wanted series (every scraped pod may be hostile); a page
    /// that exceeds one fails its scrape with an error naming the limit.
    #[serde(default = "default_max_line_bytes")]
    pub max_line_bytes: usize,
    #[serde(default = "default_max_labels_per_series")]
    pub max_labels_per_series: usize,
    #[serde(default = "default_max_label_name_bytes")]
    pub max_label_name_bytes: usize,
    #[serde(default = "default_max_label_value_bytes")]
    pub max_label_value_bytes: usize,
    /// Samples of wanted series on one page (Prometheus's `sample_limit`); a page with more
    /// fails its scrape.
    #[serde(default = "default_max_series_per_page")]
    pub max_series_per_page: usize,
    #[serde(default, rename = "static")]
    pub static_targets: Vec<StaticTarget>,
    /// Pod discovery. With `source.prometheus` nothing is scraped: discovery then only says
    /// which pods exist (series of deleted pods stop holding the floor at once, a Running pod
    /// with no series yet makes the floor incomplete) and which workload owns them
    /// (`spec.replicas` from the workload watches, `ordinals.start`). The series need the pod
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
            max_clock_skew: default_max_clock_skew(),
            max_line_bytes: default_max_line_bytes(),
            max_labels_per_series: default_max_labels_per_series(),
            max_label_name_bytes: default_max_label_name_bytes(),
            max_label_value_bytes: default_max_label_value_bytes(),
            max_series_per_page: default_max_series_per_page(),
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

    pub fn limits(&self) -> crate::exposition::Limits {
        crate::exposition::Limits {
            // A line cannot be longer than the body that holds it.
            max_line_bytes: self
                .max_line_bytes
                .min(usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX)),
            max_labels_per_series: self.max_labels_per_series,
            max_label_name_bytes: self.max_label_name_bytes,
            max_label_value_bytes: self.max_label_value_bytes,
            max_series: self.max_series_per_page,
        }
    }

    pub fn stale_after(&self) -> Duration {
        self.stale_after.map(|d| d.0).unwrap_or(self.interval.0 * 3)
    }
}

fn default_interval() -> HumanDuration {
    HumanDuration(Duration::from_secs(10))
}
fn default_timeout() -> Duration {
    Duration::from_secs(3)
}
/// `scrape.maxClockSkew` unless set.
pub const DEFAULT_MAX_CLOCK_SKEW_MS: i64 = 10_000;

fn default_max_clock_skew() -> HumanDuration {
    HumanDuration(Duration::from_millis(DEFAULT_MAX_CLOCK_SKEW_MS as u64))
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
fn default_max_series_per_page() -> usize {
    crate::exposition::Limits::DEFAULT.max_series
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StaticTarget {
    pub url: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Read the page as a JSON status document rather than exposition text.
    #[serde(default)]
    pub json: Option<super::JsonSourceConfig>,
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
    /// The top-level `jsonConfigs`, compiled, which a pod chooses from by the annotation
    /// `hpa-bridge.io/json-config` (set by `Config` once it has checked them).
    #[serde(skip)]
    pub json_configs: std::sync::Arc<
        BTreeMap<String, std::sync::Arc<crate::exposition::json_page::JsonExtraction>>,
    >,
}

/// Target labels set by discovery; `copyLabels` may not reuse them.
pub const RESERVED_LABELS: [&str; 4] = ["namespace", "pod", "workload_kind", "workload_name"];

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
        if RESERVED_LABELS.contains(&l.as_str()) {
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

impl ScrapeConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let s = self;
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
            ("scrape.maxSeriesPerPage", s.max_series_per_page, 1),
        ] {
            if value < min {
                return Err(invalid(key, format!("must be at least {min}")));
            }
        }
        // Each URL is one target: a second entry with the same URL, or one differing only in
        // its password, scrapes the same page twice. URLs that differ in a query value are
        // different targets (a probe's `?target=`), though they are shown alike.
        let mut seen_urls: BTreeMap<String, usize> = BTreeMap::new();
        for (i, t) in s.static_targets.iter().enumerate() {
            let key = format!("scrape.static[{i}].url");
            let shown = crate::redaction::redact_url(&t.url);
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
            if let Some(json) = &t.json {
                json.compile(&format!("scrape.static[{i}].json"))?;
            }
            let compared = crate::redaction::without_password(&t.url).into_owned();
            if let Some(first) = seen_urls.insert(compared, i) {
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
        Ok(())
    }
}
