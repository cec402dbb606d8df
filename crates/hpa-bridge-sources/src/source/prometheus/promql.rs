//! A Kubernetes label selector rendered as PromQL label matchers, and PromQL string quoting:
//! how the Prometheus source asks for exactly the series a scope holds, whatever characters
//! the selector's values hold.

use std::fmt::Write as _;

use hpa_bridge_rules::selector::{
    is_prometheus_label_name, operator_text, LabelSelector, Operator, Requirement, SelectorError,
};

/// One PromQL label matcher per requirement, e.g. `app="web"`, `zone=~"a|b"`.
///
/// Values are RE2-escaped (for regex matchers) and then escaped for a PromQL
/// double-quoted string, so any value is matched literally, whatever characters it
/// holds. Keys that are not Prometheus label names (`app.kubernetes.io/name`, `a-b`)
/// are an error rather than being mangled into a different label.
pub fn promql_matchers(selector: &LabelSelector) -> Result<Vec<String>, SelectorError> {
    selector
        .requirements()
        .iter()
        .map(|r| {
            promql_matcher(r).map_err(|message| SelectorError {
                selector: selector.to_string(),
                message,
            })
        })
        .collect()
}

/// One PromQL label matcher for this requirement.
fn promql_matcher(r: &Requirement) -> Result<String, String> {
    let key = &r.key;
    if !is_prometheus_label_name(key) {
        return Err(format!(
            "label key {key:?} is not a valid Prometheus label name \
             (must match [a-zA-Z_][a-zA-Z0-9_]* and not start with \"__\")"
        ));
    }
    let single = || match r.values.as_slice() {
        [v] => Ok(v.as_str()),
        _ => Err(format!(
            "'{}' on label {key:?} needs exactly one value",
            operator_text(r.operator)
        )),
    };
    let alternation = || {
        if r.values.is_empty() {
            // An empty alternation would render as `=~""`, i.e. "label absent", which
            // is not what an (invalid) empty `in` list means.
            return Err(format!(
                "'{}' on label {key:?} needs at least one value",
                operator_text(r.operator)
            ));
        }
        Ok(r.values
            .iter()
            .map(|v| re2_escape(v))
            .collect::<Vec<_>>()
            .join("|"))
    };
    let no_values = || {
        if r.values.is_empty() {
            Ok("")
        } else {
            Err(format!(
                "exists / does-not-exist on label {key:?} takes no values"
            ))
        }
    };
    // Prometheus treats an empty label value as an absent label, so `key!=""` is
    // "exists" and `key=""` is "does not exist". The flip side: `k=""` / `k in ("")`
    // also match series without `k`, where k8s would require the label to be present.
    let (op, body) = match r.operator {
        Operator::Equals => ("=", single()?.to_owned()),
        Operator::NotEquals => ("!=", single()?.to_owned()),
        // Prometheus anchors regex matchers on both ends, so a plain alternation of
        // escaped literals matches exactly the listed values.
        Operator::In => ("=~", alternation()?),
        Operator::NotIn => ("!~", alternation()?),
        Operator::Exists => ("!=", no_values()?.to_owned()),
        Operator::DoesNotExist => ("=", no_values()?.to_owned()),
    };
    Ok(format!("{key}{op}{}", promql_quote(&body)))
}

/// Escapes every RE2 metacharacter (the set Go's `regexp.QuoteMeta` escapes), so the result
/// matches `s` literally. RE2 allows a backslash before any ASCII punctuation.
pub fn re2_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(
            c,
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Renders a PromQL double-quoted string literal. The PromQL lexer rejects a raw newline
/// and ends the string at an unescaped `"`; it decodes Go escapes, so every control
/// character is written as an escape and nothing else needs to be.
pub fn promql_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // All Unicode control characters (C0, DEL, C1) are below U+10000.
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
