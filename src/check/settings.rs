//! The cluster facts a check depends on: Kubernetes version, cluster tolerance, budgets.

use super::*;

/// A `major.minor` Kubernetes version: it decides which tolerance check the controller runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeVersion {
    pub major: u32,
    pub minor: u32,
}

impl KubeVersion {
    /// The newest version the HPA model follows: `check`'s default (docs/hpa-behaviour.md §7).
    pub const NEWEST: KubeVersion = KubeVersion {
        major: 1,
        minor: NEWEST_KUBE_MINOR,
    };

    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim().trim_start_matches('v');
        let mut parts = t.split('.');
        let major = parts.next().and_then(|p| p.parse().ok());
        let minor = parts
            .next()
            .map(|p| p.trim_end_matches('+'))
            .and_then(|p| p.parse().ok());
        match (major, minor) {
            (Some(major), Some(minor)) => Ok(KubeVersion { major, minor }),
            _ => Err(format!(
                "{text:?} is not a Kubernetes version (use e.g. 1.33)"
            )),
        }
    }

    /// The tolerance test this version's controller runs, from the model
    /// (docs/hpa-behaviour.md §1.5).
    pub(super) fn tolerance_style(self) -> ToleranceStyle {
        ToleranceStyle::for_kube_minor(self.model_minor())
    }

    /// The `HPAScaleToZero` default of this version (docs/hpa-behaviour.md §7.1).
    pub(super) fn scale_to_zero(self) -> ScaleToZero {
        ScaleToZero::for_kube_minor(self.model_minor())
    }

    /// The minor the model's version rules compare with; any 2.x is newer than every 1.x.
    fn model_minor(self) -> u32 {
        if self.major > 1 {
            u32::MAX
        } else {
            self.minor
        }
    }
}

impl std::fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[derive(Clone, Debug)]
pub struct CheckSettings {
    /// `--horizontal-pod-autoscaler-tolerance` of the cluster's controller manager.
    pub cluster_tolerance: f64,
    pub kube_version: KubeVersion,
    /// The recommender's own stabilisation window (docs/hpa-behaviour.md §4.1: 60 s).
    pub recommender_window_s: i64,
    /// How long reaching maxReplicas from minReplicas may take before it is flagged.
    pub max_scale_up_s: i64,
    /// The `HPAScaleToZero` feature gate is enabled on a version where it is off by default.
    pub scale_to_zero: bool,
    /// The Service that should own the APIService: (namespace, name).
    pub adapter_service: (String, String),
}

impl CheckSettings {
    /// `minReplicas: 0` passes the API server: the gate is on by default, or said to be on.
    pub(super) fn allows_min_zero(&self) -> bool {
        self.scale_to_zero || self.kube_version.scale_to_zero().allows_min_zero()
    }
}

impl Default for CheckSettings {
    fn default() -> Self {
        CheckSettings {
            cluster_tolerance: DEFAULT_TOLERANCE,
            kube_version: KubeVersion::NEWEST,
            recommender_window_s: 60,
            max_scale_up_s: 600,
            scale_to_zero: false,
            adapter_service: ("hpa-bridge".into(), "hpa-bridge".into()),
        }
    }
}
