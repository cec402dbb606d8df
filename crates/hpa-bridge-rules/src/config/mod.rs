//! The YAML configuration: typed, defaulted and validated once, at the edge.
//!
//! Every key is checked at startup (`deny_unknown_fields`), and every error names the key that
//! caused it, so a typo never silently falls back to a default. One file per section:
//! `scrape`, `source`, `metric` (typed by `kind`); `duration` for the `10s` notation.

mod duration;
mod history;
mod json_source;
mod metric;
mod object;
mod scrape;
mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

pub use duration::HumanDuration;
pub use history::HistoryConfig;
pub use json_source::{JsonSampleConfig, JsonSourceConfig, JSON_CONFIG_ANNOTATION};
pub use metric::{
    default_metrics, FloorSpec, MetricKind, MetricSpec, RecommendationSpec, Sustain, TargetSpec,
    ThresholdSpec, ValidWhen,
};
pub use object::{ObjectMetricsConfig, WorkloadLabels};
pub use scrape::{
    BasicAuth, KubernetesDiscoveryConfig, ScrapeConfig, ScrapeCredentials, StaticTarget,
    DEFAULT_MAX_CLOCK_SKEW_MS, RESERVED_LABELS,
};
pub use source::{PrometheusSourceConfig, PrometheusTls, SourceConfig};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {cause}")]
    Read {
        path: String,
        /// In the message rather than chained as a `source`: a chain printed with `{:#}`
        /// would repeat it.
        cause: std::io::Error,
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

/// The configuration file of `hpa-bridge serve --config` (the chart's `config` value).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "hpa-bridge configuration")]
pub struct Config {
    /// The embedded scraper: timing, parse limits and targets (static, or discovered through
    /// Kubernetes).
    #[serde(default)]
    pub scrape: ScrapeConfig,
    /// Read evidence from a Prometheus-compatible API instead of scraping (docs/prometheus-source.md).
    #[serde(default)]
    pub source: Option<SourceConfig>,
    /// The metrics served, each typed by its `kind`. Default: `hpa_expect_replicas`
    /// (recommendation), `hpa_stateful_floor` (stateful-floor) and `hpa_target_replicas`
    /// (target), reading the series `hpa_expect_replicas` and `hpa_stateful_index` and their
    /// aliases.
    #[serde(default = "default_metrics")]
    pub metrics: Vec<MetricSpec>,
    /// Start the built-in demo exporter inside `serve` (the local demo; never in production).
    #[serde(default)]
    pub demo: Option<DemoConfig>,
    /// Answer history for `/status/history`, the status page and the per-scope self-metrics.
    #[serde(default)]
    pub history: HistoryConfig,
    /// How an Object metric query finds its workload's series (custom.metrics.k8s.io).
    #[serde(default)]
    pub object_metrics: ObjectMetricsConfig,
    /// Named `json:` blocks, for discovered pods that choose one with the annotation
    /// `hpa-bridge.io/json-config`.
    #[serde(default)]
    pub json_configs: BTreeMap<String, JsonSourceConfig>,
}

/// The built-in demo exporter (the local demo; never in production).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DemoConfig {
    /// Where the demo exporter listens (host:port).
    #[serde(default = "default_demo_listen")]
    pub listen: String,
    /// The StatefulSet it plays, exported as `hpa_target_name`.
    #[serde(default = "default_demo_workload")]
    pub workload: String,
    /// Its pods (1 to 1000), served at `/pods/0` .. `/pods/N-1`.
    #[serde(default = "default_demo_pods")]
    pub pods: u32,
    /// The period of the recommendation's triangle wave (at least 1s).
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

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.display().to_string(),
            cause,
        })?;
        Config::from_yaml(&text)
    }

    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = if text.trim().is_empty() {
            yaml_serde::from_str("{}")
        } else {
            yaml_serde::from_str(text)
        }
        .map_err(|e| {
            metric::explain_entry_error(text).unwrap_or_else(|| ConfigError::Yaml(e.to_string()))
        })?;
        let mut config = config;
        config.validate()?;
        if let Some(k) = &mut config.scrape.kubernetes {
            let mut compiled = BTreeMap::new();
            for (name, block) in &config.json_configs {
                let x = block.compile(&format!("jsonConfigs.{name}"))?;
                compiled.insert(name.clone(), std::sync::Arc::new(x));
            }
            k.json_configs = std::sync::Arc::new(compiled);
        }
        Ok(config)
    }

    /// The JSON Schema (draft 2020-12) of the file `from_yaml` reads, generated from these
    /// types: what editors validate against and docs/configuration.md is written from.
    pub fn json_schema() -> serde_json::Value {
        schemars::schema_for!(Config).to_value()
    }

    pub fn metric(&self, name: &str) -> Option<&MetricSpec> {
        self.metric_index(name).map(|i| &self.metrics[i])
    }

    /// Where `metric(name)` sits in `metrics`.
    pub fn metric_index(&self, name: &str) -> Option<usize> {
        self.metrics
            .iter()
            .position(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// Settings that load but are probably mistakes, each naming its key: logged at startup.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let scrape = &self.scrape;
        if scrape.static_targets.is_empty() && scrape.kubernetes.is_none() && self.source.is_none()
        {
            out.push(
                "no scrape.static targets, no scrape.kubernetes and no source.prometheus: nothing \
                 is read, so every request is answered 404 (no series match)"
                    .to_string(),
            );
        }
        let namespace_labels: BTreeSet<&str> =
            self.metrics.iter().map(|m| m.namespace_label()).collect();
        for (i, t) in scrape.static_targets.iter().enumerate() {
            for label in &namespace_labels {
                if !t.labels.contains_key(*label) {
                    out.push(format!(
                        "scrape.static[{i}].labels: no {label:?} label: a request is scoped by \
                         its namespace, so unless the exporter labels every series with \
                         {label:?} itself, no request matches this target's series (add \
                         labels: {{{label}: <namespace>}})"
                    ));
                }
            }
        }
        out
    }

    /// Each series whose metric names a `timestampSeries`, and that series.
    pub fn timestamp_rules(&self) -> BTreeMap<String, String> {
        let mut rules = BTreeMap::new();
        for m in &self.metrics {
            if let Some(ts) = m.timestamp_series() {
                for s in m.series() {
                    rules.insert(s.clone(), ts.to_owned());
                }
            }
        }
        rules
    }

    /// Every source series name any served metric reads, for skipping the rest while parsing.
    pub fn wanted_series(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for m in &self.metrics {
            names.extend(m.series().iter().cloned());
            if let Some(gate) = m.valid_when() {
                names.insert(gate.series.clone());
            }
            if let Some(ts) = m.timestamp_series() {
                names.insert(ts.to_string());
            }
            if let Some(current) = m.current_series() {
                names.insert(current.to_string());
            }
        }
        names
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.scrape.validate()?;
        for (name, block) in &self.json_configs {
            block.compile(&format!("jsonConfigs.{name}"))?;
        }
        let json_in_use = !self.json_configs.is_empty()
            || self.scrape.static_targets.iter().any(|t| t.json.is_some());
        if json_in_use && self.source.is_some() {
            return Err(invalid(
                if self.json_configs.is_empty() {
                    "scrape.static"
                } else {
                    "jsonConfigs"
                },
                "a json block is read by the embedded scraper, which source.prometheus turns off",
            ));
        }
        let mut timestamp_of: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
        for (i, m) in self.metrics.iter().enumerate() {
            let Some(ts) = m.timestamp_series() else {
                continue;
            };
            if self.source.is_some() {
                return Err(invalid(
                    format!("metrics[{i}].timestampSeries"),
                    "is applied by the embedded scraper, which source.prometheus turns off",
                ));
            }
            for s in m.series() {
                if let Some((other_ts, other)) = timestamp_of.insert(s, (ts, m.name())) {
                    if other_ts != ts {
                        return Err(invalid(
                            format!("metrics[{i}].timestampSeries"),
                            format!("series {s:?} is timed by {ts:?} here but by {other_ts:?} in metric {other:?}"),
                        ));
                    }
                }
            }
        }
        self.history.validate()?;
        if let Some(source) = &self.source {
            source.validate(&self.scrape)?;
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
        self.object_metrics.validate()?;
        metric::validate_metrics(&self.metrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_gets_the_three_default_metrics() {
        let c = Config::from_yaml("").unwrap();
        let names: Vec<_> = c.metrics.iter().map(|m| m.name()).collect();
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
    fn likely_mistakes_load_with_a_warning_naming_the_key() {
        let w = Config::from_yaml("").unwrap().warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("no scrape.static targets"), "{w:?}");
        let w = Config::from_yaml(
            "scrape: {static: [{url: 'http://a/m', labels: {namespace: x}}, {url: 'http://b/m'}]}",
        )
        .unwrap()
        .warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("scrape.static[1].labels: no \"namespace\" label"),
            "{w:?}"
        );
        let demo = include_str!("../../../../examples/local.yaml");
        assert_eq!(
            Config::from_yaml(demo).unwrap().warnings(),
            Vec::<String>::new()
        );
        let prom = Config::from_yaml("source: {prometheus: {url: 'http://p:9090'}}").unwrap();
        assert!(prom.warnings().is_empty());
    }

    #[test]
    fn a_bad_prometheus_url_is_named_without_its_password() {
        let e = err("source: {prometheus: {url: 'http://user:hunter2@bad host/'}}");
        assert!(e.contains("source.prometheus.url"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn the_history_section_defaults_to_an_hour_and_1000_scopes_and_is_bounded() {
        let d = Config::from_yaml("").unwrap().history;
        assert_eq!(d.retention.0, Duration::from_secs(3600));
        assert_eq!(d.max_scopes, 1000);
        let c = Config::from_yaml("history: {retention: 10m, maxScopes: 50}").unwrap();
        assert_eq!(c.history.retention.0, Duration::from_secs(600));
        assert_eq!(c.history.max_scopes, 50);
        assert!(err("history: {maxScopes: 0}").contains("history.maxScopes"));
        assert!(err("history: {retention: 1s}").contains("history.retention"));
        assert!(err("history: {retention: 48h}").contains("history.retention"));
        assert!(err("history: {retain: 1h}").contains("retain"));
        assert!(err("history: {entriesPerScope: 0}").contains("history.entriesPerScope"));
        let c = Config::from_yaml("history: {entriesPerScope: 600}").unwrap();
        assert_eq!(c.history.entries_per_scope, Some(600));
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
            "scrape: {maxLineBytes: 4096, maxLabelsPerSeries: 16, maxLabelNameBytes: 64, maxLabelValueBytes: 256, maxSeriesPerPage: 50}",
        )
        .unwrap();
        assert_eq!(
            c.scrape.limits(),
            hpa_bridge_exposition::Limits {
                max_line_bytes: 4096,
                max_labels_per_series: 16,
                max_label_name_bytes: 64,
                max_label_value_bytes: 256,
                max_series: 50,
                ..hpa_bridge_exposition::Limits::DEFAULT
            }
        );
        assert_eq!(
            Config::from_yaml("").unwrap().scrape.limits(),
            hpa_bridge_exposition::Limits::DEFAULT
        );
        assert!(err("scrape: {maxLabelsPerSeries: 0}").contains("scrape.maxLabelsPerSeries"));
        assert!(err("scrape: {maxLineBytes: 0}").contains("scrape.maxLineBytes"));
        assert!(err("scrape: {maxLabelValueBytes: 0}").contains("scrape.maxLabelValueBytes"));
        assert!(err("scrape: {maxLabelNameBytes: 0}").contains("scrape.maxLabelNameBytes"));
        assert!(err("scrape: {maxSeriesPerPage: 0}").contains("scrape.maxSeriesPerPage"));
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
        // Credentials in a URL are refused, pointing to the keys that carry them, and the
        // refusal shows no password, whatever characters it holds.
        for url in [
            "http://u:hunter1@a/m",
            "http://u:hun/ter#2@a/m",
            "http://hunter3@a/m",
        ] {
            let e = err(&format!("scrape: {{static: [{{url: '{url}'}}]}}"));
            assert!(
                e.contains("scrape.static[0].url")
                    && e.contains("basicAuth: {username, passwordFile}")
                    && e.contains("bearerTokenFile"),
                "{e}"
            );
            assert!(!e.contains("hun"), "{e}");
        }
        let both = err("scrape: {static: [{url: 'http://a/m', basicAuth: {username: u, passwordFile: /p}, bearerTokenFile: /t}]}");
        assert!(
            both.contains("at most one of basicAuth and bearerTokenFile"),
            "{both}"
        );
        let inline = err(
            "scrape: {static: [{url: 'http://a/m', basicAuth: {username: u, password: hunter4}}]}",
        );
        assert!(
            inline.contains("scrape.static[0].basicAuth.password") && !inline.contains("hunter"),
            "{inline}"
        );
        assert!(
            err("scrape: {static: [{url: 'http://a/m', basicAuth: {username: u}}]}")
                .contains("basicAuth.passwordFile")
        );
        assert!(err("scrape: {static: [{url: 'http://a/m', basicAuth: {username: 'a:b', passwordFile: /p}}]}")
            .contains("basicAuth.username"));
        let c = Config::from_yaml(
            "scrape: {static: [{url: 'http://a/m', basicAuth: {username: u, passwordFile: /p}}, {url: 'http://b/m', bearerTokenFile: /t}, {url: 'http://c/m'}]}",
        )
        .unwrap();
        let creds: Vec<_> = c
            .scrape
            .static_targets
            .iter()
            .enumerate()
            .map(|(i, t)| t.credentials(i))
            .collect();
        assert_eq!(
            creds,
            [
                Some(ScrapeCredentials::Basic {
                    username: "u".into(),
                    password_file: "/p".into(),
                    key: "scrape.static[0].basicAuth.passwordFile".into()
                }),
                Some(ScrapeCredentials::Bearer {
                    token_file: "/t".into(),
                    key: "scrape.static[1].bearerTokenFile".into()
                }),
                None
            ]
        );
        // The same URL twice is refused without showing its query values; URLs differing in
        // a query value are different targets.
        let dup =
            err("scrape: {static: [{url: 'http://a/m?t=SECRET'}, {url: 'http://a/m?t=SECRET'}]}");
        assert!(
            dup.contains("scrape.static[1].url") && !dup.contains("SECRET"),
            "{dup}"
        );
        Config::from_yaml("scrape: {static: [{url: 'http://a/m?t=1'}, {url: 'http://a/m?t=2'}]}")
            .unwrap();
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

    #[test]
    fn an_epoch_label_is_a_label_name_and_only_a_recommendation_s_key() {
        let one = |extra: &str| {
            format!("metrics: [{{name: r, kind: recommendation, series: [x]{extra}}}]")
        };
        let c = Config::from_yaml(&one(", epochLabel: master_epoch")).unwrap();
        assert_eq!(c.metric("r").unwrap().epoch_label(), Some("master_epoch"));
        let c = Config::from_yaml(&one("")).unwrap();
        assert_eq!(c.metric("r").unwrap().epoch_label(), None);
        for bad in ["master-epoch", "'0epoch'", "__epoch", "''", "master.epoch"] {
            let e = err(&one(&format!(", epochLabel: {bad}")));
            assert!(
                e.contains("metrics[0].epochLabel") && e.contains("label name"),
                "{bad}: {e}"
            );
        }
        let e = err("metrics: [{name: f, kind: stateful-floor, series: [x], epochLabel: e}]");
        assert!(
            e.contains("metrics[0].epochLabel") && e.contains("only to kind recommendation"),
            "{e}"
        );
        let e = err(&one(", epochLabels: e"));
        assert!(e.contains("metrics[0].epochLabels"), "{e}");
    }

    #[test]
    fn a_key_of_another_kind_is_a_parse_error_naming_the_key() {
        let e = err("metrics: [{name: r, kind: recommendation, series: [x], upPerReplica: 3}]");
        assert!(e.contains("metrics[0].upPerReplica"), "{e}");
        assert!(e.contains("kind threshold"), "{e}");
        let e = err("metrics: [{name: t, kind: target, series: [x], recommendation: r}]");
        assert!(e.contains("metrics[0].series"), "{e}");
        let e = err(
            "metrics: [{name: r, kind: recommendation, series: [x]}, {name: f, kind: stateful-floor, series: [y], currentSeries: c}]",
        );
        assert!(e.contains("metrics[1].currentSeries"), "{e}");
        // A typo is not a key of any kind: the parse error lists the keys the kind takes.
        let e = err("metrics: [{name: r, kind: recommendation, seriess: [x]}]");
        assert!(
            e.contains("metrics[0].seriess") && e.contains("expected one of"),
            "{e}"
        );
        // The tag itself is not an unknown field, and every kind still parses with its keys.
        let ok = Config::from_yaml(
            "metrics: [{name: r, kind: recommendation, series: [x], validWhen: {series: v, equals: 1}, currentSeries: c}, {name: t, kind: threshold, series: [l], upPerReplica: 3, downPerReplica: 2, sustain: {up: 1m}, maxStep: 2, min: 1, max: 9}, {name: f, kind: stateful-floor, series: [i], namespaceLabel: ns}, {name: g, kind: target, recommendation: r, combine: [t], floor: f}]",
        )
        .unwrap();
        assert_eq!(ok.metrics.len(), 4);
        assert_eq!(ok.metric("f").unwrap().namespace_label(), "ns");
        assert!(ok.wanted_series().contains("v") && ok.wanted_series().contains("c"));
    }

    #[test]
    fn json_blocks_and_timestamp_series_are_checked_naming_the_key() {
        let cases = [
            (
                "scrape:\n  static:\n    - url: http://a/s\n      json: {samples: [{series: rec, value: recommendedWorkers}]}\n",
                "scrape.static[0].json.samples[0].value: \"recommendedWorkers\" is not an RFC 9535 JSONPath",
            ),
            (
                "jsonConfigs:\n  st: {samples: [{series: rec, value: $.a, labels: {__x: $.b}}]}\n",
                "jsonConfigs.st.samples[0].labels.__x: \"__x\" is not a label name",
            ),
            (
                "jsonConfigs:\n  st: {samples: [{series: rec, value: $.a, unit: s}]}\n",
                "unknown field `unit`",
            ),
            (
                "jsonConfigs:\n  st: {samples: []}\n",
                "jsonConfigs.st.samples: must list at least one series",
            ),
            (
                "jsonConfigs:\n  st: {samples: [{series: rec, value: $.a}]}\nsource: {prometheus: {url: http://p:9090}}\n",
                "jsonConfigs: a json block is read by the embedded scraper",
            ),
            (
                "metrics:\n  - {name: r, kind: recommendation, series: [rec], timestampSeries: rec}\n",
                "metrics[0].timestampSeries: \"rec\" must be a valid Prometheus metric name other than the metric's series",
            ),
            (
                "metrics:\n  - {name: r, kind: recommendation, series: [rec], timestampSeries: a}\n  - {name: s, kind: recommendation, series: [rec], timestampSeries: b}\n",
                "metrics[1].timestampSeries: series \"rec\" is timed by \"b\" here but by \"a\" in metric \"r\"",
            ),
        ];
        for (yaml, want) in cases {
            let err = Config::from_yaml(yaml).unwrap_err().to_string();
            assert!(err.contains(want), "{yaml}\n{err}");
        }
        let ok = Config::from_yaml(
            "metrics:\n  - {name: r, kind: recommendation, series: [rec], timestampSeries: rec_at}\nscrape:\n  maxClockSkew: 2s\n",
        )
        .unwrap();
        assert!(ok.wanted_series().contains("rec_at"));
        assert_eq!(ok.timestamp_rules()["rec"], "rec_at");
        assert_eq!(ok.scrape.max_clock_skew.0, Duration::from_secs(2));
    }

    #[test]
    fn the_rest_example_loads_and_compiles_its_json_block() {
        let c =
            Config::from_yaml(include_str!("../../../../examples/seatunnel-rest.yaml")).unwrap();
        let json = c.scrape.static_targets[0].json.as_ref().unwrap();
        let x = json.compile("scrape.static[0].json").unwrap();
        assert_eq!(x.samples.len(), 3);
        assert_eq!(
            c.metric("seatunnel_workers").unwrap().epoch_label(),
            Some("master_epoch")
        );
    }
}
