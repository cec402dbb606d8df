//! How far one sync may move the count: the legacy cap without `behavior` and the `behavior`
//! rate policies (docs/hpa-behaviour.md §1.7.3, §1.7.4).

use std::time::Duration;

use super::go_numeric::go_f64_to_i32;
use super::scale_event::{is_after, secs, ScaleEvent};
use super::spec::{PolicyType, ResolvedRules, SelectPolicy};
use super::{SCALE_UP_LIMIT_FACTOR, SCALE_UP_LIMIT_MINIMUM};

/// Without `behavior`, the most one sync may scale up to: `max(2 × current, 4)`
/// (docs/hpa-behaviour.md §1.7.3), computed in float64 as the controller does.
pub fn legacy_scale_up_limit(current: i64) -> i64 {
    (SCALE_UP_LIMIT_FACTOR * current as f64).max(SCALE_UP_LIMIT_MINIMUM) as i64
}

/// [`legacy_scale_up_limit`] as the controller converts it to int32: `int32(...)` on amd64, so
/// a count above 2^30 gives `MinInt32` (docs/hpa-behaviour.md §1.8).
pub(super) fn legacy_scale_up_limit_i32(current: i32) -> i32 {
    go_f64_to_i32((SCALE_UP_LIMIT_FACTOR * f64::from(current)).max(SCALE_UP_LIMIT_MINIMUM))
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
            // int32 arithmetic and conversions as in Go (docs/hpa-behaviour.md §1.8).
            PolicyType::Pods => start.wrapping_add(p.value),
            // Percent up rounds up (docs/hpa-behaviour.md §1.7.4).
            PolicyType::Percent => {
                go_f64_to_i32((f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil())
            }
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
            PolicyType::Pods => start.wrapping_sub(p.value),
            // Percent down truncates (docs/hpa-behaviour.md §1.7.4).
            PolicyType::Percent => {
                go_f64_to_i32(f64::from(start) * (1.0 - f64::from(p.value) / 100.0))
            }
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
    current
        .wrapping_sub(change_in_period(now, up_events, period_seconds))
        .wrapping_add(change_in_period(now, down_events, period_seconds))
}

/// `getReplicasChangePerPeriod`: the changes of the events newer than `period_seconds`, summed
/// as int32 (docs/hpa-behaviour.md §1.7.4).
pub(super) fn change_in_period(now: Duration, events: &[ScaleEvent], period_seconds: i32) -> i32 {
    events
        .iter()
        .filter(|e| is_after(e.at, now, secs(period_seconds)))
        .fold(0i32, |sum, e| sum.wrapping_add(e.change))
}
