//! The deployment artefacts: every manifest validates against the official Kubernetes JSON
//! schemas (PyPI `kubernetes-validate`, which ships them offline), the pieces point at each
//! other (APIService -> Service 443 -> container 6443), the example HPA uses the only safe
//! target type, and the Dockerfile runs the real binary as non-root on 6443.

use std::path::{Path, PathBuf};

use crate::common::kube_objects::{
    args, container, docs, find, kustomize, lease_role_is, manifests, memory_role_is, one, root,
    serving_secret_is_mounted, stage, validate, VERSIONS,
};
use serde_json::Value;

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

#[test]
fn every_manifest_validates_against_the_kubernetes_schemas() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    yaml_files(&manifests(), &mut files);
    assert!(files.len() >= 10, "{files:?}");
    let mut staged = Vec::new();
    for f in &files {
        let label = f.strip_prefix(manifests()).unwrap().display().to_string();
        staged.extend(stage(
            &label,
            &docs(&std::fs::read_to_string(f).unwrap()),
            tmp.path(),
        ));
    }
    for (label, dir) in [
        ("kustomize base", manifests()),
        (
            "kustomize cert-manager",
            manifests().join("overlays/cert-manager"),
        ),
        (
            "kustomize custom-metrics",
            manifests().join("overlays/custom-metrics"),
        ),
        (
            "kustomize deletion-cost",
            manifests().join("overlays/deletion-cost"),
        ),
        (
            "kustomize beside-keda",
            manifests().join("overlays/beside-keda"),
        ),
    ] {
        let rendered = stage(label, &docs(&kustomize(&dir)), tmp.path()).unwrap();
        assert!(rendered.1 >= 11, "{label}: {rendered:?}");
        staged.push(rendered);
    }
    let total: usize = staged.iter().map(|(_, n)| n).sum();
    assert!(total >= 35, "only {total} resources staged: {staged:?}");
    validate(&staged, &VERSIONS);
}

fn base() -> Vec<Value> {
    docs(&kustomize(&manifests()))
}

/// A Service targetPort (number or name) resolved against the container's ports.
fn resolve_port(target: &Value, container: &Value) -> i64 {
    match target {
        Value::Number(n) => n.as_i64().unwrap(),
        Value::String(name) => container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no container port named {name}"))["containerPort"]
            .as_i64()
            .unwrap(),
        other => panic!("bad targetPort {other}"),
    }
}

#[test]
fn apiservice_points_at_the_service_on_443_which_reaches_the_container_on_6443() {
    let docs = base();
    let apiservice = one(&docs, "APIService");
    let service = one(&docs, "Service");
    let deployment = one(&docs, "Deployment");
    // docs/hpa-behaviour.md §3.4.
    assert_eq!(
        apiservice["metadata"]["name"],
        "v1beta1.external.metrics.k8s.io"
    );
    assert_eq!(apiservice["spec"]["group"], "external.metrics.k8s.io");
    assert_eq!(apiservice["spec"]["version"], "v1beta1");
    assert_eq!(
        apiservice["spec"]["service"]["name"],
        service["metadata"]["name"]
    );
    assert_eq!(
        apiservice["spec"]["service"]["namespace"],
        service["metadata"]["namespace"]
    );
    assert_eq!(apiservice["spec"]["service"]["port"], 443);
    assert_eq!(apiservice["spec"]["insecureSkipTLSVerify"], true);
    assert!(apiservice["spec"].get("caBundle").is_none());

    let port = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == 443)
        .expect("Service port 443");
    let c = container(deployment);
    assert_eq!(resolve_port(&port["targetPort"], c), 6443);
    // The Service selects the Deployment's pods.
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "Service selector {k}");
    }
    assert!(args(deployment).contains(&"--secure-port=6443".to_string()));
    for probe in ["livenessProbe", "readinessProbe"] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["scheme"], "HTTPS", "{probe}");
        assert_eq!(resolve_port(&get["port"], c), 6443, "{probe}");
    }
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
}

#[test]
fn the_deployment_is_locked_down_and_highly_available() {
    let docs = base();
    let deployment = one(&docs, "Deployment");
    let spec = &deployment["spec"]["template"]["spec"];
    let c = container(deployment);
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    for kind in ["requests", "limits"] {
        assert!(c["resources"][kind]["memory"].is_string(), "{kind}");
        assert!(c["resources"][kind]["cpu"].is_string(), "{kind}");
    }
    let pdb = one(&docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    // The ServiceAccount has the bindings docs/hpa-behaviour.md §3.3 names.
    let sa = &spec["serviceAccountName"];
    let bound_roles: Vec<(&str, &str)> =
        docs.iter()
            .filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
            .filter(|d| {
                d["subjects"].as_array().unwrap().iter().any(|s| {
                    s["name"] == *sa && s["namespace"] == deployment["metadata"]["namespace"]
                })
            })
            .map(|d| {
                (
                    d["metadata"]["namespace"].as_str().unwrap_or(""),
                    d["roleRef"]["name"].as_str().unwrap(),
                )
            })
            .collect();
    assert!(
        bound_roles.contains(&("", "system:auth-delegator")),
        "{bound_roles:?}"
    );
    assert!(
        bound_roles.contains(&("kube-system", "extension-apiserver-authentication-reader")),
        "{bound_roles:?}"
    );
    let role = find(&docs, "ClusterRole")
        .into_iter()
        .find(|r| bound_roles.iter().any(|(_, n)| r["metadata"]["name"] == *n))
        .expect("the discovery ClusterRole is bound");
    let allows = |group: &str, resource: &str, verb: &str| {
        role["rules"].as_array().unwrap().iter().any(|r| {
            let has = |key: &str, want: &str| {
                r[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v == want || v == "*")
            };
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    };
    for verb in ["list", "watch"] {
        assert!(allows("", "pods", verb));
        for r in ["statefulsets", "replicasets", "deployments"] {
            assert!(allows("apps", r, verb), "{r} {verb}");
        }
    }
    // The answers read spec.replicas from the watches; the HPA predictions read the HPAs from
    // a watch and each target's scale as the HPA controller does, and write nothing.
    for verb in ["list", "watch"] {
        assert!(allows("autoscaling", "horizontalpodautoscalers", verb));
    }
    assert!(!allows("autoscaling", "horizontalpodautoscalers", "get"));
    for r in ["statefulsets/scale", "deployments/scale"] {
        assert!(allows("apps", r, "get"), "{r}");
        for verb in ["update", "patch"] {
            assert!(!allows("apps", r, verb), "{r} {verb}");
        }
    }
}

#[test]
fn the_shipped_config_is_accepted_by_the_adapter_and_mounted_where_args_point() {
    let docs = base();
    let cm = one(&docs, "ConfigMap");
    let deployment = one(&docs, "Deployment");
    let text = cm["data"]["config.yaml"].as_str().unwrap();
    let config = hpa_bridge_rules::config::Config::from_yaml(text)
        .unwrap_or_else(|e| panic!("shipped config rejected: {e}"));
    assert!(config.scrape.kubernetes.is_some());
    let mount = container(deployment)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "config")
        .unwrap()["mountPath"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        args(deployment).contains(&format!("--config={mount}/config.yaml")),
        "{:?}",
        args(deployment)
    );
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "config")
        .unwrap();
    assert_eq!(volume["configMap"]["name"], cm["metadata"]["name"]);
}

#[test]
fn the_example_hpa_reads_absolute_numbers_with_average_value_one() {
    let text = std::fs::read_to_string(manifests().join("examples/statefulset-hpa.yaml")).unwrap();
    let docs = docs(&text);
    let hpa = one(&docs, "HorizontalPodAutoscaler");
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    let metrics = hpa["spec"]["metrics"].as_array().unwrap();
    let names: Vec<&str> = metrics
        .iter()
        .map(|m| m["external"]["metric"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hpa_expect_replicas", "hpa_stateful_floor"]);
    for m in metrics {
        assert_eq!(m["type"], "External");
        let target = &m["external"]["target"];
        // docs/hpa-behaviour.md §1.1, §1.4: the HPA runs the Value path whenever `value` is set.
        assert_eq!(target["type"], "AverageValue", "{m}");
        assert_eq!(target["averageValue"], Value::String("1".into()), "{m}");
        assert!(target.get("value").is_none(), "{m}");
    }
    // The recommender's own stabilisation is 60 s each way (docs/hpa-behaviour.md §4.1).
    for direction in ["scaleUp", "scaleDown"] {
        let b = &hpa["spec"]["behavior"][direction];
        assert_eq!(b["stabilizationWindowSeconds"], 60, "{direction}");
        assert_eq!(b["tolerance"], Value::String("0".into()), "{direction}");
    }
    assert!(text.contains("HPAConfigurableTolerance"));
    assert!(text.contains("--horizontal-pod-autoscaler-tolerance"));
    let sts = one(&docs, "StatefulSet");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "StatefulSet");
    assert_eq!(
        hpa["spec"]["scaleTargetRef"]["name"],
        sts["metadata"]["name"]
    );
}

#[test]
fn cert_manager_overlay_injects_the_ca_of_the_mounted_certificate() {
    let docs = docs(&kustomize(&manifests().join("overlays/cert-manager")));
    let apiservice = one(&docs, "APIService");
    let service = one(&docs, "Service");
    let deployment = one(&docs, "Deployment");
    // caBundle (injected) and insecureSkipTLSVerify never both (docs/hpa-behaviour.md §3.4).
    assert!(apiservice["spec"].get("insecureSkipTLSVerify").is_none());
    let inject = apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .expect("inject-ca-from annotation");
    let (ns, name) = inject.split_once('/').unwrap();
    let certs = find(&docs, "Certificate");
    let serving = certs
        .iter()
        .find(|c| c["metadata"]["namespace"] == ns && c["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Certificate {inject}"));
    assert_eq!(serving["apiVersion"], "cert-manager.io/v1");
    let san = format!(
        "{}.{}.svc",
        service["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["namespace"].as_str().unwrap()
    );
    assert!(
        serving["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == san.as_str()),
        "serving certificate lacks SAN {san}"
    );
    // Every issuerRef names an Issuer of the overlay, and the CA issuer uses the CA's secret.
    let issuers = find(&docs, "Issuer");
    for c in &certs {
        let issuer = &c["spec"]["issuerRef"];
        assert_eq!(issuer["kind"], "Issuer");
        assert!(
            issuers
                .iter()
                .any(|i| i["metadata"]["name"] == issuer["name"]
                    && i["metadata"]["namespace"] == c["metadata"]["namespace"]),
            "{c}"
        );
        assert!(c["spec"]["secretName"].is_string());
    }
    // The mounted secret is the serving certificate's, and the flags name its files.
    let secret = serving["spec"]["secretName"].as_str().unwrap();
    serving_secret_is_mounted(deployment, secret);
}

#[test]
fn dockerfile_runs_the_binary_as_non_root_on_6443() {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let stages: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert!(stages.len() >= 2, "multi-stage build expected");
    let runtime = stages.last().unwrap();
    assert!(
        runtime.contains("distroless") && runtime.contains("nonroot"),
        "{runtime}"
    );
    let last = |directive: &str| {
        lines
            .iter()
            .rev()
            .find(|l| l.starts_with(directive))
            .unwrap_or_else(|| panic!("no {directive}"))
            .trim_start_matches(directive)
            .trim()
            .to_string()
    };
    let user = last("USER ");
    let uid = user.split(':').next().unwrap();
    assert!(uid.parse::<u32>().is_ok_and(|u| u != 0), "USER {user}");
    assert!(lines.contains(&"EXPOSE 6443"));
    let entrypoint: Vec<String> = serde_json::from_str(&last("ENTRYPOINT ")).unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        Path::new(&entrypoint[0]).file_name().unwrap().to_str(),
        Some(binary.as_str())
    );
    assert!(
        text.contains(&format!("--bin {binary}")),
        "the build stage builds {binary}"
    );
    // The image carries only the server, without the release profile's line tables.
    assert!(
        !lines.iter().any(|l| l.contains("hpa-bridge-bench")),
        "the bench stays out of the image"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("strip /out/{binary}"))),
        "the build stage strips {binary}"
    );
    // The manifests run the image's user with the same container port.
    let docs = base();
    let deployment = one(&docs, "Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
            .as_i64()
            .map(|u| u.to_string())
            .as_deref(),
        Some(uid)
    );
    assert_eq!(container(deployment)["ports"][0]["containerPort"], 6443);
}

/// The custom-metrics overlay registers both custom.metrics.k8s.io versions beside the
/// external one, at the same Service, and the Object example targets AverageValue 1
/// (docs/hpa-behaviour.md §6.3, §6.5).
#[test]
fn custom_metrics_overlay_registers_both_versions_and_the_object_example_uses_average_value_one() {
    let rendered = docs(&kustomize(&manifests().join("overlays/custom-metrics")));
    let mut names: Vec<&str> = find(&rendered, "APIService")
        .iter()
        .map(|a| a["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "v1beta1.custom.metrics.k8s.io",
            "v1beta1.external.metrics.k8s.io",
            "v1beta2.custom.metrics.k8s.io"
        ]
    );
    let service = one(&rendered, "Service");
    for a in find(&rendered, "APIService") {
        assert_eq!(
            a["spec"]["service"]["name"], service["metadata"]["name"],
            "{a}"
        );
        assert_eq!(
            a["spec"]["service"]["namespace"], service["metadata"]["namespace"],
            "{a}"
        );
        assert_eq!(a["spec"]["service"]["port"], 443, "{a}");
        let name = a["metadata"]["name"].as_str().unwrap();
        assert_eq!(
            name,
            format!(
                "{}.{}",
                a["spec"]["version"].as_str().unwrap(),
                a["spec"]["group"].as_str().unwrap()
            )
        );
    }

    let text =
        std::fs::read_to_string(manifests().join("examples/statefulset-hpa-object.yaml")).unwrap();
    let example = docs(&text);
    let hpa = one(&example, "HorizontalPodAutoscaler");
    let metrics = hpa["spec"]["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 2);
    for m in metrics {
        assert_eq!(m["type"], "Object", "{m}");
        let object = &m["object"];
        assert_eq!(
            object["describedObject"],
            serde_json::json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lobby"})
        );
        assert_eq!(
            object["describedObject"]["name"],
            hpa["spec"]["scaleTargetRef"]["name"]
        );
        assert_eq!(object["target"]["type"], "AverageValue", "{m}");
        assert_eq!(
            object["target"]["averageValue"],
            Value::String("1".into()),
            "{m}"
        );
        assert!(object["target"].get("value").is_none(), "{m}");
    }
}

/// Beside KEDA, which owns v1beta1.external.metrics.k8s.io, the overlay serves only
/// custom.metrics.k8s.io: applying it leaves KEDA's APIService alone, and everything else is
/// the custom-metrics overlay unchanged.
#[test]
fn the_beside_keda_overlay_renders_no_external_apiservice() {
    let beside = docs(&kustomize(&manifests().join("overlays/beside-keda")));
    let mut names: Vec<&str> = find(&beside, "APIService")
        .iter()
        .map(|a| a["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "v1beta1.custom.metrics.k8s.io",
            "v1beta2.custom.metrics.k8s.io"
        ]
    );
    let custom = docs(&kustomize(&manifests().join("overlays/custom-metrics")));
    let others = |d: &[Value]| -> Vec<Value> {
        d.iter()
            .filter(|o| o["metadata"]["name"] != "v1beta1.external.metrics.k8s.io")
            .cloned()
            .collect()
    };
    assert_eq!(others(&beside), others(&custom));
}

/// Whether any role in `docs` bound to hpa-bridge's ServiceAccount lets it `verb` pods.
fn may_on_pods(docs: &[Value], verb: &str) -> bool {
    let bound: Vec<&str> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
        .filter(|d| {
            d["subjects"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["name"] == "hpa-bridge")
        })
        .map(|d| d["roleRef"]["name"].as_str().unwrap())
        .collect();
    docs.iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .filter(|r| bound.iter().any(|n| r["metadata"]["name"] == *n))
        .flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default())
        .any(|rule| {
            let has = |key: &str, want: &str| {
                rule[key]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|v| v == want || v == "*"))
            };
            has("apiGroups", "") && has("resources", "pods") && has("verbs", verb)
        })
}

/// The base never writes to pods; the deletion-cost overlay adds `patch` on pods (and nothing
/// else that writes) and turns the writer on with flags the binary accepts.
#[test]
fn only_the_deletion_cost_overlay_may_patch_pods_and_it_turns_the_writer_on() {
    let base = base();
    for verb in ["patch", "update", "delete", "create"] {
        assert!(!may_on_pods(&base, verb), "the base may {verb} pods");
    }
    let overlay = docs(&kustomize(&manifests().join("overlays/deletion-cost")));
    assert!(may_on_pods(&overlay, "patch"));
    for verb in ["update", "delete", "create"] {
        assert!(!may_on_pods(&overlay, verb), "the overlay may {verb} pods");
    }
    let a = args(one(&overlay, "Deployment"));
    assert!(a.contains(&"--write-deletion-cost".to_string()), "{a:?}");
    assert!(a.contains(&"--deletion-cost-qps=10".to_string()), "{a:?}");
    lease_role_is(
        &overlay,
        "hpa-bridge",
        "hpa-bridge:deletion-cost-lease",
        "hpa-bridge-deletion-cost",
    );
    // The base's one Lease is the memory's, beside its ConfigMap.
    memory_role_is(
        &base,
        "hpa-bridge",
        "hpa-bridge:memory",
        "hpa-bridge-memory",
    );
    assert!(
        !find(&base, "Role")
            .iter()
            .chain(find(&base, "ClusterRole").iter())
            .filter(|r| r["metadata"]["name"] != "hpa-bridge:memory")
            .any(|r| r["rules"].to_string().contains("coordination.k8s.io")),
        "the base may touch no other Lease"
    );
    // The writer's identity and the Lease's namespace come from the downward API.
    let env = &container(one(&base, "Deployment"))["env"];
    for (name, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        assert!(
            env.as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == name && e["valueFrom"]["fieldRef"]["fieldPath"] == field),
            "{name} from {field}: {env}"
        );
    }
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--write-deletion-cost",
        "--deletion-cost-qps",
        "--deletion-cost-lease",
        "--deletion-cost-lease-duration",
        "--deletion-cost-renew-deadline",
        "--deletion-cost-retry-period",
    ] {
        assert!(help.contains(flag), "serve has no {flag}:\n{help}");
    }
    for (flags, says) in [
        (
            &["--deletion-cost-renew-deadline=15s"][..],
            "must be shorter than the lease duration",
        ),
        (
            &["--deletion-cost-retry-period=10s"][..],
            "must be above zero and shorter than the renew deadline",
        ),
        (
            &[
                "--deletion-cost-lease-duration=1500ms",
                "--deletion-cost-renew-deadline=1s",
                "--deletion-cost-retry-period=100ms",
            ][..],
            "must be a whole number of seconds",
        ),
        (
            &["--deletion-cost-lease=a/b/c"][..],
            "is not [NAMESPACE/]NAME",
        ),
    ] {
        let refused = std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
            .arg("serve")
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["serve", "--deletion-cost-qps=0"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("is not a rate in [0.001, 1000] per second"),
        "{refused:?}"
    );
}

/// manifests/check renders the ClusterRole for `check --cluster` alone, read-only; the
/// adapter's install does not carry it (docs/check.md#permissions). check.rs holds its
/// rules to the requests the check makes.
#[test]
fn the_check_role_is_read_only_and_installed_apart() {
    let rendered = docs(&kustomize(&manifests().join("check")));
    assert_eq!(rendered.len(), 1, "{rendered:#?}");
    let role = &rendered[0];
    assert_eq!(role["kind"], "ClusterRole");
    assert_eq!(role["metadata"]["name"], "hpa-bridge:check");
    for rule in role["rules"].as_array().unwrap() {
        for verb in rule["verbs"].as_array().unwrap() {
            assert!(verb == "get" || verb == "list", "{rule}");
        }
    }
    assert!(
        !base()
            .iter()
            .any(|d| d["metadata"]["name"] == "hpa-bridge:check"),
        "the base installs the check's role"
    );
}
