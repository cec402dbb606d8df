//! Ground truth taken from the scenario, never from the adapter: exported values over time, the
//! floor the pods really hold, what each adapter instance could have learnt, and the threshold
//! policy's true target.

use super::*;

pub(super) fn step_value(steps: &[Step], t: Millis) -> Option<&SampleValue> {
    steps
        .iter()
        .take_while(|s| ms(s.at) <= t)
        .last()
        .map(|s| &s.value)
}

/// A threshold metric's numbers, read from the adapter config for the ground truth: the
/// checks compute `ceil(V/T)` themselves rather than calling `crate::threshold`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ThresholdTruth {
    pub(super) up: f64,
    pub(super) down: f64,
    pub(super) sustain_up_ms: Millis,
    pub(super) sustain_down_ms: Millis,
    pub(super) min: i64,
    pub(super) max: i64,
}

impl ThresholdTruth {
    /// The threshold metric over the scenario's load series, if any.
    pub(super) fn from_config(config: &Config, load: &LoadSpec) -> Option<ThresholdTruth> {
        let m = config.metrics.iter().find_map(|m| match m {
            hpa_bridge_rules::config::MetricSpec::Threshold(t)
                if t.series.contains(&load.series) =>
            {
                Some(t)
            }
            _ => None,
        })?;
        let up = m.up_per_replica;
        let sustain = |d: Option<HumanDuration>| d.map(ms).unwrap_or(0);
        Some(ThresholdTruth {
            up,
            down: m.down_per_replica.unwrap_or(up),
            sustain_up_ms: m.sustain.as_ref().map(|s| sustain(s.up)).unwrap_or(0),
            sustain_down_ms: m.sustain.as_ref().map(|s| sustain(s.down)).unwrap_or(0),
            min: m.min.map(i64::from).unwrap_or(1),
            max: m.max.map(i64::from).unwrap_or(i64::MAX),
        })
    }
}

/// The label the recommendation over `hpa_expect_replicas` is fenced by, read from the adapter
/// config for the ground truth: the controllers of the newest epoch in it are the leaders.
pub(super) fn epoch_label(config: &Config) -> Option<String> {
    config.metrics.iter().find_map(|m| match m {
        hpa_bridge_rules::config::MetricSpec::Recommendation(r)
            if r.series.iter().any(|s| s == "hpa_expect_replicas") =>
        {
            r.epoch_label.clone()
        }
        _ => None,
    })
}

/// `ceil(v / per)` as the least `n` with `n × per ≥ v`.
pub(super) fn ceil_div(v: f64, per: f64) -> i64 {
    let mut n = (v / per).ceil().max(0.0);
    while n > 0.0 && (n - 1.0) * per >= v {
        n -= 1.0;
    }
    while n * per < v {
        n += 1.0;
    }
    n as i64
}

/// What the current adapter instance could have learnt from one exporter, judged from the
/// scenario (which scrape rounds met a healthy exporter), not from the adapter's store.
#[derive(Clone, Debug, Default)]
pub(super) struct Delivered {
    /// When a scrape last received the series, and the value it showed.
    pub(super) last: Option<(Millis, SampleValue)>,
    /// A valid index was received at least once (pods: the floor is complete for this pod).
    pub(super) ever_valid: bool,
    /// When a scrape last received the pod's load series (scenarios with `load:`).
    pub(super) load_at: Option<Millis>,
}

pub(super) struct ControllerRun {
    pub(super) spec: ControllerSpec,
    pub(super) exporter: Exporter,
    pub(super) delivered: Delivered,
}

pub(super) struct Pod {
    pub(super) ordinal: u32,
    pub(super) created_at: Millis,
    pub(super) exporter: Exporter,
    /// Since when `ordinal + 1` has exceeded the recommendation (drain mode).
    pub(super) above_since: Option<Millis>,
    /// The last valid index the pod really held (ground truth for the floor).
    pub(super) truth_index: i64,
    pub(super) delivered: Delivered,
    /// A Deployment's pod: the ReplicaSet it belongs to (an index into the Deployment's list).
    pub(super) replica_set: usize,
    /// `metadata.uid`, drawn from the scenario's seed.
    pub(super) uid: String,
    /// `controller.kubernetes.io/pod-deletion-cost` as the watch shows it.
    pub(super) cost: Option<String>,
    /// A cost the writer has sent and the watch does not show yet: (when it shows, value).
    pub(super) cost_pending: Option<(Millis, String)>,
}

impl Pod {
    pub(super) fn name(&self, workload: &str) -> String {
        format!("{workload}-{}", self.ordinal)
    }

    pub(super) fn ready(&self, w: &WorkloadSpec, t: Millis) -> bool {
        t >= self.created_at.saturating_add(ms(w.readiness_delay))
    }

    /// The index the pod exports at `t` (docs/hpa-behaviour.md §4.1: `ordinal + 1` while Ready and
    /// holding state, else 0), or its override.
    pub(super) fn index_at(&self, w: &WorkloadSpec, t: Millis) -> SampleValue {
        if let Some(o) = w.index_overrides.iter().find(|o| o.ordinal == self.ordinal) {
            return step_value(&o.values, t)
                .cloned()
                .unwrap_or(SampleValue::Number(0.0));
        }
        if !self.ready(w, t) {
            return SampleValue::Number(0.0);
        }
        let holding = match w.stateful {
            StatefulMode::None => false,
            StatefulMode::Ready => true,
            StatefulMode::Drain => self.above_since.is_none_or(|s| t - s < ms(w.drain_after)),
        };
        SampleValue::Number(if holding {
            f64::from(self.ordinal) + 1.0
        } else {
            0.0
        })
    }
}

pub(super) fn index_page(w: &WorkloadSpec, pod: &str, value: &str) -> String {
    format!(
        "# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{hpa_target_kind=\"{}\",hpa_target_name=\"{}\",service_instance_id=\"{pod}\"}} {value}\n",
        w.kind, w.name
    )
}

pub(super) fn load_line(series: &str, w: &WorkloadSpec, pod: &str, value: f64) -> String {
    format!(
        "# TYPE {series} gauge\n{series}{{hpa_target_kind=\"{}\",hpa_target_name=\"{}\",service_instance_id=\"{pod}\"}} {value}\n",
        w.kind, w.name
    )
}

/// A controller's page: its recommendation, and with `evaluated` = (series, Unix seconds) when
/// its loop last evaluated, under the same labels.
pub(super) fn expect_page(
    kind: &str,
    workload: &str,
    instance: &str,
    labels: &BTreeMap<String, String>,
    value: &str,
    evaluated: Option<(&str, f64)>,
) -> String {
    let extra: String = labels
        .iter()
        .map(|(k, v)| format!(",{k}=\"{v}\""))
        .collect();
    let line = |series: &str, value: &str| {
        format!(
            "# TYPE {series} gauge\n{series}{{hpa_target_kind=\"{kind}\",hpa_target_name=\"{workload}\",service_instance_id=\"{instance}\"{extra}}} {value}\n"
        )
    };
    let mut page = line("hpa_expect_replicas", value);
    if let Some((series, at)) = evaluated {
        page.push_str(&line(series, &at.to_string()));
    }
    page
}

/// Not exposition text: an unterminated label set on a wanted family, then HTML.
pub(super) fn garbage_page(series: &str) -> String {
    format!("{series}{{hpa_target_name=\"lobby 7\n<html><body>502 Bad Gateway</body></html>\n\u{0}\u{1}\n")
}
