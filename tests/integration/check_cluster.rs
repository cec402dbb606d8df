//! `hpa-bridge check --cluster` against the real control plane (tests/control-plane): the live
//! HPAs, workloads, APIServices and KEDA ScaledObjects (a CustomResourceDefinition installed
//! here), the adapter's answers asked through the real aggregator as the HPA asks them, and the
//! checker's every request read back from the API server's audit log: what its authorizer
//! decided, never what a stand-in recorded.

use std::path::{Path, PathBuf};

use serde_json::Value;

use hpa_bridge_kit::exporter::TestExporter;

use crate::cluster::{hpa as lobby_hpa, start_adapter_with, Lobby, EXTERNAL_METRIC};
use crate::common::control_plane::{Audited, ControlPlane};
use crate::common::*;

/// One `check --cluster -o json` run.
pub(crate) struct Checked {
    pub(crate) code: Option<i32>,
    pub(crate) report: Value,
    pub(crate) stderr: String,
}

impl Checked {
    pub(crate) fn codes(&self) -> std::collections::BTreeSet<String> {
        self.findings_all()
            .iter()
            .map(|f| f["code"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    pub(crate) fn findings_all(&self) -> Vec<Value> {
        self.report["findings"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) fn findings(&self, code: &str) -> Vec<Value> {
        self.findings_all()
            .into_iter()
            .filter(|f| f["code"] == code)
            .collect()
    }
}

impl std::fmt::Display for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n{:#}\n{}",
            self.code, self.report, self.stderr
        )
    }
}

/// `check --cluster` through `kubeconfig`, in `ns`, with `more` arguments.
pub(crate) async fn check(kubeconfig: &Path, ns: &str, more: &[&str]) -> Checked {
    let mut args: Vec<String> = ["check", "--cluster", "--kubeconfig"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(kubeconfig.display().to_string());
    args.extend(["-n", ns, "-o", "json"].iter().map(|s| s.to_string()));
    args.extend(more.iter().map(|s| s.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    Checked {
        code: out.status.code(),
        report,
        stderr,
    }
}

/// The service account `name` in `ns`, bound cluster-wide to `role`, and a kubeconfig with its
/// token; and its user name, as the audit log records it.
pub(crate) fn checker(cp: &ControlPlane, ns: &str, name: &str, role: &str) -> (PathBuf, String) {
    cp.kubectl(&["create", "serviceaccount", name, "-n", ns]);
    cp.kubectl(&[
        "create",
        "clusterrolebinding",
        &format!("{name}-{ns}"),
        &format!("--clusterrole={role}"),
        &format!("--serviceaccount={ns}:{name}"),
    ]);
    (
        cp.service_account_kubeconfig(ns, name),
        format!("system:serviceaccount:{ns}:{name}"),
    )
}

/// manifests/check/rbac.yaml applied: the ClusterRole `hpa-bridge:check`.
pub(crate) fn check_role_yaml() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/check/rbac.yaml")
}

/// `metric` for the `kind` `workload`, as one instance exports it.
fn page(metric: &str, kind: &str, workload: &str, instance: &str, value: &str) -> String {
    format!(
        "# TYPE {metric} gauge\n{metric}{{hpa_target_kind=\"{kind}\",hpa_target_name=\"{workload}\",service_instance_id=\"{instance}\"}} {value}\n"
    )
}

/// A StatefulSet of `replicas` whose pods nobody scrapes.
fn statefulset(ns: &str, name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  replicas: {replicas}\n  serviceName: {name}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: app, image: app.invalid/{name}:1}}]\n"
    )
}

/// An HPA `name` on the `kind` `target` with `metrics` (YAML list items), min 2, max 50, and
/// behavior that no rule faults (tolerance 0, so HB008 has nothing to say).
fn hpa(ns: &str, name: &str, kind: &str, target: &str, metrics: &str) -> String {
    format!(
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: {kind}, name: {target}}}\n  minReplicas: 2\n  maxReplicas: 50\n  metrics:\n{metrics}  behavior:\n    scaleUp:\n      stabilizationWindowSeconds: 0\n      tolerance: \"0\"\n      policies: [{{type: Pods, value: 4, periodSeconds: 15}}, {{type: Percent, value: 100, periodSeconds: 15}}]\n    scaleDown:\n      stabilizationWindowSeconds: 60\n      tolerance: \"0\"\n      policies: [{{type: Percent, value: 100, periodSeconds: 15}}]\n"
    )
}

fn external(metric: &str, workload: &str) -> String {
    format!("  - type: External\n    external:\n      metric: {{name: {metric}, selector: {{matchLabels: {{hpa_target_name: {workload}}}}}}}\n      target: {{type: AverageValue, averageValue: \"1\"}}\n")
}

fn object(metric: &str, kind: &str, workload: &str) -> String {
    format!("  - type: Object\n    object:\n      describedObject: {{apiVersion: apps/v1, kind: {kind}, name: {workload}}}\n      metric: {{name: {metric}}}\n      target: {{type: AverageValue, averageValue: \"1\"}}\n")
}

/// `kubectl create` (no last-applied configuration, so nothing but the HPA claims
/// `spec.replicas`).
fn create(cp: &ControlPlane, yaml: &str) {
    cp.try_kubectl_input(&["create", "-f", "-"], Some(yaml))
        .unwrap_or_else(|e| panic!("kubectl create: {e}\n{yaml}"));
}

fn uris(events: &[Audited]) -> Vec<String> {
    events
        .iter()
        .map(|e| format!("{} {} {}", e.verb, e.uri, e.code))
        .collect()
}

/// Three StatefulSets with External HPAs as in a cluster mid-incident (lobby answered; bazaar's
/// recommender exports NaN, so refused; arena exports nothing) and hall with an Object HPA and
/// no series: `check` reports each answer the adapter gives through the real aggregator, on
/// the field the HPA reads, and asks exactly the requests the HPA would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_cluster_reports_the_adapters_external_and_object_answers_through_the_aggregator() {
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    let ns = cp.namespace("check-answers").await;
    let ex = TestExporter::start().await;
    let sts = "StatefulSet";
    for (path, metric, workload, instance, value) in [
        ("/ctl", "hpa_expect_replicas", "lobby", "ctl-0", "3"),
        ("/lobby-0", "hpa_stateful_index", "lobby", "lobby-0", "1"),
        ("/lobby-1", "hpa_stateful_index", "lobby", "lobby-1", "2"),
        (
            "/bazaar-ctl",
            "hpa_expect_replicas",
            "bazaar",
            "ctl-0",
            "NaN",
        ),
        ("/bazaar-0", "hpa_stateful_index", "bazaar", "bazaar-0", "1"),
    ] {
        ex.page(path, page(metric, sts, workload, instance, value));
    }
    let targets = static_targets(&[
        (ex.url("/ctl"), &ns, "ctl-0"),
        (ex.url("/lobby-0"), &ns, "lobby-0"),
        (ex.url("/lobby-1"), &ns, "lobby-1"),
        (ex.url("/bazaar-ctl"), &ns, "bazaar-ctl-0"),
        (ex.url("/bazaar-0"), &ns, "bazaar-0"),
    ]);
    let adapter = start_adapter_with(cp, &targets, &[]).await;
    cp.register(adapter.port, "both", None).await;
    // Through the aggregator, as the check will ask: lobby answered, bazaar refused.
    let raw = |w: &str| {
        cp.try_kubectl(&[
            "get",
            "--raw",
            &format!("/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/hpa_expect_replicas?labelSelector=hpa_target_name%3D{w}"),
        ])
    };
    cp.eventually("lobby answered, bazaar refused", || {
        let refused = raw("bazaar").is_err_and(|e| e.contains("ServiceUnavailable"));
        (raw("lobby").is_ok() && refused).then_some(())
    })
    .await;
    let pair = |w: &str| {
        format!(
            "{}{}",
            external("hpa_expect_replicas", w),
            external("hpa_stateful_floor", w)
        )
    };
    for w in ["lobby", "bazaar", "arena", "hall"] {
        create(cp, &statefulset(&ns, w, 2));
    }
    for (name, metrics) in [
        (
            "lobby",
            format!(
                "{}{}",
                pair("lobby"),
                object("hpa_target_replicas", sts, "lobby")
            ),
        ),
        ("bazaar", pair("bazaar")),
        ("arena", pair("arena")),
        ("hall", object("hpa_target_replicas", sts, "hall")),
    ] {
        create(cp, &hpa(&ns, name, sts, name, &metrics));
    }
    cp.kubectl(&["apply", "-f", check_role_yaml().to_str().unwrap()]);
    let (kubeconfig, user) = checker(cp, &ns, "checker", "hpa-bridge:check");
    let config = adapter.config_path();
    let r = check(&kubeconfig, &ns, &["--config", config.to_str().unwrap()]).await;
    assert_eq!(r.code, Some(1), "{r}");
    assert_eq!(
        r.codes(),
        ["HB007", "HB018"].iter().map(|s| s.to_string()).collect(),
        "{r}"
    );
    // arena: both External metrics have no series; hall: nor has its Object metric. The
    // adapter's own words are quoted, on the field the HPA reads.
    let no_series = r.findings("HB007");
    let mut fields: Vec<(String, String)> = no_series
        .iter()
        .map(|f| {
            let m = f["message"].as_str().unwrap();
            assert!(
                m.contains("404 NotFound") && m.contains("has no data"),
                "{m}"
            );
            (
                f["object"]["name"].as_str().unwrap().to_string(),
                f["field"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            ("arena", "spec.metrics[0].external.metric"),
            ("arena", "spec.metrics[1].external.metric"),
            ("hall", "spec.metrics[0].object.metric"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string())),
        "{r}"
    );
    // bazaar: the recommendation is refused with the adapter's reason; its floor is fine.
    let refused = r.findings("HB018");
    assert_eq!(refused.len(), 1, "{r}");
    assert_eq!(refused[0]["object"]["name"], "bazaar");
    assert_eq!(refused[0]["field"], "spec.metrics[0].external.metric");
    let m = refused[0]["message"].as_str().unwrap();
    assert!(m.contains("503 ServiceUnavailable"), "{m}");
    assert!(m.contains("hpa_expect_replicas is invalid"), "{m}");
    // lobby's three answers (two External, one Object) are fine: nothing about it.
    assert!(
        r.findings_all()
            .iter()
            .all(|f| f["object"]["name"] != "lobby"),
        "{r}"
    );

    // The API server saw the HPA's own requests: the lower-cased metric with the selector as
    // labelSelector, the Object path with the workload's resource and the metric as its
    // subresource, and one GET per scale target.
    let seen = cp.audited(&user);
    let uris = uris(&seen);
    let lobby_external = format!(
        "list /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/hpa_expect_replicas?labelSelector=hpa%5Ftarget%5Fname%3Dlobby 200"
    );
    assert!(uris.contains(&lobby_external), "{uris:#?}");
    let lobby_object = format!(
        "get /apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/statefulsets.apps/lobby/hpa_target_replicas 200"
    );
    assert!(uris.contains(&lobby_object), "{uris:#?}");
    assert!(seen.iter().any(|e| e.group == "custom.metrics.k8s.io"
        && e.resource == "statefulsets.apps"
        && e.subresource == "hpa_target_replicas"
        && e.name == "hall"
        && e.code == 404));
    let count = |group: &str| seen.iter().filter(|e| e.group == group).count();
    assert_eq!(count("external.metrics.k8s.io"), 6, "{uris:#?}");
    assert_eq!(count("custom.metrics.k8s.io"), 2, "{uris:#?}");
    for w in ["lobby", "bazaar", "arena", "hall"] {
        assert!(
            seen.iter()
                .any(|e| e.verb == "get" && e.resource == "statefulsets" && e.name == w),
            "{uris:#?}"
        );
    }
}

/// The check's ClusterRole with every rule but the one on `keda.sh`, and without `get` on the
/// custom metrics APIService (a role applied before Object metrics were checked).
fn role_without_keda(name: &str) -> String {
    let docs = kube_objects::docs(&std::fs::read_to_string(check_role_yaml()).unwrap());
    let mut role = docs
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .unwrap();
    role["metadata"] = serde_json::json!({"name": name});
    role["rules"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["apiGroups"][0] != "keda.sh");
    for rule in role["rules"].as_array_mut().unwrap() {
        if let Some(names) = rule["resourceNames"].as_array_mut() {
            names.retain(|n| n != "v1beta2.custom.metrics.k8s.io");
        }
    }
    role.to_string()
}

/// A minimal CustomResourceDefinition for KEDA's ScaledObject: enough for the API server to
/// serve `keda.sh/v1alpha1` `scaledobjects`.
const SCALED_OBJECT_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: scaledobjects.keda.sh}
spec:
  group: keda.sh
  scope: Namespaced
  names: {kind: ScaledObject, listKind: ScaledObjectList, plural: scaledobjects, singular: scaledobject}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// Every writer of a workload's replicas, found live: two HPAs on one StatefulSet, an HPA
/// beside the ScaledObject KEDA scales the same Deployment with (KEDA's own HPA made as KEDA
/// makes it, owned by the ScaledObject), and the StatefulSet's `kubectl apply` that fixes
/// `spec.replicas`. The same run proves the check role (manifests/check/rbac.yaml) both ways
/// from the audit log: every request the check made was allowed, and every grant was used.
/// Without its `keda.sh` rule the check warns that HB021 went unchecked and finds the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_cluster_finds_every_writer_and_the_check_role_allows_exactly_what_it_reads() {
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    let ns = cp.namespace("check-writers").await;
    let ex = TestExporter::start().await;
    ex.page(
        "/ctl",
        format!(
            "{}{}",
            page("hpa_expect_replicas", "StatefulSet", "lobby", "ctl-0", "2"),
            page("hpa_expect_replicas", "Deployment", "worker", "ctl-0", "1")
        ),
    );
    ex.page(
        "/lobby-0",
        page("hpa_stateful_index", "StatefulSet", "lobby", "lobby-0", "1"),
    );
    let targets = static_targets(&[
        (ex.url("/ctl"), &ns, "ctl-0"),
        (ex.url("/lobby-0"), &ns, "lobby-0"),
    ]);
    let adapter = start_adapter_with(cp, &targets, &[]).await;
    cp.register(adapter.port, "both", None).await;
    cp.apply(SCALED_OBJECT_CRD);
    cp.eventually("the ScaledObject resource served", || {
        cp.try_kubectl(&["get", "scaledobjects.keda.sh", "-n", &ns])
            .ok()
    })
    .await;

    // lobby: applied client-side with replicas 3 (the last applied configuration keeps
    // setting it), and two HPAs.
    cp.apply(&statefulset(&ns, "lobby", 3));
    create(
        cp,
        &hpa(
            &ns,
            "lobby",
            "StatefulSet",
            "lobby",
            &format!(
                "{}{}",
                external("hpa_expect_replicas", "lobby"),
                object("hpa_target_replicas", "StatefulSet", "lobby")
            ),
        ),
    );
    create(cp, &hpa(&ns, "lobby-cpu", "StatefulSet", "lobby", "  - type: Resource\n    resource:\n      name: cpu\n      target: {type: Utilization, averageUtilization: 70}\n"));
    // worker: applied server-side without replicas (the manager does not own the field),
    // scaled by KEDA and by an HPA on hpa-bridge's metric.
    let worker = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: worker, namespace: {ns}}}\nspec:\n  selector: {{matchLabels: {{app: worker}}}}\n  template:\n    metadata: {{labels: {{app: worker}}}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: worker, image: app.invalid/worker:1}}]\n"
    );
    cp.try_kubectl_input(
        &[
            "apply",
            "--server-side",
            "--field-manager=kustomize-controller",
            "-f",
            "-",
        ],
        Some(&worker),
    )
    .unwrap();
    create(
        cp,
        &format!("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {{name: worker, namespace: {ns}}}\nspec:\n  scaleTargetRef: {{name: worker}}\n  minReplicaCount: 1\n  maxReplicaCount: 20\n  triggers:\n  - type: prometheus\n    metadata: {{serverAddress: \"http://prometheus.invalid:9090\", query: \"sum(queue_depth)\", threshold: \"10\"}}\n"),
    );
    let uid = cp.get_json(&["scaledobject.keda.sh", "worker", "-n", &ns])["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    create(
        cp,
        &hpa(
            &ns,
            "worker",
            "Deployment",
            "worker",
            &object("hpa_expect_replicas", "Deployment", "worker"),
        ),
    );
    let keda_hpa = hpa(&ns, "keda-hpa-worker", "Deployment", "worker", "  - type: External\n    external:\n      metric: {name: s0-prometheus, selector: {matchLabels: {scaledobject.keda.sh/name: worker}}}\n      target: {type: AverageValue, averageValue: \"10\"}\n")
        .replace(
            "metadata: {name: keda-hpa-worker, ",
            &format!("metadata: {{ownerReferences: [{{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, name: worker, uid: {uid}, controller: true, blockOwnerDeletion: true}}], name: keda-hpa-worker, "),
        );
    create(cp, &keda_hpa);

    cp.kubectl(&["apply", "-f", check_role_yaml().to_str().unwrap()]);
    let (kubeconfig, user) = checker(cp, &ns, "checker", "hpa-bridge:check");
    let config = adapter.config_path();
    let config = config.to_str().unwrap();
    let r = check(&kubeconfig, &ns, &["--config", config]).await;
    assert_eq!(r.code, Some(1), "{r}");
    assert_eq!(
        r.codes(),
        ["HB020", "HB021", "HB022"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        "{r}"
    );
    assert_eq!(r.findings("HB020").len(), 2, "{r}");
    let keda = r.findings("HB021");
    assert_eq!(keda.len(), 1, "{r}");
    assert_eq!(keda[0]["object"]["name"], "worker");
    let fixed = r.findings("HB022");
    assert_eq!(fixed.len(), 1, "{r}");
    assert_eq!(fixed[0]["object"]["name"], "lobby");
    let m = fixed[0]["message"].as_str().unwrap();
    assert!(
        m.contains("last-applied-configuration sets spec.replicas: 3"),
        "{m}"
    );

    // The role, both ways, from what the API server's authorizer saw of the run.
    let seen = cp.audited(&user);
    let listed = uris(&seen);
    assert!(!seen.is_empty());
    for e in &seen {
        assert!(
            e.code != 401 && e.code != 403,
            "refused: {e:?}\n{listed:#?}"
        );
    }
    let docs = kube_objects::docs(&std::fs::read_to_string(check_role_yaml()).unwrap());
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    for rule in role["rules"].as_array().unwrap() {
        let names = strings(&rule["resourceNames"]);
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    assert!(["get", "list"].contains(&verb.as_str()), "{rule}");
                    let used = |name: Option<&str>| {
                        seen.iter().any(|e| {
                            e.group == group
                                && e.verb == verb
                                && (resource == "*" || e.resource == resource)
                                && name.is_none_or(|n| e.name == n)
                        })
                    };
                    if names.is_empty() {
                        assert!(
                            used(None),
                            "{verb} {group}/{resource} is granted but never used:\n{listed:#?}"
                        );
                    }
                    for name in &names {
                        assert!(used(Some(name)), "{verb} {group}/{resource} {name} is granted but never used:\n{listed:#?}");
                    }
                }
            }
        }
    }

    // Without the ScaledObject rule and the custom metrics APIService: each is forbidden, said
    // so, and the rest is checked.
    let narrow = format!("check-no-keda-{ns}");
    cp.apply(&role_without_keda(&narrow));
    let (narrow_kubeconfig, narrow_user) = checker(cp, &ns, "narrow", &narrow);
    let f = check(&narrow_kubeconfig, &ns, &["--config", config]).await;
    assert_eq!(f.code, Some(1), "{f}");
    assert!(
        f.stderr
            .contains("HB021, an HPA beside a ScaledObject, is not checked"),
        "{f}"
    );
    assert!(
        f.stderr
            .contains("the Object metrics' APIService and answers are not checked"),
        "{f}"
    );
    assert_eq!(
        f.codes(),
        ["HB020", "HB022"].iter().map(|s| s.to_string()).collect(),
        "{f}"
    );
    assert!(cp
        .audited(&narrow_user)
        .iter()
        .any(|e| e.resource == "scaledobjects" && e.code == 403));
    cp.kubectl(&["delete", "clusterrole", &narrow]);
    cp.kubectl(&[
        "delete",
        "customresourcedefinition",
        "scaledobjects.keda.sh",
        "--wait=false",
    ]);
}

/// `check --cluster` as a service account bound to manifests/check/rbac.yaml, on the real
/// API server: no error on the working Lobby setup; HB001 once its HPA reads the target
/// through the Value path; HB016 once another adapter's Service owns the APIService, and then
/// the check asks that owner nothing. A token the API server does not know is an unusable
/// cluster: exit 2, naming the request that failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_cluster_finds_no_error_then_the_value_path_then_a_foreign_owner_it_does_not_ask() {
    let lobby = Lobby::start(EXTERNAL_METRIC, "external", 1, 3).await;
    lobby.reaches(3).await;
    let (cp, ns) = (lobby.cp, lobby.ns.as_str());
    cp.kubectl(&["apply", "-f", check_role_yaml().to_str().unwrap()]);
    let (kubeconfig, user) = checker(cp, ns, "checker", "hpa-bridge:check");
    let errors = |r: &Checked| -> Vec<String> {
        r.findings_all()
            .iter()
            .filter(|f| f["severity"] == "error")
            .map(|f| f["code"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let r = check(&kubeconfig, ns, &[]).await;
    assert_eq!((r.code, errors(&r)), (Some(0), vec![]), "{r}");

    let value = EXTERNAL_METRIC.replace(
        "{type: AverageValue, averageValue: \"1\"}",
        "{type: Value, value: \"1\"}",
    );
    cp.apply(&lobby_hpa(ns, 1, &value));
    let r = check(&kubeconfig, ns, &[]).await;
    assert_eq!(r.code, Some(1), "{r}");
    assert!(errors(&r).iter().any(|c| c == "HB001"), "{r}");

    // Another adapter's Service takes the external metrics APIService (as installing KEDA
    // does): HB016 names it. The Service does not exist, so the aggregator dials nothing; the
    // next test's registration applies hpa-bridge's APIService again.
    cp.kubectl(&[
        "patch",
        "apiservice",
        "v1beta1.external.metrics.k8s.io",
        "--type=merge",
        "-p",
        r#"{"spec":{"service":{"namespace":"keda","name":"keda-operator-metrics-apiserver"}}}"#,
    ]);
    let asked = |user: &str| {
        cp.audited(user)
            .iter()
            .filter(|e| e.group == "external.metrics.k8s.io")
            .count()
    };
    let before = asked(&user);
    assert!(before > 0);
    let r = check(&kubeconfig, ns, &[]).await;
    assert_eq!(r.code, Some(1), "{r}");
    assert!(errors(&r).iter().any(|c| c == "HB016"), "{r}");
    let hb016 = &r.findings("HB016")[0];
    assert!(
        hb016["message"]
            .as_str()
            .unwrap_or_default()
            .contains("keda/keda-operator-metrics-apiserver"),
        "{hb016}"
    );
    assert_eq!(hb016["field"], "spec.service");
    assert_eq!(asked(&user), before, "the foreign owner was asked");

    let bad = kubeconfig.with_file_name(format!("bad-token-{ns}.kubeconfig"));
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let token = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap();
    std::fs::write(&bad, text.replace(token, "not-a-token")).unwrap();
    let r = check(&bad, ns, &[]).await;
    assert_eq!(r.code, Some(2), "{r}");
    assert!(
        r.stderr
            .contains("listing autoscaling/v2 HorizontalPodAutoscalers"),
        "{r}"
    );
}
