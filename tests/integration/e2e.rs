//! End to end: real exporters on loopback, the real binary, real TLS, real HTTPS requests.

use std::time::Duration;

use hpa_bridge_kit::exporter::{Behaviour, TestExporter};

use crate::common::*;

const LOBBY: &str = "hpa_target_name=lobby";

fn code_of(v: &serde_json::Value) -> i64 {
    v["code"].as_i64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_controllers_give_the_max_never_the_sum() {
    let ex = TestExporter::start().await;
    ex.page("/a", expect_page("ctl-0", "3"));
    ex.page("/b", expect_page("ctl-1", "7"));
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/a"), "default", "ctl-0"),
        (ex.url("/b"), "default", "ctl-1"),
    ]))
    .await;
    let v = adapter
        .eventually(
            "default",
            "hpa_expect_replicas",
            LOBBY,
            "max of 3 and 7",
            |c, v| c == 200 && single_value(v).as_deref() == Some("7"),
        )
        .await;
    let item = &v["items"][0];
    assert_eq!(v["kind"], "ExternalMetricValueList");
    assert_eq!(v["apiVersion"], "external.metrics.k8s.io/v1beta1");
    assert_eq!(item["metricName"], "hpa_expect_replicas");
    assert_eq!(item["metricLabels"]["hpa_target_name"], "lobby");
    assert!(item["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(item["window"].as_i64().unwrap() >= 1);

    // The former controller raises its value: still one item, the new max.
    ex.page("/a", expect_page("ctl-0", "12"));
    adapter
        .eventually_value("default", "hpa_expect_replicas", LOBBY, "12")
        .await;

    // `/status` explains it: the rule, both inputs, and the reason.
    let status = adapter.status().await;
    let w = status["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["metric"] == "hpa_expect_replicas" && w["source"] == "request")
        .unwrap_or_else(|| panic!("workload missing from /status: {status}"));
    assert_eq!(w["answer"]["outcome"]["value"], 12);
    assert!(w["answer"]["rule"].as_str().unwrap().contains("never sum"));
    assert_eq!(w["answer"]["inputs"].as_array().unwrap().len(), 2);
    assert!(w["answer"]["reason"]
        .as_str()
        .unwrap()
        .contains("max of 2 fresh series"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floor_counts_ready_pods_and_target_is_the_max() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "1"));
    ex.page("/p0", index_page("lobby-0", "1"));
    ex.page("/p1", index_page("lobby-1", "2"));
    ex.page("/p2", index_page("lobby-2", "0")); // not Ready / holds no state
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/ctl"), "default", "ctl-0"),
        (ex.url("/p0"), "default", "lobby-0"),
        (ex.url("/p1"), "default", "lobby-1"),
        (ex.url("/p2"), "default", "lobby-2"),
    ]))
    .await;
    adapter
        .eventually_value("default", "hpa_stateful_floor", LOBBY, "2")
        .await;
    adapter
        .eventually(
            "default",
            "hpa_target_replicas",
            LOBBY,
            "target 2",
            |c, v| c == 200 && single_value(v).as_deref() == Some("2"),
        )
        .await;
    // Pod 2 takes state: floor and target follow.
    ex.page("/p2", index_page("lobby-2", "3"));
    adapter
        .eventually(
            "default",
            "hpa_target_replicas",
            LOBBY,
            "target 3",
            |c, v| c == 200 && single_value(v).as_deref() == Some("3"),
        )
        .await;
    // The recommendation rises above the floor.
    ex.page("/ctl", expect_page("ctl-0", "5"));
    adapter
        .eventually(
            "default",
            "hpa_target_replicas",
            LOBBY,
            "target 5",
            |c, v| c == 200 && single_value(v).as_deref() == Some("5"),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_data_is_an_error_never_zero() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "4"));
    let adapter =
        AdapterProcess::start(&fast_config(&[(ex.url("/ctl"), "default", "ctl-0")])).await;
    adapter
        .eventually_value("default", "hpa_expect_replicas", LOBBY, "4")
        .await;
    ex.set(
        "/ctl",
        Behaviour {
            body: "down".into(),
            status: 500,
            delay: Duration::ZERO,
        },
    );
    let v = adapter
        .eventually(
            "default",
            "hpa_expect_replicas",
            LOBBY,
            "stale error",
            |c, _| c == 503,
        )
        .await;
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["reason"], "ServiceUnavailable");
    assert_eq!(code_of(&v), 503);
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("1 series of hpa_expect_replicas") && msg.contains("staleAfter 1.5s"),
        "{msg}"
    );
    // The target refuses too: no 0, no guess.
    let (code, v) = adapter
        .metric("default", "hpa_target_replicas", LOBBY)
        .await;
    assert_eq!(code, 503, "{v}");
    // The failure is visible in /metrics.
    let (_, metrics) = adapter.plain_get("/metrics").await;
    assert!(
        metrics.contains("hpa_bridge_scrape_errors_total{"),
        "{metrics}"
    );
    assert!(metrics.contains("reason=\"status\""), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pod_keeps_its_index_and_a_never_scraped_one_makes_the_floor_incomplete() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "1"));
    ex.page("/p0", index_page("lobby-0", "1"));
    ex.page("/p1", index_page("lobby-1", "2"));
    let dead = format!("http://127.0.0.1:{}/metrics", free_port());
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/ctl"), "default", "ctl-0"),
        (ex.url("/p0"), "default", "lobby-0"),
        (ex.url("/p1"), "default", "lobby-1"),
        (dead.clone(), "default", "lobby-2"),
    ]))
    .await;
    // lobby-2 was never scraped: the floor is incomplete, and so is the target.
    let v = adapter
        .eventually(
            "default",
            "hpa_stateful_floor",
            LOBBY,
            "incomplete",
            |c, _| c == 503,
        )
        .await;
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("incomplete") && msg.contains(&dead), "{msg}");
    assert!(msg.contains("at least 2"), "{msg}");
    let (code, v) = adapter
        .metric("default", "hpa_target_replicas", LOBBY)
        .await;
    assert_eq!(code, 503, "{v}");
    drop(adapter);

    // Without the dead target, a pod that starts failing keeps its index.
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/ctl"), "default", "ctl-0"),
        (ex.url("/p0"), "default", "lobby-0"),
        (ex.url("/p1"), "default", "lobby-1"),
    ]))
    .await;
    adapter
        .eventually_value("default", "hpa_stateful_floor", LOBBY, "2")
        .await;
    ex.set(
        "/p1",
        Behaviour {
            body: "gone".into(),
            status: 503,
            delay: Duration::ZERO,
        },
    );
    tokio::time::sleep(Duration::from_millis(2500)).await; // well past staleAfter
    let (code, v) = adapter.metric("default", "hpa_stateful_floor", LOBBY).await;
    assert_eq!((code, single_value(&v).as_deref()), (200, Some("2")), "{v}");
    let status = adapter.status().await;
    let text = status.to_string();
    assert!(text.contains("target failing"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_errors_are_precise_statuses() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "6"));
    let adapter =
        AdapterProcess::start(&fast_config(&[(ex.url("/ctl"), "default", "ctl-0")])).await;

    let (code, v) = adapter
        .metric("default", "hpa_expect_replicas", "a in b")
        .await;
    assert_eq!(code, 400);
    assert_eq!(v["reason"], "BadRequest");
    assert!(v["message"]
        .as_str()
        .unwrap()
        .contains("invalid label selector"));

    let (code, v) = adapter.metric("default", "no_such_metric", LOBBY).await;
    assert_eq!(code, 404);
    assert_eq!(v["reason"], "NotFound");
    assert!(v["message"]
        .as_str()
        .unwrap()
        .contains("hpa_target_replicas"));

    // client-go lower-cases the path, but other clients may not: match case-insensitively.
    adapter
        .eventually_value("default", "HPA_Expect_Replicas", LOBBY, "6")
        .await;

    // Nothing matches in another namespace or for another workload: 404, not 0.
    let (code, v) = adapter.metric("other", "hpa_expect_replicas", LOBBY).await;
    assert_eq!(code, 404, "{v}");
    let (code, _) = adapter
        .metric("default", "hpa_expect_replicas", "hpa_target_name=nope")
        .await;
    assert_eq!(code, 404);

    let (code, v) = adapter
        .get_json("/apis/external.metrics.k8s.io/v1beta1/namespaces/Bad_NS/hpa_expect_replicas")
        .await;
    assert_eq!((code, v["reason"].as_str()), (400, Some("BadRequest")));

    let (code, v) = adapter.get_json("/apis/foo").await;
    assert_eq!((code, v["kind"].as_str()), (404, Some("Status")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_health() {
    let adapter = AdapterProcess::start("scrape: {interval: 200ms, timeout: 100ms}\n").await;
    let (code, v) = adapter
        .get_json("/apis/external.metrics.k8s.io/v1beta1")
        .await;
    assert_eq!(code, 200);
    assert_eq!(v["kind"], "APIResourceList");
    let names: Vec<&str> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "hpa_expect_replicas",
            "hpa_stateful_floor",
            "hpa_target_replicas"
        ]
    );
    let (code, v) = adapter.get_json("/apis").await;
    assert_eq!((code, v["kind"].as_str()), (200, Some("APIGroupList")));
    let (code, v) = adapter.get_json("/apis/external.metrics.k8s.io").await;
    assert_eq!((code, v["kind"].as_str()), (200, Some("APIGroup")));
    for p in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(adapter.get_anonymous(p).await.unwrap().0, 200, "{p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_huge_and_garbage_targets_fail_alone() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "5"));
    ex.set(
        "/slow",
        Behaviour {
            body: expect_page("slow", "50").into(),
            status: 200,
            delay: Duration::from_secs(5),
        },
    );
    ex.page("/huge", format!("# {}\n", "x".repeat(200_000)));
    ex.page(
        "/garbage",
        "hpa_expect_replicas{hpa_target_name=\"lobby\" 3\n",
    );
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/ctl"), "default", "ctl-0"),
        (ex.url("/slow"), "other", "slow"),
        (ex.url("/huge"), "other", "huge"),
        (ex.url("/garbage"), "other", "garbage"),
    ]))
    .await;
    // The healthy target is served while the others fail.
    adapter
        .eventually_value("default", "hpa_expect_replicas", LOBBY, "5")
        .await;
    let status = adapter.status().await;
    let errors: std::collections::BTreeMap<String, String> = status["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["labels"]["pod"].as_str().unwrap().to_string(),
                t["lastError"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(errors["slow"].contains("timed out"), "{errors:?}");
    assert!(errors["huge"].contains("maxBodyBytes"), "{errors:?}");
    assert!(errors["garbage"].contains("line 1"), "{errors:?}");
    assert_eq!(errors["ctl-0"], "");
    let (_, metrics) = adapter.plain_get("/metrics").await;
    for reason in ["timeout", "too_large", "parse"] {
        assert!(
            metrics.contains(&format!("reason=\"{reason}\"")),
            "{reason}: {metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_values_are_refused_and_named() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "NaN"));
    let adapter =
        AdapterProcess::start(&fast_config(&[(ex.url("/ctl"), "default", "ctl-0")])).await;
    for (raw, why) in [
        ("NaN", "NaN"),
        ("+Inf", "infinite"),
        ("-2", "negative"),
        ("2.5", "not an integer"),
    ] {
        ex.page("/ctl", expect_page("ctl-0", raw));
        let v = adapter
            .eventually("default", "hpa_expect_replicas", LOBBY, why, |c, v| {
                c == 503 && v["message"].as_str().unwrap_or("").contains(why)
            })
            .await;
        assert_eq!(v["reason"], "ServiceUnavailable");
    }
}

#[test]
fn refuses_non_loopback_without_authentication() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["serve", "--bind-address", "0.0.0.0", "--secure-port", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Refused with a message (exit 1), not a crash (101) or a signal.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("without authentication") && err.contains("loopback"),
        "{err}"
    );
}

#[test]
fn config_errors_name_the_key_and_exit_nonzero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "scrape:\n  interval: 10s\n  staleAfter: 2s\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["serve", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("scrape.staleAfter"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn help_describes_every_flag() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--config",
        "--secure-port",
        "--bind-address",
        "--tls-cert-file",
        "--tls-private-key-file",
        "--metrics-bind-address",
        "--verbose",
    ] {
        assert!(
            text.contains(flag),
            "{flag} missing from serve --help:\n{text}"
        );
    }
}

/// A real kubectl as the client, the way an operator checks the adapter by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_raw_reads_the_target() {
    let kubectl = peers::kubectl();
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "4"));
    ex.page("/p0", index_page("lobby-0", "1"));
    ex.page("/p5", index_page("lobby-5", "6"));
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/ctl"), "default", "ctl-0"),
        (ex.url("/p0"), "default", "lobby-0"),
        (ex.url("/p5"), "default", "lobby-5"),
    ]))
    .await;
    adapter
        .eventually_value("default", "hpa_target_replicas", LOBBY, "6")
        .await;
    // A generated kubeconfig that verifies the serving certificate against the test CA.
    // Loopback mode authenticates nobody, but kubectl insists on some credential (it would
    // prompt for a username), so the user carries an unused token.
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: demo\n  user:\n    token: unused-in-loopback-mode\ncontexts:\n- name: local\n  context: {{cluster: local, user: demo}}\ncurrent-context: local\n",
            adapter.port,
            adapter.pki.ca_path().display()
        ),
    )
    .unwrap();
    let run = |path: &str| {
        std::process::Command::new(&kubectl)
            .args(["get", "--raw", path])
            .env("HOME", home.path())
            .env("KUBECONFIG", &kubeconfig)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_target_replicas?labelSelector=hpa_target_name%3Dlobby");
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(single_value(&v).as_deref(), Some("6"), "{v}");
    assert_eq!(v["items"][0]["metricLabels"]["hpa_target_name"], "lobby");

    let out = run("/apis/external.metrics.k8s.io/v1beta1");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "APIResourceList");

    // kubectl surfaces the Status message of a refusal.
    let out = run("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/no_such_metric");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NotFound") || err.contains("not served"),
        "{err}"
    );
}
