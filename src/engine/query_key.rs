//! Which query was asked: the metric, the namespace, the selector and, for an Object query,
//! the workload it named. Keys of the queries `/status` lists and of threshold evaluations.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use super::object_scope::ObjectRef;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct QueryKey {
    pub(super) metric: String,
    pub(super) namespace: String,
    pub(super) selector: String,
    /// The workload an Object query named: its scope is that workload, apart from any
    /// External query with the same selector.
    pub(super) object: Option<ObjectRef>,
}

/// A query key as borrowed parts: every request marks its query seen, and an owned key is
/// built only for a query not seen before.
pub(super) trait QueryParts {
    fn parts(&self) -> (&str, &str, &str, Option<&ObjectRef>);
}

impl QueryParts for QueryKey {
    fn parts(&self) -> (&str, &str, &str, Option<&ObjectRef>) {
        (
            &self.metric,
            &self.namespace,
            &self.selector,
            self.object.as_ref(),
        )
    }
}

impl QueryParts for (&str, &str, &str, Option<&ObjectRef>) {
    fn parts(&self) -> (&str, &str, &str, Option<&ObjectRef>) {
        *self
    }
}

impl QueryKey {
    pub(super) fn of(parts: &dyn QueryParts) -> QueryKey {
        let (metric, namespace, selector, object) = parts.parts();
        QueryKey {
            metric: metric.to_string(),
            namespace: namespace.to_string(),
            selector: selector.to_string(),
            object: object.cloned(),
        }
    }
}

impl<'a> Borrow<dyn QueryParts + 'a> for QueryKey {
    fn borrow(&self) -> &(dyn QueryParts + 'a) {
        self
    }
}

// Ordered as the derived order of `QueryKey` orders its fields, so a map of keys finds
// borrowed parts where the owned key is.
impl Ord for dyn QueryParts + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl PartialOrd for dyn QueryParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn QueryParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn QueryParts + '_ {}

// Hashed by their parts alike, so a hash map of keys finds borrowed parts too.
impl Hash for QueryKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.parts().hash(h)
    }
}

impl Hash for dyn QueryParts + '_ {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.parts().hash(h)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::engine::object_scope::ObjectKind;

    #[test]
    fn borrowed_parts_find_the_owned_key_in_order_and_by_hash() {
        let object = ObjectRef {
            kind: ObjectKind::StatefulSet,
            namespace: "games".into(),
            name: "lobby".into(),
        };
        let parts: Vec<(&str, &str, &str, Option<&ObjectRef>)> = vec![
            ("a", "games", "x=1", None),
            ("a", "games", "x=1", Some(&object)),
            ("a", "games", "x=2", None),
            ("a", "z", "", None),
            ("b", "games", "", None),
            ("b", "games", "", Some(&object)),
        ];
        let map: BTreeMap<QueryKey, usize> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| (QueryKey::of(p), i))
            .collect();
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(map.get(p as &dyn QueryParts), Some(&i), "{p:?}");
        }
        assert_eq!(
            map.get(&("a", "games", "x=3", None) as &dyn QueryParts),
            None
        );
        let hashed: std::collections::HashMap<QueryKey, usize> =
            map.iter().map(|(k, v)| (k.clone(), *v)).collect();
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(hashed.get(p as &dyn QueryParts), Some(&i), "{p:?}");
        }
        // The owned keys sort as their parts do.
        let owned: Vec<usize> = map.values().copied().collect();
        assert_eq!(owned, (0..parts.len()).collect::<Vec<_>>());
    }
}
