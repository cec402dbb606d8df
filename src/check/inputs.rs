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

/// The request the HPA makes for one External metric (docs/hpa-behaviour.md §1.2).
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
    pub scaled_objects: Vec<ScaledObjectInput>,
    pub api_service: Option<ApiServiceInput>,
    pub answers: Vec<AdapterAnswer>,
    /// Read from a live cluster: every scale target was looked up, and the APIService must exist.
    pub live: bool,
    /// Documents read but not checked, each with where and why (not a Kubernetes object).
    pub skipped: Vec<String>,
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
