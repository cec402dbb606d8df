//! A read narrowed to some values of a label (`Read::Labelled`, label_index.rs) is
//! the listed read with the other series left out: the same observations of those values in
//! the same order, the reasons of the targets it lists, and the whole scope's never-scraped
//! targets, workloads and silent pods. Random pages whose series may name pods of their own
//! (a static target's), producer reasons, failing targets, pods moving namespace or going
//! away, and reads of the same scope before and after each change (so an index kept with a
//! resolution must go with it).

use std::collections::BTreeSet;

use proptest::prelude::*;

use crate::store::{churn, Page, ScrapeTarget, Store, WorkloadRef};
use hpa_bridge_exposition::ExposedSample;
use hpa_bridge_rules::evidence::{Evidence, Read, Scope, TargetId};
use hpa_bridge_rules::selector::LabelSelector;

/// Pods 0-2 of workload lobby, pod 3 of none; target 4 is static (no pod label of its own),
/// its series may name any pod.
fn target(i: usize, ns: &str) -> ScrapeTarget {
    let mut labels: Vec<(&str, String)> = vec![("namespace", ns.to_string())];
    if i < 4 {
        labels.push(("pod", format!("p{i}")));
    }
    ScrapeTarget {
        format: Default::default(),
        id: TargetId(format!("{ns}/p{i}").into()),
        url: format!("http://t{i}/m"),
        labels: labels
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        workload: (i < 3).then(|| WorkloadRef {
            kind: "StatefulSet".into(),
            namespace: ns.into(),
            name: "lobby".into(),
        }),
    }
}

/// (name, app, pod the series names: 0-3, or none), value.
fn page(samples: &[(u8, u8, u8, u8)], reason: bool) -> Page {
    Page {
        samples: samples
            .iter()
            .map(|(name, app, pod, value)| {
                let mut labels = vec![("app".to_string(), format!("a{app}"))];
                if *pod < 4 {
                    labels.push(("pod".to_string(), format!("p{pod}")));
                }
                ExposedSample {
                    name: format!("s{name}"),
                    labels,
                    value: f64::from(*value),
                    timestamp_ms: None,
                    unusable: None,
                }
            })
            .collect(),
        valid_until_ms: None,
        reason: reason.then(|| "busy".into()),
    }
}

/// The plain rule: the listed read, its series of other values and the reasons of targets
/// left with none dropped.
fn narrowed(mut ev: Evidence, label: &str, values: &BTreeSet<String>) -> Evidence {
    ev.observations
        .retain(|o| o.id.labels.get(label).is_some_and(|v| values.contains(v)));
    let listed: BTreeSet<&TargetId> = ev.observations.iter().map(|o| &o.id.target).collect();
    ev.producer_reasons.retain(|r| listed.contains(&r.target));
    ev
}

fn json(ev: &Evidence) -> serde_json::Value {
    serde_json::to_value(ev).expect("evidence serializes")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn a_labelled_read_is_the_listed_read_narrowed(
        ops in proptest::collection::vec(
            (
                0usize..5,
                0u8..5,
                proptest::collection::vec((0u8..2, 0u8..2, 0u8..5, 0u8..4), 0..5),
                any::<bool>(),
            ),
            1..30,
        ),
        // Which pods each step's reads ask for (a bit each), and of which label.
        asks in proptest::collection::vec((0u8..32, 0u8..4), 30),
    ) {
        let store = Store::new();
        let mut targets: Vec<ScrapeTarget> = (0..5).map(|i| target(i, "n0")).collect();
        // No target is scraped until an op does: each starts unknown.
        store.set_targets(targets.clone());
        // The second scope names a series twice, as a configuration may.
        let scopes: [Vec<String>; 2] = [
            vec!["s0".into(), "s1".into()],
            vec!["s0".into(), "s1".into(), "s0".into()],
        ];
        let selectors: Vec<LabelSelector> = ["", "app=a1"]
            .iter()
            .map(|s| LabelSelector::parse(s).unwrap())
            .collect();
        for (step, ((t, kind, samples, reason), (bits, label))) in ops.into_iter().zip(asks).enumerate() {
            match kind {
                0 | 1 => {
                    store.record_success(&targets[t], 1_000 * (step as i64 + 1), 1, page(&samples, reason));
                }
                2 => {
                    store.record_failure(&targets[t], 1_000 * (step as i64 + 1), 1, "down".into());
                }
                3 => churn::move_namespace(&store, &mut targets, t),
                _ => churn::drop_target(&store, &targets, t),
            }
            let values: BTreeSet<String> = (0..5)
                .filter(|p| bits & (1 << p) != 0)
                .map(|p| if label == 3 { format!("a{}", p % 2) } else { format!("p{p}") })
                .collect();
            let label = if label == 3 { "app" } else { "pod" };
            for ns in ["n0", "n1"] {
                for sel in &selectors {
                    for series in &scopes {
                        let scope = Scope { series, namespace_label: "namespace", namespace: ns, selector: sel };
                        let distinct: Vec<&str> = values.iter().map(String::as_str).collect();
                        let labelled = store.read(&scope, Read::Labelled { label, values: &distinct });
                        let listed = store.read(&scope, Read::Listed);
                        // Every read lists its series in series order, each once: an Object
                        // query's merge relies on it (engine/object_scope.rs).
                        for read in [&labelled, &listed] {
                            let ids: Vec<_> = read.observations.iter().map(|o| (&o.id.target, &o.id.series, &o.id.labels)).collect();
                            prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "{:?}", ids);
                        }
                        let plain = narrowed(listed, label, &values);
                        prop_assert_eq!(json(&labelled), json(&plain), "step {} {} {:?} {} {:?}", step, ns, sel, label, values);
                    }
                }
            }
        }
    }
}
