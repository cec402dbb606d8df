//! Reading manifests for `check -f`: YAML or JSON files, multi-document files, `List` objects,
//! directories. Errors name the file and the document (1-based), so a bad input is found at once.

use std::path::{Path, PathBuf};

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde::Deserialize;
use serde_json::Value;

use std::collections::BTreeMap;

use super::{
    ApiServiceInput, HpaInput, Inputs, ScaledObjectInput, WorkloadInput, CUSTOM_METRICS_APISERVICE,
    EXTERNAL_METRICS_APISERVICE,
};

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{path}: document {document}: invalid YAML/JSON: {message}")]
    Syntax {
        path: String,
        document: usize,
        message: String,
    },
    #[error("{path}: document {document}{item}: {message}")]
    Object {
        path: String,
        document: usize,
        /// `, items[N]` inside a List, or empty.
        item: String,
        message: String,
    },
    #[error("{path}: no .yaml, .yml or .json files in this directory")]
    EmptyDirectory { path: String },
}

/// Where an object came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub path: String,
    /// 1-based document index in the file.
    pub document: usize,
    pub item: Option<usize>,
}

impl Origin {
    fn describe(&self) -> String {
        match self.item {
            Some(i) => format!("{} (document {}, items[{i}])", self.path, self.document),
            None => format!("{} (document {})", self.path, self.document),
        }
    }

    fn error(&self, message: impl Into<String>) -> ManifestError {
        ManifestError::Object {
            path: self.path.clone(),
            document: self.document,
            item: self
                .item
                .map(|i| format!(", items[{i}]"))
                .unwrap_or_default(),
            message: message.into(),
        }
    }
}

/// Every object in the text, with `List`s flattened. Empty documents are skipped silently;
/// a document that is not a Kubernetes object (no `kind`: a Helm values file, a promtool test
/// file, a config) is skipped with a note in `skipped`, so a folder of mixed YAML can be checked.
pub fn parse_text(
    path: &str,
    text: &str,
    skipped: &mut Vec<String>,
) -> Result<Vec<(Origin, Value)>, ManifestError> {
    let mut out = Vec::new();
    for (i, doc) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let document = i + 1;
        let value = Value::deserialize(doc).map_err(|e| ManifestError::Syntax {
            path: path.into(),
            document,
            message: e.to_string(),
        })?;
        let origin = Origin {
            path: path.into(),
            document,
            item: None,
        };
        let kind = match &value {
            Value::Null => continue,
            Value::Object(map) => map.get("kind").and_then(Value::as_str).unwrap_or(""),
            other => {
                skipped.push(format!(
                    "{}: not a Kubernetes object ({})",
                    origin.describe(),
                    json_type(other)
                ));
                continue;
            }
        };
        if kind.is_empty() {
            skipped.push(format!(
                "{}: not a Kubernetes object (no kind)",
                origin.describe()
            ));
            continue;
        }
        if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
            let Some(items) = value.get("items").and_then(Value::as_array) else {
                return Err(origin.error(format!("{kind} without an items array")));
            };
            for (j, item) in items.iter().enumerate() {
                let o = Origin {
                    item: Some(j),
                    ..origin.clone()
                };
                let mut item = item.clone();
                // Items of a typed list (e.g. HorizontalPodAutoscalerList from kubectl -o json)
                // may omit kind and apiVersion; the list's kind and apiVersion name them.
                if let Value::Object(map) = &mut item {
                    if !map.contains_key("kind") && kind != "List" {
                        map.insert("kind".into(), Value::from(kind.trim_end_matches("List")));
                    }
                    if !map.contains_key("apiVersion") {
                        if let Some(v) = value.get("apiVersion") {
                            map.insert("apiVersion".into(), v.clone());
                        }
                    }
                } else {
                    return Err(
                        o.error(format!("list item is {}, not an object", json_type(&item)))
                    );
                }
                if item
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    return Err(o.error("not a Kubernetes object: no kind"));
                }
                out.push((o, item));
            }
        } else {
            out.push((origin, value));
        }
    }
    Ok(out)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// Quantities may be written as bare numbers (`averageValue: 1`), which the API server accepts;
/// the typed structs want strings.
fn quantities_as_strings(hpa: &mut Value) {
    fn stringify(v: Option<&mut Value>) {
        if let Some(v) = v {
            if let Value::Number(n) = v {
                *v = Value::String(n.to_string());
            }
        }
    }
    if let Some(metrics) = hpa
        .pointer_mut("/spec/metrics")
        .and_then(Value::as_array_mut)
    {
        for m in metrics {
            for source in [
                "external",
                "object",
                "pods",
                "resource",
                "containerResource",
            ] {
                if let Some(target) = m.pointer_mut(&format!("/{source}/target")) {
                    stringify(target.get_mut("value"));
                    stringify(target.get_mut("averageValue"));
                }
            }
        }
    }
    for dir in ["scaleUp", "scaleDown"] {
        stringify(hpa.pointer_mut(&format!("/spec/behavior/{dir}/tolerance")));
    }
}

/// Sort the objects the check cares about into `Inputs`; other kinds are ignored.
pub fn inputs_from_objects(objects: Vec<(Origin, Value)>) -> Result<Inputs, ManifestError> {
    let mut inputs = Inputs::default();
    for (origin, mut v) in objects {
        let kind = v
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let api_version = v
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match (kind.as_str(), api_version.as_str()) {
            ("HorizontalPodAutoscaler", "autoscaling/v2") => {
                quantities_as_strings(&mut v);
                let hpa: HorizontalPodAutoscaler = serde_json::from_value(v)
                    .map_err(|e| origin.error(format!("HorizontalPodAutoscaler {name:?}: {e}")))?;
                inputs.hpas.push(HpaInput {
                    hpa,
                    source: Some(origin.describe()),
                });
            }
            ("StatefulSet" | "Deployment", _) => {
                let w = workload_from_json(&v, false, Some(origin.describe()))
                    .map_err(|e| origin.error(format!("{kind} {name:?}: {e}")))?;
                inputs.workloads.push(w);
            }
            ("ScaledObject", group) if group.starts_with("keda.sh/") => {
                let so = scaled_object_from_json(&v, Some(origin.describe()))
                    .map_err(|e| origin.error(format!("ScaledObject {name:?}: {e}")))?;
                inputs.scaled_objects.push(so);
            }
            ("APIService", _) if name == EXTERNAL_METRICS_APISERVICE => {
                inputs.api_service = Some(api_service_from_json(&v, Some(origin.describe())));
            }
            ("APIService", _) if name == CUSTOM_METRICS_APISERVICE => {
                inputs.custom_api_service =
                    Some(api_service_from_json(&v, Some(origin.describe())));
            }
            _ => {}
        }
    }
    Ok(inputs)
}

/// The parts of a KEDA ScaledObject the check needs, from its JSON; the error names the field.
pub fn scaled_object_from_json(
    v: &Value,
    source: Option<String>,
) -> Result<ScaledObjectInput, String> {
    let text = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = text("/metadata/name").unwrap_or_default();
    let target_name = text("/spec/scaleTargetRef/name")
        .ok_or("spec.scaleTargetRef.name is required (the workload KEDA scales)")?;
    Ok(ScaledObjectInput {
        namespace: text("/metadata/namespace").unwrap_or("default").to_string(),
        name: name.to_string(),
        target_kind: text("/spec/scaleTargetRef/kind")
            .unwrap_or("Deployment")
            .to_string(),
        target_name: target_name.to_string(),
        hpa_name: keda_hpa_name(v, name),
        source,
    })
}

/// The HPA KEDA owns for a ScaledObject: `spec.advanced.horizontalPodAutoscalerConfig.name`,
/// else `keda-hpa-<name>` (KEDA's ScaledObject specification).
fn keda_hpa_name(scaled_object: &Value, name: &str) -> String {
    scaled_object
        .pointer("/spec/advanced/horizontalPodAutoscalerConfig/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(String::from)
        .unwrap_or_else(|| format!("keda-hpa-{name}"))
}

/// The parts of a StatefulSet or Deployment the check needs, from its JSON. A `live` object
/// always has `spec.replicas` (the API server defaults it), so there only an applier's record
/// of the field counts as fixing it (docs/check.md, HB022); in a manifest the field itself
/// does. The error names the field.
pub fn workload_from_json(
    v: &Value,
    live: bool,
    source: Option<String>,
) -> Result<WorkloadInput, String> {
    let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    let integer = |p: &str| match v.pointer(p) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n.as_i64().map(Some).ok_or_else(|| {
            format!(
                "{} must be an integer, found {n}",
                p.trim_start_matches('/').replace('/', ".")
            )
        }),
    };
    let ordinals_start = integer("/spec/ordinals/start")?.unwrap_or(0);
    let replicas_fixed_by = if live {
        applied_replicas(v)
    } else {
        integer("/spec/replicas")?.map(|n| format!("the manifest sets spec.replicas: {n}"))
    };
    let pod_labels = v
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect::<BTreeMap<_, _>>()
        });
    Ok(WorkloadInput {
        kind: text("/kind").to_string(),
        namespace: Some(text("/metadata/namespace"))
            .filter(|ns| !ns.is_empty())
            .unwrap_or("default")
            .to_string(),
        name: text("/metadata/name").to_string(),
        ordinals_start,
        replicas_fixed_by,
        pod_labels,
        deletion_cost_opt_in: v
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(hpa_bridge_rules::cluster::DELETION_COST_OPT_IN))
            .and_then(Value::as_str)
            == Some(hpa_bridge_rules::cluster::DELETION_COST_FROM_INDEX),
        source,
    })
}

/// Who re-applies `spec.replicas` of a live object: the value kept in
/// `kubectl.kubernetes.io/last-applied-configuration` (client-side apply), or an Apply entry
/// of `managedFields` that owns the field (server-side apply). The HPA writes through the
/// scale subresource with an Update, which neither records.
fn applied_replicas(v: &Value) -> Option<String> {
    let meta = v.get("metadata")?;
    let last_applied = meta
        .pointer("/annotations/kubectl.kubernetes.io~1last-applied-configuration")
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    if let Some(n) = last_applied
        .as_ref()
        .and_then(|a| a.pointer("/spec/replicas"))
        .filter(|n| !n.is_null())
    {
        return Some(format!(
            "its kubectl.kubernetes.io/last-applied-configuration sets spec.replicas: {n} (client-side apply)"
        ));
    }
    meta.get("managedFields")?
        .as_array()?
        .iter()
        .find(|m| {
            m.get("operation").and_then(Value::as_str) == Some("Apply")
                && m.pointer("/fieldsV1/f:spec/f:replicas").is_some()
        })
        .map(|m| {
            format!(
                "field manager {:?} owns spec.replicas through server-side apply",
                m.get("manager").and_then(Value::as_str).unwrap_or("")
            )
        })
}

/// The parts of an APIService the check needs, from its JSON.
pub fn api_service_from_json(v: &Value, source: Option<String>) -> ApiServiceInput {
    let service = v.pointer("/spec/service").and_then(|s| {
        Some((
            s.get("namespace")?.as_str()?.to_string(),
            s.get("name")?.as_str()?.to_string(),
        ))
    });
    let available = v
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conds| {
            conds
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))
        })
        .map(|c| {
            let status = c.get("status").and_then(Value::as_str) == Some("True");
            let reason = c.get("reason").and_then(Value::as_str).unwrap_or("");
            let message = c.get("message").and_then(Value::as_str).unwrap_or("");
            (status, format!("{reason}: {message}"))
        });
    ApiServiceInput {
        service,
        available,
        source,
    }
}

/// Files named on the command line: directories are walked (sorted, `.yaml`, `.yml`, `.json`),
/// `-` is standard input.
pub fn load_paths(paths: &[PathBuf]) -> Result<Inputs, ManifestError> {
    let mut objects = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|cause| {
                ManifestError::Read {
                    path: "-".into(),
                    cause,
                }
            })?;
            objects.extend(parse_text("<stdin>", &text, &mut skipped)?);
            continue;
        }
        let meta = std::fs::metadata(p).map_err(|cause| ManifestError::Read {
            path: p.display().to_string(),
            cause,
        })?;
        let files = if meta.is_dir() {
            let files = walk(p)?;
            if files.is_empty() {
                return Err(ManifestError::EmptyDirectory {
                    path: p.display().to_string(),
                });
            }
            files
        } else {
            vec![p.clone()]
        };
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|cause| ManifestError::Read {
                path: f.display().to_string(),
                cause,
            })?;
            objects.extend(parse_text(&f.display().to_string(), &text, &mut skipped)?);
        }
    }
    let mut inputs = inputs_from_objects(objects)?;
    inputs.skipped = skipped;
    Ok(inputs)
}

fn walk(dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let read_err = |cause| ManifestError::Read {
        path: dir.display().to_string(),
        cause,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_err)?;
    entries.sort();
    let mut files = Vec::new();
    for e in entries {
        if e.is_dir() {
            files.extend(walk(&e)?);
        } else if matches!(
            e.extension().and_then(|x| x.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(e);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_documents() {
        let text = "---\nkind: List\napiVersion: v1\nitems:\n- {kind: StatefulSet, apiVersion: apps/v1, metadata: {name: a}}\n---\n---\n{\"kind\": \"Deployment\", \"apiVersion\": \"apps/v1\", \"metadata\": {\"name\": \"b\", \"namespace\": \"x\"}}\n";
        let objs = parse_text("f.yaml", text, &mut Vec::new()).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[0].0.item, Some(0));
        assert_eq!(objs[1].0.document, 3);
        let inputs = inputs_from_objects(objs).unwrap();
        assert_eq!(inputs.workloads[0].namespace, "default");
        assert_eq!(inputs.workloads[1].namespace, "x");
    }

    /// docs/check.md HB022: a live object always has spec.replicas; only an applier's record
    /// of it counts, and only for that field.
    #[test]
    fn live_replicas_count_only_when_an_applier_records_them() {
        let live = |meta: Value| {
            let v = serde_json::json!({"kind": "Deployment", "metadata": meta, "spec": {"replicas": 4}});
            workload_from_json(&v, true, None)
                .unwrap()
                .replicas_fixed_by
        };
        assert_eq!(live(serde_json::json!({"name": "w"})), None);
        let ssa = |fields: Value| {
            live(serde_json::json!({"name": "w", "managedFields": [
                {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": fields}
            ]}))
        };
        let owned = ssa(serde_json::json!({"f:spec": {"f:replicas": {}}})).unwrap();
        assert!(
            owned.contains("\"kustomize-controller\" owns spec.replicas"),
            "{owned}"
        );
        assert_eq!(ssa(serde_json::json!({"f:spec": {"f:template": {}}})), None);
        let applied = |spec: &str| {
            live(serde_json::json!({"name": "w", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": format!("{{\"spec\":{spec}}}")
            }}))
        };
        assert!(applied("{\"replicas\":2}")
            .unwrap()
            .contains("spec.replicas: 2"));
        assert_eq!(applied("{\"paused\":false}"), None);
        // In a manifest the field itself counts, whatever its value.
        let manifest = serde_json::json!({"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 0}});
        let w = workload_from_json(&manifest, false, None).unwrap();
        assert_eq!(
            w.replicas_fixed_by.as_deref(),
            Some("the manifest sets spec.replicas: 0")
        );
        assert_eq!(w.namespace, "default");
    }

    #[test]
    fn errors_name_file_and_document() {
        let e =
            parse_text("f.yaml", "kind: A\n---\nkind: [unclosed\n", &mut Vec::new()).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("f.yaml: document 2: invalid YAML"), "{s}");
        let bad_hpa = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {maxReplicas: ten}\n";
        let e = inputs_from_objects(parse_text("h.yaml", bad_hpa, &mut Vec::new()).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("h.yaml: document 1: HorizontalPodAutoscaler \"h\""),
            "{e}"
        );
    }

    /// A folder of mixed YAML (a Helm values file, a promtool rules test, a config) is checked:
    /// each document without `kind` is skipped with a note naming it, and the objects beside it
    /// are still read.
    #[test]
    fn documents_without_kind_are_skipped_with_a_note() {
        let mut skipped = Vec::new();
        let text = "image: {repository: x}\n---\n- 1\n---\nkind: StatefulSet\napiVersion: apps/v1\nmetadata: {name: s}\n";
        let objs = parse_text("values.yaml", text, &mut skipped).unwrap();
        assert_eq!(objs.len(), 1);
        assert_eq!(
            skipped,
            [
                "values.yaml (document 1): not a Kubernetes object (no kind)",
                "values.yaml (document 2): not a Kubernetes object (a sequence)",
            ]
        );
    }

    /// `check -f DIR` walks subdirectories, skips what is not an object, and still finds the
    /// HPA in a nested folder.
    #[test]
    fn a_directory_is_walked_and_non_objects_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("apps/lobby");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(dir.path().join("values.yaml"), "replicaCount: 2\n").unwrap();
        std::fs::write(
            dir.path().join("rules.test.yaml"),
            "rule_files: [rules.yaml]\ntests: []\n",
        )
        .unwrap();
        std::fs::write(
            nested.join("hpa.yaml"),
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {scaleTargetRef: {kind: StatefulSet, name: s, apiVersion: apps/v1}, maxReplicas: 5}\n",
        )
        .unwrap();
        let inputs = load_paths(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(inputs.hpas.len(), 1);
        assert_eq!(inputs.skipped.len(), 2, "{:?}", inputs.skipped);
        assert!(inputs.skipped.iter().any(|s| s.contains("rules.test.yaml")));
    }
}
