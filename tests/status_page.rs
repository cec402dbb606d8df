//! The status page in a real browser: the real binary, an exporter whose values change and then
//! fail (a refusal period), HPA-like requests through the API so the answers enter the history,
//! then headless Chromium loads `/` and the rendered DOM must show the workload row, the
//! refusal band and the reason text, with an exporter's `<script>` label value escaped.
//!
//! `HPA_BRIDGE_UPDATE_SCREENSHOT=1` copies the screenshot to docs/status-page.png.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const LOBBY: &str = "hpa_target_name=lobby";
const EVIL: &str = "<script>alert(1)</script>";

fn controller_page(value: &str) -> String {
    format!(
        "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",service_instance_id=\"ctl-0\",note=\"{EVIL}\"}} {value}\n"
    )
}

/// Ask for the target every 400 ms for `seconds`, as an HPA would (faster, to fill a timeline
/// in seconds rather than minutes).
/// The recommender's endpoint answering 500.
fn failing() -> Behaviour {
    Behaviour {
        body: "boom\n".into(),
        status: 500,
        delay: Duration::ZERO,
    }
}

async fn ask_for(adapter: &AdapterProcess, seconds: u64) -> (u16, serde_json::Value) {
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut last = (0, serde_json::Value::Null);
    while Instant::now() < until {
        last = adapter
            .metric("default", "hpa_target_replicas", LOBBY)
            .await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    last
}

/// Run Chromium headless with `args` and a fresh profile; fail after `timeout`.
fn chromium(args: &[String], profile: &Path, timeout: Duration) -> String {
    let chromium = peers::chromium();
    let mut child = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", chromium.display()));
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_renders_rows_refusal_bands_and_reasons_in_chromium() {
    // Fail early, before the minute of traffic, when the browser is missing.
    peers::chromium();
    let ex = TestExporter::start().await;
    ex.page("/ctl", controller_page("3"));
    ex.page("/p0", index_page("lobby-0", "1"));
    ex.page("/p1", index_page("lobby-1", "2"));
    let config = format!(
        "{}history:\n  retention: 45s\n  entriesPerScope: 400\n",
        fast_config(&[
            (ex.url("/ctl"), "default", "ctl-0"),
            (ex.url("/p0"), "default", "lobby-0"),
            (ex.url("/p1"), "default", "lobby-1"),
        ])
    );
    let adapter = AdapterProcess::start(&config).await;
    adapter
        .eventually_value("default", "hpa_target_replicas", LOBBY, "3")
        .await;
    ask_for(&adapter, 6).await;
    ex.page("/ctl", controller_page("5"));
    ask_for(&adapter, 6).await;
    // The recommender fails: once its sample is older than staleAfter, the target is refused.
    ex.set("/ctl", failing());
    ask_for(&adapter, 6).await;
    // It comes back below the floor: the floor (2) sets the target.
    ex.page("/ctl", controller_page("1"));
    ask_for(&adapter, 6).await;
    // And fails again, so the newest answer is a refusal.
    ex.set("/ctl", failing());
    let (code, last) = ask_for(&adapter, 5).await;
    assert_eq!(code, 503, "{last}");
    let status_error = last["message"].as_str().unwrap().to_string();

    // /status/history: the scope, filtered, with values, refusals and the floor.
    let (code, body) = adapter
        .plain_get("/status/history?namespace=default&metric=hpa_target_replicas")
        .await;
    assert_eq!(code, 200, "{body}");
    let history: serde_json::Value = serde_json::from_str(&body).unwrap();
    let scope = &history["scopes"][0];
    assert_eq!(scope["workload"], "lobby", "{history}");
    let entries = scope["entries"].as_array().unwrap();
    let states: Vec<&str> = entries
        .iter()
        .map(|e| e["served"]["state"].as_str().unwrap())
        .collect();
    assert!(states.contains(&"value") && states.contains(&"refused"));
    assert!(entries.iter().any(|e| e["served"]["value"] == 5));
    assert!(entries
        .iter()
        .any(|e| e["served"]["value"] == 2 && e["recommendation"] == 1 && e["floor"] == 2));
    let (_, other) = adapter.plain_get("/status/history?namespace=other").await;
    assert!(other.contains("\"scopes\":[]"), "{other}");

    // The alerting gauges: the scope refuses now, since the second refusal run began; nothing
    // of the Prometheus source without one.
    let (code, metrics) = adapter.plain_get("/metrics").await;
    assert_eq!(code, 200);
    let labels = "namespace=\"default\",metric=\"hpa_target_replicas\",workload=\"lobby\"";
    assert!(
        metrics.contains(&format!("hpa_bridge_scope_refusing{{{labels}}} 1")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "hpa_bridge_scope_refusing_since_timestamp_seconds{{{labels}}} "
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "hpa_bridge_scope_floor_above_recommendation{{{labels}}} 0"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("hpa_bridge_ready 1"), "{metrics}");
    assert!(!metrics.contains("hpa_bridge_prometheus"), "{metrics}");

    // The page in a real browser, JavaScript irrelevant: the DOM as Chromium built it.
    let url = format!("http://127.0.0.1:{}/", adapter.metrics_port);
    let profile = tempfile::tempdir().unwrap();
    let dom = tokio::task::spawn_blocking({
        let url = url.clone();
        let profile = profile.path().to_path_buf();
        move || {
            chromium(
                &["--dump-dom".into(), url],
                &profile,
                Duration::from_secs(90),
            )
        }
    })
    .await
    .unwrap();
    assert!(
        dom.contains("class=\"workload refusing\"") && dom.contains("data-workload=\"lobby\""),
        "no refusing row for lobby in the DOM:\n{dom}"
    );
    assert!(
        dom.contains("<rect class=\"refusal\""),
        "no refusal band:\n{dom}"
    );
    assert!(
        dom.matches("<rect class=\"refusal\"").count() >= 2,
        "two refusal periods expected:\n{dom}"
    );
    // The reason text: the row carries the HPA's Status error message, and a band its reason.
    let escaped = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    assert!(
        dom.contains(&escaped(&status_error)),
        "the row must carry the Status error text {status_error:?}:\n{dom}"
    );
    assert!(dom.contains("refused (Stale)"), "{dom}");
    assert!(dom.contains("<path class=\"served\""), "{dom}");
    assert!(dom.contains("<path class=\"floor\""), "{dom}");
    // The exporter's `<script>` label value is text, never an element.
    assert!(
        dom.contains("note=\"&lt;script&gt;alert(1)&lt;/script&gt;\""),
        "the label value must appear escaped:\n{dom}"
    );
    assert!(
        !dom.contains(EVIL),
        "an exporter's label value became markup:\n{dom}"
    );
    // Scrape-target health: the failing controller is shown down.
    assert!(dom.contains("<table id=\"targets\">"), "{dom}");
    assert!(dom.contains(">down<"), "{dom}");

    // The screenshot, for docs/ and README.
    let shot = profile.path().join("status-page.png");
    let profile2 = tempfile::tempdir().unwrap();
    tokio::task::spawn_blocking({
        let shot = shot.clone();
        let profile = profile2.path().to_path_buf();
        move || {
            chromium(
                &[
                    format!("--screenshot={}", shot.display()),
                    "--window-size=1280,900".into(),
                    "--hide-scrollbars".into(),
                    url,
                ],
                &profile,
                Duration::from_secs(90),
            )
        }
    })
    .await
    .unwrap();
    let png = std::fs::read(&shot).expect("chromium wrote no screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    if std::env::var_os("HPA_BRIDGE_UPDATE_SCREENSHOT").is_some_and(|v| v == "1") {
        let dest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/status-page.png");
        std::fs::copy(&shot, &dest).unwrap();
    }
}
