//! The HPA predictions of `serve` on the real control plane (docs/explain.md, "In the
//! adapter"): the real HPA controller syncs the lobby HPA every second, the adapter predicts
//! each next sync and checks it after; `/status`, the page and `/metrics` show it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{Lobby, EXTERNAL_METRIC};

const ADAPTER: &str = "system:serviceaccount:hpa-bridge:hpa-bridge";

/// The `hpas` entry of `ns/lobby` in the adapter's `/status`, once it has checked at least
/// `checked` predictions.
async fn prediction(lobby: &Lobby, checked: u64) -> Value {
    let adapter = lobby.adapter.as_ref().unwrap();
    let want = format!("{}/lobby", lobby.ns);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let status = adapter.status().await;
        let entry = status["hpas"]
            .as_array()
            .and_then(|hpas| hpas.iter().find(|h| h["hpa"] == want.as_str()))
            .cloned();
        if let Some(e) = &entry {
            let p = &e["prediction"];
            let done = p["hits"].as_u64().unwrap_or(0) + p["misses"].as_u64().unwrap_or(0);
            if done >= checked {
                return e.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no {checked} checked predictions of {want}: {entry:?}\nlog:\n{}",
            std::fs::read_to_string(&adapter.log_path).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_predicts_the_real_hpas_next_syncs_and_checks_them() {
    let lobby = Lobby::start(EXTERNAL_METRIC, "external", 1, 2).await;
    let (cp, ns) = (lobby.cp, lobby.ns.clone());
    lobby.reaches(2).await;
    let first = prediction(&lobby, 1).await;
    // The explanation is explain's: the target, the metric from hpa-bridge, the next move.
    assert_eq!(first["scaleTarget"]["kind"], "StatefulSet", "{first}");
    assert_eq!(
        first["metrics"][0]["name"], "hpa_target_replicas",
        "{first}"
    );
    assert_eq!(first["metrics"][0]["source"], "hpa-bridge", "{first}");
    assert!(
        first["next"]["why"].as_str().is_some_and(|w| !w.is_empty()),
        "{first}"
    );

    // A scale-out, a scale-in and steady syncs, all predicted and checked.
    let before = prediction(&lobby, 1).await["prediction"].clone();
    lobby.recommend(5, 3);
    lobby.reaches(5).await;
    lobby.recommend(3, 1);
    lobby.reaches(3).await;
    lobby.holds(3, 3).await;
    let after = prediction(&lobby, 10).await;
    let (p0, p) = (&before, &after["prediction"]);
    let hits = p["hits"].as_u64().unwrap() - p0["hits"].as_u64().unwrap();
    let misses = p["misses"].as_u64().unwrap() - p0["misses"].as_u64().unwrap();
    eprintln!("predictions over the scale-out and scale-in: {hits} hit, {misses} missed");
    assert!(hits + misses >= 5, "{after}");
    // A prediction is made from the answer and the scale of its time; a sync that reads a
    // newer recommendation (each of the two changes above) or a newer status.replicas (pods
    // becoming ready during the scale-out) can differ. Steady syncs never do.
    let log = std::fs::read_to_string(&lobby.adapter.as_ref().unwrap().log_path).unwrap();
    let missed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("did not set the desired count"))
        .collect();
    eprintln!("misses:\n{}", missed.join("\n"));
    assert!(
        misses <= 4,
        "more misses than input changes: {hits} hit, {misses} missed\n{after}"
    );
    assert_eq!(after["next"]["desiredReplicas"], 3, "{after}");
    assert_eq!(p["missesInARow"], 0, "{after}");

    // /metrics: one HPA predicted, its misses in a row, the checks by result.
    let adapter = lobby.adapter.as_ref().unwrap();
    let (_, metrics) = adapter.plain_get("/metrics").await;
    assert!(
        metrics.contains("\nhpa_bridge_hpas_predicted 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "hpa_bridge_hpa_prediction_misses{{namespace=\"{ns}\",hpa=\"lobby\"}} 0"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("hpa_bridge_hpa_prediction_checks_total{result=\"hit\"}"),
        "{metrics}"
    );

    // Shadow mode: the same HPA, as if it also read hpa_target_replicas as an Object metric of
    // its StatefulSet. Nothing is served to it and the object is not changed by the adapter.
    cp.kubectl(&[
        "annotate",
        "hpa",
        "lobby",
        "-n",
        &ns,
        "hpa-bridge.io/shadow-metric=hpa_target_replicas",
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let shadow = loop {
        let status = adapter.status().await;
        let entry = status["hpas"][0].clone();
        if entry["shadow"]["explanation"].is_object() {
            break entry;
        }
        assert!(Instant::now() < deadline, "no shadow: {entry}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let would = &shadow["shadow"]["explanation"];
    assert_eq!(
        shadow["shadow"]["metric"], "hpa_target_replicas",
        "{shadow}"
    );
    assert_eq!(would["metrics"][1]["type"], "Object", "{would}");
    assert_eq!(would["metrics"][1]["value"], "3", "{would}");
    assert_eq!(would["metrics"][1]["source"], "hpa-bridge", "{would}");
    assert_eq!(would["next"]["desiredReplicas"], 3, "{would}");
    let hpa = cp.get_json(&["hpa", "lobby", "-n", &ns]);
    assert_eq!(
        hpa["spec"]["metrics"].as_array().map(Vec::len),
        Some(1),
        "{hpa}"
    );

    // `explain` shows the adapter's shadow and its record beside its own explanation.
    let status_url = format!("http://127.0.0.1:{}", adapter.metrics_port);
    let explain = |output: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
            .args(["explain", "hpa", "lobby", "-n", &ns, "--kubeconfig"])
            .arg(cp.kubeconfig())
            .args(["--status-url", &status_url, "-o", output])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let doc: Value = serde_json::from_str(&explain("json")).unwrap();
    assert_eq!(doc["shadow"]["metric"], "hpa_target_replicas", "{doc}");
    assert!(doc["prediction"]["hits"].as_u64().unwrap() >= 8, "{doc}");
    let text = explain("text");
    assert!(
        text.contains("Shadow mode, as if it also read hpa_target_replicas (nothing is served to it): The HPA keeps 3 replicas"),
        "{text}"
    );
    assert!(
        text.contains("The adapter's predictions of this HPA: "),
        "{text}"
    );

    // The page: a panel per HPA, its next move and the shadow row, in a real browser.
    let url = format!("http://127.0.0.1:{}/", adapter.metrics_port);
    let dom = crate::status_page::dump_dom(&url).await;
    let row = format!("<tr class=\"hpa\" data-namespace=\"{ns}\" data-hpa=\"lobby\">");
    assert!(dom.contains(&row), "{dom}");
    assert!(dom.contains("<td class=\"next\"><b>3</b>"), "{dom}");
    assert!(dom.contains("shadow: with hpa_target_replicas"), "{dom}");
    if let Ok(dir) = std::env::var("HPA_BRIDGE_SCREENSHOT_DIR") {
        crate::status_page::screenshot(&url, &std::path::Path::new(&dir).join("hpa-panel.png"))
            .await;
    }

    // What it asked the real API server: the HPAs from a watch, the target's scale with a GET,
    // nothing written.
    let asked = cp.audited(ADAPTER);
    let in_ns =
        |a: &&crate::common::control_plane::Audited| a.uri.contains(&format!("/namespaces/{ns}/"));
    assert!(
        asked
            .iter()
            .filter(in_ns)
            .any(|a| a.verb == "watch" && a.resource == "horizontalpodautoscalers"),
        "{asked:#?}"
    );
    assert!(
        asked.iter().filter(in_ns).any(|a| a.verb == "get"
            && a.resource == "statefulsets"
            && a.subresource == "scale"
            && a.code == 200),
        "{asked:#?}"
    );
    let writes: Vec<_> = asked
        .iter()
        .filter(in_ns)
        .filter(|a| !matches!(a.verb.as_str(), "get" | "list" | "watch"))
        .collect();
    assert!(writes.is_empty(), "{writes:#?}");
}
