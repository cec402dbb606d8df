//! The bounded least-recently-used caches the request path keeps (parsed selectors, review and
//! certificate verdicts, seen queries, answers, Object selectors), made one way.

use std::hash::{BuildHasher, Hash};
use std::num::NonZeroUsize;

use lru::LruCache;

/// A cache of at most `cap` entries, the least recently used out first, that allocates as it
/// fills: `LruCache::with_hasher` reserves room for the whole bound at once, and the bounds are
/// set for hostile callers, far above what a cluster asks.
pub fn bounded_lru<K: Hash + Eq, V, S: BuildHasher + Default>(
    cap: NonZeroUsize,
) -> LruCache<K, V, S> {
    let mut cache = LruCache::unbounded_with_hasher(S::default());
    cache.resize(cap);
    cache
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_holds_its_bound_and_evicts_the_least_recently_used() {
        let mut c: LruCache<u32, u32, std::hash::RandomState> =
            bounded_lru(NonZeroUsize::new(2).unwrap());
        assert_eq!(c.cap().get(), 2);
        c.put(1, 1);
        c.put(2, 2);
        c.get(&1);
        c.put(3, 3);
        assert!(c.contains(&1) && c.contains(&3) && !c.contains(&2));
    }
}
