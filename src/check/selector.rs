//! The selector rules: a metric selector should scope the scaled workload
//! (docs/hpa-behaviour.md §1.2, §4.1).

use super::*;

/// The selector as the HPA sends it, from the one renderer
/// ([`hpa_bridge_rules::selector::label_selector_to_string`], docs/hpa-behaviour.md §1.2). A selector the
/// API server would reject renders as the error, so findings still quote it and the adapter
/// query made with it fails rather than selecting everything.
pub fn selector_text(selector: Option<&K8sSelector>) -> String {
    hpa_bridge_rules::selector::label_selector_to_string(selector).unwrap_or_else(|e| e.to_string())
}

/// The single value a selector pins a label key to, if it does.
pub(super) fn pinned(selector: &K8sSelector, key: &str) -> Option<String> {
    if let Some(v) = selector.match_labels.as_ref().and_then(|m| m.get(key)) {
        return Some(v.clone());
    }
    selector
        .match_expressions
        .iter()
        .flatten()
        .find(|e| e.key == key && e.operator == "In")
        .and_then(|e| match e.values.as_deref() {
            Some([one]) => Some(one.clone()),
            _ => None,
        })
}

pub(super) fn check_selector(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    base: &str,
    selector: Option<&K8sSelector>,
    target_ref: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
) {
    let field = format!("{base}.metric.selector");
    let text = selector_text(selector);
    if text.is_empty() {
        ctx.push(
            rules::SELECTOR_SCOPE,
            Severity::Warning,
            object,
            field,
            "no selector: the request covers every series in the namespace",
            "a nil or empty selector sends no labelSelector (docs/hpa-behaviour.md §1.2); with several workloads in the namespace the adapter answers the max over all of them, so this workload follows another one's recommendation",
            format!("select the workload, e.g. matchLabels: {{hpa_target_name: {}}}", target_ref.name),
            src,
        );
        return;
    }
    let Some(selector) = selector else { return };
    shared_name(ctx, object, src, &field, selector, target_ref);
    // docs/hpa-behaviour.md §4.1: hpa_target_kind / hpa_target_name scope a workload.
    for (key, expected) in [
        ("hpa_target_name", &target_ref.name),
        ("hpa_target_kind", &target_ref.kind),
    ] {
        if let Some(v) = pinned(selector, key) {
            if &v != expected {
                ctx.push(
                    rules::SELECTOR_SCOPE,
                    Severity::Warning,
                    object,
                    field.clone(),
                    format!(
                        "the selector picks {key}={v}, but the HPA scales {} {}",
                        target_ref.kind, target_ref.name
                    ),
                    "the workload would be sized by another workload's recommendation",
                    format!(
                        "select {key}={expected}, unless following another workload is intended"
                    ),
                    src,
                );
            }
        }
    }
}

/// The selector-typo case: the selector pins `hpa_target_name` to the scaled workload's name but
/// leaves `hpa_target_kind` open, and another workload of that name lives in the namespace, so
/// both workloads' series are in scope and the adapter answers the max of them
/// (docs/hpa-behaviour.md §4.1, §6.5).
fn shared_name(
    ctx: &mut Ctx,
    object: &ObjectRef,
    src: &Option<String>,
    field: &str,
    selector: &K8sSelector,
    target_ref: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
) {
    if pinned(selector, "hpa_target_name").as_deref() != Some(target_ref.name.as_str())
        || pinned(selector, "hpa_target_kind").is_some()
    {
        return;
    }
    let ns = object.namespace.as_deref().unwrap_or("default");
    let Some(other) = ctx
        .inputs
        .workloads
        .iter()
        .find(|w| w.namespace == ns && w.name == target_ref.name && w.kind != target_ref.kind)
        .cloned()
    else {
        return;
    };
    ctx.push(
        rules::SELECTOR_SCOPE,
        Severity::Warning,
        object,
        field.to_string(),
        format!(
            "the selector pins hpa_target_name={} but not hpa_target_kind, and {} {ns}/{} shares the name",
            target_ref.name, other.kind, other.name
        ),
        "both workloads' series are in scope: the adapter answers the max over them, so this workload follows the other one's recommendation (docs/hpa-behaviour.md §6.5)",
        format!(
            "use an Object metric (describedObject: {{apiVersion: apps/v1, kind: {}, name: {}}}), or add hpa_target_kind: {} to the selector",
            target_ref.kind, target_ref.name, target_ref.kind
        ),
        src,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_text_is_sorted_like_client_go() {
        let s: K8sSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"z": "1", "hpa_target_name": "lobby"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert_eq!(
            selector_text(Some(&s)),
            "!gone,hpa_target_name=lobby,tier in (a,b),z=1"
        );
        assert_eq!(selector_text(None), "");
    }
}
