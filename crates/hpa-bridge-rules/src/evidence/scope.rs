//! The scope of a query, and the same scope as an owned key for caches.

use crate::selector::LabelSelector;

/// The scope of a query: which series names, in which namespace, matching which selector.
#[derive(Clone, Debug)]
pub struct Scope<'a> {
    pub series: &'a [String],
    pub namespace_label: &'a str,
    pub namespace: &'a str,
    pub selector: &'a LabelSelector,
}

impl Scope<'_> {
    /// The scope as an owned key, for caches of its evidence or resolution.
    pub fn key(&self) -> ScopeKey {
        ScopeKey::of(
            self.series,
            self.namespace_label,
            self.namespace,
            self.selector.as_str(),
        )
    }
}

/// A scope as a cache key (`Scope::key`): series names, namespace label, namespace and
/// selector text, each after its length, in one byte string. Keys are built several times per
/// answer (the request's evidence cache and this one), so one allocation instead of one per
/// part is worth the encoding; the lengths keep it unambiguous whatever the parts hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScopeKey(Box<[u8]>);

impl ScopeKey {
    pub fn of(
        series: &[String],
        namespace_label: &str,
        namespace: &str,
        selector: &str,
    ) -> ScopeKey {
        let parts = series
            .iter()
            .map(String::as_str)
            .chain([namespace_label, namespace, selector]);
        let mut bytes = Vec::with_capacity(parts.clone().map(|p| p.len() + 8).sum::<usize>() + 8);
        // The number of series first: without it, a series name and the namespace label
        // could trade places.
        bytes.extend_from_slice(&(series.len() as u64).to_le_bytes());
        for part in parts {
            bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
            bytes.extend_from_slice(part.as_bytes());
        }
        ScopeKey(bytes.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_keys_differ_whenever_a_part_does() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let keys = [
            ScopeKey::of(&s(&["a", "b"]), "namespace", "default", ""),
            ScopeKey::of(&s(&["a"]), "b", "namespace", "default"),
            ScopeKey::of(&s(&["a:1:b"]), "namespace", "default", ""),
            ScopeKey::of(&s(&["a"]), "namespace", "default", "x=1"),
            ScopeKey::of(&s(&["a"]), "namespace", "default,x=1", ""),
            ScopeKey::of(&s(&["a"]), "namespace=default", "", "x=1"),
            ScopeKey::of(&[], "a", "namespace", "default"),
        ];
        for (i, a) in keys.iter().enumerate() {
            for (j, b) in keys.iter().enumerate() {
                assert_eq!(i == j, a == b, "{a:?} {b:?}");
            }
        }
        assert_eq!(
            keys[0],
            ScopeKey::of(&s(&["a", "b"]), "namespace", "default", "")
        );
    }
}
