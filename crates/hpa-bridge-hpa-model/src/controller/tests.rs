use super::super::DEFAULT_DOWNSCALE_STABILIZATION;
use super::*;
use crate::quantity::Quantity;
use proptest::prelude::*;

fn t(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn avg(name: &str) -> MetricSpec {
    MetricSpec::external(name, MetricTarget::average_value("1").unwrap())
}

fn hpa_spec(min: i32, max: i32, metrics: Vec<MetricSpec>, behavior: Option<Behavior>) -> HpaSpec {
    HpaSpec {
        min_replicas: Some(min),
        max_replicas: max,
        metrics,
        behavior,
    }
}

fn legacy() -> ControllerConfig {
    ControllerConfig::for_kube_minor(32)
}

fn v133() -> ControllerConfig {
    ControllerConfig::for_kube_minor(33)
}

fn v135() -> ControllerConfig {
    ControllerConfig::for_kube_minor(35)
}

fn one(v: f64) -> MetricInput {
    Ok(vec![v])
}

fn broken() -> MetricInput {
    Err("the server is currently unable to handle the request (get hpa_expect_replicas.external.metrics.k8s.io)".into())
}

/// Runs syncs every 15 s from `start` on a settled workload that follows the HPA, one
/// metric answer per sync; returns the replicas after each sync.
fn follow(hpa: &mut Hpa, start_at: u64, start: i32, answers: &[f64]) -> Vec<i32> {
    let mut replicas = start;
    let mut out = Vec::new();
    for (i, d) in answers.iter().enumerate() {
        let now = t(start_at + 15 * i as u64);
        let o = hpa.sync(now, &SyncInput::steady(replicas, vec![one(*d)]));
        replicas = o.replicas;
        out.push(replicas);
    }
    out
}

fn proposal(o: &SyncOutcome, i: usize) -> MetricProposal {
    *o.metrics[i].result.as_ref().expect("valid metric")
}

// docs/hpa-behaviour.md §1.5: 10 -> 11 at tolerance 0.1.
#[test]
fn ten_to_eleven_differs_between_tolerance_styles() {
    // The float claim, computed as Go computes it: usage 11000m over 1000m × 10 replicas.
    let ratio = 11_000f64 / (1_000f64 * 10f64);
    assert!(
        (1.0 - ratio).abs() > 0.1,
        "legacy: outside by float rounding"
    );
    assert!(
        ratio <= 1.0 + 0.1,
        "1.33+: inside, the upper end is inclusive"
    );
    let band = |style| Tolerances {
        style,
        scale_down: 0.1,
        scale_up: 0.1,
    };
    assert!(!band(ToleranceStyle::Symmetric).is_within(ratio));
    assert!(band(ToleranceStyle::PerDirection {
        configurable: false
    })
    .is_within(ratio));

    let spec = hpa_spec(1, 100, vec![avg("m")], None);
    let mut old = Hpa::new(spec.clone(), legacy()).unwrap();
    let o = old.sync(t(0), &SyncInput::steady(10, vec![one(11.0)]));
    assert!(!proposal(&o, 0).within_tolerance);
    assert_eq!(proposal(&o, 0).replicas, 11);
    assert_eq!(o.replicas, 11);

    for cfg in [v133(), v135()] {
        let mut new = Hpa::new(spec.clone(), cfg).unwrap();
        let o = new.sync(t(0), &SyncInput::steady(10, vec![one(11.0)]));
        assert!(proposal(&o, 0).within_tolerance);
        assert_eq!(o.replicas, 10);
        assert!(!o.rescaled);
    }
}

#[test]
fn hundred_to_hundred_and_five_is_held() {
    for cfg in [legacy(), v133(), v135()] {
        let mut hpa = Hpa::new(hpa_spec(1, 200, vec![avg("m")], None), cfg).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(100, vec![one(105.0)]));
        assert_eq!(proposal(&o, 0).replicas, 100, "{cfg:?}");
        assert_eq!(o.replicas, 100);
        let o = hpa.sync(t(15), &SyncInput::steady(100, vec![one(95.0)]));
        assert_eq!(o.replicas, 100, "{cfg:?}");
    }
}

#[test]
fn per_hpa_tolerance_only_with_the_gate() {
    let behavior = Behavior {
        scale_up: Some(ScalingRules {
            tolerance: Some(Quantity::parse("0").unwrap()),
            ..Default::default()
        }),
        scale_down: None,
    };
    let spec = hpa_spec(1, 100, vec![avg("m")], Some(behavior));
    let mut gated = Hpa::new(spec.clone(), v135()).unwrap();
    assert_eq!(gated.tolerances().scale_up, 0.0);
    assert_eq!(gated.tolerances().scale_down, 0.1);
    let o = gated.sync(t(0), &SyncInput::steady(10, vec![one(10.5)]));
    assert_eq!(o.replicas, 11);
    for cfg in [v133(), legacy()] {
        let mut off = Hpa::new(spec.clone(), cfg).unwrap();
        assert_eq!(off.tolerances().scale_up, 0.1);
        let o = off.sync(t(0), &SyncInput::steady(10, vec![one(10.5)]));
        assert_eq!(o.replicas, 10, "{cfg:?}");
    }
}

// docs/hpa-behaviour.md §1.3: an absolute D through a Value target is multiplied by ready pods.
#[test]
fn value_path_multiplies_by_ready_pods() {
    let value = MetricSpec::external("m", MetricTarget::value("1").unwrap());
    let mut hpa = Hpa::new(hpa_spec(1, 100, vec![value.clone()], None), legacy()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(4, vec![one(5.0)]));
    let p = proposal(&o, 0);
    assert!(matches!(p.formula, TargetFormula::Value { milli: 1000 }));
    assert_eq!(p.ratio, 5.0);
    assert_eq!(p.replicas, 20);
    assert_eq!(o.metric_replicas, Some(20));
    assert_eq!(o.replicas, 8, "legacy cap max(2×4, 4)");

    // Pods exist but none is Ready: proposes 0.
    let mut hpa = Hpa::new(hpa_spec(1, 100, vec![value.clone()], None), legacy()).unwrap();
    let input = SyncInput {
        ready_pods: 0,
        ..SyncInput::steady(4, vec![one(5.0)])
    };
    assert_eq!(proposal(&hpa.sync(t(0), &input), 0).replicas, 0);

    // No pods at all: the metric is invalid.
    let input = SyncInput {
        ready_pods: 0,
        pods: 0,
        ..SyncInput::steady(4, vec![one(5.0)])
    };
    let o = hpa.sync(t(15), &input);
    assert!(o.metrics[0].result.is_err());
    assert_eq!(o.decision, Decision::AllMetricsInvalid { invalid: 1 });

    // spec.replicas == 0 (scale to zero, minReplicas 0): ceil(sum / value), first step capped
    // at 4 (docs/hpa-behaviour.md §1.7.7).
    let mut alpha = legacy();
    alpha.scale_to_zero = ScaleToZero::ReplicasRule;
    let mut hpa = Hpa::new(hpa_spec(0, 100, vec![value], None), alpha).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(0, vec![one(5.0)]));
    assert_eq!(proposal(&o, 0).replicas, 5);
    assert_eq!(o.replicas, 4);
}

// docs/hpa-behaviour.md §1.5: rollout trap.
#[test]
fn rollout_surge_proposes_status_replicas() {
    for cfg in [legacy(), v135()] {
        let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), cfg).unwrap();
        let input = SyncInput {
            status_replicas: 12,
            pods: 12,
            ready_pods: 12,
            ..SyncInput::steady(10, vec![one(11.0)])
        };
        let o = hpa.sync(t(0), &input);
        let p = proposal(&o, 0);
        assert!(p.within_tolerance, "11/12 is inside the band");
        assert_eq!(p.replicas, 12);
        assert_eq!(o.replicas, 12, "{cfg:?}: scales 10 -> 12 on D=11");
    }
}

// docs/hpa-behaviour.md §1.7.3.
#[test]
fn legacy_scale_up_cap() {
    let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(1, vec![one(100.0)]));
    assert_eq!(o.replicas, 4);
    let limited = o.condition(ConditionType::ScalingLimited).unwrap();
    assert!(limited.status);
    assert_eq!(limited.reason, "ScaleUpLimit");
    let o = hpa.sync(t(15), &SyncInput::steady(4, vec![one(100.0)]));
    assert_eq!(o.replicas, 8);
    assert_eq!(
        follow(&mut hpa, 30, 8, &[100.0, 100.0, 100.0]),
        vec![16, 32, 64]
    );
    assert_eq!(follow(&mut hpa, 75, 64, &[100.0]), vec![100]);
}

// docs/hpa-behaviour.md §1.7.4: default behavior rates. Checked against calculateScaleUpLimitWith-
// ScalingRules: an event exactly one period old is not "after" the cutoff, so with syncs
// exactly 15 s apart each sync starts from the current count: 1 -> 5 -> 10 -> 20 -> 40 -> 50.
#[test]
fn behavior_default_scale_up_rates() {
    let spec = hpa_spec(1, 50, vec![avg("m")], Some(Behavior::default()));
    let mut hpa = Hpa::new(spec, v135()).unwrap();
    assert_eq!(
        follow(&mut hpa, 0, 1, &[100.0; 6]),
        vec![5, 10, 20, 40, 50, 50]
    );
    // Syncs closer than the period see earlier events and are held back.
    let spec = hpa_spec(1, 50, vec![avg("m")], Some(Behavior::default()));
    let mut hpa = Hpa::new(spec, v135()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(1, vec![one(100.0)]));
    assert_eq!(o.replicas, 5);
    let o = hpa.sync(t(10), &SyncInput::steady(5, vec![one(100.0)]));
    assert_eq!(o.replicas, 5, "periodStart is 1 again: max(1+4, 2) = 5");
    assert_eq!(
        o.decision,
        Decision::Normalized {
            invalid: 0,
            stabilization: Stabilization::Unchanged,
            limit: Limit::ScaleUpLimit
        }
    );
}

#[test]
fn percent_scale_up_rounds_up_with_go_float_arithmetic() {
    // 100 × (1 + 10/100) is 110.00000000000001 in float64, so ceil gives 111.
    assert_eq!((100f64 * (1.0 + 10f64 / 100.0)).ceil(), 111.0);
    let behavior = Behavior {
        scale_up: Some(ScalingRules {
            policies: Some(vec![ScalingPolicy {
                policy_type: PolicyType::Percent,
                value: 10,
                period_seconds: 60,
            }]),
            ..Default::default()
        }),
        scale_down: None,
    };
    let mut hpa = Hpa::new(hpa_spec(1, 1000, vec![avg("m")], Some(behavior)), v135()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(100, vec![one(500.0)]));
    assert_eq!(o.replicas, 111);
}

// docs/hpa-behaviour.md §1.7.3/§1.7.4: the drop waits for the downscale window.
#[test]
fn scale_down_is_stabilised_for_300_s() {
    // D = 10 at t = 0..60, then D = 2 from t = 75.
    let answers: Vec<f64> = (0..30).map(|i| if i <= 4 { 10.0 } else { 2.0 }).collect();
    let drop_time = |seq: &[i32]| 15 * seq.iter().position(|&r| r == 2).unwrap() as u64;

    // Legacy: a recommendation exactly 300 s old still counts (not Before the cutoff), so
    // the drop comes 300 s after the metric fell (t = 75 -> 375).
    let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
    let seq = follow(&mut hpa, 0, 10, &answers);
    assert_eq!(drop_time(&seq), 375);
    assert!(seq[..25].iter().all(|&r| r == 10));

    // Behavior: it no longer counts (not After the cutoff), so the drop comes 300 s after
    // the last high recommendation (t = 60 -> 360), one sync earlier.
    let spec = hpa_spec(1, 100, vec![avg("m")], Some(Behavior::default()));
    let mut hpa = Hpa::new(spec, v135()).unwrap();
    let seq = follow(&mut hpa, 0, 10, &answers);
    assert_eq!(drop_time(&seq), 360);
    let o = hpa.sync(t(450), &SyncInput::steady(2, vec![one(2.0)]));
    assert_eq!(o.replicas, 2);
}

#[test]
fn stabilised_hold_reports_its_reason() {
    let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
    hpa.sync(t(0), &SyncInput::steady(10, vec![one(10.0)]));
    let o = hpa.sync(t(15), &SyncInput::steady(10, vec![one(2.0)]));
    assert_eq!(o.replicas, 10);
    assert_eq!(o.stabilized_replicas, Some(10));
    assert_eq!(
        o.condition(ConditionType::AbleToScale).unwrap().reason,
        "ScaleDownStabilized"
    );
}

// docs/hpa-behaviour.md §1.6.
#[test]
fn invalid_metric_blocks_scale_down_but_not_scale_up() {
    for (cfg, behavior) in [(legacy(), None), (v135(), Some(Behavior::default()))] {
        let spec = hpa_spec(1, 100, vec![avg("a"), avg("b")], behavior);
        let mut hpa = Hpa::new(spec, cfg).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(10, vec![broken(), one(5.0)]));
        assert_eq!(o.replicas, 10);
        assert_eq!(
            o.decision,
            Decision::ScaleDownBlockedByInvalidMetric {
                invalid: 1,
                proposed: 5
            }
        );
        let active = o.condition(ConditionType::ScalingActive).unwrap();
        assert!(!active.status);
        assert_eq!(active.reason, "FailedGetExternalMetric");

        // Equal to spec.replicas: holds, and the metric is "found".
        let o = hpa.sync(t(15), &SyncInput::steady(10, vec![broken(), one(10.0)]));
        assert_eq!(o.replicas, 10);
        assert!(matches!(
            o.decision,
            Decision::Normalized { invalid: 1, .. }
        ));
        assert!(o.condition(ConditionType::ScalingActive).unwrap().status);

        let o = hpa.sync(t(30), &SyncInput::steady(10, vec![broken(), one(20.0)]));
        assert_eq!(o.replicas, 20, "{cfg:?}");
        assert!(matches!(
            o.decision,
            Decision::Normalized { invalid: 1, .. }
        ));
    }
}

#[test]
fn all_metrics_invalid_changes_nothing() {
    let spec = hpa_spec(1, 100, vec![avg("a"), avg("b")], None);
    let mut hpa = Hpa::new(spec, legacy()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(10, vec![broken(), Ok(vec![])]));
    assert_eq!(o.replicas, 10);
    assert!(!o.rescaled);
    assert_eq!(o.decision, Decision::AllMetricsInvalid { invalid: 2 });
    let active = o.condition(ConditionType::ScalingActive).unwrap();
    assert!(!active.status);
    assert_eq!(active.reason, "FailedGetExternalMetric");
    let reasons: Vec<&str> = o.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "FailedGetExternalMetric",
            "FailedGetExternalMetric",
            "FailedComputeMetricsReplicas"
        ]
    );
    assert_eq!(hpa.recommendations().len(), 1, "only the initial one");
    // A missing input entry is an error too.
    let o = hpa.sync(t(15), &SyncInput::steady(10, vec![]));
    assert_eq!(o.decision, Decision::AllMetricsInvalid { invalid: 2 });
}

#[test]
fn empty_item_list_is_invalid_and_zero_is_not() {
    let mut hpa = Hpa::new(hpa_spec(2, 100, vec![avg("m")], None), legacy()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(10, vec![Ok(vec![])]));
    let err = o.metrics[0].result.as_ref().unwrap_err();
    assert!(
        err.contains("no metrics returned from external metrics API"),
        "{err}"
    );
    assert_eq!(o.replicas, 10);
    // docs/hpa-behaviour.md §1.6: a served 0 is valid and drives a scale-in to minReplicas.
    let o = hpa.sync(t(400), &SyncInput::steady(10, vec![one(0.0)]));
    assert_eq!(o.replicas, 2);
}

#[test]
fn items_are_summed_as_rounded_up_millis() {
    let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(5, vec![Ok(vec![7.0, 3.0, 10.2])]));
    let p = proposal(&o, 0);
    assert_eq!(p.usage_milli, 20_200);
    assert_eq!(p.replicas, 21);
    let o = hpa.sync(t(15), &SyncInput::steady(5, vec![Ok(vec![0.0001, 0.0001])]));
    assert_eq!(proposal(&o, 0).usage_milli, 2);
}

fn down_rules(rules: ScalingRules) -> Behavior {
    Behavior {
        scale_up: None,
        scale_down: Some(rules),
    }
}

#[test]
fn percent_scale_down_truncates() {
    let behavior = down_rules(ScalingRules {
        stabilization_window_seconds: Some(0),
        policies: Some(vec![ScalingPolicy {
            policy_type: PolicyType::Percent,
            value: 10,
            period_seconds: 60,
        }]),
        ..Default::default()
    });
    let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], Some(behavior)), v135()).unwrap();
    // 15 × 0.9 = 13.5 truncates to 13; held while that event is inside the 60 s period.
    assert_eq!(
        follow(&mut hpa, 0, 15, &[1.0; 6]),
        vec![13, 13, 13, 13, 11, 11]
    );
}

#[test]
fn disabled_policy_blocks_its_direction() {
    let disabled = ScalingRules {
        stabilization_window_seconds: Some(0),
        select_policy: Some(SelectPolicy::Disabled),
        ..Default::default()
    };
    let behavior = Behavior {
        scale_up: Some(disabled.clone()),
        scale_down: Some(disabled),
    };
    let mut hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], Some(behavior)), v135()).unwrap();
    assert_eq!(follow(&mut hpa, 0, 10, &[2.0; 4]), vec![10; 4]);
    let o = hpa.sync(t(60), &SyncInput::steady(10, vec![one(2.0)]));
    let limited = o.condition(ConditionType::ScalingLimited).unwrap();
    assert!(limited.status);
    assert_eq!(limited.reason, "ScaleDownLimit");
    assert_eq!(follow(&mut hpa, 75, 10, &[50.0; 4]), vec![10; 4]);
}

#[test]
fn select_policy_min_takes_the_smaller_change() {
    let behavior = Behavior {
        scale_up: Some(ScalingRules {
            select_policy: Some(SelectPolicy::Min),
            ..Default::default()
        }),
        scale_down: Some(ScalingRules {
            stabilization_window_seconds: Some(0),
            select_policy: Some(SelectPolicy::Min),
            policies: Some(vec![
                ScalingPolicy {
                    policy_type: PolicyType::Pods,
                    value: 1,
                    period_seconds: 15,
                },
                ScalingPolicy {
                    policy_type: PolicyType::Percent,
                    value: 50,
                    period_seconds: 15,
                },
            ]),
            tolerance: None,
        }),
    };
    let spec = hpa_spec(1, 100, vec![avg("m")], Some(behavior));
    let mut hpa = Hpa::new(spec.clone(), v135()).unwrap();
    // Up: min(10 + 4, ceil(10 × 2)) = 14.
    assert_eq!(follow(&mut hpa, 0, 10, &[100.0]), vec![14]);
    // Down: max(10 - 1, trunc(10 × 0.5)) = 9.
    let mut hpa = Hpa::new(spec, v135()).unwrap();
    assert_eq!(follow(&mut hpa, 0, 10, &[1.0, 1.0]), vec![9, 8]);
}

// docs/hpa-behaviour.md §1.7.6.
#[test]
fn controller_restart_blocks_scale_down_for_a_window() {
    let settle = |hpa: &mut Hpa| {
        for i in 0..=40 {
            hpa.sync(t(15 * i), &SyncInput::steady(2, vec![one(2.0)]));
        }
    };
    let spec = hpa_spec(1, 100, vec![avg("m")], None);
    // Someone scales the target to 10 by hand at t = 615; the metric still says 2.
    let mut steady = Hpa::new(spec.clone(), legacy()).unwrap();
    settle(&mut steady);
    let o = steady.sync(t(615), &SyncInput::steady(10, vec![one(2.0)]));
    assert_eq!(o.replicas, 2, "without a restart the history says 2");

    let mut restarted = Hpa::new(spec.clone(), legacy()).unwrap();
    settle(&mut restarted);
    restarted.restart_controller();
    let seq = follow(&mut restarted, 615, 10, &[2.0; 22]);
    // 615 + 15 × 20 = 915 still held (not Before the cutoff); 930 drops.
    assert!(seq[..21].iter().all(|&r| r == 10), "{seq:?}");
    assert_eq!(seq[21], 2);

    // The constructor form records the same initial recommendation.
    let mut fresh = Hpa::restarted(spec, legacy(), t(615), 10).unwrap();
    assert_eq!(fresh.recommendations().len(), 1);
    let o = fresh.sync(t(630), &SyncInput::steady(10, vec![one(2.0)]));
    assert_eq!(o.replicas, 10);
}

// docs/hpa-behaviour.md §1.7.1.
#[test]
fn pre_checks_skip_the_metrics() {
    let mut hpa = Hpa::new(hpa_spec(2, 20, vec![avg("m")], None), legacy()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(0, vec![one(5.0)]));
    assert_eq!(o.decision, Decision::ScalingDisabled);
    assert_eq!(o.replicas, 0);
    assert_eq!(
        o.condition(ConditionType::ScalingActive).unwrap().reason,
        "ScalingDisabled"
    );
    let o = hpa.sync(t(15), &SyncInput::steady(30, vec![broken()]));
    assert_eq!((o.decision, o.replicas), (Decision::AboveMaxReplicas, 20));
    assert!(o.metrics.is_empty());
    let o = hpa.sync(t(30), &SyncInput::steady(1, vec![broken()]));
    assert_eq!((o.decision, o.replicas), (Decision::BelowMinReplicas, 2));
}

#[test]
fn behavior_scale_events_are_recorded() {
    let spec = hpa_spec(1, 100, vec![avg("m")], Some(Behavior::default()));
    let mut hpa = Hpa::new(spec, v135()).unwrap();
    follow(&mut hpa, 0, 1, &[100.0; 3]);
    let changes: Vec<i32> = hpa.scale_up_events().iter().map(|e| e.change).collect();
    // 1 -> 5 -> 10 -> 20: at t = 30 the t = 0 event (+4) is older than the longest period
    // (15 s), so it is marked outdated and its slot reused for +10.
    assert_eq!(changes, vec![10, 5]);
    let mut legacy_hpa = Hpa::new(hpa_spec(1, 100, vec![avg("m")], None), legacy()).unwrap();
    follow(&mut legacy_hpa, 0, 1, &[100.0; 3]);
    assert!(legacy_hpa.scale_up_events().is_empty());
}

#[test]
fn hpa_spec_deserialises_from_autoscaling_v2_yaml() {
    let yaml = r#"
scaleTargetRef: {apiVersion: apps/v1, kind: StatefulSet, name: lobby}
minReplicas: 2
maxReplicas: 50
metrics:
- type: External
  external:
    metric:
      name: hpa_expect_replicas
      selector:
        matchLabels: {hpa_target_name: lobby}
        matchExpressions:
        - {key: env, operator: In, values: [prod, canary]}
        - {key: paused, operator: DoesNotExist}
    target:
      type: AverageValue
      averageValue: "1"
- type: External
  external:
    metric: {name: other}
    target: {type: AverageValue, value: 5}
behavior:
  scaleUp:
    stabilizationWindowSeconds: 0
    policies:
    - {type: Pods, value: 4, periodSeconds: 15}
    selectPolicy: Max
    tolerance: "0"
  scaleDown:
    tolerance: 100m
"#;
    let spec: HpaSpec = yaml_serde::from_str(yaml).unwrap();
    assert_eq!(spec.min_replicas(), 2);
    let first = spec.metrics[0].external.as_ref().unwrap();
    assert_eq!(
        first.target.formula(),
        Some(TargetFormula::AverageValue { milli: 1000 })
    );
    assert_eq!(
        first
            .metric
            .selector
            .as_ref()
            .unwrap()
            .to_query()
            .unwrap()
            .as_deref(),
        Some("env in (canary,prod),hpa_target_name=lobby,!paused")
    );
    // docs/hpa-behaviour.md §1.1: `type` is ignored; the set field decides.
    let second = spec.metrics[1].external.as_ref().unwrap();
    assert_eq!(
        second.target.formula(),
        Some(TargetFormula::Value { milli: 5000 })
    );
    assert_eq!(second.metric.selector, None);
    let b = spec.behavior.clone().unwrap();
    let up = b.resolved_scale_up();
    assert_eq!(up.policies.len(), 1);
    let down = b.resolved_scale_down(DEFAULT_DOWNSCALE_STABILIZATION);
    assert_eq!(down.stabilization_window, t(300));
    assert_eq!(down.select_policy, SelectPolicy::Max);
    assert_eq!(down.tolerance, Some(0.1));

    let hpa = Hpa::new(spec.clone(), v135()).unwrap();
    assert_eq!(
        (hpa.tolerances().scale_up, hpa.tolerances().scale_down),
        (0.0, 0.1)
    );
    let hpa = Hpa::new(spec, legacy()).unwrap();
    assert_eq!(hpa.tolerances().style, ToleranceStyle::Symmetric);
}

#[test]
fn validation_rejects_what_the_api_server_rejects() {
    let mut both = MetricTarget::average_value("1").unwrap();
    both.value = Some(Quantity::parse("1").unwrap());
    for spec in [
        hpa_spec(5, 2, vec![avg("m")], None),
        hpa_spec(1, 10, vec![], None),
        hpa_spec(1, 10, vec![MetricSpec::external("m", both)], None),
        hpa_spec(
            1,
            10,
            vec![MetricSpec::external("m", MetricTarget::value("0").unwrap())],
            None,
        ),
    ] {
        assert!(Hpa::new(spec, v135()).is_err());
    }
    let pods: HpaSpec =
        yaml_serde::from_str("maxReplicas: 3\nmetrics:\n- type: ContainerResource\n").unwrap();
    assert!(matches!(
        Hpa::new(pods, v135()),
        Err(SpecError::Unsupported { .. })
    ));
}

fn arb_input_metric() -> impl Strategy<Value = MetricInput> {
    prop_oneof![
        3 => prop::collection::vec(0.0f64..200.0, 1..3).prop_map(Ok),
        1 => Just(Err("boom".to_string())),
        1 => Just(Ok(vec![])),
    ]
}

fn arb_behavior() -> impl Strategy<Value = Option<Behavior>> {
    let policy = (
        prop_oneof![Just(PolicyType::Pods), Just(PolicyType::Percent)],
        1..200i32,
        1..120i32,
    )
        .prop_map(|(policy_type, value, period_seconds)| ScalingPolicy {
            policy_type,
            value,
            period_seconds,
        });
    let rules = (
        prop::option::of(0..400i32),
        prop::option::of(prop_oneof![
            Just(SelectPolicy::Max),
            Just(SelectPolicy::Min),
            Just(SelectPolicy::Disabled)
        ]),
        prop::option::of(prop::collection::vec(policy, 1..3)),
    )
        .prop_map(|(w, s, p)| ScalingRules {
            stabilization_window_seconds: w,
            select_policy: s,
            policies: p,
            tolerance: None,
        });
    prop::option::of(
        (prop::option::of(rules.clone()), prop::option::of(rules)).prop_map(
            |(scale_up, scale_down)| Behavior {
                scale_up,
                scale_down,
            },
        ),
    )
}

proptest! {
    #[test]
    fn replicas_respect_bounds_and_invalid_metrics(
        min in 0..5i32,
        span in 0..40i32,
        behavior in arb_behavior(),
        minor in prop_oneof![Just(32u32), Just(33), Just(35), Just(37)],
        steps in prop::collection::vec(
            (0..60i32, 0..60i32, 0..60i32, 1..40u64, arb_input_metric(), arb_input_metric()),
            1..25,
        ),
    ) {
        let max = (min + span).max(1);
        let spec = hpa_spec(min, max, vec![avg("a"), avg("b")], behavior);
        let mut config = ControllerConfig::for_kube_minor(minor);
        if min == 0 && !config.scale_to_zero.allows_min_zero() {
            config.scale_to_zero = ScaleToZero::ReplicasRule;
        }
        let mut hpa = Hpa::new(spec, config).unwrap();
        let mut now = t(0);
        for (current, status, ready, dt, a, b) in steps {
            now += t(dt);
            let invalid = [&a, &b].iter().filter(|m| !matches!(m, Ok(v) if !v.is_empty())).count();
            let input = SyncInput {
                spec_replicas: current,
                status_replicas: status,
                ready_pods: ready.min(status),
                pods: status,
                metrics: vec![a, b],
                selector: TargetSelector::Valid,
            };
            let o = hpa.sync(now, &input);
            if current == 0 && min > 0 {
                prop_assert_eq!(o.replicas, 0);
                continue;
            }
            // docs/hpa-behaviour.md §7.2: from 1.37 a 0 the HPA did not set pauses it.
            if o.decision == Decision::ScalingDisabled {
                prop_assert_eq!((current, o.replicas), (0, 0));
                continue;
            }
            prop_assert!(o.replicas >= min && o.replicas <= max, "{} not in [{}, {}]", o.replicas, min, max);
            if current >= min && current <= max {
                if invalid == 2 {
                    prop_assert_eq!(o.replicas, current);
                }
                if invalid > 0 {
                    prop_assert!(o.replicas >= current);
                }
            }
        }
    }
}

fn v137() -> ControllerConfig {
    ControllerConfig::for_kube_minor(37)
}

fn scaled_to_zero(o: &SyncOutcome) -> Option<(bool, String)> {
    o.condition(ConditionType::ScaledToZero)
        .map(|c| (c.status, c.reason.clone()))
}

/// A scale-down window of 0 s, default policies otherwise.
fn prompt_down() -> Option<Behavior> {
    Some(Behavior {
        scale_up: None,
        scale_down: Some(ScalingRules {
            stabilization_window_seconds: Some(0),
            ..Default::default()
        }),
    })
}

// docs/hpa-behaviour.md §1.7.7, §7.1: minReplicas 0 passes only with HPAScaleToZero, on by
// default from 1.37.
#[test]
fn min_replicas_zero_needs_the_gate() {
    let spec = hpa_spec(0, 10, vec![avg("m")], None);
    let err = Hpa::new(spec.clone(), v135()).unwrap_err().to_string();
    assert!(err.contains("HPAScaleToZero"), "{err}");
    assert!(Hpa::new(spec.clone(), v137()).is_ok());
    let mut alpha = v135();
    alpha.scale_to_zero = ScaleToZero::ReplicasRule;
    assert!(Hpa::new(spec.clone(), alpha).is_ok());
    let mut hpa = Hpa::new(hpa_spec(1, 10, vec![avg("m")], None), v135()).unwrap();
    assert!(hpa.set_spec(spec).is_err());
}

// docs/hpa-behaviour.md §7.2: the 1.37 controller scales to 0 on a served 0, marks it with
// ScaledToZero, holds 0 while the metric is invalid, and scales from 0 when the metric asks,
// the first step capped by the scale-up policies (4 with the defaults).
#[test]
fn v137_scales_to_zero_and_back_from_an_external_metric() {
    let mut hpa = Hpa::new(hpa_spec(0, 10, vec![avg("m")], prompt_down()), v137()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(3, vec![one(0.0)]));
    assert_eq!(o.replicas, 0, "{o}");
    assert_eq!(scaled_to_zero(&o), Some((true, "ScaledToZero".into())));
    // At 0 the AverageValue ratio is 0/0: never within the band, proposal ceil(0) = 0.
    let o = hpa.sync(t(15), &SyncInput::steady(0, vec![one(0.0)]));
    assert_eq!((o.replicas, o.rescaled), (0, false), "{o}");
    assert!(matches!(o.decision, Decision::Normalized { .. }), "{o}");
    // No recommendation at 0: every metric invalid, the workload stays at 0.
    let o = hpa.sync(t(30), &SyncInput::steady(0, vec![broken()]));
    assert_eq!(o.decision, Decision::AllMetricsInvalid { invalid: 1 });
    assert_eq!(o.replicas, 0);
    // The recommender asks for 6: the first step from 0 is the Pods policy's 4.
    let o = hpa.sync(t(45), &SyncInput::steady(0, vec![one(6.0)]));
    assert_eq!(o.replicas, 4, "{o}");
    assert_eq!(scaled_to_zero(&o), Some((false, "NotScaledToZero".into())));
    let o = hpa.sync(t(60), &SyncInput::steady(4, vec![one(6.0)]));
    assert_eq!(o.replicas, 6, "{o}");
}

// docs/hpa-behaviour.md §7.2: a 0 the HPA did not set (a manual scale, a workload created at 0)
// pauses autoscaling from 1.37, whatever minReplicas says.
#[test]
fn v137_a_zero_set_by_someone_else_pauses_the_hpa() {
    let mut hpa = Hpa::new(hpa_spec(0, 10, vec![avg("m")], prompt_down()), v137()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(0, vec![one(5.0)]));
    assert_eq!((o.decision, o.replicas), (Decision::ScalingDisabled, 0));
    assert_eq!(scaled_to_zero(&o), None);
}

// docs/hpa-behaviour.md §7.2: raising minReplicas while the HPA holds 0 scales to the new
// minimum from 1.37; the alpha rule before it paused the HPA instead (kubernetes#110278).
#[test]
fn raising_min_replicas_at_zero_differs_by_implementation() {
    let mut alpha = v135();
    alpha.scale_to_zero = ScaleToZero::ReplicasRule;
    let normalized = Decision::Normalized {
        invalid: 0,
        stabilization: Stabilization::Unchanged,
        limit: Limit::DesiredWithinRange,
    };
    for (config, want) in [
        (v137(), (normalized, 1)),
        (alpha, (Decision::ScalingDisabled, 0)),
    ] {
        let mut hpa = Hpa::new(hpa_spec(0, 10, vec![avg("m")], prompt_down()), config).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(2, vec![one(0.0)]));
        assert_eq!(o.replicas, 0, "{o}");
        hpa.set_spec(hpa_spec(1, 10, vec![avg("m")], prompt_down()))
            .unwrap();
        let o = hpa.sync(t(15), &SyncInput::steady(0, vec![one(0.0)]));
        assert_eq!((o.decision, o.replicas), want, "{config:?}: {o}");
    }
}

// The edges below were each read off pkg/controller/podautoscaler/horizontal.go and
// replica_calculator.go of k8s.io/kubernetes v1.37.2 (docs/hpa-behaviour.md §1.6.1, §1.8, §7.2).

/// 1.36 with `HPAScaleToZero` switched on runs the condition implementation: a 0 set by hand
/// at minReplicas 0 stays 0 (ScalingDisabled), where the alpha rule before 1.36 scaled it to 4.
#[test]
fn v136_with_the_gate_on_keeps_a_manual_zero() {
    let mut on36 = ControllerConfig::for_kube_minor(36);
    assert_eq!(
        on36.scale_to_zero,
        ScaleToZero::Off,
        "off by default in 1.36"
    );
    on36.scale_to_zero = ScaleToZero::for_kube_minor_with_gate(36, Some(true));
    assert_eq!(on36.scale_to_zero, ScaleToZero::Condition);
    let mut on35 = v135();
    on35.scale_to_zero = ScaleToZero::for_kube_minor_with_gate(35, Some(true));
    assert_eq!(on35.scale_to_zero, ScaleToZero::ReplicasRule);
    let off37 = ScaleToZero::for_kube_minor_with_gate(37, Some(false));
    assert_eq!(off37, ScaleToZero::Off);
    let capped = Decision::Normalized {
        invalid: 0,
        stabilization: Stabilization::Unchanged,
        limit: Limit::ScaleUpLimit,
    };
    for (config, want) in [(on36, (Decision::ScalingDisabled, 0)), (on35, (capped, 4))] {
        let mut hpa = Hpa::new(hpa_spec(0, 10, vec![avg("m")], None), config).unwrap();
        let o = hpa.sync(t(0), &SyncInput::steady(0, vec![one(6.0)]));
        assert_eq!((o.decision, o.replicas), want, "{config:?}: {o}");
    }
}

fn value(name: &str, q: &str) -> MetricSpec {
    MetricSpec::external(name, MetricTarget::value(q).unwrap())
}

/// From 1.34 a negative running AverageValue sum reads as an overflow (MaxInt64), so the
/// proposal is MaxInt32 and the HPA goes to maxReplicas; before, the sum stays negative and
/// the HPA goes to minReplicas. A negative item still lowers a Value sum.
#[test]
fn a_negative_average_value_sum_is_an_overflow_from_1_34() {
    let answer = || Ok(vec![-2.0, 1.0]);
    let mut v134 = Hpa::new(
        hpa_spec(1, 10, vec![avg("m")], None),
        ControllerConfig::for_kube_minor(34),
    )
    .unwrap();
    let o = v134.sync(t(0), &SyncInput::steady(4, vec![answer()]));
    let p = proposal(&o, 0);
    assert_eq!((p.usage_milli, p.replicas), (i64::MAX, i32::MAX), "{o}");
    assert_eq!(
        o.replicas, 8,
        "capped at 2 × current by the legacy rule: {o}"
    );
    let mut v133 = Hpa::new(hpa_spec(1, 10, vec![avg("m")], None), v133()).unwrap();
    let o = v133.sync(t(0), &SyncInput::steady(4, vec![answer()]));
    let p = proposal(&o, 0);
    assert_eq!((p.usage_milli, p.replicas), (-1000, -1), "{o}");
    assert_eq!(o.metric_replicas, Some(-1));
    // Value: the guard only stops a positive overflow; 5 + (-3) = 2 of target 1 on 4 pods.
    let mut v = Hpa::new(hpa_spec(1, 10, vec![value("m", "1")], None), v135()).unwrap();
    let o = v.sync(t(0), &SyncInput::steady(4, vec![Ok(vec![5.0, -3.0])]));
    assert_eq!(proposal(&o, 0).usage_milli, 2000, "{o}");
    assert_eq!(proposal(&o, 0).replicas, 8);
}

/// A positive overflow: from 1.34 both paths stop at MaxInt64; before, int64 addition wraps.
#[test]
fn an_overflowing_sum_stops_at_max_int64_from_1_34_and_wraps_before() {
    use super::super::replicas::external_sum;
    let big = [9_000_000_000_000_000_000i64, 1_000_000_000_000_000_000];
    let avg_f = TargetFormula::AverageValue { milli: 1000 };
    let val_f = TargetFormula::Value { milli: 1000 };
    assert_eq!(external_sum(avg_f, &big, true), i64::MAX);
    assert_eq!(external_sum(val_f, &big, true), i64::MAX);
    assert_eq!(
        external_sum(avg_f, &big, false),
        big[0].wrapping_add(big[1])
    );
    assert!(external_sum(val_f, &big, false) < 0);
    // A negative first item: AverageValue gives up at once, Value sums on.
    assert_eq!(external_sum(avg_f, &[-1, 5], true), i64::MAX);
    assert_eq!(external_sum(val_f, &[-1, 5], true), 4);
}

/// Where the controller converts a float64 to int32 with no range check, Go on amd64 gives
/// MinInt32, not a saturated MaxInt32. A huge Value ratio from 0 therefore proposes MinInt32
/// and the target stays at 0; the Object AverageValue path converts without a cap too, while
/// the External AverageValue path caps at MaxInt32 first.
#[test]
fn unchecked_int32_conversions_follow_go_on_amd64() {
    let mut hpa = Hpa::new(
        hpa_spec(0, 10, vec![value("m", "1m")], prompt_down()),
        v137(),
    )
    .unwrap();
    // The HPA takes the target to 0 itself, so it may scale from 0 afterwards.
    let o = hpa.sync(t(0), &SyncInput::steady(1, vec![one(0.0)]));
    assert_eq!(o.replicas, 0, "{o}");
    let o = hpa.sync(t(15), &SyncInput::steady(0, vec![one(1e15)]));
    assert_eq!(proposal(&o, 0).replicas, i32::MIN, "{o}");
    assert_eq!((o.replicas, o.rescaled), (0, false), "{o}");

    let obj = MetricSpec::object(
        "StatefulSet",
        "lobby",
        "m",
        MetricTarget::average_value("1m").unwrap(),
    );
    let mut hpa = Hpa::new(hpa_spec(1, 10, vec![obj], prompt_down()), v137()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(3, vec![one(1e12)]));
    assert_eq!(proposal(&o, 0).replicas, i32::MIN, "{o}");
    assert_eq!(
        o.replicas, 1,
        "a MinInt32 proposal normalises to minReplicas: {o}"
    );
    let mut hpa = Hpa::new(hpa_spec(1, 10, vec![avg("m")], None), v137()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(3, vec![one(1e12)]));
    assert_eq!(proposal(&o, 0).replicas, i32::MAX, "{o}");
}

/// After the HPA scaled to 0, a manual scale away from 0 leaves `ScaledToZero=True`; the
/// HPA's next own rescale writes it False, after which a manual 0 pauses the HPA. Without an
/// HPA rescale in between, a manual 0 is still read as the HPA's own.
#[test]
fn scaled_to_zero_after_a_manual_scale_from_zero() {
    let spec = || hpa_spec(0, 10, vec![avg("m")], prompt_down());
    let mut hpa = Hpa::new(spec(), v137()).unwrap();
    let o = hpa.sync(t(0), &SyncInput::steady(2, vec![one(0.0)]));
    assert_eq!(scaled_to_zero(&o), Some((true, "ScaledToZero".into())));
    // kubectl scale --replicas=3: the HPA sees 3 and 3 is what the metric asks.
    let o = hpa.sync(t(15), &SyncInput::steady(3, vec![one(3.0)]));
    assert!(!o.rescaled, "{o}");
    assert_eq!(scaled_to_zero(&o), Some((true, "ScaledToZero".into())));
    // kubectl scale --replicas=0 again: still read as the HPA's own 0.
    let o = hpa.sync(t(30), &SyncInput::steady(0, vec![one(3.0)]));
    assert_eq!(o.replicas, 3, "{o}");
    assert_eq!(scaled_to_zero(&o), Some((false, "NotScaledToZero".into())));
    // Once the HPA rescaled, a manual 0 pauses it.
    let o = hpa.sync(t(45), &SyncInput::steady(0, vec![one(3.0)]));
    assert_eq!(
        (o.decision, o.replicas),
        (Decision::ScalingDisabled, 0),
        "{o}"
    );

    // Any rescale of the HPA's that is not to 0 writes False, a scale-up from 4 included.
    let mut hpa = Hpa::new(spec(), v137()).unwrap();
    hpa.sync(t(0), &SyncInput::steady(2, vec![one(0.0)]));
    let o = hpa.sync(t(15), &SyncInput::steady(4, vec![one(6.0)]));
    assert_eq!(o.replicas, 6, "{o}");
    assert_eq!(scaled_to_zero(&o), Some((false, "NotScaledToZero".into())));
    let o = hpa.sync(t(30), &SyncInput::steady(0, vec![one(6.0)]));
    assert_eq!(o.decision, Decision::ScalingDisabled, "{o}");
}

/// At 0 with `ScaledToZero=True` and a raised minReplicas the metrics are still read: an
/// invalid metric keeps the target at 0 where a pre-check would have gone to the minimum.
#[test]
fn a_raised_minimum_at_zero_still_needs_a_valid_metric() {
    let mut hpa = Hpa::new(hpa_spec(0, 10, vec![avg("m")], prompt_down()), v137()).unwrap();
    hpa.sync(t(0), &SyncInput::steady(2, vec![one(0.0)]));
    hpa.set_spec(hpa_spec(2, 10, vec![avg("m")], prompt_down()))
        .unwrap();
    let o = hpa.sync(t(15), &SyncInput::steady(0, vec![broken()]));
    assert_eq!(
        (o.decision, o.replicas),
        (Decision::AllMetricsInvalid { invalid: 1 }, 0)
    );
    let o = hpa.sync(t(30), &SyncInput::steady(0, vec![one(0.0)]));
    assert_eq!(o.replicas, 2, "{o}");
}

/// The target's selector is checked before any metric: missing, unparsable or shared with
/// another HPA, the sync stops with `ScalingActive=False` and nothing scales. The min/max
/// pre-checks run before it and still apply.
#[test]
fn a_missing_or_ambiguous_selector_stops_the_hpa() {
    let cases = [
        (
            TargetSelector::Missing,
            "InvalidSelector",
            "SelectorRequired",
        ),
        (
            TargetSelector::Unparsable("unable to parse requirement".into()),
            "InvalidSelector",
            "InvalidSelector",
        ),
        (
            TargetSelector::Ambiguous {
                selector: "app=web".into(),
                hpas: vec!["{web default}".into(), "{web-cpu default}".into()],
            },
            "AmbiguousSelector",
            "AmbiguousSelector",
        ),
    ];
    for (selector, reason, event) in cases {
        let mut hpa = Hpa::new(hpa_spec(1, 10, vec![avg("m")], None), v137()).unwrap();
        let input = SyncInput {
            selector: selector.clone(),
            ..SyncInput::steady(3, vec![one(8.0)])
        };
        let o = hpa.sync(t(0), &input);
        assert_eq!((o.replicas, o.rescaled), (3, false), "{selector:?}: {o}");
        assert_eq!(o.decision, Decision::SelectorRefused { reason });
        assert!(o.metrics.is_empty());
        let active = o.condition(ConditionType::ScalingActive).unwrap();
        assert_eq!((active.status, active.reason.as_str()), (false, reason));
        assert_eq!(o.events[0].reason, event);
        assert_eq!(o.events[1].reason, "FailedComputeMetricsReplicas");
        // Only the initial recommendation is kept: the refused sync recorded none.
        assert_eq!(hpa.recommendations().len(), 1);
        // Above maxReplicas the pre-check scales without reading the selector.
        let input = SyncInput {
            selector,
            ..SyncInput::steady(12, vec![one(8.0)])
        };
        let o = hpa.sync(t(15), &input);
        assert_eq!((o.decision, o.replicas), (Decision::AboveMaxReplicas, 10));
    }
    let ambiguous = TargetSelector::Ambiguous {
        selector: "app=web".into(),
        hpas: vec!["{web default}".into(), "{web-cpu default}".into()],
    };
    assert_eq!(
        ambiguous.refusal().unwrap().condition_message,
        "pods by selector app=web are controlled by more than one HPA (e.g. [{web default} {web-cpu default}])"
    );
}

/// Seen against the real controller (tests/integration/model_vs_real.rs): a scale-down event
/// and a scale-up two periods later, 2.013 s apart, with a 2 s scale-up window and a 2 s
/// policy period. The real controller stamped the scale-down's event when its update returned,
/// after the recommendation of that sync, so at the scale-up the event was still in the
/// period (the limit counts it: 4 + 2 + 4 = 10 allows 9) while the recommendation of 4 had left
/// the window. Stamping events at the sync's own reading drops both, and the limit is 8.
#[test]
fn a_scale_event_stamped_after_its_sync_stays_in_a_period_its_recommendation_has_left() {
    let spec: HpaSpec = serde_json::from_value(serde_json::json!({
        "minReplicas": 2, "maxReplicas": 11,
        "metrics": [{"type": "External", "external": {"metric": {"name": "m"},
            "target": {"type": "AverageValue", "averageValue": "1"}}}],
        "behavior": {
            "scaleUp": {"stabilizationWindowSeconds": 2, "selectPolicy": "Max",
                "policies": [{"type": "Pods", "value": 4, "periodSeconds": 2}]},
            "scaleDown": {"stabilizationWindowSeconds": 1, "selectPolicy": "Max", "tolerance": "0",
                "policies": [{"type": "Percent", "value": 25, "periodSeconds": 1}]},
        },
    }))
    .unwrap();
    // (ms, served, status.replicas) of the real syncs, from 2 replicas.
    let syncs = [
        (0, 1, 2),
        (1_024, 1, 2),
        (2_049, 1, 2),
        (3_069, 1, 2),
        (4_075, 1, 2),
        (5_081, 1, 2),
        (6_085, 1, 2),
        (7_099, 15, 2),
        (8_128, 15, 2),
        (9_149, 15, 6),
        (10_170, 15, 6),
        (11_190, 15, 10),
        (12_208, 15, 10),
        (13_253, 4, 11),
        (14_276, 4, 8),
        (15_297, 4, 6),
        (16_313, 9, 4),
        (17_310, 9, 4),
    ];
    let run = |delay_ms: u64| {
        let mut hpa = Hpa::new(spec.clone(), ControllerConfig::for_kube_minor(37)).unwrap();
        hpa.set_scale_event_delay(Duration::from_millis(delay_ms));
        let mut replicas = 2;
        let mut out = Vec::new();
        for (at, served, status) in syncs {
            let input = SyncInput {
                spec_replicas: replicas,
                status_replicas: status,
                ready_pods: 0,
                pods: 0,
                metrics: vec![one(served as f64)],
                selector: Default::default(),
            };
            replicas = hpa.sync(Duration::from_millis(at), &input).replicas;
            out.push(replicas);
        }
        out[11..].to_vec()
    };
    // The real controller, from 11.190 s: 10, 11, 8, 6, 4, 4, 9.
    assert_eq!(run(20), [10, 11, 8, 6, 4, 4, 9]);
    assert_eq!(run(0), [10, 11, 8, 6, 4, 4, 8]);
}
