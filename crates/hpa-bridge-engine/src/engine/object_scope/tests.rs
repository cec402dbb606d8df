//! The Object scope against its plain reading: every series of the object, once, in order.

use super::*;
use crate::engine::MetricQuery;
use hpa_bridge_rules::evidence::{Observation, TargetId, UnknownTarget};

fn lobby() -> ObjectRef {
    ObjectRef {
        kind: ObjectKind::StatefulSet,
        namespace: "games".into(),
        name: "lobby".into(),
    }
}

fn ob(target: &str, labels: &[(&str, &str)]) -> Observation {
    Observation {
        id: hpa_bridge_rules::evidence::SeriesRef::new(
            TargetId(target.into()),
            "hpa_expect_replicas".into(),
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
                .into(),
        ),
        value: 3.0,
        observed_at_ms: 0,
        scraped_mono_ms: Some(0),
        last_valid: Some((3, 0)),
        present: true,
        target_failing: false,
        unusable: None,
        valid_until_ms: None,
    }
}

fn unknown(target: &str) -> UnknownTarget {
    UnknownTarget {
        target: TargetId(target.into()),
        last_error: None,
    }
}

fn pod_set() -> BTreeMap<String, PodFacts> {
    let of = |name: &str, kind: &str| PodFacts {
        running: true,
        workload: Some(WorkloadRef {
            kind: kind.into(),
            namespace: "games".into(),
            name: name.into(),
        }),
        ..PodFacts::default()
    };
    [
        ("lobby-0".to_string(), of("lobby", "StatefulSet")),
        ("lobby-1".to_string(), of("lobby", "StatefulSet")),
        ("chat-0".to_string(), of("chat", "StatefulSet")),
        ("lobby-7d9f-x".to_string(), of("lobby", "Deployment")),
    ]
    .into_iter()
    .collect()
}

#[test]
fn labels_name_the_workload_exactly() {
    let wl = WorkloadLabels::default();
    let sts = [
        ("hpa_target_kind", "StatefulSet"),
        ("hpa_target_name", "lobby"),
    ];
    assert!(named_by_labels(
        &sts.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        &lobby(),
        &wl
    ));
    let other_group: BTreeMap<String, String> = sts
        .iter()
        .chain(&[("hpa_target_api_version", "example.com/v1")])
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert!(!named_by_labels(&other_group, &lobby(), &wl));
    let deployment: BTreeMap<String, String> = [
        ("hpa_target_kind", "Deployment"),
        ("hpa_target_name", "lobby"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert!(!named_by_labels(&deployment, &lobby(), &wl));
}

#[test]
fn without_discovery_only_the_labels_count() {
    let wl = WorkloadLabels::default();
    let by_labels = Evidence {
        observations: vec![
            ob(
                "games/lobby-0",
                &[
                    ("hpa_target_kind", "StatefulSet"),
                    ("hpa_target_name", "lobby"),
                    ("hpa_target_api_version", "apps/v1"),
                ],
            ),
            ob(
                "games/lobby-1",
                &[
                    ("hpa_target_kind", "StatefulSet"),
                    ("hpa_target_name", "lobby"),
                    ("hpa_target_api_version", "other/v1"),
                ],
            ),
        ],
        unknown_targets: vec![unknown("http://static/metrics")],
        unknown_bystanders: Vec::new(),
        workloads: Arc::from([]),
        silent_pods: Vec::new(),
        silent_targets: Vec::new(),
        clean_tail: None,
        producer_reasons: vec![said("games/lobby-0"), said("games/lobby-1")],
    };
    let ev = combine(&lobby(), &wl, by_labels, None, None);
    assert_eq!(ev.observations.len(), 1);
    assert_eq!(&*ev.observations[0].id.target.0, "games/lobby-0");
    assert_eq!(ev.unknown_targets.len(), 1, "unknown input stays unknown");
    assert_eq!(*ev.workloads, [lobby().workload()]);
    // A reason stands with its target's series.
    assert_eq!(ev.producer_reasons, [said("games/lobby-0")]);
}

#[test]
fn with_discovery_the_workloads_own_pods_count_and_no_other_pods_do() {
    let wl = WorkloadLabels::default();
    let pods = pod_set();
    let broad = Evidence {
        observations: vec![
            ob("games/lobby-0", &[("pod", "lobby-0")]),
            ob("games/chat-0", &[("pod", "chat-0")]),
            // A Deployment of the same name is another workload.
            ob("games/lobby-7d9f-x", &[("pod", "lobby-7d9f-x")]),
        ],
        unknown_targets: vec![unknown("games/lobby-1"), unknown("games/chat-1")],
        unknown_bystanders: Vec::new(),
        workloads: Arc::from([]),
        silent_pods: Vec::new(),
        silent_targets: Vec::new(),
        clean_tail: None,
        producer_reasons: vec![said("games/chat-0"), said("games/lobby-0")],
    };
    let ev = combine(&lobby(), &wl, Evidence::default(), Some(broad), Some(&pods));
    let targets: Vec<&str> = ev.observations.iter().map(|o| &*o.id.target.0).collect();
    assert_eq!(targets, ["games/lobby-0"]);
    let unknown: Vec<&str> = ev.unknown_targets.iter().map(|u| &*u.target.0).collect();
    assert_eq!(unknown, ["games/lobby-1"]);
    assert_eq!(ev.producer_reasons, [said("games/lobby-0")]);
}

fn said(target: &str) -> hpa_bridge_rules::evidence::ProducerReason {
    hpa_bridge_rules::evidence::ProducerReason {
        target: TargetId(target.into()),
        reason: format!("{target} is busy").into(),
    }
}

#[test]
fn a_series_found_both_ways_counts_once() {
    let wl = WorkloadLabels::default();
    let pods = pod_set();
    let both = ob(
        "games/lobby-0",
        &[
            ("pod", "lobby-0"),
            ("hpa_target_kind", "StatefulSet"),
            ("hpa_target_name", "lobby"),
        ],
    );
    let labelled = Evidence {
        observations: vec![both.clone()],
        ..Default::default()
    };
    let broad = Evidence {
        observations: vec![both],
        ..Default::default()
    };
    let ev = combine(&lobby(), &wl, labelled, Some(broad), Some(&pods));
    assert_eq!(ev.observations.len(), 1);
}

#[test]
fn the_selector_gains_the_workload_labels() {
    let wl = WorkloadLabels::default();
    let s = LabelSelector::parse("zone=a").unwrap();
    assert_eq!(
        with_workload_labels(&s, &lobby(), &wl).unwrap().to_string(),
        "hpa_target_kind=StatefulSet,hpa_target_name=lobby,zone=a"
    );
    let long = ObjectRef {
        name: "a".repeat(100),
        ..lobby()
    };
    assert!(with_workload_labels(&s, &long, &wl).is_none());
}

#[test]
fn resources() {
    assert_eq!(
        ObjectKind::from_resource("statefulsets.apps"),
        Some(ObjectKind::StatefulSet)
    );
    assert_eq!(
        ObjectKind::from_resource("deployments.apps"),
        Some(ObjectKind::Deployment)
    );
    assert_eq!(ObjectKind::from_resource("pods"), None);
    for kind in ObjectKind::ALL {
        assert_eq!(WorkloadKind::from(kind).as_str(), kind.kind());
        assert_eq!(WorkloadKind::from(kind.kind()), WorkloadKind::from(kind));
    }
    assert_eq!(pod_of_target("games/lobby-0", "games"), Some("lobby-0"));
    assert_eq!(pod_of_target("gamesx/lobby-0", "games"), None);
}

/// The scrape store, every read listed, as a source without an index of the pod label.
struct ListedOnly(std::sync::Arc<hpa_bridge_store::store::Store>);

impl EvidenceSource for ListedOnly {
    fn read<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        _read: Read<'a>,
        now: Millis,
    ) -> futures::future::BoxFuture<'a, Result<Evidence, SourceError>> {
        EvidenceSource::read(&*self.0, scope, Read::Listed, now)
    }
}

/// The pods' read narrowed to the object's own pods (`Read::Labelled`) merges into the
/// same evidence as the namespace's listed read, with the namespace's pod set or only the
/// workload's, and alone (an empty named read, so everything comes from the pods' read):
/// series found both ways, a static target's series naming an own pod, reasons of own
/// pods, of a target whose only series are named by the workload labels and of another
/// workload's pod, a never-scraped own pod and one of another workload, and an own pod's
/// name on a series outside the scope.
#[tokio::test]
async fn the_narrowed_pods_read_merges_as_the_listed_one() {
    use hpa_bridge_exposition::ExposedSample;
    use hpa_bridge_store::store::{Page, ScrapeTarget, StoreWriter};

    let wl = WorkloadLabels::default();
    let store = StoreWriter::default();
    let sts = |name: &str| WorkloadRef {
        kind: "StatefulSet".into(),
        namespace: "games".into(),
        name: name.into(),
    };
    let pod = |name: &str, of: &str| ScrapeTarget {
        format: Default::default(),
        id: TargetId(format!("games/{name}").into()),
        url: format!("http://{name}/metrics"),
        labels: [("namespace", "games"), ("pod", name)]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        workload: Some(sts(of)),
    };
    let static_target = |url: &str, namespace: &str| ScrapeTarget {
        format: Default::default(),
        id: TargetId(url.into()),
        url: url.into(),
        labels: [("namespace".to_string(), namespace.to_string())].into(),
        workload: None,
    };
    let ctl = static_target("http://ctl/metrics", "games");
    let (named_only, elsewhere) = (
        static_target("http://named/metrics", "games"),
        static_target("http://elsewhere/metrics", "other"),
    );
    let targets = vec![
        pod("lobby-0", "lobby"),
        pod("lobby-1", "lobby"),
        pod("lobby-2", "lobby"),
        pod("chat-0", "chat"),
        pod("chat-1", "chat"),
        ctl.clone(),
        named_only.clone(),
        elsewhere.clone(),
    ];
    store.set_targets(targets.clone());
    let sample = ExposedSample::scraped;
    let named = [
        ("hpa_target_kind", "StatefulSet"),
        ("hpa_target_name", "lobby"),
    ];
    let page = |samples: Vec<ExposedSample>, reason: Option<&str>| Page {
        samples,
        valid_until_ms: None,
        reason: reason.map(Into::into),
    };
    store.record_success(
        &targets[0],
        1_000,
        1,
        page(
            vec![sample("hpa_stateful_index", &named, 1.0)],
            Some("warming"),
        ),
    );
    store.record_success(
        &targets[1],
        1_000,
        1,
        page(vec![sample("hpa_stateful_index", &[], 2.0)], Some("busy")),
    );
    store.record_success(
        &targets[3],
        1_000,
        1,
        page(vec![sample("hpa_stateful_index", &[], 1.0)], Some("chat")),
    );
    store.record_success(
        &ctl,
        1_000,
        1,
        page(
            vec![
                sample("hpa_expect_replicas", &named, 3.0),
                sample("hpa_stateful_index", &[("pod", "lobby-1"), ("x", "y")], 2.0),
            ],
            Some("leader"),
        ),
    );
    store.record_success(
        &named_only,
        1_000,
        1,
        page(
            vec![sample("hpa_expect_replicas", &named, 4.0)],
            Some("named-only"),
        ),
    );
    store.record_success(
        &elsewhere,
        1_000,
        1,
        page(
            vec![sample("hpa_stateful_index", &[("pod", "lobby-1")], 5.0)],
            Some("elsewhere"),
        ),
    );
    let facts = |of: &str| PodFacts {
        running: true,
        workload: Some(sts(of)),
        ..PodFacts::default()
    };
    let namespace_pods: BTreeMap<String, PodFacts> = [
        ("lobby-0", "lobby"),
        ("lobby-1", "lobby"),
        ("lobby-2", "lobby"),
        ("chat-0", "chat"),
        ("chat-1", "chat"),
    ]
    .iter()
    .map(|(p, of)| (p.to_string(), facts(of)))
    .collect();
    let own_pods: BTreeMap<String, PodFacts> = namespace_pods
        .iter()
        .filter(|(_, f)| f.workload == Some(sts("lobby")))
        .map(|(p, f)| (p.clone(), f.clone()))
        .collect();
    let series = vec![
        "hpa_expect_replicas".to_string(),
        "hpa_stateful_index".to_string(),
    ];
    let everything = LabelSelector::everything();
    let scope = Scope {
        series: &series,
        namespace_label: "namespace",
        namespace: "games",
        selector: &everything,
    };
    let json = |ev: Evidence| serde_json::to_value(ev).unwrap();
    let listed = ListedOnly(store.reader());
    let plain = json(
        evidence(&listed, Some(&namespace_pods), &wl, &lobby(), &scope, 2_000)
            .await
            .unwrap(),
    );
    for pods in [&namespace_pods, &own_pods] {
        let narrowed = evidence(&*store, Some(pods), &wl, &lobby(), &scope, 2_000)
            .await
            .unwrap();
        assert_eq!(json(narrowed), plain);
    }
    // The case is not empty: the own pods' series, the static target's series naming one
    // with its reason, the named-only target's reason, the unknown own pod.
    let text = plain.to_string();
    for wanted in [
        "games/lobby-1",
        "\"x\":\"y\"",
        "leader",
        "busy",
        "named-only",
        "games/lobby-2",
    ] {
        assert!(text.contains(wanted), "{wanted} in {text}");
    }
    // chat's pods are another workload's; the named read leaves out its never-scraped
    // chat-1 because that read's workloads are lobby's (lobby-0's series are named).
    assert!(!text.contains("chat"), "{text}");
    assert!(!text.contains("elsewhere"), "{text}");

    // The pods' read alone, merged into an empty named read: the narrowed read must bring
    // every own series, reason and unknown pod the listed one brings, and nothing else.
    let own: Vec<&str> = own_pods.keys().map(String::as_str).collect();
    let labelled = Read::Labelled {
        label: POD_LABEL,
        values: &own,
    };
    let alone = |raw: Evidence| {
        json(combine(
            &lobby(),
            &wl,
            Evidence::default(),
            Some(raw),
            Some(&namespace_pods),
        ))
    };
    let listed_read = EvidenceSource::read(&*store, &scope, Read::Listed, 2_000);
    let from_listed = alone(listed_read.await.unwrap());
    let labelled_read = EvidenceSource::read(&*store, &scope, labelled, 2_000);
    assert_eq!(alone(labelled_read.await.unwrap()), from_listed);
    let text = from_listed.to_string();
    for wanted in ["busy", "leader", "games/lobby-2", "\"x\":\"y\""] {
        assert!(text.contains(wanted), "{wanted} in {text}");
    }
}

/// The selector-typo scenario: a StatefulSet and a Deployment both named `lobby` in one
/// namespace. The External selector `hpa_target_name=lobby` (the kind label dropped) mixes
/// them; the Object query for each workload does not.
#[tokio::test]
async fn an_object_query_does_not_mix_two_workloads_that_share_a_name() {
    use hpa_bridge_store::store::ScrapeTarget;

    let store = hpa_bridge_store::store::StoreWriter::default();
    let adapter = crate::engine::fixtures::adapter_on(store.reader());
    let target = |id: &str| ScrapeTarget {
        format: Default::default(),
        id: TargetId(id.into()),
        url: format!("http://{id}/metrics"),
        labels: [("namespace".to_string(), "games".to_string())].into(),
        workload: None,
    };
    let page = |kind: &str, expect: f64, index: f64| {
        crate::engine::fixtures::workload_page(kind, "lobby", expect, index)
    };
    let (sts, deploy) = (target("sts"), target("deploy"));
    store.set_targets(vec![sts.clone(), deploy.clone()]);
    store.record_success(&sts, 1_000_000, 1, page("StatefulSet", 3.0, 2.0));
    store.record_success(&deploy, 1_000_000, 1, page("Deployment", 9.0, 1.0));

    let loose = LabelSelector::parse("hpa_target_name=lobby").unwrap();
    let external = adapter
        .answer_computed(&MetricQuery::external(
            "hpa_target_replicas",
            "games",
            loose.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(
        external.value(),
        Some(9),
        "the loose selector mixes both workloads"
    );

    let everything = LabelSelector::everything();
    let object = |kind| ObjectRef {
        kind,
        namespace: "games".into(),
        name: "lobby".into(),
    };
    let sts_answer = adapter
        .answer_computed(&MetricQuery::object(
            "hpa_target_replicas",
            object(ObjectKind::StatefulSet),
            everything.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(sts_answer.value(), Some(3));
    let deploy_answer = adapter
        .answer_computed(&MetricQuery::object(
            "hpa_target_replicas",
            object(ObjectKind::Deployment),
            everything.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(deploy_answer.value(), Some(9));
    let missing = ObjectRef {
        name: "chat".into(),
        ..object(ObjectKind::StatefulSet)
    };
    let none = adapter
        .answer_computed(&MetricQuery::object(
            "hpa_target_replicas",
            missing.clone(),
            everything.clone(),
        ))
        .await
        .unwrap();
    assert!(
        none.value().is_none(),
        "no series for the workload is a refusal"
    );
    // metricLabelSelector narrows further.
    let narrowed = adapter
        .answer_computed(&MetricQuery::object(
            "hpa_expect_replicas",
            object(ObjectKind::StatefulSet),
            LabelSelector::parse("hpa_target_api_version").unwrap(),
        ))
        .await
        .unwrap();
    assert_eq!(narrowed.value(), Some(3));
}

/// `merge` against its plain reading: the named series kept that the pods' read does not
/// list, and each of the pods' series once (its first listing), sorted by value with a stable
/// sort. Identities are drawn from a small universe so reads share and repeat series, half of
/// them as handles to the same strings and half as copies, as two sources would give them.
mod merge_is_plain {
    use super::*;
    use hpa_bridge_rules::evidence::{SeriesId, SeriesLabels};
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Every identity once, in series order (as a shared list holds them).
    fn universe() -> Vec<SeriesId> {
        let mut ids = Vec::new();
        for t in ["games/a", "games/b", "static"] {
            for s in ["hpa_expect_replicas", "hpa_stateful_index"] {
                for pod in ["a", "b"] {
                    for named in [false, true] {
                        let mut labels = BTreeMap::from([("pod".to_string(), pod.to_string())]);
                        if named {
                            labels.insert("hpa_target_name".into(), "lobby".into());
                        }
                        ids.push(SeriesId {
                            target: TargetId(t.into()),
                            series: s.into(),
                            labels: SeriesLabels::new(labels),
                        });
                    }
                }
            }
        }
        ids.sort_by(|a, b| {
            (&a.target, &a.series, &a.labels).cmp(&(&b.target, &b.series, &b.labels))
        });
        ids
    }

    fn observation(ids: &[SeriesId], (pick, copy): (usize, bool), value: f64) -> Observation {
        let id = &ids[pick % ids.len()];
        let id = if copy {
            hpa_bridge_rules::evidence::SeriesRef::new(
                TargetId(id.target.0.to_string().into()),
                id.series.to_string().into(),
                SeriesLabels::new((*id.labels).clone()),
            )
        } else {
            hpa_bridge_rules::evidence::SeriesRef::new(
                id.target.clone(),
                id.series.clone(),
                id.labels.clone(),
            )
        };
        Observation {
            id,
            value,
            ..ob("unused", &[])
        }
    }

    fn plain(
        named: &[Observation],
        own: &[Observation],
        keep: impl Fn(&Observation) -> bool,
    ) -> Vec<(SeriesId, f64)> {
        let mut out: Vec<&Observation> = named
            .iter()
            .filter(|a| keep(a) && !own.iter().any(|b| *b.id == *a.id))
            .collect();
        for (i, b) in own.iter().enumerate() {
            if !own[..i].iter().any(|first| *first.id == *b.id) {
                out.push(b);
            }
        }
        out.sort_by(|a, b| {
            (&a.id.target, &a.id.series, &a.id.labels).cmp(&(
                &b.id.target,
                &b.id.series,
                &b.id.labels,
            ))
        });
        out.into_iter()
            .map(|o| ((*o.id).clone(), o.value))
            .collect()
    }

    proptest! {
        #[test]
        fn merge_keeps_each_series_as_the_plain_reading_does(
            named in prop::collection::vec((0usize..64, any::<bool>()), 0..24),
            own in prop::collection::vec((0usize..64, any::<bool>()), 0..24),
            sorted in any::<bool>(),
        ) {
            let ids = universe();
            // The store lists a shared list in order (merge then neither sorts nor compares
            // identities within a read); other sources list series each on its own, in any
            // order and possibly repeated.
            // Two reads are two resolutions: two lists over the same strings.
            let lists: [std::sync::Arc<[SeriesId]>; 2] = [ids.clone().into(), ids.clone().into()];
            let build = |picks: &[(usize, bool)], base: f64, shared: &std::sync::Arc<[SeriesId]>| -> Vec<Observation> {
                if sorted {
                    let picks: BTreeSet<usize> = picks.iter().map(|(p, _)| p % ids.len()).collect();
                    return picks
                        .into_iter()
                        .enumerate()
                        .map(|(i, p)| Observation {
                            id: hpa_bridge_rules::evidence::SeriesRef::at(shared, p).unwrap(),
                            value: base + i as f64,
                            ..ob("unused", &[])
                        })
                        .collect();
                }
                picks
                    .iter()
                    .enumerate()
                    .map(|(i, p)| observation(&ids, *p, base + i as f64))
                    .collect()
            };
            let (named, own) = (build(&named, 0.0, &lists[0]), build(&own, 1000.0, &lists[1]));
            let keep = |o: &Observation| o.id.labels.contains_key("hpa_target_name");
            let want = plain(&named, &own, keep);
            let got: Vec<(SeriesId, f64)> = merge(named, own, keep)
                .into_iter()
                .map(|o| ((*o.id).clone(), o.value))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
