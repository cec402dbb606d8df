//! Which rows a `/status` request gets: filters by namespace and metric, and pages with a
//! Kubernetes-style `limit` and `continue` token. Choosing the page is pure and linear; only
//! the rows on the page are evaluated, so a large cluster's status costs what the page holds.

use std::collections::BTreeMap;

use super::object_scope::{ObjectKind, ObjectRef};

/// The most rows one page holds; a larger `limit` is cut to it.
pub const MAX_STATUS_LIMIT: usize = 5000;
/// The rows per page when the request does not say.
pub const DEFAULT_STATUS_LIMIT: usize = 500;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StatusKey {
    pub namespace: String,
    pub metric: String,
    /// The External query's `labelSelector`, or the Object query's `metricLabelSelector`.
    pub selector: String,
    /// The workload an Object query (custom.metrics.k8s.io) named; `None` for External.
    pub object: Option<ObjectRef>,
}

/// Why a row is listed: an HPA asked for it (and when), or it was found in the data.
#[derive(Clone, Debug, PartialEq)]
pub enum RowOrigin {
    Request {
        at_ms: hpa_bridge_rules::clock::Millis,
    },
    Discovered,
}

/// The `continue` token for the next page, and how many rows remain after this one.
pub type NextPage = (String, usize);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusQuery {
    pub namespace: Option<String>,
    pub metric: Option<String>,
    pub limit: usize,
    /// Start after this row (from a previous page's `continue`).
    pub after: Option<StatusKey>,
}

impl Default for StatusQuery {
    fn default() -> Self {
        StatusQuery {
            namespace: None,
            metric: None,
            limit: DEFAULT_STATUS_LIMIT,
            after: None,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StatusQueryError {
    #[error("limit={0:?}: must be a whole number from 1 to {MAX_STATUS_LIMIT}")]
    Limit(String),
    #[error("continue={0:?}: not a token from a previous /status page")]
    Continue(String),
    #[error("unknown parameter {0:?}: /status takes namespace, metric, limit and continue")]
    Unknown(String),
}

impl StatusQuery {
    /// From decoded query parameters (first of a repeated name wins, as for `labelSelector`).
    pub fn from_params(params: &[(String, String)]) -> Result<Self, StatusQueryError> {
        let mut q = StatusQuery::default();
        let mut seen = std::collections::BTreeSet::new();
        for (name, value) in params {
            if !seen.insert(name.as_str()) {
                continue;
            }
            match name.as_str() {
                "namespace" if !value.is_empty() => q.namespace = Some(value.clone()),
                "metric" if !value.is_empty() => q.metric = Some(value.to_ascii_lowercase()),
                "namespace" | "metric" => {}
                "limit" => {
                    q.limit = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_STATUS_LIMIT).contains(n))
                        .ok_or_else(|| StatusQueryError::Limit(value.clone()))?;
                }
                "continue" => q.after = Some(decode_token(value)?),
                other => return Err(StatusQueryError::Unknown(other.to_string())),
            }
        }
        Ok(q)
    }

    fn admits(&self, key: &StatusKey) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|ns| *ns == key.namespace)
            && self.metric.as_ref().is_none_or(|m| *m == key.metric)
            && self.after.as_ref().is_none_or(|after| key > after)
    }

    /// The rows of this page, in order, and the token for the next page with how many rows
    /// remain after it.
    pub fn page<'a>(
        &self,
        rows: &'a BTreeMap<StatusKey, RowOrigin>,
    ) -> (Vec<(&'a StatusKey, &'a RowOrigin)>, Option<NextPage>) {
        let mut matching = rows.iter().filter(|(k, _)| self.admits(k));
        let page: Vec<_> = matching.by_ref().take(self.limit).collect();
        let remaining = matching.count();
        let next = match (remaining, page.last()) {
            (0, _) | (_, None) => None,
            (n, Some((last, _))) => Some((encode_token(last), n)),
        };
        (page, next)
    }
}

/// The last row of a page, hex-encoded JSON: opaque to clients, and nothing to trust, since
/// decoding it only chooses where the next page starts.
fn encode_token(key: &StatusKey) -> String {
    let json = match &key.object {
        None => serde_json::json!([key.namespace, key.metric, key.selector]),
        Some(o) => serde_json::json!([
            key.namespace,
            key.metric,
            key.selector,
            o.kind.resource(),
            o.name
        ]),
    };
    hex::encode(json.to_string())
}

fn decode_token(token: &str) -> Result<StatusKey, StatusQueryError> {
    let bad = || StatusQueryError::Continue(token.chars().take(64).collect());
    let bytes = hex::decode(token).map_err(|_| bad())?;
    let parts: Vec<String> = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    match parts.as_slice() {
        [namespace, metric, selector] => Ok(StatusKey {
            namespace: namespace.clone(),
            metric: metric.clone(),
            selector: selector.clone(),
            object: None,
        }),
        [namespace, metric, selector, resource, name] => Ok(StatusKey {
            namespace: namespace.clone(),
            metric: metric.clone(),
            selector: selector.clone(),
            object: Some(ObjectRef {
                kind: ObjectKind::from_resource(resource).ok_or_else(bad)?,
                namespace: namespace.clone(),
                name: name.clone(),
            }),
        }),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn rows(n: usize) -> BTreeMap<StatusKey, RowOrigin> {
        (0..n)
            .map(|i| {
                (
                    StatusKey {
                        namespace: format!("ns{}", i % 3),
                        metric: if i % 2 == 0 { "a" } else { "b" }.into(),
                        selector: format!("hpa_target_name=w{i:04}"),
                        // Every fifth row an Object query's, so tokens carry both forms.
                        object: (i % 5 == 0).then(|| ObjectRef {
                            kind: ObjectKind::StatefulSet,
                            namespace: format!("ns{}", i % 3),
                            name: format!("w{i:04}"),
                        }),
                    },
                    RowOrigin::Discovered,
                )
            })
            .collect()
    }

    #[test]
    fn pages_cover_every_row_once_in_order() {
        let all = rows(1000);
        let mut q = StatusQuery::from_params(&params(&[("limit", "128")])).unwrap();
        let mut seen = Vec::new();
        loop {
            let (page, next) = q.page(&all);
            assert!(page.len() <= 128);
            seen.extend(page.iter().map(|(k, _)| (*k).clone()));
            match next {
                Some((token, remaining)) => {
                    assert_eq!(remaining, all.len() - seen.len());
                    q = StatusQuery::from_params(&params(&[
                        ("limit", "128"),
                        ("continue", &token),
                    ]))
                    .unwrap();
                }
                None => break,
            }
        }
        assert_eq!(seen, all.keys().cloned().collect::<Vec<_>>());
    }

    #[test]
    fn filters_by_namespace_and_metric() {
        let all = rows(60);
        let q =
            StatusQuery::from_params(&params(&[("namespace", "ns1"), ("metric", "B")])).unwrap();
        let (page, next) = q.page(&all);
        assert_eq!(page.len(), 10);
        assert!(next.is_none());
        assert!(page
            .iter()
            .all(|(k, _)| k.namespace == "ns1" && k.metric == "b"));
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        for (pairs, want) in [
            (vec![("limit", "0")], "limit=\"0\""),
            (vec![("limit", "5001")], "limit=\"5001\""),
            (vec![("limit", "x")], "limit=\"x\""),
            (vec![("continue", "zz")], "continue=\"zz\""),
            (vec![("continue", "5b5d")], "continue="),
            (vec![("labelSelector", "a")], "labelSelector"),
        ] {
            let err = StatusQuery::from_params(&params(&pairs)).unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
    }
}
