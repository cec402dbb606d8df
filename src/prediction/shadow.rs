//! Shadow mode, the safe first rollout (docs/explain.md, "Shadow mode"): an HPA annotated
//! `hpa-bridge.io/shadow-metric: NAME` is explained twice, as it is and as if it also read
//! hpa-bridge's metric NAME as an Object metric of its own scale target with
//! `averageValue: "1"` (the form docs/metrics.md recommends). Nothing is served to the HPA and
//! no object is changed: the second explanation runs on a copy of the HPA, with the answer the
//! adapter would give, evaluated without being served.

use serde_json::{json, Value};

use crate::explain::{Observation, ServedAnswer};

/// The annotation that names the metric an HPA is shadowed with.
pub const SHADOW_ANNOTATION: &str = "hpa-bridge.io/shadow-metric";

/// The metric `hpa` is shadowed with, if it is annotated for shadow mode.
pub fn shadow_metric(hpa: &Value) -> Option<&str> {
    hpa["metadata"]["annotations"][SHADOW_ANNOTATION]
        .as_str()
        .map(str::trim)
        .filter(|m| !m.is_empty())
}

/// The scale target `Kind/name` and its `apiVersion`, as the HPA names it.
pub fn scale_target(hpa: &Value) -> Option<(&str, &str, &str)> {
    let r = &hpa["spec"]["scaleTargetRef"];
    Some((
        r["apiVersion"].as_str().unwrap_or("apps/v1"),
        r["kind"].as_str()?,
        r["name"].as_str()?,
    ))
}

/// `observation` as if its HPA also read `metric` as an Object metric of its scale target,
/// which hpa-bridge answers with `answer`. `None` when the HPA names no scale target.
pub fn shadowed(
    observation: &Observation,
    metric: &str,
    answer: ServedAnswer,
) -> Option<Observation> {
    let (api_version, kind, name) = scale_target(&observation.hpa)?;
    let extra = json!({
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": api_version, "kind": kind, "name": name},
            "metric": {"name": metric},
            "target": {"type": "AverageValue", "averageValue": "1"},
        }
    });
    let mut shadow = observation.clone();
    let metrics = &mut shadow.hpa["spec"]["metrics"];
    match metrics.as_array_mut() {
        Some(list) => list.push(extra),
        None => *metrics = Value::Array(vec![extra]),
    }
    if let Ok(served) = shadow.served.as_mut() {
        served.push(answer);
    }
    Some(shadow)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::explain::{explain, PodCount, ScaleView};

    pub(crate) fn cpu_hpa(annotation: Option<&str>) -> Value {
        let mut hpa = json!({
            "metadata": {"namespace": "games", "name": "lobby"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lobby"},
                "minReplicas": 1, "maxReplicas": 10,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
            },
            "status": {
                "currentReplicas": 2, "desiredReplicas": 2,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 60, "averageValue": "300m"}}}],
            },
        });
        if let Some(a) = annotation {
            hpa["metadata"]["annotations"] = json!({SHADOW_ANNOTATION: a});
        }
        hpa
    }

    pub(crate) fn observation(hpa: Value) -> Observation {
        Observation {
            hpa,
            scale: Ok(ScaleView {
                spec_replicas: 2,
                status_replicas: 2,
                selector: "app=lobby".into(),
            }),
            pods: Ok(PodCount { pods: 2, ready: 2 }),
            served: Ok(Vec::new()),
            history: Ok(Vec::new()),
            other_hpas_on_target: Vec::new(),
            foreign_external_owner: None,
            kube_minor: hpa_bridge_hpa_model::NEWEST_KUBE_MINOR,
            now_ms: 1_000_000,
        }
    }

    pub(crate) fn answer(value: Option<u64>) -> ServedAnswer {
        ServedAnswer {
            namespace: "games".into(),
            metric: "hpa_target_replicas".into(),
            selector: String::new(),
            object: Some("StatefulSet/lobby".into()),
            value,
            refusal: value.is_none().then(|| "stale".into()),
            reason: "because".into(),
        }
    }

    #[test]
    fn the_annotation_names_the_metric() {
        assert_eq!(
            shadow_metric(&cpu_hpa(Some(" hpa_target_replicas "))),
            Some("hpa_target_replicas")
        );
        assert_eq!(shadow_metric(&cpu_hpa(Some(""))), None);
        assert_eq!(shadow_metric(&cpu_hpa(None)), None);
    }

    /// The CPU HPA holds at 2; read beside hpa-bridge's 5 it would go to 5, and a refusal
    /// leaves it where the CPU metric puts it. The HPA itself is not changed.
    #[test]
    fn the_shadow_explains_the_hpa_as_if_it_also_read_the_metric() {
        let obs = observation(cpu_hpa(Some("hpa_target_replicas")));
        let real = explain(&obs).unwrap();
        assert_eq!(real.next.desired_replicas, 2);
        let shadow = shadowed(&obs, "hpa_target_replicas", answer(Some(5))).unwrap();
        let would = explain(&shadow).unwrap();
        assert_eq!(would.metrics.len(), 2);
        assert_eq!(would.metrics[1].name, "hpa_target_replicas");
        assert_eq!(would.metrics[1].proposed_replicas, Some(5));
        assert_eq!(would.winner.as_deref(), Some("hpa_target_replicas"));
        // The default scale-up policy, max(2 × 2, 4) per sync, allows 4 of the 5.
        assert_eq!(would.next.desired_replicas, 4);
        assert!(would.next.why.contains("rate policy"), "{}", would.next.why);
        assert_eq!(obs.hpa["spec"]["metrics"].as_array().unwrap().len(), 1);

        let refused = shadowed(&obs, "hpa_target_replicas", answer(None)).unwrap();
        let would = explain(&refused).unwrap();
        assert!(!would.metrics[1].valid, "{:?}", would.metrics[1]);
        assert!(
            would.metrics[1].reason.contains("because"),
            "{:?}",
            would.metrics[1]
        );
        assert_eq!(would.next.desired_replicas, 2);
    }
}
