//! The scenario file: its schema, defaults and validation, and the time helpers the whole
//! simulator uses.

use super::*;

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
    pub adapter: yaml_serde::Value,
    /// The HPA's `spec` (autoscaling/v2 field names); `scaleTargetRef` is ignored.
    pub hpa: HpaSpec,
    /// Exporters of `hpa_expect_replicas`, one per controller instance (docs/hpa-behaviour.md §4.1).
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
    /// Draws what a cluster leaves to chance: the order a ReplicaSet lists pods that its ranking
    /// does not tell apart, and the pods' UIDs (docs/hpa-behaviour.md §9.1).
    #[serde(default)]
    pub seed: u64,
}

pub(super) fn default_namespace() -> String {
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
    /// Feature gates set on kube-apiserver and kube-controller-manager; unset gates keep the
    /// version's default.
    #[serde(default)]
    pub feature_gates: FeatureGates,
}

/// The feature gates the model reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureGates {
    /// On by default from 1.37; switched on in 1.36 it runs the `ScaledToZero` condition
    /// implementation, before 1.36 the `minReplicas` rule (docs/hpa-behaviour.md §7.1).
    #[serde(rename = "HPAScaleToZero", default)]
    pub hpa_scale_to_zero: Option<bool>,
}

pub(super) fn default_kube_version() -> String {
    "1.35".into()
}

impl Default for KubernetesStyle {
    fn default() -> Self {
        KubernetesStyle {
            version: default_kube_version(),
            tolerance: None,
            downscale_stabilization: None,
            feature_gates: FeatureGates::default(),
        }
    }
}

impl KubernetesStyle {
    /// The minor version of `1.<minor>`.
    pub fn minor(&self) -> Result<u32, SimulateError> {
        self.version
            .strip_prefix("1.")
            .and_then(|m| m.parse::<u32>().ok())
            .ok_or_else(|| {
                invalid(
                    "kubernetes.version",
                    format!("{:?} is not of the form 1.<minor>", self.version),
                )
            })
    }

    pub fn controller_config(&self) -> Result<ControllerConfig, SimulateError> {
        let minor = self.minor()?;
        let mut config = ControllerConfig::for_kube_minor(minor);
        config.scale_to_zero =
            ScaleToZero::for_kube_minor_with_gate(minor, self.feature_gates.hpa_scale_to_zero);
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
    /// `drainAfter` and has handed its state over; then 0 (docs/hpa-behaviour.md §4.1).
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
    /// `StatefulSet` (ordinals 0..N-1, highest removed first) or `Deployment` (pods numbered in
    /// creation order, in ReplicaSets that delete by the ReplicaSet's ranking,
    /// docs/hpa-behaviour.md §9).
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
    /// A Deployment's pod-deletion-cost: absent, the Deployment has not opted in and nothing
    /// writes the annotation.
    #[serde(default)]
    pub deletion_cost: Option<DeletionCostSpec>,
}

/// The Deployment carries `hpa-bridge.io/deletion-cost: stateful-index`, and a writer sets every
/// Running pod's `controller.kubernetes.io/pod-deletion-cost` to the index it last exported.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeletionCostSpec {
    /// The opt-in annotation is on the Deployment.
    #[serde(default = "yes")]
    pub opt_in: bool,
    /// The writer runs.
    #[serde(default = "yes")]
    pub writer: bool,
    /// How long after a scrape shows a new index the annotation the watch shows follows it.
    #[serde(default = "zero_duration")]
    pub write_delay: HumanDuration,
}

pub(super) fn default_kind() -> String {
    "StatefulSet".into()
}
pub(super) fn zero_duration() -> HumanDuration {
    HumanDuration(Duration::ZERO)
}
pub(super) fn default_drain_after() -> HumanDuration {
    HumanDuration(Duration::from_secs(60))
}
pub(super) fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IndexOverride {
    /// A StatefulSet's ordinal; a Deployment's pod number (its pods are numbered from 0 in
    /// creation order, and named `<workload>-<number>`).
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
    pub(super) fn exposition(&self) -> String {
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
    pub(super) fn replicas(&self) -> Option<i64> {
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
        let z = splitmix64(t as u64);
        let u = (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        self.clean(t) * (1.0 + self.noise * u)
    }

    /// The plateaus: spans where two consecutive points hold the same total.
    pub(super) fn plateaus(&self) -> Vec<(Millis, Millis, f64)> {
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
    /// The `hpa_target_kind` its series carry (default: the workload's kind). Another kind makes
    /// it the controller of another workload that shares `hpa_target_name` in the namespace
    /// (the selector-typo case, docs/hpa-behaviour.md §6.5): it is scraped like every
    /// controller but is not part of this workload's ground truth.
    #[serde(default)]
    pub target_kind: Option<String>,
    /// More labels on its series, such as the leader epoch an `epochLabel` fences by.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// It runs inside the workload's own pods (the libapp controller in the service processes,
    /// docs/hpa-behaviour.md §4.1): it exports only while one of the workload's pods is Ready,
    /// and at 0 replicas nothing runs it (docs/hpa-behaviour.md §7.3). Its `values` are then what
    /// it would recommend if it ran.
    #[serde(default)]
    pub in_workload: bool,
    /// It also exports this gauge: when its loop last evaluated (Unix seconds), with the same
    /// labels as its recommendation, for an adapter `timestampSeries` to age it by.
    #[serde(default)]
    pub timestamp_series: Option<String>,
}

impl ControllerSpec {
    /// Does this controller recommend for `workload` (rather than for a namesake of another
    /// kind)?
    pub(super) fn recommends_for(&self, workload: &WorkloadSpec) -> bool {
        self.target_kind
            .as_ref()
            .is_none_or(|k| *k == workload.kind)
    }

    /// The `hpa_target_kind` label its series carry.
    pub(super) fn kind_label<'a>(&'a self, workload: &'a WorkloadSpec) -> &'a str {
        self.target_kind.as_deref().unwrap_or(&workload.kind)
    }
}

/// splitmix64: a well-mixed 64-bit value from any input, the same on every run.
pub(super) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(super) fn ms(d: HumanDuration) -> Millis {
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
        let text = std::fs::read_to_string(path).map_err(|cause| SimulateError::Read {
            path: path.display().to_string(),
            cause,
        })?;
        Scenario::from_yaml(&text)
    }

    pub fn from_yaml(text: &str) -> Result<Scenario, SimulateError> {
        let s: Scenario =
            yaml_serde::from_str(text).map_err(|e| SimulateError::Yaml(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// The adapter config, validated by the adapter's own rules.
    pub fn adapter_config(&self) -> Result<Config, SimulateError> {
        let text = match &self.adapter {
            yaml_serde::Value::Null => String::new(),
            v => yaml_serde::to_string(v).map_err(|e| SimulateError::Yaml(e.to_string()))?,
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

    pub(super) fn validate(&self) -> Result<(), SimulateError> {
        let d = self.duration.0;
        if d < SYNC_PERIOD || d > Duration::from_secs(24 * 3600) {
            return Err(invalid("duration", "must be between 15s and 24h"));
        }
        self.kubernetes.controller_config()?;
        self.adapter_config()?;
        Hpa::new(self.hpa.clone(), self.kubernetes.controller_config()?)
            .map_err(|e| invalid("hpa", e.to_string()))?;
        if let Some(m) = self
            .hpa
            .metrics
            .iter()
            .find(|m| m.pods.is_some() || m.resource.is_some())
        {
            return Err(invalid(
                "hpa.metrics",
                format!(
                    "{:?} metrics are not simulated: the simulator serves External and Object metrics only",
                    m.source_type
                ),
            ));
        }
        let deployment = self.validate_workload()?;
        let names = self.validate_controllers()?;
        self.validate_load()?;
        self.validate_faults(deployment, &names)
    }

    /// The workload; whether it is a Deployment.
    fn validate_workload(&self) -> Result<bool, SimulateError> {
        let w = &self.workload;
        if !(0..=1000).contains(&w.initial_replicas) {
            return Err(invalid(
                "workload.initialReplicas",
                "must be between 0 and 1000",
            ));
        }
        let deployment = match w.kind.as_str() {
            "StatefulSet" => false,
            "Deployment" => true,
            _ => {
                return Err(invalid(
                    "workload.kind",
                    "only StatefulSet and Deployment are simulated",
                ))
            }
        };
        if w.deletion_cost.is_some() && !deployment {
            return Err(invalid(
                "workload.deletionCost",
                "only a Deployment ranks its pods by deletion cost",
            ));
        }
        for (i, o) in w.index_overrides.iter().enumerate() {
            check_steps(&format!("workload.indexOverrides[{i}].values"), &o.values)?;
        }
        Ok(deployment)
    }

    /// The controllers; their names.
    fn validate_controllers(&self) -> Result<std::collections::BTreeSet<String>, SimulateError> {
        let w = &self.workload;
        let mut names = std::collections::BTreeSet::new();
        for (i, c) in self.controllers.iter().enumerate() {
            check_steps(&format!("controllers[{i}].values"), &c.values)?;
            for key in c.labels.keys() {
                let fixed = ["hpa_target_kind", "hpa_target_name", "service_instance_id"];
                if !hpa_bridge_rules::selector::is_prometheus_label_name(key)
                    || fixed.contains(&key.as_str())
                {
                    return Err(invalid(
                        format!("controllers[{i}].labels.{key}"),
                        "must be a Prometheus label name other than those the simulator sets",
                    ));
                }
            }
            if c.labels.values().any(|v| v.contains(['"', '\\', '\n'])) {
                return Err(invalid(
                    format!("controllers[{i}].labels"),
                    "values may not hold quotes, backslashes or newlines",
                ));
            }
            if let Some(ts) = &c.timestamp_series {
                if !hpa_bridge_rules::selector::is_prometheus_label_name(ts)
                    || ts == "hpa_expect_replicas"
                {
                    return Err(invalid(
                        format!("controllers[{i}].timestampSeries"),
                        format!("{ts:?} must be a series name other than hpa_expect_replicas"),
                    ));
                }
            }
            if let Some(k) = &c.target_kind {
                if k.is_empty() || !k.chars().all(|ch| ch.is_ascii_alphanumeric()) {
                    return Err(invalid(
                        format!("controllers[{i}].targetKind"),
                        format!("{k:?} is not a Kubernetes kind (letters and digits)"),
                    ));
                }
            }
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
        Ok(names)
    }

    fn validate_load(&self) -> Result<(), SimulateError> {
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
        Ok(())
    }

    /// The faults, each naming a controller, a pod of the workload, or a group of them.
    fn validate_faults(
        &self,
        deployment: bool,
        names: &std::collections::BTreeSet<String>,
    ) -> Result<(), SimulateError> {
        let w = &self.workload;
        for (i, f) in self.faults.iter().enumerate() {
            if f.from >= f.to {
                return Err(invalid(format!("faults[{i}]"), "from must be before to"));
            }
            if f.mode == FaultMode::Rollout {
                let rollouts = self.faults.iter().filter(|f| f.mode == FaultMode::Rollout);
                if !deployment || f.target != w.name || rollouts.count() > 1 {
                    return Err(invalid(
                        format!("faults[{i}].target"),
                        "one rollout, naming the Deployment itself",
                    ));
                }
                continue;
            }
            // A stuck loop is a recommender's; a pod's index has no evaluation time.
            if f.mode == FaultMode::Frozen
                && f.target != "controllers"
                && !names.contains(&f.target)
            {
                return Err(invalid(
                    format!("faults[{i}].target"),
                    "frozen names a controller, or controllers",
                ));
            }
            if f.mode == FaultMode::NotReady && !f.target.starts_with(&format!("{}-", w.name)) {
                return Err(invalid(
                    format!("faults[{i}].target"),
                    "not-ready names a pod",
                ));
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

    /// The fault an exporter shows at `t`; faults of the cluster (a pod not Ready, a rollout)
    /// leave the exporters alone.
    pub(super) fn fault_at(&self, exporter: &str, is_pod: bool, t: Millis) -> Option<&FaultSpec> {
        self.faults.iter().find(|f| {
            f.mode.is_exporter_fault() && f.applies_to(exporter, is_pod) && f.active_at(t)
        })
    }

    /// A `not-ready` fault holds the pod's Ready condition False at `t`.
    pub(super) fn not_ready_at(&self, pod: &str, t: Millis) -> bool {
        self.faults
            .iter()
            .any(|f| f.mode == FaultMode::NotReady && f.target == pod && f.active_at(t))
    }

    /// A `rollout` fault runs the Deployment's rollout at `t`; after it the rollout is paused.
    pub(super) fn rollout_at(&self, t: Millis) -> Option<&FaultSpec> {
        self.faults
            .iter()
            .find(|f| f.mode == FaultMode::Rollout && f.active_at(t))
    }
}

/// Steps of a value over time: at least one, in increasing `at` order.
fn check_steps(key: &str, steps: &[Step]) -> Result<(), SimulateError> {
    if steps.is_empty() {
        return Err(invalid(key, "needs at least one value"));
    }
    if steps.windows(2).any(|p| p[0].at >= p[1].at) {
        return Err(invalid(key, "steps must be in increasing `at` order"));
    }
    Ok(())
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

    /// docs/hpa-behaviour.md §7.1: minReplicas 0 needs HPAScaleToZero, on by default from 1.37.
    #[test]
    fn min_replicas_zero_needs_kubernetes_1_37() {
        let scenario = |version: &str| {
            Scenario::from_yaml(&format!(
                "name: x\nduration: 1m\nkubernetes: {{version: \"{version}\"}}\nworkload: {{name: lobby, initialReplicas: 2}}\n\
                 hpa: {{minReplicas: 0, maxReplicas: 4, metrics: [{{type: External, external: {{metric: {{name: hpa_expect_replicas}}, target: {{type: AverageValue, averageValue: '1'}}}}}}]}}\n\
                 controllers: [{{name: c, inWorkload: true, values: [{{at: 0s, value: 2}}]}}]\n"
            ))
        };
        let err = scenario("1.36").unwrap_err().to_string();
        assert!(
            err.contains("hpa") && err.contains("HPAScaleToZero"),
            "{err}"
        );
        assert!(scenario("1.37").unwrap().controllers[0].in_workload);
        // The gate switched on in 1.36 runs the ScaledToZero condition implementation
        // (docs/hpa-behaviour.md §7.1); switched off in 1.37, minReplicas 0 is refused.
        let gate = |version: &str, on: bool| {
            KubernetesStyle {
                version: version.into(),
                tolerance: None,
                downscale_stabilization: None,
                feature_gates: FeatureGates {
                    hpa_scale_to_zero: Some(on),
                },
            }
            .controller_config()
            .unwrap()
            .scale_to_zero
        };
        assert_eq!(gate("1.36", true), ScaleToZero::Condition);
        assert_eq!(gate("1.35", true), ScaleToZero::ReplicasRule);
        assert_eq!(gate("1.37", false), ScaleToZero::Off);
        let yaml = "name: x\nduration: 1m\nkubernetes: {version: \"1.36\", featureGates: {HPAScaleToZero: true}}\n\
                    workload: {name: lobby, initialReplicas: 2}\n\
                    hpa: {minReplicas: 0, maxReplicas: 4, metrics: [{type: External, external: {metric: {name: hpa_expect_replicas}, target: {type: AverageValue, averageValue: '1'}}}]}\n";
        let s = Scenario::from_yaml(yaml).unwrap();
        assert_eq!(
            s.kubernetes.controller_config().unwrap().scale_to_zero,
            ScaleToZero::Condition
        );
    }

    /// docs/hpa-behaviour.md §9.4: a Deployment's cost, rollout and not-ready faults.
    #[test]
    fn deployment_fields_are_validated() {
        let scenario = |kind: &str, extra: &str, faults: &str| {
            Scenario::from_yaml(&format!(
                "name: x\nduration: 1m\nworkload: {{name: lobby, kind: {kind}, initialReplicas: 2{extra}}}\n\
                 hpa: {{maxReplicas: 4, metrics: [{{type: External, external: {{metric: {{name: hpa_target_replicas}}, target: {{type: AverageValue, averageValue: '1'}}}}}}]}}\n\
                 faults: [{faults}]\n"
            ))
        };
        let cost = ", deletionCost: {writeDelay: 5s}";
        let ok = scenario(
            "Deployment",
            cost,
            "{target: lobby, from: 0s, to: 30s, mode: rollout}, {target: lobby-1, from: 0s, to: 30s, mode: not-ready}",
        )
        .unwrap();
        assert!(ok.workload.deletion_cost.unwrap().opt_in);
        let err = |r: Result<Scenario, SimulateError>| r.unwrap_err().to_string();
        assert!(err(scenario("StatefulSet", cost, "")).contains("workload.deletionCost"));
        assert!(err(scenario("DaemonSet", "", "")).contains("workload.kind"));
        let rollout_of_a_pod = "{target: lobby-1, from: 0s, to: 30s, mode: rollout}";
        assert!(err(scenario("Deployment", "", rollout_of_a_pod)).contains("faults[0].target"));
        let two = "{target: lobby, from: 0s, to: 30s, mode: rollout}, {target: lobby, from: 40s, to: 50s, mode: rollout}";
        assert!(err(scenario("Deployment", "", two)).contains("faults[0].target"));
        let not_ready_controller = "{target: pods, from: 0s, to: 30s, mode: not-ready}";
        assert!(err(scenario("Deployment", "", not_ready_controller)).contains("faults[0].target"));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Scenario::from_yaml(
            "name: x\nduration: 1m\nworkload: {name: lobby, initialReplicas: 2}\nhpa: {maxReplicas: 4}\nbogus: 1\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }
}
