//! The `scrape` section: the embedded scraper's timing, limits and targets (static or
//! discovered through Kubernetes).

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{invalid, ConfigError, HumanDuration};

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScrapeConfig {
    /// How often each target is scraped.
    #[serde(default = "default_interval")]
    pub interval: HumanDuration,
    /// One scrape's deadline (connect, body and parse); at most `interval`. Unset: 3s, or the
    /// interval if that is shorter.
    #[serde(default)]
    pub timeout: Option<HumanDuration>,
    /// A sample older than this is stale: it no longer counts, and a stale input that might be
    /// the highest blocks the answer. Unset: three intervals.
    #[serde(default)]
    pub stale_after: Option<HumanDuration>,
    /// The largest page read; a larger one fails its scrape (reason `too_large`).
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
    /// Labels on one series of a wanted metric.
    #[serde(default = "default_max_labels_per_series")]
    pub max_labels_per_series: usize,
    /// Bytes of one label name.
    #[serde(default = "default_max_label_name_bytes")]
    pub max_label_name_bytes: usize,
    /// Bytes of one label value.
    #[serde(default = "default_max_label_value_bytes")]
    pub max_label_value_bytes: usize,
    /// Samples of wanted series on one page (Prometheus's `sample_limit`); a page with more
    /// fails its scrape.
    #[serde(default = "default_max_series_per_page")]
    pub max_series_per_page: usize,
    /// Values of one JSON status document, counted while it is read; past it the scrape fails.
    #[serde(default = "default_max_json_nodes")]
    pub max_json_nodes: usize,
    /// Nesting levels of one JSON status document, counted while it is read.
    #[serde(default = "default_max_json_depth")]
    pub max_json_depth: usize,
    /// Fixed targets: no cluster needed.
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
            max_json_nodes: default_max_json_nodes(),
            max_json_depth: default_max_json_depth(),
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

    pub fn limits(&self) -> hpa_bridge_exposition::Limits {
        hpa_bridge_exposition::Limits {
            // A line cannot be longer than the body that holds it.
            max_line_bytes: self
                .max_line_bytes
                .min(usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX)),
            max_labels_per_series: self.max_labels_per_series,
            max_label_name_bytes: self.max_label_name_bytes,
            max_label_value_bytes: self.max_label_value_bytes,
            max_series: self.max_series_per_page,
            max_json_nodes: self.max_json_nodes,
            max_json_depth: self.max_json_depth,
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
    hpa_bridge_exposition::Limits::DEFAULT.max_line_bytes
}
fn default_max_labels_per_series() -> usize {
    hpa_bridge_exposition::Limits::DEFAULT.max_labels_per_series
}
fn default_max_label_name_bytes() -> usize {
    hpa_bridge_exposition::Limits::DEFAULT.max_label_name_bytes
}
fn default_max_label_value_bytes() -> usize {
    hpa_bridge_exposition::Limits::DEFAULT.max_label_value_bytes
}
fn default_max_series_per_page() -> usize {
    hpa_bridge_exposition::Limits::DEFAULT.max_series
}
fn default_max_json_nodes() -> usize {
    hpa_bridge_exposition::Limits::DEFAULT.max_json_nodes
}
fn default_max_json_depth() -> usize {
    hpa_bridge_exposition::Limits::DEFAULT.max_json_depth
}

/// One fixed scrape target.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StaticTarget {
    /// The page to scrape (http or https). Its password and query values are shown as `xxxxx`
    /// everywhere.
    pub url: String,
    /// Labels attached to every sample of this target; they win over the exporter's own (a
    /// conflicting exporter label is kept as `exported_<name>`). A request is scoped by the
    /// `namespace` label.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Read the page as a JSON status document rather than exposition text.
    #[serde(default)]
    pub json: Option<super::JsonSourceConfig>,
    /// HTTP basic authentication, as Prometheus's `basic_auth`: the password is read from a
    /// file at every scrape (a rotated Secret is picked up), never written in the config.
    #[serde(default)]
    pub basic_auth: Option<BasicAuth>,
    /// A file holding a bearer token, as Prometheus's `bearer_token_file`; read at every scrape.
    #[serde(default)]
    pub bearer_token_file: Option<std::path::PathBuf>,
}

/// HTTP basic authentication for one target.
#[derive(Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BasicAuth {
    /// The user name sent.
    #[serde(default)]
    pub username: String,
    /// Refused at startup: a password is never written in the config; use `passwordFile`.
    /// Accepted by the parser only so that the refusal names it.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    password: Option<serde::de::IgnoredAny>,
    /// A file holding the password, read at every scrape.
    #[serde(default)]
    pub password_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("username", &self.username)
            .field("password_file", &self.password_file)
            .finish_non_exhaustive()
    }
}

/// How a target's scrapes authenticate, checked: where each secret is read from, and the config
/// key that named it, for the messages of a failed read. The secrets themselves are read only
/// by the scraper, at each scrape, and kept no longer than its request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScrapeCredentials {
    Basic {
        username: String,
        password_file: std::path::PathBuf,
        key: String,
    },
    Bearer {
        token_file: std::path::PathBuf,
        key: String,
    },
}

impl StaticTarget {
    /// The credentials of `scrape.static[i]`, as `ScrapeConfig::validate` has checked them.
    pub fn credentials(&self, i: usize) -> Option<ScrapeCredentials> {
        if let Some(b) = &self.basic_auth {
            return Some(ScrapeCredentials::Basic {
                username: b.username.clone(),
                password_file: b.password_file.clone().unwrap_or_default(),
                key: format!("scrape.static[{i}].basicAuth.passwordFile"),
            });
        }
        self.bearer_token_file
            .as_ref()
            .map(|f| ScrapeCredentials::Bearer {
                token_file: f.clone(),
                key: format!("scrape.static[{i}].bearerTokenFile"),
            })
    }

    /// Refuses a URL that carries credentials. Checked before the URL is parsed: a password
    /// holding `/`, `?` or `#` ends the authority early, and must be refused all the same.
    fn refuse_embedded_credentials(&self, i: usize) -> Result<(), ConfigError> {
        // Such credentials are never sent (the scraper does not take them from the URL), so a
        // protected exporter would only fail, and the URL is shown in many places. Whatever
        // the redaction would mask as a userinfo is refused, so an `@` past the authority is
        // too: written `%40`, it is not.
        if crate::redaction::without_password(&self.url) == self.url.as_str() {
            return Ok(());
        }
        Err(invalid(
            format!("scrape.static[{i}].url"),
            format!(
                "{:?} carries credentials (user:password@); a URL's credentials are never sent or shown: \
                 put them in basicAuth: {{username, passwordFile}} or bearerTokenFile (an @ in a path or \
                 query is written %40)",
                crate::redaction::redact_url(&self.url)
            ),
        ))
    }

    fn validate_credentials(&self, i: usize) -> Result<(), ConfigError> {
        let at = |key: &str| format!("scrape.static[{i}].{key}");
        if self.basic_auth.is_some() && self.bearer_token_file.is_some() {
            return Err(invalid(
                at("basicAuth"),
                "at most one of basicAuth and bearerTokenFile may be set",
            ));
        }
        if let Some(b) = &self.basic_auth {
            if b.password.is_some() {
                return Err(invalid(
                    at("basicAuth.password"),
                    "a password is never written in the config: put it in a file (a mounted Secret) and name it with passwordFile",
                ));
            }
            match &b.password_file {
                Some(f) if !f.as_os_str().is_empty() => {}
                _ => {
                    return Err(invalid(
                        at("basicAuth.passwordFile"),
                        "must name the file holding the password",
                    ))
                }
            }
            if b.username.contains(':') {
                return Err(invalid(
                    at("basicAuth.username"),
                    "must not contain ':' (RFC 7617: it ends the user-id)",
                ));
            }
        }
        if self
            .bearer_token_file
            .as_ref()
            .is_some_and(|f| f.as_os_str().is_empty())
        {
            return Err(invalid(
                at("bearerTokenFile"),
                "must name the file holding the token",
            ));
        }
        Ok(())
    }
}

/// Pod discovery through the Kubernetes API.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
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
    /// The path scraped when a pod's `prometheus.io/path` annotation does not say.
    #[serde(default = "default_metrics_path")]
    pub path: String,
    /// The scheme scraped when a pod's `prometheus.io/scheme` annotation does not say; only
    /// `http` is supported.
    #[serde(default)]
    pub scheme: Option<String>,
    /// Pod labels copied onto every sample of the pod.
    #[serde(default)]
    pub copy_labels: Vec<String>,
    /// The top-level `jsonConfigs`, compiled, which a pod chooses from by the annotation
    /// `hpa-bridge.io/json-config` (set by `Config` once it has checked them).
    #[serde(skip)]
    #[schemars(skip)]
    pub json_configs: std::sync::Arc<
        BTreeMap<String, std::sync::Arc<hpa_bridge_exposition::json_page::JsonExtraction>>,
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
            ("scrape.maxJsonNodes", s.max_json_nodes, 1),
            ("scrape.maxJsonDepth", s.max_json_depth, 1),
        ] {
            if value < min {
                return Err(invalid(key, format!("must be at least {min}")));
            }
        }
        // serde_json's parser stops short of 128 levels whatever this says; below it, the
        // budget is always what stops a read, and its message names the key.
        if s.max_json_depth > 100 {
            return Err(invalid("scrape.maxJsonDepth", "must be at most 100"));
        }
        // Each URL is one target: a second entry with the same URL, or one differing only in
        // its password, scrapes the same page twice. URLs that differ in a query value are
        // different targets (a probe's `?target=`), though they are shown alike.
        let mut seen_urls: BTreeMap<String, usize> = BTreeMap::new();
        for (i, t) in s.static_targets.iter().enumerate() {
            let key = format!("scrape.static[{i}].url");
            t.refuse_embedded_credentials(i)?;
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
            t.validate_credentials(i)?;
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
