//! An Object query's two label selectors (its workload's named scope, and the series in it
//! that name another API group), kept per workload and query selector. They depend only on
//! the query's selector, the workload and the configured workload labels, so a kept pair is
//! exactly the pair `object_scope::label_scopes` builds, without validating, sorting and
//! writing the canonical text of two selectors on every request. With a pod set, also the
//! split scopes (`object_scope::split_scopes`), kept while the workload's own pods stay the
//! same.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, Weak};

use lru::LruCache;

use crate::bounded_lru::bounded_lru;

use hpa_bridge_rules::config::WorkloadLabels;
use hpa_bridge_rules::selector::LabelSelector;

use super::object_scope::{self, ObjectRef, SplitScopes};
use hpa_bridge_rules::cluster::{PodFacts, PodSet};

/// Bounds the workloads kept: keys are what authorised callers ask, one per Object HPA. Past
/// it the least recently asked goes, and is built again when asked. Each holds up to
/// `SELECTORS_PER_WORKLOAD` pairs.
const MAX_WORKLOADS: NonZeroUsize = NonZeroUsize::new(4096).unwrap();

/// Query selectors kept per workload: a few HPAs may ask about one workload, each with its own
/// `metricLabelSelector`, and each would otherwise rebuild what the other's ask replaced.
/// Past it the least recently asked goes.
const SELECTORS_PER_WORKLOAD: usize = 4;

/// The selectors of one workload's Object scope, under the query selector they were built for.
pub(super) struct ObjectSelectors {
    /// The query's selector (canonical text): a workload asked under another one is built
    /// again.
    selector: String,
    /// `None` when the workload's name cannot be a label value.
    pub(super) scopes: Option<(LabelSelector, LabelSelector)>,
    /// The split scopes for the last pod set asked with.
    split: Mutex<Option<KeptSplit>>,
}

/// The split scopes and what they were built from.
struct KeptSplit {
    /// The last set asked with, by identity: a weak reference keeps its address from being
    /// reused for another set while it is compared, but not its pods, so the answer that
    /// moves on to a new set does not free the old one; the cluster that replaced it does,
    /// which for discovery is its publisher, off the answer path (unless an ask found the
    /// facts behind and replaced them itself, or the set was replaced while an answer
    /// still held it).
    set: Weak<BTreeMap<String, PodFacts>>,
    /// The workload's own pods in that set (`object_scope::own_pods`).
    own: Vec<String>,
    split: Option<Arc<SplitScopes>>,
}

impl ObjectSelectors {
    /// `object_scope::split_scopes(selector, object, wl, own)` for the pods of `pods` whose
    /// workload is `object`'s, kept while the same set is asked with. `selector`, `object`
    /// and `wl` are this entry's.
    pub(super) fn split(
        &self,
        selector: &LabelSelector,
        object: &ObjectRef,
        wl: &WorkloadLabels,
        pods: &PodSet,
    ) -> Option<Arc<SplitScopes>> {
        let lock = || self.split.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = &*lock() {
            if std::ptr::eq(kept.set.as_ptr(), Arc::as_ptr(pods)) {
                return kept.split.clone();
            }
        }
        let own = object_scope::own_pods(pods, object);
        // A cluster may hand out a new set on any change of any pod (discovery does): one of
        // the same own pods keeps the scopes, so their tags, and so their kept resolutions.
        if let Some(kept) = &mut *lock() {
            if kept.own.iter().map(String::as_str).eq(own.iter().copied()) {
                kept.set = Arc::downgrade(pods);
                return kept.split.clone();
            }
        }
        let split = object_scope::split_scopes(selector, object, wl, &own).map(Arc::new);
        *lock() = Some(KeptSplit {
            set: Arc::downgrade(pods),
            own: own.iter().map(|p| p.to_string()).collect(),
            split: split.clone(),
        });
        split
    }
}

pub(super) struct ObjectSelectorCache {
    /// Keys from authorised requests, bounded: a seeded fast hash will do.
    kept: Mutex<LruCache<ObjectRef, Vec<Arc<ObjectSelectors>>, foldhash::fast::RandomState>>,
}

impl Default for ObjectSelectorCache {
    fn default() -> Self {
        ObjectSelectorCache {
            kept: Mutex::new(bounded_lru(MAX_WORKLOADS)),
        }
    }
}

impl ObjectSelectorCache {
    /// `object_scope::label_scopes(selector, object, wl)`, kept. `wl` is the adapter's
    /// configuration, the same for every call on one cache.
    pub(super) fn get(
        &self,
        selector: &LabelSelector,
        object: &ObjectRef,
        wl: &WorkloadLabels,
    ) -> Arc<ObjectSelectors> {
        let lock = || self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let under = |kept: &Arc<ObjectSelectors>| kept.selector == selector.as_str();
        if let Some(of_workload) = lock().get_mut(object) {
            if let Some(at) = of_workload.iter().position(under) {
                // The last asked goes to the back, so the front is the one to drop.
                of_workload[at..].rotate_left(1);
                return of_workload[of_workload.len() - 1].clone();
            }
        }
        // Built outside the lock: two requests may both build, and the second keeps its own.
        let built = Arc::new(ObjectSelectors {
            selector: selector.as_str().to_owned(),
            scopes: object_scope::label_scopes(selector, object, wl),
            split: Mutex::new(None),
        });
        let mut kept = lock();
        match kept.get_mut(object) {
            Some(of_workload) => {
                of_workload.retain(|k| !under(k));
                if of_workload.len() >= SELECTORS_PER_WORKLOAD {
                    of_workload.remove(0);
                }
                of_workload.push(built.clone());
            }
            None => {
                kept.put(object.clone(), vec![built.clone()]);
            }
        }
        built
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ObjectKind;

    fn object(name: &str) -> ObjectRef {
        ObjectRef {
            kind: ObjectKind::StatefulSet,
            namespace: "games".into(),
            name: name.into(),
        }
    }

    /// Every pair handed out is the one `label_scopes` builds for that selector and workload,
    /// whichever was asked before it.
    #[test]
    fn a_kept_pair_is_the_built_pair() {
        let wl = WorkloadLabels::default();
        let cache = ObjectSelectorCache::default();
        let selectors = [
            LabelSelector::parse("").unwrap(),
            LabelSelector::parse("tier=web").unwrap(),
            LabelSelector::parse("tier in (web,api),zone!=b").unwrap(),
        ];
        let objects = [
            object("lobby"),
            object("chat"),
            object("not a label value!"),
        ];
        // Each workload is asked under each selector in turn, three times over.
        for round in 0..3 {
            for o in &objects {
                for i in 0..selectors.len() {
                    let s = &selectors[(i + round) % selectors.len()];
                    let got = cache.get(s, o, &wl);
                    assert_eq!(got.scopes, object_scope::label_scopes(s, o, &wl), "{s} {o}");
                }
            }
        }
        assert!(cache.get(&selectors[0], &objects[2], &wl).scopes.is_none());
    }

    /// The split scopes are kept while the workload's own pods stay the same, whether the
    /// cluster hands out the same set or a new one (discovery does on any pod's change), and
    /// built again when they change; a set without own pods has none.
    #[test]
    fn split_scopes_follow_the_own_pods_not_the_set() {
        use hpa_bridge_rules::cluster::{PodFacts, PodSet};
        let wl = WorkloadLabels::default();
        let cache = ObjectSelectorCache::default();
        let s = LabelSelector::parse("").unwrap();
        let lobby = object("lobby");
        let set = |pods: &[(&str, &str)]| -> PodSet {
            Arc::new(
                pods.iter()
                    .map(|(pod, owner)| {
                        let facts = PodFacts {
                            workload: Some(object(owner).workload()),
                            ..PodFacts::default()
                        };
                        (pod.to_string(), facts)
                    })
                    .collect(),
            )
        };
        let entry = cache.get(&s, &lobby, &wl);
        let first = set(&[("lobby-0", "lobby"), ("chat-0", "chat")]);
        let a = entry.split(&s, &lobby, &wl, &first).unwrap();
        assert!(Arc::ptr_eq(
            &a,
            &entry.split(&s, &lobby, &wl, &first).unwrap()
        ));
        // Another workload's pod changed: a new set, the same own pods.
        let second = set(&[("lobby-0", "lobby"), ("chat-1", "chat")]);
        assert!(Arc::ptr_eq(
            &a,
            &entry.split(&s, &lobby, &wl, &second).unwrap()
        ));
        let third = set(&[("lobby-0", "lobby"), ("lobby-1", "lobby")]);
        let b = entry.split(&s, &lobby, &wl, &third).unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
        let built = object_scope::split_scopes(&s, &lobby, &wl, &["lobby-0", "lobby-1"]).unwrap();
        assert_eq!(b.own.requirements(), built.own.requirements());
        assert_eq!(b.others.requirements(), built.others.requirements());
        // The kept set is gone: a new one of the same own pods keeps the scopes, and one of
        // other own pods, wherever it is allocated, builds them again.
        drop((first, second, third));
        let fourth = set(&[("lobby-0", "lobby"), ("lobby-1", "lobby")]);
        assert!(Arc::ptr_eq(
            &b,
            &entry.split(&s, &lobby, &wl, &fourth).unwrap()
        ));
        drop(fourth);
        let fifth = set(&[("lobby-0", "lobby"), ("lobby-2", "lobby")]);
        let c = entry.split(&s, &lobby, &wl, &fifth).unwrap();
        assert!(!Arc::ptr_eq(&b, &c));
        assert!(entry
            .split(&s, &lobby, &wl, &set(&[("chat-0", "chat")]))
            .is_none());
    }

    /// A workload asked again under the same selector is read from the cache, not rebuilt.
    #[test]
    fn the_same_query_is_built_once() {
        let wl = WorkloadLabels::default();
        let cache = ObjectSelectorCache::default();
        let s = LabelSelector::parse("tier=web").unwrap();
        let first = cache.get(&s, &object("lobby"), &wl);
        let second = cache.get(&s, &object("lobby"), &wl);
        assert!(Arc::ptr_eq(&first, &second));
        let other = LabelSelector::parse("tier=api").unwrap();
        let second_hpa = cache.get(&other, &object("lobby"), &wl);
        assert!(!Arc::ptr_eq(&first, &second_hpa));
        // Two HPAs on one workload, each with its own selector, keep both.
        for _ in 0..3 {
            assert!(Arc::ptr_eq(&first, &cache.get(&s, &object("lobby"), &wl)));
            assert!(Arc::ptr_eq(
                &second_hpa,
                &cache.get(&other, &object("lobby"), &wl)
            ));
        }
        // Past the bound the least recently asked goes, not the first built; the rest stay.
        assert!(Arc::ptr_eq(&first, &cache.get(&s, &object("lobby"), &wl)));
        let more: Vec<LabelSelector> = (0..SELECTORS_PER_WORKLOAD - 1)
            .map(|i| LabelSelector::parse(&format!("shard={i}")).unwrap())
            .collect();
        for m in &more {
            cache.get(m, &object("lobby"), &wl);
        }
        assert!(Arc::ptr_eq(&first, &cache.get(&s, &object("lobby"), &wl)));
        assert!(!Arc::ptr_eq(
            &second_hpa,
            &cache.get(&other, &object("lobby"), &wl)
        ));
        let last = more.last().unwrap();
        let kept = cache.get(last, &object("lobby"), &wl);
        assert!(Arc::ptr_eq(&kept, &cache.get(last, &object("lobby"), &wl)));
    }
}
