//! The controller's memory of one HPA, rebuilt from hpa-bridge's answer history. The HPA
//! controller keeps the recommendations in its stabilization windows and its recent scale
//! events in its own memory, which no object shows; but every answer in hpa-bridge's history
//! for the HPA's scope is one of its syncs, with the value it read. Replaying the model over
//! those syncs gives the same memory, provided the replay ends where the HPA is: at its current
//! `spec.replicas`, having last rescaled when `status.lastScaleTime` says (docs/explain.md).
//!
//! Pure: the history and the HPA's state are passed in.

use std::time::Duration;

use hpa_bridge_hpa_model::{
    ControllerConfig, Hpa, HpaSpec, MetricInput, SyncInput, TargetSelector,
};
use hpa_bridge_rules::clock::Millis;

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
    /// How often the chosen replay rescaled.
    pub rescales: usize,
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
    // (an HPA mostly holds its count), the nearest to the current count among equals. Starts
    // are tried nearest first, so a fit without a rescale ends the search, and a start that has
    // rescaled as often as the best fit so far cannot replace it: both leave the choice as it
    // would be after every start, and a steady HPA costs one replay instead of one per count.
    let mut best: Option<(usize, Hpa)> = None;
    'starts: for start in starts {
        let Ok(mut model) = Hpa::new(spec.clone(), config) else {
            return None;
        };
        let (mut replicas, mut rescales) = (start, 0);
        for s in syncs {
            if best.as_ref().is_some_and(|(r, _)| rescales >= *r) {
                continue 'starts;
            }
            let input = past_input(replicas, s);
            let outcome = model.sync(model_time(s.at_ms), &input);
            rescales += usize::from(outcome.rescaled);
            replicas = outcome.replicas;
        }
        let fits = replicas == current && scale_seen(&model);
        if fits && best.as_ref().is_none_or(|(r, _)| rescales < *r) {
            best = Some((rescales, model));
            if rescales == 0 {
                break;
            }
        }
    }
    best.map(|(rescales, model)| Replayed {
        model,
        rescales,
        syncs: syncs.len(),
        last_sync_ms: last,
        period_ms: period(syncs),
    })
}

/// What `s` read, at `replicas` (every pod Ready: a past sync's pods are not known).
fn past_input(replicas: i32, s: &PastSync) -> SyncInput {
    SyncInput {
        spec_replicas: replicas,
        status_replicas: replicas,
        ready_pods: replicas,
        pods: replicas,
        metrics: s.inputs.clone(),
        selector: TargetSelector::Valid,
    }
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

    /// The plain twin of `replay`'s search: every start replayed in full, the fewest rescales
    /// kept, the nearest to the current count among equals.
    fn every_start(
        spec: &HpaSpec,
        config: ControllerConfig,
        syncs: &[PastSync],
        current: i32,
        last_scale_ms: Option<Millis>,
    ) -> Option<(usize, Hpa)> {
        let first = syncs.first()?.at_ms;
        let mut fits = Vec::new();
        for start in spec.min_replicas()..=spec.max_replicas.max(current) {
            let mut model = Hpa::new(spec.clone(), config).ok()?;
            let (mut replicas, mut rescales) = (start, 0);
            for s in syncs {
                let input = past_input(replicas, s);
                let outcome = model.sync(model_time(s.at_ms), &input);
                rescales += usize::from(outcome.rescaled);
                replicas = outcome.replicas;
            }
            let replayed = model.last_scale_time().map(|d| d.as_millis() as Millis);
            let seen = match last_scale_ms {
                Some(l) if l + SCALE_TIME_SLACK_MS >= first => {
                    replayed.is_some_and(|r| (r - l).abs() <= SCALE_TIME_SLACK_MS)
                }
                _ => replayed.is_none(),
            };
            if replicas == current && seen {
                fits.push((rescales, (start - current).abs(), start, model));
            }
        }
        fits.into_iter()
            .min_by_key(|(r, d, start, _)| (*r, *d, *start))
            .map(|(rescales, _, _, model)| (rescales, model))
    }

    /// The pruned search chooses as the plain one does, on random histories, counts and scale
    /// times: the same memory (the next sync decides the same) and the same last scale.
    #[test]
    fn the_pruned_search_chooses_as_every_start_would() {
        let config = ControllerConfig::for_kube_minor(37);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut compared = 0;
        for case in 0..600 {
            let window = [0, 30, 60][case % 3];
            let spec = spec(window);
            let len = 2 + next(12) as usize;
            let values: Vec<u64> = (0..len).map(|_| 1 + next(9)).collect();
            let past = syncs(&values);
            // Mostly where a replay from some start ends (so several may fit), else anywhere.
            let (current, last_scale) = if next(4) > 0 {
                let start = 1 + next(10) as i32;
                let mut model = Hpa::new(spec.clone(), config).unwrap();
                let mut replicas = start;
                for s in &past {
                    let input = past_input(replicas, s);
                    replicas = model.sync(model_time(s.at_ms), &input).replicas;
                }
                let scaled = model.last_scale_time().map(|d| d.as_millis() as Millis);
                (replicas, scaled.or(Some(1_000)))
            } else {
                let at = past[next(len as u64) as usize].at_ms;
                (
                    1 + next(10) as i32,
                    [None, Some(1_000), Some(at)][next(3) as usize],
                )
            };
            let pruned = replay(&spec, config, &past, current, last_scale);
            let plain = every_start(&spec, config, &past, current, last_scale);
            assert_eq!(
                pruned.is_some(),
                plain.is_some(),
                "case {case}: {values:?} at {current}"
            );
            if let (Some(p), Some((rescales, q))) = (pruned, plain) {
                compared += 1;
                assert_eq!(p.rescales, rescales, "case {case}: {values:?} at {current}");
                let m = p.model;
                assert_eq!(m.last_scale_time(), q.last_scale_time(), "case {case}");
                for v in [1.0, 5.0, 9.0] {
                    let input = SyncInput {
                        spec_replicas: current,
                        status_replicas: current,
                        ready_pods: current,
                        pods: current,
                        metrics: vec![Ok(vec![v])],
                        selector: TargetSelector::Valid,
                    };
                    let at = model_time(past[len - 1].at_ms + 15_000);
                    let (a, b) = (m.clone().sync(at, &input), q.clone().sync(at, &input));
                    assert_eq!(
                        a.replicas, b.replicas,
                        "case {case}: {values:?} at {current}, next {v}"
                    );
                }
            }
        }
        assert!(compared > 300, "only {compared} cases replayed");
    }
}
