//! `custom.metrics.k8s.io` (v1beta2 and v1beta1): Object metrics of a StatefulSet or a
//! Deployment, answered by the same engine as the external metrics (docs/hpa-behaviour.md §6).
//!
//! Served: `GET /apis/custom.metrics.k8s.io/{version}/namespaces/{ns}/{resource}/{name}/{metric}`
//! with `{resource}` `statefulsets.apps` or `deployments.apps` and an optional
//! `metricLabelSelector`; the group and per-version discovery documents. Everything else under
//! the group is a `Status` naming what is served.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::request_parts::percent_decode;
use hpa_bridge_engine::engine::{ObjectKind, ObjectRef};
use hpa_bridge_rules::selector::{LabelSelector, Operator};

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
    pub(super) fn parse(version: &str) -> Option<ServedVersion> {
        match version {
            "v1beta2" => Some(ServedVersion::V1beta2),
            "v1beta1" => Some(ServedVersion::V1beta1),
            _ => None,
        }
    }

    /// `apiVersion` of the version's documents.
    fn group_version(self) -> &'static str {
        match self {
            ServedVersion::V1beta2 => "custom.metrics.k8s.io/v1beta2",
            ServedVersion::V1beta1 => "custom.metrics.k8s.io/v1beta1",
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

/// The one form served: `namespaces/{ns}/{resource}/{name}/{metric}`, an Object metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectMetricPath<'a> {
    pub namespace: &'a str,
    pub resource: &'a str,
    pub name: &'a str,
    pub metric: &'a str,
}

/// Namespace subresources the parser keeps on the namespace itself.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

impl CustomPath {
    /// The Object metric this path asks for, if it has the one form served.
    pub fn object_metric(&self) -> Option<ObjectMetricPath<'_>> {
        match self.rest.as_slice() {
            [namespaces, namespace, resource, name, metric] if namespaces == "namespaces" => {
                Some(ObjectMetricPath {
                    namespace,
                    resource,
                    name,
                    metric,
                })
            }
            _ => None,
        }
    }

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
    let mut segments = rest.split('/').map(percent_decode);
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
fn label_selector_json(selector: &LabelSelector) -> Option<LabelSelectorJson<'_>> {
    if selector.is_everything() {
        return None;
    }
    let mut out = LabelSelectorJson {
        match_expressions: Vec::new(),
        match_labels: BTreeMap::new(),
    };
    for r in selector.requirements() {
        let (operator, values): (_, &[String]) = match r.operator {
            Operator::Equals => {
                if let [v] = r.values.as_slice() {
                    out.match_labels.insert(&r.key, v);
                    continue;
                }
                ("In", &r.values)
            }
            Operator::In => ("In", &r.values),
            Operator::NotEquals | Operator::NotIn => ("NotIn", &r.values),
            Operator::Exists => ("Exists", &[]),
            Operator::DoesNotExist => ("DoesNotExist", &[]),
        };
        out.match_expressions.push(Expression {
            key: &r.key,
            operator,
            values,
        });
    }
    Some(out)
}

/// A `metav1.LabelSelector` as JSON. The served lists' types declare their fields in sorted
/// order, so their bytes are those a `serde_json::Value` of the same document would give.
#[derive(Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct LabelSelectorJson<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    match_expressions: Vec<Expression<'a>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    match_labels: BTreeMap<&'a str, &'a str>,
}

#[derive(Debug, PartialEq, Serialize)]
struct Expression<'a> {
    key: &'a str,
    operator: &'static str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    values: &'a [String],
}

/// A DNS-1123 subdomain, which StatefulSet and Deployment names are.
pub(super) fn valid_object_name(name: &str) -> bool {
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

pub(super) const SERVED_FORM: &str = "only GET /apis/custom.metrics.k8s.io/{v1beta2|v1beta1}/namespaces/{namespace}/{statefulsets.apps|deployments.apps}/{name}/{metric} is served";

/// One item's fields for the version, as client-go's custom metrics client decodes them
/// (k8s.io/metrics/pkg/apis/custom_metrics/{v1beta2,v1beta1}/types.go).
pub(super) fn metric_value_list<'a>(
    version: ServedVersion,
    object: &'a ObjectRef,
    metric: &'a str,
    selector: &'a LabelSelector,
    timestamp: String,
    window: u64,
    value: String,
) -> MetricValueList<'a> {
    let described_object = DescribedObject {
        api_version: object.kind.api_version(),
        kind: object.kind.kind(),
        name: &object.name,
        namespace: &object.namespace,
    };
    let selector = label_selector_json(selector);
    let item = if version == ServedVersion::V1beta1 {
        MetricValue::V1beta1 {
            described_object,
            metric_name: metric,
            selector,
            timestamp,
            value,
            window,
        }
    } else {
        MetricValue::V1beta2 {
            described_object,
            metric: MetricIdentifier {
                name: metric,
                selector,
            },
            timestamp,
            value,
            window_seconds: window,
        }
    };
    MetricValueList {
        api_version: version.group_version(),
        // Exactly one item: the client refuses any other count (docs/hpa-behaviour.md §6.2).
        items: [item],
        kind: "MetricValueList",
        metadata: Metadata {},
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MetricValueList<'a> {
    api_version: &'static str,
    items: [MetricValue<'a>; 1],
    kind: &'static str,
    metadata: Metadata,
}

#[derive(Serialize)]
struct Metadata {}

#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum MetricValue<'a> {
    V1beta1 {
        described_object: DescribedObject<'a>,
        metric_name: &'a str,
        selector: Option<LabelSelectorJson<'a>>,
        timestamp: String,
        value: String,
        window: u64,
    },
    V1beta2 {
        described_object: DescribedObject<'a>,
        metric: MetricIdentifier<'a>,
        timestamp: String,
        value: String,
        window_seconds: u64,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DescribedObject<'a> {
    api_version: &'static str,
    kind: &'static str,
    name: &'a str,
    namespace: &'a str,
}

#[derive(Serialize)]
struct MetricIdentifier<'a> {
    name: &'a str,
    selector: Option<LabelSelectorJson<'a>>,
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
            serde_json::to_value(label_selector_json(&s)).unwrap(),
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
        assert_eq!(label_selector_json(&LabelSelector::everything()), None);
        for v in [ServedVersion::V1beta2, ServedVersion::V1beta1] {
            let version = v.group_version().strip_prefix(&format!("{GROUP}/"));
            assert_eq!(version.and_then(ServedVersion::parse), Some(v));
        }
    }

    /// The served list's bytes, as client-go's custom metrics client decodes them: keys in
    /// the order a JSON object's keys sort, a selector as a `LabelSelector` object or null.
    #[test]
    fn the_served_lists_bytes_are_pinned() {
        let object = |kind, name: &str| ObjectRef {
            kind,
            namespace: "games".into(),
            name: name.into(),
        };
        let list = |version, object: &ObjectRef, selector: &str| {
            let selector = LabelSelector::parse(selector).unwrap();
            serde_json::to_string(&metric_value_list(
                version,
                object,
                "hpa_target_replicas",
                &selector,
                "2026-12-02T03:36:02Z".into(),
                60,
                "3".into(),
            ))
            .unwrap()
        };
        assert_eq!(
            list(
                ServedVersion::V1beta2,
                &object(ObjectKind::StatefulSet, "lobby"),
                "a=1,b!=2,c in (x,y),d,!e"
            ),
            r#"{"apiVersion":"custom.metrics.k8s.io/v1beta2","items":[{"describedObject":{"apiVersion":"apps/v1","kind":"StatefulSet","name":"lobby","namespace":"games"},"metric":{"name":"hpa_target_replicas","selector":{"matchExpressions":[{"key":"b","operator":"NotIn","values":["2"]},{"key":"c","operator":"In","values":["x","y"]},{"key":"d","operator":"Exists"},{"key":"e","operator":"DoesNotExist"}],"matchLabels":{"a":"1"}}},"timestamp":"2026-12-02T03:36:02Z","value":"3","windowSeconds":60}],"kind":"MetricValueList","metadata":{}}"#
        );
        assert_eq!(
            list(
                ServedVersion::V1beta1,
                &object(ObjectKind::Deployment, "web"),
                ""
            ),
            r#"{"apiVersion":"custom.metrics.k8s.io/v1beta1","items":[{"describedObject":{"apiVersion":"apps/v1","kind":"Deployment","name":"web","namespace":"games"},"metricName":"hpa_target_replicas","selector":null,"timestamp":"2026-12-02T03:36:02Z","value":"3","window":60}],"kind":"MetricValueList","metadata":{}}"#
        );
        assert_eq!(
            list(
                ServedVersion::V1beta1,
                &object(ObjectKind::StatefulSet, "lobby"),
                "b in (1)"
            ),
            r#"{"apiVersion":"custom.metrics.k8s.io/v1beta1","items":[{"describedObject":{"apiVersion":"apps/v1","kind":"StatefulSet","name":"lobby","namespace":"games"},"metricName":"hpa_target_replicas","selector":{"matchExpressions":[{"key":"b","operator":"In","values":["1"]}]},"timestamp":"2026-12-02T03:36:02Z","value":"3","window":60}],"kind":"MetricValueList","metadata":{}}"#
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
