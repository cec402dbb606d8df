use super::*;
use crate::evidence::{Observation, TargetId, UnknownTarget};
use proptest::prelude::*;

const NOW: Millis = 10_000_000;

fn rule(up: f64, down: f64) -> ThresholdRule {
    ThresholdRule {
        up_per_replica: up,
        down_per_replica: down,
        sustain: None,
        max_step: None,
        min: 0,
        max: None,
    }
}

fn value(r: &ThresholdRule, load: f64, current: u64) -> u64 {
    r.decide(load, current, None, NOW).unwrap().value
}

#[test]
fn ceil_matches_the_integer_form_and_handles_fractions() {
    assert_eq!(replicas_for(0.0, 200.0), Some(0));
    assert_eq!(replicas_for(1.0, 200.0), Some(1));
    assert_eq!(replicas_for(200.0, 200.0), Some(1));
    assert_eq!(replicas_for(201.0, 200.0), Some(2));
    // 0.3 / 0.1 is 2.9999999999999996 in floating point; 3 × 0.1 is 0.30000000000000004 ≥ 0.3.
    assert_eq!(replicas_for(0.3, 0.1), Some(3));
    assert_eq!(replicas_for(2.5, 1.0), Some(3));
    assert_eq!(replicas_for(f64::NAN, 1.0), None);
    assert_eq!(replicas_for(-1.0, 1.0), None);
    assert_eq!(replicas_for(1e12, 1.0), None);
}

#[test]
fn the_band_holds_and_each_direction_jumps_to_the_fixed_point() {
    // Cadence-like: 200 per replica up, 150 (200 × 0.75) down.
    let r = rule(200.0, 150.0);
    // 1000 at 4 replicas: up = 5 > 4.
    let d = r.decide(1000.0, 4, None, NOW).unwrap();
    assert_eq!((d.value, d.branch, d.up, d.down), (5, Branch::Up, 5, 7));
    // In the band [5, 7]: hold at 5, 6 and 7.
    for c in 5..=7 {
        assert_eq!(r.decide(1000.0, c, None, NOW).unwrap().branch, Branch::Hold);
    }
    // A drop from 1000 to 160 at 7 replicas goes to ceil(160/150) = 2 in one step, where
    // Cadence's "below (P-1) × 150" walks 7 → 6 → ... one sustained window each.
    let d = r.decide(160.0, 7, None, NOW).unwrap();
    assert_eq!((d.value, d.branch), (2, Branch::Down));
    assert_eq!(value(&r, 160.0, 2), 2);
}

#[test]
fn zero_load_is_bounded_by_min() {
    let mut r = rule(10.0, 5.0);
    r.min = DEFAULT_MIN;
    let d = r.decide(0.0, 4, None, NOW).unwrap();
    assert_eq!((d.value, d.raw, d.branch), (1, 0, Branch::Down));
    assert!(
        d.notes.iter().any(|n| n == "min 1 raises 0 to 1"),
        "{:?}",
        d.notes
    );
    r.min = 0;
    assert_eq!(value(&r, 0.0, 4), 0);
}

#[test]
fn max_step_and_max_bound() {
    let mut r = rule(10.0, 10.0);
    r.max_step = Some(2);
    r.max = Some(20);
    assert_eq!(value(&r, 100.0, 3), 5);
    assert_eq!(value(&r, 100.0, 5), 7);
    assert_eq!(value(&r, 10.0, 7), 5);
    r.max_step = None;
    assert_eq!(value(&r, 1000.0, 3), 20);
}

fn history(loads: &[(Millis, f64)], since: Millis) -> Vec<Evaluation> {
    let _ = since;
    loads
        .iter()
        .map(|&(ago, load)| Evaluation {
            at_ms: NOW - ago,
            load,
        })
        .collect()
}

fn sustained_rule() -> ThresholdRule {
    let mut r = rule(100.0, 80.0);
    r.sustain = Some(SustainRule {
        up_ms: Some(60_000),
        down_ms: Some(120_000),
        fraction: 0.5,
    });
    r
}

#[test]
fn a_single_dip_does_not_reset_a_sustained_overload() {
    let r = sustained_rule();
    // One evaluation every 10 s over the last minute at 500 (wants 5), with one dip to 100.
    let evs = history(
        &[
            (55_000, 500.0),
            (45_000, 500.0),
            (35_000, 100.0),
            (25_000, 500.0),
            (15_000, 500.0),
            (5_000, 500.0),
            (0, 500.0),
        ],
        NOW - 300_000,
    );
    let h = History {
        since_ms: NOW - 300_000,
        evaluations: &evs,
    };
    let d = r.decide(500.0, 2, Some(&h), NOW).unwrap();
    assert_eq!((d.value, d.branch), (5, Branch::Up), "{:?}", d.notes);
    // The dip is the evaluation being decided: still up, since 6 of 7 wanted 5.
    let mut dip = evs.clone();
    dip.last_mut().unwrap().load = 100.0;
    let h = History {
        since_ms: NOW - 300_000,
        evaluations: &dip,
    };
    let d = r.decide(100.0, 2, Some(&h), NOW).unwrap();
    assert_eq!((d.value, d.branch), (5, Branch::Up), "{:?}", d.notes);
}

#[test]
fn an_overload_in_less_than_the_fraction_does_not_scale() {
    let r = sustained_rule();
    let evs = history(
        &[
            (50_000, 100.0),
            (40_000, 100.0),
            (30_000, 100.0),
            (20_000, 100.0),
            (10_000, 500.0),
            (0, 500.0),
        ],
        0,
    );
    let h = History {
        since_ms: NOW - 300_000,
        evaluations: &evs,
    };
    // 2 of 6 is below one half: hold at 2.
    let d = r.decide(500.0, 2, Some(&h), NOW).unwrap();
    assert_eq!((d.value, d.branch), (2, Branch::Hold), "{:?}", d.notes);
}

#[test]
fn an_uncovered_window_blocks_its_direction() {
    let r = sustained_rule();
    let evs = history(&[(0, 500.0)], 0);
    let h = History {
        since_ms: NOW - 30_000,
        evaluations: &evs,
    };
    let d = r.decide(500.0, 2, Some(&h), NOW).unwrap();
    assert_eq!(d.branch, Branch::Hold);
    assert!(d.notes[0].contains("not yet covered"), "{:?}", d.notes);
    // And scale-down waits for its own, longer window.
    let h = History {
        since_ms: NOW - 90_000,
        evaluations: &history(&[(0, 10.0)], 0),
    };
    assert_eq!(
        r.decide(10.0, 6, Some(&h), NOW).unwrap().branch,
        Branch::Hold
    );
}

#[test]
fn the_log_dedupes_data_bounds_memory_and_restarts_after_a_gap() {
    let mut log = EvaluationLog::default();
    log.record(1_000, 900, 5.0, 60_000);
    log.record(2_000, 900, 5.0, 60_000); // same data: not a new evaluation
    log.record(3_000, 2_900, 6.0, 60_000);
    let h = log.history(3_000);
    assert_eq!(h.evaluations.len(), 2);
    assert_eq!(h.since_ms, 1_000);
    // Old evaluations fall out, the run continues.
    log.record(62_000, 61_900, 7.0, 60_000);
    let h = log.history(62_000);
    assert_eq!(h.evaluations.len(), 2);
    assert_eq!(h.since_ms, 1_000);
    // A gap longer than the window breaks the run.
    log.record(200_000, 199_000, 8.0, 60_000);
    let h = log.history(200_000);
    assert_eq!((h.evaluations.len(), h.since_ms), (1, 200_000));
    for i in 0..(EvaluationLog::MAX_EVALUATIONS as i64 + 10) {
        log.record(200_001 + i, 200_001 + i, 1.0, 60_000);
    }
    assert_eq!(
        log.history(0).evaluations.len(),
        EvaluationLog::MAX_EVALUATIONS
    );
}

// ---- properties ----

/// Per-replica thresholds with T_down ≤ T_up, fractional or whole.
fn thresholds() -> impl Strategy<Value = (f64, f64)> {
    prop_oneof![
        (1u32..5000, 1u32..=100).prop_map(|(up, pct)| {
            let up = up as f64;
            (up, (up * pct as f64 / 100.0).max(0.5))
        }),
        (0.01f64..1000.0, 0.01f64..=1.0).prop_map(|(up, f)| (up, (up * f).max(1e-3))),
    ]
    .prop_filter("down ≤ up", |(u, d)| d <= u)
}

fn load() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        (0u32..200_000).prop_map(f64::from),
        0.0f64..200_000.0,
    ]
}

fn bounds() -> impl Strategy<Value = (u64, Option<u64>)> {
    (0u64..4, prop::option::of(0u64..400)).prop_map(|(min, max)| (min, max.map(|m| m.max(min))))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn ceil_is_the_integer_form(v in 1u64..2_000_000, t in 1u64..50_000) {
        prop_assume!((v - 1) / t < 1_000_000);
        prop_assert_eq!(replicas_for(v as f64, t as f64), Some((v - 1) / t + 1));
    }

    #[test]
    fn ceil_is_the_least_covering_count(v in load(), (t, _) in thresholds()) {
        if let Some(n) = replicas_for(v, t) {
            prop_assert!(n as f64 * t >= v);
            if n > 0 {
                prop_assert!((n - 1) as f64 * t < v);
            }
        }
    }

    /// Answering and then seeing the answer as the current count, with the same load, gives
    /// the same answer: an `up` never triggers a `down` and the reverse.
    #[test]
    fn the_answer_is_a_fixed_point(
        v in load(),
        (t_up, t_down) in thresholds(),
        c in 0u64..3000,
        (min, max) in bounds(),
    ) {
        let mut r = rule(t_up, t_down);
        r.min = min;
        r.max = max;
        let Ok(first) = r.decide(v, c, None, NOW) else { return Ok(()) };
        // Without sustain the rule is exactly the issue's: up if up > c, down if down < c.
        prop_assert_eq!((first.raw, first.branch), hysteresis(first.up, first.down, c));
        let second = r.decide(v, first.value, None, NOW).unwrap();
        prop_assert_eq!(second.value, first.value, "{:?} then {:?}", first, second);
        // Where the bounds did not intervene, the rule itself says hold the second time.
        if first.value == first.raw && second.value == second.raw {
            prop_assert_eq!(second.branch, Branch::Hold);
        }
        // The raw rule itself lands in the band: up ≤ answer ≤ down.
        prop_assert!(first.up <= first.down);
        if first.branch != Branch::Hold {
            prop_assert!(first.up <= first.raw && first.raw <= first.down);
        }
    }

    /// Under load the answer rises: if `c` replicas would each carry more than T_up, the
    /// answer is above `c` (unless `max` forbids it).
    #[test]
    fn no_state_is_under_load_yet_stuck(
        v in load(),
        (t_up, t_down) in thresholds(),
        c in 0u64..3000,
        step in prop::option::of(1u64..10),
    ) {
        let mut r = rule(t_up, t_down);
        r.max_step = step;
        let Ok(d) = r.decide(v, c, None, NOW) else { return Ok(()) };
        if v > c as f64 * t_up {
            prop_assert!(d.value > c, "{:?}", d);
        }
        // And above the band it comes down: c−1 replicas would each carry at most T_down.
        if c > 0 && ((c - 1) as f64) * t_down >= v {
            prop_assert!(d.value < c, "{:?}", d);
        }
    }

    /// With maxStep the walk towards the fixed point never reverses and ends there.
    #[test]
    fn stepping_is_monotone(
        v in load(),
        (t_up, t_down) in thresholds(),
        c in 0u64..300,
        step in 1u64..5,
    ) {
        let free = rule(t_up, t_down);
        let mut r = free;
        r.max_step = Some(step);
        let Ok(target) = free.decide(v, c, None, NOW) else { return Ok(()) };
        prop_assume!(target.value.abs_diff(c) / step < 900);
        let mut now = c;
        let mut direction = 0i8;
        for _ in 0..1000 {
            let next = r.decide(v, now, None, NOW).unwrap().value;
            if next == now {
                break;
            }
            let d = if next > now { 1 } else { -1 };
            prop_assert!(direction == 0 || direction == d, "reversed at {now} -> {next}");
            prop_assert!(next.abs_diff(now) <= step);
            direction = d;
            now = next;
        }
        prop_assert_eq!(now, target.value);
    }

    /// With sustain, for a fixed history, the answer is still a fixed point.
    #[test]
    fn sustained_answers_are_fixed_points(
        loads in prop::collection::vec((0i64..180_000, load()), 1..40),
        now_load in load(),
        (t_up, t_down) in thresholds(),
        c in 0u64..3000,
        up_s in prop::option::of(1i64..120),
        down_s in prop::option::of(1i64..180),
        fraction in 0.05f64..=1.0,
        since_ago in 0i64..400_000,
        (min, max) in bounds(),
    ) {
        let mut r = rule(t_up, t_down);
        r.min = min;
        r.max = max;
        r.sustain = Some(SustainRule {
            up_ms: up_s.map(|s| s * 1000),
            down_ms: down_s.map(|s| s * 1000),
            fraction,
        });
        let mut evs: Vec<Evaluation> = loads
            .iter()
            .map(|&(ago, l)| Evaluation { at_ms: NOW - ago, load: l })
            .collect();
        evs.sort_by_key(|e| e.at_ms);
        evs.push(Evaluation { at_ms: NOW, load: now_load });
        let h = History { since_ms: NOW - since_ago, evaluations: &evs };
        let Ok(first) = r.decide(now_load, c, Some(&h), NOW) else { return Ok(()) };
        let second = r.decide(now_load, first.value, Some(&h), NOW).unwrap();
        prop_assert_eq!(second.value, first.value, "{:?} then {:?}", first, second);
        // Never lowered below what the current load needs at T_up.
        if first.branch == Branch::Down {
            prop_assert!(first.raw >= first.up);
        }
    }

    /// A load above capacity in every evaluation of a covered window always scales up.
    #[test]
    fn a_sustained_overload_always_scales(
        (t_up, t_down) in thresholds(),
        c in 0u64..1000,
        extra in prop::collection::vec(1.0f64..1000.0, 1..20),
        fraction in 0.05f64..=1.0,
    ) {
        let mut r = rule(t_up, t_down);
        r.sustain = Some(SustainRule { up_ms: Some(60_000), down_ms: Some(120_000), fraction });
        let base = c as f64 * t_up;
        let evs: Vec<Evaluation> = extra
            .iter()
            .enumerate()
            .map(|(i, x)| Evaluation {
                at_ms: NOW - 59_000 + (59_000 * i as i64) / extra.len() as i64,
                load: base + x * t_up / 1000.0 + 1e-9 * base.max(1.0),
            })
            .collect();
        let last = evs.last().unwrap().load;
        let h = History { since_ms: NOW - 600_000, evaluations: &evs };
        let d = r.decide(last, c, Some(&h), NOW).unwrap();
        prop_assert!(d.value > c, "{:?}", d);
    }
}

// ---- the served answer ----

fn ctx(series: &[String]) -> QueryContext<'_> {
    QueryContext {
        metric: "load_replicas",
        series,
        scope: "namespace=default,app=matching".into(),
        now: NOW.into(),
        stale_after_ms: 30_000,
        notes_kept: usize::MAX,
    }
}

fn obs(target: &str, value: f64, age_ms: Millis) -> Observation {
    Observation {
        id: crate::evidence::SeriesRef::new(
            TargetId(target.into()),
            "qps".into(),
            Default::default(),
        ),
        value,
        observed_at_ms: NOW - age_ms,
        scraped_mono_ms: Some(NOW - age_ms),
        last_valid: None,
        present: true,
        target_failing: false,
        unusable: None,
        valid_until_ms: None,
    }
}

fn ev(o: Vec<Observation>) -> Evidence {
    Evidence {
        observations: o,
        ..Evidence::default()
    }
}

fn cur(v: u64) -> Result<CurrentReplicas, String> {
    Ok(CurrentReplicas {
        value: v,
        source: "spec.replicas of Deployment default/matching".into(),
    })
}

#[test]
fn the_total_is_a_sum_over_fresh_series_and_the_reason_shows_the_branch() {
    let s = vec!["qps".to_string()];
    let load = load_total(
        &ctx(&s),
        &ev(vec![obs("a", 450.5, 0), obs("b", 550.0, 1000)]),
    );
    assert_eq!(load.state, LoadState::Known(1000.5));
    assert_eq!(load.live_targets, 2);
    let a = threshold(
        &ctx(&s),
        &rule(200.0, 150.0),
        load,
        cur(2),
        InputNotes::default(),
        None,
    );
    assert_eq!(a.value(), Some(6));
    assert!(
        a.reason.starts_with("scale up: 6 > current 2"),
        "{}",
        a.reason
    );
    assert!(
        a.reason.contains("V = 1000.5 (sum of 2 fresh series"),
        "{}",
        a.reason
    );
    assert!(
        a.reason
            .contains("up = ceil(V/200) = 6, down = ceil(V/150) = 7"),
        "{}",
        a.reason
    );
    assert!(
        a.reason.contains("spec.replicas of Deployment"),
        "{}",
        a.reason
    );
    assert_eq!(a.inputs.len(), 2);
}

#[test]
fn an_unknown_share_of_the_load_blocks_a_decrease_but_not_an_increase() {
    let s = vec!["qps".to_string()];
    let r = rule(200.0, 150.0);
    let partial = || {
        load_total(
            &ctx(&s),
            &ev(vec![obs("a", 100.0, 0), obs("b", 900.0, 60_000)]),
        )
    };
    assert!(matches!(partial().state, LoadState::Partial { lower, .. } if lower == 100.0));
    // Known part needs 1, current 5: held at 5.
    let a = threshold(&ctx(&s), &r, partial(), cur(5), InputNotes::default(), None);
    assert_eq!(a.value(), Some(5));
    assert!(a.reason.contains("scale-in blocked"), "{}", a.reason);
    assert!(a.reason.contains("60s old"), "{}", a.reason);
    // The known part alone already needs more than current: scale up is allowed.
    let big = load_total(
        &ctx(&s),
        &ev(vec![obs("a", 1000.0, 0), obs("b", f64::NAN, 0)]),
    );
    let a = threshold(&ctx(&s), &r, big, cur(2), InputNotes::default(), None);
    assert_eq!(a.value(), Some(5));
    assert!(
        a.reason.starts_with("scale up: the load total"),
        "{}",
        a.reason
    );
    // ...unless sustain.up asks for a sustained overload, which unknown load cannot show.
    let mut sustained = r;
    sustained.sustain = Some(SustainRule {
        up_ms: Some(60_000),
        down_ms: None,
        fraction: 0.5,
    });
    let big = load_total(
        &ctx(&s),
        &ev(vec![obs("a", 1000.0, 0), obs("b", f64::NAN, 0)]),
    );
    let a = threshold(
        &ctx(&s),
        &sustained,
        big,
        cur(2),
        InputNotes::default(),
        None,
    );
    assert_eq!(a.value(), Some(2));
    // Without a current count, refused.
    let a = threshold(
        &ctx(&s),
        &r,
        partial(),
        Err("unknown".into()),
        InputNotes::default(),
        None,
    );
    assert_eq!(a.refusal(), Some(RefusalKind::Partial));
    // A never-scraped target is unknown load too.
    let mut e = ev(vec![obs("a", 100.0, 0)]);
    e.unknown_targets.push(UnknownTarget {
        target: TargetId("c".into()),
        last_error: Some("connection refused".into()),
    });
    assert!(matches!(
        load_total(&ctx(&s), &e).state,
        LoadState::Partial { .. }
    ));
}

#[test]
fn no_fresh_load_is_refused_with_the_right_kind() {
    let s = vec!["qps".to_string()];
    let r = rule(200.0, 150.0);
    for (e, kind) in [
        (ev(vec![]), RefusalKind::NoMatch),
        (ev(vec![obs("a", 5.0, 90_000)]), RefusalKind::Stale),
        (ev(vec![obs("a", -5.0, 0)]), RefusalKind::Invalid),
    ] {
        let a = threshold(
            &ctx(&s),
            &r,
            load_total(&ctx(&s), &e),
            cur(3),
            InputNotes::default(),
            None,
        );
        assert_eq!(a.refusal(), Some(kind), "{}", a.reason);
    }
    // A total that implies a million replicas is a unit error, not a value.
    let a = threshold(
        &ctx(&s),
        &rule(0.001, 0.001),
        load_total(&ctx(&s), &ev(vec![obs("a", 1e9, 0)])),
        cur(3),
        InputNotes::default(),
        None,
    );
    assert_eq!(a.refusal(), Some(RefusalKind::Invalid));
}

#[test]
fn live_targets_stand_in_for_the_current_count() {
    let s = vec!["qps".to_string()];
    let load = load_total(
        &ctx(&s),
        &ev(vec![
            obs("a", 1.0, 0),
            obs("b", 1.0, 0),
            obs("c", 1.0, 90_000),
        ]),
    );
    assert_eq!(current_from_live_targets(&load).unwrap().value, 2);
    let none = load_total(&ctx(&s), &ev(vec![]));
    assert!(current_from_live_targets(&none).is_err());
}
