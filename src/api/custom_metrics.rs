//! `custom.metrics.k8s.io` (v1beta2 and v1beta1): Object metrics of a StatefulSet or a
//! Deployment, answered by the same engine as the external metrics (docs/hpa-behaviour.md §6).
//!
//! Served: `GET /apis/custom.metrics.k8s.io/{version}/namespaces/{ns}/{resource}/{name}/{metric}`
//! with `{resource}` `statefulsets.apps` or `deployments.apps` and an optional
//! `metricLabelSelector`; the group and per-version discovery documents. Everything else under
//! the group is a `Status` naming what is served.

use serde_json::{json, Value};

use super::{
    json_response, query_param, status_response, valid_namespace, ApiHandler, ApiResponse,
    StatusReason, WireForm,
};
use crate::engine::{MetricQuery, ObjectKind, ObjectRef};
use crate::selector::{LabelSelector, Operator};

pub const GROUP: &str = "custom.metrics.k8s.io";
/// Served versions, preferred first: the HPA's client picks the preferred one from discovery.
pub const VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// A served version, as the wire form of its `MetricValueList` differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServedVersion {
    V1beta2,
    V1beta1,
}

impl ServedVersion {
    fn parse(version: &str) -> Option<ServedVersion> {
        match version {
            "v1beta2" => Some(ServedVersion::V1beta2),
            "v1beta1" => Some(ServedVersion::V1beta1),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ServedVersion::V1beta2 => "v1beta2",
            ServedVersion::V1beta1 => "v1beta1",
        }
    }
}

/// A path below `/apis/custom.metrics.k8s.io/`, split into percent-decoded segments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomPath {
    pub version: String,
    pub rest: Vec<String>,
}

/// A resource request's attributes as kube-apiserver's request-info parser derives them from
/// the path (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go), for the SubjectAccessReview.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourceInfo {
    pub verb: String,
    pub group: String,
    pub version: String,
    pub namespace: String,
    pub resource: String,
    pub name: String,
    pub subresource: String,
}

/// Namespace subresources the parser keeps on the namespace itself.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

impl CustomPath {
    /// `None` for `/apis/<group>/<version>`, which the parser treats as a non-resource URL.
    /// Otherwise: `namespaces/{ns}/` sets the namespace and is dropped (unless what follows is
    /// a namespace subresource); then resource, name and subresource are the next three
    /// segments. A GET with a name is `get`, without one `list`.
    pub fn resource_info(&self, method: &http::Method) -> Option<ResourceInfo> {
        if self.rest.is_empty() {
            return None;
        }
        let mut parts: &[String] = &self.rest;
        let mut namespace = String::new();
        if parts[0] == "namespaces" && parts.len() > 1 {
            namespace = parts[1].clone();
            if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2].as_str()) {
                parts = &parts[2..];
            }
        }
        let at = |i: usize| parts.get(i).cloned().unwrap_or_default();
        let name = at(1);
        let verb = match *method {
            http::Method::GET | http::Method::HEAD if name.is_empty() => "list",
            http::Method::GET | http::Method::HEAD => "get",
            http::Method::POST => "create",
            http::Method::PUT => "update",
            http::Method::PATCH => "patch",
            http::Method::DELETE if name.is_empty() => "deletecollection",
            http::Method::DELETE => "delete",
            _ => "",
        };
        Some(ResourceInfo {
            verb: verb.into(),
            group: GROUP.into(),
            version: self.version.clone(),
            namespace,
            resource: at(0),
            name,
            subresource: at(2),
        })
    }
}

pub fn parse_path(rest: &str) -> CustomPath {
    let mut segments = rest.split('/').map(super::percent_decode);
    CustomPath {
        version: segments.next().unwrap_or_default(),
        rest: segments.collect(),
    }
}

fn group_version_entry(version: &str) -> Value {
    json!({"groupVersion": format!("{GROUP}/{version}"), "version": version})
}

/// `/apis/custom.metrics.k8s.io`.
pub fn api_group() -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": VERSIONS.iter().map(|v| group_version_entry(v)).collect::<Vec<_>>(),
        "preferredVersion": group_version_entry(VERSIONS[0]),
    })
}

/// `/apis/custom.metrics.k8s.io/{version}`: `<resource>/<metric>` for each served metric and
/// workload kind, as custom-metrics-apiserver lists them.
pub fn api_resource_list(version: &str, metrics: &[String]) -> Value {
    let resources: Vec<Value> = metrics
        .iter()
        .flat_map(|m| {
            ObjectKind::ALL.into_iter().map(move |k| {
                json!({
                    "name": format!("{}/{m}", k.resource()),
                    "singularName": "",
                    "namespaced": true,
                    "kind": "MetricValueList",
                    "verbs": ["get"],
                })
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{version}"),
        "resources": resources,
    })
}

/// A label selector as `metav1.LabelSelector` JSON; `null` for none, as a nil pointer encodes.
fn label_selector_json(selector: &LabelSelector) -> Value {
    if selector.is_everything() {
        return Value::Null;
    }
    let mut match_labels = serde_json::Map::new();
    let mut expressions = Vec::new();
    for r in selector.requirements() {
        let (op, values) = match r.operator {
            Operator::Equals => {
                if let [v] = r.values.as_slice() {
                    match_labels.insert(r.key.clone(), json!(v));
                    continue;
                }
                ("In", r.values.clone())
            }
            Operator::In => ("In", r.values.clone()),
            Operator::NotEquals | Operator::NotIn => ("NotIn", r.values.clone()),
            Operator::Exists => ("Exists", Vec::new()),
            Operator::DoesNotExist => ("DoesNotExist", Vec::new()),
        };
        let mut e = json!({"key": r.key, "operator": op});
        if !values.is_empty() {
            e["values"] = json!(values);
        }
        expressions.push(e);
    }
    let mut out = serde_json::Map::new();
    if !match_labels.is_empty() {
        out.insert("matchLabels".into(), Value::Object(match_labels));
    }
    if !expressions.is_empty() {
        out.insert("matchExpressions".into(), json!(expressions));
    }
    Value::Object(out)
}

/// A DNS-1123 subdomain, which StatefulSet and Deployment names are.
fn valid_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

const SERVED_FORM: &str = "only GET /apis/custom.metrics.k8s.io/{v1beta2|v1beta1}/namespaces/{namespace}/{statefulsets.apps|deployments.apps}/{name}/{metric} is served";

/// One item's fields for the version, as client-go's custom metrics client decodes them
/// (k8s.io/metrics/pkg/apis/custom_metrics/{v1beta2,v1beta1}/types.go).
pub(super) fn metric_value_list(
    version: ServedVersion,
    object: &ObjectRef,
    metric: &str,
    selector: &LabelSelector,
    timestamp: String,
    window: u64,
    value: String,
) -> Value {
    let described = json!({
        "kind": object.kind.kind(),
        "namespace": object.namespace,
        "name": object.name,
        "apiVersion": object.kind.api_version(),
    });
    let item = if version == ServedVersion::V1beta1 {
        json!({
            "describedObject": described,
            "metricName": metric,
            "timestamp": timestamp,
            "window": window,
            "value": value,
            "selector": label_selector_json(selector),
        })
    } else {
        json!({
            "describedObject": described,
            "metric": {"name": metric, "selector": label_selector_json(selector)},
            "timestamp": timestamp,
            "windowSeconds": window,
            "value": value,
        })
    };
    json!({
        "kind": "MetricValueList",
        "apiVersion": format!("{GROUP}/{}", version.as_str()),
        "metadata": {},
        // Exactly one item: the client refuses any other count (docs/hpa-behaviour.md §6.2).
        "items": [item],
    })
}

impl ApiHandler {
    /// Everything below `/apis/custom.metrics.k8s.io/`.
    pub(super) async fn custom_metrics(
        &self,
        path: &CustomPath,
        query: Option<&str>,
    ) -> ApiResponse {
        let Some(version) = ServedVersion::parse(&path.version) else {
            return status_response(
                StatusReason::NotFound,
                &format!(
                    "{GROUP} version {:?} is not served: the served versions are {}",
                    path.version,
                    VERSIONS.join(" and ")
                ),
            );
        };
        let rest: Vec<&str> = path.rest.iter().map(String::as_str).collect();
        let (ns, resource, name, metric) = match rest.as_slice() {
            [] => {
                return json_response(
                    200,
                    &api_resource_list(&path.version, &self.adapter.served_metric_names()),
                )
            }
            ["namespaces", ns, resource, name, metric] => (*ns, *resource, *name, *metric),
            ["namespaces", ns, "metrics", _] => {
                return status_response(
                    StatusReason::NotFound,
                    &format!("metrics of the Namespace {ns:?} are not served: {SERVED_FORM}"),
                )
            }
            [first, ..] if *first != "namespaces" => {
                return status_response(
                    StatusReason::NotFound,
                    &format!("root-scoped custom metrics are not served: {SERVED_FORM}"),
                )
            }
            _ => {
                return status_response(
                    StatusReason::NotFound,
                    &format!("the server could not find the requested resource: {SERVED_FORM}"),
                )
            }
        };
        if !valid_namespace(ns) {
            return status_response(
                StatusReason::BadRequest,
                &format!("invalid namespace {ns:?}: must be a DNS-1123 label"),
            );
        }
        let Some(kind) = ObjectKind::from_resource(resource) else {
            return status_response(
                StatusReason::NotFound,
                &format!(
                    "resource {resource:?} is not served by {GROUP}: the served resources are \
                     statefulsets.apps and deployments.apps"
                ),
            );
        };
        if name == "*" {
            return status_response(
                StatusReason::BadRequest,
                &format!(
                    "the \"*\" form (every {resource} matching a selector) is not served: name one \
                     {} (Object metric)",
                    kind.kind()
                ),
            );
        }
        if !valid_object_name(name) {
            return status_response(
                StatusReason::BadRequest,
                &format!(
                    "invalid {} name {name:?}: must be a DNS-1123 subdomain",
                    kind.kind()
                ),
            );
        }
        let selector_text = match query_param(query, "metricLabelSelector") {
            Ok(s) => s.unwrap_or_default(),
            Err(e) => return status_response(StatusReason::BadRequest, &e.to_string()),
        };
        // Remembered like the external API's selectors: an HPA asks the same question every 15 s.
        let parsed = match self.parse_selector(selector_text) {
            Ok(s) => s,
            Err(e) => {
                return status_response(
                    StatusReason::BadRequest,
                    &format!("metricLabelSelector: {e}"),
                )
            }
        };
        let object = ObjectRef {
            kind,
            namespace: ns.to_string(),
            name: name.to_string(),
        };
        self.serve(
            MetricQuery::object(metric, object, parsed),
            WireForm::Object(version),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn info(path: &str, method: Method) -> Option<ResourceInfo> {
        parse_path(path).resource_info(&method)
    }

    #[test]
    fn request_info_mirrors_kube_apiserver() {
        assert_eq!(
            info(
                "v1beta2/namespaces/games/statefulsets.apps/lobby/hpa_target_replicas",
                Method::GET
            ),
            Some(ResourceInfo {
                verb: "get".into(),
                group: GROUP.into(),
                version: "v1beta2".into(),
                namespace: "games".into(),
                resource: "statefulsets.apps".into(),
                name: "lobby".into(),
                subresource: "hpa_target_replicas".into(),
            })
        );
        let i = info("v1beta1/namespaces/games/pods", Method::GET).unwrap();
        assert_eq!(
            (i.verb.as_str(), i.resource.as_str(), i.name.as_str()),
            ("list", "pods", "")
        );
        let i = info("v1beta1/statefulsets.apps/lobby/m", Method::GET).unwrap();
        assert_eq!(
            (i.namespace.as_str(), i.resource.as_str()),
            ("", "statefulsets.apps")
        );
        let i = info("v1beta1/namespaces/games/status", Method::GET).unwrap();
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.subresource.as_str()),
            ("namespaces", "games", "status")
        );
        assert_eq!(info("v1beta2", Method::GET), None);
    }

    #[test]
    fn discovery_lists_each_metric_for_each_kind() {
        let doc = api_resource_list("v1beta2", &["a".into()]);
        assert_eq!(doc["groupVersion"], "custom.metrics.k8s.io/v1beta2");
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["statefulsets.apps/a", "deployments.apps/a"]);
        assert_eq!(api_group()["preferredVersion"]["version"], "v1beta2");
    }

    #[test]
    fn selectors_render_as_label_selector_objects() {
        let s = LabelSelector::parse("a=1,b!=2,c in (x,y),d,!e").unwrap();
        assert_eq!(
            label_selector_json(&s),
            json!({
                "matchLabels": {"a": "1"},
                "matchExpressions": [
                    {"key": "b", "operator": "NotIn", "values": ["2"]},
                    {"key": "c", "operator": "In", "values": ["x", "y"]},
                    {"key": "d", "operator": "Exists"},
                    {"key": "e", "operator": "DoesNotExist"},
                ]
            })
        );
        assert_eq!(
            label_selector_json(&LabelSelector::everything()),
            Value::Null
        );
    }

    #[test]
    fn object_names() {
        assert!(valid_object_name("lobby"));
        assert!(valid_object_name("lobby.v2"));
        assert!(!valid_object_name("Lobby"));
        assert!(!valid_object_name("a..b"));
        assert!(!valid_object_name("-a"));
        assert!(!valid_object_name(&"a".repeat(254)));
    }
}
