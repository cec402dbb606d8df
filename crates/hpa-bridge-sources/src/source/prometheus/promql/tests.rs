use super::*;
use hpa_bridge_rules::selector::strategies::{
    parse_ok, req, requirement_from, unchecked, valid_value,
};
use proptest::prelude::*;

#[test]
fn promql_matchers_table() {
    let sel = parse_ok("a=b,c!=d,e in (f,g.h),i notin (j),k,!l,m=");
    assert_eq!(
        promql_matchers(&sel).unwrap(),
        [
            r#"a="b""#,
            r#"c!="d""#,
            r#"e=~"f|g\\.h""#,
            r#"i!~"j""#,
            r#"k!="""#,
            r#"l="""#,
            r#"m="""#,
        ]
    );
    assert!(promql_matchers(&LabelSelector::everything())
        .unwrap()
        .is_empty());
}

#[test]
fn promql_rejects_non_prometheus_keys() {
    for (text, key) in [
        ("app.kubernetes.io/name=x", "app.kubernetes.io/name"),
        ("a-b=x", "a-b"),
        ("a.b", "a.b"),
        ("ok=1,9lives=x", "9lives"),
    ] {
        let err = promql_matchers(&parse_ok(text)).unwrap_err();
        assert!(
            err.message.contains(&format!("label key {key:?}")),
            "{text}: {err}"
        );
        assert!(err
            .to_string()
            .contains("not a valid Prometheus label name"));
    }
    let reserved = unchecked(vec![req("__name__", Operator::Equals, &["up"])]);
    assert!(promql_matchers(&reserved).is_err());
}

#[test]
fn promql_rejects_malformed_requirements() {
    for r in [
        req("a", Operator::In, &[]),
        req("a", Operator::NotIn, &[]),
        req("a", Operator::Equals, &[]),
        req("a", Operator::NotEquals, &["x", "y"]),
        req("a", Operator::Exists, &["x"]),
    ] {
        let sel = unchecked(vec![r.clone()]);
        assert!(promql_matchers(&sel).is_err(), "{r:?}");
    }
}

#[test]
fn promql_escapes_hostile_values() {
    let sel = unchecked(vec![
        req("a", Operator::Equals, &["x\"}or vector(1)#"]),
        req("b", Operator::In, &["a|b", ".*", "c\\", ")"]),
        req("c", Operator::NotEquals, &["line\nbreak\u{0}"]),
    ]);
    assert_eq!(
        promql_matchers(&sel).unwrap(),
        [
            r#"a="x\"}or vector(1)#""#,
            r#"b=~"a\\|b|\\.\\*|c\\\\|\\)""#,
            r#"c!="line\nbreak\u0000""#,
        ]
    );
}

/// Splits `key<op>"..."` into its parts; `None` if it is not of that shape.
fn split_matcher(m: &str) -> Option<(&str, &str, &str)> {
    let key_end = m
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(m.len());
    let (key, rest) = m.split_at(key_end);
    for op in ["=~", "!~", "!=", "="] {
        if let Some(lit) = rest.strip_prefix(op) {
            return Some((key, op, lit));
        }
    }
    None
}

fn hex_char(digits: &mut std::str::Chars<'_>, n: usize) -> Result<char, String> {
    let s: String = digits.take(n).collect();
    if s.len() != n {
        return Err(format!("short escape {s:?}"));
    }
    let v = u32::from_str_radix(&s, 16).map_err(|e| e.to_string())?;
    char::from_u32(v).ok_or_else(|| format!("bad code point {v:x}"))
}

/// Decodes a PromQL double-quoted string literal (Go escape rules, as the PromQL lexer
/// and `strconv.Unquote` apply them). Fails on a raw newline, an unknown escape, or an
/// unescaped `"` anywhere but the final position.
fn decode_promql_string(lit: &str) -> Result<String, String> {
    let body = lit.strip_prefix('"').ok_or("missing opening quote")?;
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                return if chars.as_str().is_empty() {
                    Ok(out)
                } else {
                    Err(format!("unescaped quote before {:?}", chars.as_str()))
                };
            }
            '\n' => return Err("raw newline".into()),
            '\\' => {
                let e = chars.next().ok_or("dangling backslash")?;
                out.push(match e {
                    '"' => '"',
                    '\\' => '\\',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'v' => '\u{b}',
                    'x' => hex_char(&mut chars, 2)?,
                    'u' => hex_char(&mut chars, 4)?,
                    'U' => hex_char(&mut chars, 8)?,
                    other => return Err(format!("unknown escape \\{other}")),
                });
            }
            c => out.push(c),
        }
    }
    Err("missing closing quote".into())
}

/// Decodes an RE2 pattern that must be an alternation of literals: `\` + ASCII
/// punctuation is that character, `|` separates, any other metacharacter or escape
/// means the pattern is not a pure literal and is an error.
fn decode_re2_alternation(re: &str) -> Result<Vec<String>, String> {
    let mut parts = vec![String::new()];
    let mut chars = re.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if e.is_ascii_punctuation() => parts.last_mut().unwrap().push(e),
                other => return Err(format!("non-literal escape \\{other:?}")),
            },
            '|' => parts.push(String::new()),
            '.' | '+' | '*' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '^' | '$' => {
                return Err(format!("unescaped metacharacter {c:?}"))
            }
            c => parts.last_mut().unwrap().push(c),
        }
    }
    Ok(parts)
}

/// Index of the first `"` not preceded by an escaping backslash, after the opening one.
fn first_unescaped_quote(lit: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in lit.char_indices().skip(1) {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return Some(i),
            _ => {}
        }
    }
    None
}

fn hostile_value() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("\\\"".to_string()),
        Just("|".to_string()),
        Just(".*".to_string()),
        Just(")".to_string()),
        Just("(".to_string()),
        Just("\n".to_string()),
        Just("\r".to_string()),
        Just("\"}".to_string()),
        Just("${^[]?+}".to_string()),
        Just("\u{0}".to_string()),
        Just("\u{85}".to_string()),
        Just("\u{2028}".to_string()),
        Just("\\u0022".to_string()),
        "[a-z]{1,3}",
        any::<char>().prop_map(String::from),
    ];
    prop_oneof![
        prop::collection::vec(piece, 0..10).prop_map(|v| v.concat()),
        any::<String>(),
    ]
}

fn check_matcher(r: &Requirement, m: &str) -> Result<(), TestCaseError> {
    let (key, op, lit) =
        split_matcher(m).ok_or_else(|| TestCaseError::fail(format!("shape: {m:?}")))?;
    prop_assert_eq!(key, r.key.as_str());
    prop_assert_eq!(first_unescaped_quote(lit), Some(lit.len() - 1), "{:?}", m);
    prop_assert!(!m.contains('\n'), "raw newline in {:?}", m);
    let decoded = decode_promql_string(lit).map_err(TestCaseError::fail)?;
    match r.operator {
        Operator::Equals | Operator::NotEquals => {
            let want = if r.operator == Operator::Equals {
                "="
            } else {
                "!="
            };
            prop_assert_eq!(op, want);
            prop_assert_eq!(&decoded, &r.values[0]);
        }
        Operator::In | Operator::NotIn => {
            let want = if r.operator == Operator::In {
                "=~"
            } else {
                "!~"
            };
            prop_assert_eq!(op, want);
            let parts = decode_re2_alternation(&decoded).map_err(TestCaseError::fail)?;
            prop_assert_eq!(&parts, &r.values);
        }
        Operator::Exists => {
            prop_assert_eq!(op, "!=");
            prop_assert_eq!(decoded, "");
        }
        Operator::DoesNotExist => {
            prop_assert_eq!(op, "=");
            prop_assert_eq!(decoded, "");
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn promql_escaping_round_trips(
        key in "[a-zA-Z][a-zA-Z0-9_]{0,10}",
        op in 0..6usize,
        values in prop::collection::vec(hostile_value(), 1..5),
    ) {
        let operator = [
            Operator::Equals, Operator::NotEquals, Operator::In,
            Operator::NotIn, Operator::Exists, Operator::DoesNotExist,
        ][op];
        let values = match operator {
            Operator::Equals | Operator::NotEquals => values[..1].to_vec(),
            Operator::In | Operator::NotIn => values,
            Operator::Exists | Operator::DoesNotExist => vec![],
        };
        // Built directly: these values could never come out of the parser.
        let r = Requirement { key, operator, values };
        let sel = unchecked(vec![r.clone()]);
        let matchers = promql_matchers(&sel).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(matchers.len(), 1);
        check_matcher(&r, &matchers[0])?;
    }

    #[test]
    fn promql_for_parsed_selectors(reqs in prop::collection::vec(
        requirement_from("[a-z]([a-z0-9_]{0,7}[a-z0-9])?", valid_value()), 0..5))
    {
        let sel = LabelSelector::from_requirements(reqs).unwrap();
        let matchers = promql_matchers(&sel).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(matchers.len(), sel.requirements().len());
        for (r, m) in sel.requirements().iter().zip(&matchers) {
            check_matcher(r, m)?;
        }
    }
}

#[test]
fn decoders_reject_unsafe_renderings() {
    // Guards the guard: the test decoders must catch what a broken escaper would emit.
    assert!(decode_promql_string(r#""a"b""#).is_err());
    assert!(decode_promql_string("\"a\nb\"").is_err());
    assert!(decode_promql_string(r#""a\qb""#).is_err());
    assert!(decode_promql_string(r#""ab"#).is_err());
    assert_eq!(decode_promql_string(r#""a\"b\u00e9""#).unwrap(), "a\"bé");
    assert!(decode_re2_alternation("a.b").is_err());
    assert!(decode_re2_alternation(r"a\d").is_err());
    assert_eq!(decode_re2_alternation(r"a\|b|c").unwrap(), ["a|b", "c"]);
    assert_eq!(first_unescaped_quote(r#""a\\"b""#), Some(4));
}
