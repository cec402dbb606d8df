//! Kubernetes objects as the deployment artefacts hold them: YAML streams parsed to JSON
//! values, the kustomize builds (`kubectl kustomize`), and strict validation against the
//! official Kubernetes JSON schemas (PyPI `kubernetes-validate`, which ships them offline).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The Kubernetes versions validated against: 1.33 is the first whose schema has the per-HPA
/// `tolerance`, 1.35 the first where its gate is on by default (docs/hpa-behaviour.md §1.5).
pub const VERSIONS: [&str; 2] = ["1.33.0", "1.35.0"];

/// The newest Kubernetes version the project targets.
pub const NEWEST: &str = VERSIONS[VERSIONS.len() - 1];

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn manifests() -> PathBuf {
    root().join("manifests")
}

/// The non-empty documents of a YAML stream.
pub fn docs(text: &str) -> Vec<Value> {
    yaml_serde::Deserializer::from_str(text)
        .map(|d| {
            let v: Value = serde::Deserialize::deserialize(d).expect("valid YAML");
            v
        })
        .filter(|v| !v.is_null())
        .collect()
}

pub fn kustomize(dir: &Path) -> String {
    let kubectl = super::peers::kubectl();
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("run {} kustomize: {e}", kubectl.display()));
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Objects no Kubernetes schema describes: kustomize's own config, cert-manager's and
/// prometheus-operator's CRDs, and the Prometheus rules file and its promtool tests under
/// manifests/monitoring (no Kubernetes objects at all). Their suites check them structurally
/// (manifests.rs, alert_rules.rs, chart.rs).
pub fn has_no_builtin_schema(doc: &Value) -> bool {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    let prometheus_file = doc.get("apiVersion").is_none()
        && (doc.get("groups").is_some() || doc.get("rule_files").is_some());
    api.starts_with("kustomize.config.k8s.io/")
        || api.starts_with("cert-manager.io/")
        || api.starts_with("monitoring.coreos.com/")
        || prometheus_file
}

/// Write the documents that have a built-in schema to `dir/label.yaml`; returns the file and
/// how many documents it holds.
pub fn stage(label: &str, documents: &[Value], dir: &Path) -> Option<(PathBuf, usize)> {
    let docs: Vec<&Value> = documents
        .iter()
        .filter(|d| !has_no_builtin_schema(d))
        .collect();
    if docs.is_empty() {
        return None;
    }
    let file = dir.join(format!(
        "{}.yaml",
        label
            .trim_end_matches(".yaml")
            .replace(['/', ' ', '='], "_")
    ));
    let text: Vec<String> = docs
        .iter()
        .map(|d| yaml_serde::to_string(d).unwrap())
        .collect();
    std::fs::write(&file, text.join("---\n")).unwrap();
    Some((file, docs.len()))
}

/// Validate (strict: unknown fields are errors) every staged file in one run per version.
pub fn validate(files: &[(PathBuf, usize)], versions: &[&str]) {
    let cmd = super::peers::kubernetes_validate();
    let expected: usize = files.iter().map(|(_, n)| n).sum();
    for version in versions {
        let out = Command::new(&cmd[0])
            .args(&cmd[1..])
            .args(["--strict", "-k", version])
            .args(files.iter().map(|(f, _)| f))
            .output()
            .unwrap();
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "manifests do not validate against Kubernetes {version}:\n{report}"
        );
        // A missing schema is only a warning to the tool; here it is a failure.
        assert!(
            !report.contains("Couldn't find schema"),
            "no schema for a resource (Kubernetes {version}):\n{report}"
        );
        assert_eq!(
            report.matches("passed for resource").count(),
            expected,
            "every resource must pass (Kubernetes {version}):\n{report}"
        );
    }
}

pub fn find<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

pub fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found = find(docs, kind);
    assert_eq!(found.len(), 1, "exactly one {kind} expected");
    found[0]
}

pub fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

pub fn args(deployment: &Value) -> Vec<String> {
    container(deployment)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// The Deployment mounts `secret` and points the serving-certificate flags at its files.
pub fn serving_secret_is_mounted(deployment: &Value, secret: &str) {
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["secret"]["secretName"] == secret)
        .unwrap_or_else(|| panic!("Secret {secret} is not mounted"));
    let mount = container(deployment)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .unwrap()["mountPath"]
        .as_str()
        .unwrap()
        .to_string();
    let a = args(deployment);
    assert!(
        a.contains(&format!("--tls-cert-file={mount}/tls.crt")),
        "{a:?}"
    );
    assert!(
        a.contains(&format!("--tls-private-key-file={mount}/tls.key")),
        "{a:?}"
    );
}

/// `namespace` holds a Role `role`, bound to the service account, that may get and update the
/// Lease `lease` only, and create Leases (RBAC cannot narrow a create by name).
pub fn lease_role_is(docs: &[Value], namespace: &str, role: &str, lease: &str) {
    role_is(
        docs,
        namespace,
        role,
        serde_json::json!([
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease], "verbs": ["get", "update"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}
        ]),
    );
}

/// `namespace` holds a Role `role` with exactly `rules`, bound to the service account.
fn role_is(docs: &[Value], namespace: &str, role: &str, rules: Value) {
    let r = find(docs, "Role")
        .into_iter()
        .find(|r| r["metadata"]["name"] == role)
        .unwrap_or_else(|| panic!("no Role {role}"));
    assert_eq!(r["metadata"]["namespace"], namespace);
    assert_eq!(r["rules"], rules);
    role_bound(docs, namespace, role);
}

/// The RoleBinding `role` binds that Role to the service account in `namespace`.
fn role_bound(docs: &[Value], namespace: &str, role: &str) {
    let b = find(docs, "RoleBinding")
        .into_iter()
        .find(|b| b["metadata"]["name"] == role)
        .unwrap_or_else(|| panic!("no RoleBinding {role}"));
    assert_eq!(b["metadata"]["namespace"], namespace);
    assert_eq!(b["roleRef"]["kind"], "Role");
    assert_eq!(b["roleRef"]["name"], role);
    assert_eq!(b["subjects"][0]["kind"], "ServiceAccount");
    assert_eq!(b["subjects"][0]["namespace"], namespace);
}

/// The memory's Role and its binding: get and update on the ConfigMap and the Lease `name`,
/// create on both kinds, nothing else (docs/unknown-input.md).
pub fn memory_role_is(docs: &[Value], namespace: &str, role: &str, name: &str) {
    role_is(
        docs,
        namespace,
        role,
        serde_json::json!([
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name], "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [name], "verbs": ["get", "update"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}
        ]),
    );
}
