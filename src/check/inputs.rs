//! What `check` reads: HPAs, workloads, the APIService and the adapter's answers, and the
//! queries it asks the adapter.

use super::*;

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
    /// Who else sets `spec.replicas`, in words, when something does: the manifest itself, or on
    /// a live object the last applied configuration or a server-side apply manager (HB022).
    pub replicas_fixed_by: Option<String>,
    /// `spec.template.metadata.labels`, when known: which pods are the workload's (HB023).
    pub pod_labels: Option<BTreeMap<String, String>>,
    /// A Deployment annotated `hpa-bridge.io/deletion-cost: "stateful-index"` (HB013).
    pub deletion_cost_opt_in: bool,
    pub source: Option<String>,
}

/// A KEDA `ScaledObject`: another writer of its target's `spec.replicas`, through the HPA KEDA
/// makes for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaledObjectInput {
    pub namespace: String,
    pub name: String,
    /// `spec.scaleTargetRef.kind`, `Deployment` when unset (as KEDA defaults it).
    pub target_kind: String,
    pub target_name: String,
    /// The HPA KEDA owns for it: `spec.advanced.horizontalPodAutoscalerConfig.name`, else
    /// `keda-hpa-<name>`.
    pub hpa_name: String,
    pub source: Option<String>,
}

/// An APIService of a metrics API group: `v1beta1.external.metrics.k8s.io`, or
/// `v1beta2.custom.metrics.k8s.io` for Object metrics.
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

/// The request the HPA makes for one External or Object metric (docs/hpa-behaviour.md §1.2,
/// §6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricQuery {
    pub namespace: String,
    pub hpa: String,
    pub metric_index: usize,
    /// External: lower-cased, as client-go puts it in the path; Object: as written.
    pub metric: String,
    /// The selector in string syntax; empty means no selector parameter.
    pub selector: String,
    /// An Object metric's described object, as (resource with its group, name):
    /// `("statefulsets.apps", "lobby")`; None for an External metric.
    pub object: Option<(String, String)>,
}

impl MetricQuery {
    /// The request path, as client-go's external and custom metrics clients build it.
    pub fn path(&self) -> String {
        let (mut path, parameter) = match &self.object {
            None => (
                format!(
                    "/apis/external.metrics.k8s.io/v1beta1/namespaces/{}/{}",
                    self.namespace, self.metric
                ),
                "labelSelector",
            ),
            Some((resource, name)) => (
                format!(
                    "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{}/{resource}/{name}/{}",
                    self.namespace, self.metric
                ),
                "metricLabelSelector",
            ),
        };
        if !self.selector.is_empty() {
            path.push('?');
            path.push_str(parameter);
            path.push('=');
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

    /// The HPA field the query comes from.
    pub fn field(&self) -> String {
        let source = if self.object.is_some() {
            "object"
        } else {
            "external"
        };
        format!("spec.metrics[{}].{source}.metric", self.metric_index)
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
    pub scaled_objects: Vec<ScaledObjectInput>,
    pub api_service: Option<ApiServiceInput>,
    /// The `v1beta2.custom.metrics.k8s.io` APIService, which Object metrics go through.
    pub custom_api_service: Option<ApiServiceInput>,
    /// The checker may not read that APIService: nothing is said about it.
    pub custom_api_service_unreadable: bool,
    pub answers: Vec<AdapterAnswer>,
    /// Read from a live cluster: every scale target was looked up, and the APIService must exist.
    pub live: bool,
    /// Documents read but not checked, each with where and why (not a Kubernetes object).
    pub skipped: Vec<String>,
}

/// The External and Object metric requests the HPA makes that hpa-bridge serves.
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
        let (metric, object) = match (&m.external, &m.object) {
            (Some(ext), _) => (&ext.metric, None),
            (None, Some(obj)) => match served_object(&obj.described_object) {
                Some(described) => (&obj.metric, Some(described)),
                None => continue,
            },
            (None, None) => continue,
        };
        if config.metric(&metric.name).is_none() {
            continue;
        }
        out.push(MetricQuery {
            namespace: ns.clone(),
            hpa: name.clone(),
            metric_index: i,
            metric: match object {
                None => metric.name.to_ascii_lowercase(),
                Some(_) => metric.name.clone(),
            },
            selector: selector_text(metric.selector.as_ref()),
            object,
        });
    }
    out
}

/// The custom metrics resource and name of a described object hpa-bridge answers for: a
/// StatefulSet or Deployment of apps (docs/hpa-behaviour.md §6.5).
fn served_object(
    described: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
) -> Option<(String, String)> {
    let group = described.api_version.as_deref()?.split('/').next()?;
    let resource = match (group, described.kind.as_str()) {
        ("apps", "StatefulSet") => "statefulsets.apps",
        ("apps", "Deployment") => "deployments.apps",
        _ => return None,
    };
    Some((resource.into(), described.name.clone()))
}
