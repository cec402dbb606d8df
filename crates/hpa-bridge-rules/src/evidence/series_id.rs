//! Who a series is: the target that exports it, its name and its labels.
//!
//! An answer reads hundreds of series. Were each observation to hold its own references to the
//! store's strings, every input would take and drop three reference counts per request, each
//! on a cache line of its own in a large store. An observation instead points into one list
//! shared by the whole scope, built when the scope is resolved (store/resolved_scope.rs), so an
//! answer takes one count per input on lines that the previous answer over the same scope also
//! touched.

use std::ops::Deref;
use std::sync::Arc;

use serde::Serialize;

use super::{SeriesLabels, TargetId};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SeriesId {
    pub target: TargetId,
    pub series: Arc<str>,
    pub labels: SeriesLabels,
}

/// One series' identity within a shared list; reads as the `SeriesId` itself.
#[derive(Clone, Debug)]
pub struct SeriesRef {
    ids: Arc<[SeriesId]>,
    index: u32,
}

impl SeriesRef {
    /// A series with a list of its own (sources that build each observation on its own).
    pub fn new(target: TargetId, series: Arc<str>, labels: SeriesLabels) -> SeriesRef {
        SeriesRef {
            ids: Arc::from([SeriesId {
                target,
                series,
                labels,
            }]),
            index: 0,
        }
    }

    /// The `index`th series of a shared list. The caller builds the list with each series
    /// once, by target, then name, then labels (as the store's resolutions are:
    /// store/resolved_scope.rs), which `follows` relies on.
    pub fn at(ids: &Arc<[SeriesId]>, index: usize) -> Option<SeriesRef> {
        (index < ids.len()).then(|| SeriesRef {
            ids: ids.clone(),
            index: index as u32,
        })
    }

    /// Whether this series comes after `earlier` in the same shared list, so after it in
    /// series order and not the same series: told without reading either identity, which in
    /// a large store sit on cold lines.
    pub fn follows(&self, earlier: &SeriesRef) -> bool {
        Arc::ptr_eq(&self.ids, &earlier.ids) && self.index > earlier.index
    }

    /// The list this reference reads from, without keeping it alive.
    #[cfg(any(test, feature = "test-support"))]
    pub fn list(&self) -> std::sync::Weak<[SeriesId]> {
        Arc::downgrade(&self.ids)
    }
}

impl Deref for SeriesRef {
    type Target = SeriesId;

    fn deref(&self) -> &SeriesId {
        // `at` and `new` only make references inside their list.
        &self.ids[self.index as usize]
    }
}

impl PartialEq for SeriesRef {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Serialize for SeriesRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_reads_as_its_series_and_stays_inside_its_list() {
        let id = |n: &str| SeriesId {
            target: TargetId("http://a/m".into()),
            series: n.into(),
            labels: SeriesLabels::default(),
        };
        let ids: Arc<[SeriesId]> = Arc::from(vec![id("x"), id("y")]);
        assert_eq!(&*SeriesRef::at(&ids, 1).unwrap().series, "y");
        assert!(SeriesRef::at(&ids, 2).is_none());
        let own = SeriesRef::new(
            TargetId("http://a/m".into()),
            "y".into(),
            SeriesLabels::default(),
        );
        assert_eq!(own, SeriesRef::at(&ids, 1).unwrap());
        assert_ne!(own, SeriesRef::at(&ids, 0).unwrap());

        // Only a later entry of the same list follows: not itself, not an earlier one, not
        // an equal series of another list.
        let (x, y) = (
            SeriesRef::at(&ids, 0).unwrap(),
            SeriesRef::at(&ids, 1).unwrap(),
        );
        assert!(y.follows(&x));
        assert!(!x.follows(&y) && !y.follows(&y.clone()));
        let copy: Arc<[SeriesId]> = Arc::from(vec![id("x"), id("y")]);
        assert!(!SeriesRef::at(&copy, 1).unwrap().follows(&x));
        assert!(!own.follows(&x));
    }
}
