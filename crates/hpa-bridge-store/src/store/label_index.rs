//! Where each value of one label sits among a resolved scope's series.
//!
//! An Object query with discovery reads the series of the workload's own pods out of the
//! namespace's whole scope (engine/object_scope.rs). Scanning that scope's series for their
//! `pod` label costs as much as the namespace holds on every request; this index, built once
//! per resolution (so once per change of the scope's series), names the positions of a pod's
//! series directly. It holds positions only: values are read fresh from the slots, as for
//! every read of a resolution.

use std::collections::HashMap;

use super::series_slots::SlotId;
use super::SeriesId;

/// A series' place in its resolution: the target's position among `ResolvedScope::targets`,
/// the series' among `ResolvedScope::ids`, and its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Position {
    pub(super) target: u32,
    pub(super) series: u32,
    pub(super) slot: SlotId,
}

/// The positions of the series carrying each value of `label`, each list ascending.
#[derive(Clone, Debug)]
pub(super) struct LabelIndex {
    label: String,
    /// Values are label values of in-scope series, which an exporter may choose (a static
    /// target's series name any pod they like), so they are hashed with SipHash under a
    /// random key, as every exporter-chosen key is. Its size follows the resolution's: a
    /// position per series and at most a value each, and the resolutions kept are bounded
    /// (`MAX_RESOLVED_SERIES`).
    by_value: HashMap<String, Vec<Position>>,
}

impl LabelIndex {
    /// The index of `label` over series `ids`, where target `t` holds the series in
    /// `slots[t]` in turn (a resolution's layout).
    pub(super) fn build<'s>(
        label: &str,
        ids: &[SeriesId],
        slots: impl IntoIterator<Item = &'s [SlotId]>,
    ) -> LabelIndex {
        let mut by_value: HashMap<String, Vec<Position>> = HashMap::new();
        let mut first = 0usize;
        for (target, slots) in slots.into_iter().enumerate() {
            let count = slots.len();
            for ((series, id), slot) in ids.iter().enumerate().skip(first).take(count).zip(slots) {
                if let Some(value) = id.labels.get(label) {
                    let position = Position {
                        target: target as u32,
                        series: series as u32,
                        slot: *slot,
                    };
                    match by_value.get_mut(value.as_str()) {
                        Some(list) => list.push(position),
                        None => {
                            by_value.insert(value.clone(), vec![position]);
                        }
                    }
                }
            }
            first += count;
        }
        LabelIndex {
            label: label.to_string(),
            by_value,
        }
    }

    pub(super) fn label(&self) -> &str {
        &self.label
    }

    /// The positions of the series whose label is one of `values`, ascending (so in the
    /// resolution's order).
    pub(super) fn positions<'v>(&self, values: impl IntoIterator<Item = &'v str>) -> Vec<Position> {
        let mut found: Vec<Position> = values
            .into_iter()
            .filter_map(|v| self.by_value.get(v))
            .flatten()
            .copied()
            .collect();
        // A series has one value of the label, so only a value asked twice finds a position
        // twice.
        found.sort_unstable_by_key(|p| p.series);
        found.dedup();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_bridge_rules::evidence::{SeriesLabels, TargetId};

    fn id(target: &str, pod: Option<&str>) -> SeriesId {
        SeriesId {
            target: TargetId(target.into()),
            series: "s".into(),
            labels: SeriesLabels::from(
                pod.map(|p| ("pod".to_string(), p.to_string()))
                    .into_iter()
                    .collect::<std::collections::BTreeMap<_, _>>(),
            ),
        }
    }

    #[test]
    fn positions_name_each_series_of_the_values_once_in_order() {
        // Target 0 holds two series of pod a; target 1 one of b and one without the label;
        // target 2 one of a (a static target's series may name any pod).
        let ids = [
            id("t0", Some("a")),
            id("t0", Some("a")),
            id("t1", Some("b")),
            id("t1", None),
            id("t2", Some("a")),
        ];
        let slots: [&[SlotId]; 3] = [&[10, 11], &[20, 21], &[30]];
        let index = LabelIndex::build("pod", &ids, slots);
        let at = |target, series, slot| Position {
            target,
            series,
            slot,
        };
        assert_eq!(
            index.positions(["b", "a", "zz"]),
            vec![at(0, 0, 10), at(0, 1, 11), at(1, 2, 20), at(2, 4, 30)]
        );
        assert_eq!(index.positions(["b"]), vec![at(1, 2, 20)]);
        assert!(index.positions([]).is_empty());
        assert_eq!(index.label(), "pod");
    }
}
