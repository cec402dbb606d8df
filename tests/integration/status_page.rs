//! The status page in a real browser: the real binary discovering its pods through the real
//! control plane (tests/control-plane; the StatefulSet controller makes the pods, each pod's
//! exporter on its own loopback address), a recommender whose values change and then fail (a
//! refusal period), HPA-like requests so the answers enter the history, the StatefulSet's
//! `spec.replicas` following the served target as an HPA would, then headless
//! Chromium loads `/` and the rendered DOM must show the workload row, the refusal band, the
//! reason text, the time axis and the `spec.replicas` line, with an exporter's `<script>`
//! label value escaped.
//!
//! `HPA_BRIDGE_UPDATE_SCREENSHOT=1` copies the screenshot to docs/status-page.png.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hpa_bridge_kit::exporter::TestExporter;

use crate::common::control_plane::{ControlPlane, PodPages};
use crate::common::*;
use serde_json::json;

const LOBBY: &str = "hpa_target_name=lobby";
const EVIL: &str = "<script>alert(1)</script>";

fn controller_page(value: &str) -> String {
    format!(
        "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",service_instance_id=\"ctl-0\",note=\"{EVIL}\"}} {value}\n"
    )
}

/// The StatefulSets `lobby` (its pods hold the indices) and `ctl` (its pod runs the
/// recommender), both scraped through discovery.
fn workloads(ns: &str, pods: &PodPages) -> String {
    let sts = |name: &str, replicas: u32| {
        format!(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  replicas: {replicas}\n  serviceName: {name}\n  podManagementPolicy: Parallel\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata:\n      labels: {{app: {name}, page: lobby}}\n      annotations: {}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: app, image: app.invalid/{name}:1}}]\n",
            pods.annotations()
        )
    };
    format!("{}---\n{}", sts("lobby", 2), sts("ctl", 1))
}

/// Ask for the target every 400 ms for `seconds`, as an HPA would (faster, to fill a timeline
/// in seconds rather than minutes).
async fn ask_for(adapter: &AdapterProcess, ns: &str, seconds: u64) -> (u16, serde_json::Value) {
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut last = (0, serde_json::Value::Null);
    while Instant::now() < until {
        last = adapter.metric(ns, "hpa_target_replicas", LOBBY).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    last
}

/// The DOM of `url` as headless Chromium built it (fresh profile, 90 s at most).
pub(crate) async fn dump_dom(url: &str) -> String {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let profile = tempfile::tempdir().unwrap();
        chromium(
            &["--dump-dom".into(), url],
            profile.path(),
            Duration::from_secs(90),
        )
    })
    .await
    .unwrap()
}

/// A 1280x900 screenshot of `url` written to `shot` by headless Chromium, checked to be a PNG.
pub(crate) async fn screenshot(url: &str, shot: &Path) {
    let (url, path) = (url.to_string(), shot.to_path_buf());
    tokio::task::spawn_blocking(move || {
        let profile = tempfile::tempdir().unwrap();
        chromium(
            &[
                format!("--screenshot={}", path.display()),
                "--window-size=1280,900".into(),
                "--hide-scrollbars".into(),
                url,
            ],
            profile.path(),
            Duration::from_secs(90),
        )
    })
    .await
    .unwrap();
    let png = std::fs::read(shot).expect("chromium wrote no screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
}

/// Run Chromium headless with `args` and a fresh profile; fail after `timeout`.
pub(crate) fn chromium(args: &[String], profile: &Path, timeout: Duration) -> String {
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
    let cp = ControlPlane::shared();
    let ns = cp.namespace("status-page").await;
    let ns = ns.as_str();
    let pods = PodPages::start(cp, ns).await;
    pods.set("ctl-0", controller_page("3"));
    for (pod, index) in [("lobby-0", "1"), ("lobby-1", "2")] {
        pods.set(pod, index_page(pod, index));
    }
    // The pods the HPA-like scale-outs add hold nothing.
    for pod in ["lobby-2", "lobby-3", "lobby-4"] {
        pods.set(pod, index_page(pod, "0"));
    }
    cp.apply(&workloads(ns, &pods));
    cp.wait_replicas(ns, "statefulset", "lobby", 2).await;
    let config = format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n  \
         kubernetes:\n    namespaces: [{ns}]\n    podSelector: \"page=lobby\"\n\
         history:\n  retention: 45s\n  entriesPerScope: 400\n"
    );
    let kubeconfig = cp.adapter_kubeconfig();
    let adapter = AdapterProcess::start_with(
        &config,
        &["--kubeconfig", kubeconfig.to_str().unwrap(), "--no-memory"],
    )
    .await;
    adapter
        .eventually_value(ns, "hpa_target_replicas", LOBBY, "3")
        .await;
    let scale = |replicas: u32| {
        cp.kubectl(&[
            "scale",
            "statefulset",
            "lobby",
            "-n",
            ns,
            &format!("--replicas={replicas}"),
        ]);
    };
    // The HPA follows each served target a few seconds late (its sync period, shortened).
    ask_for(&adapter, ns, 3).await;
    scale(3);
    ask_for(&adapter, ns, 3).await;
    pods.set("ctl-0", controller_page("5"));
    ask_for(&adapter, ns, 3).await;
    scale(5);
    ask_for(&adapter, ns, 3).await;
    // The recommender fails: once its sample is older than staleAfter, the target is refused,
    // and the HPA keeps its replicas.
    pods.set_status("ctl-0", 500);
    ask_for(&adapter, ns, 6).await;
    // It comes back below the floor: the floor (2) sets the target; the HPA's scale-down
    // stabilization holds the replicas for now.
    pods.set("ctl-0", controller_page("1"));
    ask_for(&adapter, ns, 6).await;
    // And fails again, so the newest answer is a refusal.
    pods.set_status("ctl-0", 500);
    let (code, last) = ask_for(&adapter, ns, 5).await;
    assert_eq!(code, 503, "{last}");
    let status_error = last["message"].as_str().unwrap().to_string();

    // /status/history: the scope, filtered, with values, refusals and the floor.
    let (code, body) = adapter
        .plain_get(&format!(
            "/status/history?namespace={ns}&metric=hpa_target_replicas"
        ))
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
    // Each answer is kept with the spec.replicas it was served under, from the watch.
    for replicas in [2, 3, 5] {
        assert!(
            entries.iter().any(|e| e["specReplicas"] == replicas),
            "no entry at spec.replicas {replicas}: {history}"
        );
    }
    let (_, other) = adapter.plain_get("/status/history?namespace=other").await;
    assert!(other.contains("\"scopes\":[]"), "{other}");

    // The alerting gauges: the scope refuses now, since the second refusal run began; nothing
    // of the Prometheus source without one.
    let (code, metrics) = adapter.plain_get("/metrics").await;
    assert_eq!(code, 200);
    let labels = format!("namespace=\"{ns}\",metric=\"hpa_target_replicas\",workload=\"lobby\"");
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
    let dom = dump_dom(&url).await;
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
    // What the HPA applied, beside what was served, and the time axis relative to now (the
    // 45 s retention in steps of 10 s).
    assert!(
        dom.contains("<path class=\"spec-replicas\""),
        "no spec.replicas line:\n{dom}"
    );
    assert!(dom.contains("spec.replicas (applied by the HPA)"), "{dom}");
    let ticks: Vec<&str> = dom
        .split("<text class=\"tick\"")
        .skip(1)
        .filter_map(|t| t.split_once('>')?.1.split_once("</text>"))
        .map(|(label, _)| label)
        .collect();
    assert_eq!(
        ticks,
        [
            "\u{2212}40s",
            "\u{2212}30s",
            "\u{2212}20s",
            "\u{2212}10s",
            "now"
        ],
        "time axis ticks:\n{dom}"
    );
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
    let shot_dir = tempfile::tempdir().unwrap();
    let shot = shot_dir.path().join("status-page.png");
    screenshot(&url, &shot).await;
    if std::env::var_os("HPA_BRIDGE_UPDATE_SCREENSHOT").is_some_and(|v| v == "1") {
        let dest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/status-page.png");
        std::fs::copy(&shot, &dest).unwrap();
    }
}

/// A producer's reason with a terminal escape, a carriage return and a right-to-left override
/// reaches the page as visible `\u{..}` text: in Chromium's DOM none of the characters is left
/// to move a cursor or reorder what a person reads. /status keeps the reason as it was sent
/// (JSON escapes the controls itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_control_and_bidi_characters_are_shown_written_out_in_chromium() {
    peers::chromium();
    let reason = "scale in\u{1b}[2J\rto 1 \u{202e}8 ,1\u{202c} \u{2067}x\u{2069}";
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let document = move || {
        json!({"recommendedWorkers": 4, "reason": reason, "timestamp": now_ms()}).to_string()
    };
    let ex = TestExporter::start().await;
    ex.page("/autoscaler/status", document());
    let fresh = {
        let ex = ex.clone();
        tokio::spawn(async move {
            loop {
                ex.page("/autoscaler/status", document());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let config = format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n  static:\n    - url: {}\n      labels: {{namespace: seatunnel, pod: seatunnel-master-0, cluster: seatunnel}}\n      json:\n        samples:\n          - series: seatunnel_autoscaler_recommended_workers\n            value: $.recommendedWorkers\n            timestamp: $.timestamp\n        reason: $.reason\nmetrics:\n  - name: seatunnel_workers\n    kind: recommendation\n    series: [seatunnel_autoscaler_recommended_workers]\n",
        ex.url("/autoscaler/status")
    );
    let adapter = AdapterProcess::start(&config).await;
    adapter
        .eventually_value("seatunnel", "seatunnel_workers", "cluster=seatunnel", "4")
        .await;
    let status = adapter.status().await;
    let row = status["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["metric"] == "seatunnel_workers")
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(
        row["answer"]["producerReasons"][0]["reason"], reason,
        "/status keeps the reason as sent: {row}"
    );
    let url = format!("http://127.0.0.1:{}/", adapter.metrics_port);
    let dom = dump_dom(&url).await;
    fresh.abort();
    assert!(
        dom.contains(
            "says <q>scale in\\u{001b}[2J\\u{000d}to 1 \\u{202e}8 ,1\\u{202c} \\u{2067}x\\u{2069}</q>"
        ),
        "the reason, written out:\n{dom}"
    );
    for c in [
        '\u{1b}', '\r', '\u{202e}', '\u{202c}', '\u{2067}', '\u{2069}',
    ] {
        assert!(!dom.contains(c), "{c:?} reached the DOM:\n{dom}");
    }
}
