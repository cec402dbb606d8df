//! The objects the bench's loopback API server (the kit's, crates/hpa-bridge-kit/src/kube_api.rs) holds for
//! discovery: one StatefulSet per workload of the exporter's spec with `spec.replicas` equal to
//! its pods, and one Running pod per target, annotated for scraping at the exporter's page.
//! Built from k8s-openapi types, so kube-runtime's reflectors decode them as the real thing.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use serde_json::{json, Value};

use super::exporter::{self, ExporterSpec};
use hpa_bridge_kit::kube_api::KubeApi;

const RESOURCE_VERSION: &str = "1";

/// The objects served: one StatefulSet per workload of `spec` with `spec.replicas` equal to
/// its pods, and one Running pod per target, annotated for scraping at the exporter's page.
pub struct Objects {
    pub pods: Vec<Value>,
    pub statefulsets: Vec<Value>,
}

pub fn meta(name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        uid: Some(format!("uid-{name}")),
        name: Some(name),
        namespace: Some("default".into()),
        resource_version: Some(RESOURCE_VERSION.into()),
        labels: Some(labels),
        ..Default::default()
    }
}

impl Objects {
    pub fn new(spec: &ExporterSpec, port: u16) -> Self {
        let per_workload = spec.targets.div_ceil(spec.workloads.max(1));
        let app = |w: usize| BTreeMap::from([("app".to_string(), format!("w{w}"))]);
        let statefulsets = (0..spec.workloads)
            .map(|w| StatefulSet {
                metadata: meta(format!("w{w}"), app(w)),
                spec: Some(StatefulSetSpec {
                    replicas: Some(per_workload as i32),
                    selector: LabelSelector {
                        match_labels: Some(app(w)),
                        ..Default::default()
                    },
                    service_name: Some(format!("w{w}")),
                    ..Default::default()
                }),
                status: None,
            })
            .collect::<Vec<_>>();
        let pods = (0..spec.targets)
            .map(|i| {
                let (w, k) = exporter::workload_of(i, spec.workloads);
                let mut metadata = meta(format!("w{w}-{k}"), app(w));
                metadata.owner_references = Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "StatefulSet".into(),
                    name: format!("w{w}"),
                    uid: format!("uid-w{w}"),
                    controller: Some(true),
                    ..Default::default()
                }]);
                metadata.annotations = Some(BTreeMap::from([
                    ("prometheus.io/scrape".to_string(), "true".to_string()),
                    ("prometheus.io/port".to_string(), port.to_string()),
                    ("prometheus.io/path".to_string(), format!("/t/{i}")),
                ]));
                Pod {
                    metadata,
                    spec: None,
                    status: Some(PodStatus {
                        phase: Some("Running".into()),
                        pod_ip: Some(exporter::target_ip(i, spec.shared_host).to_string()),
                        ..Default::default()
                    }),
                }
            })
            .collect::<Vec<_>>();
        Objects {
            pods: pods
                .iter()
                .filter_map(|p| typed_json(p, "v1", "Pod"))
                .collect(),
            statefulsets: statefulsets
                .iter()
                .filter_map(|s| typed_json(s, "apps/v1", "StatefulSet"))
                .collect(),
        }
    }

    /// An API server holding these objects, every answer after `delay`, every watch ended
    /// after `watch_timeout` when given.
    pub fn api(&self, delay: Duration, watch_timeout: Option<Duration>) -> KubeApi {
        let mut api = KubeApi::new(None).with_delay(delay);
        if let Some(timeout) = watch_timeout {
            api = api.with_watch_timeout(timeout);
        }
        for object in self.statefulsets.iter().chain(&self.pods) {
            api.apply_json(object.clone());
        }
        api
    }

    /// The name of pod `i` (modulo the pods).
    pub fn pod_name(&self, i: usize) -> String {
        self.pods
            .get(i % self.pods.len().max(1))
            .and_then(|p| p["metadata"]["name"].as_str())
            .unwrap_or_default()
            .to_string()
    }
}

/// The object's JSON with the `apiVersion` and `kind` a list item carries.
pub fn typed_json<T: serde::Serialize>(object: &T, api_version: &str, kind: &str) -> Option<Value> {
    let mut v = serde_json::to_value(object).ok()?;
    let map = v.as_object_mut()?;
    map.insert("apiVersion".into(), json!(api_version));
    map.insert("kind".into(), json!(kind));
    Some(v)
}
