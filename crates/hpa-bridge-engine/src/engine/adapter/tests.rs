use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;

use super::*;
use crate::engine::evaluation::Evaluation;
use crate::engine::history::Filter;
use crate::engine::metric_query::history_scope;
use crate::engine::provider::MAX_SEEN_QUERIES;
use crate::engine::query_key::QueryKey;
use crate::engine::status::StatusQuery;
use crate::engine::ObjectRef;
use hpa_bridge_rules::clock::ManualClock;
use hpa_bridge_rules::cluster::{WorkloadKind, WorkloadRef};
use hpa_bridge_rules::evidence::TargetId;
use hpa_bridge_rules::evidence::{Evidence, Read, Scope};
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_sources::source::SourceError;
use hpa_bridge_store::store::Store;

/// The scrape store, counting every evidence read.
struct Counting {
    store: Arc<Store>,
    reads: AtomicUsize,
}

impl EvidenceSource for Counting {
    fn read<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        _read: Read<'a>,
        now: Millis,
    ) -> BoxFuture<'a, Result<Evidence, SourceError>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        // Every read listed, as a source without digests reads.
        EvidenceSource::read(&*self.store, scope, Read::Listed, now)
    }
}

struct OneStatefulSet;

impl Cluster for OneStatefulSet {
    fn current_replicas(&self, _w: &WorkloadRef) -> Option<u64> {
        Some(3)
    }
    fn ordinals_start(&self, _w: &WorkloadRef) -> u64 {
        0
    }
}

#[tokio::test]
async fn answers_served_are_kept_in_the_history_and_status_evaluations_are_not() {
    let metrics = Arc::new(SelfMetrics::new());
    let config = Config::from_yaml("history: {retention: 1m, maxScopes: 1}").unwrap();
    let adapter = Adapter::new(
        config.clone(),
        crate::engine::static_store(&config).reader(),
        None,
        Arc::new(ManualClock::new(1_000_000)),
        metrics.clone(),
    );
    let lobby = LabelSelector::parse("hpa_target_name=lobby").unwrap();
    let shop = LabelSelector::parse("hpa_target_name=shop").unwrap();
    adapter
        .answer_computed(&MetricQuery::external(
            "hpa_target_replicas",
            "games",
            lobby.clone(),
        ))
        .await
        .unwrap();
    adapter
        .explainer()
        .status(&StatusQuery::default(), false)
        .await;
    let h = adapter.explainer().history(&Filter::default());
    assert_eq!(h.capacity, 4);
    assert_eq!(h.scopes.len(), 1);
    assert_eq!(h.scopes[0].entries.len(), 1, "/status must not record");
    assert!(h.scopes[0].entries[0].is_refusal());
    // Nothing exported: a refusal, no scrape, so the whole scope is refusing.
    let out = adapter.explainer().render_self_metrics();
    assert!(out.contains(
            "hpa_bridge_scope_refusing{namespace=\"games\",metric=\"hpa_target_replicas\",workload=\"lobby\"} 1"
        ), "{out}");
    assert!(!out.contains("hpa_bridge_prometheus"), "{out}");
    assert!(out.contains("hpa_bridge_ready 0"), "{out}");
    // The cap of one scope: asking for shop drops lobby, from the history and the metrics.
    adapter
        .answer_computed(&MetricQuery::external(
            "hpa_target_replicas",
            "games",
            shop.clone(),
        ))
        .await
        .unwrap();
    let h = adapter.explainer().history(&Filter::default());
    assert_eq!((h.tracked, h.dropped_scopes), (1, 1));
    assert_eq!(h.scopes[0].key.workload(), "shop");
    let out = adapter.explainer().render_self_metrics();
    assert!(!out.contains("workload=\"lobby\""), "{out}");
    assert!(
        out.contains("hpa_bridge_history_scopes_dropped_total 1"),
        "{out}"
    );
    // Unknown metrics are not answers: nothing recorded.
    assert!(adapter
        .answer_computed(&MetricQuery::external("nope", "games", shop.clone()))
        .await
        .is_err());
    assert!(adapter
        .explainer()
        .history(&Filter {
            namespace: Some("other".into()),
            metric: None
        })
        .scopes
        .is_empty());
}

#[tokio::test]
async fn a_served_floor_notes_only_what_the_history_keeps_and_the_history_is_unchanged() {
    use hpa_bridge_rules::policy::InputCounts;

    // Each case: how many of 20 pods export a recommendation, and how many inputs the
    // served floor notes (the history keeps 8 in all, the recommendation's first).
    for (recommenders, floor_notes) in [(20, 0), (3, 5)] {
        let store = hpa_bridge_store::store::StoreWriter::default();
        let adapter =
            crate::engine::fixtures::adapter_with(store.reader(), Arc::new(OneStatefulSet));
        let targets = crate::engine::fixtures::lobby_pods(20);
        store.set_targets(targets.clone());
        crate::engine::fixtures::scrape_lobby(&store, &targets, recommenders, |i| {
            if i < 5 {
                i as f64 + 1.0
            } else {
                0.0
            }
        });
        let selector = LabelSelector::parse("hpa_target_name=lobby").unwrap();
        let served = adapter
            .answer_computed(&MetricQuery::external(
                "hpa_target_replicas",
                "games",
                selector.clone(),
            ))
            .await
            .unwrap();
        let spec = adapter.engine.config.metric("hpa_target_replicas").unwrap();
        let ev = adapter
            .engine
            .evaluation("games", &selector, None, 1_000_000.into(), true);
        let explained = ev.answer(spec).await;
        assert_eq!(served.value(), explained.value());
        assert_eq!(served.reason, explained.reason);
        // The floor counted every pod, and noted only what the history keeps.
        assert_eq!(served.parts[1].inputs.len(), floor_notes, "{recommenders}");
        assert_eq!(InputCounts::of(&served.parts[1]).total(), 20);
        assert_eq!(
            InputCounts::of(&served).total(),
            InputCounts::of(&explained).total()
        );
        // The history shows the inputs it would show had every input been noted.
        let mut first: Vec<&policy::InputNote> = Vec::new();
        for part in &explained.parts {
            first.extend(part.inputs.iter());
        }
        first.truncate(history::MAX_INPUTS_KEPT);
        let kept = adapter.explainer().history(&Filter::default());
        let kept = &kept.scopes[0];
        assert_eq!(kept.last_inputs_total, InputCounts::of(&explained).total());
        let shown: Vec<(&str, &str)> = kept
            .last_inputs
            .iter()
            .map(|i| (i.target.as_str(), i.status.as_str()))
            .collect();
        let expected: Vec<(&str, &str)> = first
            .iter()
            .map(|n| (n.id.target.0.as_ref(), n.status.as_ref()))
            .collect();
        assert_eq!(shown, expected, "{recommenders}");
    }
}

/// Only the StatefulSet games/lobby is in the watch cache, at 3 replicas.
struct LobbyAtThree;

impl Cluster for LobbyAtThree {
    fn current_replicas(&self, w: &WorkloadRef) -> Option<u64> {
        (w.kind == WorkloadKind::StatefulSet && w.namespace == "games" && w.name == "lobby")
            .then_some(3)
    }
    fn ordinals_start(&self, _w: &WorkloadRef) -> u64 {
        0
    }
}

/// Each answer served is kept with the `spec.replicas` of its workload as the watch knows
/// it: through the floor for a target, the pods for a recommendation, the named object for
/// an Object query; unknown (never a guess) without Kubernetes or for a workload the watch
/// does not know.
#[tokio::test]
async fn a_served_answer_is_kept_with_its_workloads_spec_replicas() {
    let store = hpa_bridge_store::store::StoreWriter::default();
    let bare = crate::engine::fixtures::adapter_on(store.reader());
    let targets = crate::engine::fixtures::lobby_pods(3);
    store.set_targets(targets.clone());
    crate::engine::fixtures::scrape_lobby(&store, &targets, 3, |i| i as f64 + 1.0);
    let lobby = LabelSelector::parse("hpa_target_name=lobby").unwrap();
    let shop = LabelSelector::parse("hpa_target_name=shop").unwrap();
    fn newest_in(adapter: &Adapter, metric: &str, scope: &str) -> Option<u32> {
        adapter
            .explainer()
            .history(&Filter::default())
            .scopes
            .iter()
            .find(|s| s.key.metric == metric && s.key.scope == scope)
            .and_then(|s| s.entries.last().cloned())
            .unwrap()
            .spec_replicas
    }
    // No Kubernetes: unknown.
    bare.answer_computed(&MetricQuery::external(
        "hpa_target_replicas",
        "games",
        lobby.clone(),
    ))
    .await
    .unwrap();
    assert_eq!(
        newest_in(&bare, "hpa_target_replicas", lobby.as_str()),
        None
    );
    // The same store, with the watch knowing lobby.
    let adapter = crate::engine::fixtures::adapter_with(store.reader(), Arc::new(LobbyAtThree));
    let newest = |metric: &str, scope: &str| newest_in(&adapter, metric, scope);
    let ask = |metric: &'static str, selector: &LabelSelector| {
        let (adapter, selector) = (&adapter, selector.clone());
        async move {
            adapter
                .answer_computed(&MetricQuery::external(metric, "games", selector.clone()))
                .await
                .unwrap()
        }
    };
    for metric in [
        "hpa_target_replicas",
        "hpa_expect_replicas",
        "hpa_stateful_floor",
    ] {
        ask(metric, &lobby).await;
        assert_eq!(newest(metric, lobby.as_str()), Some(3), "{metric}");
    }
    // No pods behind shop: no workload, so unknown.
    ask("hpa_target_replicas", &shop).await;
    assert_eq!(newest("hpa_target_replicas", shop.as_str()), None);
    let object = |name: &str| ObjectRef {
        kind: crate::engine::ObjectKind::StatefulSet,
        namespace: "games".into(),
        name: name.into(),
    };
    let everything = LabelSelector::parse("").unwrap();
    for (name, expected) in [("lobby", Some(3)), ("shop", None)] {
        adapter
            .answer_computed(&MetricQuery::object(
                "hpa_target_replicas",
                object(name),
                everything.clone(),
            ))
            .await
            .unwrap();
        let scope = history_scope(&everything, Some(&object(name)));
        assert_eq!(newest("hpa_target_replicas", &scope), expected, "{name}");
    }
}

/// Serving reads clean pods as a summary (store/family_digest.rs) and explaining lists
/// every input: the value, the reason and the inputs counted are the same either way, for
/// a healthy workload and for one with a stale pod and an invalid recommendation.
#[tokio::test]
async fn a_served_answer_from_summarized_evidence_is_the_explained_answer() {
    use hpa_bridge_rules::policy::InputCounts;

    let store = hpa_bridge_store::store::StoreWriter::default();
    let adapter = crate::engine::fixtures::adapter_with(store.reader(), Arc::new(OneStatefulSet));
    let targets = crate::engine::fixtures::lobby_pods(20);
    let page = |i: usize, expect: f64| {
        let index = if i < 5 { i as f64 + 1.0 } else { 0.0 };
        crate::engine::fixtures::workload_page("StatefulSet", "lobby", expect, index)
    };
    store.set_targets(targets.clone());
    for (i, t) in targets.iter().enumerate() {
        store.record_success(t, 990_000, 1, page(i, if i == 12 { 7.0 } else { 2.0 }));
    }
    let spec = adapter.engine.config.metric("hpa_target_replicas").unwrap();
    let selector = LabelSelector::parse("hpa_target_name=lobby").unwrap();
    let compare = |served: &Answer, explained: &Answer| {
        assert_eq!(served.value(), explained.value());
        assert_eq!(served.refusal(), explained.refusal());
        assert_eq!(served.reason, explained.reason);
        assert_eq!(
            InputCounts::of(served).total(),
            InputCounts::of(explained).total()
        );
    };
    let answer = |now: Millis, explain: bool| {
        let ev = adapter
            .engine
            .evaluation("games", &selector, None, now.into(), explain);
        answer_and_summarized(spec, ev)
    };
    let (served, summarized) = answer(1_000_000, false).await;
    let (explained, none) = answer(1_000_000, true).await;
    assert_eq!(served.value(), Some(7));
    assert!(summarized > 0 && none == 0, "{summarized} {none}");
    compare(&served, &explained);
    // Pod 3 goes stale with a higher index and pod 15 recommends nonsense: listed, and the
    // answer is the same refusal either way.
    store.record_success(&targets[15], 1_030_000, 1, page(15, 2.5));
    for (i, t) in targets.iter().enumerate().filter(|(i, _)| *i != 3) {
        if i != 15 {
            store.record_success(t, 1_030_000, 1, page(i, 2.0));
        }
    }
    let (served, summarized) = answer(1_040_000, false).await;
    let (explained, _) = answer(1_040_000, true).await;
    assert!(served.refusal().is_some() && summarized > 0, "{served:?}");
    compare(&served, &explained);
}

#[tokio::test]
async fn a_target_request_reads_each_series_set_once() {
    let counting = Arc::new(Counting {
        store: Arc::new(Store::new()),
        reads: AtomicUsize::new(0),
    });
    let adapter = crate::engine::fixtures::adapter_with(counting.clone(), Arc::new(OneStatefulSet));
    let selector = LabelSelector::parse("hpa_target_name=lobby").unwrap();
    adapter
        .answer_computed(&MetricQuery::external(
            "hpa_target_replicas",
            "default",
            selector.clone(),
        ))
        .await
        .unwrap();
    // The recommendation's series and the floor's series: the floor's are read once, not
    // again for the workload's current count.
    assert_eq!(counting.reads.load(Ordering::SeqCst), 2);
}

/// An Object answer without a pod set is read as a summary, as an External one is, and gives
/// the explained answer; a series naming the workload under another API group, which the
/// Object scope drops and a summary could only count, makes it list every input instead.
#[tokio::test]
async fn an_object_answer_is_summarized_unless_another_group_names_the_workload() {
    let store = hpa_bridge_store::store::StoreWriter::default();
    let adapter = crate::engine::fixtures::adapter_on(store.reader());
    let targets = crate::engine::fixtures::lobby_pods(21);
    store.set_targets(targets[..20].to_vec());
    crate::engine::fixtures::scrape_lobby(&store, &targets[..20], 20, |i| i as f64 + 1.0);
    let (served, summarized, explained) = lobby_object_answers(&adapter).await;
    assert_eq!(
        served.value(),
        Some(20),
        "{}",
        hpa_bridge_rules::policy::summary(&served)
    );
    assert!(summarized > 0, "a healthy Object scope is summarized");
    assert_same_answer(&served, &explained);

    // A pod past the noted ones, whose series all read clean, names lobby under another
    // group, higher.
    let foreign: Vec<_> =
        crate::engine::fixtures::workload_page("StatefulSet", "lobby", 30.0, 30.0)
            .into_iter()
            .map(|mut s| {
                for (k, v) in &mut s.labels {
                    if k == "hpa_target_api_version" {
                        *v = "other.example.com/v1".into();
                    }
                }
                s
            })
            .collect();
    store.set_targets(targets.clone());
    store.record_success(&targets[20], 990_000, 1, foreign);
    let (served, summarized, explained) = lobby_object_answers(&adapter).await;
    assert_eq!(summarized, 0, "another group in scope: every input listed");
    assert_eq!(
        served.value(),
        Some(20),
        "the other group's 30 is not lobby's: {}",
        hpa_bridge_rules::policy::summary(&served)
    );
    assert_same_answer(&served, &explained);
}

/// The StatefulSet games/lobby at 3 replicas, whose pods are `pods` (one shared set, as
/// discovery hands out between changes).
struct LobbyPods {
    pods: hpa_bridge_rules::cluster::PodSet,
}

impl Cluster for LobbyPods {
    fn pods(&self, _namespace: &str) -> Option<hpa_bridge_rules::cluster::PodSet> {
        Some(self.pods.clone())
    }
    fn workload_pods(&self, _w: &WorkloadRef) -> Option<hpa_bridge_rules::cluster::PodSet> {
        Some(self.pods.clone())
    }
    fn current_replicas(&self, _w: &WorkloadRef) -> Option<u64> {
        Some(3)
    }
    fn ordinals_start(&self, _w: &WorkloadRef) -> u64 {
        0
    }
}

/// With a pod set, an Object answer reads its own pods' series and the other named series as
/// two summaries, and answers as the listed reads do (the explained answer lists every input):
/// with the other named series empty or not, with an own pod's series its workload labels do
/// not name; and lists every input once another pod's series name the workload under another
/// group, or a producer gives a reason (whose order the listed reads decide).
#[tokio::test]
async fn an_object_answer_with_pods_is_summarized_as_it_would_be_listed() {
    use crate::engine::fixtures::{lobby_pods, workload_page};
    use hpa_bridge_rules::cluster::PodFacts;
    use hpa_bridge_store::store::{Page, ScrapeTarget};

    let mut targets = lobby_pods(22);
    for t in &mut targets {
        let pod = t.id.0.trim_start_matches("games/").to_string();
        t.labels.insert("pod".into(), pod);
    }
    let pods: BTreeMap<String, PodFacts> = targets
        .iter()
        .map(|t| {
            let facts = PodFacts {
                running: true,
                workload: t.workload.clone(),
                ..PodFacts::default()
            };
            (t.labels["pod"].clone(), facts)
        })
        .collect();
    let store = hpa_bridge_store::store::StoreWriter::default();
    let adapter = crate::engine::fixtures::adapter_with(
        store.reader(),
        Arc::new(LobbyPods {
            pods: Arc::new(pods),
        }),
    );
    // Its id sorts before the pods', so its series come first among the noted inputs.
    let elsewhere = ScrapeTarget {
        format: Default::default(),
        id: TargetId("central/metrics".into()),
        url: "http://central/metrics".into(),
        labels: [("namespace".to_string(), "games".to_string())].into(),
        workload: None,
    };
    let mut all = targets.clone();
    all.push(elsewhere.clone());
    store.set_targets(all);
    // Every target has had a page (one never scraped could hold a higher recommendation and
    // would refuse it); the last two lobby pods hold no state yet.
    crate::engine::fixtures::scrape_lobby(&store, &targets, 20, |i| match i {
        0..20 => i as f64 + 1.0,
        _ => 0.0,
    });
    store.record_success(&elsewhere, 990_000, 1, Vec::new());
    let check = |served: &Answer, summarized: usize, explained: &Answer, value: u64, whole| {
        assert_eq!(
            served.value(),
            Some(value),
            "{}",
            hpa_bridge_rules::policy::summary(served)
        );
        match whole {
            true => assert!(summarized > 0, "summarized"),
            false => assert_eq!(summarized, 0, "every input listed"),
        }
        assert_same_answer(served, explained);
        assert_eq!(served.producer_reasons, explained.producer_reasons);
    };

    let (served, summarized, explained) = lobby_object_answers(&adapter).await;
    check(&served, summarized, &explained, 20, true);

    // Another target names lobby higher, from no pod of it: the other named scope's summary.
    store.record_success(
        &elsewhere,
        990_000,
        1,
        workload_page("StatefulSet", "lobby", 23.0, 0.0),
    );
    let (served, summarized, explained) = lobby_object_answers(&adapter).await;
    check(&served, summarized, &explained, 23, true);

    // An own pod's series that its workload labels do not name count through the pod set.
    let unlabelled: Vec<_> = workload_page("StatefulSet", "lobby", 25.0, 21.0)
        .into_iter()
        .map(|mut s| {
            s.labels.clear();
            s
        })
        .collect();
    store.record_success(&targets[20], 990_000, 1, unlabelled);
    let (served, summarized, explained) = lobby_object_answers(&adapter).await;
    check(&served, summarized, &explained, 25, true);

    // A producer's reason: listed, so the reasons keep the listed reads' order.
    let page = Page {
        samples: workload_page("StatefulSet", "lobby", 2.0, 22.0),
        valid_until_ms: None,
        reason: Some("draining".into()),
    };
    store.record_success(&targets[21], 990_000, 1, page);
    let (served, summarized, explained) = lobby_object_answers(&adapter).await;
    check(&served, summarized, &explained, 25, false);
    store.record_success(
        &targets[21],
        990_000,
        1,
        workload_page("StatefulSet", "lobby", 2.0, 22.0),
    );

    // The other target names lobby under another group as well: listed, and dropped.
    let mut foreign = workload_page("StatefulSet", "lobby", 30.0, 0.0);
    for s in &mut foreign {
        for (k, v) in &mut s.labels {
            if k == "hpa_target_api_version" {
                *v = "other.example.com/v1".into();
            }
        }
        s.labels.push(("shard".into(), "b".into()));
    }
    let mut page = workload_page("StatefulSet", "lobby", 23.0, 0.0);
    page.extend(foreign);
    store.record_success(&elsewhere, 990_000, 1, page);
    let (served, summarized, explained) = lobby_object_answers(&adapter).await;
    check(&served, summarized, &explained, 25, false);
}

/// The Object query of games/lobby's `hpa_target_replicas`: served (with the series its reads
/// counted in a summary's tail) and explained (every input listed).
async fn lobby_object_answers(adapter: &Adapter) -> (Answer, usize, Answer) {
    use crate::engine::ObjectKind;
    let spec = adapter.engine.config.metric("hpa_target_replicas").unwrap();
    let everything = LabelSelector::everything();
    let lobby = ObjectRef {
        kind: ObjectKind::StatefulSet,
        namespace: "games".into(),
        name: "lobby".into(),
    };
    let answer = |explain: bool| {
        let ev = adapter.engine.evaluation(
            "games",
            &everything,
            Some(&lobby),
            1_000_000.into(),
            explain,
        );
        answer_and_summarized(spec, ev)
    };
    let (served, summarized) = answer(false).await;
    let (explained, _) = answer(true).await;
    (served, summarized, explained)
}

/// A served answer says what the explained one says: value, reason and inputs counted.
fn assert_same_answer(served: &Answer, explained: &Answer) {
    use hpa_bridge_rules::policy::InputCounts;
    assert_eq!(served.value(), explained.value());
    assert_eq!(served.reason, explained.reason);
    assert_eq!(
        InputCounts::of(served).total(),
        InputCounts::of(explained).total()
    );
}

/// `spec`'s answer under `ev`, and how many series its reads counted in a summary's tail.
async fn answer_and_summarized(
    spec: &hpa_bridge_rules::config::MetricSpec,
    ev: Evaluation<'_>,
) -> (Answer, usize) {
    let a = ev.answer(spec).await;
    let fetched = ev.fetched.lock().unwrap();
    let summarized = fetched
        .iter()
        .filter_map(|f| f.result.as_ref().ok()?.clean_tail)
        .map(|t| t.series)
        .sum::<usize>();
    (a, summarized)
}

/// The default adapter scraping one pod of `lobby`, and an External query for its
/// recommendation.
fn one_lobby_pod() -> (
    Adapter,
    hpa_bridge_store::store::StoreWriter,
    Vec<hpa_bridge_store::store::ScrapeTarget>,
    MetricQuery,
) {
    use crate::engine::fixtures::{adapter_on, lobby_pods};
    let store = hpa_bridge_store::store::StoreWriter::default();
    let adapter = adapter_on(store.reader());
    let targets = lobby_pods(1);
    store.set_targets(targets.clone());
    let query = MetricQuery::external(
        "hpa_expect_replicas",
        "games",
        LabelSelector::parse("hpa_target_name=lobby").unwrap(),
    );
    (adapter, store, targets, query)
}

/// A producer that changes only its reason changes what its answers show: a reused answer
/// carries the reason of the page it was computed from, so the new reason ends the reuse.
#[tokio::test]
async fn a_new_producer_reason_is_not_hidden_by_a_reused_answer() {
    use crate::engine::fixtures::workload_page;
    use hpa_bridge_store::store::Page;

    let (adapter, store, targets, query) = one_lobby_pod();
    let page = |reason: &str| Page {
        samples: workload_page("StatefulSet", "lobby", 2.0, 1.0),
        valid_until_ms: None,
        reason: Some(reason.into()),
    };
    let said = |served: &Served| -> Vec<String> {
        let a = &served.answer;
        assert_eq!(a.value(), Some(2), "{a:?}");
        a.producer_reasons
            .iter()
            .map(|r| r.reason.to_string())
            .collect()
    };
    store.record_success(&targets[0], 990_000, 1, page("warming up"));
    let first = adapter.answer(&query).await.unwrap();
    assert_eq!(said(&first), ["warming up"]);
    // The same page again is the same answer, reused.
    store.record_success(&targets[0], 990_000, 1, page("warming up"));
    let again = adapter.answer(&query).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again), "an unchanged page reuses");
    // The same values with another reason.
    store.record_success(&targets[0], 990_000, 1, page("steady"));
    let next = adapter.answer(&query).await.unwrap();
    assert_eq!(said(&next), ["steady"]);
}

/// Every answer an HPA is given is in the history, reused or computed: two HPAs asking about
/// one scope within one scrape interval get one computed answer, and both see it kept.
#[tokio::test]
async fn a_reused_answer_is_kept_in_the_history() {
    use crate::engine::fixtures::workload_page;
    use hpa_bridge_store::store::Page;

    let (adapter, store, targets, query) = one_lobby_pod();
    let page = Page {
        samples: workload_page("StatefulSet", "lobby", 2.0, 1.0),
        valid_until_ms: None,
        reason: None,
    };
    store.record_success(&targets[0], 990_000, 1, page);
    let first = adapter.answer(&query).await.unwrap();
    let again = adapter.answer(&query).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again), "the second is reused");
    let view = adapter.explainer().history(&Filter::default());
    let values: Vec<_> = view.scopes[0].entries.iter().map(|e| e.value()).collect();
    assert_eq!(values, [Some(2), Some(2)], "both answers are kept");
    let exposed = adapter.explainer().render_self_metrics();
    assert!(
        exposed.contains(
            "hpa_bridge_answers_total{metric=\"hpa_expect_replicas\",outcome=\"value\"} 1"
        ),
        "one computation is counted:\n{exposed}"
    );
}

#[test]
fn a_full_list_of_seen_queries_forgets_the_least_recently_asked() {
    let clock = Arc::new(ManualClock::new(0));
    let adapter = Adapter::new(
        Config::from_yaml("").unwrap(),
        Arc::new(hpa_bridge_store::store::Store::new()),
        None,
        clock.clone(),
        Arc::new(SelfMetrics::new()),
    );
    let key = |n: usize| QueryKey {
        metric: "m".into(),
        namespace: "default".into(),
        selector: format!("w={n}"),
        object: None,
    };
    let engine = &adapter.engine;
    for n in 0..MAX_SEEN_QUERIES {
        clock.advance(1);
        engine.remember_query(key(n), clock.now_ms());
    }
    clock.advance(1);
    engine.remember_query(key(0), clock.now_ms());
    engine.remember_query(key(MAX_SEEN_QUERIES), clock.now_ms());
    let seen = engine.seen.lock().unwrap();
    assert_eq!(seen.len(), MAX_SEEN_QUERIES);
    assert_eq!(seen.peek(&key(0)), Some(&clock.now_ms()), "asked again");
    assert!(!seen.contains(&key(1)), "the least recent goes");
}
