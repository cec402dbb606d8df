//! The rules give the same answer, to the last note and reason, from evidence the store
//! summarized (`Evidence::clean_tail`, family_digest.rs) as from every input listed:
//! random pages (invalid, negative, fractional, infinite, implausibly large and duplicated
//! values, exporter timestamps, vanished series, targets with more families than a digest
//! holds), failing targets, pods of workloads moving namespace or going away, at query times
//! before the last scrape and on both sides of `staleAfter`.

use proptest::prelude::*;

use crate::store::{churn, ScrapeTarget, Store, WorkloadRef};
use hpa_bridge_exposition::ExposedSample;
use hpa_bridge_rules::clock::Millis;
use hpa_bridge_rules::evidence::{Evidence, Read, Scope, Summarize, TargetId};
use hpa_bridge_rules::policy::{
    recommendation, stateful_floor, QueryContext, ScopeText, NOTES_KEPT_WHEN_SERVING,
};
use hpa_bridge_rules::selector::LabelSelector;

const STALE_AFTER: Millis = 5_000;

fn target(i: usize, ns: &str) -> ScrapeTarget {
    ScrapeTarget {
        format: Default::default(),
        id: TargetId(format!("http://t{i}/m").into()),
        url: format!("http://t{i}/m"),
        labels: [("namespace", ns), ("pod", &format!("p{i}"))]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        // Pods 0-2 belong to one workload, pod 3 to none (discovery has not placed it).
        workload: (i < 3).then(|| WorkloadRef {
            kind: "StatefulSet".into(),
            namespace: ns.into(),
            name: "lobby".into(),
        }),
    }
}

const VALUES: [f64; 10] = [
    0.0,
    1.0,
    2.0,
    3.0,
    5.0,
    f64::NAN,
    -1.0,
    1.5,
    f64::INFINITY,
    2e6,
];

fn page(samples: &[(u8, u8, u8, u8)], at: Millis) -> Vec<ExposedSample> {
    samples
        .iter()
        .map(|(name, app, value, age)| ExposedSample {
            name: format!("s{name}"),
            labels: vec![("app".into(), format!("a{app}"))],
            value: VALUES[*value as usize % VALUES.len()],
            // Mostly scrape-time samples, sometimes an exporter timestamp in the past.
            timestamp_ms: (*age > 1).then(|| at - Millis::from(*age) * 1_500),
            unusable: None,
        })
        .collect()
}

fn answers(q: &QueryContext<'_>, ev: &Evidence) -> [String; 3] {
    let json = |a| serde_json::to_string(&a).unwrap();
    [
        json(recommendation(q, ev, None)),
        json(stateful_floor(q, ev, 0)),
        json(stateful_floor(q, ev, 2)),
    ]
}

/// Every scope, at three query times and three note limits: the answers from summarized and
/// from listed evidence are the same. Returns how many series were summarized.
fn check_all(store: &Store, now: Millis) -> Result<usize, TestCaseError> {
    let mut summarized = 0;
    let series_sets = [
        vec!["s0".to_string()],
        vec!["s0".to_string(), "s1".to_string()],
    ];
    let selectors: Vec<LabelSelector> = ["", "app=a1", "app!=a1", "app in (a0,a2)"]
        .iter()
        .map(|s| LabelSelector::parse(s).unwrap())
        .collect();
    for series in &series_sets {
        for ns in ["n0", "n1"] {
            for selector in &selectors {
                let scope = Scope {
                    series,
                    namespace_label: "namespace",
                    namespace: ns,
                    selector,
                };
                for at in [
                    now - 1_000,
                    now,
                    now + STALE_AFTER / 2,
                    now + STALE_AFTER + 1,
                ] {
                    for notes_kept in [0, 1, 3, NOTES_KEPT_WHEN_SERVING] {
                        let q = QueryContext {
                            metric: "m",
                            series,
                            scope: ScopeText::Parts("namespace", ns, selector.as_str()),
                            now: at.into(),
                            stale_after_ms: STALE_AFTER,
                            notes_kept,
                        };
                        let listed = store.read(&scope, Read::Listed);
                        prop_assert!(listed.clean_tail.is_none());
                        let s = Summarize {
                            after: notes_kept,
                            now: at.into(),
                            stale_after_ms: STALE_AFTER,
                        };
                        let short = store.read(&scope, Read::Summarized(s));
                        summarized += short.clean_tail.map_or(0, |t| t.series);
                        prop_assert_eq!(
                            short.observations.len() + short.clean_tail.map_or(0, |t| t.series),
                            listed.observations.len()
                        );
                        prop_assert_eq!(&short.workloads, &listed.workloads);
                        prop_assert_eq!(
                            answers(&q, &short),
                            answers(&q, &listed),
                            "scope {:?} {} {} at {} notes {}",
                            series,
                            ns,
                            selector.as_str(),
                            at,
                            notes_kept
                        );
                    }
                }
            }
        }
    }
    Ok(summarized)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn summarized_evidence_gives_the_same_answers_as_listed_evidence(
        ops in proptest::collection::vec(
            (0usize..4, 0u8..8, 1u8..4, proptest::collection::vec((0u8..5, 0u8..3, 0u8..10, 0u8..4), 0..6)),
            1..24,
        ),
    ) {
        let store = Store::new();
        let mut targets: Vec<ScrapeTarget> = (0..4).map(|i| target(i, if i < 3 { "n0" } else { "n1" })).collect();
        store.set_targets(targets.clone());
        let mut at: Millis = 100_000;
        for (t, kind, gap, samples) in ops {
            at += Millis::from(gap) * 1_000;
            match kind {
                0..=4 => {
                    store.record_success(&targets[t], at, 1, page(&samples, at));
                }
                5 => store.record_failure(&targets[t], at, 1, "connection refused".into()),
                6 => churn::move_namespace(&store, &mut targets, t),
                _ => churn::drop_target(&store, &targets, t),
            }
            check_all(&store, at)?;
        }
    }
}

/// The property above could pass with a store that never summarizes: here a healthy scope
/// is summarized, past the noted inputs, and a stale, failing or unclean target is listed.
#[test]
fn clean_fresh_targets_are_summarized_and_others_listed() {
    let store = Store::new();
    let targets: Vec<ScrapeTarget> = (0..6).map(|i| target(i, "n0")).collect();
    store.set_targets(targets.clone());
    for t in &targets {
        store.record_success(t, 100_000, 1, page(&[(0, 1, 2, 0), (0, 2, 3, 0)], 100_000));
    }
    // Target 4 exports a fractional value; target 5 fails.
    store.record_success(
        &targets[4],
        100_000,
        1,
        page(&[(0, 1, 7, 0), (0, 2, 3, 0)], 100_000),
    );
    store.record_failure(&targets[5], 101_000, 1, "timeout".into());
    let series = vec!["s0".to_string()];
    let selector = LabelSelector::parse("").unwrap();
    let scope = Scope {
        series: &series,
        namespace_label: "namespace",
        namespace: "n0",
        selector: &selector,
    };
    let s = |now| Summarize {
        after: 3,
        now: Millis::into(now),
        stale_after_ms: STALE_AFTER,
    };
    let ev = store.read(&scope, Read::Summarized(s(101_000)));
    // Targets 0 and 1 are listed (4 present inputs, past the 3 noted); 2 and 3 are
    // summarized; 4 (a fractional value) and 5 (failing) are listed.
    assert_eq!(ev.observations.len(), 8, "{ev:?}");
    let tail = ev.clean_tail.expect("targets 2 and 3 summarized");
    assert_eq!(
        (tail.series, tail.max_value, tail.newest_at_ms),
        (4, 3, 100_000)
    );
    // Past staleAfter nothing reads as fresh, so nothing is summarized.
    let later = store.read(&scope, Read::Summarized(s(100_000 + STALE_AFTER + 1)));
    assert!(later.clean_tail.is_none());
    assert_eq!(later.observations.len(), 12);
    assert!(check_all(&store, 101_000).unwrap() > 0);
    // A target with more families than its digest holds is listed: target 3 now exports
    // four names, so only target 2 is summarized.
    let four = [
        (0, 1, 2, 0),
        (0, 2, 3, 0),
        (1, 1, 1, 0),
        (2, 1, 1, 0),
        (3, 1, 1, 0),
    ];
    store.record_success(&targets[3], 100_500, 1, page(&four, 100_500));
    let ev = store.read(&scope, Read::Summarized(s(101_000)));
    let tail = ev.clean_tail.expect("target 2 summarized");
    assert_eq!((tail.series, ev.observations.len()), (2, 10), "{ev:?}");
    assert!(check_all(&store, 101_000).unwrap() > 0);
}
