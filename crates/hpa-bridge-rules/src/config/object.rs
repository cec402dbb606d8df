//! The `objectMetrics` section: how an Object metric query (custom.metrics.k8s.io) finds the
//! series of the workload it names (docs/hpa-behaviour.md §6.5).

use schemars::JsonSchema;
use serde::Deserialize;

use super::{invalid, ConfigError};

/// The series labels that name the workload a series is about. The libapp exporter sets
/// `hpa_target_kind`, `hpa_target_name` and `hpa_target_api_version` (docs/hpa-behaviour.md §4.1).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadLabels {
    /// The label naming the workload's kind (`StatefulSet`, `Deployment`).
    #[serde(default = "default_kind")]
    pub kind: String,
    /// The label naming the workload.
    #[serde(default = "default_name")]
    pub name: String,
    /// The label naming the workload's API version; a series without it still matches.
    #[serde(default = "default_api_version")]
    pub api_version: String,
}

impl Default for WorkloadLabels {
    fn default() -> Self {
        WorkloadLabels {
            kind: default_kind(),
            name: default_name(),
            api_version: default_api_version(),
        }
    }
}

fn default_kind() -> String {
    "hpa_target_kind".into()
}
fn default_name() -> String {
    "hpa_target_name".into()
}
fn default_api_version() -> String {
    "hpa_target_api_version".into()
}

/// How an Object metric query (custom.metrics.k8s.io) finds its workload's series.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectMetricsConfig {
    /// The series labels that name the workload a series is about.
    #[serde(default)]
    pub workload_labels: WorkloadLabels,
}

/// A Prometheus label name: the labels are matched in the scrape store and pushed down as
/// PromQL matchers, so they must be valid in both.
fn valid_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl ObjectMetricsConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let l = &self.workload_labels;
        for (key, value) in [
            ("kind", &l.kind),
            ("name", &l.name),
            ("apiVersion", &l.api_version),
        ] {
            if !valid_label_name(value) {
                return Err(invalid(
                    format!("objectMetrics.workloadLabels.{key}"),
                    format!("{value:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"),
                ));
            }
        }
        if l.kind == l.name || l.kind == l.api_version || l.name == l.api_version {
            return Err(invalid(
                "objectMetrics.workloadLabels",
                "kind, name and apiVersion must be three different labels",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn defaults_are_the_libapp_labels_and_names_are_checked() {
        let c = Config::from_yaml("").unwrap();
        assert_eq!(c.object_metrics.workload_labels.kind, "hpa_target_kind");
        assert_eq!(c.object_metrics.workload_labels.name, "hpa_target_name");
        assert_eq!(
            c.object_metrics.workload_labels.api_version,
            "hpa_target_api_version"
        );
        let c = Config::from_yaml("objectMetrics: {workloadLabels: {name: app_workload}}").unwrap();
        assert_eq!(c.object_metrics.workload_labels.name, "app_workload");
        let e = Config::from_yaml("objectMetrics: {workloadLabels: {kind: app.kind}}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("objectMetrics.workloadLabels.kind"), "{e}");
        let e = Config::from_yaml("objectMetrics: {workloadLabels: {name: hpa_target_kind}}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("different"), "{e}");
        assert!(Config::from_yaml("objectMetrics: {labels: {}}").is_err());
    }
}
