//! `hpa-bridge check`: find the HPA specs that silently defeat absolute targets.
//!
//! Pure: parsed objects (from manifests or from a cluster) and the adapter's config in,
//! findings out. Reading files lives in `manifest`, reading a cluster in `cluster`. Every
//! finding names the object and field, says why it matters and how to fix it, and links to
//! its section in docs/check.md.

pub mod cluster;
pub mod manifest;
pub mod rules;

mod answers;
mod api_service;
mod finding;
mod floor_at_zero;
mod inputs;
mod object_metric;
mod report;
mod scale_down;
mod scale_from_zero;
mod scale_up;
mod selector;
mod settings;
mod target;
mod tolerance;
mod workload;
mod writers;

use answers::*;
use api_service::*;
use floor_at_zero::*;
use object_metric::*;
use scale_down::*;
use scale_from_zero::*;
use target::*;
use workload::*;
use writers::*;

pub use finding::*;
pub use inputs::*;
pub use report::*;
pub use scale_up::*;
pub use selector::*;
pub use settings::*;
pub use tolerance::*;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscaler};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use serde::Serialize;

use hpa_bridge_hpa_model::quantity::Quantity;
use hpa_bridge_hpa_model::{
    average_value_ratio, legacy_scale_up_limit, Behavior, PolicyType, ScaleToZero, ToleranceStyle,
    Tolerances, DEFAULT_DOWNSCALE_STABILIZATION, DEFAULT_TOLERANCE, NEWEST_KUBE_MINOR, SYNC_PERIOD,
};
use hpa_bridge_rules::config::{Config, MetricKind};

/// The one APIService name the external metrics API can have (docs/hpa-behaviour.md §3.1).
pub const EXTERNAL_METRICS_APISERVICE: &str = "v1beta1.external.metrics.k8s.io";

/// The custom metrics APIService the HPA's Object metrics go through: the HPA controller's
/// client picks v1beta2, the preferred version (docs/hpa-behaviour.md §6.5).
pub const CUSTOM_METRICS_APISERVICE: &str = "v1beta2.custom.metrics.k8s.io";

/// The HPA sync period, in seconds (docs/hpa-behaviour.md §1.7.5).
const SYNC_PERIOD_S: i64 = SYNC_PERIOD.as_secs() as i64;

/// The default scale-down stabilisation window in seconds
/// (`--horizontal-pod-autoscaler-downscale-stabilization`, docs/hpa-behaviour.md §1.7.4).
const DEFAULT_SCALE_DOWN_WINDOW_S: i64 = DEFAULT_DOWNSCALE_STABILIZATION.as_secs() as i64;

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
    // An HPA KEDA made for a ScaledObject is KEDA's: its spec and metrics are not the user's
    // to fix, and it counts as the ScaledObject in HB021.
    let own: Vec<&HpaInput> = inputs
        .hpas
        .iter()
        .filter(|h| !is_keda_owned(h, &inputs.scaled_objects))
        .collect();
    for h in &own {
        check_hpa(&mut ctx, h);
    }
    check_writers(&mut ctx);
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
        hpas_checked: own.len(),
        skipped: inputs.skipped.clone(),
    }
}

/// How one HPA metric uses hpa-bridge.
#[derive(Default)]
struct Uses {
    served: bool,
    recommendation: bool,
    floor: bool,
    /// The indices of External `target` metrics with a floor (HB024).
    external_floor_targets: Vec<usize>,
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
        if let Some(obj) = &m.object {
            check_object_metric(ctx, &object, src, i, obj, target_ref, &mut uses);
            continue;
        }
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
                "client-go lower-cases the metric name in the request path (docs/hpa-behaviour.md §1.2): the adapter is asked for a different name than the HPA shows, and adapters that match names exactly answer 404",
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
                "only one adapter owns external.metrics.k8s.io (docs/hpa-behaviour.md §3.1); the request gets 404, the metric is invalid on every sync and the HPA cannot scale down (docs/hpa-behaviour.md §1.6)",
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
                if served.floor().is_some() {
                    uses.external_floor_targets.push(i);
                }
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
    if min == 0 && !ctx.settings.allows_min_zero() {
        ctx.push(
            rules::MIN_REPLICAS_ZERO,
            Severity::Error,
            &object,
            "spec.minReplicas",
            format!("minReplicas is 0, and Kubernetes {} has the HPAScaleToZero feature gate off by default", ctx.settings.kube_version),
            "minReplicas 0 needs HPAScaleToZero (alpha and off before 1.37, beta and on from 1.37, docs/hpa-behaviour.md §7.1); without it the API server rejects the HPA",
            "set minReplicas to at least 1 (the recommender's own minimum is 2, docs/hpa-behaviour.md §4.1); or, on a cluster that enables HPAScaleToZero, pass --scale-to-zero (or --kube-version 1.37 or later)",
            src,
        );
    }
    if min == 0 {
        check_scale_from_zero(ctx, &object, src, hpa, target_ref, &uses);
        check_floor_at_zero(ctx, &object, src, hpa, &uses);
    }
    let behavior = spec.behavior.as_ref();
    let up = behavior.and_then(|b| b.scale_up.as_ref());
    let down = behavior.and_then(|b| b.scale_down.as_ref());
    check_tolerance(ctx, &object, src, up, down, min, max);
    check_scale_down_window(ctx, &object, src, down);
    check_scale_up_speed(ctx, &object, src, behavior.is_some(), up, min, max);
    check_workload(ctx, &object, src, target_ref, &uses);
}
