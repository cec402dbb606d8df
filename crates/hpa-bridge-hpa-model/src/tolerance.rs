//! The controller flags a decision depends on and the tolerance band (docs/hpa-behaviour.md
//! §1.5).

use std::time::Duration;

use super::{DEFAULT_DOWNSCALE_STABILIZATION, DEFAULT_TOLERANCE};

/// How the controller treats `minReplicas: 0` and a scale target at 0 replicas: the
/// `HPAScaleToZero` feature gate and the implementation behind it (docs/hpa-behaviour.md §1.7.7,
/// §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleToZero {
    /// The gate is off: the API server rejects `minReplicas: 0`, and a target at 0 replicas
    /// pauses autoscaling (docs/hpa-behaviour.md §1.7.1).
    Off,
    /// The alpha gate switched on before 1.37: a target at 0 is autoscaled only while
    /// `minReplicas` is 0, so raising `minReplicas` at 0 pauses it (docs/hpa-behaviour.md §7.2).
    ReplicasRule,
    /// 1.36 with the gate switched on, and 1.37 and later (beta, on by default): the HPA records
    /// `ScaledToZero=True` when it scales to 0 and autoscales a target at 0 only while that
    /// condition holds; a 0 set by anyone else pauses it (docs/hpa-behaviour.md §7.2).
    Condition,
}

impl ScaleToZero {
    /// The default of a Kubernetes 1.`minor` cluster: on from 1.37 (docs/hpa-behaviour.md §7.1).
    pub fn for_kube_minor(minor: u32) -> Self {
        Self::for_kube_minor_with_gate(minor, None)
    }

    /// A Kubernetes 1.`minor` cluster whose `HPAScaleToZero` gate is set to `gate`, or left at
    /// its default with `None`. With the gate on, 1.36 already runs the condition
    /// implementation; older controllers the `minReplicas` rule (docs/hpa-behaviour.md §7.1).
    pub fn for_kube_minor_with_gate(minor: u32, gate: Option<bool>) -> Self {
        match gate.unwrap_or(minor >= 37) {
            false => ScaleToZero::Off,
            true if minor >= 36 => ScaleToZero::Condition,
            true => ScaleToZero::ReplicasRule,
        }
    }

    /// `minReplicas: 0` passes the API server's validation.
    pub fn allows_min_zero(self) -> bool {
        self != ScaleToZero::Off
    }
}

/// How the tolerance band is tested (docs/hpa-behaviour.md §1.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToleranceStyle {
    /// Before 1.33: `|1 - ratio| <= tolerance`, in float64 as Go computes it.
    Symmetric,
    /// 1.33 and later: `1 - down <= ratio <= 1 + up`, both ends inclusive. `configurable` is the
    /// `HPAConfigurableTolerance` gate (alpha, off, in 1.33–1.34; beta, on, from 1.35): only
    /// with it on are `behavior.scaleUp/scaleDown.tolerance` honoured.
    PerDirection { configurable: bool },
}

impl ToleranceStyle {
    /// The style and default gate of a Kubernetes 1.`minor` controller (docs/hpa-behaviour.md §1.5).
    pub fn for_kube_minor(minor: u32) -> Self {
        if minor < 33 {
            ToleranceStyle::Symmetric
        } else {
            ToleranceStyle::PerDirection {
                configurable: minor >= 35,
            }
        }
    }
}

/// kube-controller-manager flags the decision depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ControllerConfig {
    /// `--horizontal-pod-autoscaler-tolerance` (docs/hpa-behaviour.md §1.5).
    pub tolerance: f64,
    pub tolerance_style: ToleranceStyle,
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (docs/hpa-behaviour.md §1.7.3/§1.7.4).
    pub downscale_stabilization: Duration,
    /// The `HPAScaleToZero` gate on kube-apiserver and kube-controller-manager.
    pub scale_to_zero: ScaleToZero,
    /// 1.34 and later: an External sum that overflows, or an AverageValue sum that goes
    /// negative, reads as `MaxInt64` (docs/hpa-behaviour.md §1.8). Before, the sum wraps.
    pub guarded_external_sum: bool,
}

impl ControllerConfig {
    /// Flag defaults of a Kubernetes 1.`minor` controller.
    pub fn for_kube_minor(minor: u32) -> Self {
        ControllerConfig {
            tolerance: DEFAULT_TOLERANCE,
            tolerance_style: ToleranceStyle::for_kube_minor(minor),
            downscale_stabilization: DEFAULT_DOWNSCALE_STABILIZATION,
            scale_to_zero: ScaleToZero::for_kube_minor(minor),
            guarded_external_sum: minor >= 34,
        }
    }
}

impl Default for ControllerConfig {
    /// Kubernetes 1.35 defaults: tolerance 0.1, per-direction band with the gate on, 300 s.
    fn default() -> Self {
        ControllerConfig::for_kube_minor(35)
    }
}

/// The band a usage ratio must leave before a metric proposes a change (docs/hpa-behaviour.md §1.5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerances {
    pub style: ToleranceStyle,
    pub scale_down: f64,
    pub scale_up: f64,
}

impl Tolerances {
    /// docs/hpa-behaviour.md §1.5: legacy `|1-ratio| <= tol`; 1.33+ `1-down <= ratio <= 1+up`.
    /// NaN is never within (as in Go).
    pub fn is_within(&self, ratio: f64) -> bool {
        match self.style {
            ToleranceStyle::Symmetric => (1.0 - ratio).abs() <= self.scale_up,
            ToleranceStyle::PerDirection { .. } => {
                (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
            }
        }
    }
}

/// The AverageValue path's usage ratio, `sum / (averageValue × replicas)` on milli values in
/// float64, as the controller computes it (docs/hpa-behaviour.md §1.5). `replicas` is
/// `status.replicas`.
pub fn average_value_ratio(usage_milli: i64, target_milli: i64, replicas: i64) -> f64 {
    usage_milli as f64 / (target_milli as f64 * replicas as f64)
}
