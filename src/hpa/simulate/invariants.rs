//! The invariants every sync is checked against (never below the floor, never above what any
//! controller exported, no flapping, convergence within the rate policies' budget).

use super::*;

impl Runner {
    pub(super) fn violation(&mut self, invariant: &'static str, t: Millis, message: String) {
        self.report.violations.push(Violation {
            invariant,
            t,
            message,
        });
    }

    pub(super) fn check_invariants(
        &mut self,
        t: Millis,
        o: &SyncOutcome,
        unknown: &[String],
        floor: i64,
    ) {
        let w = self.scenario.workload.name.clone();
        // 1. Never below the floor the pods really hold (docs/hpa-behaviour.md §4.1).
        if i64::from(o.replicas) < floor && o.replicas < o.current_replicas {
            let holders: Vec<String> = self
                .pods
                .values()
                .filter(|p| p.truth_index > i64::from(o.replicas))
                .map(|p| format!("{} holds index {}", p.name(&w), p.truth_index))
                .collect();
            self.violation(
                "below-floor",
                t,
                format!(
                    "replicas {} -> {} but {} (true floor {floor})",
                    o.current_replicas,
                    o.replicas,
                    holders.join(", ")
                ),
            );
        }
        // 2. Never shrink on unknown input (docs/hpa-behaviour.md §1.6).
        if o.replicas < o.current_replicas && !unknown.is_empty() {
            self.violation(
                "decrease-on-unknown",
                t,
                format!(
                    "replicas {} -> {} while {}",
                    o.current_replicas,
                    o.replicas,
                    unknown.join("; ")
                ),
            );
        }
        // 3. Duplicates are max-ed, never summed (docs/hpa-behaviour.md §1.2, §4.1): a scale-up never
        // goes above the largest value any controller really exported lately, or the floor.
        if o.replicas > o.current_replicas {
            let lookback = self.stale_after + self.interval + SYNC_PERIOD.as_millis() as Millis;
            let recent = self
                .bound_history
                .iter()
                .filter(|(at, _)| *at >= t - lookback)
                .map(|(_, v)| *v)
                .max()
                .unwrap_or(0);
            // A threshold metric raises to a sustained `ceil(V/upPerReplica)` of the totals the
            // pods exported within its up window (plus the same staleness lookback), clamped by
            // its `min`/`max`: never more.
            let threshold_bound = self.threshold.map(|th| {
                let since = t - lookback - th.sustain_up_ms;
                self.load_history
                    .iter()
                    .filter(|(at, _)| *at >= since)
                    .map(|(_, v)| ceil_div(*v, th.up))
                    .max()
                    .unwrap_or(0)
                    .clamp(th.min, th.max.max(th.min))
            });
            let recent = recent.max(threshold_bound.unwrap_or(0));
            let bound = recent.max(i64::from(self.hpa.spec().min_replicas()));
            if i64::from(o.replicas) > bound {
                self.violation(
                    "inflation",
                    t,
                    format!(
                        "replicas {} -> {} but no controller exported more than {recent} (nor does any load total need more) and the floor is {floor} (within the last {})",
                        o.current_replicas,
                        o.replicas,
                        fmt_t(lookback)
                    ),
                );
            }
        }
    }

    /// Threshold scenarios: a scale event in the opposite direction of the previous one must
    /// come at least one sustain window (the longer one) later, or the hysteresis flapped.
    pub(super) fn check_flap(&mut self, t: Millis, o: &SyncOutcome) {
        let Some(th) = self.threshold else {
            return;
        };
        if o.replicas == o.current_replicas {
            return;
        }
        let up = o.replicas > o.current_replicas;
        let window = th.sustain_up_ms.max(th.sustain_down_ms);
        if let Some((at, was_up)) = self.last_scale {
            if was_up != up && t - at < window {
                self.violation(
                    "flap",
                    t,
                    format!(
                        "replicas {} -> {} only {} after a scale {} (sustain window {})",
                        o.current_replicas,
                        o.replicas,
                        fmt_t(t - at),
                        if was_up { "up" } else { "down" },
                        fmt_t(window)
                    ),
                );
            }
        }
        self.last_scale = Some((t, up));
    }

    /// How long the HPA may take from `from` to `to` with healthy inputs: the adapter's
    /// staleness and scrape interval, two syncs, the direction's stabilisation window and the
    /// rate policies' steps (docs/hpa-behaviour.md §1.7). `None` when the direction is disabled.
    pub(super) fn convergence_budget(&self, from: i32, to: i64) -> Option<Millis> {
        let to = to as i32;
        let up = to > from;
        let config = self.hpa.config();
        let base = self.stale_after + self.interval + 2 * SYNC_PERIOD.as_millis() as Millis;
        let sync = SYNC_PERIOD.as_millis() as Millis;
        let (window, rate) = match &self.hpa.spec().behavior {
            None => {
                if up {
                    // Legacy: at most max(2 × current, 4) per sync (docs/hpa-behaviour.md §1.7.3).
                    let mut cur = from.max(1);
                    let mut steps = 0;
                    while cur < to && steps < 1000 {
                        cur = (cur * 2).max(4);
                        steps += 1;
                    }
                    (0, steps * sync)
                } else {
                    (config.downscale_stabilization.as_millis() as Millis, sync)
                }
            }
            Some(b) => {
                let rules = if up {
                    b.resolved_scale_up()
                } else {
                    b.resolved_scale_down(config.downscale_stabilization)
                };
                if rules.select_policy == SelectPolicy::Disabled {
                    return None;
                }
                (
                    rules.stabilization_window.as_millis() as Millis,
                    rate_time(&rules, from, to),
                )
            }
        };
        Some(base + window + rate)
    }

    /// Invariant 4: with healthy inputs the replicas reach the true target within the budget.
    /// The lag runs from the later of "the target last changed" and "inputs became healthy".
    pub(super) fn track_convergence(
        &mut self,
        t: Millis,
        o: &SyncOutcome,
        healthy: bool,
        target: Option<i64>,
    ) {
        let target = match (healthy, target) {
            (true, Some(target)) => target,
            _ => {
                self.healthy_since = None;
                if let Some(mut e) = self.episode.take() {
                    e.result = ConvergenceResult::Interrupted { after: t - e.start };
                    self.report.convergences.push(e);
                }
                return;
            }
        };
        let healthy_since = *self.healthy_since.get_or_insert(t);
        let start = self.target_changed_at.max(healthy_since);
        if let Some(mut e) = self.episode.take() {
            if e.start == start && e.target == target {
                self.episode = Some(e);
            } else {
                e.result = ConvergenceResult::Interrupted { after: t - e.start };
                self.report.convergences.push(e);
            }
        }
        if self.episode.is_none() {
            if i64::from(o.current_replicas) == target || self.closed == Some((start, target)) {
                return;
            }
            self.episode = Some(Convergence {
                start,
                from: o.current_replicas,
                target,
                budget: self.convergence_budget(o.current_replicas, target),
                result: ConvergenceResult::Unfinished,
            });
        }
        let Some(mut e) = self.episode.take() else {
            return;
        };
        let replicas = o.replicas;
        let within = replicas > 0
            && self
                .hpa
                .tolerances()
                .is_within(target as f64 / f64::from(replicas));
        if i64::from(replicas) == target {
            e.result = ConvergenceResult::Reached { lag: t - e.start };
        } else if within {
            e.result = ConvergenceResult::HeldWithinTolerance;
        } else if let Some(budget) = e.budget.filter(|b| t - e.start > *b) {
            self.violation(
                "convergence",
                t,
                format!(
                    "inputs healthy and target {target} unchanged since {}, but replicas are {replicas} after {} (budget {})",
                    fmt_t(e.start),
                    fmt_t(t - e.start),
                    fmt_t(budget)
                ),
            );
            e.result = ConvergenceResult::Missed { budget };
        } else {
            self.episode = Some(e);
            return;
        }
        self.closed = Some((start, target));
        self.report.convergences.push(e);
    }
}

impl Runner {
    /// What this workload's controllers would recommend at `t` if they ran, whether or not
    /// they do: a controller inside the workload keeps its timeline at 0 replicas, it just has
    /// nowhere to run. A controller under a fault is left out: its silence is the fault's.
    fn wanted(&self, t: Millis) -> Option<i64> {
        self.controllers
            .iter()
            .filter(|c| {
                c.spec.recommends_for(&self.scenario.workload)
                    && Self::controller_live(&c.spec, t)
                    && self.scenario.fault_at(&c.spec.name, false, t).is_none()
            })
            .filter_map(|c| step_value(&c.spec.values, t).and_then(SampleValue::replicas))
            .max()
    }

    /// Invariant 5 (`minReplicas: 0`): a workload at 0 replicas comes back within the
    /// convergence budget once its controllers ask for more (docs/hpa-behaviour.md §7.3). A
    /// recommender that only runs inside the workload never can.
    pub(super) fn check_scale_from_zero(&mut self, t: Millis, o: &SyncOutcome) {
        let wanted = self.wanted(t).filter(|w| *w > 0);
        let (0, Some(wanted)) = (o.replicas, wanted) else {
            self.zero_wanted_since = None;
            return;
        };
        let since = *self.zero_wanted_since.get_or_insert(t);
        let budget = self.convergence_budget(0, wanted).unwrap_or(0);
        if t - since > budget {
            self.violation(
                "scale-from-zero",
                t,
                format!(
                    "replicas 0 for {} while the recommender wants {wanted} (budget {}): {}",
                    fmt_t(t - since),
                    fmt_t(budget),
                    if self.exporting_controllers(t).next().is_none() {
                        "no recommender runs, and nothing brings the workload back"
                    } else {
                        "the recommendation is exported but not followed"
                    }
                ),
            );
            // One report per episode.
            self.zero_wanted_since = Some(Millis::MAX / 2);
        }
    }
}

/// (direction reversals, scale events) over the syncs.
pub(super) fn reversals(rows: &[SyncRow]) -> (u32, u32) {
    let mut last: Option<bool> = None;
    let (mut reversals, mut events) = (0, 0);
    for r in rows.iter().filter(|r| r.replicas != r.spec_replicas) {
        let up = r.replicas > r.spec_replicas;
        events += 1;
        if last.is_some_and(|l| l != up) {
            reversals += 1;
        }
        last = Some(up);
    }
    (reversals, events)
}

/// Time the rate policies need to move from `from` to `to`, one period at a time
/// (docs/hpa-behaviour.md §1.7.4: Pods ± value, Percent ceil/trunc, Max or Min among policies).
pub(super) fn rate_time(rules: &ResolvedRules, from: i32, to: i32) -> Millis {
    let up = to > from;
    let period = rules
        .policies
        .iter()
        .map(|p| Millis::from(p.period_seconds.max(1)) * 1000)
        .max()
        .unwrap_or(15_000);
    let mut cur = from;
    let mut periods = 0;
    while cur != to && periods < 10_000 {
        let steps = rules.policies.iter().map(|p| {
            let v = f64::from(p.value);
            let c = f64::from(cur.max(1));
            match (p.policy_type, up) {
                (PolicyType::Pods, _) => p.value,
                (PolicyType::Percent, true) => (c * (1.0 + v / 100.0)).ceil() as i32 - cur,
                (PolicyType::Percent, false) => cur - (c * (1.0 - v / 100.0)).trunc() as i32,
            }
        });
        let step = match rules.select_policy {
            SelectPolicy::Min => steps.min(),
            _ => steps.max(),
        }
        .unwrap_or(1)
        .max(1);
        cur = if up {
            (cur + step).min(to)
        } else {
            (cur - step).max(to)
        };
        periods += 1;
    }
    periods * period
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_time_counts_policy_periods() {
        let rules = ResolvedRules {
            stabilization_window: Duration::ZERO,
            select_policy: SelectPolicy::Max,
            policies: vec![hpa_bridge_hpa_model::ScalingPolicy {
                policy_type: PolicyType::Pods,
                value: 1,
                period_seconds: 60,
            }],
            tolerance: None,
        };
        assert_eq!(rate_time(&rules, 3, 6), 180_000);
        assert_eq!(rate_time(&rules, 6, 4), 120_000);
    }
}
