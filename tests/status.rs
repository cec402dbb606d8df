//! `/status` at scale, through the real binary: filtered by namespace and metric, paged with
//! `limit` and `continue`, bad parameters refused with a Status naming them (issue 13).

mod common;

use std::collections::BTreeSet;

use common::*;

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
