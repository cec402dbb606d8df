//! docs/configuration.md, written from the config's JSON Schema (`Config::json_schema`), which
//! is generated from the types the parser reads: the reference cannot name a key the parser
//! refuses or miss one it accepts (the tests below ask the parser itself).

use std::fmt::Write as _;

use serde_json::Value;

/// Where an object sits in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Key(String),
    /// Any element of a list.
    Item,
    /// The value of any key of a map whose keys the user chooses.
    Entry,
    /// One kind of an entry typed by its `kind` key.
    Kind(String),
}

/// One object of the file: its place and its keys.
#[derive(Clone, Debug)]
pub struct ObjectNode {
    pub path: Vec<Step>,
    pub description: String,
    pub keys: Vec<Key>,
}

#[derive(Clone, Debug)]
pub struct Key {
    pub name: String,
    pub required: bool,
    pub type_name: String,
    pub default: Option<Value>,
    pub description: String,
}

impl ObjectNode {
    /// `scrape.static[].json`, `metrics[] (kind: threshold)`, `jsonConfigs.<name>`.
    pub fn display(&self) -> String {
        display(&self.path)
    }
}

fn display(path: &[Step]) -> String {
    let mut out = String::new();
    let mut kind = None;
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Item => out.push_str("[]"),
            Step::Entry => out.push_str(".<name>"),
            Step::Kind(k) => kind = Some(k.clone()),
        }
    }
    if out.is_empty() {
        out.push_str("(top level)");
    }
    if let Some(k) = kind {
        let _ = write!(out, " (kind: {k})");
    }
    out
}

/// Every object of the file, top level first, each before the objects inside it.
pub fn objects(schema: &Value) -> Vec<ObjectNode> {
    let mut out = Vec::new();
    walk(schema, schema, Vec::new(), String::new(), &mut out);
    out
}

/// Follows a `$ref` into `$defs`.
fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/$defs/")
            .and_then(|name| root.pointer(&format!("/$defs/{name}")))
            .map(|d| resolve(root, d))
            .unwrap_or(s),
        None => s,
    }
}

/// The schema of an optional value without its `null` branch.
fn non_null<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    let s = resolve(root, s);
    for union in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(union).and_then(Value::as_array) {
            let real: Vec<&Value> = branches
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if real.len() == 1 && branches.len() == 2 {
                return resolve(root, real[0]);
            }
        }
    }
    s
}

fn text(s: &Value, key: &str) -> String {
    s.get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn walk(root: &Value, s: &Value, path: Vec<Step>, description: String, out: &mut Vec<ObjectNode>) {
    let s = non_null(root, s);
    if let Some(variants) = s.get("oneOf").and_then(Value::as_array) {
        for v in variants {
            let v = resolve(root, v);
            let kind = v
                .pointer("/properties/kind/const")
                .or_else(|| v.pointer("/properties/kind/enum/0"))
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            let mut p = path.clone();
            p.push(Step::Kind(kind));
            walk(root, v, p, text(v, "description"), out);
        }
        return;
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut keys = Vec::new();
        let mut inner = Vec::new();
        for (name, p) in props {
            let resolved = non_null(root, p);
            let mut description = text(p, "description");
            if description.is_empty() {
                description = text(resolved, "description");
            }
            keys.push(Key {
                name: name.clone(),
                required: required.contains(&name.as_str()),
                type_name: type_name(root, p),
                default: p.get("default").cloned(),
                description: description.clone(),
            });
            let mut here = path.clone();
            here.push(Step::Key(name.clone()));
            inner.push((here, p, description));
        }
        out.push(ObjectNode {
            path: path.clone(),
            description,
            keys,
        });
        for (here, p, description) in inner {
            walk_value(root, p, here, description, out);
        }
        return;
    }
    walk_value(root, s, path, description, out);
}

/// Objects inside a value: itself, a list's elements, a map's values.
fn walk_value(
    root: &Value,
    s: &Value,
    path: Vec<Step>,
    description: String,
    out: &mut Vec<ObjectNode>,
) {
    let s = non_null(root, s);
    if s.get("properties").is_some() || s.get("oneOf").is_some() {
        walk(root, s, path, description, out);
    } else if let Some(items) = s.get("items") {
        let mut p = path;
        p.push(Step::Item);
        let items = non_null(root, items);
        if items.get("properties").is_some() || items.get("oneOf").is_some() {
            walk(root, items, p, description, out);
        }
    } else if let Some(values) = s.get("additionalProperties").filter(|v| v.is_object()) {
        let values = non_null(root, values);
        if values.get("properties").is_some() || values.get("oneOf").is_some() {
            let mut p = path;
            p.push(Step::Entry);
            walk(root, values, p, description, out);
        }
    }
}

/// A short type: `string`, `duration`, `list of string`, `map of string`, `object`.
fn type_name(root: &Value, s: &Value) -> String {
    if let Some(name) = s
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        if name == "Duration" {
            return "duration".into();
        }
    }
    let r = non_null(root, s);
    if !std::ptr::eq(r, s) && !std::ptr::eq(r, resolve(root, s)) {
        return type_name(root, r);
    }
    if let Some(values) = r.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = values
            .iter()
            .filter_map(Value::as_str)
            .map(|v| format!("`{v}`"))
            .collect();
        return format!("one of {}", names.join(", "));
    }
    if r.get("oneOf").is_some() {
        return "object (by `kind`)".into();
    }
    if r.get("pattern").is_some()
        && r.get("description").is_some()
        && r.get("type") == Some(&Value::from("string"))
    {
        return "duration".into();
    }
    let t = match r.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("any")
            .to_string(),
        _ if r.get("properties").is_some() => "object".into(),
        _ => "any".into(),
    };
    match t.as_str() {
        "array" => format!(
            "list of {}",
            r.get("items")
                .map(|i| type_name(root, i))
                .unwrap_or("any".into())
        ),
        "object" => match r.get("additionalProperties").filter(|v| v.is_object()) {
            Some(v) => format!("map of {}", type_name(root, v)),
            None => "object".into(),
        },
        "integer" => {
            let unsigned = r.get("minimum").and_then(Value::as_f64) == Some(0.0);
            if unsigned {
                "integer ≥ 0".into()
            } else {
                "integer".into()
            }
        }
        "number" => "number".into(),
        other => other.into(),
    }
}

fn default_text(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::String(s) => format!("`{s}`"),
        Value::Array(a) if a.is_empty() => "`[]`".into(),
        Value::Object(o) if o.is_empty() => "`{}`".into(),
        Value::Array(_) | Value::Object(_) => "see below".into(),
        other => format!("`{other}`"),
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The reference page.
pub fn render(schema: &Value) -> String {
    let mut out = String::new();
    out.push_str(
        "# Configuration reference\n\n\
         <!-- Generated by `hpa-bridge config reference` from `hpa-bridge config schema`; do not edit.\n     \
         src/config_reference.rs tests that this page matches the schema and that the parser accepts\n     \
         exactly these keys. -->\n\n\
         What does every key of the config file mean? `hpa-bridge serve --config FILE` reads it (the\n\
         chart's `config` value; examples/local.yaml is the local demo's). Every key is checked at\n\
         startup: an unknown key, a bad duration, a duplicate metric name or a reference to an\n\
         undefined metric stops startup with a message naming the key. Served metric names are\n\
         lower-case, because client-go lower-cases the metric name in the request path.\n\n\
         Editors validate a file against the JSON Schema `hpa-bridge config schema` prints (for\n\
         example with the YAML language server: `# yaml-language-server: $schema=config.schema.json`\n\
         at the top of the file, after `hpa-bridge config schema > config.schema.json`).\n\n\
         Durations are written `500ms`, `10s`, `2m`, `1h` or combined, `1m30s`.\n",
    );
    for node in objects(schema) {
        let _ = write!(out, "\n## `{}`\n\n", node.display());
        if !node.description.is_empty() {
            let _ = writeln!(out, "{}\n", node.description);
        }
        out.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
        for k in &node.keys {
            let default = match (&k.default, k.required) {
                (_, true) => "required".to_string(),
                (Some(d), _) => default_text(d),
                (None, _) => "none".into(),
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                k.name,
                cell(&k.type_name),
                cell(&default),
                cell(&k.description)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_bridge_rules::config::Config;

    fn reference_path() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md")
    }

    #[test]
    fn the_reference_page_is_generated_from_the_schema() {
        let want = render(&Config::json_schema());
        let have = std::fs::read_to_string(reference_path()).unwrap_or_default();
        assert!(
            have == want,
            "docs/configuration.md is not what the config's schema generates: run\n  \
             cargo run -- config reference > docs/configuration.md"
        );
    }

    /// The YAML (as JSON) that puts `extra` inside the object at `path`.
    fn at(path: &[Step], extra: Value) -> Value {
        let mut v = extra;
        for step in path.iter().rev() {
            v = match step {
                Step::Key(k) => serde_json::json!({ k: v }),
                Step::Item => Value::Array(vec![v]),
                Step::Entry => serde_json::json!({ "x": v }),
                Step::Kind(kind) => {
                    let mut o = v;
                    o["kind"] = Value::from(kind.as_str());
                    o
                }
            };
        }
        v
    }

    /// The keys the parser lists when it refuses an unknown one: serde's
    /// `expected one of `a`, `b``, or `expected `a`` for one.
    fn accepted(error: &str) -> Vec<String> {
        let Some(list) = error.split("expected ").nth(1) else {
            return Vec::new();
        };
        let list = list.strip_prefix("one of ").unwrap_or(list);
        let mut keys: Vec<String> = list
            .split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect();
        keys.sort();
        keys
    }

    /// For every object the reference names, the parser is asked which keys it accepts there
    /// (by refusing an unknown one): they must be exactly the reference's. A key the parser
    /// accepts but the reference lacks, or the other way round, fails here.
    #[test]
    fn the_parser_accepts_exactly_the_keys_of_the_reference() {
        let schema = Config::json_schema();
        let page = render(&schema);
        let nodes = objects(&schema);
        assert!(nodes.len() >= 15, "{}", nodes.len());
        let mut checked = 0;
        for node in &nodes {
            let mut yaml = at(&node.path, serde_json::json!({"zzUnknownKey": 1}));
            if node.path.is_empty() {
                yaml = serde_json::json!({"zzUnknownKey": 1});
            }
            let err = Config::from_yaml(&yaml.to_string())
                .map(|_| ())
                .expect_err(&format!(
                    "{}: an unknown key was accepted: {yaml}",
                    node.display()
                ))
                .to_string();
            assert!(err.contains("zzUnknownKey"), "{}: {err}", node.display());
            let mut want: Vec<String> = node.keys.iter().map(|k| k.name.clone()).collect();
            let mut have = accepted(&err);
            // The tag of a typed entry is a key the parser takes too.
            if matches!(node.path.last(), Some(Step::Kind(_))) {
                want.retain(|k| k != "kind");
                have.retain(|k| k != "kind");
            }
            want.sort();
            assert_eq!(have, want, "{}: {err}", node.display());
            for k in &node.keys {
                assert!(
                    page.contains(&format!("| `{}` |", k.name)),
                    "{} missing from the page",
                    k.name
                );
            }
            checked += 1;
        }
        assert_eq!(checked, nodes.len());
    }

    /// The keys the issue found named only by the unknown-key error are in the reference.
    #[test]
    fn keys_once_named_only_by_errors_are_documented() {
        let page = render(&Config::json_schema());
        for section in [
            "## `scrape.kubernetes`",
            "## `metrics[] (kind: stateful-floor)`",
        ] {
            assert!(page.contains(section), "{section}");
        }
        for key in [
            "`namespaceLabel`",
            "`scheme`",
            "`staleAfter`",
            "`entriesPerScope`",
        ] {
            assert!(page.contains(key), "{key}");
        }
    }
}
