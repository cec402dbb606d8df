//! `Store::read_together` reads each scope as the single reads do: its series part and its
//! scope-wide part add up to `evidence`, and a kept workload's silent pods are that workload's
//! entry of the whole scope's.

use crate::store::*;
use hpa_bridge_exposition::ExposedSample;
use hpa_bridge_rules::clock::Now;
use hpa_bridge_rules::evidence::Evidence;
use hpa_bridge_rules::selector::LabelSelector;

fn pod(name: &str, workload: &str) -> ScrapeTarget {
    ScrapeTarget {
        format: Default::default(),
        id: TargetId(format!("http://{name}/m").into()),
        url: format!("http://{name}/m"),
        labels: [("namespace", "default"), ("pod", name)]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        workload: Some(WorkloadRef {
            kind: "StatefulSet".into(),
            namespace: "default".into(),
            name: workload.into(),
        }),
    }
}

/// Three workloads of three pods: the last pod of each exports nothing in scope (a silent
/// pod), `chat-1` exports under another app, `lobby-1` is failing, and `games-2` was never
/// scraped.
fn store() -> Store {
    let store = Store::new();
    let pods: Vec<ScrapeTarget> = ["lobby", "chat", "games"]
        .iter()
        .flat_map(|w| (0..3).map(move |i| pod(&format!("{w}-{i}"), w)))
        .collect();
    store.set_targets(pods.clone());
    for (i, p) in pods.iter().enumerate() {
        let name = &p.labels["pod"];
        let app = if name == "chat-1" { "other" } else { "games" };
        let page = match name.as_str() {
            "games-2" => continue,
            n if n.ends_with("-2") => vec![ExposedSample::scraped("unrelated", &[], 1.0)],
            _ => vec![
                ExposedSample::scraped("idx", &[("app", app)], i as f64),
                ExposedSample::scraped("idx", &[("app", app), ("slot", "b")], 1.0),
            ],
        };
        store.record_success(p, 1000, 1, page);
    }
    // lobby-1 fails after its page: its series read as from a failing target.
    store.record_failure(&pods[1], 1000, 1, "connection refused".into());
    store
}

#[test]
fn reads_together_add_up_to_the_single_reads() {
    let store = store();
    let series = vec!["idx".to_string()];
    let workloads = ["lobby", "chat", "games", "absent"].map(|name| WorkloadRef {
        kind: "StatefulSet".into(),
        namespace: "default".into(),
        name: name.into(),
    });
    let summarize = Summarize {
        after: 1,
        now: Now {
            wall: 1000,
            mono: 1000,
        },
        stale_after_ms: 60_000,
    };
    for text in [
        "",
        "app=games",
        "app!=games",
        "pod in (lobby-0,chat-1)",
        "app=none",
    ] {
        let sel = LabelSelector::parse(text).unwrap();
        let scope = Scope {
            series: &series,
            namespace_label: "namespace",
            namespace: "default",
            selector: &sel,
        };
        for s in [None, Some(summarize)] {
            let both = s.map_or(Read::Listed, Read::Summarized);
            let single = store.read(&scope, both);
            let [part, whole, all]: [Evidence; 3] = store
                .read_together(&[
                    (&scope, Read::Series(s)),
                    (&scope, Read::Whole { silent_of: None }),
                    (&scope, both),
                ])
                .try_into()
                .unwrap();
            let added = Evidence {
                observations: part.observations,
                clean_tail: part.clean_tail,
                producer_reasons: part.producer_reasons,
                ..whole.clone()
            };
            assert_eq!(format!("{all:?}"), format!("{single:?}"), "{text}");
            assert_eq!(format!("{added:?}"), format!("{single:?}"), "{text}");
            assert!(part.workloads.is_empty() && part.silent_pods.is_empty());
            assert!(part.unknown_targets.is_empty());
            for w in &workloads {
                let [kept]: [Evidence; 1] = store
                    .read_together(&[(&scope, Read::Whole { silent_of: Some(w) })])
                    .try_into()
                    .unwrap();
                let expected: Vec<_> = (whole.silent_pods.iter())
                    .filter(|p| &p.workload == w)
                    .collect();
                assert_eq!(
                    format!("{:?}", kept.silent_pods.iter().collect::<Vec<_>>()),
                    format!("{expected:?}"),
                    "{text} {w:?}"
                );
                assert_eq!(
                    format!("{:?}", kept.unknown_targets),
                    format!("{:?}", whole.unknown_targets)
                );
            }
        }
    }
    // The fixture is not vacuous: the whole namespace has silent pods and a never-scraped pod.
    let sel = LabelSelector::parse("").unwrap();
    let scope = Scope {
        series: &series,
        namespace_label: "namespace",
        namespace: "default",
        selector: &sel,
    };
    let ev = store.read(&scope, Read::Listed);
    // lobby-2 and chat-2 are silent; games-2 was never scraped; lobby-1 is failing.
    assert_eq!(ev.silent_pods.len(), 2);
    assert_eq!(ev.unknown_targets.len(), 1);
    assert_eq!(
        ev.observations.iter().filter(|o| o.target_failing).count(),
        2
    );
}
