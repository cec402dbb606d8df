//! Which query was asked: the metric, the namespace, the selector and, for an Object query,
//! the workload it named. Keys of the queries `/status` lists, of reused answers and of
//! threshold evaluations (`MetricQuery::key`).

use super::object_scope::ObjectRef;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct QueryKey {
    /// In lower case: metric names in a path match without regard to case.
    pub(super) metric: String,
    pub(super) namespace: String,
    /// The selector's canonical text.
    pub(super) selector: String,
    /// The workload an Object query named: its scope is that workload, apart from any
    /// External query with the same selector.
    pub(super) object: Option<ObjectRef>,
}
