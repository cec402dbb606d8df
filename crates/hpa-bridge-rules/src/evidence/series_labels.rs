//! A series' label set, shared between the store, its index and every answer that reads it,
//! with its hash computed once.
//!
//! An answer looks each in-scope series up by its label set. Hashing a whole label map on every
//! lookup (and comparing maps on every probe) would dominate an answer's cost over a large store,
//! so the hash is taken once when the set is built, and two handles to the same set compare equal
//! without looking at the labels.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::Serialize;

use crate::selector::Labels;

#[derive(Debug)]
struct LabelSet {
    hash: u64,
    map: BTreeMap<String, String>,
}

/// Series identity within a target (with the metric name): the merged label set.
#[derive(Clone, Debug)]
pub struct SeriesLabels(Arc<LabelSet>);

/// Keyed once per process: labels come from exporters that may be hostile, so their hashes
/// must not be predictable (HashDoS).
fn keys() -> &'static std::hash::RandomState {
    static KEYS: OnceLock<std::hash::RandomState> = OnceLock::new();
    KEYS.get_or_init(std::hash::RandomState::new)
}

impl SeriesLabels {
    pub fn new(map: BTreeMap<String, String>) -> Self {
        let hash = keys().hash_one(&map);
        SeriesLabels(Arc::new(LabelSet { hash, map }))
    }
}

impl From<BTreeMap<String, String>> for SeriesLabels {
    fn from(map: BTreeMap<String, String>) -> Self {
        SeriesLabels::new(map)
    }
}

impl Default for SeriesLabels {
    fn default() -> Self {
        SeriesLabels::new(BTreeMap::new())
    }
}

impl Deref for SeriesLabels {
    type Target = BTreeMap<String, String>;
    fn deref(&self) -> &Self::Target {
        &self.0.map
    }
}

impl Hash for SeriesLabels {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl PartialEq for SeriesLabels {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || (self.0.hash == other.0.hash && self.0.map == other.0.map)
    }
}

impl Eq for SeriesLabels {}

impl PartialOrd for SeriesLabels {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SeriesLabels {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        self.0.map.cmp(&other.0.map)
    }
}

impl Serialize for SeriesLabels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.map.serialize(s)
    }
}

impl Labels for SeriesLabels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// Passes a `SeriesLabels` hash through: it is already keyed and well mixed, so hashing it
/// again would only cost time.
#[derive(Default)]
pub struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `SeriesLabels` keys use this hasher, and they write one u64; anything else is
        // still hashed, if poorly, rather than lost.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
}

/// The hasher for maps and sets keyed by `SeriesLabels`.
pub type ByLabels = BuildHasherDefault<Prehashed>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn labels(pairs: &[(&str, &str)]) -> SeriesLabels {
        SeriesLabels::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn equal_sets_built_apart_are_one_key_and_different_sets_are_not() {
        let mut m: HashMap<SeriesLabels, u32, ByLabels> = HashMap::default();
        m.insert(labels(&[("pod", "a"), ("ns", "x")]), 1);
        assert_eq!(m.get(&labels(&[("ns", "x"), ("pod", "a")])), Some(&1));
        assert_eq!(m.get(&labels(&[("ns", "x"), ("pod", "b")])), None);
        assert_eq!(m.get(&labels(&[("ns", "x")])), None);
        assert_eq!(m.get(&labels(&[])), None);
    }

    #[test]
    fn order_is_the_label_maps_order() {
        let a = labels(&[("pod", "a")]);
        let b = labels(&[("pod", "b")]);
        assert!(a < b);
        assert_eq!(a.cmp(&a.clone()), std::cmp::Ordering::Equal);
        assert_eq!(
            serde_json::to_string(&labels(&[("z", "1"), ("a", "2")])).unwrap(),
            r#"{"a":"2","z":"1"}"#
        );
    }
}
