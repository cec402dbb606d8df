//! From an [`Observation`] to an [`Explanation`]: the HPA's next move, per metric, computed by
//! the HPA model with the HPA's own spec and status (docs/explain.md). Pure: no I/O, the
//! time is a parameter.
//!
//! The controller keeps its stabilisation and rate memory in memory only. What the HPA object
//! shows of it is `status.lastScaleTime`: the controller then made a recommendation at least as
//! high (scale-up) or as low (scale-in) as the count it set. `explain` seeds the model with
//! that one recommendation, so a held scale-in is shown as held at least until
//! `lastScaleTime` plus the window; a later recommendation the object does not show can hold
//! it longer. Rate policies are computed as if no scale event other than the last fell in
//! their period.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::observation::{AnswerHistory, Observation, PodCount, ScaleView, ServedAnswer};
use super::replay::{self, model_time, PastSync};
use hpa_bridge_hpa_model::quantity::Quantity;
use hpa_bridge_hpa_model::*;
use hpa_bridge_rules::clock::{rfc3339, Millis};

/// The explanation, in the field names of `explain -o json` (docs/explain.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub hpa: String,
    pub scale_target: ScaleTargetOut,
    pub metrics: Vec<MetricOut>,
    /// The metric whose proposal decides (the first highest valid proposal).
    pub winner: Option<String>,
    /// The highest valid proposal over the metrics.
    pub proposed: Option<i32>,
    /// The count after stabilisation, before the rate limits and `[min, max]`.
    pub before_clamp: Option<i32>,
    pub clamp: ClampOut,
    pub stabilization: StabilizationOut,
    pub rate_limit: RateLimitOut,
    pub next: NextOut,
    /// Facts that change how to read the answer (two HPAs on one target, another adapter).
    pub notes: Vec<String>,
    /// What could not be read, and what was assumed instead.
    pub unseen: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTargetOut {
    pub kind: String,
    pub name: String,
    pub spec_replicas: i32,
    pub status_replicas: i32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricOut {
    pub name: String,
    #[serde(rename = "type")]
    pub metric_type: String,
    /// What the HPA reads, as a quantity: the sum for a Value target or a served answer,
    /// the average per pod for a Pods, Resource or AverageValue status.
    pub value: Option<String>,
    /// `AverageValue 1`, `Value 10`, `Utilization 60%`.
    pub target: String,
    pub proposed_replicas: Option<i32>,
    pub valid: bool,
    /// Why the metric is invalid (hpa-bridge's refusal text when it refused), or how the
    /// proposal came about.
    pub reason: String,
    /// `hpa-bridge` (the adapter's status port) or `hpaStatus` (the HPA's `currentMetrics`).
    pub source: &'static str,
    /// False when the proposal is approximate: see `reason`.
    pub exact: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClampOut {
    pub min: i32,
    pub max: i32,
    pub applied: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StabilizationOut {
    /// The window of the direction the metrics point to, in seconds.
    pub window_seconds: u64,
    /// The recommendations inside that window, the one of this sync included.
    pub recommendations: Vec<RecommendationOut>,
    /// When the recommendations that hold a scale-in leave the window (RFC 3339); absent
    /// when nothing is held.
    pub blocks_until: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationOut {
    pub replicas: i32,
    pub at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitOut {
    /// The policy of the direction the count moves in, as the HPA has it.
    pub policy: Option<String>,
    /// The count the policy allows, when it is what limits.
    pub value: Option<i32>,
    pub applied: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NextOut {
    pub desired_replicas: i32,
    /// The latest the next sync happens (RFC 3339): syncs are 15 s apart.
    pub at: String,
    /// `at`, in milliseconds, for the adapter's check of its prediction.
    #[serde(skip)]
    pub at_ms: Millis,
    /// The sync period the next sync is timed by (replayed, or the default).
    #[serde(skip)]
    pub period_ms: Millis,
    pub why: String,
}

/// An HPA the model cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("the HPA's spec cannot be read: {0}")]
    Spec(String),
}

/// Explains the HPA's next sync.
pub fn explain(obs: &Observation) -> Result<Explanation, ExplainError> {
    let hpa = &obs.hpa;
    let namespace = hpa["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = hpa["metadata"]["name"].as_str().unwrap_or_default();
    let spec: HpaSpec = serde_json::from_value(hpa["spec"].clone())
        .map_err(|e| ExplainError::Spec(e.to_string()))?;
    let config = ControllerConfig::for_kube_minor(obs.kube_minor);
    let model = Hpa::new(spec.clone(), config).map_err(|e| ExplainError::Spec(e.to_string()))?;
    let status = &hpa["status"];
    let mut notes = Vec::new();
    let mut unseen = Vec::new();
    let (scale, pods, served) = what_was_seen(obs, &spec, &mut unseen);
    let (mut model, timing) = controller_memory(obs, &spec, config, model, &scale, &mut notes);
    let now = model_time(timing.at_ms);
    model.seed_conditions(conditions(status));

    let (inputs, sources): (Vec<_>, Vec<_>) = spec
        .metrics
        .iter()
        .enumerate()
        .map(|(i, m)| metric_input(m, i, namespace, served, status, scale.status_replicas))
        .unzip();
    if obs.served.is_ok() && !sources.iter().any(|s| s.from_adapter) {
        notes.push(
            "this HPA reads no metric hpa-bridge serves: it is explained from its own status and currentMetrics".into(),
        );
    }
    let selector = target_selector(obs, name, namespace, &scale, &mut notes);
    if let Some(owner) = &obs.foreign_external_owner {
        notes.push(format!(
            "v1beta1.external.metrics.k8s.io is served by {owner}, not hpa-bridge: the HPA's External metrics come from that adapter, whatever hpa-bridge's status port shows"
        ));
    }
    let input = SyncInput {
        spec_replicas: scale.spec_replicas,
        status_replicas: scale.status_replicas,
        ready_pods: pods.ready,
        pods: pods.pods,
        metrics: inputs,
        selector,
    };
    let outcome = model.sync(now, &input);

    let metrics: Vec<MetricOut> = spec
        .metrics
        .iter()
        .zip(&outcome.metrics)
        .zip(&sources)
        .map(|((m, o), src)| metric_out(m, o, src, &input))
        .collect();
    let winner = winner(&outcome);
    let limit = match outcome.decision {
        Decision::Normalized { limit, .. } => Some(limit),
        _ => None,
    };
    let clamp_applied = matches!(limit, Some(Limit::TooFewReplicas | Limit::TooManyReplicas))
        && outcome.stabilized_replicas != Some(outcome.replicas)
        || matches!(
            outcome.decision,
            Decision::AboveMaxReplicas | Decision::BelowMinReplicas
        );
    let stabilization = stabilization_out(&model, &outcome, timing.at_ms);
    let rate_limit = rate_limit_out(&spec, &model, &outcome, limit);
    let why = why(
        &spec,
        &outcome,
        &metrics,
        winner.as_ref(),
        &stabilization,
        &rate_limit,
    );
    Ok(Explanation {
        hpa: format!("{namespace}/{name}"),
        scale_target: ScaleTargetOut {
            kind: hpa["spec"]["scaleTargetRef"]["kind"]
                .as_str()
                .unwrap_or_default()
                .into(),
            name: hpa["spec"]["scaleTargetRef"]["name"]
                .as_str()
                .unwrap_or_default()
                .into(),
            spec_replicas: scale.spec_replicas,
            status_replicas: scale.status_replicas,
        },
        metrics,
        winner: winner.map(|(n, _)| n),
        proposed: outcome.metric_replicas,
        before_clamp: outcome.stabilized_replicas,
        clamp: ClampOut {
            min: spec.min_replicas(),
            max: spec.max_replicas,
            applied: clamp_applied,
        },
        stabilization,
        rate_limit,
        next: NextOut {
            desired_replicas: outcome.replicas,
            at: rfc3339(timing.next_at),
            at_ms: timing.next_at,
            period_ms: timing.period_ms,
            why,
        },
        notes,
        unseen,
    })
}

/// The target's scale, its pods and hpa-bridge's answers as read; each one that could not be
/// read is stood in for by what the HPA's own object shows, and said in `unseen`.
fn what_was_seen<'o>(
    obs: &'o Observation,
    spec: &HpaSpec,
    unseen: &mut Vec<String>,
) -> (ScaleView, PodCount, &'o [ServedAnswer]) {
    let status = &obs.hpa["status"];
    let current_from_status = status["currentReplicas"].as_i64().unwrap_or(0) as i32;
    let scale = match &obs.scale {
        Ok(s) => s.clone(),
        Err(e) => {
            unseen.push(format!(
                "the scale target ({e}); its replicas are taken from the HPA's status.currentReplicas ({current_from_status}) and its selector is assumed valid"
            ));
            ScaleView {
                spec_replicas: current_from_status,
                status_replicas: current_from_status,
                selector: "(unknown)".into(),
            }
        }
    };
    let pods = match &obs.pods {
        Ok(p) => *p,
        Err(e) => {
            // Only a Pods or Resource metric's proposal counts the pods (docs/explain.md).
            let counts_pods = spec.metrics.iter().any(|m| {
                !matches!(
                    m.source_type,
                    MetricSourceType::External | MetricSourceType::Object
                )
            });
            if counts_pods {
                unseen.push(format!(
                    "the target's pods ({e}); every one of status.replicas ({}) is taken as ready",
                    scale.status_replicas
                ));
            }
            PodCount {
                pods: scale.status_replicas,
                ready: scale.status_replicas,
            }
        }
    };
    let served: &[ServedAnswer] = match &obs.served {
        Ok(rows) => rows,
        Err(e) => {
            unseen.push(format!(
                "hpa-bridge's answers ({e}); External and Object values come from the HPA's status.currentMetrics instead"
            ));
            &[]
        }
    };
    (scale, pods, served)
}

/// When the model runs: the next sync's time, and the period between syncs.
struct Timing {
    at_ms: Millis,
    next_at: Millis,
    period_ms: Millis,
}

/// The controller's memory: replayed from hpa-bridge's history of this HPA's answers when the
/// replay ends where the HPA is (replay.rs), else seeded from what the object shows. The model
/// runs at the next sync: one period after the last one hpa-bridge saw, or now when unknown
/// (and the next sync is then said to come one default period from now).
fn controller_memory(
    obs: &Observation,
    spec: &HpaSpec,
    config: ControllerConfig,
    mut model: Hpa,
    scale: &ScaleView,
    notes: &mut Vec<String>,
) -> (Hpa, Timing) {
    let last_scale = obs.hpa["status"]["lastScaleTime"]
        .as_str()
        .and_then(parse_time);
    let replayed = obs.history.as_ref().ok().and_then(|h| {
        let past = past_syncs(spec, h)?;
        replay::replay(spec, config, &past, scale.spec_replicas, last_scale)
    });
    if let Some(r) = replayed {
        notes.push(format!(
            "the controller's memory (its stabilization windows and scale events) is replayed from hpa-bridge's last {} answers to this HPA",
            r.syncs
        ));
        let period_ms = r.period_ms.unwrap_or(SYNC_PERIOD.as_millis() as Millis);
        let at = (r.last_sync_ms + period_ms).max(obs.now_ms);
        return (
            r.model,
            Timing {
                at_ms: at,
                next_at: at,
                period_ms,
            },
        );
    }
    if obs.history.is_ok() && spec.has_object_or_external_metric() {
        notes.push(
            "hpa-bridge's history of this HPA's answers does not replay to its current state (another client asked too, a metric is not hpa-bridge's, or the history is short): the controller's memory is approximated from the object".into(),
        );
    }
    let mut recommendations = vec![TimestampedRecommendation {
        replicas: scale.spec_replicas,
        at: Duration::ZERO,
    }];
    if let Some(at) = last_scale {
        recommendations.push(TimestampedRecommendation {
            replicas: scale.spec_replicas,
            at: model_time(at),
        });
    }
    model.seed_memory(recommendations, Vec::new(), Vec::new());
    let period_ms = SYNC_PERIOD.as_millis() as Millis;
    (
        model,
        Timing {
            at_ms: obs.now_ms,
            next_at: obs.now_ms + period_ms,
            period_ms,
        },
    )
}

/// The target's selector as the controller judges it: ambiguous when other HPAs scale the
/// same target (the controller then refuses to scale), missing, or valid.
fn target_selector(
    obs: &Observation,
    name: &str,
    namespace: &str,
    scale: &ScaleView,
    notes: &mut Vec<String>,
) -> TargetSelector {
    if !obs.other_hpas_on_target.is_empty() {
        let mut hpas = vec![format!("{{{name} {namespace}}}")];
        hpas.extend(
            obs.other_hpas_on_target
                .iter()
                .map(|o| format!("{{{o} {namespace}}}")),
        );
        notes.push(format!(
            "{} also scale(s) this target: the controller refuses to scale pods that two HPAs select (AmbiguousSelector); delete or retarget one",
            obs.other_hpas_on_target.join(", ")
        ));
        TargetSelector::Ambiguous {
            selector: scale.selector.clone(),
            hpas,
        }
    } else if scale.selector.is_empty() {
        TargetSelector::Missing
    } else {
        TargetSelector::Valid
    }
}

/// The metric whose proposal decides, as Go picks it: `if replicas == 0 || proposal >
/// replicas` over the valid metrics, in order.
fn winner(outcome: &SyncOutcome) -> Option<(String, i32)> {
    let mut winner: Option<(String, i32)> = None;
    for o in &outcome.metrics {
        if let Ok(p) = &o.result {
            if winner
                .as_ref()
                .is_none_or(|(_, r)| *r == 0 || p.replicas > *r)
            {
                winner = Some((o.name.clone(), p.replicas));
            }
        }
    }
    winner
}

/// An RFC 3339 time of the HPA object, read as the API types read it.
fn parse_time(s: &str) -> Option<Millis> {
    let t: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_json::from_value(Value::String(s.to_string())).ok()?;
    Some(t.0.as_millisecond())
}

/// `status.conditions` as the model keeps them.
fn conditions(status: &Value) -> Vec<Condition> {
    let list = status["conditions"].as_array().cloned().unwrap_or_default();
    list.iter()
        .filter_map(|c| {
            let condition_type = match c["type"].as_str()? {
                "AbleToScale" => ConditionType::AbleToScale,
                "ScalingActive" => ConditionType::ScalingActive,
                "ScalingLimited" => ConditionType::ScalingLimited,
                "ScaledToZero" => ConditionType::ScaledToZero,
                _ => return None,
            };
            Some(Condition {
                condition_type,
                status: c["status"].as_str()? == "True",
                reason: c["reason"].as_str().unwrap_or_default().into(),
                message: c["message"].as_str().unwrap_or_default().into(),
                last_transition: c["lastTransitionTime"]
                    .as_str()
                    .and_then(parse_time)
                    .map(model_time)
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// Where one metric's value came from.
struct MetricSource {
    from_adapter: bool,
    /// Why the value is approximate, when it is.
    approximate: Option<String>,
}

/// The scope hpa-bridge names a metric's query by: the selector of an External metric,
/// `Kind/name` of an Object metric's described object.
pub(crate) fn scope_of(m: &MetricSpec) -> Option<(bool, String)> {
    match (&m.external, &m.object) {
        (Some(e), _) => Some((
            false,
            e.metric
                .selector
                .as_ref()
                .and_then(|s| s.to_query().ok().flatten())
                .unwrap_or_default(),
        )),
        (None, Some(o)) => Some((
            true,
            format!("{}/{}", o.described_object.kind, o.described_object.name),
        )),
        _ => None,
    }
}

/// The HPA's past syncs as hpa-bridge answered them, when every metric is one hpa-bridge
/// serves and has a history: each answer to the first metric is a sync, and the other metrics'
/// answers within a couple of seconds of it are what that sync read.
fn past_syncs(spec: &HpaSpec, history: &[AnswerHistory]) -> Option<Vec<PastSync>> {
    let per_metric: Vec<&AnswerHistory> = spec
        .metrics
        .iter()
        .map(|m| {
            let name = m.metric_name()?;
            let (object, scope) = scope_of(m)?;
            history.iter().find(|h| {
                h.metric.eq_ignore_ascii_case(name)
                    && if object {
                        h.scope == scope || h.scope.starts_with(&format!("{scope} "))
                    } else {
                        h.scope == scope
                    }
            })
        })
        .collect::<Option<_>>()?;
    let input = |v: Option<u64>| match v {
        Some(v) => Ok(vec![v as f64]),
        None => Err("refused".to_string()),
    };
    let syncs = per_metric.first()?.answers.iter().map(|&(at_ms, first)| {
        let mut inputs = vec![input(first)];
        for h in &per_metric[1..] {
            let near = h
                .answers
                .iter()
                .filter(|(t, _)| (t - at_ms).abs() <= 2_000)
                .min_by_key(|(t, _)| (t - at_ms).abs());
            inputs.push(match near {
                Some(&(_, v)) => input(v),
                None => Err("not asked at this sync".into()),
            });
        }
        PastSync { at_ms, inputs }
    });
    Some(syncs.collect())
}

/// One metric's input to the model: hpa-bridge's answer for an External or Object metric it
/// serves, else what the HPA's `status.currentMetrics[i]` shows.
fn metric_input(
    m: &MetricSpec,
    index: usize,
    namespace: &str,
    served: &[ServedAnswer],
    status: &Value,
    status_replicas: i32,
) -> (MetricInput, MetricSource) {
    let name = m.metric_name().unwrap_or_default();
    let scope = scope_of(m);
    let row = served.iter().find(|r| {
        r.namespace == namespace
            && r.metric.eq_ignore_ascii_case(name)
            && match &scope {
                Some((false, selector)) => r.object.is_none() && *selector == r.selector,
                Some((true, object)) => r.object.as_deref() == Some(object.as_str()),
                None => false,
            }
    });
    if let Some(r) = row {
        let input = match r.value {
            Some(v) => Ok(vec![v as f64]),
            None => Err(format!(
                "hpa-bridge refused ({}): {}",
                r.refusal.as_deref().unwrap_or("refused"),
                r.reason
            )),
        };
        return (
            input,
            MetricSource {
                from_adapter: true,
                approximate: None,
            },
        );
    }
    let current = status_metric(status, m, index);
    let Some(current) = current else {
        return (
            Err("the HPA's status shows no current value for it (the controller could not read it at its last sync)".into()),
            MetricSource {
                from_adapter: false,
                approximate: None,
            },
        );
    };
    let q = |field: &str| {
        current[field]
            .as_str()
            .and_then(|s| Quantity::parse(s).ok())
            .map(|q| q.as_f64())
    };
    let source = |approximate: Option<String>| MetricSource {
        from_adapter: false,
        approximate,
    };
    match m.source_type {
        MetricSourceType::External | MetricSourceType::Object => {
            if let Some(v) = q("value") {
                return (Ok(vec![v]), source(None));
            }
            match q("averageValue") {
                // The status shows ceil(sum / status.replicas): the sum is known to a pod's
                // rounding.
                Some(avg) => (
                    Ok(vec![avg * f64::from(status_replicas.max(1))]),
                    source((status_replicas > 1).then(|| {
                        "the sum is read back from the HPA's per-pod average, which the controller rounds up".to_string()
                    })),
                ),
                None => (Err("the HPA's status shows no value for it".into()), source(None)),
            }
        }
        _ => {
            let v = current["averageUtilization"]
                .as_i64()
                .map(|u| u as f64)
                .or_else(|| q("averageValue"));
            match v {
                Some(v) => (Ok(vec![v]), source(None)),
                None => (
                    Err("the HPA's status shows no average for it".into()),
                    source(None),
                ),
            }
        }
    }
}

/// `status.currentMetrics` entry of spec metric `index`: the same position when its type
/// matches (the controller writes one status per spec metric, in order), else the first of
/// the same type and name.
fn status_metric<'a>(status: &'a Value, m: &MetricSpec, index: usize) -> Option<&'a Value> {
    let list = status["currentMetrics"].as_array()?;
    let (key, ty) = match m.source_type {
        MetricSourceType::External => ("external", "External"),
        MetricSourceType::Object => ("object", "Object"),
        MetricSourceType::Pods => ("pods", "Pods"),
        MetricSourceType::Resource => ("resource", "Resource"),
        MetricSourceType::ContainerResource => ("containerResource", "ContainerResource"),
    };
    let name = m.metric_name().unwrap_or_default();
    let named = |e: &Value| {
        e["type"] == ty
            && (e[key]["metric"]["name"].as_str() == Some(name)
                || e[key]["name"].as_str() == Some(name))
    };
    let entry = list
        .get(index)
        .filter(|e| named(e))
        .or_else(|| list.iter().find(|e| named(e)))?;
    let current = &entry[key]["current"];
    (!current.is_null()).then_some(current)
}

fn target_text(m: &MetricSpec) -> String {
    let Some(t) = m.target() else {
        return String::new();
    };
    if let Some(q) = &t.average_value {
        format!("AverageValue {}", q.as_str())
    } else if let Some(q) = &t.value {
        format!("Value {}", q.as_str())
    } else if let Some(u) = t.average_utilization {
        format!("Utilization {u}%")
    } else {
        String::new()
    }
}

fn type_text(t: MetricSourceType) -> String {
    format!("{t:?}")
}

fn metric_out(
    m: &MetricSpec,
    o: &MetricOutcome,
    src: &MetricSource,
    input: &SyncInput,
) -> MetricOut {
    let source = if src.from_adapter {
        "hpa-bridge"
    } else {
        "hpaStatus"
    };
    match &o.result {
        Ok(p) => {
            let mut reason = proposal_reason(m, p, input);
            let mut exact = p.exact && src.approximate.is_none();
            if !p.exact {
                reason.push_str(&format!(
                    "; approximate: {} of {} pods are ready, and the controller counts unready and missing pods in ways the HPA's average does not show",
                    input.ready_pods, input.pods
                ));
            }
            if let Some(a) = &src.approximate {
                reason.push_str(&format!("; approximate: {a}"));
                exact = false;
            }
            MetricOut {
                name: o.name.clone(),
                metric_type: type_text(m.source_type),
                value: Some(milli_text(
                    match m.source_type {
                        MetricSourceType::Pods | MetricSourceType::Resource => p.current_milli,
                        _ => p.usage_milli,
                    },
                    m,
                )),
                target: target_text(m),
                proposed_replicas: Some(p.replicas),
                valid: true,
                reason,
                source,
                exact,
            }
        }
        Err(e) => MetricOut {
            name: o.name.clone(),
            metric_type: type_text(m.source_type),
            value: None,
            target: target_text(m),
            proposed_replicas: None,
            valid: false,
            reason: e.clone(),
            source,
            exact: true,
        },
    }
}

/// A milli value as a quantity text; a utilization as percent.
fn milli_text(milli: i64, m: &MetricSpec) -> String {
    if m.target().is_some_and(|t| t.average_utilization.is_some()) {
        return format!("{}%", milli / 1000);
    }
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

fn proposal_reason(m: &MetricSpec, p: &MetricProposal, input: &SyncInput) -> String {
    let band = |baseline: &str, n: i32| {
        format!(
            "ratio {:.3} is inside the tolerance band, so it proposes {baseline} ({n})",
            p.ratio
        )
    };
    match (m.source_type, p.formula) {
        (MetricSourceType::Pods | MetricSourceType::Resource, _) => {
            if p.within_tolerance {
                band("spec.replicas", p.replicas)
            } else {
                format!(
                    "average over target is {:.3}: ceil({:.3} × {} ready pods) = {}",
                    p.ratio, p.ratio, input.ready_pods, p.replicas
                )
            }
        }
        (_, TargetFormula::AverageValue { milli }) => {
            if p.within_tolerance {
                band("status.replicas", p.replicas)
            } else {
                format!(
                    "ceil({} / {}) = {} (ratio {:.3} against status.replicas {} is outside the tolerance band)",
                    milli_plain(p.usage_milli),
                    milli_plain(milli),
                    p.replicas,
                    p.ratio,
                    input.status_replicas
                )
            }
        }
        (_, TargetFormula::Value { .. }) => {
            if input.spec_replicas == 0 {
                format!("from 0: ceil(ratio {:.3}) = {}", p.ratio, p.replicas)
            } else if p.within_tolerance {
                band("spec.replicas", p.replicas)
            } else {
                format!(
                    "ceil(ratio {:.3} × {} ready pods) = {} (a Value target multiplies by the pods)",
                    p.ratio, input.ready_pods, p.replicas
                )
            }
        }
    }
}

fn milli_plain(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{}", milli as f64 / 1000.0)
    }
}

fn stabilization_out(model: &Hpa, outcome: &SyncOutcome, now_ms: Millis) -> StabilizationOut {
    let behavior = model.spec().behavior.clone();
    let down = behavior
        .as_ref()
        .map(|b| {
            b.resolved_scale_down(model.config().downscale_stabilization)
                .stabilization_window
        })
        .unwrap_or(model.config().downscale_stabilization);
    let up = behavior
        .as_ref()
        .map(|b| b.resolved_scale_up().stabilization_window)
        .unwrap_or(Duration::ZERO);
    let proposed = outcome
        .metric_replicas
        .unwrap_or(outcome.current_replicas)
        .max(0);
    let window = if proposed < outcome.current_replicas {
        down
    } else {
        up
    };
    let now = model_time(now_ms);
    let in_window: Vec<&TimestampedRecommendation> = model
        .recommendations()
        .iter()
        .filter(|r| r.at + window >= now && !window.is_zero() || r.at == now)
        .collect();
    let held = matches!(
        outcome.decision,
        Decision::Normalized {
            stabilization: Stabilization::ScaleDownStabilized,
            ..
        }
    );
    let blocks_until = held
        .then(|| {
            in_window
                .iter()
                .filter(|r| r.replicas > proposed && r.at != now)
                .map(|r| r.at + window)
                .max()
        })
        .flatten()
        .map(|t| rfc3339(t.as_millis() as Millis));
    StabilizationOut {
        window_seconds: window.as_secs(),
        recommendations: in_window
            .iter()
            .map(|r| RecommendationOut {
                replicas: r.replicas,
                at: rfc3339(r.at.as_millis() as Millis),
            })
            .collect(),
        blocks_until,
    }
}

fn policy_text(rules: &ResolvedRules) -> String {
    let policies: Vec<String> = rules
        .policies
        .iter()
        .map(|p| match p.policy_type {
            PolicyType::Pods => format!("{} Pods per {} s", p.value, p.period_seconds),
            PolicyType::Percent => format!("{} Percent per {} s", p.value, p.period_seconds),
        })
        .collect();
    format!("{} ({:?})", policies.join(", "), rules.select_policy)
}

fn rate_limit_out(
    spec: &HpaSpec,
    model: &Hpa,
    outcome: &SyncOutcome,
    limit: Option<Limit>,
) -> RateLimitOut {
    let up = outcome
        .stabilized_replicas
        .unwrap_or(outcome.current_replicas)
        > outcome.current_replicas;
    let policy = match &spec.behavior {
        None => up.then(|| "max(2 × current, 4) per sync (no behavior)".to_string()),
        Some(b) if up => Some(policy_text(&b.resolved_scale_up())),
        Some(b) => Some(policy_text(
            &b.resolved_scale_down(model.config().downscale_stabilization),
        )),
    };
    let applied = matches!(limit, Some(Limit::ScaleUpLimit | Limit::ScaleDownLimit))
        && outcome.stabilized_replicas != Some(outcome.replicas);
    RateLimitOut {
        policy,
        value: applied.then_some(outcome.replicas),
        applied,
    }
}

/// One sentence: what the next sync does and the one rule that decides it.
fn why(
    spec: &HpaSpec,
    outcome: &SyncOutcome,
    metrics: &[MetricOut],
    winner: Option<&(String, i32)>,
    stabilization: &StabilizationOut,
    rate: &RateLimitOut,
) -> String {
    let current = outcome.current_replicas;
    let desired = outcome.replicas;
    let first_invalid = metrics.iter().find(|m| !m.valid);
    let moves = if desired == current {
        format!("keeps {current} replicas")
    } else {
        format!("scales from {current} to {desired}")
    };
    match outcome.decision {
        Decision::SelectorRefused { .. } => format!(
            "The HPA {moves}: {}.",
            outcome
                .condition(ConditionType::ScalingActive)
                .map(|c| c.message.clone())
                .unwrap_or_default()
        ),
        Decision::ScalingDisabled => {
            if spec.min_replicas() == 0 {
                "The HPA keeps 0 replicas: the target is at 0 and the HPA did not put it there (no ScaledToZero=True condition), so autoscaling is paused until someone scales it above 0.".to_string()
            } else {
                format!("The HPA keeps 0 replicas: the target was scaled to 0 and minReplicas is {}, which pauses autoscaling until someone scales it above 0.", spec.min_replicas())
            }
        }
        Decision::AboveMaxReplicas => format!(
            "The HPA {moves}: the target is above maxReplicas {}, so the metrics are not read.",
            spec.max_replicas
        ),
        Decision::BelowMinReplicas => format!(
            "The HPA {moves}: the target is below minReplicas {}, so the metrics are not read.",
            spec.min_replicas()
        ),
        Decision::AllMetricsInvalid { .. } => format!(
            "The HPA keeps {current} replicas: no metric is valid; {} ({}).",
            first_invalid.map(|m| m.name.as_str()).unwrap_or("?"),
            first_invalid.map(|m| m.reason.as_str()).unwrap_or("?")
        ),
        Decision::ScaleDownBlockedByInvalidMetric { proposed, .. } => format!(
            "The HPA keeps {current} replicas: the valid metrics propose {proposed}, but {} is invalid ({}), and an invalid metric blocks any scale-in.",
            first_invalid.map(|m| m.name.as_str()).unwrap_or("?"),
            first_invalid.map(|m| m.reason.as_str()).unwrap_or("?")
        ),
        Decision::Normalized {
            stabilization: stab,
            limit,
            ..
        } => {
            let (w, p) = winner.cloned().unwrap_or_default();
            let proposed = outcome.metric_replicas.unwrap_or(p).max(0);
            let stabilized = outcome.stabilized_replicas.unwrap_or(proposed);
            let by = format!("{w} proposes {proposed}");
            let min = spec.min_replicas();
            let max = spec.max_replicas;
            if stabilized != proposed {
                let dir = if stab == Stabilization::ScaleDownStabilized {
                    format!(
                        "the scale-down stabilization window ({} s) holds a recommendation of {stabilized}{}",
                        stabilization.window_seconds,
                        stabilization
                            .blocks_until
                            .as_ref()
                            .map(|t| format!(" until {t}"))
                            .unwrap_or_default()
                    )
                } else {
                    format!(
                        "the scale-up stabilization window ({} s) holds a recommendation of {stabilized}",
                        stabilization.window_seconds
                    )
                };
                return format!("The HPA {moves}: {by}, but {dir}.");
            }
            if desired != stabilized {
                let rule = match limit {
                    Limit::ScaleUpLimit | Limit::ScaleDownLimit => format!(
                        "the rate policy {} allows {desired} this sync",
                        rate.policy.as_deref().unwrap_or("?")
                    ),
                    Limit::TooManyReplicas => format!("maxReplicas is {max}"),
                    Limit::TooFewReplicas => format!("minReplicas is {min}"),
                    Limit::DesiredWithinRange => String::new(),
                };
                return format!("The HPA {moves}: {by}, but {rule}.");
            }
            if desired == current {
                if let Some(m) = metrics.iter().find(|m| m.name == w && m.valid) {
                    if m.reason.contains("tolerance band") && m.reason.starts_with("ratio") {
                        return format!(
                            "The HPA keeps {current} replicas: {w}'s {}.",
                            m.reason
                        );
                    }
                }
                return format!("The HPA keeps {current} replicas: {by}.");
            }
            format!("The HPA {moves}: {by}.")
        }
    }
}
