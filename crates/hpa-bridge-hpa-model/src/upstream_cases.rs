//! The upstream HPA controller's own test tables, run against the model. The tables are data:
//! `scripts/port-upstream-hpa-cases` translates them from `k8s.io/kubernetes`'s
//! `pkg/controller/podautoscaler/*_test.go` into `upstream_cases/*.json`, expected figures
//! included. Each test here only maps a case's inputs onto the model's functions and compares.
//!
//! Time: upstream seeds events and recommendations at `time.Now()` minus some seconds; the
//! model's clock starts at [`NOW`] and the same offsets are subtracted.

use std::time::Duration;

use serde_json::Value;

use super::controller::{legacy_rules, Hpa, TimestampedRecommendation};
use super::pod_metrics::{plain_metric_replicas, MetricPodPhase, PodMetricInput, PodSample};
use super::rate_limits::change_in_period;
use super::replicas::{external_sum, proposal, Source};
use super::scale_event::ScaleEvent;
use super::spec::*;
use super::sync_io::SyncInput;
use super::tolerance::*;

const NOW: Duration = Duration::from_secs(100_000);

fn table(json: &str) -> Vec<Value> {
    let doc: Value = serde_json::from_str(json).expect("a table written by the port script");
    doc["cases"].as_array().expect("cases").clone()
}

fn int(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_u64().map(|u| u as i64))
        .unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn i32_of(v: &Value) -> i32 {
    int(v) as i32
}

fn opt_i32(v: &Value) -> i32 {
    if v.is_null() {
        0
    } else {
        i32_of(v)
    }
}

fn name(c: &Value) -> String {
    c["name"]
        .as_str()
        .or(c["annotation"].as_str())
        .unwrap_or("?")
        .to_string()
}

/// The controller flags of the replica calculator's tests: 1.37, band 0.1 both ways unless a
/// case sets `tolerances`.
fn tolerances(c: &Value) -> Tolerances {
    let t = &c["tolerances"];
    let (down, up) = if t.is_null() {
        (0.1, 0.1)
    } else {
        (
            t["scaleDown"].as_f64().unwrap(),
            t["scaleUp"].as_f64().unwrap(),
        )
    };
    Tolerances {
        style: ToleranceStyle::PerDirection { configurable: true },
        scale_down: down,
        scale_up: up,
    }
}

fn levels(c: &Value) -> Vec<i64> {
    c["fixture"]["metric"]
        .as_array()
        .unwrap()
        .iter()
        .map(int)
        .collect()
}

/// The scale target the fake pod lister shows: `currentReplicas` pods, or as many as
/// `podPhase` lists; Running and Ready unless `podPhase`/`podReadiness` say otherwise.
fn pod_counts(c: &Value) -> (i32, i32) {
    let f = &c["fixture"];
    let current = i32_of(&f["currentReplicas"]);
    let phases = f["podPhase"].as_array().cloned().unwrap_or_default();
    let count = current.max(phases.len() as i32);
    let ready = (0..count as usize)
        .filter(|&i| {
            let running = phases.get(i).is_none_or(|p| p == "Running");
            let ready = f["podReadiness"]
                .as_array()
                .and_then(|r| r.get(i))
                .is_none_or(|r| r == "True");
            running && ready
        })
        .count() as i32;
    (count, ready)
}

fn calc_input(c: &Value) -> SyncInput {
    let current = i32_of(&c["fixture"]["currentReplicas"]);
    let (pods, ready) = pod_counts(c);
    SyncInput {
        spec_replicas: current,
        status_replicas: current,
        ready_pods: ready,
        pods,
        metrics: Vec::new(),
        selector: Default::default(),
    }
}

/// Runs `check` on every case; returns the failures as `name: got …, want …`.
fn run(cases: &[Value], check: impl Fn(&Value) -> Result<(), String>) -> Vec<String> {
    cases
        .iter()
        .filter_map(|c| check(c).err().map(|e| format!("{}: {e}", name(c))))
        .collect()
}

fn compare<T: PartialEq + std::fmt::Debug>(got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("got {got:?}, want {want:?}"))
    }
}

fn assert_all_pass(test: &str, cases: &[Value], failures: Vec<String>) {
    eprintln!(
        "{test}: {} ported, {} pass",
        cases.len(),
        cases.len() - failures.len()
    );
    assert!(failures.is_empty(), "{test}:\n{}", failures.join("\n"));
}

/// The replica calculator's table `test` for an External or Object metric: each case's target
/// (`AverageValue` from `perPodTargetUsage`, else `Value` from `targetUsage`), the usage the
/// controller would read, and the proposal's replicas and usage against the expected ones.
fn replica_calc_table(test: &str, json: &str, source: Source) {
    let cases = table(json);
    let failures = run(&cases, |c| {
        let formula = match c.get("perPodTargetUsage") {
            Some(v) => TargetFormula::AverageValue { milli: int(v) },
            None => TargetFormula::Value {
                milli: int(&c["targetUsage"]),
            },
        };
        let usage = match source {
            Source::External => external_sum(formula, &levels(c), true),
            _ => levels(c)[0],
        };
        let p = proposal(formula, usage, &calc_input(c), &tolerances(c), source)?;
        compare(
            (p.replicas, p.current_milli),
            (i32_of(&c["expectedReplicas"]), int(&c["expectedUsage"])),
        )
    });
    assert_all_pass(test, &cases, failures);
}

#[test]
fn replica_calc_external_per_pod_metric() {
    replica_calc_table(
        "TestReplicaCalcExternalPerPodMetric",
        include_str!("upstream_cases/TestReplicaCalcExternalPerPodMetric.json"),
        Source::External,
    );
}

#[test]
fn replica_calc_external_metric() {
    replica_calc_table(
        "TestReplicaCalcExternalMetric",
        include_str!("upstream_cases/TestReplicaCalcExternalMetric.json"),
        Source::External,
    );
}

#[test]
fn replica_calc_object_metric() {
    replica_calc_table(
        "TestReplicaCalcObjectMetric",
        include_str!("upstream_cases/TestReplicaCalcObjectMetric.json"),
        Source::Object,
    );
}

#[test]
fn replica_calc_object_per_pod_metric() {
    replica_calc_table(
        "TestReplicaCalcObjectPerPodMetric",
        include_str!("upstream_cases/TestReplicaCalcObjectPerPodMetric.json"),
        Source::Object,
    );
}

#[test]
fn replica_calc_pod_metric() {
    let cases = table(include_str!("upstream_cases/TestReplicaCalcPodMetric.json"));
    let failures = run(&cases, |c| {
        let f = &c["fixture"];
        let (count, _) = pod_counts(c);
        let values = levels(c);
        let samples = (0..count as usize)
            .map(|i| PodSample {
                phase: match f["podPhase"].as_array().and_then(|p| p.get(i)) {
                    Some(p) if p == "Pending" => MetricPodPhase::Pending,
                    Some(p) if p == "Failed" => MetricPodPhase::Failed,
                    _ => MetricPodPhase::Running,
                },
                deleted: false,
                value: values.get(i).copied(),
            })
            .collect();
        let (replicas, usage) = plain_metric_replicas(
            &PodMetricInput::Pods(samples),
            i32_of(&f["currentReplicas"]),
            int(&c["targetUsage"]),
            &tolerances(c),
        )?;
        compare(
            (replicas, usage),
            (i32_of(&c["expectedReplicas"]), int(&c["expectedUsage"])),
        )
    });
    assert_all_pass("TestReplicaCalcPodMetric", &cases, failures);
}

#[test]
fn convert_desired_replicas_with_rules() {
    let cases = table(include_str!(
        "upstream_cases/TestConvertDesiredReplicasWithRules.json"
    ));
    let failures = run(&cases, |c| {
        let (replicas, limit) = legacy_rules(
            i32_of(&c["currentReplicas"]),
            i32_of(&c["expectedDesiredReplicas"]),
            i32_of(&c["hpaMinReplicas"]),
            i32_of(&c["hpaMaxReplicas"]),
        );
        compare(
            (replicas, limit.reason()),
            (
                i32_of(&c["expectedConvertedDesiredReplicas"]),
                c["expectedCondition"].as_str().unwrap(),
            ),
        )
    });
    assert_all_pass("TestConvertDesiredReplicasWithRules", &cases, failures);
}

fn recommendations(v: &Value) -> Vec<TimestampedRecommendation> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|r| TimestampedRecommendation {
                    replicas: i32_of(&r["replicas"]),
                    at: NOW - Duration::from_secs(int(&r["agoSeconds"]) as u64),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn events(v: &Value) -> Vec<ScaleEvent> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|e| ScaleEvent {
                    change: i32_of(&e["change"]),
                    at: NOW - Duration::from_secs(int(&e["agoSeconds"]) as u64),
                    outdated: e["outdated"].as_bool().unwrap_or(false),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn rules(v: &Value) -> Option<ScalingRules> {
    if v.is_null() {
        return None;
    }
    Some(serde_json::from_value(v.clone()).expect("scaling rules in autoscaling/v2 form"))
}

fn hpa(min: i32, max: i32, behavior: Option<Behavior>) -> Hpa {
    let spec = HpaSpec {
        min_replicas: Some(min),
        max_replicas: max,
        metrics: vec![MetricSpec::external(
            "m",
            MetricTarget::average_value("1").unwrap(),
        )],
        behavior,
    };
    Hpa::new(spec, ControllerConfig::for_kube_minor(37)).expect("a valid spec")
}

#[test]
fn normalize_desired_replicas() {
    let cases = table(include_str!(
        "upstream_cases/TestNormalizeDesiredReplicas.json"
    ));
    let failures = run(&cases, |c| {
        let mut h = hpa(1, 100, None);
        h.seed_memory(recommendations(&c["recommendations"]), vec![], vec![]);
        let p = i32_of(&c["prenormalizedDesiredReplicas"]);
        let n = h.normalize(NOW, p, p);
        compare(
            (n.stabilized, h.recommendations().len()),
            (
                i32_of(&c["expectedStabilizedReplicas"]),
                int(&c["expectedLogLength"]) as usize,
            ),
        )
    });
    assert_all_pass("TestNormalizeDesiredReplicas", &cases, failures);
}

#[test]
fn normalize_desired_replicas_with_behavior() {
    let cases = table(include_str!(
        "upstream_cases/TestNormalizeDesiredReplicasWithBehavior.json"
    ));
    let failures = run(&cases, |c| {
        let mut h = hpa(1, 1000, None);
        h.seed_memory(recommendations(&c["recommendations"]), vec![], vec![]);
        let secs = |k: &str| Duration::from_secs(opt_i32(&c[k]) as u64);
        let (stabilized, _) = h.stabilize_with_windows(
            NOW,
            secs("scaleUpStabilizationWindowSeconds"),
            secs("scaleDownStabilizationWindowSeconds"),
            i32_of(&c["currentReplicas"]),
            i32_of(&c["prenormalizedDesiredReplicas"]),
        );
        compare(stabilized, i32_of(&c["expectedStabilizedReplicas"]))?;
        if let Some(want) = c["expectedRecommendations"].as_array() {
            let want: Vec<i32> = want.iter().map(|r| i32_of(&r["replicas"])).collect();
            let got: Vec<i32> = h.recommendations().iter().map(|r| r.replicas).collect();
            compare(got, want)?;
        }
        Ok(())
    });
    assert_all_pass("TestNormalizeDesiredReplicasWithBehavior", &cases, failures);
}

#[test]
fn scaling_with_rules() {
    let cases = table(include_str!("upstream_cases/TestScalingWithRules.json"));
    let failures = run(&cases, |c| {
        let behavior = Behavior {
            scale_up: rules(&c["scaleUpRules"]),
            scale_down: rules(&c["scaleDownRules"]),
        };
        let (min, max) = (i32_of(&c["specMinReplicas"]), i32_of(&c["specMaxReplicas"]));
        let mut h = hpa(min, max, Some(behavior.clone()));
        h.seed_memory(
            vec![],
            events(&c["scaleUpEvents"]),
            events(&c["scaleDownEvents"]),
        );
        let (replicas, limit) = h.behavior_rate(
            NOW,
            &behavior,
            i32_of(&c["currentReplicas"]),
            i32_of(&c["prenormalizedDesiredReplicas"]),
            min,
            max,
        );
        compare(
            (replicas, limit.reason()),
            (
                i32_of(&c["expectedReplicas"]),
                c["expectedCondition"].as_str().unwrap(),
            ),
        )
    });
    assert_all_pass("TestScalingWithRules", &cases, failures);
}

#[test]
fn store_scale_events() {
    let cases = table(include_str!("upstream_cases/TestStoreScaleEvents.json"));
    let failures = run(&cases, |c| {
        let change = i32_of(&c["replicaChange"]);
        let rules = rules(&c["scalingRules"]);
        let want_change = i32_of(&c["expectedReplicasChange"]);
        let want: Vec<(i32, bool)> = events(&c["newScaleEvents"])
            .iter()
            .map(|e| (e.change, e.outdated))
            .collect();
        for up in [true, false] {
            let behavior = rules.clone().map(|r| Behavior {
                scale_up: up.then(|| r.clone()),
                scale_down: (!up).then_some(r),
            });
            let mut h = hpa(1, 1000, behavior);
            let prev = events(&c["prevScaleEvents"]);
            compare(change_in_period(NOW, &prev, 60), want_change)?;
            let (up_events, down_events) = if up { (prev, vec![]) } else { (vec![], prev) };
            h.seed_memory(vec![], up_events, down_events);
            h.store_scale_event(NOW, 10, if up { 10 + change } else { 10 - change });
            let kept = if up {
                h.scale_up_events()
            } else {
                h.scale_down_events()
            };
            let got: Vec<(i32, bool)> = kept.iter().map(|e| (e.change, e.outdated)).collect();
            compare(got, want.clone())
                .map_err(|e| format!("{}: {e}", if up { "up" } else { "down" }))?;
        }
        Ok(())
    });
    assert_all_pass("TestStoreScaleEvents", &cases, failures);
}

/// `TestCalculateScaleUpLimitWithScalingRules` and `TestCalculateScaleDownLimitWithBehaviors`
/// are one case each, written out here: `selectPolicy: Min` with Pods 2/60 s and Percent
/// 50/60 s, from 1 up and from 5 down, no events.
#[test]
fn calculate_scale_limits_with_min_select_policy() {
    let rules = ScalingRules {
        stabilization_window_seconds: Some(300),
        select_policy: Some(SelectPolicy::Min),
        policies: Some(vec![
            ScalingPolicy {
                policy_type: PolicyType::Pods,
                value: 2,
                period_seconds: 60,
            },
            ScalingPolicy {
                policy_type: PolicyType::Percent,
                value: 50,
                period_seconds: 60,
            },
        ]),
        tolerance: None,
    };
    let behavior = Behavior {
        scale_up: Some(rules.clone()),
        scale_down: Some(rules),
    };
    let h = hpa(1, 1000, Some(behavior.clone()));
    // The rate limit alone: far beyond the limit in each direction, [min, max] out of the way.
    assert_eq!(h.behavior_rate(NOW, &behavior, 1, 1000, 1, 1000).0, 2);
    assert_eq!(h.behavior_rate(NOW, &behavior, 5, 1, 1, 1000).0, 3);
}
