//! The scale-up speed rule: how long the rate policies take to reach maxReplicas
//! (docs/hpa-behaviour.md §1.7.3, §1.7.4).

use super::*;

/// One scale-up policy: Pods or Percent, value, period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpPolicy {
    pub percent: bool,
    pub value: i64,
    pub period_s: i64,
}

/// How the controller limits scale-up (docs/hpa-behaviour.md §1.7.3-4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpLimit {
    /// No `behavior`: at most max(2 × current, 4) per sync.
    Legacy,
    Rules {
        policies: Vec<UpPolicy>,
        /// `selectPolicy`: Max, Min or Disabled.
        select: String,
        window_s: i64,
    },
}

impl UpLimit {
    pub fn from_behavior(has_behavior: bool, up: Option<&HPAScalingRules>) -> UpLimit {
        if !has_behavior {
            return UpLimit::Legacy;
        }
        // The model's defaults with behavior: Pods 4/15 s and Percent 100/15 s, Max, window 0
        // (docs/hpa-behaviour.md §1.7.4).
        let default_policies: Vec<UpPolicy> = Behavior::default()
            .resolved_scale_up()
            .policies
            .iter()
            .map(|p| UpPolicy {
                percent: p.policy_type == PolicyType::Percent,
                value: i64::from(p.value),
                period_s: i64::from(p.period_seconds),
            })
            .collect();
        let Some(up) = up else {
            return UpLimit::Rules {
                policies: default_policies,
                select: "Max".into(),
                window_s: 0,
            };
        };
        let policies = match &up.policies {
            Some(p) if !p.is_empty() => p
                .iter()
                .map(|p| UpPolicy {
                    percent: p.type_ == "Percent",
                    value: p.value as i64,
                    period_s: p.period_seconds as i64,
                })
                .collect(),
            _ => default_policies,
        };
        UpLimit::Rules {
            policies,
            select: up.select_policy.clone().unwrap_or_else(|| "Max".into()),
            window_s: up.stabilization_window_seconds.unwrap_or(0) as i64,
        }
    }
}

/// Seconds from a jump of the recommendation to `max` until the HPA reaches it, starting at
/// `min`, with a sync every 15 s. None when it never gets there within a day.
pub fn time_to_reach_max(min: i64, max: i64, limit: &UpLimit) -> Option<i64> {
    let mut current = min.max(1);
    if current >= max {
        return Some(0);
    }
    // Up stabilisation is the min over the window: older, lower recommendations hold the
    // count until they leave it (`timestamp.After(now - window)`).
    let start = match limit {
        UpLimit::Rules { window_s, .. } if *window_s > SYNC_PERIOD_S => {
            (window_s - SYNC_PERIOD_S + SYNC_PERIOD_S - 1) / SYNC_PERIOD_S * SYNC_PERIOD_S
        }
        _ => 0,
    };
    let mut events: Vec<(i64, i64)> = Vec::new();
    let mut t = start;
    while t <= start + 86_400 {
        let cap = match limit {
            UpLimit::Legacy => legacy_scale_up_limit(current),
            UpLimit::Rules {
                policies, select, ..
            } => {
                if select == "Disabled" {
                    return None;
                }
                let pick_min = select == "Min";
                let mut result: Option<i64> = None;
                for p in policies {
                    // Replicas added within the period (`time.Since(ts) < period`).
                    let added: i64 = events
                        .iter()
                        .filter(|(ts, _)| t - ts < p.period_s)
                        .map(|(_, n)| n)
                        .sum();
                    let base = current - added;
                    let proposed = if p.percent {
                        ((base as f64) * (1.0 + p.value as f64 / 100.0)).ceil() as i64
                    } else {
                        base + p.value
                    };
                    result = Some(match result {
                        None => proposed,
                        Some(r) if pick_min => r.min(proposed),
                        Some(r) => r.max(proposed),
                    });
                }
                result.unwrap_or(current)
            }
        };
        let next = cap.min(max);
        if next > current {
            events.push((t, next - current));
            current = next;
        }
        if current >= max {
            return Some(t);
        }
        t += SYNC_PERIOD_S;
    }
    None
}

pub(super) fn check_scale_up_speed(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    has_behavior: bool,
    up: Option<&HPAScalingRules>,
    min: i64,
    max: i64,
) {
    let limit = UpLimit::from_behavior(has_behavior, up);
    let budget = ctx.settings.max_scale_up_s;
    let took = time_to_reach_max(min, max, &limit);
    let from = min.max(1);
    let message = match took {
        Some(t) if t <= budget => return,
        Some(t) => format!(
            "going from {from} to maxReplicas {max} takes {t}s under these policies, more than {budget}s"
        ),
        None => match &limit {
            UpLimit::Rules { select, .. } if select == "Disabled" => {
                "scale-up is disabled (selectPolicy: Disabled)".to_string()
            }
            _ => format!("going from {from} to maxReplicas {max} takes more than a day under these policies"),
        },
    };
    let field = if has_behavior {
        "spec.behavior.scaleUp"
    } else {
        "spec.behavior"
    };
    ctx.push(
        rules::SCALE_UP_TOO_SLOW,
        Severity::Warning,
        object,
        field,
        message,
        "the recommender already says how many replicas are needed (docs/hpa-behaviour.md §4.1); rate policies that trickle towards it leave the workload short for the whole ramp (the rules are in docs/hpa-behaviour.md §1.7.4)",
        format!("add a Percent policy (e.g. 100 per 15s) with selectPolicy: Max, or raise the Pods value, so maxReplicas is reachable within {budget}s; --max-scale-up-time changes this budget"),
        src,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_up_simulation() {
        // Legacy: max(2c, 4) per 15 s sync: 1 -> 4 -> 8 -> 16 at t = 30.
        assert_eq!(time_to_reach_max(1, 16, &UpLimit::Legacy), Some(30));
        // Default behavior rules (Pods 4, Percent 100, Max): 2 -> 4 -> 8 at t = 15.
        let defaults = UpLimit::from_behavior(true, None);
        assert_eq!(time_to_reach_max(2, 8, &defaults), Some(15));
        // One pod per minute from 2 to 12: ten additions, the last at 9 minutes.
        let slow = UpLimit::Rules {
            policies: vec![UpPolicy {
                percent: false,
                value: 1,
                period_s: 60,
            }],
            select: "Max".into(),
            window_s: 0,
        };
        assert_eq!(time_to_reach_max(2, 12, &slow), Some(540));
        // A 60 s window delays the first step until the older recommendations leave it.
        let windowed = UpLimit::Rules {
            policies: vec![UpPolicy {
                percent: true,
                value: 100,
                period_s: 15,
            }],
            select: "Max".into(),
            window_s: 60,
        };
        assert_eq!(time_to_reach_max(2, 4, &windowed), Some(45));
        let disabled = UpLimit::Rules {
            policies: vec![],
            select: "Disabled".into(),
            window_s: 0,
        };
        assert_eq!(time_to_reach_max(2, 4, &disabled), None);
    }
}
