//! Discovery documents. The per-version `APIResourceList` is also the aggregator's
//! availability probe and must never be empty (docs/hpa-behaviour.md §3.1).

use serde_json::{json, Value};

use super::{GROUP, GROUP_VERSION, VERSION};

fn group_version_entry() -> Value {
    json!({"groupVersion": GROUP_VERSION, "version": VERSION})
}

fn group() -> Value {
    json!({
        "name": GROUP,
        "versions": [group_version_entry()],
        "preferredVersion": group_version_entry(),
    })
}

/// `/apis` as plain `APIGroupList` JSON: an aggregator asking for discovery v2 falls back to
/// the per-version document, which is the safe choice (docs/hpa-behaviour.md §3.1).
pub fn api_group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]})
}

pub fn api_group() -> Value {
    let mut g = group();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

/// One resource per served metric; a placeholder keeps the list non-empty, because kubectl
/// 1.26+ prints "Got empty response" on every command when it is empty.
pub fn api_resource_list(metrics: &[String]) -> Value {
    let mut names: Vec<&str> = metrics.iter().map(String::as_str).collect();
    if names.is_empty() {
        names.push("externalmetrics");
    }
    let resources: Vec<Value> = names
        .into_iter()
        .map(|name| {
            json!({
                "name": name,
                "singularName": "",
                "namespaced": true,
                "kind": "ExternalMetricValueList",
                "verbs": ["get"],
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": resources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_list_is_never_empty() {
        let doc = api_resource_list(&[]);
        assert_eq!(doc["resources"][0]["name"], "externalmetrics");
        let doc = api_resource_list(&["a".into(), "b".into()]);
        assert_eq!(doc["resources"].as_array().map(Vec::len), Some(2));
        assert_eq!(doc["resources"][1]["kind"], "ExternalMetricValueList");
    }
}
