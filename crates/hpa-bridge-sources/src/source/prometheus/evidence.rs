//! Prometheus series mapped to `Evidence`: freshness, retained values, gone series, and the
//! pod set's view of which pods exist.

use super::*;

/// The result of one scope's queries, evaluated at `eval_ms`.
#[derive(Clone, Debug)]
pub struct ScopeSamples {
    pub eval_ms: Millis,
    pub fresh: Vec<PromSeries>,
    pub retained: Vec<PromSeries>,
}

pub(crate) fn target_of(labels: &BTreeMap<String, String>) -> TargetId {
    match (labels.get("job"), labels.get("instance")) {
        (Some(job), Some(instance)) => TargetId(format!("{job}/{instance}").into()),
        _ => {
            let text = labels
                .iter()
                .filter(|(k, _)| k.as_str() != "__name__")
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join(",");
            TargetId(format!("{{{text}}}").into())
        }
    }
}

pub(crate) fn valid(v: f64) -> Option<u64> {
    invalid_reason(v).is_none().then_some(v as u64)
}

/// Which pods exist, for filtering series by their pod label.
pub struct PodFilter<'a> {
    pub label: &'a str,
    /// The namespace the pods live in (the scope's), for the ids of unknown pods.
    pub namespace: &'a str,
    pub pods: &'a BTreeMap<String, PodFacts>,
}

/// The raw samples of a fresh series without trailing staleness markers. Prometheus leaves the
/// markers out of range results; VictoriaMetrics returns them as `NaN` samples, so a series
/// whose target just failed would look fresh with a NaN value instead of stale. JSON cannot
/// tell a marker from an exported NaN, but `last_over_time` skips markers and not exported
/// NaNs: when the series' retained value (same evaluation time) is a number, the NaNs after
/// its last number are markers.
fn without_staleness_markers<'s>(
    series: &'s PromSeries,
    retained: &BTreeMap<BTreeMap<String, String>, f64>,
) -> &'s [(Millis, f64)] {
    let mut samples = series.samples.as_slice();
    if retained.get(&series.labels).is_some_and(|v| !v.is_nan()) {
        while let Some((&(_, v), rest)) = samples.split_last() {
            if !v.is_nan() {
                break;
            }
            samples = rest;
        }
    }
    samples
}

/// Turns one scope's query results into the evidence the scrape store would give for the
/// same series. Pure: `stale_after_ms` is the freshness window the fresh query used.
pub fn evidence_from(
    samples: &ScopeSamples,
    stale_after_ms: Millis,
    now: Millis,
    pods: Option<PodFilter<'_>>,
) -> Evidence {
    let mut gone: HashSet<BTreeMap<String, String>> = HashSet::new();
    let mut retained: BTreeMap<BTreeMap<String, String>, f64> = BTreeMap::new();
    for s in &samples.retained {
        let Some(&(_, v)) = s.samples.last() else {
            continue;
        };
        if s.labels.contains_key(GONE_LABEL) {
            let mut key = s.labels.clone();
            key.remove(GONE_LABEL);
            key.remove(NAME_COPY_LABEL);
            gone.insert(key);
        } else {
            retained.insert(s.labels.clone(), v);
        }
    }
    let fresh: BTreeMap<&BTreeMap<String, String>, &[(Millis, f64)]> = samples
        .fresh
        .iter()
        .map(|s| (&s.labels, without_staleness_markers(s, &retained)))
        .filter(|(_, samples)| !samples.is_empty())
        .collect();
    let keys: BTreeSet<&BTreeMap<String, String>> =
        retained.keys().chain(fresh.keys().copied()).collect();
    let mut ev = Evidence::default();
    for key in keys {
        let Some(name) = key.get("__name__") else {
            continue;
        };
        if let Some(filter) = &pods {
            if let Some(pod) = key.get(filter.label) {
                if !filter.pods.contains_key(pod) {
                    continue;
                }
            }
        }
        let mut labels = key.clone();
        labels.remove("__name__");
        let target = target_of(key);
        let observation = match fresh.get(key) {
            Some(series) => {
                let &(at, value) = series.last().expect("non-empty");
                let last_valid = series
                    .iter()
                    .rev()
                    .find_map(|&(t, v)| valid(v).map(|v| (v, t)));
                Observation {
                    id: hpa_bridge_rules::evidence::SeriesRef::new(
                        target,
                        name.as_str().into(),
                        labels.into(),
                    ),
                    value,
                    observed_at_ms: at,
                    // The server's wall-clock time of the sample: only the wall clock ages it.
                    scraped_mono_ms: None,
                    last_valid,
                    present: true,
                    target_failing: false,
                    unusable: None,
                    valid_until_ms: None,
                }
            }
            None => {
                let value = retained.get(key).copied().unwrap_or(f64::NAN);
                // No sample within staleAfter: Prometheus cannot cheaply say how old the last
                // one is (see the module docs), so the age is the lower bound, just past the
                // window. The policy only needs to know that it is stale. The query may have
                // been evaluated after the asking request read its clock (a shared or slow
                // query): measured from the evaluation time, the series would read as fresh
                // at the request's `now` and serve its old value. Measured from the earlier of
                // the two, it reads as stale, the side that never lowers an answer.
                let at = samples.eval_ms.min(now) - stale_after_ms - 1;
                let present = !gone.contains(key);
                Observation {
                    id: hpa_bridge_rules::evidence::SeriesRef::new(
                        target,
                        name.as_str().into(),
                        labels.into(),
                    ),
                    value,
                    observed_at_ms: at,
                    scraped_mono_ms: None,
                    last_valid: valid(value).map(|v| (v, at)),
                    present,
                    target_failing: present,
                    unusable: None,
                    valid_until_ms: None,
                }
            }
        };
        ev.observations.push(observation);
    }
    ev.observations.sort_by(|a, b| {
        (&a.id.target, &a.id.series, &a.id.labels).cmp(&(&b.id.target, &b.id.series, &b.id.labels))
    });
    if let Some(filter) = &pods {
        attribute_to_pods(&mut ev, filter);
    }
    ev
}

/// With Kubernetes: name the workloads behind the observations (for `spec.replicas` and
/// `ordinals.start`), and report each Running pod of those workloads that has no in-scope
/// series in Prometheus as unknown, as the scrape store reports a pod it has never scraped
/// successfully: the floor is incomplete until Prometheus has seen it (docs/hpa-behaviour.md §4.1).
/// A pod of another workload cannot hold this workload's state, so it is not counted; with no
/// workload observed at all nothing is, since Prometheus cannot tell a pod that never exported
/// the series from one it never scraped.
pub(crate) fn attribute_to_pods(ev: &mut Evidence, filter: &PodFilter<'_>) {
    let observed: BTreeSet<&str> = ev
        .observations
        .iter()
        .filter_map(|o| o.id.labels.get(filter.label))
        .map(String::as_str)
        .collect();
    let mut workloads = ev.workloads.to_vec();
    for pod in &observed {
        if let Some(w) = filter.pods.get(*pod).and_then(|f| f.workload.as_ref()) {
            if !workloads.contains(w) {
                workloads.push(w.clone());
            }
        }
    }
    ev.workloads = workloads.into();
    for (name, facts) in filter.pods {
        let in_scope = facts
            .workload
            .as_ref()
            .is_some_and(|w| ev.workloads.contains(w));
        if facts.running && in_scope && !observed.contains(name.as_str()) {
            ev.unknown_targets.push(UnknownTarget {
                target: TargetId(format!("{}/{name}", filter.namespace).into()),
                last_error: Some(
                    "Kubernetes reports the pod Running, but Prometheus has no in-scope series \
                     for it within retainFor"
                        .into(),
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_bridge_rules::cluster::WorkloadRef;
    fn series(labels: &[(&str, &str)], samples: &[(Millis, f64)]) -> PromSeries {
        PromSeries {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            samples: samples.to_vec(),
        }
    }

    fn labels(name: &str, instance: &str) -> Vec<(&'static str, String)> {
        vec![
            ("__name__", name.to_string()),
            ("instance", instance.to_string()),
            ("job", "j".to_string()),
            ("namespace", "default".to_string()),
            ("pod", instance.to_string()),
        ]
    }

    fn s(
        l: &[(&'static str, String)],
        extra: &[(&'static str, &str)],
        samples: &[(Millis, f64)],
    ) -> PromSeries {
        let mut all: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
        all.extend_from_slice(extra);
        series(&all, samples)
    }

    #[test]
    fn trailing_staleness_markers_make_a_series_stale_not_nan() {
        // VictoriaMetrics returns the marker written when a target failed as a NaN sample;
        // `last_over_time` skipped it (retained 4). c1 has only the marker within staleAfter:
        // stale, as Prometheus (which returns no sample) makes it. c3 has a number before the
        // marker: fresh with that number. An exported NaN (c2) is kept: there
        // `last_over_time` returns the NaN itself.
        let eval = 1_000_000;
        let marked = labels("hpa_expect_replicas", "c1");
        let exported_nan = labels("hpa_expect_replicas", "c2");
        let marked_after_value = labels("hpa_expect_replicas", "c3");
        let samples = ScopeSamples {
            eval_ms: eval,
            fresh: vec![
                s(&marked, &[], &[(eval - 1_000, f64::NAN)]),
                s(
                    &exported_nan,
                    &[],
                    &[(eval - 2_000, 6.0), (eval - 1_000, f64::NAN)],
                ),
                s(
                    &marked_after_value,
                    &[],
                    &[(eval - 2_000, 4.0), (eval - 1_000, f64::NAN)],
                ),
            ],
            retained: vec![
                s(&marked, &[], &[(eval, 4.0)]),
                s(&exported_nan, &[], &[(eval, f64::NAN)]),
                s(&marked_after_value, &[], &[(eval, 4.0)]),
            ],
        };
        let ev = evidence_from(&samples, 3_000, eval, None);
        let find = |inst: &str| {
            ev.observations
                .iter()
                .find(|o| o.id.labels["instance"] == inst)
                .unwrap()
        };
        let c1 = find("c1");
        assert_eq!(c1.value, 4.0);
        assert!(eval - c1.observed_at_ms > 3_000, "stale: {c1:?}");
        assert!(c1.present && c1.target_failing, "{c1:?}");
        let c2 = find("c2");
        assert!(c2.value.is_nan());
        assert_eq!(c2.observed_at_ms, eval - 1_000);
        assert_eq!(c2.last_valid, Some((6, eval - 2_000)));
        let c3 = find("c3");
        assert_eq!((c3.value, c3.observed_at_ms), (4.0, eval - 2_000));
        assert!(c3.present && !c3.target_failing, "{c3:?}");
    }

    #[test]
    fn a_series_stale_at_evaluation_reads_stale_for_a_request_that_asked_earlier() {
        // The query ran 5 ms after the request read its clock (shared, or started late on a
        // loaded machine). c1 has no sample within staleAfter at evaluation: it must not turn
        // fresh, with its old value, at the request's earlier `now`.
        let eval = 1_000_000;
        let c1 = labels("hpa_expect_replicas", "c1");
        let c2 = labels("hpa_expect_replicas", "c2");
        let samples = ScopeSamples {
            eval_ms: eval,
            fresh: vec![s(&c2, &[], &[(eval - 100, 5.0)])],
            retained: vec![s(&c1, &[], &[(eval, 6.0)]), s(&c2, &[], &[(eval, 5.0)])],
        };
        let asked = eval - 5;
        let ev = evidence_from(&samples, 3_000, asked, None);
        let now = hpa_bridge_rules::clock::Now::from(asked);
        let age = |inst: &str| {
            ev.observations
                .iter()
                .find(|o| o.id.labels["instance"] == inst)
                .map(|o| o.age_ms(now))
                .unwrap()
        };
        assert!(age("c1") > 3_000, "stale at the request's now");
        assert!(age("c2") <= 3_000, "a sample in the window stays fresh");
    }

    #[test]
    fn evidence_maps_fresh_stale_and_gone_series() {
        let eval = 1_000_000;
        let fresh_a = labels("hpa_expect_replicas", "c1");
        let alias_a = labels("hpa_expect_replicas_count", "c1");
        let stale_b = labels("hpa_expect_replicas", "c2");
        let gone_c = labels("hpa_expect_replicas", "c3");
        let samples = ScopeSamples {
            eval_ms: eval,
            fresh: vec![
                s(
                    &fresh_a,
                    &[],
                    &[(eval - 2_000, 4.0), (eval - 1_000, f64::NAN)],
                ),
                s(&alias_a, &[], &[(eval - 1_000, 5.0)]),
            ],
            retained: vec![
                s(&fresh_a, &[], &[(eval, f64::NAN)]),
                s(&alias_a, &[], &[(eval, 5.0)]),
                s(&stale_b, &[], &[(eval, 9.0)]),
                s(&gone_c, &[], &[(eval, 8.0)]),
                s(
                    &gone_c,
                    &[(GONE_LABEL, "1"), (NAME_COPY_LABEL, "hpa_expect_replicas")],
                    &[(eval, 8.0)],
                ),
            ],
        };
        let ev = evidence_from(&samples, 3_000, eval, None);
        assert_eq!(ev.observations.len(), 4, "{ev:?}");
        let find = |inst: &str, name: &str| {
            ev.observations
                .iter()
                .find(|o| o.id.labels["instance"] == inst && &*o.id.series == name)
                .unwrap()
        };
        let a = find("c1", "hpa_expect_replicas");
        assert!(a.value.is_nan());
        assert_eq!(a.observed_at_ms, eval - 1_000);
        assert_eq!(a.last_valid, Some((4, eval - 2_000)));
        assert!(a.present && !a.target_failing);
        assert!(!a.id.labels.contains_key("__name__"));
        assert_eq!(&*a.id.target.0, "j/c1");
        assert_eq!(find("c1", "hpa_expect_replicas_count").value, 5.0);
        let b = find("c2", "hpa_expect_replicas");
        assert!(
            eval - b.observed_at_ms > 3_000,
            "stale by more than staleAfter"
        );
        assert_eq!(b.last_valid.map(|(v, _)| v), Some(9));
        assert!(b.present && b.target_failing);
        let c = find("c3", "hpa_expect_replicas");
        assert!(!c.present, "gone from a healthy target");

        // Only existing pods count once discovery knows them; a pod that exists but is not
        // Running (its exporter is down) keeps its series.
        let lobby = WorkloadRef {
            kind: "StatefulSet".into(),
            namespace: "default".into(),
            name: "lobby".into(),
        };
        let other = WorkloadRef {
            name: "chat".into(),
            ..lobby.clone()
        };
        let facts = |running: bool, w: &WorkloadRef| PodFacts {
            running,
            workload: Some(w.clone()),
            ..PodFacts::default()
        };
        let pods: BTreeMap<String, PodFacts> = [
            ("c1", facts(true, &lobby)),
            ("c3", facts(false, &lobby)),
            // Running, same workload, nothing in Prometheus yet: unknown.
            ("c4", facts(true, &lobby)),
            // Not Running yet: no exporter to wait for.
            ("c5", facts(false, &lobby)),
            // Another workload's new pod cannot hold lobby's state.
            ("c6", facts(true, &other)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let ev = evidence_from(
            &samples,
            3_000,
            eval,
            Some(PodFilter {
                label: "pod",
                namespace: "default",
                pods: &pods,
            }),
        );
        assert!(ev.observations.iter().all(|o| o.id.labels["pod"] != "c2"));
        assert!(ev.observations.iter().any(|o| o.id.labels["pod"] == "c3"));
        assert_eq!(*ev.workloads, [lobby]);
        let unknown: Vec<&str> = ev.unknown_targets.iter().map(|u| &*u.target.0).collect();
        assert_eq!(unknown, vec!["default/c4"]);
        assert_eq!(ev.observations.len(), 3);
    }
}
