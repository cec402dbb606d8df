use super::*;
use hpa_bridge_exposition::ExposedSample;
use hpa_bridge_rules::clock::Now;
use hpa_bridge_rules::evidence::invalid_reason;
use hpa_bridge_rules::selector::LabelSelector;

// Property tests of the store as a whole, one theme each.
mod clean_tail;
mod labelled_read;
mod together;

fn target(url: &str, labels: &[(&str, &str)]) -> ScrapeTarget {
    ScrapeTarget {
        format: Default::default(),
        id: TargetId(url.into()),
        url: url.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        workload: None,
    }
}

fn sample(name: &str, labels: &[(&str, &str)], value: f64) -> ExposedSample {
    ExposedSample::scraped(name, labels, value)
}

fn default_scope<'a>(series: &'a [String], sel: &'a LabelSelector) -> Scope<'a> {
    Scope {
        series,
        namespace_label: "namespace",
        namespace: "default",
        selector: sel,
    }
}

#[test]
fn a_series_twice_in_one_page_is_ambiguous_and_keeps_the_last_clean_value() {
    let store = Store::new();
    let t = target("http://a/m", &[("namespace", "default")]);
    store.set_targets(vec![t.clone()]);
    assert_eq!(
        store
            .record_success(&t, 1000, 1, vec![sample("idx", &[], 3.0)])
            .duplicates,
        0
    );
    let page = vec![sample("idx", &[], 10.0), sample("idx", &[], 2.0)];
    assert_eq!(store.record_success(&t, 2000, 1, page).duplicates, 1);
    let s = vec!["idx".to_string()];
    let sel = LabelSelector::everything();
    let ev = store.read(&default_scope(&s, &sel), Read::Listed);
    assert_eq!(ev.observations.len(), 1);
    let o = &ev.observations[0];
    assert!(
        o.unusable == Some(Unusable::Duplicated) && o.value.is_nan(),
        "{o:?}"
    );
    assert_eq!(o.last_valid, Some((3, 1000)));
    // A clean page ends the ambiguity.
    assert_eq!(
        store
            .record_success(&t, 3000, 1, vec![sample("idx", &[], 4.0)])
            .duplicates,
        0
    );
    let o = store
        .read(&default_scope(&s, &sel), Read::Listed)
        .observations[0]
        .clone();
    assert!(o.unusable.is_none() && o.value == 4.0);
}

#[test]
fn a_target_churning_label_sets_keeps_at_most_the_retained_limit() {
    let store = Store::new();
    let t = target("http://churn/m", &[("namespace", "default")]);
    store.set_targets(vec![t.clone()]);
    let pages = MAX_RETAINED_ABSENT_SERIES + 500;
    let mut forgotten = 0;
    for i in 0..pages {
        let id = format!("{i}");
        let page = vec![sample("idx", &[("churn", id.as_str())], 3.0)];
        forgotten += store
            .record_success(&t, 1000 + i as Millis, 1, page)
            .forgotten;
    }
    // One present series and the newest absent ones.
    assert_eq!(store.locked().slots.len(), MAX_RETAINED_ABSENT_SERIES + 1);
    assert_eq!(forgotten as usize, pages - 1 - MAX_RETAINED_ABSENT_SERIES);
    let s = vec!["idx".to_string()];
    let sel = LabelSelector::everything();
    let ev = store.read(&default_scope(&s, &sel), Read::Listed);
    assert_eq!(ev.observations.len(), MAX_RETAINED_ABSENT_SERIES + 1);
    let newest = format!("{}", pages - 1);
    assert!(ev
        .observations
        .iter()
        .any(|o| o.present && o.id.labels.get("churn") == Some(&newest)));
    // The longest unseen went first: the oldest retained is the one after them.
    let oldest_kept = format!("{}", pages - 1 - MAX_RETAINED_ABSENT_SERIES);
    assert!(ev
        .observations
        .iter()
        .any(|o| o.id.labels.get("churn") == Some(&oldest_kept)));
    assert!(!ev
        .observations
        .iter()
        .any(|o| o.id.labels.get("churn").map(String::as_str) == Some("0")));
    // The index forgot them too: each series is listed under its name and its two labels.
    assert_eq!(
        store.locked().postings.entries(),
        3 * (MAX_RETAINED_ABSENT_SERIES + 1)
    );
}

#[test]
fn a_scope_version_moves_with_its_own_evidence_and_not_with_time() {
    let store = Store::new().with_stale_after(1500);
    let t = |name: &str, ns: &str| {
        target(
            &format!("http://{name}/m"),
            &[("namespace", ns), ("pod", name)],
        )
    };
    let (a, b, other) = (t("a", "default"), t("b", "default"), t("o", "other"));
    store.set_targets(vec![a.clone(), b.clone(), other.clone()]);
    let page = |w: &str, v: f64| vec![sample("rec", &[("hpa_target_name", w)], v)];
    store.record_success(&a, 1000, 1, page("lobby", 3.0));
    store.record_success(&b, 1000, 1, page("arena", 5.0));
    store.record_success(&other, 1000, 1, page("lobby", 7.0));
    let s = vec!["rec".to_string()];
    let sel = LabelSelector::parse("hpa_target_name=lobby").unwrap();
    let scope = default_scope(&s, &sel);
    let version = || store.scope_version([scope.clone()]);
    let v0 = version();
    store.record_success(&a, 2000, 1, page("lobby", 3.0));
    assert_eq!(
        version(),
        v0,
        "re-scraped with the same value: only time passed"
    );
    store.record_success(&a, 3600, 1, page("lobby", 3.0));
    assert_ne!(
        version(),
        v0,
        "re-scraped with the same value after staleAfter: it may have read stale meanwhile"
    );
    store.record_success(&b, 2000, 1, page("arena", 6.0));
    store.record_success(&other, 2000, 1, page("lobby", 8.0));
    // Each of them shares one posting with the scope (its namespace, or its workload).
    let v1 = version();
    store.record_success(&a, 3000, 1, page("lobby", 4.0));
    let v2 = version();
    assert_ne!(v2, v1, "its own series changed value");
    store.record_failure(&a, 4000, 1, "connection refused".into());
    let v3 = version();
    assert_ne!(v3, v2, "its target started failing");
    store.record_failure(&a, 5000, 1, "connection refused".into());
    assert_eq!(version(), v3, "still failing the same way");
    store.record_success(&a, 6000, 1, page("lobby", 4.0));
    let v4 = version();
    assert_ne!(v4, v3, "its target recovered");
    store.record_success(&a, 7000, 1, Vec::new());
    assert_ne!(version(), v4, "its series is no longer exported");
    let v5 = version();
    store.set_targets(vec![
        a.clone(),
        b.clone(),
        other.clone(),
        t("new", "default"),
    ]);
    assert_ne!(version(), v5, "a new target might export in-scope series");
}

#[test]
fn removed_targets_leave_nothing_in_the_index() {
    let store = Store::new();
    let ts: Vec<ScrapeTarget> = (0..5)
        .map(|i| {
            target(
                &format!("http://t{i}/m"),
                &[("namespace", "default"), ("pod", &format!("p{i}"))],
            )
        })
        .collect();
    store.set_targets(ts.clone());
    for t in &ts {
        store.record_success(t, 1000, 1, vec![sample("idx", &[("a", "b")], 1.0)]);
    }
    assert!(store.locked().postings.entries() > 0);
    store.set_targets(Vec::new());
    assert_eq!(store.locked().postings.entries(), 0);
    assert_eq!(store.locked().slots.len(), 0);
    assert!(store.locked().unscraped.is_empty());
}

#[test]
fn an_answer_reads_only_the_targets_its_scope_names() {
    let store = Store::new();
    let ts: Vec<ScrapeTarget> = (0..2000)
        .map(|i| {
            let ns = format!("ns{}", i % 200);
            target(
                &format!("http://t{i}/m"),
                &[("namespace", ns.as_str()), ("pod", &format!("p{i}"))],
            )
        })
        .collect();
    store.set_targets(ts.clone());
    for (i, t) in ts.iter().enumerate() {
        let name = format!("w{}", i % 400);
        store.record_success(
            t,
            1000,
            1,
            vec![sample("idx", &[("hpa_target_name", name.as_str())], 1.0)],
        );
    }
    let series = vec!["idx".to_string()];
    let sel = LabelSelector::parse("hpa_target_name=w7").unwrap();
    let inner = store.locked();
    // 10 targets in ns7, 5 of them name w7: the smaller posting list is read.
    let read = inner
        .postings
        .candidates(&series, "namespace", "ns7", sel.requirements());
    assert_eq!(read.len(), 5);
    assert_eq!(read.values().map(Vec::len).sum::<usize>(), 5);
}

#[test]
fn one_target_exporting_many_workloads_is_read_only_for_the_scope() {
    let store = Store::new();
    let t = target("http://ctl/m", &[("namespace", "default")]);
    store.set_targets(vec![t.clone()]);
    let page: Vec<ExposedSample> = (0..4000)
        .map(|i| sample("rec", &[("hpa_target_name", &format!("w{i}"))], 2.0))
        .collect();
    store.record_success(&t, 1000, 1, page);
    let series = vec!["rec".to_string()];
    let sel = LabelSelector::parse("hpa_target_name=w17").unwrap();
    let inner = store.locked();
    let read = inner
        .postings
        .candidates(&series, "namespace", "default", sel.requirements());
    assert_eq!(read.values().map(Vec::len).sum::<usize>(), 1);
}

/// The evidence a full scan of every target finds: what the index must reproduce.
fn evidence_by_scan(store: &Store, scope: &Scope<'_>) -> Vec<(TargetId, Arc<str>, SeriesLabels)> {
    let inner = store.locked();
    let mut found: Vec<_> = inner
        .targets
        .values()
        .flat_map(|rec| {
            rec.series
                .values()
                .flat_map(HashMap::values)
                .filter_map(|slot| inner.slots.get(*slot))
                .map(move |s| (rec, s))
        })
        .filter(|(_, s)| scope_matches(scope, &s.name, &s.labels))
        .map(|(rec, s)| (rec.target.id.clone(), s.name.clone(), s.labels.clone()))
        .collect();
    found.sort();
    found
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    #[test]
    fn the_index_finds_exactly_what_a_full_scan_finds(
        pages in proptest::collection::vec(
            (0u8..3, proptest::collection::vec((0u8..3, 0u8..3, 0u8..3), 0..6)),
            1..12,
        ),
        keep in proptest::collection::vec(proptest::bool::ANY, 12),
        selector in 0usize..10,
        ns in 0u8..3,
    ) {
        let store = Store::new();
        let targets: Vec<ScrapeTarget> = pages
            .iter()
            .enumerate()
            .map(|(i, (tns, _))| {
                target(&format!("http://t{i}/m"), &[("namespace", &format!("n{tns}")), ("pod", &format!("p{i}"))])
            })
            .collect();
        store.set_targets(targets.clone());
        for (t, (_, samples)) in targets.iter().zip(&pages) {
            let page: Vec<ExposedSample> = samples
                .iter()
                .map(|(name, app, ver)| {
                    sample(&format!("s{name}"), &[("app", &format!("a{app}")), ("ver", &format!("v{ver}"))], 1.0)
                })
                .collect();
            store.record_success(t, 1000, 1, page);
        }
        // Drop some targets, so removal is exercised too.
        let kept: Vec<ScrapeTarget> = targets
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(t, _)| t.clone())
            .collect();
        store.set_targets(kept);
        let selectors = [
            "", "app=a1", "app in (a0,a2)", "app!=a1", "ver", "!ver", "app=a0,ver=v1", "pod=p3",
            "app in (a0,a1),ver=v2,pod!=p1", "namespace=n1,ver in (v0,v2)",
        ];
        let sel = LabelSelector::parse(selectors[selector]).unwrap();
        let series = vec!["s0".to_string(), "s2".to_string()];
        let namespace = format!("n{ns}");
        let scope = Scope { series: &series, namespace_label: "namespace", namespace: &namespace, selector: &sel };
        let indexed: Vec<_> = store
            .read(&scope, Read::Listed)
            .observations
            .into_iter()
            .map(|o| (o.id.target.clone(), o.id.series.clone(), o.id.labels.clone()))
            .collect();
        proptest::prop_assert_eq!(indexed, evidence_by_scan(&store, &scope));
    }

    /// The safety of answer reuse: whenever a scope's version is unchanged, so is
    /// everything an answer over it reads (apart from ages), whatever the writes between.
    #[test]
    fn an_unchanged_scope_version_means_unchanged_evidence(
        ops in proptest::collection::vec(
            (0usize..4, 0u8..5, proptest::collection::vec((0u8..2, 0u8..3, 0u8..3), 0..4)),
            1..40,
        ),
    ) {
        let store = Store::new();
        let mut targets: Vec<ScrapeTarget> = (0..4)
            .map(|i| target(&format!("http://t{i}/m"), &[("namespace", &format!("n{}", i % 2)), ("pod", &format!("p{i}"))]))
            .collect();
        store.set_targets(targets[..3].to_vec());
        let series = vec!["s0".to_string(), "s1".to_string()];
        let selectors: Vec<LabelSelector> = ["", "app=a1", "app in (a0,a2)", "app!=a1"]
            .iter()
            .map(|s| LabelSelector::parse(s).unwrap())
            .collect();
        let scopes: Vec<Scope<'_>> = ["n0", "n1"]
            .iter()
            .flat_map(|ns| selectors.iter().map(move |sel| (ns, sel)))
            .map(|(ns, sel)| Scope { series: &series, namespace_label: "namespace", namespace: ns, selector: sel })
            .collect();
        let reading = |scope: &Scope<'_>| {
            let ev = store.read(scope, Read::Listed);
            let obs: Vec<_> = ev
                .observations
                .iter()
                .map(|o| (o.id.target.clone(), o.id.series.clone(), o.id.labels.clone(), o.value.to_bits(), o.present, o.unusable, o.valid_until_ms, o.last_valid.map(|(v, _)| v), o.target_failing))
                .collect();
            let unknown: Vec<_> = ev.unknown_targets.iter().map(|u| (u.target.clone(), u.last_error.clone())).collect();
            (obs, unknown)
        };
        let mut before: Vec<_> = scopes.iter().map(|s| (store.scope_version([s.clone()]), reading(s))).collect();
        for (step, (t, kind, samples)) in ops.into_iter().enumerate() {
            let at = 1000 * (step as Millis + 2);
            match kind {
                0 | 1 => {
                    let page: Vec<ExposedSample> = samples
                        .iter()
                        .map(|(name, app, v)| sample(&format!("s{name}"), &[("app", &format!("a{app}"))], f64::from(*v)))
                        .collect();
                    store.record_success(&targets[t], at, 1, page);
                }
                2 => store.record_failure(&targets[t], at, 1, format!("e{}", samples.len() % 2)),
                // The pod comes back in the other namespace: its series leave one scope
                // and, once scraped, join another.
                3 => churn::move_namespace(&store, &mut targets, t),
                _ => churn::drop_target(&store, &targets, t),
            }
            for (scope, (version, read)) in scopes.iter().zip(before.iter_mut()) {
                let now = (store.scope_version([scope.clone()]), reading(scope));
                // Every scope was resolved before this step, so this also checks that a
                // kept resolution is dropped whenever the scope's series change.
                let found: Vec<_> = now.1 .0.iter().map(|o| (o.0.clone(), o.1.clone(), o.2.clone())).collect();
                proptest::prop_assert_eq!(found, evidence_by_scan(&store, scope), "after step {}", step);
                if now.0 == *version {
                    proptest::prop_assert_eq!(&now.1, &*read, "version {} unchanged after step {}", version, step);
                }
                *version = now.0;
                *read = now.1;
            }
        }
    }
}

#[test]
fn a_scope_is_resolved_again_only_when_its_series_change() {
    let store = Store::new();
    let (a, b) = (
        target("http://a/m", &[("namespace", "default"), ("pod", "a")]),
        target("http://b/m", &[("namespace", "default"), ("pod", "b")]),
    );
    store.set_targets(vec![a.clone(), b.clone()]);
    store.record_success(&a, 1000, 1, vec![sample("idx", &[("app", "x")], 1.0)]);
    store.record_success(&b, 1000, 1, vec![sample("idx", &[("app", "y")], 1.0)]);
    let (series, sel) = (
        vec!["idx".to_string()],
        LabelSelector::parse("app=x").unwrap(),
    );
    let scope = default_scope(&series, &sel);
    let resolution = || store.resolve(&store.locked(), &scope, &scope.key(), true);
    let first = resolution();
    assert_eq!(first.targets.len(), 1);
    // New values, and a new series outside the scope: the same resolution serves.
    store.record_success(&a, 2000, 1, vec![sample("idx", &[("app", "x")], 5.0)]);
    store.record_success(
        &b,
        2000,
        1,
        vec![
            sample("idx", &[("app", "y")], 2.0),
            sample("idx", &[("app", "z")], 2.0),
        ],
    );
    assert!(Arc::ptr_eq(&first, &resolution()));
    assert_eq!(store.read(&scope, Read::Listed).observations[0].value, 5.0);
    // A series joins the scope: worked out again, and the new series is read.
    store.record_success(&b, 3000, 1, vec![sample("idx", &[("app", "x")], 7.0)]);
    let second = resolution();
    assert!(!Arc::ptr_eq(&first, &second));
    assert_eq!(second.targets.len(), 2);
    let values: Vec<f64> = store
        .read(&scope, Read::Listed)
        .observations
        .iter()
        .map(|o| o.value)
        .collect();
    assert_eq!(values, vec![5.0, 7.0]);
    assert_eq!(store.resolved.len(), 1);
    // A one-off look reads the same and keeps nothing.
    let other = LabelSelector::parse("app=y").unwrap();
    let once = store.read(&default_scope(&series, &other), Read::Glance);
    assert_eq!(once.observations.len(), 1);
    assert_eq!(store.resolved.len(), 1);
}

#[test]
fn target_labels_win_and_conflicts_are_kept_as_exported() {
    let merged = merge_labels(
        &[
            ("namespace".into(), "other".into()),
            ("app".into(), "x".into()),
        ],
        &[("namespace".to_string(), "default".to_string())]
            .into_iter()
            .collect(),
    );
    assert_eq!(merged["namespace"], "default");
    assert_eq!(merged["exported_namespace"], "other");
    assert_eq!(merged["app"], "x");
}

#[test]
fn failures_keep_the_last_valid_value_and_removal_forgets_it() {
    let store = Store::new();
    let t = target("http://a/m", &[("namespace", "default")]);
    store.set_targets(vec![t.clone()]);
    store.record_success(&t, 1000, 1, vec![sample("idx", &[], 3.0)]);
    store.record_failure(&t, 2000, 1, "refused".into());
    let (series, sel) = (vec!["idx".to_string()], LabelSelector::everything());
    let scope = default_scope(&series, &sel);
    let ev = store.read(&scope, Read::Listed);
    assert_eq!(ev.observations.len(), 1);
    assert_eq!(ev.observations[0].last_valid, Some((3, 1000)));
    assert!(ev.observations[0].target_failing);
    store.set_targets(vec![]);
    assert!(store.read(&scope, Read::Listed).observations.is_empty());
}

#[test]
fn a_page_from_a_replaced_target_is_not_recorded() {
    let store = Store::new();
    let old = target("http://10.0.0.1/m", &[("namespace", "default")]);
    let mut new = old.clone();
    new.url = "http://10.0.0.2/m".into();
    store.set_targets(vec![old.clone()]);
    store.set_targets(vec![new.clone()]);
    store.record_success(&old, 1000, 1, vec![sample("idx", &[], 3.0)]);
    let (_, health) = &store.target_health()[0];
    assert!(
        !health.ever_succeeded(),
        "the old pod's page marked the new pod scraped"
    );
    store.record_success(&new, 2000, 1, vec![sample("idx", &[], 3.0)]);
    assert!(store.target_health()[0].1.ever_succeeded());
}

#[test]
fn invalid_values_do_not_replace_the_last_valid_one() {
    let store = Store::new();
    let t = target("http://a/m", &[("namespace", "default")]);
    store.set_targets(vec![t.clone()]);
    store.record_success(&t, 1000, 1, vec![sample("idx", &[], 2.0)]);
    store.record_success(&t, 2000, 1, vec![sample("idx", &[], f64::NAN)]);
    let (series, sel) = (vec!["idx".to_string()], LabelSelector::everything());
    let scope = default_scope(&series, &sel);
    let ob = &store.read(&scope, Read::Listed).observations[0];
    assert!(ob.value.is_nan());
    assert_eq!(ob.last_valid, Some((2, 1000)));
}

#[test]
fn never_scraped_targets_in_another_namespace_are_not_unknown() {
    let store = Store::new();
    store.set_targets(vec![
        target("http://a/m", &[("namespace", "default")]),
        target("http://b/m", &[("namespace", "other")]),
    ]);
    let (series, sel) = (vec!["idx".to_string()], LabelSelector::everything());
    let scope = default_scope(&series, &sel);
    let ev = store.read(&scope, Read::Listed);
    assert_eq!(ev.unknown_targets.len(), 1);
    assert_eq!(&*ev.unknown_targets[0].target.0, "http://a/m");
}

#[test]
fn never_scraped_pods_of_other_workloads_do_not_make_the_scope_unknown() {
    let store = Store::new();
    let pod = |name: &str, workload: &str| ScrapeTarget {
        workload: Some(WorkloadRef {
            kind: "StatefulSet".into(),
            namespace: "default".into(),
            name: workload.into(),
        }),
        ..target(name, &[("namespace", "default")])
    };
    let lobby_0 = pod("lobby-0", "lobby");
    store.set_targets(vec![
        lobby_0.clone(),
        pod("lobby-1", "lobby"),
        pod("chat-0", "chat"),
    ]);
    store.record_success(
        &lobby_0,
        1000,
        1,
        vec![sample("idx", &[("app", "lobby")], 1.0)],
    );
    let series = vec!["idx".to_string()];
    let sel = LabelSelector::parse("app=lobby").unwrap();
    let scope = default_scope(&series, &sel);
    let ev = store.read(&scope, Read::Listed);
    let unknown: Vec<&str> = ev.unknown_targets.iter().map(|u| &*u.target.0).collect();
    assert_eq!(unknown, ["lobby-1"]);
    assert_eq!(ev.workloads.len(), 1);
    // Nothing observed yet: every never-scraped candidate counts, and so do their workloads.
    store.set_targets(vec![pod("lobby-1", "lobby"), pod("chat-0", "chat")]);
    let ev = store.read(&scope, Read::Listed);
    assert_eq!(ev.unknown_targets.len(), 2);
    assert_eq!(ev.workloads.len(), 2);
}

#[test]
fn a_changed_target_starts_over_as_never_scraped() {
    let store = Store::new();
    let t = target("p", &[("namespace", "default")]);
    store.set_targets(vec![t.clone()]);
    store.record_success(&t, 1000, 1, vec![sample("idx", &[], 2.0)]);
    let moved = ScrapeTarget {
        url: "http://other/m".into(),
        ..t.clone()
    };
    store.set_targets(vec![moved]);
    let series = vec!["idx".to_string()];
    let sel = LabelSelector::everything();
    let scope = default_scope(&series, &sel);
    let ev = store.read(&scope, Read::Listed);
    assert!(ev.observations.is_empty());
    assert_eq!(ev.unknown_targets.len(), 1);
}

#[test]
fn invalid_reasons() {
    assert_eq!(invalid_reason(f64::NAN), Some("NaN"));
    assert_eq!(invalid_reason(f64::INFINITY), Some("infinite"));
    assert_eq!(invalid_reason(-1.0), Some("negative"));
    assert_eq!(invalid_reason(2.5), Some("not an integer"));
    assert_eq!(invalid_reason(1e12), Some("implausibly large"));
    assert_eq!(invalid_reason(7.0), None);
    assert_eq!(invalid_reason(0.0), None);
}

/// A producer's time further ahead than `scrape.maxClockSkew` makes the sample unusable and
/// unretained; within it, the time reads as the scrape's. A page's `validUntil` reaches every
/// series of it.
#[test]
fn samples_from_the_future_are_unusable_and_valid_until_reaches_each_series() {
    let store = Store::with_max_clock_skew(10_000);
    let t = target("http://a/m", &[("namespace", "default")]);
    store.set_targets(vec![t.clone()]);
    let at = |ts: i64| ExposedSample {
        timestamp_ms: Some(ts),
        ..sample("idx", &[], 3.0)
    };
    let s = vec!["idx".to_string()];
    let sel = LabelSelector::everything();
    let read = || {
        store
            .read(&default_scope(&s, &sel), Read::Listed)
            .observations[0]
            .clone()
    };
    store.record_success(&t, 100_000, 1, vec![at(110_000)]);
    let o = read();
    assert_eq!(
        (o.unusable, o.observed_at_ms, o.last_valid),
        (None, 100_000, Some((3, 100_000)))
    );
    store.record_success(
        &t,
        200_000,
        1,
        Page {
            samples: vec![ExposedSample {
                value: 5.0,
                ..at(210_001)
            }],
            valid_until_ms: Some(250_000),
            reason: Some("stuck".into()),
        },
    );
    let o = read();
    assert_eq!(o.unusable, Some(Unusable::FromTheFuture));
    assert_eq!(
        o.last_valid,
        Some((3, 100_000)),
        "the future value is not retained"
    );
    assert_eq!(o.valid_until_ms, Some(250_000));
    let now = |wall| Now { wall, mono: 0 };
    assert!(!o.expired(now(250_000)) && o.expired(now(250_001)));
    let health = &store.target_health()[0].1;
    assert_eq!(health.producer_reason.as_deref(), Some("stuck"));
}

/// A producer's time older than the sample a series holds is out of order (Prometheus rejects
/// it): the series reads as unusable, keeps the newer sample's time and its retained value, and
/// the next sample in order is read as usual.
#[test]
fn a_sample_older_than_the_one_held_is_out_of_order() {
    let store = Store::with_max_clock_skew(10_000);
    let t = target("http://a/m", &[("namespace", "default")]);
    store.set_targets(vec![t.clone()]);
    let at = |ts: i64, v: f64| ExposedSample {
        timestamp_ms: Some(ts),
        ..sample("idx", &[], v)
    };
    let s = vec!["idx".to_string()];
    let sel = LabelSelector::everything();
    let read = || {
        store
            .read(&default_scope(&s, &sel), Read::Listed)
            .observations[0]
            .clone()
    };
    store.record_success(&t, 100_000, 1, vec![at(100_000, 9.0)]);
    store.record_success(&t, 101_000, 1, vec![at(80_000, 2.0)]);
    let o = read();
    assert_eq!(o.unusable, Some(Unusable::OutOfOrder));
    assert!(o.present && o.value.is_nan());
    assert_eq!(
        (o.observed_at_ms, o.last_valid),
        (100_000, Some((9, 100_000))),
        "the older sample neither replaces the time nor lowers the retained value"
    );
    // The same time again with the same value is the same sample, in order; with another
    // value it is a duplicate sample, refused as Prometheus refuses it: the series keeps the
    // held sample and reads as unknown.
    store.record_success(&t, 102_000, 1, vec![at(100_000, 9.0)]);
    let o = read();
    assert_eq!((o.unusable, o.value), (None, 9.0));
    let outcome = store.record_success(&t, 102_500, 1, vec![at(100_000, 4.0)]);
    assert_eq!(outcome.out_of_order, 1);
    let o = read();
    assert_eq!(o.unusable, Some(Unusable::DuplicateTimestamp));
    assert_eq!(
        (o.observed_at_ms, o.last_valid),
        (100_000, Some((9, 100_000)))
    );
    // A sample without a time of its own is in order.
    store.record_success(&t, 103_000, 1, vec![sample("idx", &[], 3.0)]);
    let o = read();
    assert_eq!(
        (o.unusable, o.value, o.observed_at_ms),
        (None, 3.0, 103_000)
    );
    // Held twice, where the first is out of order: it stays out of order (its time is the
    // held one), and the retained value stands.
    let outcome = store.record_success(&t, 104_000, 1, vec![at(1_000, 1.0), at(104_000, 1.0)]);
    assert_eq!((outcome.out_of_order, outcome.duplicates), (1, 1));
    let o = read();
    assert_eq!(o.unusable, Some(Unusable::OutOfOrder));
    assert_eq!(
        (o.observed_at_ms, o.last_valid),
        (103_000, Some((3, 103_000)))
    );
    // Where the second is: the pair is ambiguous.
    let outcome = store.record_success(&t, 105_000, 1, vec![at(105_000, 1.0), at(1_000, 1.0)]);
    assert_eq!((outcome.out_of_order, outcome.duplicates), (0, 1));
    let o = read();
    assert_eq!(o.unusable, Some(Unusable::Duplicated));
    assert_eq!(
        (o.observed_at_ms, o.last_valid),
        (105_000, Some((3, 103_000)))
    );
    // This process's wall clock steps back: the exporter's next time, still ahead of the
    // scrape's (within scrape.maxClockSkew), is in order; it ages from the scrape's time.
    store.record_success(&t, 106_000, 1, vec![at(106_000, 2.0)]);
    store.record_success(&t, 101_000, 1, vec![at(107_000, 6.0)]);
    let o = read();
    assert_eq!(
        (o.unusable, o.value, o.observed_at_ms),
        (None, 6.0, 101_000)
    );
}

/// The scope's rule read plainly: the name listed, the namespace, the whole selector.
fn scope_matches(scope: &Scope<'_>, name: &str, labels: &BTreeMap<String, String>) -> bool {
    scope.series.iter().any(|s| s == name)
        && labels.get(scope.namespace_label).map(String::as_str) == Some(scope.namespace)
        && scope.selector.matches(labels)
}
/// A target list that changes nothing leaves every version as it was, so no answer computed
/// before it differs from one computed after (answer reuse, the scrape schedule); one that
/// changes a target moves them.
#[test]
fn the_same_target_list_again_changes_no_version() {
    let store = Store::new();
    let a = target("http://a/m", &[("namespace", "default"), ("pod", "a")]);
    let b = target("http://b/m", &[("namespace", "default"), ("pod", "b")]);
    let change = |added, removed, replaced| TargetSetChange {
        added,
        removed,
        replaced,
    };
    assert_eq!(
        store.set_targets(vec![a.clone(), b.clone()]),
        change(2, 0, 0)
    );
    store.record_success(&a, 1_000, 1, vec![sample("hpa_expect_replicas", &[], 3.0)]);
    let series = vec!["hpa_expect_replicas".to_string()];
    let selector = LabelSelector::everything();
    let scope = || default_scope(&series, &selector);
    let versions = |s: &Store| {
        (
            s.generation(),
            s.target_set_version(),
            s.scope_version([scope()]),
        )
    };
    let before = versions(&store);
    assert_eq!(
        store.set_targets(vec![b.clone(), a.clone()]),
        change(0, 0, 0)
    );
    assert_eq!(versions(&store), before);
    let moved = target(
        "http://b/m",
        &[("namespace", "default"), ("pod", "b"), ("v", "2")],
    );
    assert_eq!(store.set_targets(vec![a.clone(), moved]), change(0, 0, 1));
    let after = versions(&store);
    assert!(after.0 > before.0 && after.1 > before.1 && after.2 > before.2);
    assert_eq!(store.set_targets(vec![a.clone()]), change(0, 1, 0));
    assert!(versions(&store).1 > after.1);
    assert_eq!(store.targets().len(), 1);
}

/// A target listed twice takes each version in turn, as a list applied in order does: listed
/// changed and then as it was, it starts over unscraped, in its last listed version; listed
/// twice as it is, nothing changes.
#[test]
fn a_target_listed_twice_is_applied_in_order() {
    let store = Store::new();
    let a = target("http://a/m", &[("namespace", "default"), ("pod", "a")]);
    store.set_targets(vec![a.clone()]);
    store.record_success(&a, 1_000, 1, vec![sample("hpa_expect_replicas", &[], 3.0)]);
    let series = vec!["hpa_expect_replicas".to_string()];
    let selector = LabelSelector::everything();
    assert_eq!(
        store
            .read(&default_scope(&series, &selector), Read::Listed)
            .observations
            .len(),
        1
    );
    let generation = store.generation();
    store.set_targets(vec![a.clone(), a.clone()]);
    assert_eq!(store.generation(), generation);
    let changed = target(
        "http://a/m",
        &[("namespace", "default"), ("pod", "a"), ("v", "2")],
    );
    store.set_targets(vec![changed, a.clone()]);
    assert_eq!(
        store
            .targets()
            .iter()
            .map(|t| (**t).clone())
            .collect::<Vec<_>>(),
        vec![a]
    );
    let ev = store.read(&default_scope(&series, &selector), Read::Listed);
    assert!(ev.observations.is_empty());
    assert_eq!(ev.unknown_targets.len(), 1);
}

/// `k=` and `k in (,a)` select series without `k`, as Prometheus's `k=""` and `k=~"|a"` do:
/// the index cannot list them by value, so the requirement is checked on each series.
#[test]
fn an_empty_selector_value_matches_series_without_the_label() {
    let store = Store::new();
    let a = target("http://a/m", &[("namespace", "default")]);
    let b = target("http://b/m", &[("namespace", "default")]);
    store.set_targets(vec![a.clone(), b.clone()]);
    store.record_success(&a, 1000, 1, vec![sample("rec", &[("shard", "")], 5.0)]);
    store.record_success(&b, 1000, 1, vec![sample("rec", &[("shard", "a")], 2.0)]);
    let series = vec!["rec".to_string()];
    for (text, want) in [
        ("shard=", vec!["http://a/m"]),
        ("shard in (,a)", vec!["http://a/m", "http://b/m"]),
        ("shard!=", vec!["http://b/m"]),
        ("shard notin (,a)", vec![]),
        ("shard in (a)", vec!["http://b/m"]),
    ] {
        let sel = LabelSelector::parse(text).unwrap();
        let ev = store.read(&default_scope(&series, &sel), Read::Listed);
        let got: Vec<&str> = ev.observations.iter().map(|o| &*o.id.target.0).collect();
        assert_eq!(got, want, "{text}");
    }
}

/// A static target whose own labels put it in a scope, with pages that hold none of its
/// series, is listed as silent; one whose labels leave the scope to its exporter is not.
#[test]
fn a_static_target_in_scope_without_its_series_is_silent() {
    let store = Store::new();
    let lobby = target(
        "http://lobby-2/m",
        &[("namespace", "default"), ("app", "lobby")],
    );
    let loose = target("http://other/m", &[("namespace", "default")]);
    let pod = target(
        "http://lobby-0/m",
        &[("namespace", "default"), ("app", "lobby")],
    );
    store.set_targets(vec![lobby.clone(), loose.clone(), pod.clone()]);
    store.record_success(&pod, 1000, 1, vec![sample("idx", &[], 1.0)]);
    let series = vec!["idx".to_string()];
    let sel = LabelSelector::parse("app=lobby").unwrap();
    let silent = || {
        store
            .read(&default_scope(&series, &sel), Read::Listed)
            .silent_targets
    };
    assert!(silent().is_empty(), "never scraped: unknown, not silent");
    store.record_success(&lobby, 1000, 1, vec![sample("rec", &[], 1.0)]);
    store.record_success(&loose, 1000, 1, vec![sample("rec", &[], 1.0)]);
    assert_eq!(silent(), vec![TargetId("http://lobby-2/m".into())]);
    store.record_success(&lobby, 2000, 1, vec![sample("idx", &[], 0.0)]);
    assert!(silent().is_empty());
}
