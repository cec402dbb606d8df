//! What `explain` read before it explains anything: the HPA object as the API server returned
//! it, its scale target, the target's pods, and the answers hpa-bridge served. Plain data; the
//! reading is in [`super::read`].

use serde_json::Value;

use hpa_bridge_rules::clock::Millis;

/// Everything one explanation is computed from.
#[derive(Clone, Debug)]
pub struct Observation {
    /// The `autoscaling/v2` HorizontalPodAutoscaler, as JSON.
    pub hpa: Value,
    /// The scale subresource of `spec.scaleTargetRef`, or why it could not be read.
    pub scale: Result<ScaleView, String>,
    /// The pods the target's selector selects, or why they could not be counted.
    pub pods: Result<PodCount, String>,
    /// The answers on the adapter's status port, or why it could not be read.
    pub served: Result<Vec<ServedAnswer>, String>,
    /// The answers hpa-bridge gave in the namespace, per scope (`/status/history`), or why
    /// they could not be read.
    pub history: Result<Vec<AnswerHistory>, String>,
    /// Other HPAs in the namespace whose `scaleTargetRef` names the same target.
    pub other_hpas_on_target: Vec<String>,
    /// The Service that owns `v1beta1.external.metrics.k8s.io` when it is not hpa-bridge's
    /// (`namespace/name`, or `local` for an APIService without a service).
    pub foreign_external_owner: Option<String>,
    /// The Kubernetes minor version of the control plane (decides the controller's rules).
    pub kube_minor: u32,
    /// When the explanation is made.
    pub now_ms: Millis,
}

/// The answers hpa-bridge gave for one metric and scope, oldest first.
#[derive(Clone, Debug, PartialEq)]
pub struct AnswerHistory {
    pub metric: String,
    /// The selector of an External query, or `Kind/name` (and any metric label selector) of
    /// an Object query.
    pub scope: String,
    /// When each answer was given, and its value (`None` for a refusal).
    pub answers: Vec<(Millis, Option<u64>)>,
}

impl AnswerHistory {
    /// Reads the `scopes` of a `/status/history` document; entries it cannot read are skipped.
    pub fn from_history_document(doc: &Value) -> Vec<AnswerHistory> {
        let scopes = doc["scopes"].as_array().cloned().unwrap_or_default();
        scopes
            .iter()
            .map(|s| AnswerHistory {
                metric: s["metric"].as_str().unwrap_or_default().into(),
                scope: s["scope"].as_str().unwrap_or_default().into(),
                answers: s["entries"]
                    .as_array()
                    .map(|es| {
                        es.iter()
                            .filter_map(|e| {
                                let at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
                                    serde_json::from_value(e["at"].clone()).ok()?;
                                Some((at.0.as_millisecond(), e["served"]["value"].as_u64()))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    }
}

/// `autoscaling/v1` Scale as the controller reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleView {
    pub spec_replicas: i32,
    pub status_replicas: i32,
    /// `status.selector`; empty when the workload reports none.
    pub selector: String,
}

/// The target's pods: all of them, and those Running and Ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodCount {
    pub pods: i32,
    pub ready: i32,
}

/// One row of the adapter's `/status`: what hpa-bridge answers for a metric, a namespace and a
/// selector (External) or a described object (Object).
#[derive(Clone, Debug, PartialEq)]
pub struct ServedAnswer {
    pub namespace: String,
    pub metric: String,
    /// The label selector as the HPA sends it (empty for none).
    pub selector: String,
    /// `Kind/name` of an Object row.
    pub object: Option<String>,
    /// The served value, or `None` for a refusal.
    pub value: Option<u64>,
    /// The refusal kind (`Stale`, `Partial`, ...) when refused.
    pub refusal: Option<String>,
    /// hpa-bridge's sentence: why this value, or why no value.
    pub reason: String,
}

impl ServedAnswer {
    /// An answer the adapter evaluated in-process, as its `/status` row would read.
    pub fn from_answer(
        namespace: &str,
        selector: &str,
        object: Option<String>,
        answer: &hpa_bridge_rules::policy::Answer,
    ) -> ServedAnswer {
        use hpa_bridge_rules::policy::Outcome;
        let (value, refusal) = match &answer.outcome {
            Outcome::Value { value, .. } => (Some(*value), None),
            Outcome::Refused { kind, .. } => (
                None,
                serde_json::to_value(kind)
                    .ok()
                    .and_then(|k| k.as_str().map(str::to_string)),
            ),
        };
        ServedAnswer {
            namespace: namespace.to_string(),
            metric: answer.metric.clone(),
            selector: selector.to_string(),
            object,
            value,
            refusal,
            reason: answer.reason.clone(),
        }
    }

    /// Reads the `workloads` of a `/status` document; rows it cannot read are skipped.
    pub fn from_status_document(doc: &Value) -> Vec<ServedAnswer> {
        let rows = doc["workloads"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .filter_map(|w| {
                let answer = &w["answer"];
                let outcome = &answer["outcome"];
                let value = match outcome["state"].as_str()? {
                    "value" => Some(outcome["value"].as_u64()?),
                    _ => None,
                };
                let object = w["object"].as_object().and_then(|o| {
                    Some(format!(
                        "{}/{}",
                        o.get("kind")?.as_str()?,
                        o.get("name")?.as_str()?
                    ))
                });
                Some(ServedAnswer {
                    namespace: w["namespace"].as_str()?.to_string(),
                    metric: w["metric"].as_str()?.to_string(),
                    selector: w["selector"].as_str().unwrap_or_default().to_string(),
                    object,
                    value,
                    refusal: outcome["kind"].as_str().map(str::to_string),
                    reason: answer["reason"].as_str().unwrap_or_default().to_string(),
                })
            })
            .collect()
    }
}
