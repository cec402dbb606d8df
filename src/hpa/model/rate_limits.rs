//! How far one sync may move the count: the legacy cap without `behavior` and the `behavior`
//! rate policies (docs/hpa-behaviour.md §1.7.3, §1.7.4).

use std::time::Duration;

use super::scale_event::{is_after, secs, ScaleEvent};
use super::spec::{PolicyType, ResolvedRules, SelectPolicy};
use super::{SCALE_UP_LIMIT_FACTOR, SCALE_UP_LIMIT_MINIMUM};

/// Without `behavior`, the most one sync may scale up to: `max(2 × current, 4)`
/// (docs/hpa-behaviour.md §1.7.3), computed in float64 as the controller does.
pub fn legacy_scale_up_limit(current: i64) -> i64 {
    (SCALE_UP_LIMIT_FACTOR * current as f64).max(SCALE_UP_LIMIT_MINIMUM) as i64
}

/// Highest count the scale-up policies allow (docs/hpa-behaviour.md §1.7.4).
pub(super) fn scale_up_limit(
    now: Duration,
    current: i32,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    rules: &ResolvedRules,
) -> i32 {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return current,
        SelectPolicy::Min => (i32::MAX, std::cmp::min),
        SelectPolicy::Max => (i32::MIN, std::cmp::max),
    };
    for p in &rules.policies {
        let start = period_start(now, current, up_events, down_events, p.period_seconds);
        let proposed = match p.policy_type {
            PolicyType::Pods => start.saturating_add(p.value),
            // Percent up rounds up (docs/hpa-behaviour.md §1.7.4).
            PolicyType::Percent => (start as f64 * (1.0 + p.value as f64 / 100.0)).ceil() as i32,
        };
        result = pick(result, proposed);
    }
    result
}

/// Lowest count the scale-down policies allow (docs/hpa-behaviour.md §1.7.4).
pub(super) fn scale_down_limit(
    now: Duration,
    current: i32,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    rules: &ResolvedRules,
) -> i32 {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return current,
        SelectPolicy::Min => (i32::MIN, std::cmp::max),
        SelectPolicy::Max => (i32::MAX, std::cmp::min),
    };
    for p in &rules.policies {
        let start = period_start(now, current, up_events, down_events, p.period_seconds);
        let proposed = match p.policy_type {
            PolicyType::Pods => start.saturating_sub(p.value),
            // Percent down truncates (docs/hpa-behaviour.md §1.7.4).
            PolicyType::Percent => (start as f64 * (1.0 - p.value as f64 / 100.0)) as i32,
        };
        result = pick(result, proposed);
    }
    result
}

/// `periodStart = current − added in period + removed in period` (docs/hpa-behaviour.md §1.7.4).
fn period_start(
    now: Duration,
    current: i32,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    period_seconds: i32,
) -> i32 {
    let in_period = |events: &[ScaleEvent]| -> i32 {
        events
            .iter()
            .filter(|e| is_after(e.at, now, secs(period_seconds)))
            .map(|e| e.change)
            .sum()
    };
    current - in_period(up_events) + in_period(down_events)
}
