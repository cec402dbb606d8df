//! PromQL for one scope: the series selector and the fresh and retained queries.

use super::*;

/// The two PromQL queries for one scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeQueries {
    /// Raw samples within `staleAfter`: a matrix.
    pub fresh: String,
    /// The last value of every series within `retainFor`, plus the gone markers: a vector.
    pub retained: String,
}

pub(crate) fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The series selector for a scope, e.g.
/// `{__name__=~"a|b",namespace="default",hpa_target_name="lobby"}`. `Ok(None)` when the scope
/// can match no Prometheus series at all.
///
/// A selector key that is not a Prometheus label name (`app.kubernetes.io/name`) can never be
/// present on a series: `=`, `in` and exists on it match nothing, while `!=`, `notin` and
/// does-not-exist always hold, exactly as k8s matching treats an absent label.
pub fn series_selector(scope: &Scope<'_>) -> Result<Option<String>, String> {
    if scope.series.is_empty() {
        return Err("the metric names no series".into());
    }
    for name in scope.series {
        if !is_metric_name(name) {
            return Err(format!("{name:?} is not a Prometheus metric name"));
        }
    }
    if !is_prometheus_label_name(scope.namespace_label) {
        return Err(format!(
            "namespaceLabel {:?} is not a Prometheus label name",
            scope.namespace_label
        ));
    }
    let mut kept: Vec<Requirement> = Vec::new();
    for r in scope.selector.requirements() {
        if is_prometheus_label_name(&r.key) {
            kept.push(r.clone());
            continue;
        }
        match r.operator {
            Operator::Equals | Operator::In | Operator::Exists => return Ok(None),
            Operator::NotEquals | Operator::NotIn | Operator::DoesNotExist => {}
        }
    }
    let matchers = LabelSelector::from_requirements(kept)
        .and_then(|s| promql_matchers(&s))
        .map_err(|e| e.to_string())?;
    // Metric names cannot hold regex metacharacters today, but escaping keeps the matcher
    // literal whatever the name validation allows tomorrow.
    let names = scope
        .series
        .iter()
        .map(|n| re2_escape(n))
        .collect::<Vec<_>>()
        .join("|");
    let mut parts = vec![
        format!("__name__=~{}", promql_quote(&names)),
        format!(
            "{}={}",
            scope.namespace_label,
            promql_quote(scope.namespace)
        ),
    ];
    parts.extend(matchers);
    Ok(Some(format!("{{{}}}", parts.join(","))))
}

/// Both queries for a scope; `Ok(None)` when nothing can match.
pub fn scope_queries(
    scope: &Scope<'_>,
    stale_after_ms: Millis,
    retain_for_ms: Millis,
) -> Result<Option<ScopeQueries>, String> {
    let Some(sel) = series_selector(scope)? else {
        return Ok(None);
    };
    let fresh_window = stale_after_ms.max(1);
    // The retained window must cover the fresh one, or a fresh series could look unknown.
    let retain_window = retain_for_ms.max(fresh_window);
    let last = format!("last_over_time({sel}[{retain_window}ms])");
    let name_copy = |expr: &str| {
        format!("label_replace({expr}, \"{NAME_COPY_LABEL}\", \"$1\", \"__name__\", \"(.+)\")")
    };
    // Seen within retainFor, target healthy now, yet not current in Prometheus: the exporter
    // stopped exporting the series (Prometheus wrote a staleness marker for it).
    let gone = format!(
        "{} unless {}",
        name_copy(&format!("({last} and on(job, instance) (up == 1))")),
        name_copy(&sel)
    );
    Ok(Some(ScopeQueries {
        fresh: format!("{sel}[{fresh_window}ms]"),
        retained: format!("{last} or label_replace({gone}, \"{GONE_LABEL}\", \"1\", \"\", \"\")"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal reader for the selectors built here: `{name op "literal",...}` with Go string
    /// escapes, as the PromQL lexer reads them. Returns the decoded matchers, or an error if
    /// anything is left over, so a value that broke out of its string would fail to parse or
    /// show up as an extra matcher.
    fn read_selector(s: &str) -> Result<Vec<(String, String, String)>, String> {
        let mut chars = s.chars().peekable();
        if chars.next() != Some('{') {
            return Err("no {".into());
        }
        let mut out = Vec::new();
        loop {
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    name.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            let mut op = String::new();
            while let Some(&c) = chars.peek() {
                if matches!(c, '=' | '!' | '~') {
                    op.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            if !matches!(op.as_str(), "=" | "!=" | "=~" | "!~") || name.is_empty() {
                return Err(format!("bad matcher {name:?} {op:?}"));
            }
            if chars.next() != Some('"') {
                return Err("no opening quote".into());
            }
            let mut value = String::new();
            loop {
                match chars.next().ok_or("unterminated string")? {
                    '"' => break,
                    '\n' => return Err("raw newline".into()),
                    '\\' => match chars.next().ok_or("dangling escape")? {
                        '"' => value.push('"'),
                        '\\' => value.push('\\'),
                        'n' => value.push('\n'),
                        'r' => value.push('\r'),
                        't' => value.push('\t'),
                        'u' => {
                            let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                            let code = u32::from_str_radix(&hex, 16).map_err(|e| e.to_string())?;
                            value.push(char::from_u32(code).ok_or("bad code point")?);
                        }
                        other => return Err(format!("unknown escape \\{other}")),
                    },
                    c => value.push(c),
                }
            }
            out.push((name, op, value));
            match chars.next() {
                Some(',') => continue,
                Some('}') if chars.peek().is_none() => return Ok(out),
                other => return Err(format!("unexpected {other:?} after a matcher")),
            }
        }
    }

    fn scope_sel(
        series: &[String],
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Option<String>, String> {
        series_selector(&Scope {
            series,
            namespace_label: "namespace",
            namespace,
            selector,
        })
    }

    fn names() -> Vec<String> {
        vec![
            "hpa_expect_replicas".into(),
            "ns:hpa_expect_replicas:max".into(),
        ]
    }

    #[test]
    fn selector_is_names_namespace_and_translated_requirements() {
        let sel = LabelSelector::parse("hpa_target_name in (lob.y,b),zone!=x,!gone").unwrap();
        let text = scope_sel(&names(), "default", &sel).unwrap().unwrap();
        let m = read_selector(&text).unwrap();
        assert_eq!(
            m,
            vec![
                (
                    "__name__".into(),
                    "=~".into(),
                    "hpa_expect_replicas|ns:hpa_expect_replicas:max".into()
                ),
                ("namespace".into(), "=".into(), "default".into()),
                ("gone".into(), "=".into(), "".into()),
                ("hpa_target_name".into(), "=~".into(), "b|lob\\.y".into()),
                ("zone".into(), "!=".into(), "x".into()),
            ],
            "{text}"
        );
    }

    #[test]
    fn hostile_values_stay_inside_their_string() {
        // k8s validation rejects these in selectors, so they come in through the structured
        // API, the namespace path segment and the escaping helpers themselves.
        let hostile = [
            r#"x"} or vector(1) or {a=""#,
            r#"lobby"|.*"#,
            "a\\\"b",
            "line\nbreak\u{0}\u{7f}",
            ".*",
            "a|b",
        ];
        for h in hostile {
            let quoted = promql_quote(h);
            let text = format!("{{a={quoted},b=~{}}}", promql_quote(&re2_escape(h)));
            let m = read_selector(&text).unwrap_or_else(|e| panic!("{h:?}: {e}: {text}"));
            assert_eq!(m.len(), 2, "{text}");
            assert_eq!(m[0].2, h);
            // The regex form escapes every metacharacter: no `|` or `.` stays bare.
            let re = &m[1].2;
            let mut bare = re
                .replace("\\\\", "")
                .replace("\\|", "")
                .replace("\\.", "")
                .replace("\\*", "");
            bare.retain(|c| c == '|' || c == '.' || c == '*');
            assert!(bare.is_empty(), "{h:?} -> {re:?}");

            let sel = LabelSelector::everything();
            let text = scope_sel(&names(), h, &sel).unwrap().unwrap();
            let m = read_selector(&text).unwrap_or_else(|e| panic!("{h:?}: {e}: {text}"));
            assert_eq!(m.len(), 2, "{text}");
            assert_eq!(m[1], ("namespace".into(), "=".into(), h.to_string()));

            let structured = LabelSelector::from_requirements([Requirement {
                key: "hpa_target_name".into(),
                operator: Operator::In,
                values: vec![h.into()],
            }]);
            assert!(structured.is_err(), "k8s validation must reject {h:?}");
        }
    }

    #[test]
    fn keys_that_are_not_prometheus_labels_follow_absent_label_semantics() {
        let series = names();
        for (text, matches_nothing) in [
            ("app.kubernetes.io/name=x", true),
            ("app.kubernetes.io/name in (x)", true),
            ("app.kubernetes.io/name", true),
            ("app.kubernetes.io/name!=x", false),
            ("app.kubernetes.io/name notin (x)", false),
            ("!app.kubernetes.io/name", false),
        ] {
            let sel = LabelSelector::parse(text).unwrap();
            let built = scope_sel(&series, "default", &sel).unwrap();
            assert_eq!(built.is_none(), matches_nothing, "{text}: {built:?}");
            if let Some(b) = built {
                assert_eq!(read_selector(&b).unwrap().len(), 2, "{text}: {b}");
            }
        }
        let bad = Scope {
            series: &series,
            namespace_label: "kubernetes.namespace",
            namespace: "default",
            selector: &LabelSelector::everything(),
        };
        assert!(series_selector(&bad)
            .unwrap_err()
            .contains("namespaceLabel"));
        let bad_name = vec!["a-b".to_string()];
        assert!(scope_sel(&bad_name, "default", &LabelSelector::everything()).is_err());
    }

    #[test]
    fn queries_use_raw_samples_and_last_over_time() {
        let series = vec!["idx".to_string()];
        let sel = LabelSelector::everything();
        let scope = Scope {
            series: &series,
            namespace_label: "namespace",
            namespace: "default",
            selector: &sel,
        };
        let q = scope_queries(&scope, 30_000, 600_000).unwrap().unwrap();
        let s = r#"{__name__=~"idx",namespace="default"}"#;
        assert_eq!(q.fresh, format!("{s}[30000ms]"));
        assert!(q
            .retained
            .starts_with(&format!("last_over_time({s}[600000ms]) or label_replace(")));
        assert!(q.retained.contains("and on(job, instance) (up == 1)"));
        // retainFor shorter than staleAfter still covers the fresh window.
        let q = scope_queries(&scope, 30_000, 1_000).unwrap().unwrap();
        assert!(q.retained.contains("[30000ms]"));
    }
}
