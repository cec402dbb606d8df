//! custom.metrics.k8s.io end to end (docs/hpa-behaviour.md §6): the real binary, real exporters,
//! real TLS, and a real `kubectl get --raw` on the Object metric paths.

use std::path::{Path, PathBuf};

use hpa_bridge_kit::exporter::{Behaviour, TestExporter};

use crate::common::*;
use serde_json::Value;

const V2: &str = "/apis/custom.metrics.k8s.io/v1beta2";
const V1: &str = "/apis/custom.metrics.k8s.io/v1beta1";

/// One workload's recommendation and one pod's stateful index, labelled as the libapp exporter
/// labels them (docs/hpa-behaviour.md §4.1).
fn workload_page(kind: &str, name: &str, expect: &str, index: &str) -> String {
    let labels = format!(
        "hpa_target_kind=\"{kind}\",hpa_target_name=\"{name}\",hpa_target_api_version=\"apps/v1\""
    );
    format!(
        "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{{labels}}} {expect}\n\
         # TYPE hpa_stateful_index gauge\nhpa_stateful_index{{{labels}}} {index}\n"
    )
}

fn object_path(version: &str, resource: &str, name: &str, metric: &str) -> String {
    format!("{version}/namespaces/games/{resource}/{name}/{metric}")
}

/// A kubeconfig for a real kubectl that verifies the adapter's serving certificate. Loopback
/// mode authenticates nobody, but kubectl insists on some credential, so the user carries an
/// unused token.
fn kubeconfig(adapter: &AdapterProcess, home: &Path) -> PathBuf {
    let path = home.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: demo\n  user:\n    token: unused-in-loopback-mode\ncontexts:\n- name: local\n  context: {{cluster: local, user: demo}}\ncurrent-context: local\n",
            adapter.port,
            adapter.pki.ca_path().display()
        ),
    )
    .unwrap();
    path
}

fn kubectl_raw(kubectl: &Path, home: &Path, config: &Path, path: &str) -> (bool, String, String) {
    let out = std::process::Command::new(kubectl)
        .args(["get", "--raw", path])
        .env("HOME", home)
        .env("KUBECONFIG", config)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn eventually_object(adapter: &AdapterProcess, path: &str, value: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let (code, v) = adapter.get_json(path).await;
        if code == 200 && single_value(&v).as_deref() == Some(value) {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {value} at {path}: last answer {code} {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn assert_status(v: &Value, code: u16, reason: &str, message_has: &str) {
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["reason"], reason, "{v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(message.contains(message_has), "{message_has:?} not in {v}");
}

/// The selector-typo scenario: a StatefulSet and a Deployment both named `lobby` in one
/// namespace, their series sharing `hpa_target_name`. The External path with the loose selector
/// `hpa_target_name=lobby` mixes them (the max of both); the Object path does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_metrics_are_scoped_to_the_workload_and_kubectl_reads_them() {
    let kubectl = peers::kubectl();
    let ex = TestExporter::start().await;
    ex.page("/sts", workload_page("StatefulSet", "lobby", "3", "2"));
    ex.page("/deploy", workload_page("Deployment", "lobby", "9", "1"));
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/sts"), "games", "lobby-0"),
        (ex.url("/deploy"), "games", "lobby-7d9f-x"),
    ]))
    .await;

    // External, loose selector: both workloads' series are in scope.
    adapter
        .eventually_value("games", "hpa_target_replicas", "hpa_target_name=lobby", "9")
        .await;

    // Object: each workload gets its own.
    let sts = object_path(V2, "statefulsets.apps", "lobby", "hpa_target_replicas");
    let v = eventually_object(&adapter, &sts, "3").await;
    let deploy = object_path(V2, "deployments.apps", "lobby", "hpa_target_replicas");
    eventually_object(&adapter, &deploy, "9").await;

    // v1beta2, as client-go's custom metrics client decodes it.
    assert_eq!(v["kind"], "MetricValueList");
    assert_eq!(v["apiVersion"], "custom.metrics.k8s.io/v1beta2");
    let item = &v["items"][0];
    assert_eq!(
        item["describedObject"],
        serde_json::json!({"kind": "StatefulSet", "namespace": "games", "name": "lobby", "apiVersion": "apps/v1"})
    );
    assert_eq!(item["metric"]["name"], "hpa_target_replicas");
    assert!(item["metric"]["selector"].is_null(), "{item}");
    assert!(item["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(item["windowSeconds"].as_i64().unwrap() >= 1);
    assert_eq!(item["value"], "3");

    // v1beta1: metricName and window; metricLabelSelector narrows and is echoed.
    let path = format!(
        "{}?metricLabelSelector=hpa_target_api_version%3Dapps%2Fv1",
        object_path(V1, "statefulsets.apps", "lobby", "hpa_expect_replicas")
    );
    let (code, v) = adapter.get_json(&path).await;
    assert_eq!(code, 400, "apps/v1 is not a label value: {v}");
    let path = format!(
        "{}?metricLabelSelector=hpa_target_api_version",
        object_path(V1, "statefulsets.apps", "lobby", "hpa_expect_replicas")
    );
    let v = eventually_object(&adapter, &path, "3").await;
    assert_eq!(v["apiVersion"], "custom.metrics.k8s.io/v1beta1");
    let item = &v["items"][0];
    assert_eq!(item["metricName"], "hpa_expect_replicas");
    assert!(item["window"].as_i64().unwrap() >= 1);
    assert_eq!(item["describedObject"]["kind"], "StatefulSet");
    assert_eq!(
        item["selector"],
        serde_json::json!({"matchExpressions": [{"key": "hpa_target_api_version", "operator": "Exists"}]})
    );

    // The same through a real kubectl.
    let home = tempfile::tempdir().unwrap();
    let config = kubeconfig(&adapter, home.path());
    for (path, value) in [(&sts, "3"), (&deploy, "9")] {
        let (ok, out, err) = kubectl_raw(&kubectl, home.path(), &config, path);
        assert!(ok, "kubectl failed: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(single_value(&v).as_deref(), Some(value), "{v}");
    }
    let v1 = object_path(V1, "statefulsets.apps", "lobby", "hpa_target_replicas");
    let (ok, out, err) = kubectl_raw(&kubectl, home.path(), &config, &v1);
    assert!(ok, "kubectl failed: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["items"][0]["metricName"], "hpa_target_replicas", "{v}");
    let (ok, out, err) = kubectl_raw(&kubectl, home.path(), &config, V2);
    assert!(ok, "kubectl failed: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "APIResourceList");
    let names: Vec<&str> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"statefulsets.apps/hpa_target_replicas"),
        "{names:?}"
    );
    assert!(
        names.contains(&"deployments.apps/hpa_expect_replicas"),
        "{names:?}"
    );
    let (ok, out, _) = kubectl_raw(
        &kubectl,
        home.path(),
        &config,
        "/apis/custom.metrics.k8s.io",
    );
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["preferredVersion"]["version"], "v1beta2", "{v}");
    // kubectl surfaces a refusal's Status.
    let (ok, _, err) = kubectl_raw(
        &kubectl,
        home.path(),
        &config,
        &object_path(V2, "pods", "lobby-0", "hpa_target_replicas"),
    );
    assert!(!ok);
    assert!(
        err.contains("statefulsets.apps and deployments.apps"),
        "{err}"
    );
}

/// Every bad request is a precise `Status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_object_requests_are_precise_statuses() {
    let ex = TestExporter::start().await;
    ex.page("/sts", workload_page("StatefulSet", "lobby", "3", "2"));
    let adapter =
        AdapterProcess::start(&fast_config(&[(ex.url("/sts"), "games", "lobby-0")])).await;
    let sts = object_path(V2, "statefulsets.apps", "lobby", "hpa_target_replicas");
    eventually_object(&adapter, &sts, "3").await;
    let cases: Vec<(String, u16, &str, &str)> = vec![
        (
            object_path(V2, "pods", "lobby-0", "hpa_target_replicas"),
            404,
            "NotFound",
            "statefulsets.apps and deployments.apps",
        ),
        (
            object_path(V2, "statefulsets.apps", "Lobby_", "hpa_target_replicas"),
            400,
            "BadRequest",
            "DNS-1123 subdomain",
        ),
        (
            object_path(V2, "statefulsets.apps", "*", "hpa_target_replicas"),
            400,
            "BadRequest",
            "\"*\" form",
        ),
        (
            format!("{V2}/statefulsets.apps/lobby/hpa_target_replicas"),
            404,
            "NotFound",
            "root-scoped",
        ),
        (
            format!("{V2}/namespaces/games/metrics/hpa_target_replicas"),
            404,
            "NotFound",
            "Namespace",
        ),
        (
            object_path(V2, "statefulsets.apps", "chat", "hpa_target_replicas"),
            404,
            "NotFound",
            "StatefulSet games/chat",
        ),
        (
            format!("{sts}?metricLabelSelector=a%20in%20(x"),
            400,
            "BadRequest",
            "metricLabelSelector",
        ),
        (
            object_path(
                "/apis/custom.metrics.k8s.io/v1",
                "statefulsets.apps",
                "lobby",
                "m",
            ),
            404,
            "NotFound",
            "v1beta2 and v1beta1",
        ),
        (
            object_path(V2, "statefulsets.apps", "lobby", "no_such_metric"),
            404,
            "NotFound",
            "not served",
        ),
    ];
    for (path, code, reason, has) in cases {
        let (c, v) = adapter.get_json(&path).await;
        assert_eq!(c, code, "{path}: {v}");
        assert_status(&v, code, reason, has);
    }
}

/// A pod of the workload that was never scraped makes the answer unknown: refused, as on the
/// External path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_whose_pods_are_not_all_scraped_is_refused() {
    let ex = TestExporter::start().await;
    ex.page("/p0", workload_page("StatefulSet", "lobby", "3", "1"));
    ex.set(
        "/p1",
        Behaviour {
            status: 500,
            ..Behaviour::ok("")
        },
    );
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/p0"), "games", "lobby-0"),
        (ex.url("/p1"), "games", "lobby-1"),
    ]))
    .await;
    let floor = object_path(V2, "statefulsets.apps", "lobby", "hpa_stateful_floor");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let (code, v) = adapter.get_json(&floor).await;
        if code == 503 {
            assert_status(&v, 503, "ServiceUnavailable", "StatefulSet games/lobby");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "expected a refusal: {code} {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
