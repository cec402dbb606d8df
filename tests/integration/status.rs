//! `/status` at scale, through the real binary: filtered by namespace and metric, paged with
//! `limit` and `continue`, bad parameters refused with a Status naming them.

use std::collections::BTreeSet;

use hpa_bridge_kit::exporter::TestExporter;

use crate::common::*;

fn page_of_workloads(n: usize) -> String {
    let mut page = String::from("# TYPE hpa_expect_replicas gauge\n");
    for i in 0..n {
        page.push_str(&format!(
            "hpa_expect_replicas{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"w{i:03}\",service_instance_id=\"ctl\"}} 2\n"
        ));
    }
    page
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_pages_cover_every_row_once_and_filter_and_refuse_bad_parameters() {
    let ex = TestExporter::start().await;
    ex.page("/a", page_of_workloads(40));
    ex.page("/b", page_of_workloads(5));
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/a"), "team-a", "ctl-a"),
        (ex.url("/b"), "team-b", "ctl-b"),
    ]))
    .await;
    adapter
        .eventually_value("team-a", "hpa_expect_replicas", "hpa_target_name=w039", "2")
        .await;
    adapter
        .eventually_value("team-b", "hpa_expect_replicas", "hpa_target_name=w004", "2")
        .await;

    // Every row, once, across pages of 25; no page holds more than asked.
    let mut rows = Vec::new();
    let mut path = "/status?limit=25".to_string();
    let mut pages = 0;
    loop {
        let (code, body) = adapter.plain_get(&path).await;
        assert_eq!(code, 200, "{body}");
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        let workloads = doc["workloads"].as_array().unwrap();
        assert!(
            workloads.len() <= 25,
            "{} rows on one page",
            workloads.len()
        );
        for w in workloads {
            rows.push(format!(
                "{}/{}/{}",
                w["namespace"], w["metric"], w["selector"]
            ));
        }
        pages += 1;
        match doc["metadata"]["continue"].as_str() {
            Some(token) => path = format!("/status?limit=25&continue={token}"),
            None => break,
        }
    }
    let unique: BTreeSet<&String> = rows.iter().collect();
    assert_eq!(unique.len(), rows.len(), "a row was listed twice: {rows:?}");
    let per_workload = rows.len() / 45;
    assert!(
        per_workload >= 1 && rows.len() == 45 * per_workload,
        "{} rows",
        rows.len()
    );
    assert_eq!(pages, rows.len().div_ceil(25));

    // Filters: only team-b's workloads, one metric.
    let (code, body) = adapter
        .plain_get("/status?namespace=team-b&metric=hpa_expect_replicas")
        .await;
    assert_eq!(code, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let workloads = doc["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 5, "{body}");
    assert!(workloads
        .iter()
        .all(|w| w["namespace"] == "team-b" && w["metric"] == "hpa_expect_replicas"));
    assert!(doc["targets"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["labels"]["namespace"] == "team-b"));

    // Bad parameters: a Status naming the parameter, never a silently widened document.
    for (query, names) in [
        ("limit=0", "limit"),
        ("limit=many", "limit"),
        ("continue=not-a-token", "continue"),
        ("labelSelector=a", "labelSelector"),
        ("limit=%zz", "%zz"),
    ] {
        let (code, body) = adapter.plain_get(&format!("/status?{query}")).await;
        assert_eq!(code, 400, "{query}: {body}");
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["kind"], "Status", "{body}");
        assert!(
            status["message"].as_str().unwrap().contains(names),
            "{query}: {body}"
        );
    }
}

/// Object answers (custom.metrics.k8s.io) are listed in `/status` as rows whose scope names the
/// workload, evaluated through the Object scope (so a StatefulSet and a Deployment that share
/// `hpa_target_name` keep their own answers), and paging with `continue` carries them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_answers_are_listed_in_status_with_their_workload() {
    let labels = |kind: &str| format!("hpa_target_kind=\"{kind}\",hpa_target_name=\"lobby\"");
    let ex = TestExporter::start().await;
    ex.page(
        "/sts",
        format!(
            "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{{}}} 3\n",
            labels("StatefulSet")
        ),
    );
    ex.page(
        "/deploy",
        format!(
            "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{{}}} 9\n",
            labels("Deployment")
        ),
    );
    let adapter = AdapterProcess::start(&fast_config(&[
        (ex.url("/sts"), "games", "lobby-0"),
        (ex.url("/deploy"), "games", "lobby-7d9f-x"),
    ]))
    .await;
    let path = |resource: &str| {
        format!("/apis/custom.metrics.k8s.io/v1beta2/namespaces/games/{resource}/lobby/hpa_expect_replicas")
    };
    for (resource, value) in [("statefulsets.apps", "3"), ("deployments.apps", "9")] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let (code, v) = adapter.get_json(&path(resource)).await;
            if code == 200 && single_value(&v).as_deref() == Some(value) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{resource}: {code} {v}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    let object_rows = |doc: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        doc["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| !w["object"].is_null())
            .map(|w| (w["scope"].as_str().unwrap().to_string(), w.clone()))
            .collect()
    };
    let (code, body) = adapter
        .plain_get("/status?namespace=games&metric=hpa_expect_replicas")
        .await;
    assert_eq!(code, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let rows = object_rows(&doc);
    let mut scopes: Vec<&str> = rows.iter().map(|(s, _)| s.as_str()).collect();
    scopes.sort();
    assert_eq!(scopes, ["Deployment/lobby", "StatefulSet/lobby"], "{body}");
    for (scope, value, kind) in [
        ("StatefulSet/lobby", 3, "StatefulSet"),
        ("Deployment/lobby", 9, "Deployment"),
    ] {
        let (_, w) = rows.iter().find(|(s, _)| s == scope).unwrap();
        assert_eq!(w["answer"]["outcome"]["value"], value, "{scope}: {w}");
        assert_eq!(w["object"]["kind"], kind, "{w}");
        assert_eq!(w["object"]["name"], "lobby", "{w}");
        assert_eq!(w["source"], "request", "{w}");
        assert_eq!(w["namespace"], "games", "{w}");
    }
    // External rows keep their selector as their scope.
    assert!(doc["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["object"].is_null())
        .all(|w| w["scope"] == w["selector"]));

    // Paging one row at a time still lists every row once, the Object rows included.
    let mut seen = Vec::new();
    let mut next = "/status?namespace=games&metric=hpa_expect_replicas&limit=1".to_string();
    loop {
        let (code, body) = adapter.plain_get(&next).await;
        assert_eq!(code, 200, "{body}");
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        for w in doc["workloads"].as_array().unwrap() {
            seen.push(format!("{} {}", w["scope"], w["object"].is_null()));
        }
        match doc["metadata"]["continue"].as_str() {
            Some(token) => {
                next = format!(
                    "/status?namespace=games&metric=hpa_expect_replicas&limit=1&continue={token}"
                )
            }
            None => break,
        }
    }
    let all: Vec<String> = doc["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| format!("{} {}", w["scope"], w["object"].is_null()))
        .collect();
    assert_eq!(seen, all);
}

/// A JSON recommender's own `reason` travels with its value through the real binary: beside
/// the answer on /status, in the history and on the page, and quoted in the Status message of
/// the refusal its stuck loop causes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_reason_is_shown_beside_its_answer_and_quoted_in_its_refusal() {
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let document = |timestamp: i64, reason: &str| {
        serde_json::json!({
            "recommendedWorkers": 4,
            "reason": reason,
            "timestamp": timestamp,
        })
        .to_string()
    };
    let ex = TestExporter::start().await;
    let reason = "backlog drained for 300s; 2 workers \"idle\"";
    ex.page("/autoscaler/status", document(now_ms(), reason));
    let config = format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n  static:\n    - url: {}\n      labels: {{namespace: seatunnel, pod: seatunnel-master-0, cluster: seatunnel}}\n      json:\n        samples:\n          - series: seatunnel_autoscaler_recommended_workers\n            value: $.recommendedWorkers\n            timestamp: $.timestamp\n        reason: $.reason\nmetrics:\n  - name: seatunnel_workers\n    kind: recommendation\n    series: [seatunnel_autoscaler_recommended_workers]\n",
        ex.url("/autoscaler/status")
    );
    let adapter = AdapterProcess::start(&config).await;
    // The recommender keeps its document current while the first answers are read.
    let fresh = {
        let ex = ex.clone();
        tokio::spawn(async move {
            loop {
                ex.page("/autoscaler/status", document(now_ms(), reason));
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };
    adapter
        .eventually_value("seatunnel", "seatunnel_workers", "cluster=seatunnel", "4")
        .await;
    let said = |v: &serde_json::Value| -> Vec<(String, String)> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r["target"].as_str().unwrap_or_default().to_string(),
                    r["reason"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let target = ex.url("/autoscaler/status");
    let expected = vec![(target.clone(), reason.to_string())];
    let status = adapter.status().await;
    let row = status["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["metric"] == "seatunnel_workers")
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(said(&row["answer"]["producerReasons"]), expected, "{row}");
    let (code, body) = adapter
        .plain_get("/status/history?namespace=seatunnel&metric=seatunnel_workers")
        .await;
    assert_eq!(code, 200, "{body}");
    let history: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        said(&history["scopes"][0]["producerReasons"]),
        expected,
        "{history}"
    );
    let (code, html) = adapter.plain_get("/").await;
    assert_eq!(code, 200);
    assert!(
        html.contains("says <q>backlog drained for 300s; 2 workers &quot;idle&quot;</q>"),
        "{html}"
    );

    // The loop sticks behind a live endpoint: its document stops moving, the value goes stale,
    // and the refusal the HPA reads quotes what the recommender last said.
    // One page timestamped now, then frozen: an older time would be out of order, not stale.
    fresh.abort();
    let _ = fresh.await;
    ex.page("/autoscaler/status", document(now_ms(), reason));
    let refused = adapter
        .eventually(
            "seatunnel",
            "seatunnel_workers",
            "cluster=seatunnel",
            "a stale refusal",
            |c, _| c == 503,
        )
        .await;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains(" is stale: "), "{message}");
    assert!(
        message.contains(&format!(
            "; producer {target} says \"backlog drained for 300s; 2 workers \\\"idle\\\"\""
        )),
        "{message}"
    );
}
