//! The pure part of `explain`: one observation per way an HPA does not do what its user
//! expects, each checked on the JSON contract; the same cases print the walk-through of
//! docs/troubleshooting.md, which [`troubleshooting_doc_shows_these_outputs`] keeps true.

use serde_json::{json, Value};

use super::observation::*;
use super::*;
use hpa_bridge_rules::clock::Millis;

/// 2026-12-06T03:00:00Z.
const NOW: Millis = 1_796_526_000_000;

fn at(seconds_before_now: i64) -> String {
    hpa_bridge_rules::clock::rfc3339(NOW - seconds_before_now * 1000)
}

fn external(name: &str, target: Value) -> Value {
    json!({"type": "External", "external": {"metric": {"name": name}, "target": target}})
}

fn average_one(name: &str) -> Value {
    external(name, json!({"type": "AverageValue", "averageValue": "1"}))
}

fn hpa(min: i32, max: i32, metrics: Vec<Value>, behavior: Value, status: Value) -> Value {
    json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "lobby", "namespace": "games"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lobby"},
            "minReplicas": min,
            "maxReplicas": max,
            "metrics": metrics,
            "behavior": behavior,
        },
        "status": status,
    })
}

fn status(current: i32, last_scale_ago: Option<i64>) -> Value {
    let mut s = json!({"currentReplicas": current, "desiredReplicas": current});
    if let Some(ago) = last_scale_ago {
        s["lastScaleTime"] = json!(at(ago));
    }
    s
}

fn served(metric: &str, value: Option<u64>, refusal: Option<(&str, &str)>) -> ServedAnswer {
    ServedAnswer {
        namespace: "games".into(),
        metric: metric.into(),
        selector: String::new(),
        object: None,
        value,
        refusal: refusal.map(|(k, _)| k.to_string()),
        reason: refusal
            .map(|(_, r)| r.to_string())
            .unwrap_or_else(|| format!("max over fresh series: {}", value.unwrap_or(0))),
    }
}

fn observe(hpa: Value, replicas: i32, served: Vec<ServedAnswer>) -> Observation {
    Observation {
        hpa,
        scale: Ok(ScaleView {
            spec_replicas: replicas,
            status_replicas: replicas,
            selector: "app=lobby".into(),
        }),
        pods: Ok(PodCount {
            pods: replicas,
            ready: replicas,
        }),
        served: Ok(served),
        history: Err("no history in this case".into()),
        other_hpas_on_target: Vec::new(),
        foreign_external_owner: None,
        kube_minor: 37,
        now_ms: NOW,
    }
}

fn prompt_down() -> Value {
    json!({"scaleDown": {"stabilizationWindowSeconds": 0}})
}

/// The troubleshooting walk-through, one case per common cause: (file anchor, observation).
fn doc_cases() -> Vec<(&'static str, Observation)> {
    let metric = "hpa_target_replicas";
    vec![
        (
            "tolerance",
            // 10 pods, hpa-bridge serves 11: ratio 1.1 is inside the 1.33+ band.
            observe(
                hpa(1, 20, vec![average_one(metric)], prompt_down(), status(10, None)),
                10,
                vec![served(metric, Some(11), None)],
            ),
        ),
        (
            "stabilization",
            // Scaled up to 6 two minutes ago; the recommendation fell to 2.
            observe(
                hpa(1, 10, vec![average_one(metric)], Value::Null, status(6, Some(120))),
                6,
                vec![served(metric, Some(2), None)],
            ),
        ),
        (
            "rate-policy",
            observe(
                hpa(
                    1,
                    50,
                    vec![average_one(metric)],
                    json!({"scaleUp": {"policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}}),
                    status(4, None),
                ),
                4,
                vec![served(metric, Some(12), None)],
            ),
        ),
        (
            "clamp",
            observe(
                hpa(1, 5, vec![average_one(metric)], prompt_down(), status(5, None)),
                5,
                vec![served(metric, Some(9), None)],
            ),
        ),
        (
            "refused",
            observe(
                hpa(1, 10, vec![average_one(metric)], prompt_down(), status(6, Some(900))),
                6,
                vec![served(
                    metric,
                    None,
                    Some((
                        "Stale",
                        "every recommendation is older than 45s (newest 2m10s ago from lobby-recommender-0): refusing rather than serving an unknown value",
                    )),
                )],
            ),
        ),
        ("two-hpas", {
            let mut o = observe(
                hpa(1, 10, vec![average_one(metric)], prompt_down(), status(3, None)),
                3,
                vec![served(metric, Some(7), None)],
            );
            o.other_hpas_on_target = vec!["lobby-cpu".into()];
            o
        }),
        ("foreign-apiservice", {
            let mut o = observe(
                hpa(1, 10, vec![average_one(metric)], prompt_down(), status(3, None)),
                3,
                vec![served(metric, Some(3), None)],
            );
            o.foreign_external_owner = Some("monitoring/prometheus-adapter".into());
            o
        }),
        (
            "zero-paused",
            observe(
                hpa(0, 10, vec![average_one(metric)], prompt_down(), status(0, None)),
                0,
                vec![served(metric, Some(4), None)],
            ),
        ),
        ("zero-resumes", {
            let mut st = status(0, Some(600));
            st["conditions"] = json!([{
                "type": "ScaledToZero", "status": "True", "reason": "ScaledToZero",
                "message": "the HPA controller scaled the workload to zero",
                "lastTransitionTime": at(600),
            }]);
            observe(
                hpa(0, 10, vec![average_one(metric)], prompt_down(), st),
                0,
                vec![served(metric, Some(4), None)],
            )
        }),
        ("not-hpa-bridge", {
            let mut st = status(4, None);
            st["currentMetrics"] = json!([{
                "type": "Resource",
                "resource": {"name": "cpu", "current": {"averageUtilization": 90, "averageValue": "450m"}},
            }]);
            let cpu = json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}});
            let mut o = observe(hpa(1, 10, vec![cpu], prompt_down(), st), 4, vec![]);
            o.pods = Ok(PodCount { pods: 4, ready: 3 });
            o
        }),
        ("status-port-unreachable", {
            let mut st = status(3, None);
            st["currentMetrics"] = json!([{
                "type": "External",
                "external": {"metric": {"name": metric}, "current": {"averageValue": "2"}},
            }]);
            let mut o = observe(hpa(1, 10, vec![average_one(metric)], prompt_down(), st), 3, vec![]);
            o.served = Err("http://127.0.0.1:9101/status?namespace=games: connection refused (is `kubectl port-forward` to the adapter's status port running?)".into());
            o
        }),
    ]
}

fn case(name: &str) -> Explanation {
    let (_, o) = doc_cases().into_iter().find(|(n, _)| *n == name).unwrap();
    explain(&o).unwrap()
}

#[test]
fn inside_the_tolerance_band_nothing_moves() {
    let e = case("tolerance");
    assert_eq!(e.next.desired_replicas, 10);
    assert_eq!(e.metrics[0].proposed_replicas, Some(10));
    assert!(e.metrics[0].reason.contains("tolerance band"), "{e:?}");
    assert!(e.next.why.contains("tolerance band"), "{}", e.next.why);
    assert_eq!(e.winner.as_deref(), Some("hpa_target_replicas"));
}

#[test]
fn the_stabilization_window_holds_a_scale_in_until_it_expires() {
    let e = case("stabilization");
    assert_eq!(
        (e.proposed, e.before_clamp, e.next.desired_replicas),
        (Some(2), Some(6), 6)
    );
    assert_eq!(e.stabilization.window_seconds, 300);
    // Scaled at now-120 s: held until now+180 s.
    assert_eq!(
        e.stabilization.blocks_until.as_deref(),
        Some(at(-180).as_str())
    );
    assert!(
        e.next.why.contains("stabilization window"),
        "{}",
        e.next.why
    );
}

#[test]
fn a_rate_policy_limits_the_step() {
    let e = case("rate-policy");
    assert_eq!((e.proposed, e.next.desired_replicas), (Some(12), 6));
    assert!(e.rate_limit.applied);
    assert_eq!(e.rate_limit.value, Some(6));
    assert_eq!(
        e.rate_limit.policy.as_deref(),
        Some("2 Pods per 60 s (Max)")
    );
    assert!(e.next.why.contains("rate policy"), "{}", e.next.why);
}

#[test]
fn max_replicas_clamps() {
    let e = case("clamp");
    assert_eq!((e.proposed, e.next.desired_replicas), (Some(9), 5));
    assert!(e.clamp.applied);
    assert!(e.next.why.contains("maxReplicas is 5"), "{}", e.next.why);
}

#[test]
fn a_refused_metric_is_invalid_and_carries_hpa_bridges_reason() {
    let e = case("refused");
    assert!(!e.metrics[0].valid);
    assert!(
        e.metrics[0].reason.contains("Stale"),
        "{}",
        e.metrics[0].reason
    );
    assert!(e.metrics[0].reason.contains("older than 45s"));
    assert_eq!(e.next.desired_replicas, 6);
    assert!(e.next.why.contains("no metric is valid"), "{}", e.next.why);
}

#[test]
fn two_hpas_on_one_target_stop_both() {
    let e = case("two-hpas");
    assert_eq!(e.next.desired_replicas, 3, "the 7 served is never applied");
    assert!(e.next.why.contains("more than one HPA"), "{}", e.next.why);
    assert!(e.notes[0].contains("lobby-cpu"));
}

#[test]
fn another_adapter_owning_the_apiservice_is_a_note() {
    let e = case("foreign-apiservice");
    assert!(e
        .notes
        .iter()
        .any(|n| n.contains("monitoring/prometheus-adapter")));
}

#[test]
fn scale_to_zero_resumes_only_from_the_hpas_own_zero() {
    let paused = case("zero-paused");
    assert_eq!(paused.next.desired_replicas, 0);
    assert!(
        paused.next.why.contains("did not put it there"),
        "{}",
        paused.next.why
    );
    let resumes = case("zero-resumes");
    assert_eq!(resumes.next.desired_replicas, 4);
}

#[test]
fn an_hpa_reading_no_hpa_bridge_metric_is_explained_from_its_status() {
    let e = case("not-hpa-bridge");
    assert!(e
        .notes
        .iter()
        .any(|n| n.contains("reads no metric hpa-bridge serves")));
    let m = &e.metrics[0];
    assert_eq!(m.source, "hpaStatus");
    assert_eq!(m.value.as_deref(), Some("90%"));
    // 90 % of 60 % on 3 ready pods: ceil(1.5 × 3) = 5, approximate with a pod not ready.
    assert_eq!(m.proposed_replicas, Some(5));
    assert!(!m.exact);
    assert!(m.reason.contains("approximate"), "{}", m.reason);
}

#[test]
fn an_unreachable_status_port_falls_back_to_the_hpas_status() {
    let e = case("status-port-unreachable");
    assert!(
        e.unseen[0].contains("hpa-bridge's answers"),
        "{:?}",
        e.unseen
    );
    let m = &e.metrics[0];
    assert_eq!(m.source, "hpaStatus");
    // averageValue 2 over 3 pods: a sum of 6.
    assert_eq!(m.proposed_replicas, Some(6));
    assert!(!m.exact);
}

#[test]
fn an_unreadable_scale_and_pods_are_named_and_assumed() {
    let mut o = observe(
        hpa(
            1,
            10,
            vec![average_one("m")],
            prompt_down(),
            status(4, None),
        ),
        4,
        vec![served("m", Some(4), None)],
    );
    o.scale = Err("statefulsets.apps \"lobby\" is forbidden".into());
    o.pods = Err("pods is forbidden".into());
    let e = explain(&o).unwrap();
    assert_eq!(e.scale_target.spec_replicas, 4);
    // Only the scale is missed: an External metric's proposal counts no pods.
    assert_eq!(e.unseen.len(), 1, "{:?}", e.unseen);
    assert!(e.unseen[0].contains("forbidden"), "{:?}", e.unseen);
    // A Resource metric's does.
    let mut cpu = o.clone();
    cpu.hpa["spec"]["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]);
    let e_cpu = explain(&cpu).unwrap();
    assert_eq!(e_cpu.unseen.len(), 2, "{:?}", e_cpu.unseen);
    assert!(
        e_cpu.unseen[1].contains("pods is forbidden"),
        "{:?}",
        e_cpu.unseen
    );
    assert_eq!(e.next.desired_replicas, 4);
}

#[test]
fn an_object_metric_matches_its_row_by_described_object() {
    let obj = json!({"type": "Object", "object": {
        "describedObject": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lobby"},
        "metric": {"name": "hpa_target_replicas"},
        "target": {"type": "AverageValue", "averageValue": "1"}}});
    let mut row = served("hpa_target_replicas", Some(7), None);
    row.object = Some("StatefulSet/lobby".into());
    let mut other = served("hpa_target_replicas", Some(1), None);
    other.object = Some("StatefulSet/other".into());
    let o = observe(
        hpa(1, 10, vec![obj], prompt_down(), status(3, None)),
        3,
        vec![other, row],
    );
    let e = explain(&o).unwrap();
    assert_eq!(e.metrics[0].source, "hpa-bridge");
    assert_eq!(e.metrics[0].proposed_replicas, Some(7));
    assert_eq!(
        e.next.desired_replicas, 7,
        "3 + 4 Pods, the more of the default policies"
    );
}

#[test]
fn an_external_row_must_carry_the_hpas_selector() {
    let ext = json!({"type": "External", "external": {
        "metric": {"name": "m", "selector": {"matchLabels": {"hpa_target_name": "lobby"}}},
        "target": {"type": "AverageValue", "averageValue": "1"}}});
    let mut right = served("m", Some(5), None);
    right.selector = "hpa_target_name=lobby".into();
    let wrong = served("m", Some(1), None);
    let e = explain(&observe(
        hpa(1, 10, vec![ext], prompt_down(), status(3, None)),
        3,
        vec![wrong, right],
    ))
    .unwrap();
    assert_eq!(e.metrics[0].value.as_deref(), Some("5"));
}

#[test]
fn the_json_contract_has_every_field() {
    let e = case("stabilization");
    let v = serde_json::to_value(&e).unwrap();
    for path in [
        "/hpa",
        "/scaleTarget/specReplicas",
        "/scaleTarget/statusReplicas",
        "/metrics/0/name",
        "/metrics/0/type",
        "/metrics/0/value",
        "/metrics/0/target",
        "/metrics/0/proposedReplicas",
        "/metrics/0/valid",
        "/metrics/0/reason",
        "/winner",
        "/beforeClamp",
        "/clamp/min",
        "/clamp/max",
        "/clamp/applied",
        "/stabilization/windowSeconds",
        "/stabilization/recommendations",
        "/stabilization/blocksUntil",
        "/rateLimit/policy",
        "/next/desiredReplicas",
        "/next/at",
        "/next/why",
    ] {
        assert!(v.pointer(path).is_some(), "{path} missing in {v:#}");
    }
    assert_eq!(v["hpa"], "games/lobby");
    assert_eq!(v["next"]["at"], at(-15));
}

#[test]
fn a_spec_the_model_cannot_run_is_an_error() {
    let bad = hpa(5, 2, vec![average_one("m")], Value::Null, status(3, None));
    assert!(explain(&observe(bad, 3, vec![])).is_err());
}

#[test]
fn the_status_document_is_read_row_by_row() {
    let doc = json!({"workloads": [
        {"namespace": "games", "metric": "hpa_target_replicas", "selector": "hpa_target_name=lobby",
         "answer": {"outcome": {"state": "value", "value": 4, "timestamp_ms": 1}, "reason": "max of 4"}},
        {"namespace": "games", "metric": "hpa_target_replicas", "selector": "",
         "object": {"kind": "StatefulSet", "name": "lobby"},
         "answer": {"outcome": {"state": "refused", "kind": "stale"}, "reason": "too old"}},
        {"namespace": "games"}
    ]});
    let rows = ServedAnswer::from_status_document(&doc);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].value, Some(4));
    assert_eq!(rows[1].object.as_deref(), Some("StatefulSet/lobby"));
    assert_eq!(rows[1].refusal.as_deref(), Some("stale"));
}

/// docs/troubleshooting.md shows `explain`'s text for each case between
/// `<!-- explain:NAME -->` markers. `HPA_BRIDGE_WRITE_DOCS=1` rewrites them from this run.
#[test]
fn troubleshooting_doc_shows_these_outputs() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/troubleshooting.md");
    let mut doc = std::fs::read_to_string(path).expect("docs/troubleshooting.md");
    let write = std::env::var_os("HPA_BRIDGE_WRITE_DOCS").is_some();
    let mut stale = Vec::new();
    for (name, o) in doc_cases() {
        let out = text::render(&explain(&o).unwrap());
        let open = format!("<!-- explain:{name} -->\n");
        let close = format!("<!-- /explain:{name} -->");
        let block = format!(
            "{open}```text\n$ kubectl hpa-bridge explain hpa lobby -n games\n{out}```\n{close}"
        );
        let (Some(start), Some(end)) = (doc.find(&open), doc.find(&close)) else {
            stale.push(format!("{name}: no markers"));
            continue;
        };
        if doc[start..end + close.len()] != block {
            if write {
                doc.replace_range(start..end + close.len(), &block);
            } else {
                stale.push(name.to_string());
            }
        }
    }
    if write {
        std::fs::write(path, &doc).unwrap();
    }
    assert!(
        stale.is_empty(),
        "docs/troubleshooting.md is out of date for {stale:?}: run HPA_BRIDGE_WRITE_DOCS=1 cargo test explain::tests::troubleshooting"
    );
}

/// The controller's memory is replayed from hpa-bridge's history: 6 until a minute ago, 2
/// since, under a 120 s scale-down window. The object alone shows no recommendation of 6 (the
/// HPA never scaled), so seeded from it the model would scale in; replayed, it holds 6.
#[test]
fn the_history_replays_the_controllers_memory_and_times_the_next_sync() {
    let metric = "hpa_target_replicas";
    let mut obs = observe(
        hpa(
            1,
            10,
            vec![average_one(metric)],
            json!({"scaleDown": {"stabilizationWindowSeconds": 120}}),
            status(6, None),
        ),
        6,
        vec![served(metric, Some(2), None)],
    );
    let seeded = explain(&obs).unwrap();
    assert_eq!(seeded.next.desired_replicas, 2, "{seeded:?}");

    // Eight syncs 15 s apart, the last 5 s ago.
    let answers: Vec<(Millis, Option<u64>)> = (0..8)
        .map(|i| {
            (
                NOW - 5_000 - (7 - i) * 15_000,
                Some(if i < 4 { 6 } else { 2 }),
            )
        })
        .collect();
    obs.history = Ok(vec![AnswerHistory {
        metric: metric.into(),
        scope: String::new(),
        answers,
    }]);
    let replayed = explain(&obs).unwrap();
    assert_eq!(replayed.next.desired_replicas, 6, "{replayed:?}");
    assert_eq!(
        replayed.next.at,
        hpa_bridge_rules::clock::rfc3339(NOW + 10_000)
    );
    assert!(
        replayed
            .notes
            .iter()
            .any(|n| n.contains("replayed from hpa-bridge's last 8 answers")),
        "{:?}",
        replayed.notes
    );
    let held: Vec<i32> = replayed
        .stabilization
        .recommendations
        .iter()
        .map(|r| r.replicas)
        .collect();
    assert!(held.contains(&6), "{held:?}");

    // A history that cannot end where the HPA is (it asked for 9 all along) is not trusted.
    obs.history = Ok(vec![AnswerHistory {
        metric: metric.into(),
        scope: String::new(),
        answers: (0..8).map(|i| (NOW - i * 15_000, Some(9))).rev().collect(),
    }]);
    let refused = explain(&obs).unwrap();
    assert_eq!(refused.next.desired_replicas, 2);
    assert!(
        refused.notes.iter().any(|n| n.contains("does not replay")),
        "{:?}",
        refused.notes
    );
}
