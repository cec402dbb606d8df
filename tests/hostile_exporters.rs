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
