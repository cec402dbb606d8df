use super::*;
use crate::engine::MetricQuery;
use hpa_bridge_rules::policy::InputNote;

fn key(ns: &str, scope: &str) -> HistoryKey {
    HistoryKey {
        metric: "hpa_target_replicas".into(),
        namespace: ns.into(),
        scope: scope.into(),
    }
}

fn value(v: u64) -> Answer {
    Answer::valued("m", MetricKind::Recommendation, v, 0, "r", "why".into())
}

fn refusal(reason: &str) -> Answer {
    Answer::refused(
        "m",
        MetricKind::Recommendation,
        RefusalKind::Stale,
        None,
        "r",
        reason.into(),
    )
}

fn note(status: &str) -> InputNote {
    InputNote {
        id: hpa_bridge_rules::evidence::SeriesRef::new(
            hpa_bridge_rules::evidence::TargetId("t".into()),
            "s".into(),
            Default::default(),
        ),
        value: hpa_bridge_rules::policy::RawValue(1.0),
        age_seconds: 0.0,
        status: status.to_string().into(),
        used: true,
    }
}

fn target(rec: u64, floor: Answer) -> Answer {
    hpa_bridge_rules::policy::target("t", value(rec), Some(floor), Err("unknown"))
}

fn floor(v: u64) -> Answer {
    Answer::valued("f", MetricKind::StatefulFloor, v, 0, "r", "why".into())
}

#[test]
fn default_is_one_hour_at_the_hpa_cadence() {
    let l = Limits::default();
    assert_eq!(l.capacity, 240);
    assert_eq!(l.max_scopes, 1000);
    assert_eq!(Limits::for_retention(1000, 0).capacity, 1);
    assert_eq!(Limits::for_retention(1000, 0).max_scopes, 1);
}

#[test]
fn a_ring_keeps_at_most_capacity_entries_oldest_first() {
    let mut h = History::new(Limits::for_retention(60_000, 10)); // 4 entries
    for i in 0..10i64 {
        h.record(&key("a", "x=1"), &value(i as u64), None, i * 15_000);
    }
    let snap = h.snapshot(&Filter::default(), 9 * 15_000);
    let values: Vec<_> = snap[0].entries.iter().filter_map(Entry::value).collect();
    assert_eq!(values, [6, 7, 8, 9]);
}

#[test]
fn entries_older_than_the_retention_go_even_when_asked_rarely() {
    let mut h = History::new(Limits::for_retention(60_000, 10));
    h.record(&key("a", "x=1"), &value(1), None, 0);
    h.record(&key("a", "x=1"), &value(2), None, 10_000);
    h.record(&key("a", "x=1"), &value(3), None, 200_000);
    let snap = h.snapshot(&Filter::default(), 200_000);
    assert_eq!(snap[0].entries.len(), 1);
    // A snapshot much later shows nothing, without a record to prune.
    assert!(h.snapshot(&Filter::default(), 900_000)[0]
        .entries
        .is_empty());
}

#[test]
fn the_scope_cap_evicts_the_least_recently_asked_scope_and_counts_it() {
    let mut h = History::new(Limits::for_retention(60_000, 2));
    assert_eq!(h.record(&key("a", "x=1"), &value(1), None, 0), None);
    assert_eq!(h.record(&key("b", "x=1"), &value(1), None, 1), None);
    // `a` is asked again, so `b` is now the oldest.
    h.record(&key("a", "x=1"), &value(1), None, 2);
    assert_eq!(
        h.record(&key("c", "x=1"), &value(1), None, 3),
        Some(key("b", "x=1"))
    );
    assert_eq!(h.len(), 2);
    assert_eq!(h.dropped_scopes(), 1);
    // Thousands of scopes never grow it past the cap.
    for i in 0..5000 {
        h.record(&key("n", &format!("x={i}")), &value(1), None, 10 + i);
    }
    assert_eq!(h.len(), 2);
    assert_eq!(h.dropped_scopes(), 5001);
}

/// Scopes are told apart by their parts, however those would read run together; the same
/// parts given borrowed find the scope recorded under an owned key.
#[test]
fn scopes_are_found_by_their_parts() {
    let mut h = History::new(Limits::default());
    h.record(&("m", "ab", "c"), &value(1), None, 0);
    h.record(&("m", "a", "bc"), &value(2), None, 0);
    h.record(&("m", "a", "1:bc"), &value(3), None, 0);
    h.record(&("m1:", "a", "bc"), &value(4), None, 0);
    assert_eq!(h.len(), 4);
    let owned = HistoryKey {
        metric: "m".into(),
        namespace: "a".into(),
        scope: "bc".into(),
    };
    h.record(&owned, &value(5), None, 15_000);
    assert_eq!(h.len(), 4);
    let all = h.snapshot(&Filter::default(), 15_000);
    let found = all.iter().find(|s| s.key == owned).unwrap();
    assert_eq!(found.entries.len(), 2, "{found:?}");
}

#[test]
fn refusal_runs_report_their_start_and_end_on_a_value() {
    let mut h = History::new(Limits::default());
    let k = key("a", "x=1");
    h.record(&k, &value(3), None, 0);
    h.record(&k, &refusal("stale"), None, 15_000);
    h.record(&k, &refusal("stale again"), None, 30_000);
    let s = &h.states(0)[0];
    assert!(s.refusing);
    assert_eq!(s.refusing_since_ms, Some(15_000));
    h.record(&k, &value(3), None, 45_000);
    let s = &h.states(0)[0];
    assert!(!s.refusing);
    assert_eq!(s.refusing_since_ms, None);
}

#[test]
fn a_refusal_longer_than_the_ring_keeps_its_start() {
    let mut h = History::new(Limits::for_retention(30_000, 1));
    for i in 0..20 {
        h.record(&key("a", "x=1"), &refusal("r"), None, i * 15_000);
    }
    assert_eq!(h.states(0)[0].refusing_since_ms, Some(0));
}

#[test]
fn a_run_of_refusals_shares_its_first_reason_and_long_ones_are_cut() {
    let mut h = History::new(Limits::default());
    h.record(&key("a", "x=1"), &refusal("stale: 31s old"), None, 0);
    h.record(&key("a", "x=1"), &refusal("stale: 46s old"), None, 15_000);
    let snap = h.snapshot(&Filter::default(), 15_000);
    // The newest full reason is kept for the scope.
    assert_eq!(snap[0].last_reason, "stale: 46s old");
    let reasons: Vec<&Arc<str>> = snap[0]
        .entries
        .iter()
        .map(|e| match &e.served {
            Reply::Refused { reason, .. } => reason,
            Reply::Value { .. } => panic!("value"),
        })
        .collect();
    assert!(Arc::ptr_eq(reasons[0], reasons[1]));
    assert_eq!(&**reasons[0], "stale: 31s old");
    let long = "é".repeat(MAX_REASON_BYTES);
    let e = Entry::from_answer(&refusal(&long), 0, None);
    let Reply::Refused { reason, .. } = e.served else {
        panic!("refusal")
    };
    assert!(reason.len() <= MAX_REASON_BYTES && reason.len() >= MAX_REASON_BYTES - 1);
}

#[test]
fn a_target_entry_carries_its_recommendation_floor_and_input_counts() {
    let mut rec = value(2);
    rec.inputs = vec![note("fresh"), note("stale: 40s old")];
    let mut f = floor(5);
    f.inputs = vec![
        note("retained 5 from 30s ago"),
        note("unknown: x"),
        note("invalid: NaN"),
    ];
    let t = hpa_bridge_rules::policy::target("t", rec, Some(f), Err("unknown"));
    let e = Entry::from_answer(&t, 7, None);
    let mut h = History::new(Limits::default());
    h.record(&key("a", "x=1"), &t, None, 7);
    let snap = &h.snapshot(&Filter::default(), 7)[0];
    assert_eq!(snap.last_inputs_total, 5);
    assert_eq!(snap.last_inputs.len(), 5);
    assert_eq!(snap.last_inputs[0].series, "s{}");
    assert_eq!(snap.last_inputs[2].status, "retained 5 from 30s ago");
    assert_eq!(e.value(), Some(5));
    assert_eq!(e.recommendation, Some(2));
    assert_eq!(e.floor, Some(5));
    assert!(e.floor_holds());
    assert_eq!(
        e.inputs,
        InputCounts {
            fresh: 1,
            stale: 1,
            retained: 1,
            unknown: 2,
            fenced: 0,
        }
    );
    // The recommendation setting the target: the floor does not hold.
    assert!(!Entry::from_answer(&target(9, floor(5)), 0, None).floor_holds());
    // A floor metric on its own: the floor, no recommendation, nothing held.
    let alone = Entry::from_answer(&floor(4), 0, None);
    assert_eq!((alone.recommendation, alone.floor), (None, Some(4)));
    assert!(!alone.floor_holds());
}

#[test]
fn an_entry_keeps_the_spec_replicas_it_was_served_under_and_none_when_unknown() {
    let mut h = History::new(Limits::for_retention(60_000, 10)); // 4 entries
    let k = key("a", "x=1");
    for (i, r) in [None, Some(3), Some(u64::MAX), Some(4), Some(5)]
        .into_iter()
        .enumerate()
    {
        h.record(&k, &value(2), r, i as Millis * 15_000);
    }
    let snap = h.snapshot(&Filter::default(), 60_000);
    let kept: Vec<_> = snap[0].entries.iter().map(|e| e.spec_replicas).collect();
    // The ring stays at its capacity; a value Kubernetes cannot hold is unknown, not cut.
    assert_eq!(kept, [Some(3), None, Some(4), Some(5)]);
    let json = serde_json::to_value(&snap[0].entries).unwrap();
    assert_eq!(json[0]["specReplicas"], 3);
    assert!(json[1].get("specReplicas").is_none(), "{json}");
}

#[test]
fn an_incomplete_floor_reports_its_known_lower_bound() {
    let f = Answer::refused(
        "f",
        MetricKind::StatefulFloor,
        RefusalKind::IncompleteFloor,
        Some(3),
        "r",
        "pod x unknown".into(),
    );
    let t = hpa_bridge_rules::policy::target("t", value(1), Some(f), Ok(4));
    let e = Entry::from_answer(&t, 0, None);
    assert_eq!(
        (e.value(), e.recommendation, e.floor),
        (Some(4), Some(1), Some(3))
    );
    assert!(e.floor_holds());
}

#[test]
fn filters_match_namespace_and_metric() {
    let k = key("games", "hpa_target_name=lobby");
    assert!(Filter::default().matches(&k));
    let ns = |n: &str| Filter {
        namespace: Some(n.into()),
        metric: None,
    };
    assert!(ns("games").matches(&k));
    assert!(!ns("other").matches(&k));
    let m = Filter {
        namespace: None,
        metric: Some("HPA_TARGET_REPLICAS".into()),
    };
    assert!(m.matches(&k));
}

#[test]
fn the_workload_comes_from_the_selector_or_the_object() {
    assert_eq!(key("a", "hpa_target_name=lobby").workload(), "lobby");
    assert_eq!(key("a", "app=x,hpa_target_name=lobby").workload(), "lobby");
    assert_eq!(key("a", "StatefulSet/lobby").workload(), "lobby");
    assert_eq!(key("a", "Deployment/lobby tier=x").workload(), "lobby");
    assert_eq!(
        key("a", "Deployment/lobby hpa_target_name=other").workload(),
        "lobby"
    );
    // A selector whose first key starts with an uppercase letter is no object.
    assert_eq!(
        key("a", "Tier=a,example.com/team=x").workload(),
        "Tier=a,example.com/team=x"
    );
    assert_eq!(
        key("a", "Zone=b,example.com/t=x,hpa_target_name=lobby").workload(),
        "lobby"
    );
    // A selector on a prefixed key names no workload.
    assert_eq!(
        key("a", "statefulsets.apps/lobby").workload(),
        "statefulsets.apps/lobby"
    );
    assert_eq!(key("a", "app=x").workload(), "app=x");
    assert_eq!(key("a", "").workload(), "");
}

/// A ring keeps the identities of the inputs it shows, not the scope's list they came
/// from: once the store has dropped a scope's series and its kept resolution, nothing
/// holds the list, and `/status/history` reads the same as when the ring held the notes.
#[tokio::test]
async fn a_ring_keeps_only_the_inputs_it_shows_not_the_scope_list() {
    use hpa_bridge_rules::selector::LabelSelector;

    let store = hpa_bridge_store::store::StoreWriter::default();
    let adapter = crate::engine::fixtures::adapter_on(store.reader());
    let targets = crate::engine::fixtures::lobby_pods(12);
    store.set_targets(targets.clone());
    // Three recommenders, so both parts note inputs the ring keeps.
    crate::engine::fixtures::scrape_lobby(&store, &targets, 3, |i| (i % 3) as f64);
    let selector = LabelSelector::parse("hpa_target_name=lobby").unwrap();
    let served = adapter
        .answer_computed(&MetricQuery::external(
            "hpa_target_replicas",
            "games",
            selector.clone(),
        ))
        .await
        .unwrap();
    let lists: Vec<_> = served
        .parts
        .iter()
        .filter_map(|p| p.inputs.first())
        .map(|n| n.id.list())
        .collect();
    assert_eq!(lists.len(), 2, "{served:?}");
    drop(served);
    let json = || serde_json::to_string(&adapter.explainer().history(&Filter::default())).unwrap();
    let before = json();
    assert_eq!(before, HISTORY_JSON);
    // The pods go, and answers over the same store scopes (under other metrics, so the
    // ring above is not rewritten) replace the kept resolutions.
    store.set_targets(Vec::new());
    for metric in ["hpa_expect_replicas", "hpa_stateful_floor"] {
        adapter
            .answer_computed(&MetricQuery::external(metric, "games", selector.clone()))
            .await
            .unwrap();
    }
    for list in &lists {
        assert!(
            list.upgrade().is_none(),
            "a ring keeps the scope's list alive"
        );
    }
    let after: serde_json::Value = serde_json::from_str(&json()).unwrap();
    let target = after["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "hpa_target_replicas")
        .unwrap();
    let before: serde_json::Value = serde_json::from_str(&before).unwrap();
    assert_eq!(*target, before["scopes"][0]);
}

/// `/status/history` for the answer above, as written while rings held the notes.
const HISTORY_JSON: &str = r#"{"capacity":240,"maxScopes":1000,"tracked":1,"droppedScopes":0,"scopes":[{"entries":[{"at":"1970-01-01T00:16:40Z","atMs":"1970-01-01T00:16:40Z","floor":2,"inputs":{"fresh":15,"retained":0,"stale":0,"unknown":0},"recommendation":2,"served":{"state":"value","value":2}}],"inputs":[{"series":"hpa_expect_replicas{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-00","value":"2"},{"series":"hpa_expect_replicas{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-01","value":"2"},{"series":"hpa_expect_replicas{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-02","value":"2"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-00","value":"0"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-01","value":"1"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-02","value":"2"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-03","value":"0"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-04","value":"1"}],"inputsTotal":15,"metric":"hpa_target_replicas","namespace":"games","reason":"max(recommendation hpa_expect_replicas = 2, floor hpa_stateful_floor = 2) = 2 (recommendation)","scope":"hpa_target_name=lobby","workload":"lobby"}]}"#;

#[test]
fn memory_per_tracked_scope_is_bounded() {
    // A full default ring: 240 entries of fixed size plus the key and the deque header.
    let per_scope = ENTRY_BYTES * Limits::default().capacity;
    const { assert!(ENTRY_BYTES <= 96) };
    assert!(per_scope <= 24 * 1024, "{per_scope}");
}

/// The producers behind the newest answer and its parts are kept for the page, each once; the
/// next answer without them clears them.
#[test]
fn the_newest_answer_keeps_what_its_producers_said() {
    let said = |t: &str| hpa_bridge_rules::evidence::ProducerReason {
        target: hpa_bridge_rules::evidence::TargetId(t.into()),
        reason: format!("{t} says so").into(),
    };
    let mut rec = value(2);
    rec.producer_reasons = vec![said("a"), said("b")];
    let mut f = floor(5);
    f.producer_reasons = vec![said("b"), said("c")];
    let t = hpa_bridge_rules::policy::target("t", rec, Some(f), Err("unknown"));
    let mut h = History::new(Limits::default());
    h.record(&key("a", "x=1"), &t, None, 7);
    let snap = &h.snapshot(&Filter::default(), 7)[0];
    assert_eq!(
        snap.last_producer_reasons,
        [said("a"), said("b"), said("c")]
    );
    h.record(&key("a", "x=1"), &value(3), None, 8);
    let snap = &h.snapshot(&Filter::default(), 8)[0];
    assert!(snap.last_producer_reasons.is_empty());
}

/// A selector curled by hand (or mistyped) is a row of "no series match" that nobody asks
/// about again: it leaves the page and the gauges two minutes after its last request. A scope
/// an HPA keeps asking about stays, and so does one that ever had a value.
#[test]
fn a_scope_that_only_matched_nothing_leaves_after_two_minutes_unasked() {
    let no_match = Answer::refused(
        "m",
        MetricKind::Recommendation,
        RefusalKind::NoMatch,
        None,
        "r",
        "no series of m match x=1".into(),
    );
    let mut h = History::new(Limits::default());
    let typo = key("a", "hpa_target_name=lobb");
    let asked = key("a", "hpa_target_name=other");
    let once_valued = key("a", "hpa_target_name=lobby");
    h.record(&typo, &no_match, None, 0);
    h.record(&once_valued, &value(3), None, 0);
    h.record(&once_valued, &no_match, None, 15_000);
    for t in 0..10 {
        h.record(&asked, &no_match, None, t * 15_000);
    }
    assert_eq!(shown(&h, ABANDONED_NO_MATCH_MS).len(), 3);
    assert_eq!(
        shown(&h, ABANDONED_NO_MATCH_MS + 1),
        ["hpa_target_name=lobby", "hpa_target_name=other"]
    );
    assert_eq!(
        shown(&h, 135_000 + ABANDONED_NO_MATCH_MS + 1),
        ["hpa_target_name=lobby"]
    );
    // Asked again, it is back.
    h.record(&typo, &no_match, None, 1_000_000);
    assert!(shown(&h, 1_000_000).contains(&"hpa_target_name=lobb".to_string()));
}

/// The scopes the page shows at `now`, checked to be the ones the gauges count.
fn shown(h: &History, now: Millis) -> Vec<String> {
    let mut keys: Vec<String> = h
        .snapshot(&Filter::default(), now)
        .into_iter()
        .map(|s| s.key.scope)
        .collect();
    keys.sort();
    let mut gauges: Vec<String> = h.states(now).into_iter().map(|s| s.key.scope).collect();
    gauges.sort();
    assert_eq!(keys, gauges, "the page and the gauges agree");
    keys
}
