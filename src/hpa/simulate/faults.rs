//! Fault injection: which exporters misbehave, when, and how (down, garbage, flapping...).

use super::*;

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FaultMode {
    /// Connections are closed without a response: unreachable.
    Down,
    /// HTTP 500.
    Error,
    /// The response comes after `delay`, beyond the scrape timeout.
    Slow,
    /// A 200 page that is not exposition text.
    Garbage,
    /// A 200 page without the series: the exporter stopped exporting it.
    Absent,
    /// A controller's loop is stuck while its endpoint still answers 200: until `to` every
    /// page is the one it served at `from`, the same value and, on its `timestampSeries`, the
    /// same evaluation time.
    Frozen,
    /// The pod keeps exporting, but its Ready condition is False (a failing readiness probe).
    NotReady,
    /// The Deployment's template changes at `from`: a new ReplicaSet, rolled out with maxSurge 1
    /// and maxUnavailable 0 until `to`, when the rollout is paused (docs/hpa-behaviour.md §9.3).
    Rollout,
}

impl FaultMode {
    /// The fault is in what an exporter serves, rather than in the cluster.
    pub(super) fn is_exporter_fault(self) -> bool {
        !matches!(self, FaultMode::NotReady | FaultMode::Rollout)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultSpec {
    /// A controller or pod name (`lobby-3`), `controllers`, `pods` or `all`.
    pub target: String,
    pub from: HumanDuration,
    pub to: HumanDuration,
    pub mode: FaultMode,
    /// Alternate: faulty for `flap`, healthy for `flap`, and so on.
    #[serde(default)]
    pub flap: Option<HumanDuration>,
    /// For `slow`: how late the response is (default 5 × scrape.timeout).
    #[serde(default)]
    pub delay: Option<HumanDuration>,
}

impl FaultSpec {
    pub(super) fn applies_to(&self, exporter: &str, is_pod: bool) -> bool {
        match self.target.as_str() {
            "all" => true,
            "pods" => is_pod,
            "controllers" => !is_pod,
            name => name == exporter,
        }
    }

    pub(super) fn active_at(&self, t: Millis) -> bool {
        let (from, to) = (ms(self.from), ms(self.to));
        if t < from || t >= to {
            return false;
        }
        match self.flap {
            Some(f) if !f.0.is_zero() => ((t - from) / ms(f)) % 2 == 0,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flapping_faults_alternate() {
        let f = FaultSpec {
            target: "all".into(),
            from: HumanDuration(Duration::from_secs(60)),
            to: HumanDuration(Duration::from_secs(180)),
            mode: FaultMode::Down,
            flap: Some(HumanDuration(Duration::from_secs(20))),
            delay: None,
        };
        assert!(!f.active_at(59_999));
        assert!(f.active_at(60_000));
        assert!(f.active_at(79_999));
        assert!(!f.active_at(80_000));
        assert!(f.active_at(100_000));
        assert!(!f.active_at(180_000));
    }

    #[test]
    fn a_frozen_loop_names_a_controller() {
        let scenario = |target: &str| {
            Scenario::from_yaml(&format!(
                "name: x\nduration: 1m\nworkload: {{name: lobby, initialReplicas: 2}}\n\
                 hpa: {{maxReplicas: 4, metrics: [{{type: External, external: {{metric: {{name: hpa_target_replicas}}, target: {{type: AverageValue, averageValue: '1'}}}}}}]}}\n\
                 controllers: [{{name: c, timestampSeries: hpa_expect_evaluated_seconds, values: [{{at: 0s, value: 2}}]}}]\n\
                 faults: [{{target: {target}, from: 10s, to: 30s, mode: frozen}}]\n"
            ))
        };
        let ok = scenario("c").unwrap();
        assert_eq!(ok.faults[0].mode, FaultMode::Frozen);
        assert!(scenario("controllers").is_ok());
        for pod in ["lobby-0", "pods", "all"] {
            let err = scenario(pod).unwrap_err().to_string();
            assert!(err.contains("faults[0].target"), "{pod}: {err}");
        }
    }
}
