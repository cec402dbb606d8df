//! The `source` section: reading evidence from a Prometheus-compatible API instead of scraping.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{invalid, ConfigError, HumanDuration, ScrapeConfig};

/// Alternative sources to direct scraping. Exactly one source is active.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SourceConfig {
    /// A Prometheus-compatible query API (Prometheus, Thanos, Mimir, VictoriaMetrics).
    #[serde(default)]
    pub prometheus: Option<PrometheusSourceConfig>,
}

/// Read from a Prometheus-compatible API (docs/prometheus-source.md).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrometheusSourceConfig {
    /// The API's base URL (`/api/v1/query` is appended).
    pub url: String,
    /// One query's deadline.
    #[serde(default = "default_prom_timeout")]
    pub timeout: HumanDuration,
    /// Headers sent with every query, e.g. `X-Scope-OrgID`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A file holding a bearer token, re-read on every query.
    #[serde(default)]
    pub bearer_token_file: Option<String>,
    /// How the API's certificate is verified.
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

/// TLS towards the Prometheus source.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrometheusTls {
    /// A CA bundle (PEM) that verifies the API's certificate, instead of the system roots.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// Do not verify the API's certificate.
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

impl SourceConfig {
    /// Exactly one source is active: `source.prometheus` excludes `scrape.static`.
    pub(super) fn validate(&self, s: &ScrapeConfig) -> Result<(), ConfigError> {
        let source = self;
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
                    // The URL may carry a password: never print it.
                    let shown = crate::redaction::redact_url(&p.url);
                    invalid("source.prometheus.url", format!("{shown:?}: {e}"))
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
        Ok(())
    }
}
