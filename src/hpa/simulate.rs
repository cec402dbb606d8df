//! `hpa-bridge simulate SCENARIO.yaml`: the real adapter against real loopback exporters, polled
//! over real HTTPS by the HPA model, on a simulated clock.
//!
//! What is real: the exporters (one HTTP server per pod or controller on loopback, whose pages
//! follow the scenario's timeline), the adapter (`Adapter`, `Store`, `Scraper::scrape_round`,
//! `policy`, `ApiHandler` behind `serve_api` with a self-signed certificate) and the HTTPS GETs
//! the HPA sends (REFERENCE.md §1.2). What is simulated: time (a `ManualClock` the runner moves
//! from one scrape tick or HPA sync to the next), the HPA controller (`hpa::model`), and the
//! StatefulSet (pods 0..N-1 follow the HPA's decision).
//!
//! Every sync is checked against ground truth taken from the scenario, never from the adapter:
//! the floor the pods really hold, which inputs the adapter could not have known, and the
//! largest recommendation any controller really exported.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::model::{
    ControllerConfig, Decision, Hpa, HpaSpec, MetricInput, PolicyType, ResolvedRules, SelectPolicy,
    SyncInput, SyncOutcome, SYNC_PERIOD,
};
use super::quantity::Quantity;
use crate::adapter::Adapter;
use crate::api::{server, ApiHandler};
use crate::clock::{ManualClock, Millis};
use crate::cluster::Cluster;
use crate::config::{Config, HumanDuration};
use crate::source::scrape::Scraper;
use crate::store::{ScrapeTarget, TargetId, WorkloadRef, MAX_REPLICA_VALUE};
use crate::telemetry::SelfMetrics;
use crate::tls;

/// An arbitrary wall-clock start for the simulated clock (2027-01-15T08:00:00Z).
const EPOCH_MS: Millis = 1_800_000_000_000;

#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid scenario: {0}")]
    Yaml(String),
    #[error("invalid scenario: {key}: {message}")]
    Invalid { key: String, message: String },
    #[error("simulation failed: {0}")]
    Io(String),
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> SimulateError {
    SimulateError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Scenario schema
// ---------------------------------------------------------------------------------------------

/// One scenario file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Simulated length, e.g. `30m`.
    pub duration: HumanDuration,
    #[serde(default)]
    pub kubernetes: KubernetesStyle,
    /// The HPA's namespace; every exporter's target carries it as the `namespace` label.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub workload: WorkloadSpec,
    /// The adapter's own configuration (the `serve --config` schema) without targets: the
    /// simulator supplies one target per controller and pod.
    #[serde(default)]
    pub adapter: serde_yaml::Value,
    /// The HPA's `spec` (autoscaling/v2 field names); `scaleTargetRef` is ignored.
    pub hpa: HpaSpec,
    /// Exporters of `hpa_expect_replicas`, one per controller instance (REFERENCE.md §4.1).
    #[serde(default)]
    pub controllers: Vec<ControllerSpec>,
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    /// A load total the Ready pods export as one series, split evenly among them (for
    /// `kind: threshold` metrics).
    #[serde(default)]
    pub load: Option<LoadSpec>,
    /// Times at which the adapter process restarts: a fresh store, so retained indices are lost.
    #[serde(default)]
    pub adapter_restarts: Vec<HumanDuration>,
    /// What the run must show; any failure makes the run fail.
    #[serde(default)]
    pub expect: Vec<Expectation>,
}

fn default_namespace() -> String {
    "default".into()
}

/// The Kubernetes version whose HPA controller is modelled, and its flags.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubernetesStyle {
    /// `1.33` style: decides the tolerance test and the configurable-tolerance gate.
    #[serde(default = "default_kube_version")]
    pub version: String,
    /// `--horizontal-pod-autoscaler-tolerance`.
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// `--horizontal-pod-autoscaler-downscale-stabilization`.
    #[serde(default)]
    pub downscale_stabilization: Option<HumanDuration>,
}

fn default_kube_version() -> String {
    "1.35".into()
}

impl Default for KubernetesStyle {
    fn default() -> Self {
        KubernetesStyle {
            version: default_kube_version(),
            tolerance: None,
            downscale_stabilization: None,
        }
    }
}

impl KubernetesStyle {
    pub fn controller_config(&self) -> Result<ControllerConfig, SimulateError> {
        let minor = self
            .version
            .strip_prefix("1.")
            .and_then(|m| m.parse::<u32>().ok())
            .ok_or_else(|| {
                invalid(
                    "kubernetes.version",
                    format!("{:?} is not of the form 1.<minor>", self.version),
                )
            })?;
        let mut config = ControllerConfig::for_kube_minor(minor);
        if let Some(t) = self.tolerance {
            if !(t.is_finite() && t >= 0.0) {
                return Err(invalid("kubernetes.tolerance", "must be >= 0"));
            }
            config.tolerance = t;
        }
        if let Some(d) = self.downscale_stabilization {
            config.downscale_stabilization = d.0;
        }
        Ok(config)
    }
}

/// How a pod's `hpa_stateful_index` behaves when no override says otherwise.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum StatefulMode {
    /// `ordinal + 1` while Ready, until the pod has been above the recommendation for
    /// `drainAfter` and has handed its state over; then 0 (REFERENCE.md §4.1).
    #[default]
    Drain,
    /// `ordinal + 1` while Ready, never released.
    Ready,
    /// Always 0: stateless pods.
    None,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadSpec {
    pub name: String,
    /// `StatefulSet` (ordinals 0..N-1, highest removed first).
    #[serde(default = "default_kind")]
    pub kind: String,
    pub initial_replicas: i32,
    /// A new pod becomes Ready (and exports its index) this long after it is created.
    #[serde(default = "zero_duration")]
    pub readiness_delay: HumanDuration,
    #[serde(default)]
    pub stateful: StatefulMode,
    #[serde(default = "default_drain_after")]
    pub drain_after: HumanDuration,
    /// Explicit index timelines for some ordinals, replacing `stateful` for them.
    #[serde(default)]
    pub index_overrides: Vec<IndexOverride>,
    /// Whether the adapter knows the workload (discovery: owner, `spec.replicas`). Without it
    /// an incomplete floor refuses instead of holding at the current count.
    #[serde(default = "yes")]
    pub discovery: bool,
}

fn default_kind() -> String {
    "StatefulSet".into()
}
fn zero_duration() -> HumanDuration {
    HumanDuration(Duration::ZERO)
}
fn default_drain_after() -> HumanDuration {
    HumanDuration(Duration::from_secs(60))
}
fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IndexOverride {
    pub ordinal: u32,
    pub values: Vec<Step>,
}

/// From `at` on, the exporter shows `value` (a number, or text such as `NaN` or `+Inf`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    pub at: HumanDuration,
    pub value: SampleValue,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum SampleValue {
    Number(f64),
    Text(String),
}

impl SampleValue {
    /// The sample text as the exporter writes it.
    fn exposition(&self) -> String {
        match self {
            SampleValue::Number(v) if v.is_nan() => "NaN".into(),
            SampleValue::Number(v) if v.is_infinite() => {
                if *v > 0.0 { "+Inf" } else { "-Inf" }.into()
            }
            SampleValue::Number(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
            SampleValue::Number(v) if v.abs() >= 1e15 => format!("{v:e}"),
            SampleValue::Number(v) => format!("{v}"),
            SampleValue::Text(t) => t.clone(),
        }
    }

    /// The replica count this value stands for, if it is a usable one. Deliberately written
    /// here rather than borrowed from the store: ground truth must not share the adapter's code.
    fn replicas(&self) -> Option<i64> {
        let v = match self {
            SampleValue::Number(v) => *v,
            SampleValue::Text(t) => t.trim().parse::<f64>().ok()?,
        };
        (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= MAX_REPLICA_VALUE)
            .then_some(v as i64)
    }
}

/// The workload's load: a total `V` over time that the Ready pods export as `series`, each
/// `V / ready pods`, so the adapter's sum over the pods is `V`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoadSpec {
    pub series: String,
    /// Points of the total, joined by straight lines (a ramp) and held after the last.
    pub total: Vec<LoadPoint>,
    /// Relative amplitude of a deterministic pseudo-noise on every scraped total: the exported
    /// total is `V × (1 + noise × u)` with `u` in [-1, 1] derived from the scrape time.
    #[serde(default)]
    pub noise: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoadPoint {
    pub at: HumanDuration,
    pub value: f64,
}

impl LoadSpec {
    /// The noise-free total at `t`.
    pub fn clean(&self, t: Millis) -> f64 {
        let pts = &self.total;
        match pts.iter().position(|p| ms(p.at) > t) {
            Some(0) => pts[0].value,
            None => pts.last().map(|p| p.value).unwrap_or(0.0),
            Some(i) => {
                let (a, b) = (&pts[i - 1], &pts[i]);
                let f = (t - ms(a.at)) as f64 / (ms(b.at) - ms(a.at)) as f64;
                a.value + (b.value - a.value) * f
            }
        }
    }

    /// The exported total at `t`: the clean total with its pseudo-noise (splitmix64 of `t`, so
    /// every run and every reader sees the same figure).
    pub fn exported(&self, t: Millis) -> f64 {
        let mut z = (t as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        self.clean(t) * (1.0 + self.noise * u)
    }

    /// The plateaus: spans where two consecutive points hold the same total.
    fn plateaus(&self) -> Vec<(Millis, Millis, f64)> {
        self.total
            .windows(2)
            .filter(|p| p[0].value == p[1].value)
            .map(|p| (ms(p[0].at), ms(p[1].at), p[0].value))
            .collect()
    }
}

/// One controller instance exporting `hpa_expect_replicas`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ControllerSpec {
    pub name: String,
    pub values: Vec<Step>,
    /// The controller starts exporting at `from` (a duplicate appearing)...
    #[serde(default)]
    pub from: Option<HumanDuration>,
    /// ...and its exporter is gone from `until` on.
    #[serde(default)]
    pub until: Option<HumanDuration>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FaultMode {
    /// Connections are closed without a response: unreachable.
    Down,
    /// HTTP 500.
    Error,
    /// The response comes after `delay`, beyond the scrape timeout.
    Slow,
    /// A 200 page that is not exposition text.
    Garbage,
    /// A 200 page without the series: the exporter stopped exporting it.
    Absent,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultSpec {
    /// A controller or pod name (`lobby-3`), `controllers`, `pods` or `all`.
    pub target: String,
    pub from: HumanDuration,
    pub to: HumanDuration,
    pub mode: FaultMode,
    /// Alternate: faulty for `flap`, healthy for `flap`, and so on.
    #[serde(default)]
    pub flap: Option<HumanDuration>,
    /// For `slow`: how late the response is (default 5 × scrape.timeout).
    #[serde(default)]
    pub delay: Option<HumanDuration>,
}

impl FaultSpec {
    fn applies_to(&self, exporter: &str, is_pod: bool) -> bool {
        match self.target.as_str() {
            "all" => true,
            "pods" => is_pod,
            "controllers" => !is_pod,
            name => name == exporter,
        }
    }

    fn active_at(&self, t: Millis) -> bool {
        let (from, to) = (ms(self.from), ms(self.to));
        if t < from || t >= to {
            return false;
        }
        match self.flap {
            Some(f) if !f.0.is_zero() => ((t - from) / ms(f)) % 2 == 0,
            _ => true,
        }
    }
}

/// An expected outcome, written as a one-key map (`- finalReplicas: 3`). Any failed
/// expectation fails the run.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "ExpectationSpec")]
pub enum Expectation {
    /// `spec.replicas` after the last sync.
    FinalReplicas(i32),
    /// Replicas after every sync are at least this.
    NeverBelow(i32),
    /// Replicas after every sync are at most this.
    NeverAbove(i32),
    /// Replicas after every sync in [from, to] stay within [min, max].
    Replicas(ReplicasWindow),
    /// Some sync at or before `by` leaves exactly `replicas`.
    Reaches(Reaches),
    /// Every completed convergence took at most this long.
    MaxConvergenceLag(HumanDuration),
    /// Replicas change direction (up then down, or down then up) at most this many times.
    MaxReversals(u32),
    /// Replicas never fall between consecutive syncs in [from, to].
    NoDecrease(ReplicasWindow),
    /// With a `load:` block and a threshold metric: at every sync the replicas cover the clean
    /// load of at most this long ago at `upPerReplica` (see [`Runner::overload_lag`]).
    MaxOverloadLag(HumanDuration),
}

/// The YAML form of [`Expectation`]: serde_yaml reads externally tagged enums only from YAML
/// tags, so the one-key map is read as a struct with exactly one field set.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpectationSpec {
    #[serde(default)]
    final_replicas: Option<i32>,
    #[serde(default)]
    never_below: Option<i32>,
    #[serde(default)]
    never_above: Option<i32>,
    #[serde(default)]
    replicas: Option<ReplicasWindow>,
    #[serde(default)]
    reaches: Option<Reaches>,
    #[serde(default)]
    max_convergence_lag: Option<HumanDuration>,
    #[serde(default)]
    max_reversals: Option<u32>,
    #[serde(default)]
    no_decrease: Option<ReplicasWindow>,
    #[serde(default)]
    max_overload_lag: Option<HumanDuration>,
}

impl TryFrom<ExpectationSpec> for Expectation {
    type Error = String;

    fn try_from(e: ExpectationSpec) -> Result<Self, String> {
        let mut found = Vec::new();
        found.extend(e.final_replicas.map(Expectation::FinalReplicas));
        found.extend(e.never_below.map(Expectation::NeverBelow));
        found.extend(e.never_above.map(Expectation::NeverAbove));
        found.extend(e.replicas.map(Expectation::Replicas));
        found.extend(e.reaches.map(Expectation::Reaches));
        found.extend(e.max_convergence_lag.map(Expectation::MaxConvergenceLag));
        found.extend(e.max_reversals.map(Expectation::MaxReversals));
        found.extend(e.no_decrease.map(Expectation::NoDecrease));
        found.extend(e.max_overload_lag.map(Expectation::MaxOverloadLag));
        match found.len() {
            1 => Ok(found.remove(0)),
            n => Err(format!(
                "each expectation is a map with exactly one key (finalReplicas, neverBelow, neverAbove, replicas, reaches, maxConvergenceLag, maxReversals, noDecrease, maxOverloadLag); found {n}"
            )),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplicasWindow {
    #[serde(default)]
    pub from: Option<HumanDuration>,
    #[serde(default)]
    pub to: Option<HumanDuration>,
    #[serde(default)]
    pub min: Option<i32>,
    #[serde(default)]
    pub max: Option<i32>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Reaches {
    pub replicas: i32,
    pub by: HumanDuration,
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expectation::FinalReplicas(n) => write!(f, "finalReplicas {n}"),
            Expectation::NeverBelow(n) => write!(f, "neverBelow {n}"),
            Expectation::NeverAbove(n) => write!(f, "neverAbove {n}"),
            Expectation::Replicas(w) => {
                write!(f, "replicas")?;
                if let Some(m) = w.min {
                    write!(f, " >= {m}")?;
                }
                if let Some(m) = w.max {
                    write!(f, " <= {m}")?;
                }
                write!(
                    f,
                    " from {} to {}",
                    w.from
                        .map(|d| fmt_t(ms(d)))
                        .unwrap_or_else(|| "start".into()),
                    w.to.map(|d| fmt_t(ms(d))).unwrap_or_else(|| "end".into())
                )
            }
            Expectation::Reaches(r) => write!(f, "reaches {} by {}", r.replicas, fmt_t(ms(r.by))),
            Expectation::MaxConvergenceLag(d) => write!(f, "maxConvergenceLag {}", fmt_t(ms(*d))),
            Expectation::MaxReversals(n) => write!(f, "maxReversals {n}"),
            Expectation::NoDecrease(w) => write!(
                f,
                "noDecrease from {} to {}",
                w.from
                    .map(|d| fmt_t(ms(d)))
                    .unwrap_or_else(|| "start".into()),
                w.to.map(|d| fmt_t(ms(d))).unwrap_or_else(|| "end".into())
            ),
            Expectation::MaxOverloadLag(d) => write!(f, "maxOverloadLag {}", fmt_t(ms(*d))),
        }
    }
}

fn ms(d: HumanDuration) -> Millis {
    d.0.as_millis() as Millis
}

/// `12m30s`, `45s`, `0s`.
pub fn fmt_t(t: Millis) -> String {
    let s = t / 1000;
    let frac = t % 1000;
    let mut out = String::new();
    if s >= 60 {
        let _ = write!(out, "{}m", s / 60);
        if s % 60 != 0 || frac != 0 {
            let _ = write!(out, "{}s", s % 60);
        }
    } else {
        let _ = write!(out, "{s}s");
    }
    if frac != 0 {
        out.truncate(out.len() - 1);
        let _ = write!(out, ".{frac:03}s");
    }
    out
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, SimulateError> {
        let text = std::fs::read_to_string(path).map_err(|source| SimulateError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Scenario::from_yaml(&text)
    }

    pub fn from_yaml(text: &str) -> Result<Scenario, SimulateError> {
        let s: Scenario =
            serde_yaml::from_str(text).map_err(|e| SimulateError::Yaml(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// The adapter config, validated by the adapter's own rules.
    pub fn adapter_config(&self) -> Result<Config, SimulateError> {
        let text = match &self.adapter {
            serde_yaml::Value::Null => String::new(),
            v => serde_yaml::to_string(v).map_err(|e| SimulateError::Yaml(e.to_string()))?,
        };
        let config = Config::from_yaml(&text).map_err(|e| invalid("adapter", e.to_string()))?;
        if !config.scrape.static_targets.is_empty() || config.source.is_some() {
            return Err(invalid(
                "adapter",
                "scrape.static and source are supplied by the simulator (one target per controller and pod)",
            ));
        }
        Ok(config)
    }

    fn validate(&self) -> Result<(), SimulateError> {
        let d = self.duration.0;
        if d < SYNC_PERIOD || d > Duration::from_secs(24 * 3600) {
            return Err(invalid("duration", "must be between 15s and 24h"));
        }
        self.kubernetes.controller_config()?;
        self.adapter_config()?;
        Hpa::new(self.hpa.clone(), ControllerConfig::default())
            .map_err(|e| invalid("hpa", e.to_string()))?;
        let w = &self.workload;
        if !(0..=1000).contains(&w.initial_replicas) {
            return Err(invalid(
                "workload.initialReplicas",
                "must be between 0 and 1000",
            ));
        }
        if w.kind != "StatefulSet" {
            return Err(invalid(
                "workload.kind",
                "only StatefulSet is simulated (ordinals 0..N-1, highest removed first)",
            ));
        }
        let check_steps = |key: &str, steps: &[Step]| {
            if steps.is_empty() {
                return Err(invalid(key, "needs at least one value"));
            }
            if steps.windows(2).any(|p| p[0].at >= p[1].at) {
                return Err(invalid(key, "steps must be in increasing `at` order"));
            }
            Ok(())
        };
        for (i, o) in w.index_overrides.iter().enumerate() {
            check_steps(&format!("workload.indexOverrides[{i}].values"), &o.values)?;
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, c) in self.controllers.iter().enumerate() {
            check_steps(&format!("controllers[{i}].values"), &c.values)?;
            if c.name.starts_with(&format!("{}-", w.name))
                || ["all", "pods", "controllers"].contains(&c.name.as_str())
                || !names.insert(c.name.clone())
            {
                return Err(invalid(
                    format!("controllers[{i}].name"),
                    format!("{:?} is a duplicate, a reserved word or a pod name", c.name),
                ));
            }
        }
        if let Some(l) = &self.load {
            if l.series.is_empty() || l.series == "hpa_stateful_index" {
                return Err(invalid(
                    "load.series",
                    "must name a series other than hpa_stateful_index",
                ));
            }
            if l.total.is_empty() {
                return Err(invalid("load.total", "needs at least one point"));
            }
            if l.total.windows(2).any(|p| p[0].at >= p[1].at) {
                return Err(invalid(
                    "load.total",
                    "points must be in increasing `at` order",
                ));
            }
            if l.total
                .iter()
                .any(|p| !(p.value.is_finite() && p.value >= 0.0))
            {
                return Err(invalid("load.total", "values must be finite and >= 0"));
            }
            if !(0.0..1.0).contains(&l.noise) {
                return Err(invalid("load.noise", "must be in [0, 1)"));
            }
        }
        for (i, f) in self.faults.iter().enumerate() {
            if f.from >= f.to {
                return Err(invalid(format!("faults[{i}]"), "from must be before to"));
            }
            let known = matches!(f.target.as_str(), "all" | "pods" | "controllers")
                || names.contains(&f.target)
                || f.target
                    .strip_prefix(&format!("{}-", w.name))
                    .is_some_and(|o| o.parse::<u32>().is_ok());
            if !known {
                return Err(invalid(
                    format!("faults[{i}].target"),
                    format!(
                        "{:?} names no controller or pod (use a controller name, {}-<ordinal>, controllers, pods or all)",
                        f.target, w.name
                    ),
                ));
            }
        }
        Ok(())
    }

    fn fault_at(&self, exporter: &str, is_pod: bool, t: Millis) -> Option<&FaultSpec> {
        self.faults
            .iter()
            .find(|f| f.applies_to(exporter, is_pod) && f.active_at(t))
    }
}

fn step_value(steps: &[Step], t: Millis) -> Option<&SampleValue> {
    steps
        .iter()
        .take_while(|s| ms(s.at) <= t)
        .last()
        .map(|s| &s.value)
}

/// A threshold metric's numbers, read from the adapter config for the ground truth: the
/// checks compute `ceil(V/T)` themselves rather than calling `crate::threshold`.
#[derive(Clone, Copy, Debug)]
struct ThresholdTruth {
    up: f64,
    down: f64,
    sustain_up_ms: Millis,
    sustain_down_ms: Millis,
    min: i64,
    max: i64,
}

impl ThresholdTruth {
    /// The threshold metric over the scenario's load series, if any.
    fn from_config(config: &Config, load: &LoadSpec) -> Option<ThresholdTruth> {
        let m = config.metrics.iter().find_map(|m| match m {
            crate::config::MetricSpec::Threshold(t) if t.series.contains(&load.series) => Some(t),
            _ => None,
        })?;
        let up = m.up_per_replica;
        let sustain = |d: Option<HumanDuration>| d.map(ms).unwrap_or(0);
        Some(ThresholdTruth {
            up,
            down: m.down_per_replica.unwrap_or(up),
            sustain_up_ms: m.sustain.as_ref().map(|s| sustain(s.up)).unwrap_or(0),
            sustain_down_ms: m.sustain.as_ref().map(|s| sustain(s.down)).unwrap_or(0),
            min: m.min.map(i64::from).unwrap_or(1),
            max: m.max.map(i64::from).unwrap_or(i64::MAX),
        })
    }
}

/// `ceil(v / per)` as the least `n` with `n × per ≥ v`.
fn ceil_div(v: f64, per: f64) -> i64 {
    let mut n = (v / per).ceil().max(0.0);
    while n > 0.0 && (n - 1.0) * per >= v {
        n -= 1.0;
    }
    while n * per < v {
        n += 1.0;
    }
    n as i64
}

// ---------------------------------------------------------------------------------------------
// Loopback exporters
// ---------------------------------------------------------------------------------------------

/// What an exporter does with the next request.
#[derive(Clone, Debug)]
enum Page {
    Ok(String),
    Status(u16),
    Slow(String, Duration),
    Down,
}

/// A real HTTP exporter on its own loopback port, like a pod's metrics endpoint.
struct Exporter {
    url: String,
    page: Arc<Mutex<Page>>,
    task: JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
#[error("exporter is down")]
struct ExporterDown;

impl Exporter {
    async fn start() -> Result<Exporter, SimulateError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| SimulateError::Io(format!("binding an exporter: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| SimulateError::Io(e.to_string()))?;
        let page = Arc::new(Mutex::new(Page::Ok(String::new())));
        let shared = page.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let now = shared.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if matches!(now, Page::Down) {
                    drop(tcp);
                    continue;
                }
                let shared = shared.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |_req: http::Request<Incoming>| {
                        let page = shared.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        async move { respond(page).await }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        Ok(Exporter {
            url: format!("http://{addr}/metrics"),
            page,
            task,
        })
    }

    fn set(&self, page: Page) {
        *self.page.lock().unwrap_or_else(|e| e.into_inner()) = page;
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn respond(page: Page) -> Result<http::Response<Full<Bytes>>, ExporterDown> {
    let (status, body) = match page {
        // A service error makes hyper close the connection without a response.
        Page::Down => return Err(ExporterDown),
        Page::Ok(body) => (200, body),
        Page::Status(code) => (code, "internal error\n".to_string()),
        Page::Slow(body, delay) => {
            tokio::time::sleep(delay).await;
            (200, body)
        }
    };
    Ok(http::Response::builder()
        .status(status)
        .header("content-type", "text/plain; version=0.0.4")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default())
}

// ---------------------------------------------------------------------------------------------
// The adapter instance and the HPA's HTTPS client
// ---------------------------------------------------------------------------------------------

/// What discovery would report about the simulated StatefulSet.
struct SimWorkload {
    spec_replicas: AtomicI64,
}

impl Cluster for SimWorkload {
    fn current_replicas(&self, _w: &WorkloadRef) -> Option<u64> {
        Some(self.spec_replicas.load(Ordering::SeqCst).max(0) as u64)
    }
    fn ordinals_start(&self, _w: &WorkloadRef) -> u64 {
        0
    }
}

/// One adapter process: store, scraper, and the TLS API on its own port.
struct AdapterInstance {
    adapter: Arc<Adapter>,
    scraper: Scraper,
    server: JoinHandle<()>,
    port: u16,
    client: Arc<rustls::ClientConfig>,
}

impl Drop for AdapterInstance {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl AdapterInstance {
    async fn start(
        config: Config,
        clock: Arc<ManualClock>,
        workload: Option<Arc<SimWorkload>>,
    ) -> Result<AdapterInstance, SimulateError> {
        let metrics = Arc::new(SelfMetrics::new());
        let adapter = Arc::new(Adapter::new(config, clock.clone(), metrics.clone()));
        if let Some(w) = workload {
            adapter.set_workload_state(w);
        }
        let scraper = adapter.scraper(64);
        let cert =
            tls::ServingCert::self_signed(&[]).map_err(|e| SimulateError::Io(e.to_string()))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in cert.certificate_chain() {
            roots
                .add(c)
                .map_err(|e| SimulateError::Io(format!("trusting the serving cert: {e}")))?;
        }
        let client = rustls::ClientConfig::builder_with_provider(tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| SimulateError::Io(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server_config =
            Arc::new(tls::server_config(cert, None).map_err(|e| SimulateError::Io(e.to_string()))?);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| SimulateError::Io(format!("binding the API port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| SimulateError::Io(e.to_string()))?
            .port();
        let handler = Arc::new(ApiHandler::new(adapter.clone()));
        let server = tokio::spawn(server::serve_api(listener, server_config, handler, None));
        Ok(AdapterInstance {
            adapter,
            scraper,
            server,
            port,
            client: Arc::new(client),
        })
    }

    /// One GET as the HPA sends it (REFERENCE.md §1.2), turned into the model's input: the
    /// items' values, or the error text. An empty list is an error (REFERENCE.md §1.6).
    async fn fetch(&self, namespace: &str, metric: &str, selector: Option<&str>) -> MetricInput {
        let mut path = format!(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{}",
            // client-go lower-cases the metric name in the path (REFERENCE.md §1.2).
            metric.to_ascii_lowercase()
        );
        if let Some(sel) = selector {
            path.push_str("?labelSelector=");
            path.push_str(
                &percent_encoding::utf8_percent_encode(sel, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            );
        }
        let (code, body) = https_get(self.port, self.client.clone(), &path)
            .await
            .map_err(|e| format!("unable to fetch metrics from external metrics API: {e}"))?;
        let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
            format!("unable to decode the external metrics API answer ({code}): {e}")
        })?;
        if !(200..300).contains(&code) {
            let message = json["message"].as_str().unwrap_or("").to_string();
            return Err(format!("{code}: {message}"));
        }
        let items = json["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return Err("no metrics returned from external metrics API".into());
        }
        items
            .iter()
            .map(|item| {
                let text = item["value"].as_str().unwrap_or("");
                Quantity::parse(text)
                    .map(|q| q.milli_value() as f64 / 1000.0)
                    .map_err(|e| format!("unparsable item value {text:?}: {e}"))
            })
            .collect()
    }
}

async fn https_get(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    path: &str,
) -> Result<(u16, String), String> {
    let tcp = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header(http::header::HOST, format!("127.0.0.1:{port}"))
        .header(http::header::ACCEPT, "application/json")
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let code = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}

// ---------------------------------------------------------------------------------------------
// Ground truth
// ---------------------------------------------------------------------------------------------

/// What the current adapter instance could have learnt from one exporter, judged from the
/// scenario (which scrape rounds met a healthy exporter), not from the adapter's store.
#[derive(Clone, Debug, Default)]
struct Delivered {
    /// When a scrape last received the series, and the value it showed.
    last: Option<(Millis, SampleValue)>,
    /// A valid index was received at least once (pods: the floor is complete for this pod).
    ever_valid: bool,
    /// When a scrape last received the pod's load series (scenarios with `load:`).
    load_at: Option<Millis>,
}

struct ControllerRun {
    spec: ControllerSpec,
    exporter: Exporter,
    delivered: Delivered,
}

struct Pod {
    ordinal: u32,
    created_at: Millis,
    exporter: Exporter,
    /// Since when `ordinal + 1` has exceeded the recommendation (drain mode).
    above_since: Option<Millis>,
    /// The last valid index the pod really held (ground truth for the floor).
    truth_index: i64,
    delivered: Delivered,
}

impl Pod {
    fn name(&self, workload: &str) -> String {
        format!("{workload}-{}", self.ordinal)
    }

    fn ready(&self, w: &WorkloadSpec, t: Millis) -> bool {
        t >= self.created_at.saturating_add(ms(w.readiness_delay))
    }

    /// The index the pod exports at `t` (REFERENCE.md §4.1: `ordinal + 1` while Ready and
    /// holding state, else 0), or its override.
    fn index_at(&self, w: &WorkloadSpec, t: Millis) -> SampleValue {
        if let Some(o) = w.index_overrides.iter().find(|o| o.ordinal == self.ordinal) {
            return step_value(&o.values, t)
                .cloned()
                .unwrap_or(SampleValue::Number(0.0));
        }
        if !self.ready(w, t) {
            return SampleValue::Number(0.0);
        }
        let holding = match w.stateful {
            StatefulMode::None => false,
            StatefulMode::Ready => true,
            StatefulMode::Drain => self.above_since.is_none_or(|s| t - s < ms(w.drain_after)),
        };
        SampleValue::Number(if holding {
            f64::from(self.ordinal) + 1.0
        } else {
            0.0
        })
    }
}

fn index_page(workload: &str, pod: &str, value: &str) -> String {
    format!(
        "# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"{workload}\",service_instance_id=\"{pod}\"}} {value}\n"
    )
}

fn load_line(series: &str, workload: &str, pod: &str, value: f64) -> String {
    format!(
        "# TYPE {series} gauge\n{series}{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"{workload}\",service_instance_id=\"{pod}\"}} {value}\n"
    )
}

fn expect_page(workload: &str, instance: &str, value: &str) -> String {
    format!(
        "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"{workload}\",service_instance_id=\"{instance}\"}} {value}\n"
    )
}

/// Not exposition text: an unterminated label set on a wanted family, then HTML.
fn garbage_page(series: &str) -> String {
    format!("{series}{{hpa_target_name=\"lobby 7\n<html><body>502 Bad Gateway</body></html>\n\u{0}\u{1}\n")
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// One row of the table: one HPA sync.
#[derive(Clone, Debug)]
pub struct SyncRow {
    pub t: Millis,
    pub spec_replicas: i32,
    pub status_replicas: i32,
    pub ready_pods: i32,
    /// Max over live controllers' valid values (ground truth).
    pub truth_recommendation: Option<i64>,
    /// Highest index held by an existing pod (ground truth).
    pub truth_floor: i64,
    /// `max(recommendation, floor)` clamped to [min, max].
    pub truth_target: Option<i64>,
    /// Inputs needed for scale-in that the adapter could not know (ground truth), and refused
    /// answers.
    pub unknown: Vec<String>,
    /// Per HPA metric: the summed value or the error, as the HPA got it.
    pub answers: Vec<String>,
    pub proposal: Option<i32>,
    pub replicas: i32,
    pub decision: String,
    /// With `load:`: the total the pods last exported (ground truth).
    pub load: Option<f64>,
    /// With a threshold metric: `[ceil(V/upPerReplica), ceil(V/downPerReplica)]` of that total.
    pub band: Option<(i64, i64)>,
    /// The first metric's value as the HPA got it.
    pub served: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct Violation {
    pub invariant: &'static str,
    pub t: Millis,
    pub message: String,
}

#[derive(Clone, Debug)]
pub enum ConvergenceResult {
    Reached {
        lag: Millis,
    },
    /// Replicas stayed put because the target is inside the HPA's tolerance band.
    HeldWithinTolerance,
    /// Inputs went unhealthy or the target changed before the replicas got there.
    Interrupted {
        after: Millis,
    },
    /// Still on the way when the scenario ended, within its budget.
    Unfinished,
    /// The budget passed with healthy inputs and an unchanged target.
    Missed {
        budget: Millis,
    },
}

#[derive(Clone, Debug)]
pub struct Convergence {
    pub start: Millis,
    pub from: i32,
    pub target: i64,
    pub budget: Option<Millis>,
    pub result: ConvergenceResult,
}

#[derive(Clone, Debug)]
pub struct ExpectationResult {
    pub expectation: String,
    pub ok: bool,
    pub measured: String,
}

/// A fault period for the plot and the summary.
#[derive(Clone, Debug)]
pub struct FaultPeriod {
    pub from: Millis,
    pub to: Millis,
    pub label: String,
}

#[derive(Clone, Debug)]
pub struct Report {
    pub name: String,
    pub description: String,
    pub duration: Millis,
    pub metric_names: Vec<String>,
    pub initial_replicas: i32,
    pub rows: Vec<SyncRow>,
    pub violations: Vec<Violation>,
    pub convergences: Vec<Convergence>,
    pub expectations: Vec<ExpectationResult>,
    pub faults: Vec<FaultPeriod>,
    pub restarts: Vec<Millis>,
    pub scrape_rounds: u64,
    pub https_requests: u64,
    /// Lines about a threshold load scenario: reversals, overload lag, plateaus.
    pub threshold_notes: Vec<String>,
    /// Whether the threshold invariants were checked (a `load:` block with a threshold metric).
    pub threshold_checked: bool,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.expectations.iter().all(|e| e.ok)
    }
}

struct Runner {
    scenario: Scenario,
    config: Config,
    clock: Arc<ManualClock>,
    workload_state: Option<Arc<SimWorkload>>,
    instance: AdapterInstance,
    controllers: Vec<ControllerRun>,
    pods: BTreeMap<u32, Pod>,
    hpa: Hpa,
    spec_replicas: i32,
    stale_after: Millis,
    interval: Millis,
    /// (time, max live recommendation value, true floor) at every event, for the inflation bound.
    bound_history: Vec<(Millis, i64)>,
    report: Report,
    episode: Option<Convergence>,
    /// The (start, target) of the last finished episode, so it is not reopened.
    closed: Option<(Millis, i64)>,
    healthy_since: Option<Millis>,
    target_changed_at: Millis,
    last_target: Option<i64>,
    threshold: Option<ThresholdTruth>,
    /// (scrape time, exported load total).
    load_history: Vec<(Millis, f64)>,
    /// The last scale event: (time, up?).
    last_scale: Option<(Millis, bool)>,
}

/// Runs a scenario to its end.
pub async fn run(scenario: Scenario) -> Result<Report, SimulateError> {
    let config = scenario.adapter_config()?;
    let controller_config = scenario.kubernetes.controller_config()?;
    let hpa = Hpa::new(scenario.hpa.clone(), controller_config)
        .map_err(|e| invalid("hpa", e.to_string()))?;
    let clock = Arc::new(ManualClock::new(EPOCH_MS));
    let workload_state = scenario.workload.discovery.then(|| {
        Arc::new(SimWorkload {
            spec_replicas: AtomicI64::new(i64::from(scenario.workload.initial_replicas)),
        })
    });
    let instance =
        AdapterInstance::start(config.clone(), clock.clone(), workload_state.clone()).await?;
    let mut controllers = Vec::new();
    for c in &scenario.controllers {
        controllers.push(ControllerRun {
            spec: c.clone(),
            exporter: Exporter::start().await?,
            delivered: Delivered::default(),
        });
    }
    let stale_after = config.scrape.stale_after().as_millis() as Millis;
    let interval = config.scrape.interval.0.as_millis() as Millis;
    let mut faults: Vec<FaultPeriod> = scenario
        .faults
        .iter()
        .map(|f| FaultPeriod {
            from: ms(f.from),
            to: ms(f.to),
            label: format!(
                "{} {:?}{}",
                f.target,
                f.mode,
                f.flap
                    .map(|d| format!(" flapping every {}", fmt_t(ms(d))))
                    .unwrap_or_default()
            )
            .to_lowercase(),
        })
        .collect();
    faults.sort_by_key(|f| f.from);
    let report = Report {
        name: scenario.name.clone(),
        description: scenario.description.clone(),
        duration: ms(scenario.duration),
        metric_names: scenario
            .hpa
            .metrics
            .iter()
            .filter_map(|m| m.external.as_ref().map(|e| e.metric.name.clone()))
            .collect(),
        initial_replicas: scenario.workload.initial_replicas,
        rows: Vec::new(),
        violations: Vec::new(),
        convergences: Vec::new(),
        expectations: Vec::new(),
        faults,
        restarts: scenario.adapter_restarts.iter().map(|d| ms(*d)).collect(),
        scrape_rounds: 0,
        https_requests: 0,
        threshold_notes: Vec::new(),
        threshold_checked: false,
    };
    let threshold = scenario
        .load
        .as_ref()
        .and_then(|l| ThresholdTruth::from_config(&config, l));
    let mut runner = Runner {
        spec_replicas: scenario.workload.initial_replicas,
        scenario,
        config,
        clock,
        workload_state,
        instance,
        controllers,
        pods: BTreeMap::new(),
        hpa,
        stale_after,
        interval,
        bound_history: Vec::new(),
        report,
        episode: None,
        closed: None,
        healthy_since: None,
        target_changed_at: 0,
        last_target: None,
        threshold,
        load_history: Vec::new(),
        last_scale: None,
    };
    runner.report.threshold_checked = threshold.is_some();
    for ordinal in 0..runner.spec_replicas.max(0) as u32 {
        // Initial pods have been Ready for long.
        runner.add_pod(ordinal, Millis::MIN / 4).await?;
    }
    runner.sync_targets(0);
    runner.run_loop().await?;
    runner.finish();
    Ok(runner.report)
}

impl Runner {
    fn workload(&self) -> &WorkloadSpec {
        &self.scenario.workload
    }

    async fn add_pod(&mut self, ordinal: u32, created_at: Millis) -> Result<(), SimulateError> {
        let exporter = Exporter::start().await?;
        self.pods.insert(
            ordinal,
            Pod {
                ordinal,
                created_at,
                exporter,
                above_since: None,
                truth_index: 0,
                delivered: Delivered::default(),
            },
        );
        Ok(())
    }

    fn controller_live(c: &ControllerSpec, t: Millis) -> bool {
        c.from.is_none_or(|f| ms(f) <= t) && c.until.is_none_or(|u| t < ms(u))
    }

    /// The adapter's targets: live controllers and existing pods, as discovery would list them.
    fn sync_targets(&self, t: Millis) {
        let ns = &self.scenario.namespace;
        let w = self.workload();
        let mut targets = Vec::new();
        for c in &self.controllers {
            if Self::controller_live(&c.spec, t) {
                targets.push(ScrapeTarget {
                    id: TargetId(format!("{ns}/{}", c.spec.name).into()),
                    url: c.exporter.url.clone(),
                    labels: [
                        ("namespace".to_string(), ns.clone()),
                        ("pod".to_string(), c.spec.name.clone()),
                    ]
                    .into_iter()
                    .collect(),
                    workload: None,
                });
            }
        }
        for p in self.pods.values() {
            let name = p.name(&w.name);
            targets.push(ScrapeTarget {
                id: TargetId(format!("{ns}/{name}").into()),
                url: p.exporter.url.clone(),
                labels: [
                    ("namespace".to_string(), ns.clone()),
                    ("pod".to_string(), name),
                ]
                .into_iter()
                .collect(),
                workload: w.discovery.then(|| WorkloadRef {
                    kind: w.kind.clone(),
                    namespace: ns.clone(),
                    name: w.name.clone(),
                }),
            });
        }
        self.instance.adapter.scrape_store().set_targets(targets);
    }

    /// Controllers exporting at `t` (live and not dropping the series).
    fn exporting_controllers(&self, t: Millis) -> impl Iterator<Item = &ControllerRun> + '_ {
        self.controllers.iter().filter(move |c| {
            Self::controller_live(&c.spec, t)
                && self
                    .scenario
                    .fault_at(&c.spec.name, false, t)
                    .is_none_or(|f| f.mode != FaultMode::Absent)
        })
    }

    /// Ground truth: the max of every exporting controller's valid value (REFERENCE.md §4.1:
    /// duplicates are max-ed, never summed).
    fn truth_recommendation(&self, t: Millis) -> Option<i64> {
        self.exporting_controllers(t)
            .filter_map(|c| step_value(&c.spec.values, t).and_then(SampleValue::replicas))
            .max()
    }

    fn truth_floor(&self) -> i64 {
        self.pods.values().map(|p| p.truth_index).max().unwrap_or(0)
    }

    /// Moves the pods' drain clocks and true indices to `t`.
    fn advance_pods(&mut self, t: Millis) {
        let rec = self.truth_recommendation(t);
        let w = self.scenario.workload.clone();
        for p in self.pods.values_mut() {
            if let Some(rec) = rec {
                if i64::from(p.ordinal) + 1 > rec {
                    p.above_since.get_or_insert(t);
                } else {
                    p.above_since = None;
                }
            }
            if let Some(v) = p.index_at(&w, t).replicas() {
                p.truth_index = v;
            }
        }
        let target = self.truth_target(rec);
        if target != self.last_target {
            self.last_target = target;
            self.target_changed_at = t;
        }
        let bound = rec.unwrap_or(0).max(self.truth_floor());
        let any_value = self
            .exporting_controllers(t)
            .filter_map(|c| step_value(&c.spec.values, t).and_then(SampleValue::replicas))
            .chain(std::iter::once(bound))
            .max()
            .unwrap_or(0);
        self.bound_history.push((t, any_value));
    }

    fn page_for(&self, fault: Option<&FaultSpec>, series: &str, body: String) -> Page {
        match fault.map(|f| (f.mode, f.delay)) {
            None => Page::Ok(body),
            Some((FaultMode::Down, _)) => Page::Down,
            Some((FaultMode::Error, _)) => Page::Status(500),
            Some((FaultMode::Garbage, _)) => Page::Ok(garbage_page(series)),
            Some((FaultMode::Absent, _)) => Page::Ok("# nothing exported\n".into()),
            Some((FaultMode::Slow, delay)) => Page::Slow(
                body,
                delay
                    .map(|d| d.0)
                    .unwrap_or(self.config.scrape.timeout() * 5),
            ),
        }
    }

    /// Sets every exporter's page for `t`, scrapes once through the real scraper, and records
    /// what a healthy scrape could have delivered (ground truth).
    async fn scrape(&mut self, t: Millis) {
        let w = self.scenario.workload.clone();
        for i in 0..self.controllers.len() {
            let c = &self.controllers[i];
            let fault = self.scenario.fault_at(&c.spec.name, false, t).cloned();
            let value = step_value(&c.spec.values, t).cloned();
            let body = match &value {
                Some(v) => expect_page(&w.name, &c.spec.name, &v.exposition()),
                None => "# no value yet\n".into(),
            };
            let page = self.page_for(fault.as_ref(), "hpa_expect_replicas", body);
            c.exporter.set(page);
            if fault.is_none() && Self::controller_live(&c.spec, t) {
                if let Some(v) = value {
                    let d = &mut self.controllers[i].delivered;
                    d.ever_valid |= v.replicas().is_some();
                    d.last = Some((t, v));
                }
            }
        }
        let ordinals: Vec<u32> = self.pods.keys().copied().collect();
        // The load goes to the Ready pods, evenly; the others carry none (REFERENCE.md §4.2).
        let ready = self.pods.values().filter(|p| p.ready(&w, t)).count();
        let total = self.scenario.load.as_ref().map(|l| l.exported(t));
        if let Some(v) = total {
            self.load_history.push((t, v));
        }
        for o in ordinals {
            let p = &self.pods[&o];
            let name = p.name(&w.name);
            let fault = self.scenario.fault_at(&name, true, t).cloned();
            let value = p.index_at(&w, t);
            let mut body = index_page(&w.name, &name, &value.exposition());
            if let (Some(l), Some(v)) = (&self.scenario.load, total) {
                let share = if p.ready(&w, t) && ready > 0 {
                    v / ready as f64
                } else {
                    0.0
                };
                body.push_str(&load_line(&l.series, &w.name, &name, share));
            }
            let page = self.page_for(fault.as_ref(), "hpa_stateful_index", body);
            p.exporter.set(page);
            if fault.is_none() {
                if let Some(p) = self.pods.get_mut(&o) {
                    p.delivered.ever_valid |= value.replicas().is_some();
                    p.delivered.last = Some((t, value));
                    if total.is_some() {
                        p.delivered.load_at = Some(t);
                    }
                }
            }
        }
        self.instance.scraper.scrape_round().await;
        self.instance.adapter.mark_ready();
        self.report.scrape_rounds += 1;
    }

    /// The adapter process restarts: a new store (retained indices lost, every target
    /// unscraped), a new serving certificate and port. The HPA continues.
    async fn restart_adapter(&mut self, t: Millis) -> Result<(), SimulateError> {
        let instance = AdapterInstance::start(
            self.config.clone(),
            self.clock.clone(),
            self.workload_state.clone(),
        )
        .await?;
        self.instance = instance;
        for c in &mut self.controllers {
            c.delivered = Delivered::default();
        }
        for p in self.pods.values_mut() {
            p.delivered = Delivered::default();
        }
        self.sync_targets(t);
        Ok(())
    }

    /// Ground truth: the inputs needed for scale-in the adapter cannot know at `t`.
    fn unknown_inputs(&self, t: Millis) -> Vec<String> {
        let mut unknown = Vec::new();
        let mut exporting = 0;
        for c in self.exporting_controllers(t) {
            exporting += 1;
            let name = &c.spec.name;
            match &c.delivered.last {
                None => unknown.push(format!("{name} never scraped")),
                Some((at, _)) if t - at > self.stale_after => {
                    unknown.push(format!("{name} stale {}", fmt_t(t - at)))
                }
                Some((_, v)) if v.replicas().is_none() => {
                    unknown.push(format!("{name} invalid {}", v.exposition()))
                }
                Some(_) => {}
            }
        }
        // A load-driven scenario without controllers has no recommendation to miss.
        if exporting == 0 && !(self.scenario.load.is_some() && self.controllers.is_empty()) {
            unknown.push("recommendation missing".into());
        }
        if self.scenario.load.is_some() {
            let w = &self.scenario.workload.name;
            for p in self.pods.values() {
                match p.delivered.load_at {
                    None => unknown.push(format!("{} load never scraped", p.name(w))),
                    Some(at) if t - at > self.stale_after => {
                        unknown.push(format!("{} load stale {}", p.name(w), fmt_t(t - at)))
                    }
                    Some(_) => {}
                }
            }
        }
        let w = &self.scenario.workload.name;
        let incomplete: Vec<String> = self
            .pods
            .values()
            .filter(|p| !p.delivered.ever_valid)
            .map(|p| p.name(w))
            .collect();
        if !incomplete.is_empty() {
            unknown.push(format!("floor incomplete ({})", incomplete.join(",")));
        }
        unknown
    }

    fn truth_target(&self, rec: Option<i64>) -> Option<i64> {
        let spec = self.hpa.spec();
        rec.map(|r| {
            r.max(self.truth_floor())
                .clamp(i64::from(spec.min_replicas()), i64::from(spec.max_replicas))
        })
    }

    async fn sync(&mut self, t: Millis) -> Result<(), SimulateError> {
        let ns = self.scenario.namespace.clone();
        let mut inputs = Vec::new();
        let mut answers = Vec::new();
        for m in &self.scenario.hpa.metrics {
            let Some(ext) = &m.external else {
                inputs.push(Err("only External metrics are simulated".into()));
                answers.push("not simulated".into());
                continue;
            };
            let selector = match ext.metric.selector.as_ref().map(|s| s.to_query()) {
                None => None,
                Some(Ok(text)) => text,
                // The API server would have rejected the HPA; the metric cannot be fetched.
                Some(Err(e)) => {
                    inputs.push(Err(e.to_string()));
                    answers.push(format!("invalid selector: {e}"));
                    continue;
                }
            };
            let got = self
                .instance
                .fetch(&ns, &ext.metric.name, selector.as_deref())
                .await;
            self.report.https_requests += 1;
            answers.push(match &got {
                Ok(items) => {
                    let sum: f64 = items.iter().sum();
                    if items.len() == 1 {
                        format!("{sum}")
                    } else {
                        format!("{sum} ({} items)", items.len())
                    }
                }
                Err(e) => short_error(e),
            });
            inputs.push(got);
        }
        let pods = self.pods.len() as i32;
        let ready = self
            .pods
            .values()
            .filter(|p| p.ready(&self.scenario.workload, t))
            .count() as i32;
        let input = SyncInput {
            spec_replicas: self.spec_replicas,
            status_replicas: pods,
            ready_pods: ready,
            pods,
            metrics: inputs,
        };
        let outcome = self.hpa.sync(Duration::from_millis(t as u64), &input);

        let mut unknown = self.unknown_inputs(t);
        // With a load scenario every input is ground truth, so a refusal while all of them are
        // known is the adapter's fault (REFERENCE.md §1.6: a refusal freezes scale-in).
        if self.scenario.load.is_some() && unknown.is_empty() {
            for (i, a) in input.metrics.iter().enumerate() {
                if let Err(e) = a {
                    let name = self.report.metric_names.get(i).cloned().unwrap_or_default();
                    self.violation(
                        "refusal",
                        t,
                        format!("{name} refused while every pod's load was fresh: {e}"),
                    );
                }
            }
        }
        for (i, a) in input.metrics.iter().enumerate() {
            if a.is_err() {
                let name = self.report.metric_names.get(i).cloned().unwrap_or_default();
                unknown.push(format!("{name} refused"));
            }
        }
        let rec = self.truth_recommendation(t);
        let floor = self.truth_floor();
        let target = self.truth_target(rec);
        self.check_invariants(t, &outcome, &unknown, floor);
        self.check_flap(t, &outcome);
        self.track_convergence(t, &outcome, unknown.is_empty(), target);
        let load = self.load_history.last().map(|(_, v)| *v);
        let band = self
            .threshold
            .zip(load)
            .map(|(th, v)| (ceil_div(v, th.up), ceil_div(v, th.down)));
        let served = input
            .metrics
            .first()
            .and_then(|m| m.as_ref().ok())
            .map(|items| items.iter().sum());

        self.report.rows.push(SyncRow {
            t,
            spec_replicas: self.spec_replicas,
            status_replicas: pods,
            ready_pods: ready,
            truth_recommendation: rec,
            truth_floor: floor,
            truth_target: target,
            unknown,
            answers,
            proposal: outcome.metric_replicas,
            replicas: outcome.replicas,
            decision: decision_text(&outcome.decision),
            load,
            band,
            served,
        });
        if outcome.replicas != self.spec_replicas {
            self.scale_to(outcome.replicas, t).await?;
        }
        Ok(())
    }

    /// StatefulSet semantics: pods 0..N-1 exist; scale-in removes the highest ordinals.
    async fn scale_to(&mut self, replicas: i32, t: Millis) -> Result<(), SimulateError> {
        let n = replicas.max(0) as u32;
        self.pods.retain(|o, _| *o < n);
        for o in 0..n {
            if !self.pods.contains_key(&o) {
                self.add_pod(o, t).await?;
            }
        }
        self.spec_replicas = replicas;
        if let Some(w) = &self.workload_state {
            w.spec_replicas.store(i64::from(replicas), Ordering::SeqCst);
        }
        self.sync_targets(t);
        Ok(())
    }

    fn violation(&mut self, invariant: &'static str, t: Millis, message: String) {
        self.report.violations.push(Violation {
            invariant,
            t,
            message,
        });
    }

    fn check_invariants(&mut self, t: Millis, o: &SyncOutcome, unknown: &[String], floor: i64) {
        let w = self.scenario.workload.name.clone();
        // 1. Never below the floor the pods really hold (REFERENCE.md §4.1).
        if i64::from(o.replicas) < floor && o.replicas < o.current_replicas {
            let holders: Vec<String> = self
                .pods
                .values()
                .filter(|p| p.truth_index > i64::from(o.replicas))
                .map(|p| format!("{} holds index {}", p.name(&w), p.truth_index))
                .collect();
            self.violation(
                "below-floor",
                t,
                format!(
                    "replicas {} -> {} but {} (true floor {floor})",
                    o.current_replicas,
                    o.replicas,
                    holders.join(", ")
                ),
            );
        }
        // 2. Never shrink on unknown input (REFERENCE.md §1.6).
        if o.replicas < o.current_replicas && !unknown.is_empty() {
            self.violation(
                "decrease-on-unknown",
                t,
                format!(
                    "replicas {} -> {} while {}",
                    o.current_replicas,
                    o.replicas,
                    unknown.join("; ")
                ),
            );
        }
        // 3. Duplicates are max-ed, never summed (REFERENCE.md §1.2, §4.1): a scale-up never
        // goes above the largest value any controller really exported lately, or the floor.
        if o.replicas > o.current_replicas {
            let lookback = self.stale_after + self.interval + SYNC_PERIOD.as_millis() as Millis;
            let recent = self
                .bound_history
                .iter()
                .filter(|(at, _)| *at >= t - lookback)
                .map(|(_, v)| *v)
                .max()
                .unwrap_or(0);
            // A threshold metric raises to a sustained `ceil(V/upPerReplica)` of the totals the
            // pods exported within its up window (plus the same staleness lookback), clamped by
            // its `min`/`max`: never more.
            let threshold_bound = self.threshold.map(|th| {
                let since = t - lookback - th.sustain_up_ms;
                self.load_history
                    .iter()
                    .filter(|(at, _)| *at >= since)
                    .map(|(_, v)| ceil_div(*v, th.up))
                    .max()
                    .unwrap_or(0)
                    .clamp(th.min, th.max.max(th.min))
            });
            let recent = recent.max(threshold_bound.unwrap_or(0));
            let bound = recent.max(i64::from(self.hpa.spec().min_replicas()));
            if i64::from(o.replicas) > bound {
                self.violation(
                    "inflation",
                    t,
                    format!(
                        "replicas {} -> {} but no controller exported more than {recent} (nor does any load total need more) and the floor is {floor} (within the last {})",
                        o.current_replicas,
                        o.replicas,
                        fmt_t(lookback)
                    ),
                );
            }
        }
    }

    /// Threshold scenarios: a scale event in the opposite direction of the previous one must
    /// come at least one sustain window (the longer one) later, or the hysteresis flapped.
    fn check_flap(&mut self, t: Millis, o: &SyncOutcome) {
        let Some(th) = self.threshold else {
            return;
        };
        if o.replicas == o.current_replicas {
            return;
        }
        let up = o.replicas > o.current_replicas;
        let window = th.sustain_up_ms.max(th.sustain_down_ms);
        if let Some((at, was_up)) = self.last_scale {
            if was_up != up && t - at < window {
                self.violation(
                    "flap",
                    t,
                    format!(
                        "replicas {} -> {} only {} after a scale {} (sustain window {})",
                        o.current_replicas,
                        o.replicas,
                        fmt_t(t - at),
                        if was_up { "up" } else { "down" },
                        fmt_t(window)
                    ),
                );
            }
        }
        self.last_scale = Some((t, up));
    }

    /// How long the HPA may take from `from` to `to` with healthy inputs: the adapter's
    /// staleness and scrape interval, two syncs, the direction's stabilisation window and the
    /// rate policies' steps (REFERENCE.md §1.7). `None` when the direction is disabled.
    fn convergence_budget(&self, from: i32, to: i64) -> Option<Millis> {
        let to = to as i32;
        let up = to > from;
        let config = self.hpa.config();
        let base = self.stale_after + self.interval + 2 * SYNC_PERIOD.as_millis() as Millis;
        let sync = SYNC_PERIOD.as_millis() as Millis;
        let (window, rate) = match &self.hpa.spec().behavior {
            None => {
                if up {
                    // Legacy: at most max(2 × current, 4) per sync (REFERENCE.md §1.7.3).
                    let mut cur = from.max(1);
                    let mut steps = 0;
                    while cur < to && steps < 1000 {
                        cur = (cur * 2).max(4);
                        steps += 1;
                    }
                    (0, steps * sync)
                } else {
                    (config.downscale_stabilization.as_millis() as Millis, sync)
                }
            }
            Some(b) => {
                let rules = if up {
                    b.resolved_scale_up()
                } else {
                    b.resolved_scale_down(config.downscale_stabilization)
                };
                if rules.select_policy == SelectPolicy::Disabled {
                    return None;
                }
                (
                    rules.stabilization_window.as_millis() as Millis,
                    rate_time(&rules, from, to),
                )
            }
        };
        Some(base + window + rate)
    }

    /// Invariant 4: with healthy inputs the replicas reach the true target within the budget.
    /// The lag runs from the later of "the target last changed" and "inputs became healthy".
    fn track_convergence(
        &mut self,
        t: Millis,
        o: &SyncOutcome,
        healthy: bool,
        target: Option<i64>,
    ) {
        let target = match (healthy, target) {
            (true, Some(target)) => target,
            _ => {
                self.healthy_since = None;
                if let Some(mut e) = self.episode.take() {
                    e.result = ConvergenceResult::Interrupted { after: t - e.start };
                    self.report.convergences.push(e);
                }
                return;
            }
        };
        let healthy_since = *self.healthy_since.get_or_insert(t);
        let start = self.target_changed_at.max(healthy_since);
        if let Some(mut e) = self.episode.take() {
            if e.start == start && e.target == target {
                self.episode = Some(e);
            } else {
                e.result = ConvergenceResult::Interrupted { after: t - e.start };
                self.report.convergences.push(e);
            }
        }
        if self.episode.is_none() {
            if i64::from(o.current_replicas) == target || self.closed == Some((start, target)) {
                return;
            }
            self.episode = Some(Convergence {
                start,
                from: o.current_replicas,
                target,
                budget: self.convergence_budget(o.current_replicas, target),
                result: ConvergenceResult::Unfinished,
            });
        }
        let Some(mut e) = self.episode.take() else {
            return;
        };
        let replicas = o.replicas;
        let within = replicas > 0
            && self
                .hpa
                .tolerances()
                .is_within(target as f64 / f64::from(replicas));
        if i64::from(replicas) == target {
            e.result = ConvergenceResult::Reached { lag: t - e.start };
        } else if within {
            e.result = ConvergenceResult::HeldWithinTolerance;
        } else if let Some(budget) = e.budget.filter(|b| t - e.start > *b) {
            self.violation(
                "convergence",
                t,
                format!(
                    "inputs healthy and target {target} unchanged since {}, but replicas are {replicas} after {} (budget {})",
                    fmt_t(e.start),
                    fmt_t(t - e.start),
                    fmt_t(budget)
                ),
            );
            e.result = ConvergenceResult::Missed { budget };
        } else {
            self.episode = Some(e);
            return;
        }
        self.closed = Some((start, target));
        self.report.convergences.push(e);
    }

    async fn run_loop(&mut self) -> Result<(), SimulateError> {
        let end = ms(self.scenario.duration);
        let sync = SYNC_PERIOD.as_millis() as Millis;
        let mut next_scrape: Millis = 0;
        let mut next_sync: Millis = sync;
        let mut restarts: Vec<Millis> = self.report.restarts.clone();
        restarts.sort();
        restarts.reverse();
        let mut live: Vec<bool> = self
            .controllers
            .iter()
            .map(|c| Self::controller_live(&c.spec, 0))
            .collect();
        loop {
            let next_restart = restarts.last().copied().unwrap_or(Millis::MAX);
            let t = next_scrape.min(next_sync).min(next_restart);
            if t > end {
                break;
            }
            self.clock.set(EPOCH_MS + t);
            self.advance_pods(t);
            let now_live: Vec<bool> = self
                .controllers
                .iter()
                .map(|c| Self::controller_live(&c.spec, t))
                .collect();
            if now_live != live {
                live = now_live;
                self.sync_targets(t);
            }
            if t == next_restart {
                restarts.pop();
                self.restart_adapter(t).await?;
                // `serve` scrapes once at startup, before the first tick.
                self.scrape(t).await;
                if next_scrape == t {
                    next_scrape += self.interval;
                }
                continue;
            }
            if t == next_scrape {
                self.scrape(t).await;
                next_scrape += self.interval;
            }
            if t == next_sync {
                self.sync(t).await?;
                next_sync += sync;
            }
        }
        Ok(())
    }

    /// How far behind the clean load the replicas are at the sync of `row`: 0 when they cover
    /// `ceil(V(t)/upPerReplica)` (within the HPA's and the threshold's bounds), else how long
    /// ago the clean load last needed no more than the replicas there are.
    fn overload_lag(
        &self,
        th: &ThresholdTruth,
        load: &LoadSpec,
        t: Millis,
        replicas: i32,
    ) -> Millis {
        let cap = th
            .max
            .min(i64::from(self.hpa.spec().max_replicas))
            .max(th.min);
        let need = |s: Millis| ceil_div(load.clean(s), th.up).clamp(th.min, cap);
        let n = i64::from(replicas);
        let mut s = t;
        while s > 0 && need(s) > n {
            s -= 1000;
        }
        t - s.max(0)
    }

    /// Threshold scenarios: reversals, the overload lag, and the plateau invariant: once settled,
    /// nothing moves until the plateau ends. Settled is the earlier of (a) replicas where no
    /// noisy sample can move the threshold answer past the HPA's tolerance, and (b) replicas
    /// inside the clean band `[ceil(V/T_up)` within tolerance, `ceil(V/T_down)]` once the settle
    /// budget after the plateau began (both sustain windows, staleness, a scrape and two syncs)
    /// has passed, when every sustain decision looks at plateau data only.
    fn threshold_analysis(&mut self) {
        let (Some(th), Some(load)) = (self.threshold, self.scenario.load.clone()) else {
            return;
        };
        let rows = self.report.rows.clone();
        let mut notes = Vec::new();
        let (reversals, events) = reversals(&rows);
        notes.push(format!(
            "threshold: {events} scale events, {reversals} reversal(s) of direction"
        ));
        let lag = rows
            .iter()
            .map(|r| (r.t, self.overload_lag(&th, &load, r.t, r.replicas)))
            .max_by_key(|(_, l)| *l);
        if let Some((at, lag)) = lag {
            notes.push(format!(
                "threshold: max overload lag {} (at {}): replicas cover the clean load of that long ago at upPerReplica {}",
                fmt_t(lag),
                fmt_t(at),
                th.up
            ));
        }
        let tolerances = self.hpa.tolerances();
        let settle_budget = th.sustain_up_ms.max(th.sustain_down_ms)
            + self.stale_after
            + self.interval
            + 2 * SYNC_PERIOD.as_millis() as Millis;
        for (from, to, v) in load.plateaus() {
            let hi_up = ceil_div(v * (1.0 + load.noise), th.up);
            let lo_down = ceil_div(v * (1.0 - load.noise), th.down);
            let (clean_up, clean_down) = (ceil_div(v, th.up), ceil_div(v, th.down));
            let in_span: Vec<&SyncRow> = rows.iter().filter(|r| r.t >= from && r.t <= to).collect();
            let settled = in_span.iter().position(|r| {
                let n = i64::from(r.replicas);
                let safe = n > 0
                    && (hi_up <= n || tolerances.is_within(hi_up as f64 / n as f64))
                    && n <= lo_down;
                let in_clean_band = n > 0
                    && (clean_up <= n || tolerances.is_within(clean_up as f64 / n as f64))
                    && n <= clean_down;
                safe || (in_clean_band && r.t >= from + settle_budget)
            });
            match settled {
                Some(i) => {
                    let at = in_span[i];
                    let moved: Vec<(Millis, i32, i32)> = in_span[i + 1..]
                        .iter()
                        .filter(|r| r.replicas != r.spec_replicas)
                        .map(|r| (r.t, r.spec_replicas, r.replicas))
                        .collect();
                    notes.push(format!(
                        "threshold: plateau {}..{} at {v} (noise ±{}%, served range [{hi_up} up, {lo_down} down]): settled at {} with {} replicas, {} scale event(s) after",
                        fmt_t(from),
                        fmt_t(to),
                        load.noise * 100.0,
                        fmt_t(at.t),
                        at.replicas,
                        moved.len()
                    ));
                    for (t, a, b) in moved {
                        self.violation(
                            "plateau",
                            t,
                            format!(
                                "replicas {a} -> {b} on the plateau {}..{} after settling at {}",
                                fmt_t(from),
                                fmt_t(to),
                                fmt_t(at.t)
                            ),
                        );
                    }
                }
                None => notes.push(format!(
                    "threshold: plateau {}..{} too short to settle (budget {})",
                    fmt_t(from),
                    fmt_t(to),
                    fmt_t(settle_budget)
                )),
            }
        }
        self.report.threshold_notes = notes;
    }

    fn finish(&mut self) {
        if let Some(e) = self.episode.take() {
            self.report.convergences.push(e);
        }
        self.threshold_analysis();
        let rows = &self.report.rows;
        let replicas_in = |from: Millis, to: Millis| {
            rows.iter()
                .filter(move |r| r.t >= from && r.t <= to)
                .map(|r| r.replicas)
        };
        let mut results = Vec::new();
        for e in &self.scenario.expect {
            let (ok, measured) = match e {
                Expectation::FinalReplicas(n) => {
                    let last = rows.last().map(|r| r.replicas);
                    (last == Some(*n), format!("final {}", opt(last)))
                }
                Expectation::NeverBelow(n) => {
                    let min = replicas_in(0, Millis::MAX).min();
                    (min.is_some_and(|m| m >= *n), format!("min {}", opt(min)))
                }
                Expectation::NeverAbove(n) => {
                    let max = replicas_in(0, Millis::MAX).max();
                    (max.is_some_and(|m| m <= *n), format!("max {}", opt(max)))
                }
                Expectation::Replicas(w) => {
                    let from = w.from.map(ms).unwrap_or(0);
                    let to = w.to.map(ms).unwrap_or(Millis::MAX);
                    let min = replicas_in(from, to).min();
                    let max = replicas_in(from, to).max();
                    let ok = min.is_some()
                        && w.min.is_none_or(|m| min.is_some_and(|v| v >= m))
                        && w.max.is_none_or(|m| max.is_some_and(|v| v <= m));
                    (ok, format!("min {} max {}", opt(min), opt(max)))
                }
                Expectation::Reaches(r) => {
                    let first = rows.iter().find(|row| row.replicas == r.replicas);
                    match first {
                        Some(row) => (row.t <= ms(r.by), format!("first at {}", fmt_t(row.t))),
                        None => (false, "never".into()),
                    }
                }
                Expectation::MaxConvergenceLag(d) => {
                    let lags: Vec<Millis> = self
                        .report
                        .convergences
                        .iter()
                        .filter_map(|c| match c.result {
                            ConvergenceResult::Reached { lag } => Some(lag),
                            _ => None,
                        })
                        .collect();
                    let max = lags.iter().max().copied();
                    (
                        !lags.is_empty() && max.is_some_and(|m| m <= ms(*d)),
                        format!(
                            "{} convergences, max lag {}",
                            lags.len(),
                            max.map(fmt_t).unwrap_or_else(|| "-".into())
                        ),
                    )
                }
                Expectation::MaxReversals(n) => {
                    let (r, events) = reversals(rows);
                    (r <= *n, format!("{r} reversal(s) in {events} scale events"))
                }
                Expectation::NoDecrease(w) => {
                    let from = w.from.map(ms).unwrap_or(0);
                    let to = w.to.map(ms).unwrap_or(Millis::MAX);
                    let falls: Vec<String> = rows
                        .iter()
                        .filter(|r| r.t >= from && r.t <= to && r.replicas < r.spec_replicas)
                        .map(|r| format!("{} -> {} at {}", r.spec_replicas, r.replicas, fmt_t(r.t)))
                        .collect();
                    let n = rows.iter().filter(|r| r.t >= from && r.t <= to).count();
                    (
                        n > 0 && falls.is_empty(),
                        if falls.is_empty() {
                            format!("{n} syncs, none lower")
                        } else {
                            falls.join(", ")
                        },
                    )
                }
                Expectation::MaxOverloadLag(d) => {
                    match (self.threshold, self.scenario.load.as_ref()) {
                        (Some(th), Some(load)) => {
                            let max = rows
                                .iter()
                                .map(|r| self.overload_lag(&th, load, r.t, r.replicas))
                                .max()
                                .unwrap_or(0);
                            (
                                !rows.is_empty() && max <= ms(*d),
                                format!("max {}", fmt_t(max)),
                            )
                        }
                        _ => (false, "no load with a threshold metric".into()),
                    }
                }
            };
            results.push(ExpectationResult {
                expectation: e.to_string(),
                ok,
                measured,
            });
        }
        self.report.expectations = results;
    }
}

/// (direction reversals, scale events) over the syncs.
fn reversals(rows: &[SyncRow]) -> (u32, u32) {
    let mut last: Option<bool> = None;
    let (mut reversals, mut events) = (0, 0);
    for r in rows.iter().filter(|r| r.replicas != r.spec_replicas) {
        let up = r.replicas > r.spec_replicas;
        events += 1;
        if last.is_some_and(|l| l != up) {
            reversals += 1;
        }
        last = Some(up);
    }
    (reversals, events)
}

fn opt(v: Option<i32>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// Time the rate policies need to move from `from` to `to`, one period at a time
/// (REFERENCE.md §1.7.4: Pods ± value, Percent ceil/trunc, Max or Min among policies).
fn rate_time(rules: &ResolvedRules, from: i32, to: i32) -> Millis {
    let up = to > from;
    let period = rules
        .policies
        .iter()
        .map(|p| Millis::from(p.period_seconds.max(1)) * 1000)
        .max()
        .unwrap_or(15_000);
    let mut cur = from;
    let mut periods = 0;
    while cur != to && periods < 10_000 {
        let steps = rules.policies.iter().map(|p| {
            let v = f64::from(p.value);
            let c = f64::from(cur.max(1));
            match (p.policy_type, up) {
                (PolicyType::Pods, _) => p.value,
                (PolicyType::Percent, true) => (c * (1.0 + v / 100.0)).ceil() as i32 - cur,
                (PolicyType::Percent, false) => cur - (c * (1.0 - v / 100.0)).trunc() as i32,
            }
        });
        let step = match rules.select_policy {
            SelectPolicy::Min => steps.min(),
            _ => steps.max(),
        }
        .unwrap_or(1)
        .max(1);
        cur = if up {
            (cur + step).min(to)
        } else {
            (cur - step).max(to)
        };
        periods += 1;
    }
    periods * period
}

fn decision_text(d: &Decision) -> String {
    match d {
        Decision::ScalingDisabled => "ScalingDisabled".into(),
        Decision::AboveMaxReplicas => "AboveMaxReplicas".into(),
        Decision::BelowMinReplicas => "BelowMinReplicas".into(),
        Decision::AllMetricsInvalid { invalid } => format!("AllMetricsInvalid({invalid})"),
        Decision::ScaleDownBlockedByInvalidMetric { invalid, proposed } => {
            format!("ScaleDownBlocked(invalid={invalid},proposed={proposed})")
        }
        Decision::Normalized {
            invalid,
            stabilization,
            limit,
        } => {
            let mut s = format!("{stabilization:?}/{}", limit.reason());
            if *invalid > 0 {
                let _ = write!(s, " invalid={invalid}");
            }
            s
        }
    }
}

/// `503 is stale` from `503: hpa_target_replicas is stale: ...`.
fn short_error(e: &str) -> String {
    if let Some((code, rest)) = e.split_once(": ") {
        if code.len() == 3 && code.chars().all(|c| c.is_ascii_digit()) {
            let head = rest.split(':').next().unwrap_or(rest);
            let verb = head.split_once(' ').map(|(_, v)| v).unwrap_or(head);
            return format!("{code} {verb}");
        }
    }
    let mut s: String = e.chars().take(40).collect();
    if e.chars().count() > 40 {
        s.push('…');
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

impl Report {
    /// The per-sync table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let answer_width = self
            .rows
            .iter()
            .map(|r| r.answers.join(" | ").chars().count())
            .max()
            .unwrap_or(10)
            .max(self.metric_names.join(" | ").len());
        let _ = writeln!(
            out,
            "{:>7} {:>4} {:>5} | {:>4} {:>5} {:>6} | {:<aw$} | {:>8} | {:>9} | {:<34} | unknown inputs",
            "time",
            "spec",
            "ready",
            "rec",
            "floor",
            "target",
            self.metric_names.join(" | "),
            "proposal",
            "replicas",
            "decision",
            aw = answer_width
        );
        for r in &self.rows {
            let arrow = if r.replicas != r.spec_replicas {
                format!("{:>3} -> {:<2}", r.spec_replicas, r.replicas)
            } else {
                format!("{:>3}      ", r.replicas)
            };
            let _ = writeln!(
                out,
                "{:>7} {:>4} {:>5} | {:>4} {:>5} {:>6} | {:<aw$} | {:>8} | {:>9} | {:<34} | {}",
                fmt_t(r.t),
                r.spec_replicas,
                r.ready_pods,
                r.truth_recommendation
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "-".into()),
                r.truth_floor,
                r.truth_target
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "-".into()),
                r.answers.join(" | "),
                opt(r.proposal),
                arrow,
                r.decision,
                if r.unknown.is_empty() {
                    "-".to_string()
                } else {
                    r.unknown.join("; ")
                },
                aw = answer_width
            );
        }
        out
    }

    /// The outcome lines: summary, convergence, invariants, expectations, result.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let min = self.rows.iter().map(|r| r.replicas).min();
        let max = self.rows.iter().map(|r| r.replicas).max();
        let _ = writeln!(
            out,
            "scenario {}: {} syncs over {}, {} scrape rounds, {} HTTPS requests to the adapter",
            self.name,
            self.rows.len(),
            fmt_t(self.duration),
            self.scrape_rounds,
            self.https_requests
        );
        let _ = writeln!(
            out,
            "replicas: initial {} min {} max {} final {}",
            self.initial_replicas,
            opt(min),
            opt(max),
            opt(self.rows.last().map(|r| r.replicas))
        );
        for f in &self.faults {
            let _ = writeln!(out, "fault {}..{}: {}", fmt_t(f.from), fmt_t(f.to), f.label);
        }
        for r in &self.restarts {
            let _ = writeln!(out, "adapter restart at {}", fmt_t(*r));
        }
        for c in &self.convergences {
            if matches!(c.result, ConvergenceResult::Interrupted { .. }) {
                continue;
            }
            let what = match &c.result {
                ConvergenceResult::Reached { lag } => format!("reached, lag {}", fmt_t(*lag)),
                ConvergenceResult::HeldWithinTolerance => "held within tolerance".into(),
                ConvergenceResult::Interrupted { after } => {
                    format!("interrupted after {}", fmt_t(*after))
                }
                ConvergenceResult::Unfinished => "unfinished at end".into(),
                ConvergenceResult::Missed { budget } => format!("MISSED budget {}", fmt_t(*budget)),
            };
            let _ = writeln!(
                out,
                "convergence from {} at {} to target {}: {}{}",
                c.from,
                fmt_t(c.start),
                c.target,
                what,
                c.budget
                    .map(|b| format!(" (budget {})", fmt_t(b)))
                    .unwrap_or_default()
            );
        }
        for n in &self.threshold_notes {
            let _ = writeln!(out, "{n}");
        }
        let mut invariants = vec![
            "below-floor",
            "decrease-on-unknown",
            "inflation",
            "convergence",
        ];
        if self.threshold_checked {
            invariants.extend(["flap", "plateau", "refusal"]);
        }
        for inv in invariants {
            let n = self
                .violations
                .iter()
                .filter(|v| v.invariant == inv)
                .count();
            let _ = writeln!(
                out,
                "invariant {inv}: {}",
                if n == 0 {
                    "ok".to_string()
                } else {
                    format!("VIOLATED {n} time(s)")
                }
            );
        }
        for v in &self.violations {
            let _ = writeln!(
                out,
                "VIOLATION {} at {}: {}",
                v.invariant,
                fmt_t(v.t),
                v.message
            );
        }
        for e in &self.expectations {
            let _ = writeln!(
                out,
                "expect {}: {} ({})",
                e.expectation,
                if e.ok { "ok" } else { "FAILED" },
                e.measured
            );
        }
        let _ = writeln!(
            out,
            "RESULT: {}",
            if self.passed() { "PASS" } else { "FAIL" }
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_times() {
        assert_eq!(fmt_t(0), "0s");
        assert_eq!(fmt_t(45_000), "45s");
        assert_eq!(fmt_t(750_000), "12m30s");
        assert_eq!(fmt_t(600_000), "10m");
        assert_eq!(fmt_t(200), "0.200s");
    }

    #[test]
    fn sample_values_render_and_validate_independently_of_the_store() {
        assert_eq!(SampleValue::Number(8.0).exposition(), "8");
        assert_eq!(SampleValue::Number(f64::NAN).exposition(), "NaN");
        assert_eq!(SampleValue::Number(1e300).exposition(), "1e300");
        assert_eq!(SampleValue::Number(8.0).replicas(), Some(8));
        assert_eq!(SampleValue::Number(-1.0).replicas(), None);
        assert_eq!(SampleValue::Number(2.5).replicas(), None);
        assert_eq!(SampleValue::Text("NaN".into()).replicas(), None);
        assert_eq!(SampleValue::Text("7".into()).replicas(), Some(7));
    }

    #[test]
    fn flapping_faults_alternate() {
        let f = FaultSpec {
            target: "all".into(),
            from: HumanDuration(Duration::from_secs(60)),
            to: HumanDuration(Duration::from_secs(180)),
            mode: FaultMode::Down,
            flap: Some(HumanDuration(Duration::from_secs(20))),
            delay: None,
        };
        assert!(!f.active_at(59_999));
        assert!(f.active_at(60_000));
        assert!(f.active_at(79_999));
        assert!(!f.active_at(80_000));
        assert!(f.active_at(100_000));
        assert!(!f.active_at(180_000));
    }

    #[test]
    fn rate_time_counts_policy_periods() {
        let rules = ResolvedRules {
            stabilization_window: Duration::ZERO,
            select_policy: SelectPolicy::Max,
            policies: vec![super::super::model::ScalingPolicy {
                policy_type: PolicyType::Pods,
                value: 1,
                period_seconds: 60,
            }],
            tolerance: None,
        };
        assert_eq!(rate_time(&rules, 3, 6), 180_000);
        assert_eq!(rate_time(&rules, 6, 4), 120_000);
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Scenario::from_yaml(
            "name: x\nduration: 1m\nworkload: {name: lobby, initialReplicas: 2}\nhpa: {maxReplicas: 4}\nbogus: 1\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn short_errors() {
        assert_eq!(
            short_error("503: hpa_target_replicas is stale: the newest is 40s old"),
            "503 is stale"
        );
    }
}
