//! Reading manifests for `check -f`: YAML or JSON files, multi-document files, `List` objects,
//! directories. Errors name the file and the document (1-based), so a bad input is found at once.

use std::path::{Path, PathBuf};

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde::Deserialize;
use serde_json::Value;

use super::{ApiServiceInput, HpaInput, Inputs, WorkloadInput, EXTERNAL_METRICS_APISERVICE};

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
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

/// Every object in the text, with `List`s flattened. Empty documents are skipped.
pub fn parse_text(path: &str, text: &str) -> Result<Vec<(Origin, Value)>, ManifestError> {
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
        match value {
            Value::Null => continue,
            Value::Object(_) => {}
            other => {
                return Err(origin.error(format!(
                    "expected a Kubernetes object (a mapping with kind), found {}",
                    json_type(&other)
                )))
            }
        }
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() {
            return Err(origin.error("not a Kubernetes object: no kind"));
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
        let namespace = v
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
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
                let start = match v.pointer("/spec/ordinals/start") {
                    None | Some(Value::Null) => 0,
                    Some(s) => s.as_i64().ok_or_else(|| {
                        origin.error(format!(
                            "{kind} {name:?}: spec.ordinals.start must be an integer, found {s}"
                        ))
                    })?,
                };
                inputs.workloads.push(WorkloadInput {
                    kind,
                    namespace,
                    name,
                    ordinals_start: start,
                    source: Some(origin.describe()),
                });
            }
            ("APIService", _) if name == EXTERNAL_METRICS_APISERVICE => {
                inputs.api_service = Some(api_service_from_json(&v, Some(origin.describe())));
            }
            _ => {}
        }
    }
    Ok(inputs)
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
    for p in paths {
        if p.as_os_str() == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|source| {
                ManifestError::Read {
                    path: "-".into(),
                    source,
                }
            })?;
            objects.extend(parse_text("<stdin>", &text)?);
            continue;
        }
        let meta = std::fs::metadata(p).map_err(|source| ManifestError::Read {
            path: p.display().to_string(),
            source,
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
            let text = std::fs::read_to_string(&f).map_err(|source| ManifestError::Read {
                path: f.display().to_string(),
                source,
            })?;
            objects.extend(parse_text(&f.display().to_string(), &text)?);
        }
    }
    inputs_from_objects(objects)
}

fn walk(dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let read_err = |source| ManifestError::Read {
        path: dir.display().to_string(),
        source,
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
        let objs = parse_text("f.yaml", text).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[0].0.item, Some(0));
        assert_eq!(objs[1].0.document, 3);
        let inputs = inputs_from_objects(objs).unwrap();
        assert_eq!(inputs.workloads[0].namespace, "default");
        assert_eq!(inputs.workloads[1].namespace, "x");
    }

    #[test]
    fn errors_name_file_and_document() {
        let e = parse_text("f.yaml", "kind: A\n---\nkind: [unclosed\n").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("f.yaml: document 2: invalid YAML"), "{s}");
        let e = parse_text("f.yaml", "a: 1\n").unwrap_err().to_string();
        assert_eq!(e, "f.yaml: document 1: not a Kubernetes object: no kind");
        let bad_hpa = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {maxReplicas: ten}\n";
        let e = inputs_from_objects(parse_text("h.yaml", bad_hpa).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("h.yaml: document 1: HorizontalPodAutoscaler \"h\""),
            "{e}"
        );
    }
}
