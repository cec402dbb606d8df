//! The status page with many scopes: rendering `/` for 1,000 tracked scopes with
//! full rings, against serializing the same entries as JSON (serde_json) in the same run; and
//! the resident memory each full scope costs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use hpa_bridge_engine::engine::history::{Filter, History, HistoryKey, Limits, ENTRY_BYTES};
use hpa_bridge_rules::policy::{self, Answer, InputNote, Outcome, RefusalKind};
use hpa_bridge_server::api::status_page::{render, Page};

use super::figure::Figure;

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageResult {
    pub scopes: usize,
    pub entries_per_scope: usize,
    pub render_ms: f64,
    pub json_ms: f64,
    pub page_bytes: usize,
    pub json_bytes: usize,
    pub rss_per_scope_bytes: Option<f64>,
    pub entry_bytes: usize,
}

fn answer(metric: &str, outcome: Outcome, reason: String) -> Answer {
    Answer {
        metric: metric.into(),
        kind: "recommendation",
        outcome,
        rule: "max over fresh series, never sum".into(),
        reason,
        inputs: (0..2)
            .map(|i| InputNote {
                id: hpa_bridge_rules::evidence::SeriesRef::new(
                    hpa_bridge_rules::evidence::TargetId(
                        format!("http://10.0.{i}.7:9102/metrics").into(),
                    ),
                    "hpa_expect_replicas".into(),
                    BTreeMap::from([
                        ("hpa_target_name".to_string(), "lobby".to_string()),
                        ("service_instance_id".to_string(), format!("ctl-{i}")),
                    ])
                    .into(),
                ),
                value: policy::RawValue(4.0),
                age_seconds: 3.0,
                status: "fresh".into(),
                used: true,
            })
            .collect(),
        omitted_inputs: Default::default(),
        parts: Vec::new(),
        warnings: Vec::new(),
        producer_reasons: Vec::new(),
    }
}

/// One served target at step `i`: values that move, a floor that sometimes holds, and a
/// refusal run now and then (a stale recommender, whose reason changes every time).
fn served(i: usize) -> Answer {
    let rec = if i % 40 >= 30 {
        answer(
            "hpa_expect_replicas",
            Outcome::Refused {
                kind: RefusalKind::Stale,
                known_lower_bound: None,
            },
            format!(
                "no fresh series of hpa_expect_replicas: 2 are stale ({}s old, staleAfter 30s)",
                31 + i % 10
            ),
        )
    } else {
        answer(
            "hpa_expect_replicas",
            Outcome::Value {
                value: (3 + i % 7) as u64,
                timestamp_ms: 0,
            },
            format!("max of 2 fresh series = {}", 3 + i % 7),
        )
    };
    let floor = answer(
        "hpa_stateful_floor",
        Outcome::Value {
            value: 5,
            timestamp_ms: 0,
        },
        "highest retained stateful index 5".into(),
    );
    policy::target("hpa_target_replicas", rec, Some(floor), Err("not needed"))
}

pub(super) fn history(scopes: usize, limits: Limits) -> History {
    let mut h = History::new(limits);
    let start = 1_000_000_000_000i64;
    for step in 0..limits.capacity {
        let a = served(step);
        for s in 0..scopes {
            h.record(
                &HistoryKey {
                    metric: "hpa_target_replicas".into(),
                    namespace: format!("ns-{}", s % 20),
                    scope: format!("hpa_target_name=workload-{s}"),
                },
                &a,
                // Known, so the page draws every line it can.
                Some(5),
                start + (step as i64) * 15_000,
            );
        }
    }
    h
}

/// The best of a few timed repetitions (at least `min` in total).
fn time<T>(min: Duration, mut f: impl FnMut() -> T) -> (f64, T) {
    let started = Instant::now();
    let mut best = f64::MAX;
    let mut out = f();
    while started.elapsed() < min {
        let t = Instant::now();
        out = f();
        best = best.min(t.elapsed().as_secs_f64() * 1000.0);
    }
    (best, out)
}

/// `measure_memory`: whether the VmRSS delta of filling the history can be read as its size,
/// which it can only before other parts freed memory the allocator would refill.
pub fn run(quick: bool, measure_memory: bool) -> PageResult {
    let scopes = 1000;
    let limits = Limits::default();
    let rss = || {
        super::memory()
            .map(|(rss, _)| rss)
            .filter(|_| measure_memory)
    };
    let before = rss();
    let h = history(scopes, limits);
    let after = rss();
    let now = 1_000_000_000_000i64 + (limits.capacity as i64) * 15_000;
    let snapshot = h.snapshot(&Filter::default(), now);
    let min = Duration::from_millis(if quick { 300 } else { 3000 });
    let (render_ms, page) = time(min, || {
        render(&Page {
            now_ms: now,
            retention_ms: limits.retention_ms,
            ready: true,
            scopes: &snapshot,
            tracked: h.len(),
            max_scopes: limits.max_scopes,
            dropped_scopes: h.dropped_scopes(),
            targets: Some(&[]),
            hpas: None,
        })
    });
    let (json_ms, json) = time(min, || {
        let data: Vec<(&HistoryKey, &Vec<_>, &str)> = snapshot
            .iter()
            .map(|s| (&s.key, &s.entries, s.last_reason.as_str()))
            .collect();
        serde_json::to_vec(&data).unwrap_or_default()
    });
    PageResult {
        scopes,
        entries_per_scope: limits.capacity,
        render_ms,
        json_ms,
        page_bytes: page.len(),
        json_bytes: json.len(),
        rss_per_scope_bytes: match (before, after) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b) as f64 / scopes as f64),
            _ => None,
        },
        entry_bytes: ENTRY_BYTES,
    }
}

pub fn figures(p: &PageResult) -> Vec<Figure> {
    let mut f = vec![Figure::new(
        "page",
        format!(
            "Status page: render / with {} scopes × {} entries (vs serde_json of the same entries)",
            p.scopes, p.entries_per_scope
        ),
        "ms",
    )
    .compare(p.json_ms, p.render_ms, None)];
    if let Some(rss) = p.rss_per_scope_bytes {
        f.push(
            Figure::new(
                "page",
                format!(
                    "History: RSS growth per tracked scope (full {}-entry ring)",
                    p.entries_per_scope
                ),
                "bytes",
            )
            .value(rss),
        );
    }
    f
}

pub fn note(p: &PageResult) -> String {
    format!(
        "**Status page.** {} scopes, each with a full ring of {} answers (a target over a \
         recommendation and a floor, with refusal runs), recorded through `History::record`; \
         `api::status_page::render` of the whole page ({} bytes of HTML and SVG) against \
         `serde_json::to_vec` of the same keys, entries and reasons ({} bytes); best of \
         repetitions over 3 s each. Memory: VmRSS before and after filling the history, divided \
         by the scopes (an entry is {} bytes; a run of refusals shares one reason string), \
         measured only when the part runs before any other in the process (`--only page`): after \
         them the allocator refills memory they freed and the delta reads near 0.\n",
        p.scopes, p.entries_per_scope, p.page_bytes, p.json_bytes, p.entry_bytes
    )
}
