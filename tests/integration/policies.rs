//! Policies end to end: real exporters on loopback, the real binary, real HTTPS requests.
//! threshold (hysteresis, live targets, sustain, unknown load), validWhen, epoch fencing and
//! combine.

use std::time::Duration;

use hpa_bridge_kit::exporter::{Behaviour, TestExporter};

use crate::common::*;

const MATCHING: &str = "app=matching";
const CLUSTER: &str = "cluster=c1";

fn scrape(targets: &[(String, &str, &str)]) -> String {
    format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n{}",
        static_targets(targets)
    )
}

fn load_page(value: &str) -> String {
    format!("# TYPE app_load gauge\napp_load{{app=\"matching\"}} {value}\n")
}

fn current_page(value: &str) -> String {
    format!("# TYPE app_replicas gauge\napp_replicas{{app=\"matching\"}} {value}\n")
}

fn message(v: &serde_json::Value) -> String {
    v["message"].as_str().unwrap_or_default().to_string()
}

async fn expect_value(adapter: &AdapterProcess, metric: &str, selector: &str, want: &str) {
    adapter
        .eventually("default", metric, selector, want, |c, v| {
            c == 200 && single_value(v).as_deref() == Some(want)
        })
        .await;
}

/// The answer for `metric` in `/status`, as last computed there.
async fn status_answer(adapter: &AdapterProcess, metric: &str) -> serde_json::Value {
    let status = adapter.status().await;
    status["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["metric"] == metric && w["source"] == "request")
        .unwrap_or_else(|| panic!("{metric} missing from /status: {status}"))["answer"]
        .clone()
}

/// Poll `/status` until the answer's reason for `metric` satisfies `check`; the value alone
/// cannot tell a hold from the scale-up that preceded it.
async fn eventually_reason(
    adapter: &AdapterProcess,
    metric: &str,
    what: &str,
    check: impl Fn(&str) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let a = status_answer(adapter, metric).await;
        if check(a["reason"].as_str().unwrap_or_default()) {
            return a;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: last answer {a}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A load ramp through the thresholds, with the served answer fed back as the current count
/// (what the HPA does by setting spec.replicas): each step lands on a fixed point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_ramps_up_and_down_without_oscillating() {
    let ex = TestExporter::start().await;
    ex.page("/p0", load_page("500"));
    ex.page("/p1", load_page("500"));
    ex.page("/ctl", current_page("2"));
    let config = format!(
        "{}metrics:
  - name: matching_replicas
    kind: threshold
    series: [app_load]
    upPerReplica: 200
    downPerReplica: 150
    currentSeries: app_replicas
",
        scrape(&[
            (ex.url("/p0"), "default", "p0"),
            (ex.url("/p1"), "default", "p1"),
            (ex.url("/ctl"), "default", "ctl"),
        ])
    );
    let adapter = AdapterProcess::start(&config).await;
    let m = "matching_replicas";
    // V = 1000 at 2 replicas: up = ceil(1000/200) = 5 > 2.
    expect_value(&adapter, m, MATCHING, "5").await;
    let a = status_answer(&adapter, m).await;
    let reason = a["reason"].as_str().unwrap();
    assert!(reason.starts_with("scale up: 5 > current 2"), "{reason}");
    assert!(
        reason.contains("up = ceil(V/200) = 5, down = ceil(V/150) = 7"),
        "{reason}"
    );
    assert!(a["rule"].as_str().unwrap().contains("ceil(V/upPerReplica)"));
    assert_eq!(a["inputs"].as_array().unwrap().len(), 3, "{a}");

    // The HPA applies 5: the answer stays 5 (a fixed point, not a flap back down).
    ex.page("/ctl", current_page("5"));
    let a = eventually_reason(&adapter, m, "hold at 5", |r| r.contains("current 5")).await;
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("hold: up 5 <= current 5 <= down 7"),
        "{reason}"
    );
    assert_eq!(a["outcome"]["value"], 5);
    expect_value(&adapter, m, MATCHING, "5").await;

    // Load falls to 700: up 4, down 5, so 5 is inside the band and holds.
    ex.page("/p0", load_page("350"));
    ex.page("/p1", load_page("350"));
    let a = eventually_reason(&adapter, m, "V = 700", |r| r.contains("V = 700 ")).await;
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("hold: up 4 <= current 5 <= down 5"),
        "{reason}"
    );
    assert_eq!(a["outcome"]["value"], 5);
    // Load falls to 400 (fractional shares): down = ceil(400/150) = 3 < 5, in one step.
    ex.page("/p0", load_page("150.5"));
    ex.page("/p1", load_page("249.5"));
    expect_value(&adapter, m, MATCHING, "3").await;
    let reason = status_answer(&adapter, m).await["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.starts_with("scale down: 3 < current 5"), "{reason}");
    ex.page("/ctl", current_page("3"));
    expect_value(&adapter, m, MATCHING, "3").await;
    // No load at all: the default min of 1, never 0.
    ex.page("/p0", load_page("0"));
    ex.page("/p1", load_page("0"));
    expect_value(&adapter, m, MATCHING, "1").await;
    let reason = status_answer(&adapter, m).await["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("min 1 raises 0 to 1"), "{reason}");
}

/// Without Kubernetes or currentSeries the live targets are the current count; a pod whose
/// share of the load is unknown blocks a decrease; sustain holds until its window is covered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_counts_live_targets_and_unknown_load_blocks_a_decrease() {
    let ex = TestExporter::start().await;
    ex.page("/p0", load_page("300"));
    ex.page("/p1", load_page("300"));
    ex.page("/p2", load_page("300"));
    let config = format!(
        "{}metrics:
  - name: matching_replicas
    kind: threshold
    series: [app_load]
    upPerReplica: 200
    downPerReplica: 100
  - name: matching_sustained
    kind: threshold
    series: [app_load]
    upPerReplica: 200
    downPerReplica: 100
    sustain: {{up: 1s, down: 1s, fraction: 0.5}}
",
        scrape(&[
            (ex.url("/p0"), "default", "p0"),
            (ex.url("/p1"), "default", "p1"),
            (ex.url("/p2"), "default", "p2"),
        ])
    );
    let adapter = AdapterProcess::start(&config).await;
    // V = 900 on 3 live targets: up = 5 > 3.
    expect_value(&adapter, "matching_replicas", MATCHING, "5").await;
    let reason = status_answer(&adapter, "matching_replicas").await["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("current 3 from live targets"), "{reason}");

    // The first evaluation of the sustained metric starts its history, so the 1s window cannot
    // be covered yet, however slow the machine: hold at 3.
    let (code, v) = adapter
        .metric("default", "matching_sustained", MATCHING)
        .await;
    assert_eq!((code, single_value(&v).as_deref()), (200, Some("3")), "{v}");
    // Once the window is covered by evaluations that all want 5, it scales.
    expect_value(&adapter, "matching_sustained", MATCHING, "5").await;

    // Load drops to 30 in total, but pod 2 stops answering: its share is unknown.
    ex.page("/p0", load_page("10"));
    ex.page("/p1", load_page("10"));
    ex.set(
        "/p2",
        Behaviour {
            body: "down".into(),
            status: 500,
            delay: Duration::ZERO,
        },
    );
    // p2's last sample goes stale. Only 2 targets are live, but counting them as the current
    // replica count would leave out exactly the pod whose load is unknown: holding at 2 could
    // shrink a 3-pod workload on unknown input. Without a real current count, refuse.
    let v = adapter
        .eventually(
            "default",
            "matching_replicas",
            MATCHING,
            "a refusal while p2 is unknown and current is not known",
            |c, _| c == 503,
        )
        .await;
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("current replica count is unknown"), "{msg}");
    // p2 comes back with its share: the total is known again and the answer drops to 1.
    ex.page("/p2", load_page("10"));
    expect_value(&adapter, "matching_replicas", MATCHING, "1").await;
}

fn seatunnel_page(recommended: &str, current: Option<&str>, valid: &str) -> String {
    let mut s = format!(
        "# TYPE seatunnel_autoscaler_recommended_workers gauge\n\
         seatunnel_autoscaler_recommended_workers{{cluster=\"c1\",address=\"10.0.0.1:5801\",action=\"scale_in\",recommendation_only=\"true\"}} {recommended}\n\
         # TYPE seatunnel_autoscaler_metrics_valid gauge\n\
         seatunnel_autoscaler_metrics_valid{{cluster=\"c1\",address=\"10.0.0.1:5801\"}} {valid}\n"
    );
    if let Some(c) = current {
        s.push_str(&format!(
            "# TYPE seatunnel_autoscaler_current_workers gauge\n\
             seatunnel_autoscaler_current_workers{{cluster=\"c1\",address=\"10.0.0.1:5801\"}} {c}\n"
        ));
    }
    s
}

/// The metrics section of examples/seatunnel.yaml, with a fast scrape of a local exporter.
fn seatunnel_config(url: String) -> String {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/seatunnel.yaml"
    ))
    .unwrap();
    let metrics = &example[example.find("\nmetrics:").expect("metrics section") + 1..];
    format!(
        "{}{metrics}",
        scrape(&[(url, "default", "seatunnel-master")])
    )
}

#[test]
fn the_seatunnel_example_loads() {
    let config = hpa_bridge_rules::config::Config::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/seatunnel.yaml"
    )))
    .unwrap();
    let m = config.metric("seatunnel_workers").unwrap();
    assert_eq!(
        m.valid_when().unwrap().series,
        "seatunnel_autoscaler_metrics_valid"
    );
    assert_eq!(
        m.current_series(),
        Some("seatunnel_autoscaler_current_workers")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_when_gates_scale_in_on_the_seatunnel_example() {
    let ex = TestExporter::start().await;
    ex.page("/m", seatunnel_page("4", Some("6"), "1"));
    let adapter = AdapterProcess::start(&seatunnel_config(ex.url("/m"))).await;
    let m = "seatunnel_workers";
    // Gate 1: the recommendation as is, even below current.
    expect_value(&adapter, m, CLUSTER, "4").await;
    let reason = status_answer(&adapter, m).await["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.contains("validWhen seatunnel_autoscaler_metrics_valid == 1 holds"),
        "{reason}"
    );

    // Gate 0: the recommendation may not lower: max(4, current 6) = 6.
    ex.page("/m", seatunnel_page("4", Some("6"), "0"));
    expect_value(&adapter, m, CLUSTER, "6").await;
    let a = status_answer(&adapter, m).await;
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.contains("does not hold") && reason.contains("scale-in blocked"),
        "{reason}"
    );
    assert_eq!(a["parts"][0]["outcome"]["value"], 4, "{a}");
    // ...but may still raise.
    ex.page("/m", seatunnel_page("9", Some("6"), "0"));
    expect_value(&adapter, m, CLUSTER, "9").await;

    // Gate 0 and no current count: a Status error, never a lowering value.
    ex.page("/m", seatunnel_page("4", None, "0"));
    let v = adapter
        .eventually("default", m, CLUSTER, "503 gate closed", |c, _| c == 503)
        .await;
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["reason"], "ServiceUnavailable");
    let msg = message(&v);
    assert!(
        msg.contains("held by its validity gate")
            && msg.contains("current replica count is unknown"),
        "{msg}"
    );

    // A missing gate series counts as closed too; the gate coming back releases the value.
    ex.page(
        "/m",
        "# TYPE seatunnel_autoscaler_recommended_workers gauge\n\
         seatunnel_autoscaler_recommended_workers{cluster=\"c1\",address=\"a\",action=\"hold\",recommendation_only=\"true\"} 4\n",
    );
    let v = adapter
        .eventually("default", m, CLUSTER, "missing gate", |c, v| {
            c == 503 && message(v).contains("no such series")
        })
        .await;
    assert!(message(&v).contains("no such series"), "{v}");
    ex.page("/m", seatunnel_page("4", None, "1"));
    expect_value(&adapter, m, CLUSTER, "4").await;
}

/// A recommender's page: `(address, master_epoch, value)` per series, the epoch label left out
/// where it is `None`.
fn epoch_page(series: &[(&str, Option<&str>, &str)]) -> String {
    let mut s = "# TYPE seatunnel_autoscaler_recommended_workers gauge\n".to_string();
    for (address, epoch, value) in series {
        let epoch = epoch
            .map(|e| format!(",master_epoch=\"{e}\""))
            .unwrap_or_default();
        s.push_str(&format!(
            "seatunnel_autoscaler_recommended_workers{{cluster=\"c1\",address=\"{address}\"{epoch}}} {value}\n"
        ));
    }
    s
}

/// The same series served fenced by `master_epoch` and plain, from two masters' targets.
fn epoch_config(old: String, new: String) -> String {
    format!(
        "{}metrics:\n  - name: fenced\n    kind: recommendation\n    series: [seatunnel_autoscaler_recommended_workers]\n    epochLabel: master_epoch\n  - name: unfenced\n    kind: recommendation\n    series: [seatunnel_autoscaler_recommended_workers]\n",
        scrape(&[(old, "default", "master-old"), (new, "default", "master-new")])
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epoch_fencing_follows_the_newest_leader_however_many_series_precede_it() {
    // A former master stuck at 9 under epoch 3 and the new master at 4 under epoch 4, each on
    // more series than a served answer notes in full: whichever target the store lists
    // second, a summary would count its series without the labels that carry their epochs.
    let addresses =
        |side: &str| -> Vec<String> { (0..10).map(|i| format!("{side}-{i}")).collect() };
    let (old, new) = (addresses("old"), addresses("new"));
    let mut old_series: Vec<(&str, Option<&str>, &str)> =
        old.iter().map(|a| (a.as_str(), Some("3"), "9")).collect();
    let new_series: Vec<(&str, Option<&str>, &str)> =
        new.iter().map(|a| (a.as_str(), Some("4"), "4")).collect();
    let ex = TestExporter::start().await;
    ex.page("/old", epoch_page(&old_series));
    ex.page("/new", epoch_page(&new_series));
    let adapter = AdapterProcess::start(&epoch_config(ex.url("/old"), ex.url("/new"))).await;
    expect_value(&adapter, "fenced", CLUSTER, "4").await;
    // Without the label, the max: the former master pins the workload.
    expect_value(&adapter, "unfenced", CLUSTER, "9").await;
    let a = status_answer(&adapter, "fenced").await;
    let fenced = a["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == "fenced: epoch 3, older than the newest epoch 4")
        .count();
    assert_eq!(fenced, 10, "{a}");
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.contains("at master_epoch 4") && reason.contains("10 series of older epochs fenced"),
        "{reason}"
    );

    // A series of the former master without its label: which master it is cannot be told.
    old_series.push(("unlabelled", None, "2"));
    ex.page("/old", epoch_page(&old_series));
    let v = adapter
        .eventually("default", "fenced", CLUSTER, "503 invalid", |c, _| c == 503)
        .await;
    let msg = message(&v);
    assert!(
        msg.contains("is invalid")
            && msg.contains("has no master_epoch label")
            && msg.contains("seatunnel_autoscaler_recommended_workers from"),
        "{msg}"
    );
}

fn rec_page(a: &str, b: &str, current: Option<&str>) -> String {
    let mut s = format!(
        "# TYPE rec_a gauge\nrec_a{{app=\"matching\"}} {a}\n# TYPE rec_b gauge\nrec_b{{app=\"matching\"}} {b}\n"
    );
    if let Some(c) = current {
        s.push_str(&format!(
            "# TYPE app_replicas gauge\napp_replicas{{app=\"matching\"}} {c}\n"
        ));
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combine_takes_the_max_and_an_invalid_input_blocks_a_decrease() {
    let ex = TestExporter::start().await;
    ex.page("/m", rec_page("3", "7", Some("5")));
    let config = format!(
        "{}metrics:
  - name: rec_a
    kind: recommendation
    series: [rec_a]
    currentSeries: app_replicas
  - name: rec_b
    kind: recommendation
    series: [rec_b]
  - name: matching_target
    kind: target
    combine: [rec_a, rec_b]
",
        scrape(&[(ex.url("/m"), "default", "m")])
    );
    let adapter = AdapterProcess::start(&config).await;
    let m = "matching_target";
    expect_value(&adapter, m, MATCHING, "7").await;
    let a = status_answer(&adapter, m).await;
    assert!(
        a["reason"]
            .as_str()
            .unwrap()
            .contains("combine(rec_a, rec_b) = 7"),
        "{a}"
    );
    assert_eq!(
        a["parts"][0]["parts"].as_array().unwrap().len(),
        2,
        "both inputs explained: {a}"
    );

    // rec_b turns invalid (NaN): it might want more, so 3 may not lower below current 5.
    ex.page("/m", rec_page("3", "NaN", Some("5")));
    expect_value(&adapter, m, MATCHING, "5").await;
    let reason = status_answer(&adapter, m).await["parts"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.contains("rec_b") && reason.contains("scale-in blocked"),
        "{reason}"
    );
    // A valid input above current still raises.
    ex.page("/m", rec_page("8", "NaN", Some("5")));
    expect_value(&adapter, m, MATCHING, "8").await;
    // Without a current count the decrease cannot be blocked by a value: refused.
    ex.page("/m", rec_page("3", "NaN", None));
    let v = adapter
        .eventually("default", m, MATCHING, "503 invalid input", |c, _| c == 503)
        .await;
    assert!(
        message(&v).contains("current replica count is unknown"),
        "{v}"
    );
    // Both valid again: the plain max, even below the old current.
    ex.page("/m", rec_page("3", "2", None));
    expect_value(&adapter, m, MATCHING, "3").await;
}
