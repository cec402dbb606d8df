//! The `source` section: reading evidence from a Prometheus-compatible API instead of scraping.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{invalid, ConfigError, HumanDuration, ScrapeConfig};

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
