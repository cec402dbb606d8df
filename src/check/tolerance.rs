//! The tolerance rules: which single-replica steps the band swallows (docs/hpa-behaviour.md
//! §1.5).

use super::*;

/// A Kubernetes quantity as the controller reads it (`AsApproximateFloat64`, docs/hpa-behaviour.md
/// §1.5), from the one Quantity parser ([`hpa_bridge_hpa_model::quantity::Quantity`]).
pub fn parse_quantity(text: &str) -> Option<f64> {
    Quantity::parse(text.trim()).ok().map(|q| q.as_f64())
}

/// Whether the controller ignores a proposal of `desired` replicas at `current` replicas
/// (docs/hpa-behaviour.md §1.5): the model's AverageValue ratio (`averageValue: "1"`, one item
/// of value `desired`) tested against the model's band. `legacy` selects the pre-1.33
/// `|1 - ratio| <= t` test with the cluster tolerance only; otherwise `1 - down <= ratio <=
/// 1 + up`, both ends inclusive. At 10 replicas and t = 0.1, 11 is acted on before 1.33 and
/// ignored from 1.33.
pub fn within_tolerance(
    current: i64,
    desired: i64,
    tolerance_up: f64,
    tolerance_down: f64,
    legacy: bool,
) -> bool {
    let band = Tolerances {
        style: if legacy {
            ToleranceStyle::Symmetric
        } else {
            ToleranceStyle::PerDirection { configurable: true }
        },
        scale_up: tolerance_up,
        scale_down: tolerance_down,
    };
    band.is_within(average_value_ratio(
        desired.saturating_mul(1000),
        1000,
        current,
    ))
}

pub(super) fn tolerance_of(rules: Option<&HPAScalingRules>) -> Option<(f64, String)> {
    let q = rules?.tolerance.as_ref()?;
    Some((parse_quantity(&q.0).unwrap_or(f64::NAN), q.0.clone()))
}

pub(super) fn check_tolerance(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    up: Option<&HPAScalingRules>,
    down: Option<&HPAScalingRules>,
    min: i64,
    max: i64,
) {
    let s = ctx.settings;
    let legacy = s.kube_version.tolerance_style() == ToleranceStyle::Symmetric;
    let cluster = s.cluster_tolerance;
    let mut effective = [(cluster, "cluster default"), (cluster, "cluster default")];
    for (i, (dir, rules)) in [("scaleUp", up), ("scaleDown", down)]
        .into_iter()
        .enumerate()
    {
        let Some((t, text)) = tolerance_of(rules) else {
            continue;
        };
        if legacy {
            ctx.push(
                rules::TOLERANCE_DROPPED,
                Severity::Warning,
                object,
                format!("spec.behavior.{dir}.tolerance"),
                format!("tolerance {text:?} is set, but Kubernetes {} has no per-HPA tolerance", s.kube_version),
                format!("the field exists from 1.33 behind the HPAConfigurableTolerance gate; older API servers drop it, so the cluster-wide {cluster} applies (docs/hpa-behaviour.md §1.5)"),
                "upgrade to 1.33+ with HPAConfigurableTolerance enabled (beta, on by default, from 1.35), or lower --horizontal-pod-autoscaler-tolerance on kube-controller-manager; pass the cluster's real --kube-version if it is newer",
                src,
            );
        } else if t.is_finite() && t >= 0.0 {
            effective[i] = (t, "spec.behavior tolerance");
        }
    }
    let [(t_up, up_from), (t_down, down_from)] = effective;
    if t_up <= 0.0 && t_down <= 0.0 {
        return;
    }
    let lo = min.max(1);
    // Legacy controllers compare against one (cluster) tolerance in both directions.
    let (u, d) = if legacy {
        (cluster, cluster)
    } else {
        (t_up, t_down)
    };
    let first_up = (lo..max).find(|&r| within_tolerance(r, r + 1, u, d, legacy));
    let first_down = (lo + 1..=max).find(|&r| within_tolerance(r, r - 1, u, d, legacy));
    if first_up.is_none() && first_down.is_none() {
        return;
    }
    let largest_ignored_at_max = (1..max)
        .take_while(|&k| within_tolerance(max, max - k, u, d, legacy))
        .last()
        .unwrap_or(0);
    let rule = if legacy {
        format!(
            "Kubernetes {} (before 1.33): |1 - ratio| <= t, in float64",
            s.kube_version
        )
    } else {
        format!(
            "Kubernetes {}: 1 - down <= ratio <= 1 + up, inclusive",
            s.kube_version
        )
    };
    let mut message =
        format!("tolerance up {t_up} ({up_from}), down {t_down} ({down_from}); under {rule}, ");
    let mut parts = Vec::new();
    if let Some(r) = first_up {
        parts.push(format!(
            "a recommendation one replica above the current count is ignored from {r} replicas on"
        ));
    }
    if let Some(r) = first_down {
        parts.push(format!("one replica below is ignored from {r} replicas on"));
    }
    message.push_str(&parts.join(", and "));
    if largest_ignored_at_max > 0 {
        let _ = write!(
            message,
            "; at maxReplicas {max}, recommendations up to {largest_ignored_at_max} replica(s) lower are ignored"
        );
    }
    ctx.push(
        rules::TOLERANCE,
        Severity::Warning,
        object,
        "spec.behavior",
        message,
        "an absolute target is exact: the ratio is compared against status.replicas and a proposal inside the band keeps the current count (docs/hpa-behaviour.md §1.5), so the recommender's single-replica steps are silently dropped",
        "set spec.behavior.scaleUp.tolerance: \"0\" and spec.behavior.scaleDown.tolerance: \"0\"; this needs the HPAConfigurableTolerance feature gate on kube-apiserver and kube-controller-manager (alpha, off by default, in 1.33-1.34; beta, on by default, from 1.35), otherwise the API server drops the field",
        src,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_edge_differs_by_version() {
        // docs/hpa-behaviour.md §1.5: at 10 replicas, 11 is outside the band before 1.33, inside from 1.33.
        assert!(!within_tolerance(10, 11, 0.1, 0.1, true));
        assert!(within_tolerance(10, 11, 0.1, 0.1, false));
        assert!(within_tolerance(11, 12, 0.1, 0.1, true));
        assert!(!within_tolerance(9, 10, 0.1, 0.1, false));
        assert!(!within_tolerance(1000, 1001, 0.0, 0.0, false));
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("1"), Some(1.0));
        assert_eq!(parse_quantity("1000m"), Some(1.0));
        assert_eq!(parse_quantity("0.1"), Some(0.1));
        assert_eq!(parse_quantity("100m"), Some(0.1));
        assert_eq!(parse_quantity("2k"), Some(2000.0));
        assert_eq!(parse_quantity("1e3"), Some(1000.0));
        assert_eq!(parse_quantity("x"), None);
        assert_eq!(parse_quantity("1q"), None);
    }
}
