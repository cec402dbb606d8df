//! The controller's memory of one HPA, rebuilt from hpa-bridge's answer history. The HPA
//! controller keeps the recommendations in its stabilization windows and its recent scale
//! events in its own memory, which no object shows; but every answer in hpa-bridge's history
//! for the HPA's scope is one of its syncs, with the value it read. Replaying the model over
//! those syncs gives the same memory, provided the replay ends where the HPA is: at its current
//! `spec.replicas`, having last rescaled when `status.lastScaleTime` says (docs/explain.md).
//!
//! Pure: the history and the HPA's state are passed in.

use std::time::Duration;

use crate::clock::Millis;
use crate::hpa::model::{ControllerConfig, Hpa, HpaSpec, MetricInput, SyncInput, TargetSelector};

/// One past sync of the HPA as hpa-bridge saw it: when it asked, and what each metric read.
#[derive(Clone, Debug, PartialEq)]
pub struct PastSync {
    pub at_ms: Millis,
    /// One per `spec.metrics` entry, in order.
    pub inputs: Vec<MetricInput>,
}

/// A replay that ended where the HPA is.
pub struct Replayed {
    /// The model, its memory that of the controller after the last past sync.
    pub model: Hpa,
    /// How many past syncs were replayed.
    pub syncs: usize,
    pub last_sync_ms: Millis,
    /// The median gap between the last syncs: the controller's sync period as it ran.
    pub period_ms: Option<Millis>,
}

/// `status.lastScaleTime` has whole seconds, and the controller reads its clock a little after
/// the request hpa-bridge logged.
const SCALE_TIME_SLACK_MS: Millis = 1_500;
/// Syncs whose gaps estimate the period.
const PERIOD_SAMPLE: usize = 10;

/// A wall-clock time as the model's clock reads it.
pub(super) fn model_time(ms: Millis) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// Replays `syncs` (oldest first) from each starting count in `[min, max]`. A replay that ends
/// at `current` replicas, with its last rescale at `last_scale_ms` (or none since the first
/// sync when the HPA last scaled before it), gives the controller's memory; of several, the
/// one with the fewest rescales. `None` when no start does.
pub fn replay(
    spec: &HpaSpec,
    config: ControllerConfig,
    syncs: &[PastSync],
    current: i32,
    last_scale_ms: Option<Millis>,
) -> Option<Replayed> {
    let first = syncs.first()?.at_ms;
    let last = syncs.last()?.at_ms;
    let (min, max) = (spec.min_replicas(), spec.max_replicas.max(current));
    let mut starts: Vec<i32> = (min..=max).collect();
    starts.sort_by_key(|r| ((r - current).abs(), *r));
    let scale_seen = |model: &Hpa| {
        let replayed = model.last_scale_time().map(|d| d.as_millis() as Millis);
        match last_scale_ms {
            Some(l) if l + SCALE_TIME_SLACK_MS >= first => {
                replayed.is_some_and(|r| (r - l).abs() <= SCALE_TIME_SLACK_MS)
            }
            _ => replayed.is_none(),
        }
    };
    // Several starts may end where the HPA is; the one that rescaled least is the likeliest
    // (an HPA mostly holds its count), the nearest to the current count among equals.
    let mut best: Option<(usize, Hpa)> = None;
    for start in starts {
        let Ok(mut model) = Hpa::new(spec.clone(), config) else {
            return None;
        };
        let (mut replicas, mut rescales) = (start, 0);
        for s in syncs {
            let input = SyncInput {
                spec_replicas: replicas,
                status_replicas: replicas,
                ready_pods: replicas,
                pods: replicas,
                metrics: s.inputs.clone(),
                selector: TargetSelector::Valid,
            };
            let outcome = model.sync(model_time(s.at_ms), &input);
            rescales += usize::from(outcome.rescaled);
            replicas = outcome.replicas;
        }
        let fits = replicas == current && scale_seen(&model);
        if fits && best.as_ref().is_none_or(|(r, _)| rescales < *r) {
            best = Some((rescales, model));
        }
    }
    best.map(|(_, model)| Replayed {
        model,
        syncs: syncs.len(),
        last_sync_ms: last,
        period_ms: period(syncs),
    })
}

/// The median gap between the last `PERIOD_SAMPLE` syncs.
fn period(syncs: &[PastSync]) -> Option<Millis> {
    let tail = &syncs[syncs.len().saturating_sub(PERIOD_SAMPLE + 1)..];
    let mut gaps: Vec<Millis> = tail.windows(2).map(|w| w[1].at_ms - w[0].at_ms).collect();
    gaps.sort_unstable();
    gaps.get(gaps.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(down_window: u32) -> HpaSpec {
        serde_json::from_value(serde_json::json!({
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [{"type": "External", "external": {
                "metric": {"name": "m"}, "target": {"type": "AverageValue", "averageValue": "1"}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": down_window}},
        }))
        .unwrap()
    }

    fn syncs(values: &[u64]) -> Vec<PastSync> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| PastSync {
                at_ms: 100_000 + i as Millis * 15_000,
                inputs: vec![Ok(vec![*v as f64])],
            })
            .collect()
    }

    #[test]
    fn the_replay_that_ends_where_the_hpa_is_gives_the_windows_recommendations() {
        // 6 then 2: a 60 s scale-down window still holds 6, so the HPA stays at 6.
        let past = syncs(&[6, 6, 6, 2, 2]);
        let config = ControllerConfig::for_kube_minor(37);
        let r = replay(&spec(60), config, &past, 6, None).expect("replays from 6");
        assert_eq!(r.syncs, 5);
        assert_eq!(r.period_ms, Some(15_000));
        let kept: Vec<i32> = r
            .model
            .recommendations()
            .iter()
            .map(|x| x.replicas)
            .collect();
        assert!(kept.contains(&6) && kept.contains(&2), "{kept:?}");
    }

    #[test]
    fn a_replay_that_cannot_reach_the_hpa_s_state_is_refused() {
        let config = ControllerConfig::for_kube_minor(37);
        // A 0 s window follows 2 at once: no start ends at 6.
        assert!(replay(&spec(0), config, &syncs(&[6, 2, 2]), 6, None).is_none());
        // It does end at 2, having scaled at the second sync; the HPA says it scaled then.
        let at = 115_000;
        assert!(replay(&spec(0), config, &syncs(&[6, 2, 2]), 2, Some(at)).is_some());
        // Not when the HPA says it last scaled long before the history.
        assert!(replay(&spec(0), config, &syncs(&[6, 2, 2]), 2, Some(1_000)).is_none());
    }
}
