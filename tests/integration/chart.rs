//! The Helm chart (charts/hpa-bridge) through Helm's own engine: PyPI `helm-python-sdk` binds
//! Helm v4's Go SDK, driven by tests/helm/render.py as a subprocess. The chart lints clean;
//! every render of the values matrix validates against the Kubernetes schemas and does what
//! its values say; the default render equals the kustomize base in substance, apart from a
//! listed set of intended differences; values.schema.json rejects wrong types and misspelled
//! keys by name; the PrometheusRule carries manifests/monitoring/rules.yaml; and each
//! coexistence setup registers only the APIServices it should.

use crate::common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::kube_objects::{
    args, container, docs, find, kustomize, lease_role_is, manifests, memory_role_is, one, root,
    serving_secret_is_mounted, stage, validate, NEWEST,
};
use serde_json::{json, Value};

const RELEASE: &str = "hpa-bridge";
const NAMESPACE: &str = "hpa-bridge";

fn chart() -> PathBuf {
    root().join("charts/hpa-bridge")
}

/// Run jobs through Helm in one process: per job, its result or Helm's error message.
fn helm(jobs: &[Value]) -> Vec<Result<Value, String>> {
    let python = common::peers::helm_python();
    let driver = root().join("tests/helm/render.py");
    let mut child = Command::new(&python)
        .arg(&driver)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {} {}: {e}", python.display(), driver.display()));
    // The chart has no image default (none is published): every job names the one the
    // kustomize base uses, unless it tests the value itself.
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|job| {
            let mut job = job.clone();
            let values = &mut job["values"];
            if values["image"] == "unset" {
                values.as_object_mut().unwrap().remove("image");
            } else if values.pointer("/image/repository").is_none() {
                values["image"]["repository"] = json!("hpa-bridge");
            }
            job
        })
        .collect();
    let request = json!({"chart": chart(), "jobs": jobs});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        driver.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(results.len(), jobs.len());
    results
        .into_iter()
        .map(|r| match r["ok"].as_bool() {
            Some(true) => Ok(r["result"].clone()),
            _ => Err(r["error"].as_str().unwrap_or_default().to_string()),
        })
        .collect()
}

/// Render each set of values as release `hpa-bridge` in namespace `hpa-bridge`: the objects
/// of every template, in template order.
fn render_all(values: &[&Value]) -> Vec<Result<Vec<Value>, String>> {
    render_releases(values, RELEASE, NAMESPACE)
}

/// The chart rendered with `values` as release `name` in `namespace`: its objects.
pub(crate) fn render_release(values: Value, name: &str, namespace: &str) -> Vec<Value> {
    render_releases(&[&values], name, namespace)
        .remove(0)
        .unwrap_or_else(|e| panic!("render of {values} failed: {e}"))
}

fn render_releases(
    values: &[&Value],
    name: &str,
    namespace: &str,
) -> Vec<Result<Vec<Value>, String>> {
    let jobs: Vec<Value> = values
        .iter()
        .map(|v| json!({"op": "render", "values": v, "name": name, "namespace": namespace}))
        .collect();
    helm(&jobs)
        .into_iter()
        .map(|r| {
            r.map(|manifests| {
                manifests
                    .as_object()
                    .unwrap()
                    .values()
                    .flat_map(|text| docs(text.as_str().unwrap()))
                    .collect()
            })
        })
        .collect()
}

fn render(values: Value) -> Vec<Value> {
    render_all(&[&values])
        .remove(0)
        .unwrap_or_else(|e| panic!("render of {values} failed: {e}"))
}

fn names(docs: &[Value], kind: &str) -> Vec<String> {
    let mut names: Vec<String> = find(docs, kind)
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// A config without pod discovery, for the renders with kubernetesDiscovery off: Helm merges
/// it with the chart's default config, so discovery is dropped with a null.
fn static_config() -> Value {
    json!({"scrape": {"kubernetes": null, "static": [{"url": "http://lobby.games.svc:9102/metrics"}]}})
}

/// One render of the matrix: its values and what they must have done.
struct Case {
    label: &'static str,
    values: Value,
    check: fn(&[Value]),
}

fn apiservices_are(docs: &[Value], want: &[&str]) {
    assert_eq!(names(docs, "APIService"), want);
}

/// caBundle and insecureSkipTLSVerify never both (docs/hpa-behaviour.md §3.4).
fn apiservices_skip_verification(docs: &[Value], skip: bool) {
    for a in find(docs, "APIService") {
        assert_eq!(
            a["spec"].get("insecureSkipTLSVerify") == Some(&json!(true)),
            skip,
            "{a}"
        );
        if skip {
            assert!(a["spec"].get("caBundle").is_none(), "{a}");
        }
    }
}

fn matrix() -> Vec<Case> {
    vec![
        Case {
            label: "defaults",
            values: json!({}),
            check: |d| {
                apiservices_are(d, &["v1beta1.external.metrics.k8s.io"]);
                apiservices_skip_verification(d, true);
                assert!(find(d, "Certificate").is_empty());
                assert!(names(d, "ClusterRole").contains(&"hpa-bridge:discovery".into()));
                assert!(find(d, "ServiceMonitor").is_empty());
                assert!(find(d, "PrometheusRule").is_empty());
                // Nothing writes to pods unless asked.
                assert!(!names(d, "ClusterRole").contains(&"hpa-bridge:deletion-cost".into()));
                assert!(!args(one(d, "Deployment")).contains(&"--write-deletion-cost".into()));
                // The only Role: the memory's, on its own ConfigMap and Lease.
                assert_eq!(names(d, "Role"), vec!["hpa-bridge:memory".to_string()]);
                memory_role_is(
                    d,
                    NAMESPACE,
                    "hpa-bridge:memory",
                    &format!("{RELEASE}-memory"),
                );
                let a = args(one(d, "Deployment"));
                for flag in [
                    format!("--memory-config-map={NAMESPACE}/{RELEASE}-memory"),
                    format!("--memory-lease={NAMESPACE}/{RELEASE}-memory"),
                    "--memory-write-interval=10s".to_string(),
                ] {
                    assert!(a.contains(&flag), "{a:?}");
                }
                // The downward API, as in the base: it grants nothing.
                let env = &container(one(d, "Deployment"))["env"];
                for name in ["POD_NAME", "POD_NAMESPACE"] {
                    assert!(
                        env.as_array().unwrap().iter().any(|e| e["name"] == name),
                        "{env}"
                    );
                }
            },
        },
        Case {
            label: "deletionCost.write=true",
            values: json!({"deletionCost": {"write": true, "qps": 25}}),
            check: |d| {
                assert!(names(d, "ClusterRole").contains(&"hpa-bridge:deletion-cost".into()));
                let role = find(d, "ClusterRole")
                    .into_iter()
                    .find(|r| r["metadata"]["name"] == "hpa-bridge:deletion-cost")
                    .unwrap();
                assert_eq!(
                    role["rules"],
                    json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}])
                );
                let a = args(one(d, "Deployment"));
                assert!(a.contains(&"--write-deletion-cost".to_string()), "{a:?}");
                assert!(a.contains(&"--deletion-cost-qps=25".to_string()), "{a:?}");
                // One writer: the Lease in the release namespace, named after the release.
                assert!(
                    a.contains(&format!(
                        "--deletion-cost-lease={NAMESPACE}/{RELEASE}-deletion-cost"
                    )),
                    "{a:?}"
                );
                lease_role_is(
                    d,
                    NAMESPACE,
                    "hpa-bridge:deletion-cost-lease",
                    &format!("{RELEASE}-deletion-cost"),
                );
            },
        },
        Case {
            label: "apiServices.custom.enabled=true",
            values: json!({"apiServices": {"custom": {"enabled": true}}}),
            check: |d| {
                apiservices_are(
                    d,
                    &[
                        "v1beta1.custom.metrics.k8s.io",
                        "v1beta1.external.metrics.k8s.io",
                        "v1beta2.custom.metrics.k8s.io",
                    ],
                );
                // The HPA's client prefers the highest versionPriority.
                let v1beta2 = find(d, "APIService")
                    .into_iter()
                    .find(|a| a["spec"]["version"] == "v1beta2")
                    .unwrap();
                assert_eq!(v1beta2["spec"]["versionPriority"], 200);
            },
        },
        Case {
            label: "apiServices.external.enabled=false,custom.enabled=true",
            values: json!({"apiServices": {"external": {"enabled": false}, "custom": {"enabled": true}}}),
            check: |d| {
                apiservices_are(
                    d,
                    &[
                        "v1beta1.custom.metrics.k8s.io",
                        "v1beta2.custom.metrics.k8s.io",
                    ],
                )
            },
        },
        Case {
            label: "tls.mode=certManager",
            values: json!({"tls": {"mode": "certManager"}, "apiServices": {"custom": {"enabled": true}}}),
            check: |d| {
                apiservices_skip_verification(d, false);
                for a in find(d, "APIService") {
                    assert_eq!(
                        a["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                        "hpa-bridge/hpa-bridge-serving",
                        "{a}"
                    );
                    assert!(a["spec"].get("caBundle").is_none(), "{a}");
                }
                let certs = find(d, "Certificate");
                let serving = certs
                    .iter()
                    .find(|c| c["metadata"]["name"] == "hpa-bridge-serving")
                    .expect("the serving Certificate");
                assert!(serving["spec"]["dnsNames"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("hpa-bridge.hpa-bridge.svc")));
                // Every issuerRef names an Issuer of the render: the private CA.
                let issuers = names(d, "Issuer");
                for c in &certs {
                    let issuer = &c["spec"]["issuerRef"];
                    assert_eq!(issuer["kind"], "Issuer", "{c}");
                    assert!(
                        issuers.contains(&issuer["name"].as_str().unwrap().to_string()),
                        "{c}"
                    );
                }
                serving_secret_is_mounted(one(d, "Deployment"), "hpa-bridge-serving");
            },
        },
        Case {
            label: "tls.mode=certManager with a ClusterIssuer",
            values: json!({"tls": {"mode": "certManager", "certManager": {"issuerRef": {"name": "internal-ca", "kind": "ClusterIssuer"}}}}),
            check: |d| {
                assert!(find(d, "Issuer").is_empty());
                let serving = one(d, "Certificate");
                assert_eq!(
                    serving["spec"]["issuerRef"],
                    json!({"name": "internal-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"})
                );
                serving_secret_is_mounted(one(d, "Deployment"), "hpa-bridge-serving");
            },
        },
        Case {
            label: "tls.mode=existingSecret with a caBundle",
            values: json!({"tls": {"mode": "existingSecret", "existingSecret": {"name": "adapter-tls", "caBundle": "LS0tLS1CRUdJTg=="}}}),
            check: |d| {
                apiservices_skip_verification(d, false);
                let a = one(d, "APIService");
                assert_eq!(a["spec"]["caBundle"], "LS0tLS1CRUdJTg==");
                assert!(find(d, "Certificate").is_empty());
                serving_secret_is_mounted(one(d, "Deployment"), "adapter-tls");
            },
        },
        Case {
            label: "tls.mode=existingSecret without a caBundle",
            values: json!({"tls": {"mode": "existingSecret", "existingSecret": {"name": "adapter-tls"}}}),
            check: |d| {
                apiservices_skip_verification(d, true);
                serving_secret_is_mounted(one(d, "Deployment"), "adapter-tls");
            },
        },
        Case {
            label: "kubernetesDiscovery.enabled=false",
            values: json!({"kubernetesDiscovery": {"enabled": false}, "config": static_config()}),
            check: |d| {
                assert_eq!(
                    names(d, "ClusterRole"),
                    ["hpa-bridge:metrics-reader"],
                    "no watch RBAC"
                );
                assert_eq!(
                    names(d, "ClusterRoleBinding"),
                    ["hpa-bridge:system:auth-delegator"]
                );
                // Nothing is remembered without discovery, and nothing needs to be.
                assert!(names(d, "Role").is_empty(), "{:?}", names(d, "Role"));
                assert!(args(one(d, "Deployment")).contains(&"--no-memory".to_string()));
            },
        },
        Case {
            label: "memory.enabled=false",
            values: json!({"memory": {"enabled": false}}),
            check: |d| {
                assert!(names(d, "Role").is_empty(), "{:?}", names(d, "Role"));
                let a = args(one(d, "Deployment"));
                assert!(a.contains(&"--no-memory".to_string()), "{a:?}");
                assert!(!a.iter().any(|f| f.starts_with("--memory")), "{a:?}");
            },
        },
        Case {
            label: "serviceMonitor and prometheusRule enabled",
            values: json!({
                "serviceMonitor": {"enabled": true, "labels": {"release": "kube-prometheus"}},
                "prometheusRule": {"enabled": true, "labels": {"role": "alert-rules"}},
            }),
            check: |d| {
                let sm = one(d, "ServiceMonitor");
                assert_eq!(sm["metadata"]["labels"]["release"], "kube-prometheus");
                let endpoint = &sm["spec"]["endpoints"][0];
                assert_eq!(endpoint["scheme"], "https");
                assert_eq!(endpoint["honorLabels"], true);
                let service = one(d, "Service");
                for (k, v) in sm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
                    assert_eq!(&service["metadata"]["labels"][k], v, "{k}");
                }
                let rule = one(d, "PrometheusRule");
                assert_eq!(rule["metadata"]["labels"]["role"], "alert-rules");
            },
        },
        Case {
            label: "metrics.secure=false with a ServiceMonitor",
            values: json!({"metrics": {"secure": false}, "serviceMonitor": {"enabled": true}}),
            check: |d| {
                let a = args(one(d, "Deployment"));
                assert!(!a.contains(&"--metrics-secure".into()), "{a:?}");
                assert!(a.contains(&"--allow-insecure-metrics-bind".into()), "{a:?}");
                assert!(!names(d, "ClusterRole").contains(&"hpa-bridge:metrics-reader".into()));
                assert_eq!(
                    one(d, "ServiceMonitor")["spec"]["endpoints"][0]["scheme"],
                    "http"
                );
            },
        },
        Case {
            label: "hostNetwork=true",
            values: json!({"hostNetwork": true, "containerPorts": {"https": 7443, "metrics": 9190}}),
            check: |d| {
                let spec = &one(d, "Deployment")["spec"]["template"]["spec"];
                assert_eq!(spec["hostNetwork"], true);
                assert_eq!(spec["dnsPolicy"], "ClusterFirstWithHostNet");
                let a = args(one(d, "Deployment"));
                assert!(a.contains(&"--secure-port=7443".into()), "{a:?}");
                assert!(
                    a.contains(&"--metrics-bind-address=0.0.0.0:9190".into()),
                    "{a:?}"
                );
                let ports = &container(one(d, "Deployment"))["ports"];
                assert_eq!(ports[0]["containerPort"], 7443);
                assert_eq!(ports[1]["containerPort"], 9190);
            },
        },
    ]
}

/// What holds in every render: the APIServices reach the Service on 443, the Service and the
/// PodDisruptionBudget select the pods, and hpa-bridge accepts the rendered config.
fn holds_together(docs: &[Value]) {
    let service = one(docs, "Service");
    for a in find(docs, "APIService") {
        assert_eq!(a["spec"]["service"]["name"], service["metadata"]["name"]);
        assert_eq!(a["spec"]["service"]["namespace"], NAMESPACE);
        assert_eq!(a["spec"]["service"]["port"], 443);
    }
    let deployment = one(docs, "Deployment");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "Service selector {k}");
    }
    assert_eq!(
        one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let config = one(docs, "ConfigMap")["data"]["config.yaml"]
        .as_str()
        .unwrap();
    hpa_bridge_rules::config::Config::from_yaml(config)
        .unwrap_or_else(|e| panic!("rendered config rejected: {e}\n{config}"));
}

#[test]
fn the_chart_lints_without_errors_or_warnings_for_every_case_of_the_matrix() {
    let cases = matrix();
    let jobs: Vec<Value> = cases
        .iter()
        .map(|c| json!({"op": "lint", "values": c.values}))
        .collect();
    for (case, report) in cases.iter().zip(helm(&jobs)) {
        let report = report.unwrap_or_else(|e| panic!("{}: lint failed: {e}", case.label));
        assert_eq!(report["total_charts_linted"], 1, "{}: {report}", case.label);
        // Severity 1 is information (the chart has no icon); 2 is a warning, 3 an error.
        let findings: Vec<&Value> = report["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["severity"].as_i64() != Some(1))
            .collect();
        assert!(
            findings.is_empty() && report["errors"].as_array().unwrap().is_empty(),
            "{}: helm lint reports {report}",
            case.label
        );
        println!("lint {:<58} {} info, 0 warnings, 0 errors", case.label, {
            report["messages"].as_array().unwrap().len()
        });
    }
}

#[test]
fn every_render_of_the_matrix_validates_and_does_what_its_values_say() {
    let cases = matrix();
    let values: Vec<&Value> = cases.iter().map(|c| &c.values).collect();
    let tmp = tempfile::tempdir().unwrap();
    let mut staged = Vec::new();
    for (case, rendered) in cases.iter().zip(render_all(&values)) {
        let docs = rendered.unwrap_or_else(|e| panic!("{}: render failed: {e}", case.label));
        holds_together(&docs);
        (case.check)(&docs);
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for d in &docs {
            *kinds.entry(d["kind"].as_str().unwrap()).or_default() += 1;
        }
        println!("render {:<58} {} objects {kinds:?}", case.label, docs.len());
        staged.extend(stage(case.label, &docs, tmp.path()));
    }
    assert_eq!(staged.len(), cases.len());
    validate(&staged, &[NEWEST]);
}

#[test]
fn values_the_chart_cannot_honour_fail_the_render_naming_the_value() {
    let cases = [
        (
            json!({"kubernetesDiscovery": {"enabled": false}}),
            "kubernetesDiscovery.enabled",
        ),
        (
            json!({"tls": {"mode": "existingSecret"}}),
            "tls.existingSecret.name",
        ),
        (
            json!({"deletionCost": {"write": true}, "kubernetesDiscovery": {"enabled": false}, "config": {"scrape": {"kubernetes": null}}}),
            "deletionCost.write",
        ),
        (
            json!({"apiServices": {"external": {"enabled": false}}}),
            "apiServices.custom.enabled",
        ),
        // No image is published under a default name: an install without one would sit in
        // ImagePullBackOff, so the schema asks for it; Helm names it by JSON pointer.
        (
            json!({"image": "unset"}),
            "at '/image/repository': minLength",
        ),
        (
            json!({"image": {"repository": ""}}),
            "at '/image/repository': minLength",
        ),
    ];
    let values: Vec<&Value> = cases.iter().map(|(v, _)| v).collect();
    for ((values, names), rendered) in cases.iter().zip(render_all(&values)) {
        let e = rendered
            .err()
            .unwrap_or_else(|| panic!("{values} rendered"));
        assert!(e.contains(names), "{values}: {e}");
    }
}

/// A comparable aspect of one object: `present`, or a JSON pointer into it.
type Facets = BTreeMap<String, BTreeMap<String, Value>>;

const CONTAINER: &str = "/spec/template/spec/containers/0";

/// The substance of each object, keyed `Kind namespace/name`: the facets compared between the
/// kustomize base and the chart.
fn substance(docs: &[Value]) -> Facets {
    let mut out = Facets::new();
    for d in docs {
        let key = format!(
            "{} {}/{}",
            d["kind"].as_str().unwrap(),
            d["metadata"]["namespace"].as_str().unwrap_or(""),
            d["metadata"]["name"].as_str().unwrap()
        );
        let mut facets = BTreeMap::new();
        facets.insert("present".to_string(), json!(true));
        let mut take = |pointer: String| {
            facets.insert(
                pointer.clone(),
                d.pointer(&pointer).cloned().unwrap_or(Value::Null),
            );
        };
        take("/metadata/labels".into());
        let pointers: &[&str] = match d["kind"].as_str().unwrap() {
            "Deployment" => &[
                "/spec/replicas",
                "/spec/strategy",
                "/spec/selector",
                "/spec/template/metadata/labels",
                "/spec/template/metadata/annotations",
                "/spec/template/spec/serviceAccountName",
                "/spec/template/spec/terminationGracePeriodSeconds",
                "/spec/template/spec/securityContext",
                "/spec/template/spec/affinity",
                "/spec/template/spec/hostNetwork",
                "/spec/template/spec/volumes",
            ],
            "Service" => &["/spec/ports", "/spec/selector"],
            "ClusterRole" | "Role" => &["/rules"],
            "ClusterRoleBinding" | "RoleBinding" => &["/roleRef", "/subjects"],
            "APIService" => &["/spec", "/metadata/annotations"],
            "PodDisruptionBudget" => &["/spec"],
            _ => &[],
        };
        for p in pointers {
            take(p.to_string());
        }
        if d["kind"] == "Deployment" {
            for field in [
                "name",
                "image",
                "imagePullPolicy",
                "args",
                "env",
                "ports",
                "livenessProbe",
                "readinessProbe",
                "resources",
                "securityContext",
                "volumeMounts",
            ] {
                take(format!("{CONTAINER}/{field}"));
            }
        }
        if d["kind"] == "ConfigMap" {
            // The config as hpa-bridge reads it: comments and key order aside.
            let parsed: Value =
                yaml_serde::from_str(d["data"]["config.yaml"].as_str().unwrap()).unwrap();
            facets.insert("/data/config.yaml".into(), parsed);
        }
        out.insert(key, facets);
    }
    out
}

/// Where the chart's default render may differ from the kustomize base, and why: (kind or
/// `*`, facet, reason). Every entry must still differ, so the list stays true.
const INTENDED_DIFFERENCES: &[(&str, &str, &str)] = &[
    (
        "Namespace",
        "present",
        "Helm installs into the release namespace (`helm install --create-namespace`); the base creates it with the label pod-security.kubernetes.io/enforce: restricted",
    ),
    (
        "*",
        "/metadata/labels",
        "Helm's standard labels: app.kubernetes.io/instance, version and managed-by, and helm.sh/chart",
    ),
    (
        "Deployment",
        "/spec/selector",
        "selectors add app.kubernetes.io/instance, so two releases in one namespace stay apart",
    ),
    (
        "Deployment",
        "/spec/template/metadata/labels",
        "the pods carry app.kubernetes.io/instance for the selectors",
    ),
    (
        "Deployment",
        "/spec/template/spec/affinity",
        "the anti-affinity selects by app.kubernetes.io/instance too",
    ),
    (
        "Service",
        "/spec/selector",
        "selects by app.kubernetes.io/instance too",
    ),
    (
        "PodDisruptionBudget",
        "/spec",
        "selects by app.kubernetes.io/instance too (minAvailable is the same)",
    ),
    (
        "Deployment",
        "/spec/template/metadata/annotations",
        "checksum/config rolls the pods when config changes",
    ),
    (
        "Deployment",
        "/spec/template/spec/containers/0/env",
        "RUST_LOG from logLevel",
    ),
];

fn intended(key: &str, facet: &str) -> bool {
    let kind = key.split(' ').next().unwrap();
    INTENDED_DIFFERENCES
        .iter()
        .any(|(k, f, _)| (*k == "*" || *k == kind) && *f == facet)
}

#[test]
fn the_default_render_equals_the_kustomize_base_in_substance() {
    let base = substance(&docs(&kustomize(&manifests())));
    let chart = substance(&render(json!({})));
    let keys: std::collections::BTreeSet<&String> = base.keys().chain(chart.keys()).collect();
    let absent = BTreeMap::from([("present".to_string(), json!(false))]);
    let mut differing: Vec<(String, String)> = Vec::new();
    for key in keys {
        let (b, c) = (
            base.get(key).unwrap_or(&absent),
            chart.get(key).unwrap_or(&absent),
        );
        let facets: std::collections::BTreeSet<&String> = b.keys().chain(c.keys()).collect();
        for facet in facets {
            let (bv, cv) = (
                b.get(facet).unwrap_or(&Value::Null),
                c.get(facet).unwrap_or(&Value::Null),
            );
            if bv == cv {
                continue;
            }
            assert!(
                intended(key, facet),
                "the chart's default render differs from the kustomize base at {key} {facet}:\n  \
                 kustomize: {bv}\n  chart:     {cv}\n(an intended difference belongs in \
                 INTENDED_DIFFERENCES, with its reason)"
            );
            differing.push((key.split(' ').next().unwrap().to_string(), facet.clone()));
        }
    }
    for (kind, facet, reason) in INTENDED_DIFFERENCES {
        assert!(
            differing
                .iter()
                .any(|(k, f)| (*kind == "*" || k == kind) && f == facet),
            "{kind} {facet} no longer differs: drop it from INTENDED_DIFFERENCES ({reason})"
        );
        println!("intended difference: {kind} {facet}: {reason}");
    }
}

#[test]
fn the_schema_rejects_wrong_types_and_misspelled_keys_naming_them() {
    let cases = [
        (json!({"replicas": "two"}), "/replicas"),
        (json!({"hostNetwork": "yes"}), "/hostNetwork"),
        (
            json!({"config": {"scrape": {"interval": 10}}}),
            "/config/scrape/interval",
        ),
        (json!({"tls": {"mode": "letsEncrypt"}}), "/tls/mode"),
        (json!({"replica": 3}), "'replica'"),
        (
            json!({"apiService": {"custom": {"enabled": true}}}),
            "'apiService'",
        ),
        (
            json!({"apiServices": {"external": {"enable": false}}}),
            "'enable'",
        ),
    ];
    let mut jobs: Vec<Value> = cases
        .iter()
        .map(|(v, _)| json!({"op": "schema", "values": v}))
        .collect();
    // An install validates the same way before it renders anything.
    jobs.push(json!({"op": "render", "values": {"replica": 3}}));
    jobs.push(json!({"op": "schema", "values": {}}));
    let results = helm(&jobs);
    for ((values, key), result) in cases.iter().zip(&results) {
        let e = result
            .as_ref()
            .err()
            .unwrap_or_else(|| panic!("the schema accepts {values}"));
        assert!(
            e.contains(key),
            "{values}: the message does not name {key}: {e}"
        );
    }
    let install = results[cases.len()].as_ref().unwrap_err();
    assert!(install.contains("'replica'"), "{install}");
    assert!(
        results[cases.len() + 1].is_ok(),
        "{:?}",
        results[cases.len() + 1]
    );
}

#[test]
fn the_prometheus_rule_carries_the_rules_of_manifests_monitoring() {
    let source = manifests().join("monitoring/rules.yaml");
    let copy = chart().join("files/rules.yaml");
    let text = std::fs::read_to_string(&source).unwrap();
    assert!(
        std::fs::read_to_string(&copy).unwrap() == text,
        "{} differs from {}: Helm reads only files inside the chart, so copy it \
         (`cp {} {}`)",
        copy.display(),
        source.display(),
        source.display(),
        copy.display()
    );
    let rules: Value = yaml_serde::from_str(&text).unwrap();
    let rendered = render(json!({"prometheusRule": {"enabled": true}}));
    let rule = one(&rendered, "PrometheusRule");
    assert_eq!(rule["spec"]["groups"], rules["groups"]);
    // The alerts' own templates reach Prometheus untouched by Helm's.
    let summary = rule["spec"]["groups"][0]["rules"][0]["annotations"]["summary"]
        .as_str()
        .unwrap();
    assert!(summary.contains("{{ $labels.namespace }}"), "{summary}");
}

#[test]
fn the_config_checksum_changes_with_the_config() {
    let checksum = |docs: &[Value]| {
        one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let other = json!({"config": {"scrape": {"interval": "15s", "kubernetes": {}}}});
    let renders: Vec<Vec<Value>> = render_all(&[&json!({}), &json!({}), &other])
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(checksum(&renders[0]), checksum(&renders[1]));
    assert_ne!(checksum(&renders[0]), checksum(&renders[2]));
}

/// docs/beside-other-adapters.md: beside KEDA (which holds
/// external.metrics), hpa-bridge serves custom.metrics only; beside prometheus-adapter (which
/// holds custom.metrics), external.metrics only.
#[test]
fn each_coexistence_setup_registers_only_its_apiservices() {
    let beside_keda =
        json!({"apiServices": {"external": {"enabled": false}, "custom": {"enabled": true}}});
    let beside_prometheus_adapter =
        json!({"apiServices": {"external": {"enabled": true}, "custom": {"enabled": false}}});
    let renders = render_all(&[&beside_keda, &beside_prometheus_adapter]);
    let keda = renders[0].as_ref().unwrap();
    apiservices_are(
        keda,
        &[
            "v1beta1.custom.metrics.k8s.io",
            "v1beta2.custom.metrics.k8s.io",
        ],
    );
    assert!(find(keda, "APIService")
        .iter()
        .all(|a| a["spec"]["group"] == "custom.metrics.k8s.io"));
    let adapter = renders[1].as_ref().unwrap();
    apiservices_are(adapter, &["v1beta1.external.metrics.k8s.io"]);
    assert_eq!(
        one(adapter, "APIService")["spec"]["group"],
        "external.metrics.k8s.io"
    );
}

/// Every value of values.yaml has a row in the README's table.
#[test]
fn the_readme_table_names_every_value() {
    fn leaves(prefix: &str, v: &Value, out: &mut Vec<String>) {
        // Free-form objects are documented whole.
        const WHOLE: [&str; 4] = [
            "config",
            "resources",
            "podSecurityContext",
            "securityContext",
        ];
        match v.as_object() {
            Some(map) if !map.is_empty() && !WHOLE.contains(&prefix) => {
                for (k, child) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    leaves(&path, child, out);
                }
            }
            _ => out.push(prefix.to_string()),
        }
    }
    let values: Value =
        yaml_serde::from_str(&std::fs::read_to_string(chart().join("values.yaml")).unwrap())
            .unwrap();
    let mut paths = Vec::new();
    leaves("", &values, &mut paths);
    let readme = std::fs::read_to_string(chart().join("README.md")).unwrap();
    let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `")).collect();
    for path in &paths {
        assert!(
            rows.iter().any(|r| r.starts_with(&format!("| `{path}` |"))),
            "charts/hpa-bridge/README.md has no row for `{path}`"
        );
    }
    assert_eq!(
        rows.len(),
        paths.len(),
        "a README row names no value: {rows:#?}"
    );
}
