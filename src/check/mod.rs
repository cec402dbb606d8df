//! `hpa-bridge check`: find the HPA specs that silently defeat absolute targets.
//!
//! Pure: parsed objects (from manifests or from a cluster) and the adapter's config in,
//! findings out. Reading files lives in `manifest`, reading a cluster in `cluster`. Every
//! finding names the object and field, says why it matters and how to fix it, and links to
//! its section in docs/check.md.

pub mod cluster;
pub mod manifest;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscaler};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use serde::Serialize;

use crate::config::{Config, MetricKind};
use crate::hpa::model::{
    average_value_ratio, legacy_scale_up_limit, Behavior, PolicyType, ToleranceStyle, Tolerances,
    DEFAULT_DOWNSCALE_STABILIZATION, DEFAULT_TOLERANCE, SYNC_PERIOD,
};
use crate::hpa::quantity::Quantity;

/// The one APIService name the external metrics API can have (REFERENCE.md §3.1).
pub const EXTERNAL_METRICS_APISERVICE: &str = "v1beta1.external.metrics.k8s.io";

/// The HPA sync period, in seconds (docs/hpa-behaviour.md §1.7.5).
const SYNC_PERIOD_S: i64 = SYNC_PERIOD.as_secs() as i64;

/// The default scale-down stabilisation window in seconds
/// (`--horizontal-pod-autoscaler-downscale-stabilization`, docs/hpa-behaviour.md §1.7.4).
const DEFAULT_SCALE_DOWN_WINDOW_S: i64 = DEFAULT_DOWNSCALE_STABILIZATION.as_secs() as i64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One kind of finding: a stable code, a title, and its section in docs/check.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub code: &'static str,
    pub title: &'static str,
}

impl Rule {
    /// The GitHub anchor of the section `## HBnnn: Title` in docs/check.md.
    pub fn docs(&self) -> String {
        let mut anchor = self.code.to_ascii_lowercase();
        for word in self.title.split_whitespace() {
            anchor.push('-');
            anchor.extend(
                word.chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    .map(|c| c.to_ascii_lowercase()),
            );
        }
        format!("docs/check.md#{anchor}")
    }
}

pub mod rules {
    use super::Rule;
    macro_rules! rule {
        ($id:ident, $code:literal, $title:literal) => {
            pub const $id: Rule = Rule {
                code: $code,
                title: $title,
            };
        };
    }
    rule!(
        VALUE_PATH,
        "HB001",
        "Absolute metric through the Value path"
    );
    rule!(AVERAGE_VALUE_NOT_ONE, "HB002", "averageValue other than 1");
    rule!(
        TYPE_MISMATCH,
        "HB003",
        "target type disagrees with the field set"
    );
    rule!(
        UPPER_CASE_NAME,
        "HB004",
        "Metric name with upper-case letters"
    );
    rule!(NOT_SERVED, "HB005", "Metric not served by hpa-bridge");
    rule!(
        SELECTOR_SCOPE,
        "HB006",
        "Selector may match several workloads"
    );
    rule!(NO_SERIES, "HB007", "No series for the selector");
    rule!(TOLERANCE, "HB008", "Tolerance swallows small steps");
    rule!(
        TOLERANCE_DROPPED,
        "HB009",
        "Per-HPA tolerance dropped by the API server"
    );
    rule!(
        SCALE_DOWN_WINDOW,
        "HB010",
        "Scale-down window shorter than the recommender's"
    );
    rule!(
        SCALE_UP_TOO_SLOW,
        "HB011",
        "Scale-up policies too slow to reach maxReplicas"
    );
    rule!(
        MIN_REPLICAS_ZERO,
        "HB012",
        "minReplicas 0 without scale to zero"
    );
    rule!(
        FLOOR_ON_DEPLOYMENT,
        "HB013",
        "Stateful floor on a Deployment"
    );
    rule!(
        ORDINALS_START,
        "HB014",
        "StatefulSet ordinals start without offset handling"
    );
    rule!(NO_FLOOR, "HB015", "StatefulSet without a floor metric");
    rule!(
        FOREIGN_APISERVICE,
        "HB016",
        "APIService owned by another service"
    );
    rule!(
        APISERVICE_UNAVAILABLE,
        "HB017",
        "APIService missing or not Available"
    );
    rule!(ADAPTER_REFUSES, "HB018", "Adapter refuses the metric");
    rule!(SCALE_TARGET_MISSING, "HB019", "Scale target not found");

    /// Every rule, in code order (docs/check.md has one section each).
    pub const ALL: [Rule; 19] = [
        VALUE_PATH,
        AVERAGE_VALUE_NOT_ONE,
        TYPE_MISMATCH,
        UPPER_CASE_NAME,
        NOT_SERVED,
        SELECTOR_SCOPE,
        NO_SERIES,
        TOLERANCE,
        TOLERANCE_DROPPED,
        SCALE_DOWN_WINDOW,
        SCALE_UP_TOO_SLOW,
        MIN_REPLICAS_ZERO,
        FLOOR_ON_DEPLOYMENT,
        ORDINALS_START,
        NO_FLOOR,
        FOREIGN_APISERVICE,
        APISERVICE_UNAVAILABLE,
        ADAPTER_REFUSES,
        SCALE_TARGET_MISSING,
    ];
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ObjectRef {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub severity: Severity,
    pub title: &'static str,
    pub object: ObjectRef,
    pub field: String,
    /// What was found, with the figures.
    pub message: String,
    /// Why it matters.
    pub why: String,
    pub fix: String,
    pub docs: String,
    /// Where the object came from (`file (document N)`), for manifests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A `major.minor` Kubernetes version: it decides which tolerance check the controller runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeVersion {
    pub major: u32,
    pub minor: u32,
}

impl KubeVersion {
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim().trim_start_matches('v');
        let mut parts = t.split('.');
        let major = parts.next().and_then(|p| p.parse().ok());
        let minor = parts
            .next()
            .map(|p| p.trim_end_matches('+'))
            .and_then(|p| p.parse().ok());
        match (major, minor) {
            (Some(major), Some(minor)) => Ok(KubeVersion { major, minor }),
            _ => Err(format!(
                "{text:?} is not a Kubernetes version (use e.g. 1.33)"
            )),
        }
    }

    /// The tolerance test this version's controller runs, from the model
    /// (docs/hpa-behaviour.md §1.5).
    fn tolerance_style(self) -> ToleranceStyle {
        ToleranceStyle::for_kube_minor(if self.major > 1 { u32::MAX } else { self.minor })
    }
}

impl std::fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[derive(Clone, Debug)]
pub struct CheckSettings {
    /// `--horizontal-pod-autoscaler-tolerance` of the cluster's controller manager.
    pub cluster_tolerance: f64,
    pub kube_version: KubeVersion,
    /// The recommender's own stabilisation window (REFERENCE.md §4.1: 60 s).
    pub recommender_window_s: i64,
    /// How long reaching maxReplicas from minReplicas may take before it is flagged.
    pub max_scale_up_s: i64,
    /// The `HPAScaleToZero` feature gate is enabled.
    pub scale_to_zero: bool,
    /// The Service that should own the APIService: (namespace, name).
    pub adapter_service: (String, String),
}

impl Default for CheckSettings {
    fn default() -> Self {
        CheckSettings {
            cluster_tolerance: DEFAULT_TOLERANCE,
            kube_version: KubeVersion {
                major: 1,
                minor: 33,
            },
            recommender_window_s: 60,
            max_scale_up_s: 600,
            scale_to_zero: false,
            adapter_service: ("hpa-bridge".into(), "hpa-bridge".into()),
        }
    }
}

/// An HPA and where it came from.
#[derive(Clone, Debug)]
pub struct HpaInput {
    pub hpa: HorizontalPodAutoscaler,
    pub source: Option<String>,
}

/// A StatefulSet or Deployment a scaleTargetRef may point at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadInput {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `spec.ordinals.start` (StatefulSet), 0 when unset.
    pub ordinals_start: i64,
    pub source: Option<String>,
}

/// The `v1beta1.external.metrics.k8s.io` APIService.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiServiceInput {
    /// `spec.service` as (namespace, name); None for a local APIService.
    pub service: Option<(String, String)>,
    /// The `Available` condition: (status is True, "reason: message"), when status is known.
    pub available: Option<(bool, String)>,
    pub source: Option<String>,
}

/// What the adapter answered, through the API server, for one HPA metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdapterReply {
    /// 2xx with this many items and the first item's value.
    Values { items: usize, value: Option<String> },
    /// A non-2xx answer: HTTP code, Status reason and message.
    Error {
        code: u16,
        reason: String,
        message: String,
    },
}

/// The request the HPA makes for one External metric (REFERENCE.md §1.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricQuery {
    pub namespace: String,
    pub hpa: String,
    pub metric_index: usize,
    /// Lower-cased, as client-go puts it in the path.
    pub metric: String,
    /// The selector in string syntax; empty means no `labelSelector` parameter.
    pub selector: String,
}

impl MetricQuery {
    /// The request path, as client-go builds it.
    pub fn path(&self) -> String {
        let mut path = format!(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{}/{}",
            self.namespace, self.metric
        );
        if !self.selector.is_empty() {
            path.push_str("?labelSelector=");
            path.push_str(
                &percent_encoding::utf8_percent_encode(
                    &self.selector,
                    percent_encoding::NON_ALPHANUMERIC,
                )
                .to_string(),
            );
        }
        path
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterAnswer {
    pub query: MetricQuery,
    pub reply: AdapterReply,
}

/// Everything the check looks at.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub hpas: Vec<HpaInput>,
    pub workloads: Vec<WorkloadInput>,
    pub api_service: Option<ApiServiceInput>,
    pub answers: Vec<AdapterAnswer>,
    /// Read from a live cluster: every scale target was looked up, and the APIService must exist.
    pub live: bool,
}

/// The result of a check.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    #[serde(rename = "hpasChecked")]
    pub hpas_checked: usize,
}

impl Report {
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// 1 when any error-level finding exists, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.count(Severity::Error) > 0 {
            1
        } else {
            0
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "findings": self.findings,
            "summary": {
                "hpasChecked": self.hpas_checked,
                "errors": self.count(Severity::Error),
                "warnings": self.count(Severity::Warning),
                "info": self.count(Severity::Info),
            }
        })
    }

    /// The human-readable table: one header line per finding, its explanation indented below.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        if self.findings.is_empty() {
            let _ = writeln!(
                out,
                "no findings ({} HPA{} checked)",
                self.hpas_checked,
                if self.hpas_checked == 1 { "" } else { "s" }
            );
            return out;
        }
        let objects: Vec<String> = self.findings.iter().map(|f| f.object.to_string()).collect();
        let ow = objects
            .iter()
            .map(|o| o.len())
            .max()
            .unwrap_or(0)
            .max("OBJECT".len());
        let _ = writeln!(
            out,
            "{:<8} {:<6} {:<ow$} FIELD",
            "SEVERITY", "CODE", "OBJECT"
        );
        for (f, object) in self.findings.iter().zip(&objects) {
            let _ = writeln!(
                out,
                "{:<8} {:<6} {:<ow$} {}",
                f.severity.as_str(),
                f.code,
                object,
                f.field
            );
            let _ = writeln!(out, "    {}: {}", f.title, f.message);
            let _ = writeln!(out, "    why: {}", f.why);
            let _ = writeln!(out, "    fix: {}", f.fix);
            if let Some(s) = &f.source {
                let _ = writeln!(out, "    in:  {s}");
            }
            let _ = writeln!(out, "    see: {}", f.docs);
        }
        let _ = writeln!(
            out,
            "{} finding{}: {} error, {} warning, {} info ({} HPA{} checked)",
            self.findings.len(),
            if self.findings.len() == 1 { "" } else { "s" },
            self.count(Severity::Error),
            self.count(Severity::Warning),
            self.count(Severity::Info),
            self.hpas_checked,
            if self.hpas_checked == 1 { "" } else { "s" }
        );
        out
    }
}

struct Ctx<'a> {
    config: &'a Config,
    settings: &'a CheckSettings,
    inputs: &'a Inputs,
    findings: Vec<Finding>,
}

impl Ctx<'_> {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        rule: Rule,
        severity: Severity,
        object: &ObjectRef,
        field: impl Into<String>,
        message: impl Into<String>,
        why: impl Into<String>,
        fix: impl Into<String>,
        source: &Option<String>,
    ) {
        self.findings.push(Finding {
            code: rule.code,
            severity,
            title: rule.title,
            object: object.clone(),
            field: field.into(),
            message: message.into(),
            why: why.into(),
            fix: fix.into(),
            docs: rule.docs(),
            source: source.clone(),
        });
    }
}

/// Run every check.
pub fn check(inputs: &Inputs, config: &Config, settings: &CheckSettings) -> Report {
    let mut ctx = Ctx {
        config,
        settings,
        inputs,
        findings: Vec::new(),
    };
    check_api_service(&mut ctx);
    for h in &inputs.hpas {
        check_hpa(&mut ctx, h);
    }
    let mut findings = ctx.findings;
    findings.sort_by(|a, b| {
        (a.severity, &a.object, a.code, &a.field).cmp(&(b.severity, &b.object, b.code, &b.field))
    });
    // Several HPAs may point at one StatefulSet: report the workload's own finding once.
    findings.dedup_by(|a, b| {
        a.code == b.code && a.object == b.object && a.field == b.field && a.message == b.message
    });
    Report {
        findings,
        hpas_checked: inputs.hpas.len(),
    }
}

fn check_api_service(ctx: &mut Ctx) {
    let object = ObjectRef {
        kind: "APIService".into(),
        namespace: None,
        name: EXTERNAL_METRICS_APISERVICE.into(),
    };
    let (want_ns, want_name) = ctx.settings.adapter_service.clone();
    let Some(api) = ctx.inputs.api_service.clone() else {
        if ctx.inputs.live {
            ctx.push(
                rules::APISERVICE_UNAVAILABLE,
                Severity::Error,
                &object,
                "",
                format!("the cluster has no APIService {EXTERNAL_METRICS_APISERVICE}"),
                "every External metric request of every HPA fails, so no HPA using one can scale on it (REFERENCE.md §1.6)",
                "install hpa-bridge's APIService (deploy/), pointing at its Service",
                &None,
            );
        }
        return;
    };
    match &api.service {
        Some((ns, name)) if *ns == want_ns && *name == want_name => {}
        other => {
            let owner = match other {
                Some((ns, name)) => format!("Service {ns}/{name}"),
                None => "the API server itself (no spec.service)".into(),
            };
            ctx.push(
                rules::FOREIGN_APISERVICE,
                Severity::Error,
                &object,
                "spec.service",
                format!("external.metrics.k8s.io is served by {owner}, not by hpa-bridge's Service {want_ns}/{want_name}"),
                "only one APIService per group version can exist (REFERENCE.md §3.1): every HPA External metric request goes to that owner, which does not know hpa-bridge's metrics",
                format!("point the APIService at {want_ns}/{want_name} (and move the other adapter's external metrics, e.g. KEDA's, to a different mechanism), or pass --adapter-service if hpa-bridge runs under another name"),
                &api.source,
            );
        }
    }
    if let Some((false, why)) = &api.available {
        ctx.push(
            rules::APISERVICE_UNAVAILABLE,
            Severity::Error,
            &object,
            "status.conditions[type=Available]",
            format!("the APIService is not Available: {why}"),
            "while it is unavailable the aggregator answers 503 to every External metric request, so HPAs freeze scale-in and cannot use these metrics to scale out; it also breaks discovery and namespace deletion (REFERENCE.md §3.1)",
            "check the adapter's pods and Service endpoints, the caBundle, and that GET /apis/external.metrics.k8s.io/v1beta1 answers within 5 s",
            &api.source,
        );
    }
}

/// How one HPA metric uses hpa-bridge.
#[derive(Default)]
struct Uses {
    served: bool,
    recommendation: bool,
    floor: bool,
}

fn check_hpa(ctx: &mut Ctx, input: &HpaInput) {
    let hpa = &input.hpa;
    let ns = hpa
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = hpa.metadata.name.clone().unwrap_or_default();
    let object = ObjectRef {
        kind: "HorizontalPodAutoscaler".into(),
        namespace: Some(ns.clone()),
        name: name.clone(),
    };
    let src = &input.source;
    let Some(spec) = &hpa.spec else { return };
    let target_ref = &spec.scale_target_ref;
    let mut uses = Uses::default();

    for (i, m) in spec.metrics.iter().flatten().enumerate() {
        let Some(ext) = &m.external else { continue };
        let base = format!("spec.metrics[{i}].external");
        let metric_name = &ext.metric.name;
        if metric_name.chars().any(|c| c.is_ascii_uppercase()) {
            ctx.push(
                rules::UPPER_CASE_NAME,
                Severity::Warning,
                &object,
                format!("{base}.metric.name"),
                format!("metric name {metric_name:?} has upper-case letters"),
                "client-go lower-cases the metric name in the request path (REFERENCE.md §1.2): the adapter is asked for a different name than the HPA shows, and adapters that match names exactly answer 404",
                format!("write it as {:?}", metric_name.to_ascii_lowercase()),
                src,
            );
        }
        let Some(served) = ctx.config.metric(metric_name) else {
            let names: Vec<&str> = ctx.config.metrics.iter().map(|m| m.name()).collect();
            ctx.push(
                rules::NOT_SERVED,
                Severity::Error,
                &object,
                format!("{base}.metric.name"),
                format!("metric {metric_name:?} is not served by hpa-bridge (it serves {})", names.join(", ")),
                "only one adapter owns external.metrics.k8s.io (REFERENCE.md §3.1); the request gets 404, the metric is invalid on every sync and the HPA cannot scale down (REFERENCE.md §1.6)",
                "use one of the served names, or add the metric to the adapter's config (metrics:)",
                src,
            );
            continue;
        };
        uses.served = true;
        match served.kind() {
            MetricKind::StatefulFloor => uses.floor = true,
            MetricKind::Target => {
                uses.recommendation = true;
                uses.floor |= served.floor().is_some();
            }
            MetricKind::Recommendation | MetricKind::Threshold => uses.recommendation = true,
        }
        check_target(ctx, &object, src, &base, served.kind(), &ext.target);
        check_selector(
            ctx,
            &object,
            src,
            &base,
            ext.metric.selector.as_ref(),
            target_ref,
        );
    }
    check_answers(ctx, &object, src, &ns, &name);
    if !uses.served {
        return;
    }

    let min = spec.min_replicas.unwrap_or(1) as i64;
    let max = spec.max_replicas as i64;
    if min == 0 && !ctx.settings.scale_to_zero {
        ctx.push(
            rules::MIN_REPLICAS_ZERO,
            Severity::Error,
            &object,
            "spec.minReplicas",
            "minReplicas is 0",
            "minReplicas 0 needs the alpha feature gate HPAScaleToZero (REFERENCE.md §1.7.7); without it the API server rejects the HPA. hpa-bridge never serves 0 for unknown input, so a workload at 0 only comes back through a served value, and the first step up from 0 is capped at 4",
            "set minReplicas to at least 1 (the recommender's own minimum is 2, REFERENCE.md §4.1), or enable HPAScaleToZero and pass --scale-to-zero",
            src,
        );
    }
    let behavior = spec.behavior.as_ref();
    let up = behavior.and_then(|b| b.scale_up.as_ref());
    let down = behavior.and_then(|b| b.scale_down.as_ref());
    check_tolerance(ctx, &object, src, up, down, min, max);
    check_scale_down_window(ctx, &object, src, down);
    check_scale_up_speed(ctx, &object, src, behavior.is_some(), up, min, max);
    check_workload(ctx, &object, src, target_ref, &uses);
}

fn check_target(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    base: &str,
    kind: MetricKind,
    target: &k8s_openapi::api::autoscaling::v2::MetricTarget,
) {
    let ty = target.type_.as_str();
    let kind = kind.as_str();
    // The HPA checks averageValue first, then value; type is never read (REFERENCE.md §1.1).
    if let Some(avg) = &target.average_value {
        match parse_quantity(&avg.0) {
            Some(v) if (v - 1.0).abs() < 1e-9 => {}
            parsed => ctx.push(
                rules::AVERAGE_VALUE_NOT_ONE,
                Severity::Error,
                object,
                format!("{base}.target.averageValue"),
                match parsed {
                    Some(_) => format!("averageValue is {:?} on the absolute {kind} metric", avg.0),
                    None => format!("averageValue {:?} is not a quantity", avg.0),
                },
                "the HPA computes desired = ceil(value / averageValue) (REFERENCE.md §1.4): with an absolute replica count D it scales to D divided by this figure instead of D",
                "set averageValue: \"1\"",
                src,
            ),
        }
        if ty != "AverageValue" {
            ctx.push(
                rules::TYPE_MISMATCH,
                Severity::Warning,
                object,
                format!("{base}.target.type"),
                format!("type is {ty:?} but averageValue is set, so the HPA runs the AverageValue formula"),
                "the HPA picks the formula by the field that is set and never reads type (REFERENCE.md §1.1); the manifest says one thing and does another",
                "set type: AverageValue (and remove value)",
                src,
            );
        } else if target.value.is_some() {
            ctx.push(
                rules::TYPE_MISMATCH,
                Severity::Warning,
                object,
                format!("{base}.target.value"),
                "both averageValue and value are set; value is ignored",
                "the HPA reads averageValue first (REFERENCE.md §1.1); the ignored value misleads whoever edits it next",
                "remove target.value",
                src,
            );
        }
    } else if target.value.is_some() {
        ctx.push(
            rules::VALUE_PATH,
            Severity::Error,
            object,
            format!("{base}.target.value"),
            format!("the absolute {kind} metric is read through the Value path (target.value is set, averageValue is not)"),
            "the Value formula is desired = ceil(value / target × readyPods) (REFERENCE.md §1.3): an absolute count D becomes about D × readyPods, so the workload runs away to maxReplicas (or to 0 proposals when no pod is Ready)",
            "use target: {type: AverageValue, averageValue: \"1\"} (REFERENCE.md §1.4)",
            src,
        );
        if ty != "Value" {
            ctx.push(
                rules::TYPE_MISMATCH,
                Severity::Warning,
                object,
                format!("{base}.target.type"),
                format!("type is {ty:?} but only value is set, so the HPA runs the Value formula"),
                "the HPA picks the formula by the field that is set and never reads type (REFERENCE.md §1.1)",
                "replace value with averageValue: \"1\"",
                src,
            );
        }
    } else {
        ctx.push(
            rules::TYPE_MISMATCH,
            Severity::Error,
            object,
            format!("{base}.target"),
            format!("type is {ty:?} but neither averageValue nor value is set"),
            "an External metric target needs averageValue or value; the API server rejects this HPA",
            "set type: AverageValue and averageValue: \"1\"",
            src,
        );
    }
}

/// The selector as the HPA sends it, from the one renderer
/// ([`crate::selector::label_selector_to_string`], docs/hpa-behaviour.md §1.2). A selector the
/// API server would reject renders as the error, so findings still quote it and the adapter
/// query made with it fails rather than selecting everything.
pub fn selector_text(selector: Option<&K8sSelector>) -> String {
    crate::selector::label_selector_to_string(selector).unwrap_or_else(|e| e.to_string())
}

/// The single value a selector pins a label key to, if it does.
fn pinned(selector: &K8sSelector, key: &str) -> Option<String> {
    if let Some(v) = selector.match_labels.as_ref().and_then(|m| m.get(key)) {
        return Some(v.clone());
    }
    selector
        .match_expressions
        .iter()
        .flatten()
        .find(|e| e.key == key && e.operator == "In")
        .and_then(|e| match e.values.as_deref() {
            Some([one]) => Some(one.clone()),
            _ => None,
        })
}

fn check_selector(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    base: &str,
    selector: Option<&K8sSelector>,
    target_ref: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
) {
    let field = format!("{base}.metric.selector");
    let text = selector_text(selector);
    if text.is_empty() {
        ctx.push(
            rules::SELECTOR_SCOPE,
            Severity::Warning,
            object,
            field,
            "no selector: the request covers every series in the namespace",
            "a nil or empty selector sends no labelSelector (REFERENCE.md §1.2); with several workloads in the namespace the adapter answers the max over all of them, so this workload follows another one's recommendation",
            format!("select the workload, e.g. matchLabels: {{hpa_target_name: {}}}", target_ref.name),
            src,
        );
        return;
    }
    let Some(selector) = selector else { return };
    // REFERENCE.md §4.1: hpa_target_kind / hpa_target_name scope a workload.
    for (key, expected) in [
        ("hpa_target_name", &target_ref.name),
        ("hpa_target_kind", &target_ref.kind),
    ] {
        if let Some(v) = pinned(selector, key) {
            if &v != expected {
                ctx.push(
                    rules::SELECTOR_SCOPE,
                    Severity::Warning,
                    object,
                    field.clone(),
                    format!(
                        "the selector picks {key}={v}, but the HPA scales {} {}",
                        target_ref.kind, target_ref.name
                    ),
                    "the workload would be sized by another workload's recommendation",
                    format!(
                        "select {key}={expected}, unless following another workload is intended"
                    ),
                    src,
                );
            }
        }
    }
}

fn check_answers(ctx: &mut Ctx, object: &ObjectRef, src: &Option<String>, ns: &str, name: &str) {
    let answers: Vec<AdapterAnswer> = ctx
        .inputs
        .answers
        .iter()
        .filter(|a| a.query.namespace == ns && a.query.hpa == name)
        .cloned()
        .collect();
    for a in answers {
        let q = &a.query;
        let field = format!("spec.metrics[{}].external.metric", q.metric_index);
        let asked = format!(
            "GET {} {}",
            q.metric,
            if q.selector.is_empty() {
                "(no selector)".to_string()
            } else {
                format!("with labelSelector {:?}", q.selector)
            }
        );
        match &a.reply {
            AdapterReply::Values { items: 1, .. } => {}
            AdapterReply::Values { items, value } => ctx.push(
                rules::ADAPTER_REFUSES,
                Severity::Error,
                object,
                field,
                format!("{asked}: the answer has {items} items (first value {value:?})"),
                "the HPA sums every item and treats an empty list as an error (REFERENCE.md §1.2): an absolute count must be exactly one item",
                "check which adapter answers (APIService) and its version",
                src,
            ),
            AdapterReply::Error { code: 404, reason, message } => ctx.push(
                rules::NO_SERIES,
                Severity::Error,
                object,
                field,
                format!("{asked}: the adapter answers 404 {reason}: {message}"),
                "no series matches the selector, so the metric is invalid on every sync: the HPA cannot scale down, and scales up only through other metrics (REFERENCE.md §1.6)",
                "make the selector match the labels the workload's series carry (see the adapter's /status), or fix the scrape configuration",
                src,
            ),
            AdapterReply::Error { code, reason, message } => ctx.push(
                rules::ADAPTER_REFUSES,
                Severity::Error,
                object,
                field,
                format!("{asked}: the adapter answers {code} {reason}: {message}"),
                "an error makes the metric invalid: scale-in is frozen while it lasts (REFERENCE.md §1.6); hpa-bridge refuses rather than guess, and the message says which input is unknown",
                "fix the input the message names (stale or failing targets, invalid values); the adapter's /status explains every answer",
                src,
            ),
        }
    }
}

/// A Kubernetes quantity as the controller reads it (`AsApproximateFloat64`, docs/hpa-behaviour.md
/// §1.5), from the one Quantity parser ([`crate::hpa::quantity::Quantity`]).
pub fn parse_quantity(text: &str) -> Option<f64> {
    Quantity::parse(text.trim()).ok().map(|q| q.as_f64())
}

/// Whether the controller ignores a proposal of `desired` replicas at `current` replicas
/// (docs/hpa-behaviour.md §1.5): the model's AverageValue ratio (`averageValue: "1"`, one item
/// of value `desired`) tested against the model's band. `legacy` selects the pre-1.33
/// `|1 - ratio| <= t` test with the cluster tolerance only; otherwise `1 - down <= ratio <=
/// 1 + up`, both ends inclusive. At 10 replicas and t = 0.1, 11 is acted on before 1.33 and
/// ignored from 1.33.
pub fn within_tolerance(
    current: i64,
    desired: i64,
    tolerance_up: f64,
    tolerance_down: f64,
    legacy: bool,
) -> bool {
    let band = Tolerances {
        style: if legacy {
            ToleranceStyle::Symmetric
        } else {
            ToleranceStyle::PerDirection { configurable: true }
        },
        scale_up: tolerance_up,
        scale_down: tolerance_down,
    };
    band.is_within(average_value_ratio(
        desired.saturating_mul(1000),
        1000,
        current,
    ))
}

fn tolerance_of(rules: Option<&HPAScalingRules>) -> Option<(f64, String)> {
    let q = rules?.tolerance.as_ref()?;
    Some((parse_quantity(&q.0).unwrap_or(f64::NAN), q.0.clone()))
}

fn check_tolerance(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    up: Option<&HPAScalingRules>,
    down: Option<&HPAScalingRules>,
    min: i64,
    max: i64,
) {
    let s = ctx.settings;
    let legacy = s.kube_version.tolerance_style() == ToleranceStyle::Symmetric;
    let cluster = s.cluster_tolerance;
    let mut effective = [(cluster, "cluster default"), (cluster, "cluster default")];
    for (i, (dir, rules)) in [("scaleUp", up), ("scaleDown", down)]
        .into_iter()
        .enumerate()
    {
        let Some((t, text)) = tolerance_of(rules) else {
            continue;
        };
        if legacy {
            ctx.push(
                rules::TOLERANCE_DROPPED,
                Severity::Warning,
                object,
                format!("spec.behavior.{dir}.tolerance"),
                format!("tolerance {text:?} is set, but Kubernetes {} has no per-HPA tolerance", s.kube_version),
                format!("the field exists from 1.33 behind the HPAConfigurableTolerance gate; older API servers drop it, so the cluster-wide {cluster} applies (REFERENCE.md §1.5)"),
                "upgrade to 1.33+ with HPAConfigurableTolerance enabled (beta, on by default, from 1.35), or lower --horizontal-pod-autoscaler-tolerance on kube-controller-manager; pass --kube-version if the cluster is newer",
                src,
            );
        } else if t.is_finite() && t >= 0.0 {
            effective[i] = (t, "spec.behavior tolerance");
        }
    }
    let [(t_up, up_from), (t_down, down_from)] = effective;
    if t_up <= 0.0 && t_down <= 0.0 {
        return;
    }
    let lo = min.max(1);
    // Legacy controllers compare against one (cluster) tolerance in both directions.
    let (u, d) = if legacy {
        (cluster, cluster)
    } else {
        (t_up, t_down)
    };
    let first_up = (lo..max).find(|&r| within_tolerance(r, r + 1, u, d, legacy));
    let first_down = (lo + 1..=max).find(|&r| within_tolerance(r, r - 1, u, d, legacy));
    if first_up.is_none() && first_down.is_none() {
        return;
    }
    let largest_ignored_at_max = (1..max)
        .take_while(|&k| within_tolerance(max, max - k, u, d, legacy))
        .last()
        .unwrap_or(0);
    let rule = if legacy {
        format!(
            "Kubernetes {} (before 1.33): |1 - ratio| <= t, in float64",
            s.kube_version
        )
    } else {
        format!(
            "Kubernetes {}: 1 - down <= ratio <= 1 + up, inclusive",
            s.kube_version
        )
    };
    let mut message =
        format!("tolerance up {t_up} ({up_from}), down {t_down} ({down_from}); under {rule}, ");
    let mut parts = Vec::new();
    if let Some(r) = first_up {
        parts.push(format!(
            "a recommendation one replica above the current count is ignored from {r} replicas on"
        ));
    }
    if let Some(r) = first_down {
        parts.push(format!("one replica below is ignored from {r} replicas on"));
    }
    message.push_str(&parts.join(", and "));
    if largest_ignored_at_max > 0 {
        let _ = write!(
            message,
            "; at maxReplicas {max}, recommendations up to {largest_ignored_at_max} replica(s) lower are ignored"
        );
    }
    ctx.push(
        rules::TOLERANCE,
        Severity::Warning,
        object,
        "spec.behavior",
        message,
        "an absolute target is exact: the ratio is compared against status.replicas and a proposal inside the band keeps the current count (REFERENCE.md §1.5), so the recommender's single-replica steps are silently dropped",
        "set spec.behavior.scaleUp.tolerance: \"0\" and spec.behavior.scaleDown.tolerance: \"0\"; this needs the HPAConfigurableTolerance feature gate on kube-apiserver and kube-controller-manager (alpha, off by default, in 1.33-1.34; beta, on by default, from 1.35), otherwise the API server drops the field",
        src,
    );
}

fn check_scale_down_window(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    down: Option<&HPAScalingRules>,
) {
    let window = down
        .and_then(|d| d.stabilization_window_seconds)
        .map(i64::from)
        .unwrap_or(DEFAULT_SCALE_DOWN_WINDOW_S);
    let want = ctx.settings.recommender_window_s;
    if window < want {
        ctx.push(
            rules::SCALE_DOWN_WINDOW,
            Severity::Warning,
            object,
            "spec.behavior.scaleDown.stabilizationWindowSeconds",
            format!("the scale-down stabilisation window is {window}s, shorter than the recommender's own {want}s"),
            "several recommendation series per workload are normal and may disagree briefly (a former controller, a failover, a restart: REFERENCE.md §4.1, §1.7.6); a window shorter than the recommender's lets such a transient dip remove pods the recommender still wants",
            format!("set stabilizationWindowSeconds to at least {want}"),
            src,
        );
    }
}

/// One scale-up policy: Pods or Percent, value, period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpPolicy {
    pub percent: bool,
    pub value: i64,
    pub period_s: i64,
}

/// How the controller limits scale-up (REFERENCE.md §1.7.3-4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpLimit {
    /// No `behavior`: at most max(2 × current, 4) per sync.
    Legacy,
    Rules {
        policies: Vec<UpPolicy>,
        /// `selectPolicy`: Max, Min or Disabled.
        select: String,
        window_s: i64,
    },
}

impl UpLimit {
    pub fn from_behavior(has_behavior: bool, up: Option<&HPAScalingRules>) -> UpLimit {
        if !has_behavior {
            return UpLimit::Legacy;
        }
        // The model's defaults with behavior: Pods 4/15 s and Percent 100/15 s, Max, window 0
        // (docs/hpa-behaviour.md §1.7.4).
        let default_policies: Vec<UpPolicy> = Behavior::default()
            .resolved_scale_up()
            .policies
            .iter()
            .map(|p| UpPolicy {
                percent: p.policy_type == PolicyType::Percent,
                value: i64::from(p.value),
                period_s: i64::from(p.period_seconds),
            })
            .collect();
        let Some(up) = up else {
            return UpLimit::Rules {
                policies: default_policies,
                select: "Max".into(),
                window_s: 0,
            };
        };
        let policies = match &up.policies {
            Some(p) if !p.is_empty() => p
                .iter()
                .map(|p| UpPolicy {
                    percent: p.type_ == "Percent",
                    value: p.value as i64,
                    period_s: p.period_seconds as i64,
                })
                .collect(),
            _ => default_policies,
        };
        UpLimit::Rules {
            policies,
            select: up.select_policy.clone().unwrap_or_else(|| "Max".into()),
            window_s: up.stabilization_window_seconds.unwrap_or(0) as i64,
        }
    }
}

/// Seconds from a jump of the recommendation to `max` until the HPA reaches it, starting at
/// `min`, with a sync every 15 s. None when it never gets there within a day.
pub fn time_to_reach_max(min: i64, max: i64, limit: &UpLimit) -> Option<i64> {
    let mut current = min.max(1);
    if current >= max {
        return Some(0);
    }
    // Up stabilisation is the min over the window: older, lower recommendations hold the
    // count until they leave it (`timestamp.After(now - window)`).
    let start = match limit {
        UpLimit::Rules { window_s, .. } if *window_s > SYNC_PERIOD_S => {
            (window_s - SYNC_PERIOD_S + SYNC_PERIOD_S - 1) / SYNC_PERIOD_S * SYNC_PERIOD_S
        }
        _ => 0,
    };
    let mut events: Vec<(i64, i64)> = Vec::new();
    let mut t = start;
    while t <= start + 86_400 {
        let cap = match limit {
            UpLimit::Legacy => legacy_scale_up_limit(current),
            UpLimit::Rules {
                policies, select, ..
            } => {
                if select == "Disabled" {
                    return None;
                }
                let pick_min = select == "Min";
                let mut result: Option<i64> = None;
                for p in policies {
                    // Replicas added within the period (`time.Since(ts) < period`).
                    let added: i64 = events
                        .iter()
                        .filter(|(ts, _)| t - ts < p.period_s)
                        .map(|(_, n)| n)
                        .sum();
                    let base = current - added;
                    let proposed = if p.percent {
                        ((base as f64) * (1.0 + p.value as f64 / 100.0)).ceil() as i64
                    } else {
                        base + p.value
                    };
                    result = Some(match result {
                        None => proposed,
                        Some(r) if pick_min => r.min(proposed),
                        Some(r) => r.max(proposed),
                    });
                }
                result.unwrap_or(current)
            }
        };
        let next = cap.min(max);
        if next > current {
            events.push((t, next - current));
            current = next;
        }
        if current >= max {
            return Some(t);
        }
        t += SYNC_PERIOD_S;
    }
    None
}

fn check_scale_up_speed(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    has_behavior: bool,
    up: Option<&HPAScalingRules>,
    min: i64,
    max: i64,
) {
    let limit = UpLimit::from_behavior(has_behavior, up);
    let budget = ctx.settings.max_scale_up_s;
    let took = time_to_reach_max(min, max, &limit);
    let from = min.max(1);
    let message = match took {
        Some(t) if t <= budget => return,
        Some(t) => format!(
            "going from {from} to maxReplicas {max} takes {t}s under these policies, more than {budget}s"
        ),
        None => match &limit {
            UpLimit::Rules { select, .. } if select == "Disabled" => {
                "scale-up is disabled (selectPolicy: Disabled)".to_string()
            }
            _ => format!("going from {from} to maxReplicas {max} takes more than a day under these policies"),
        },
    };
    let field = if has_behavior {
        "spec.behavior.scaleUp"
    } else {
        "spec.behavior"
    };
    ctx.push(
        rules::SCALE_UP_TOO_SLOW,
        Severity::Warning,
        object,
        field,
        message,
        "the recommender already says how many replicas are needed (REFERENCE.md §4.1); rate policies that trickle towards it leave the workload short for the whole ramp (the rules are in REFERENCE.md §1.7.4)",
        format!("add a Percent policy (e.g. 100 per 15s) with selectPolicy: Max, or raise the Pods value, so maxReplicas is reachable within {budget}s; --max-scale-up-time changes this budget"),
        src,
    );
}

fn check_workload(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    target_ref: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
    uses: &Uses,
) {
    let ns = object.namespace.clone().unwrap_or_default();
    let workload = ctx
        .inputs
        .workloads
        .iter()
        .find(|w| w.kind == target_ref.kind && w.namespace == ns && w.name == target_ref.name)
        .cloned();
    match target_ref.kind.as_str() {
        "Deployment" if uses.floor => ctx.push(
            rules::FLOOR_ON_DEPLOYMENT,
            Severity::Warning,
            object,
            "spec.scaleTargetRef.kind",
            format!("a stateful floor metric is used for Deployment {}", target_ref.name),
            "a Deployment promises no deletion order, so keeping the highest state-owning index protects nothing: any pod may be removed on scale-in (REFERENCE.md §4.1)",
            "run stateful workloads as a StatefulSet, or drop the floor metric for this Deployment",
            src,
        ),
        "StatefulSet" => {
            if uses.recommendation && !uses.floor {
                ctx.push(
                    rules::NO_FLOOR,
                    Severity::Warning,
                    object,
                    "spec.metrics",
                    format!("StatefulSet {} is scaled on an absolute recommendation with no stateful-floor (or target) metric", target_ref.name),
                    "without the floor, a scale-in can remove pods that still own state (hpa_stateful_index, REFERENCE.md §4.1)",
                    "use the target metric (hpa_target_replicas, max of recommendation and floor) or add the stateful-floor metric",
                    src,
                );
            }
            if let Some(w) = &workload {
                if uses.floor && w.ordinals_start != 0 && ctx.config.scrape.kubernetes.is_none() {
                    let sts = ObjectRef {
                        kind: "StatefulSet".into(),
                        namespace: Some(w.namespace.clone()),
                        name: w.name.clone(),
                    };
                    ctx.push(
                        rules::ORDINALS_START,
                        Severity::Error,
                        &sts,
                        "spec.ordinals.start",
                        format!("ordinals start at {} and the adapter has no Kubernetes discovery (scrape.kubernetes) to learn it", w.ordinals_start),
                        format!("the floor is index − start (REFERENCE.md §4.1); without the offset it is {} too high, and every new pod raises it again, so the floor climbs to maxReplicas", w.ordinals_start),
                        "configure scrape.kubernetes so the adapter reads spec.ordinals.start, or use ordinals starting at 0",
                        &w.source,
                    );
                }
            }
        }
        _ => {}
    }
    if ctx.inputs.live
        && workload.is_none()
        && matches!(target_ref.kind.as_str(), "StatefulSet" | "Deployment")
    {
        ctx.push(
            rules::SCALE_TARGET_MISSING,
            Severity::Warning,
            object,
            "spec.scaleTargetRef",
            format!(
                "{} {}/{} does not exist",
                target_ref.kind, ns, target_ref.name
            ),
            "the HPA cannot scale a missing workload and reports FailedGetScale",
            "fix spec.scaleTargetRef or create the workload",
            src,
        );
    }
}

/// The External metric requests the HPA makes that hpa-bridge serves.
pub fn queries_for(hpa: &HorizontalPodAutoscaler, config: &Config) -> Vec<MetricQuery> {
    let ns = hpa
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = hpa.metadata.name.clone().unwrap_or_default();
    let mut out = Vec::new();
    let Some(spec) = &hpa.spec else { return out };
    for (i, m) in spec.metrics.iter().flatten().enumerate() {
        let Some(ext) = &m.external else { continue };
        if config.metric(&ext.metric.name).is_none() {
            continue;
        }
        out.push(MetricQuery {
            namespace: ns.clone(),
            hpa: name.clone(),
            metric_index: i,
            metric: ext.metric.name.to_ascii_lowercase(),
            selector: selector_text(ext.metric.selector.as_ref()),
        });
    }
    out
}

/// Group findings by code (for tests and summaries).
pub fn codes(report: &Report) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for f in &report.findings {
        *m.entry(f.code).or_default() += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_follow_github_rules() {
        assert_eq!(
            rules::VALUE_PATH.docs(),
            "docs/check.md#hb001-absolute-metric-through-the-value-path"
        );
        assert_eq!(
            rules::SCALE_DOWN_WINDOW.docs(),
            "docs/check.md#hb010-scale-down-window-shorter-than-the-recommenders"
        );
    }

    #[test]
    fn docs_have_a_section_per_rule() {
        let docs = include_str!("../../docs/check.md");
        for r in rules::ALL {
            let heading = format!("## {}: {}", r.code, r.title);
            assert!(docs.contains(&heading), "docs/check.md lacks {heading:?}");
        }
    }

    #[test]
    fn tolerance_edge_differs_by_version() {
        // REFERENCE.md §1.5: at 10 replicas, 11 is outside the band before 1.33, inside from 1.33.
        assert!(!within_tolerance(10, 11, 0.1, 0.1, true));
        assert!(within_tolerance(10, 11, 0.1, 0.1, false));
        assert!(within_tolerance(11, 12, 0.1, 0.1, true));
        assert!(!within_tolerance(9, 10, 0.1, 0.1, false));
        assert!(!within_tolerance(1000, 1001, 0.0, 0.0, false));
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("1"), Some(1.0));
        assert_eq!(parse_quantity("1000m"), Some(1.0));
        assert_eq!(parse_quantity("0.1"), Some(0.1));
        assert_eq!(parse_quantity("100m"), Some(0.1));
        assert_eq!(parse_quantity("2k"), Some(2000.0));
        assert_eq!(parse_quantity("1e3"), Some(1000.0));
        assert_eq!(parse_quantity("x"), None);
        assert_eq!(parse_quantity("1q"), None);
    }

    #[test]
    fn scale_up_simulation() {
        // Legacy: max(2c, 4) per 15 s sync: 1 -> 4 -> 8 -> 16 at t = 30.
        assert_eq!(time_to_reach_max(1, 16, &UpLimit::Legacy), Some(30));
        // Default behavior rules (Pods 4, Percent 100, Max): 2 -> 4 -> 8 at t = 15.
        let defaults = UpLimit::from_behavior(true, None);
        assert_eq!(time_to_reach_max(2, 8, &defaults), Some(15));
        // One pod per minute from 2 to 12: ten additions, the last at 9 minutes.
        let slow = UpLimit::Rules {
            policies: vec![UpPolicy {
                percent: false,
                value: 1,
                period_s: 60,
            }],
            select: "Max".into(),
            window_s: 0,
        };
        assert_eq!(time_to_reach_max(2, 12, &slow), Some(540));
        // A 60 s window delays the first step until the older recommendations leave it.
        let windowed = UpLimit::Rules {
            policies: vec![UpPolicy {
                percent: true,
                value: 100,
                period_s: 15,
            }],
            select: "Max".into(),
            window_s: 60,
        };
        assert_eq!(time_to_reach_max(2, 4, &windowed), Some(45));
        let disabled = UpLimit::Rules {
            policies: vec![],
            select: "Disabled".into(),
            window_s: 0,
        };
        assert_eq!(time_to_reach_max(2, 4, &disabled), None);
    }

    #[test]
    fn selector_text_is_sorted_like_client_go() {
        let s: K8sSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"z": "1", "hpa_target_name": "lobby"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert_eq!(
            selector_text(Some(&s)),
            "!gone,hpa_target_name=lobby,tier in (a,b),z=1"
        );
        assert_eq!(selector_text(None), "");
    }
}
