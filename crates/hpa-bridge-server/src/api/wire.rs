//! How an answer goes on the wire: the External API's `ExternalMetricValueList`, a custom
//! metrics `MetricValueList` of one served version (custom_metrics.rs), or a refusal as a
//! Kubernetes `Status`; and the renderings kept with a served answer.

use std::sync::Arc;

use bytes::Bytes;

use super::response::{status_body, StatusReason};
use super::{custom_metrics, GROUP_VERSION};
use hpa_bridge_engine::engine::{MetricQuery, Served};
use hpa_bridge_rules::clock::rfc3339;
use hpa_bridge_rules::policy::{self, Outcome};

/// How an answer goes on the wire: the External API's list, or a custom metrics
/// `MetricValueList` of one served version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireForm {
    External,
    Object(custom_metrics::ServedVersion),
}

/// The renderings of one served answer, per wire form, kept with it (`Served::attached`) so
/// that a reused answer is not rendered again. Two forms at most: a query is External or
/// Object, and custom metrics have two served versions.
#[derive(Default)]
struct Renderings([std::sync::OnceLock<(u16, Bytes)>; 2]);

impl WireForm {
    /// Where `Renderings` keeps this form: a query is External or Object, so only Object's two
    /// versions need separate places.
    fn slot(self) -> usize {
        match self {
            WireForm::External | WireForm::Object(custom_metrics::ServedVersion::V1beta2) => 0,
            WireForm::Object(custom_metrics::ServedVersion::V1beta1) => 1,
        }
    }
}

/// A value list's JSON. Its buffer starts at a size a common list fits in, so serializing it
/// does not grow and copy the buffer on the way: `to_vec` starts at 128 bytes, and the shortest
/// External list (one-letter metric, no labels) is already 189.
fn answer_json(list: &impl serde::Serialize) -> Vec<u8> {
    let mut body = Vec::with_capacity(512);
    match serde_json::to_writer(&mut body, list) {
        Ok(()) => body,
        Err(_) => b"{}".to_vec(),
    }
}

/// `served` in `form`, rendered on first use and kept with it (`Renderings`). An answer no one
/// else holds (computed with reuse off) can never be served again, so nothing is kept for it.
pub(super) fn rendered(served: &Arc<Served>, query: &MetricQuery, form: WireForm) -> (u16, Bytes) {
    let render_now = || render(served, query, form);
    if Arc::strong_count(served) == 1 {
        return render_now();
    }
    match served
        .attached::<Renderings>()
        .and_then(|r| r.0.get(form.slot()))
    {
        Some(kept) => kept.get_or_init(render_now).clone(),
        None => render_now(),
    }
}

/// An answer on the wire: its value in the form's list, or its refusal as a `Status`. Depends
/// only on the answer and on what the query's key holds, so a reused answer's rendering is
/// the one a fresh rendering would give.
fn render(served: &Served, query: &MetricQuery, form: WireForm) -> (u16, Bytes) {
    let answer = &served.answer;
    match answer.outcome {
        Outcome::Value {
            value,
            timestamp_ms,
        } => {
            let timestamp = rfc3339(timestamp_ms);
            let body = match (form, &query.object) {
                (WireForm::Object(version), Some(object)) => {
                    let list = custom_metrics::metric_value_list(
                        version,
                        object,
                        &answer.metric,
                        &query.selector,
                        timestamp,
                        served.window_secs,
                        value.to_string(),
                    );
                    answer_json(&list)
                }
                _ => {
                    let list = ExternalMetricValueList {
                        api_version: GROUP_VERSION,
                        // Exactly one item: the HPA sums every item (docs/hpa-behaviour.md §1.2).
                        items: [ExternalMetricValue {
                            metric_labels: query.selector.equality_labels(),
                            metric_name: &answer.metric,
                            timestamp,
                            value: value.to_string(),
                            window: served.window_secs,
                        }],
                        kind: "ExternalMetricValueList",
                        metadata: Metadata {},
                    };
                    answer_json(&list)
                }
            };
            (200, Bytes::from(body))
        }
        Outcome::Refused { kind, .. } => {
            let reason = if kind.http_code() == 404 {
                StatusReason::NotFound
            } else {
                StatusReason::ServiceUnavailable
            };
            let about = match &query.object {
                Some(object) => format!(" for {object}"),
                None => String::new(),
            };
            let message = format!(
                "{}{about} {}: {}",
                answer.metric,
                refusal_verb(kind),
                answer.reason
            );
            (reason.code(), status_body(reason, &message))
        }
    }
}

/// The served list, typed so that it is written without building a JSON tree per request;
/// fields in the order `serde_json::Value` would sort them, so the bytes are those of the tree.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExternalMetricValueList<'a> {
    pub(super) api_version: &'static str,
    pub(super) items: [ExternalMetricValue<'a>; 1],
    pub(super) kind: &'static str,
    pub(super) metadata: Metadata,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExternalMetricValue<'a> {
    pub(super) metric_labels: std::collections::BTreeMap<&'a str, &'a str>,
    pub(super) metric_name: &'a str,
    pub(super) timestamp: String,
    pub(super) value: String,
    pub(super) window: u64,
}

#[derive(serde::Serialize)]
pub(super) struct Metadata {}

pub(super) fn refusal_verb(kind: policy::RefusalKind) -> &'static str {
    use policy::RefusalKind::*;
    match kind {
        NoMatch => "has no data",
        Stale => "is stale",
        Partial => "is partial",
        IncompleteFloor => "has an incomplete floor",
        Invalid => "is invalid",
        SourceUnavailable => "is unavailable",
        GateClosed => "is held by its validity gate",
    }
}
