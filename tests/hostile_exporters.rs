//! Hostile or careless exporters and target lists, end to end through the real binary
//! (issue 13): credentials in target URLs never shown, duplicate series in one page.

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_target_urls_are_redacted_in_status_metrics_and_logs() {
    let ex = TestExporter::start().await;
    ex.page("/ok", expect_page("ctl-0", "3"));
    let authority = ex.url("").trim_start_matches("http://").to_owned();
    let good = format!("http://scraper:hunter2@{authority}/ok");
    let failing = format!("http://scraper:hunter2@{authority}/missing");
    let adapter = AdapterProcess::start(&fast_config(&[
        (good, "default", "ctl-0"),
        (failing, "other", "ctl-1"),
    ]))
    .await;
    adapter
        .eventually_value(
            "default",
            "hpa_expect_replicas",
            "hpa_target_name=lobby",
            "3",
        )
        .await;

    let (_, status) = adapter.plain_get("/status").await;
    assert!(
        !status.contains("hunter2"),
        "/status shows a password: {status}"
    );
    assert!(
        status.contains(&format!("http://scraper:xxxxx@{authority}/missing")),
        "{status}"
    );

    let (_, metrics) = adapter.plain_get("/metrics").await;
    assert!(
        !metrics.contains("hunter2"),
        "/metrics shows a password: {metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "hpa_bridge_scrape_errors_total{{target=\"http://scraper:xxxxx@{authority}/missing\",reason=\"status\"}}"
        )),
        "{metrics}"
    );

    let log = adapter.log();
    assert!(
        log.contains("scrape failed"),
        "no scrape failure logged: {log}"
    );
    assert!(!log.contains("hunter2"), "the log shows a password: {log}");
}

/// A page holding the same series twice (10, then 2): Prometheus keeps the first sample and
/// reports the page. Here neither value is trusted: the answer never drops to 2, the input is
/// shown as ambiguous on /status, and /metrics counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_twice_in_one_page_is_ambiguous_never_lowers_and_is_counted() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "10"));
    let adapter =
        AdapterProcess::start(&fast_config(&[(ex.url("/ctl"), "default", "ctl-0")])).await;
    adapter
        .eventually_value(
            "default",
            "hpa_expect_replicas",
            "hpa_target_name=lobby",
            "10",
        )
        .await;

    ex.page(
        "/ctl",
        format!(
            "{}{}",
            expect_page("ctl-0", "10"),
            expect_page("ctl-0", "2").lines().nth(1).unwrap()
        ) + "\n",
    );
    let refused = adapter
        .eventually(
            "default",
            "hpa_expect_replicas",
            "hpa_target_name=lobby",
            "ambiguous",
            |c, v| {
                c != 200
                    && v["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("ambiguous")
            },
        )
        .await;
    assert_eq!(refused["kind"], "Status", "{refused}");
    assert!(single_value(&refused).is_none(), "{refused}");

    let status = adapter.status().await.to_string();
    assert!(status.contains("exported twice in one scrape"), "{status}");
    let (_, metrics) = adapter.plain_get("/metrics").await;
    let counted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hpa_bridge_scrape_duplicate_series_total "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(counted.is_some_and(|n| n >= 1.0), "{metrics}");
}
