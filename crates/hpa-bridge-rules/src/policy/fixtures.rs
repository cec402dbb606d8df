//! Test fixtures shared by the rules' tests: one query context, observations and evidence.

use super::answer::{Answer, RefusalKind};
use super::observation::QueryContext;
use super::valid_when::CurrentReplicas;
use crate::clock::Millis;
use crate::config::MetricKind;
use crate::evidence::{invalid_reason, Evidence, Observation, TargetId};

pub const NOW: Millis = 1_000_000;
pub const STALE: Millis = 45_000;

/// A query for `series` in the `lobby` workload, stale after 45 s.
pub fn ctx(series: &[String]) -> QueryContext<'_> {
    ctx_with(series, "namespace=default,hpa_target_name=lobby", STALE)
}

pub fn ctx_with<'a>(
    series: &'a [String],
    scope: &'a str,
    stale_after_ms: Millis,
) -> QueryContext<'a> {
    QueryContext {
        metric: "m",
        series,
        scope: scope.into(),
        now: NOW.into(),
        stale_after_ms,
        notes_kept: usize::MAX,
    }
}

/// A present `hpa_expect_replicas` observation `age_ms` old, its value retained when valid.
pub fn obs(target: &str, value: f64, age_ms: Millis) -> Observation {
    let valid = invalid_reason(value).is_none().then_some(value as u64);
    Observation {
        last_valid: valid.map(|v| (v, NOW - age_ms)),
        ..obs_of(target, "hpa_expect_replicas", value, age_ms)
    }
}

/// A present observation of `series`, with nothing retained.
pub fn obs_of(target: &str, series: &str, value: f64, age_ms: Millis) -> Observation {
    Observation {
        id: crate::evidence::SeriesRef::new(
            TargetId(target.into()),
            series.into(),
            Default::default(),
        ),
        value,
        observed_at_ms: NOW - age_ms,
        scraped_mono_ms: Some(NOW - age_ms),
        last_valid: None,
        present: true,
        target_failing: false,
        unusable: None,
        valid_until_ms: None,
    }
}

/// `o` with its labels replaced by `labels` (a `None` value: no such label).
pub fn labelled(o: Observation, labels: &[(&str, Option<&str>)]) -> Observation {
    let map = labels
        .iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v.to_string())))
        .collect();
    Observation {
        id: crate::evidence::SeriesRef::new(
            o.id.target.clone(),
            o.id.series.clone(),
            crate::evidence::SeriesLabels::new(map),
        ),
        ..o
    }
}

pub fn ev(observations: Vec<Observation>) -> Evidence {
    Evidence {
        observations,
        ..Evidence::default()
    }
}

pub fn series() -> Vec<String> {
    vec!["hpa_expect_replicas".into()]
}

/// A served recommendation `v` of `metric`.
pub fn rec(metric: &str, v: u64) -> Answer {
    Answer::valued(metric, MetricKind::Recommendation, v, NOW, "r", "r".into())
}

/// A recommendation of `metric` refused as stale.
pub fn refused(metric: &str) -> Answer {
    Answer::refused(
        metric,
        MetricKind::Recommendation,
        RefusalKind::Stale,
        None,
        "r",
        "stale".into(),
    )
}

/// A known current replica count `v`.
pub fn cur(v: u64) -> CurrentReplicas {
    CurrentReplicas {
        value: v,
        source: "test".into(),
    }
}
