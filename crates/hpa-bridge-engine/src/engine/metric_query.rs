//! One question an HPA asks, through either API, and the answer served to it.
//!
//! The External API (external.metrics.k8s.io) names a metric, a namespace and a selector; the
//! custom metrics API (custom.metrics.k8s.io) names the same plus the workload the Object
//! metric describes (docs/hpa-behaviour.md §1.2, §6.5). Both are one `MetricQuery`, answered
//! by the same rules (`Adapter::answer`).

use std::any::Any;
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use hpa_bridge_rules::policy::Answer;
use hpa_bridge_rules::selector::LabelSelector;

use super::object_scope::ObjectRef;
use super::query_key::QueryKey;

#[derive(Clone, Debug)]
pub struct MetricQuery {
    /// As requested: matched against the configured names without regard to case.
    pub metric: String,
    pub namespace: String,
    pub selector: Arc<LabelSelector>,
    /// The workload an Object metric describes; every read is scoped to it.
    pub object: Option<ObjectRef>,
}

impl MetricQuery {
    pub fn external(
        metric: impl Into<String>,
        namespace: impl Into<String>,
        selector: impl Into<Arc<LabelSelector>>,
    ) -> MetricQuery {
        MetricQuery {
            metric: metric.into(),
            namespace: namespace.into(),
            selector: selector.into(),
            object: None,
        }
    }

    pub fn object(
        metric: impl Into<String>,
        object: ObjectRef,
        selector: impl Into<Arc<LabelSelector>>,
    ) -> MetricQuery {
        MetricQuery {
            metric: metric.into(),
            namespace: object.namespace.clone(),
            selector: selector.into(),
            object: Some(object),
        }
    }

    /// The key `/status`, the reuse of answers and threshold evaluations know the query by:
    /// metric names compare without regard to case, selectors by their canonical text.
    pub(super) fn key(&self) -> QueryKey {
        QueryKey {
            metric: self.metric.to_ascii_lowercase(),
            namespace: self.namespace.clone(),
            selector: self.selector.as_str().to_string(),
            object: self.object.clone(),
        }
    }

    /// The history's name for the query's scope (`history_scope`).
    pub(super) fn history_scope(&self) -> Cow<'_, str> {
        history_scope(&self.selector, self.object.as_ref())
    }
}

/// The history's name for a query's scope: the selector for an External query;
/// `StatefulSet/lobby` (as `kubectl describe hpa` names its target), narrowed by its
/// `metricLabelSelector` when one was given, for an Object query. No selector reads like an
/// Object scope: a label key's prefix is lowercase, so `StatefulSet/lobby` is no label key,
/// while `statefulsets.apps/lobby` is one (an Exists requirement), and the two would share a
/// history.
pub(super) fn history_scope<'a>(
    selector: &'a LabelSelector,
    object: Option<&ObjectRef>,
) -> Cow<'a, str> {
    let Some(object) = object else {
        return Cow::Borrowed(selector.as_str());
    };
    // Built once per Object answer: pieces pushed into one buffer of the final size, not
    // `format!`'s machinery.
    let (kind, narrowed) = (object.kind.kind(), !selector.requirements().is_empty());
    let extra = if narrowed {
        1 + selector.as_str().len()
    } else {
        0
    };
    let mut scope = String::with_capacity(kind.len() + 1 + object.name.len() + extra);
    scope.push_str(kind);
    scope.push('/');
    scope.push_str(&object.name);
    if narrowed {
        scope.push(' ');
        scope.push_str(selector.as_str());
    }
    Cow::Owned(scope)
}

/// An answer as served: shared by every request that reuses it.
#[derive(Debug)]
pub struct Served {
    pub answer: Answer,
    /// The `window` of a served value: one scrape interval, in whole seconds.
    pub window_secs: u64,
    /// `spec.replicas` of the answer's workload when it was computed, kept in the history
    /// again with every reuse: a reuse needs the cluster's facts unchanged, so it still holds.
    spec_replicas: Option<u64>,
    /// What the front door keeps with this answer (its rendering), made on first use, so that
    /// a reused answer is not prepared again. The engine never reads it.
    attachment: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl Served {
    pub(super) fn new(answer: Answer, window_secs: u64, spec_replicas: Option<u64>) -> Served {
        Served {
            answer,
            window_secs,
            spec_replicas,
            attachment: OnceLock::new(),
        }
    }

    pub(super) fn spec_replicas(&self) -> Option<u64> {
        self.spec_replicas
    }

    /// The front door's attachment to this answer, a `T::default()` on first use; `None` when
    /// it holds another type. What it keeps must depend only on the answer and on what the
    /// query's key holds, since a reused answer serves every query of that key.
    pub fn attached<T: Any + Send + Sync + Default>(&self) -> Option<&T> {
        self.attachment
            .get_or_init(|| Box::new(T::default()))
            .downcast_ref()
    }
}

/// A served answer reads as its answer.
impl std::ops::Deref for Served {
    type Target = Answer;

    fn deref(&self) -> &Answer {
        &self.answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ObjectKind;

    /// The history (and the status page's lines) name an External scope by its selector and
    /// an Object scope by the workload, narrowed by its `metricLabelSelector` in canonical form.
    #[test]
    fn history_scopes_name_the_selector_or_the_workload() {
        let lobby = ObjectRef {
            kind: ObjectKind::StatefulSet,
            namespace: "games".into(),
            name: "lobby".into(),
        };
        let api = ObjectRef {
            kind: ObjectKind::Deployment,
            ..lobby.clone()
        };
        let selector = |s: &str| LabelSelector::parse(s).unwrap();
        assert_eq!(history_scope(&selector("b=2,a=1"), None), "a=1,b=2");
        assert_eq!(history_scope(&selector(""), None), "");
        assert_eq!(
            history_scope(&selector(""), Some(&lobby)),
            "StatefulSet/lobby"
        );
        // The Exists selector on the key `statefulsets.apps/lobby` is a scope of its own.
        assert_eq!(
            history_scope(&selector("statefulsets.apps/lobby"), None),
            "statefulsets.apps/lobby"
        );
        assert_eq!(
            history_scope(&selector("zone in (b,a),app"), Some(&api)),
            "Deployment/lobby app,zone in (a,b)"
        );
    }
}
