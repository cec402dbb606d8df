//! The `history` section: how much answer history is kept for `/status/history`, the status
//! page and the per-scope self-metrics.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{invalid, ConfigError, HumanDuration};

/// The answers served to HPAs, kept for `/status/history`, the status page and the per-scope
/// self-metrics.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HistoryConfig {
    /// How far back answers are kept; the ring per scope holds this at the HPA's 15 s cadence.
    #[serde(default = "default_retention")]
    pub retention: HumanDuration,
    /// Scopes (metric, namespace, selector or object) tracked at most; beyond it the scope
    /// asked about least recently is dropped, and `hpa_bridge_history_scopes_dropped_total`
    /// counts it. Also bounds the per-scope self-metrics.
    #[serde(default = "default_max_scopes")]
    pub max_scopes: usize,
    /// Answers kept per scope: the memory bound of one scope. Default: the retention at the
    /// HPA's 15 s cadence (240 for an hour). Raise it when several HPAs ask about one scope.
    #[serde(default)]
    pub entries_per_scope: Option<usize>,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            retention: default_retention(),
            max_scopes: default_max_scopes(),
            entries_per_scope: None,
        }
    }
}

fn default_retention() -> HumanDuration {
    HumanDuration(Duration::from_secs(3600))
}

fn default_max_scopes() -> usize {
    1000
}

/// Bounds that keep the history's memory sane whatever the file says: a day at most, and at
/// most 100,000 scopes.
const MAX_RETENTION: Duration = Duration::from_secs(24 * 3600);
const MAX_SCOPES: usize = 100_000;
const MAX_ENTRIES_PER_SCOPE: usize = 100_000;

impl HistoryConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.retention.0 < Duration::from_secs(15) || self.retention.0 > MAX_RETENTION {
            return Err(invalid(
                "history.retention",
                "must be between 15s (one HPA sync) and 24h",
            ));
        }
        if self.max_scopes == 0 || self.max_scopes > MAX_SCOPES {
            return Err(invalid(
                "history.maxScopes",
                format!("must be between 1 and {MAX_SCOPES}"),
            ));
        }
        if self
            .entries_per_scope
            .is_some_and(|n| n == 0 || n > MAX_ENTRIES_PER_SCOPE)
        {
            return Err(invalid(
                "history.entriesPerScope",
                format!("must be between 1 and {MAX_ENTRIES_PER_SCOPE}"),
            ));
        }
        Ok(())
    }
}
