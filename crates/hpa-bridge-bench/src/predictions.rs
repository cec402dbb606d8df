//! The cost of `serve`'s HPA predictions per 1,000 HPAs (docs/explain.md, "In the adapter"):
//! the CPU of one prediction (the model replayed over the HPA's history of answers, then run
//! at the next sync), against turning the same HPA object into JSON (which the watch does for
//! every prediction anyway), in the same run; and the memory the watch's mirror and the board
//! hold per HPA, counted by the bench's allocator.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde::Serialize;
use serde_json::{json, Value};

use hpa_bridge::explain::{explain, AnswerHistory, Observation, ScaleView, ServedAnswer};
use hpa_bridge::prediction::{HpaPrediction, Predictions};

use super::counting_alloc::{self, Snapshot};
use super::figure::Figure;

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PredictionsResult {
    pub hpas: usize,
    pub answers_per_hpa: usize,
    /// One prediction of a steady HPA (the first replay fits), mean, in microseconds.
    pub predict_us: f64,
    /// One prediction of an HPA whose history fits no replay (every starting count replayed
    /// in full, then the fallback), mean, in microseconds.
    pub predict_unfit_us: f64,
    /// The starting counts such an HPA replays (`[minReplicas, maxReplicas]`).
    pub starts: usize,
    /// `serde_json::to_value` of the same HPA object, mean, in microseconds.
    pub to_json_us: f64,
    /// Bytes the mirror's HPA objects and the board's entries hold, per HPA.
    pub bytes_per_hpa: f64,
}

/// HPA `i`: an External target of its own workload, default behaviour, in one of 20
/// namespaces; scaled 8 seconds ago, or (`steady`) long before the history began.
fn hpa(i: usize, now_ms: i64, steady: bool) -> Value {
    let scaled_ms = if steady {
        now_ms - 86_400_000
    } else {
        now_ms - 8_000
    };
    json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"namespace": format!("ns-{}", i % 20), "name": format!("workload-{i}"),
                     "uid": format!("00000000-0000-0000-0000-{i:012}"), "resourceVersion": "12345"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": format!("workload-{i}")},
            "minReplicas": 1, "maxReplicas": 50,
            "metrics": [{"type": "External", "external": {
                "metric": {"name": "hpa_target_replicas", "selector": {"matchLabels": {"hpa_target_name": format!("workload-{i}")}}},
                "target": {"type": "AverageValue", "averageValue": "1"}}}],
        },
        "status": {
            "currentReplicas": 5, "desiredReplicas": 5,
            "lastScaleTime": hpa_bridge_rules::clock::rfc3339(scaled_ms),
            "currentMetrics": [{"type": "External", "external": {
                "metric": {"name": "hpa_target_replicas", "selector": {"matchLabels": {"hpa_target_name": format!("workload-{i}")}}},
                "current": {"averageValue": "1"}}}],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ],
        },
    })
}

/// The observation the watch builds for HPA `i`: its answer now, and an hour of answers at
/// 15 s (the history's default retention): all 5 (`steady`), or moving between 3 and 5 with no
/// rescale the HPA shows (so no replay fits).
fn observation(i: usize, hpa: Value, answers: usize, now_ms: i64, steady: bool) -> Observation {
    let scope = format!("hpa_target_name=workload-{i}");
    let history = AnswerHistory {
        metric: "hpa_target_replicas".into(),
        scope: scope.clone(),
        answers: (0..answers)
            .map(|k| {
                let at = now_ms - ((answers - k) as i64) * 15_000 + 7_000;
                let v = if steady || k + 1 == answers {
                    5
                } else {
                    3 + (k / 20 % 3) as u64
                };
                (at, Some(v))
            })
            .collect(),
    };
    Observation {
        hpa,
        scale: Ok(ScaleView {
            spec_replicas: 5,
            status_replicas: 5,
            selector: format!("app=workload-{i}"),
        }),
        pods: Err("not counted by the adapter's predictions".into()),
        served: Ok(vec![ServedAnswer {
            namespace: format!("ns-{}", i % 20),
            metric: "hpa_target_replicas".into(),
            selector: scope,
            object: None,
            value: Some(5),
            refusal: None,
            reason: "max(recommendation hpa_expect_replicas = 5, floor hpa_stateful_floor = 4) = 5 (recommendation)".into(),
        }]),
        history: Ok(vec![history]),
        other_hpas_on_target: Vec::new(),
        foreign_external_owner: None,
        kube_minor: hpa_bridge_hpa_model::NEWEST_KUBE_MINOR,
        now_ms,
    }
}

/// The mean of `f` over `items`, in microseconds: the best of repeated rounds over `min`.
fn mean_us<T>(items: &[T], min: Duration, mut f: impl FnMut(&T)) -> f64 {
    let started = Instant::now();
    let mut best = f64::MAX;
    loop {
        let t = Instant::now();
        for item in items {
            f(item);
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / items.len() as f64);
        if started.elapsed() >= min {
            return best;
        }
    }
}

pub fn run(quick: bool) -> PredictionsResult {
    let hpas = 1000;
    let answers = 240;
    let now_ms = 1_800_000_000_000i64;
    let observed = |steady: bool| -> (Vec<Value>, Vec<Observation>) {
        let objects: Vec<Value> = (0..hpas).map(|i| hpa(i, now_ms, steady)).collect();
        let observations = objects
            .iter()
            .enumerate()
            .map(|(i, h)| observation(i, h.clone(), answers, now_ms, steady))
            .collect();
        (objects, observations)
    };
    let (objects, observations) = observed(true);
    let (_, unfit) = observed(false);
    let min = Duration::from_millis(if quick { 300 } else { 3000 });
    let typed: Vec<HorizontalPodAutoscaler> = objects
        .iter()
        .map(|h| serde_json::from_value(h.clone()).expect("a valid HPA"))
        .collect();
    let to_json_us = mean_us(&typed, min, |h| {
        std::hint::black_box(serde_json::to_value(h).ok());
    });
    let predict_us = mean_us(&observations, min, |o| {
        std::hint::black_box(explain(o).ok());
    });
    let predict_unfit_us = mean_us(&unfit[..100], min, |o| {
        std::hint::black_box(explain(o).ok());
    });
    // The bench would measure nothing if the steady HPAs did not replay, or the others did.
    let replayed = |o: &Observation| {
        explain(o)
            .map(|e| e.notes.iter().any(|n| n.contains("replayed from")))
            .unwrap_or(false)
    };
    assert!(replayed(&observations[0]) && !replayed(&unfit[0]));

    // What stays: the mirror's objects and one board entry per HPA, with its explanation.
    counting_alloc::start();
    let before = Snapshot::now().live_bytes;
    let mirror: Vec<Arc<HorizontalPodAutoscaler>> = objects
        .iter()
        .map(|h| Arc::new(serde_json::from_value(h.clone()).expect("a valid HPA")))
        .collect();
    let board = Predictions::default();
    for (i, o) in observations.iter().enumerate() {
        let mut p = HpaPrediction::new(&format!("ns-{}", i % 20), &format!("workload-{i}"));
        p.explanation = explain(o).map_err(|e| e.to_string());
        board.put(p);
    }
    let after = Snapshot::now().live_bytes;
    std::hint::black_box((&mirror, board.len()));
    PredictionsResult {
        hpas,
        answers_per_hpa: answers,
        predict_us,
        predict_unfit_us,
        starts: 50,
        to_json_us,
        bytes_per_hpa: (after - before) as f64 / hpas as f64,
    }
}

pub fn figures(p: &PredictionsResult) -> Vec<Figure> {
    vec![
        Figure::new(
            "predictions",
            format!(
                "HPA predictions: one prediction of a steady HPA ({}-answer replay and the next sync) vs the HPA object to JSON",
                p.answers_per_hpa
            ),
            "us",
        )
        .compare(p.to_json_us, p.predict_us, None),
        Figure::new(
            "predictions",
            format!(
                "HPA predictions: one prediction whose history fits no replay ({} starts × {} answers) vs the HPA object to JSON",
                p.starts, p.answers_per_hpa
            ),
            "us",
        )
        .compare(p.to_json_us, p.predict_unfit_us, None),
        Figure::new(
            "predictions",
            "HPA predictions: memory per HPA (the watch's object and the board's entry)",
            "bytes",
        )
        .value(p.bytes_per_hpa),
    ]
}

pub fn note(p: &PredictionsResult) -> String {
    format!(
        "**HPA predictions.** {} HPAs, each with an External target (maxReplicas {}) and an hour \
         of answers at 15 s ({} answers) in the history; `explain` as `serve` runs it after each \
         sync, mean per HPA, against `serde_json::to_value` of the same HPA object (the watch's \
         own per-prediction step), best of rounds. A steady HPA replays once (the first start \
         fits without a rescale); one whose history fits no start replays every count in \
         `[minReplicas, maxReplicas]` in full before the fallback. Per 1,000 HPAs at a 15 s sync \
         that is {:.1} ms of CPU per second when all are steady and {:.1} ms when none fits, off \
         the async workers; plus one GET of `scale` per HPA and sync (67 requests/s to the API \
         server). Memory: bytes the allocator holds for the watch's typed HPA objects and the \
         board's entries (explanations included): {:.1} KiB per HPA, {:.1} MiB per 1,000.\n",
        p.hpas,
        p.starts,
        p.answers_per_hpa,
        p.predict_us * 1000.0 / 15.0 / 1000.0,
        p.predict_unfit_us * 1000.0 / 15.0 / 1000.0,
        p.bytes_per_hpa / 1024.0,
        p.bytes_per_hpa * 1000.0 / (1024.0 * 1024.0),
    )
}
