//! Which pods of an opted-in Deployment need their `pod-deletion-cost` written, and to what.

use std::collections::{BTreeMap, HashMap};

use hpa_bridge_rules::cluster::PodFacts;
use hpa_bridge_rules::policy::cost_confirms;

pub use crate::lease::FIELD_MANAGER;

/// One annotation to write: `controller.kubernetes.io/pod-deletion-cost` of `pod` set to `cost`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostPatch {
    pub pod: String,
    pub cost: i32,
}

/// The patches that make each Running pod's cost its fresh index: 0 for an idle pod, the
/// index for one that holds state. A pod whose index is not known keeps its annotation as it
/// is (writing 0 could rank a pod that holds state first); one whose annotation already
/// says its index is left alone, so the API server sees a write only when a value changes.
/// An index beyond the annotation's 32 bits is never written: the floor then stays
/// incomplete and the workload holds.
pub fn cost_patches(
    pods: &BTreeMap<String, PodFacts>,
    indices: &HashMap<&str, Option<u64>>,
) -> Vec<CostPatch> {
    pods.iter()
        .filter(|(_, facts)| facts.running)
        .filter_map(|(pod, facts)| {
            let index = indices.get(pod.as_str()).copied().flatten()?;
            let cost = i32::try_from(index).ok()?;
            (!cost_confirms(facts.deletion_cost.as_deref(), index)).then(|| CostPatch {
                pod: pod.clone(),
                cost,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(running: bool, cost: Option<&str>) -> PodFacts {
        PodFacts {
            running,
            deletion_cost: cost.map(Into::into),
            ..PodFacts::default()
        }
    }

    #[test]
    fn only_known_indices_that_differ_from_the_annotation_are_written() {
        let pods: BTreeMap<String, PodFacts> = [
            ("holding", pod(true, None)),
            ("released", pod(true, Some("2"))),
            ("confirmed", pod(true, Some("3"))),
            ("idle-unannotated", pod(true, None)),
            ("unknown", pod(true, Some("5"))),
            ("pending", pod(false, None)),
            ("huge", pod(true, None)),
        ]
        .into_iter()
        .map(|(n, f)| (n.to_string(), f))
        .collect();
        let indices: HashMap<&str, Option<u64>> = HashMap::from([
            ("holding", Some(1)),
            ("released", Some(0)),
            ("confirmed", Some(3)),
            ("idle-unannotated", Some(0)),
            ("unknown", None),
            ("pending", Some(2)),
            ("huge", Some(1 << 40)),
        ]);
        let written: Vec<(String, i32)> = cost_patches(&pods, &indices)
            .into_iter()
            .map(|p| (p.pod, p.cost))
            .collect();
        assert_eq!(
            written,
            vec![("holding".to_string(), 1), ("released".to_string(), 0)]
        );
    }
}
