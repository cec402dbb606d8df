//! The scale-down stabilisation window rule (docs/hpa-behaviour.md §1.7.4, §4.1).

use super::*;

pub(super) fn check_scale_down_window(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    down: Option<&HPAScalingRules>,
) {
    let window = down
        .and_then(|d| d.stabilization_window_seconds)
        .map(i64::from)
        .unwrap_or(DEFAULT_SCALE_DOWN_WINDOW_S);
    let want = ctx.settings.recommender_window_s;
    if window < want {
        ctx.push(
            rules::SCALE_DOWN_WINDOW,
            Severity::Warning,
            object,
            "spec.behavior.scaleDown.stabilizationWindowSeconds",
            format!("the scale-down stabilisation window is {window}s, shorter than the recommender's own {want}s"),
            "several recommendation series per workload are normal and may disagree briefly (a former controller, a failover, a restart: docs/hpa-behaviour.md §4.1, §1.7.6); a window shorter than the recommender's lets such a transient dip remove pods the recommender still wants",
            format!("set stabilizationWindowSeconds to at least {want}"),
            src,
        );
    }
}
