use super::strategies::*;
use super::*;
use proptest::prelude::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parse_err(text: &str) -> String {
    match LabelSelector::parse(text) {
        Ok(s) => panic!("{text:?} should fail, parsed as {s:?}"),
        Err(e) => {
            assert_eq!(e.selector, text);
            e.to_string()
        }
    }
}

// ----- parsing -----------------------------------------------------------------

#[test]
fn parses_every_operator() {
    use Operator::*;
    let cases: &[(&str, Requirement, &str)] = &[
        ("a=b", req("a", Equals, &["b"]), "a=b"),
        ("a==b", req("a", Equals, &["b"]), "a=b"),
        ("a!=b", req("a", NotEquals, &["b"]), "a!=b"),
        ("a in (x,y)", req("a", In, &["x", "y"]), "a in (x,y)"),
        ("a in (y,x,y)", req("a", In, &["x", "y"]), "a in (x,y)"),
        ("a notin (x)", req("a", NotIn, &["x"]), "a notin (x)"),
        ("a", req("a", Exists, &[]), "a"),
        ("!a", req("a", DoesNotExist, &[]), "!a"),
        // Empty values, as k8s allows them.
        ("a=", req("a", Equals, &[""]), "a="),
        ("a!=", req("a", NotEquals, &[""]), "a!="),
        ("a in ()", req("a", In, &[""]), "a in ()"),
        ("a in (,x)", req("a", In, &["", "x"]), "a in (,x)"),
        ("a in (x,)", req("a", In, &["", "x"]), "a in (,x)"),
        ("a in (x,,y)", req("a", In, &["", "x", "y"]), "a in (,x,y)"),
        ("a notin (,)", req("a", NotIn, &[""]), "a notin ()"),
        // Keywords are plain identifiers in key and value position.
        (
            "in in (in,notin)",
            req("in", In, &["in", "notin"]),
            "in in (in,notin)",
        ),
        ("notin", req("notin", Exists, &[]), "notin"),
        ("!in", req("in", DoesNotExist, &[]), "!in"),
        ("a=in", req("a", Equals, &["in"]), "a=in"),
        // Qualified keys and full-charset values.
        (
            "app.kubernetes.io/name=my-app_1.0",
            req("app.kubernetes.io/name", Equals, &["my-app_1.0"]),
            "app.kubernetes.io/name=my-app_1.0",
        ),
    ];
    for (text, want, canonical) in cases {
        let sel = parse_ok(text);
        assert_eq!(sel.requirements(), std::slice::from_ref(want), "{text:?}");
        assert_eq!(sel.to_string(), *canonical, "{text:?}");
        assert_eq!(parse_ok(canonical), sel, "{text:?}");
    }
}

#[test]
fn whitespace_variants() {
    let canonical = "a=b,c!=d,e in (f,g),h notin (i),j,!k";
    let variants = [
        canonical,
        " a = b , c != d , e in ( f , g ) , h notin ( i ) , j , ! k ",
        "a==b,c!=d,e in(f,g),h notin(i),j,!k",
        "\ta\t=\tb,\nc\r\n!=d,e  in  (f,\tg),h notin (i),j,!k\n",
        "a=b,  c!=d,e in (g,f,g),h notin (i,i),  j,!  k",
    ];
    let want = parse_ok(canonical);
    assert_eq!(want.requirements().len(), 6);
    for v in variants {
        assert_eq!(parse_ok(v), want, "{v:?}");
    }
    // `!` and `=` are single tokens even when glued to the key.
    assert_eq!(parse_ok("!a"), parse_ok("! a"));
}

#[test]
fn empty_and_blank_select_everything() {
    for text in ["", " ", "\t\r\n  "] {
        let sel = parse_ok(text);
        assert!(sel.is_everything());
        assert_eq!(sel, LabelSelector::everything());
        assert_eq!(sel.to_string(), "");
        assert!(sel.matches(&labels(&[])));
        assert!(sel.matches(&labels(&[("a", "b")])));
    }
    // k8s only treats ASCII space, tab, CR and LF as whitespace.
    parse_err("\u{a0}");
}

#[test]
fn multiple_requirements_sorted_by_key() {
    let sel = parse_ok("z=1,b in (2),a,!m,b!=3");
    let keys: Vec<_> = sel.requirements().iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["a", "b", "b", "m", "z"]);
    // Ties on the key are ordered by operator so the output is deterministic.
    assert_eq!(sel.to_string(), "a,b!=3,b in (2),!m,z=1");
    assert_eq!(parse_ok(&sel.to_string()), sel);
}

#[test]
fn error_cases() {
    let cases: &[(&str, &str)] = &[
        ("a in b", "expected '(' after 'in'"),
        ("a notin b", "expected '(' after 'notin'"),
        ("a in", "expected '(' after 'in'"),
        (
            "a in (b",
            "expected ',' or ')' after value 'b' in 'in' list, found end of selector",
        ),
        ("a in (b,c", "expected ',' or ')' after value 'c'"),
        (
            "a in (",
            "expected value, ',' or ')' in 'in' list, found end of selector",
        ),
        (
            "a in (b))",
            "expected ',' or end of selector after 'a in (b)', found ')'",
        ),
        (
            "a in ((b))",
            "expected value, ',' or ')' in 'in' list, found '('",
        ),
        (
            "a in (b c)",
            "expected ',' or ')' after value 'b' in 'in' list, found 'c'",
        ),
        (
            "a)",
            "expected operator (=, ==, !=, in, notin) after key 'a', found ')'",
        ),
        ("(a)", "expected label key or '!', found '('"),
        ("=b", "expected label key or '!', found '='"),
        (
            "a b",
            "expected operator (=, ==, !=, in, notin) after key 'a', found 'b'",
        ),
        (
            "a=b,",
            "expected label key or '!' after ',', found end of selector",
        ),
        ("a=b,,c", "expected label key or '!' after ',', found ','"),
        (",a", "expected label key or '!', found ','"),
        ("!", "expected label key after '!', found end of selector"),
        ("!,a", "expected label key after '!', found ','"),
        ("!=a", "expected label key or '!', found '!='"),
        ("!!a", "expected label key after '!', found '!'"),
        (
            "!a=b",
            "expected ',' or end of selector after '!a', found '='",
        ),
        (
            "a=b=c",
            "expected ',' or end of selector after 'a=b', found '='",
        ),
        (
            "a=b c",
            "expected ',' or end of selector after 'a=b', found 'c'",
        ),
        ("a=(b)", "expected value after '=', found '('"),
        ("a!==b", "expected value after '!=', found '='"),
        ("a>1", "operator '>' (numeric comparison) is not supported"),
        ("a<1", "operator '<' (numeric comparison) is not supported"),
        ("a b=c", "found 'b'"),
        (
            "a@b=c",
            "invalid label key \"a@b\": name part must consist of",
        ),
        ("-a", "invalid label key \"-a\": name part must consist of"),
        ("a-=b", "invalid label key \"a-\""),
        (
            "/a",
            "invalid label key \"/a\": prefix part must be non-empty",
        ),
        (
            "x/",
            "invalid label key \"x/\": name part must be non-empty",
        ),
        (
            "a/b/c",
            "invalid label key \"a/b/c\": may contain at most one '/'",
        ),
        (
            "Example.com/a",
            "prefix part must be a lowercase RFC 1123 subdomain",
        ),
        (
            "ex..com/a",
            "prefix part must be a lowercase RFC 1123 subdomain",
        ),
        (
            "a=b@c",
            "invalid value \"b@c\" for label \"a\": must be empty or consist",
        ),
        ("a in (x,-y)", "invalid value \"-y\" for label \"a\""),
        ("a=b\u{0}", "invalid value \"b\\0\""),
        ("ключ=v", "invalid label key \"ключ\""),
    ];
    for (text, want) in cases {
        let got = parse_err(text);
        let prefix = format!("invalid label selector {text:?}: ");
        assert!(got.starts_with(&prefix), "{text:?}: {got}");
        assert!(got.contains(want), "{text:?}: got {got:?}, want {want:?}");
    }
    // The exact wording the brief promises.
    assert_eq!(
        parse_err("a in b"),
        "invalid label selector \"a in b\": expected '(' after 'in'"
    );
}

#[test]
fn length_limits() {
    let n63 = "a".repeat(63);
    let n64 = "a".repeat(64);
    parse_ok(&format!("{n63}={n63}"));
    parse_ok(&format!("{}/{n63}", "p".repeat(253)));
    assert!(parse_err(&format!("{n64}=x")).contains("name part must be no more than 63 characters"));
    assert!(parse_err(&format!("x={n64}")).contains("must be no more than 63 characters"));
    assert!(parse_err(&format!("x in (a,{n64})")).contains("no more than 63"));
    assert!(parse_err(&format!("{}/a", "p".repeat(254)))
        .contains("prefix part must be no more than 253 characters"));
}

#[test]
fn from_requirements_validates_and_normalises() {
    let sel = LabelSelector::from_requirements([
        req("b", Operator::In, &["y", "x", "y"]),
        req("a", Operator::Exists, &[]),
    ])
    .unwrap();
    assert_eq!(sel, parse_ok("a,b in (x,y)"));
    for bad in [
        req("a", Operator::In, &[]),
        req("a", Operator::Equals, &["x", "y"]),
        req("a", Operator::Exists, &["x"]),
        req("a b", Operator::Exists, &[]),
        req("a", Operator::NotEquals, &["\"}"]),
    ] {
        assert!(
            LabelSelector::from_requirements([bad.clone()]).is_err(),
            "{bad:?}"
        );
    }
}

// ----- matching ----------------------------------------------------------------

#[test]
fn matching_table() {
    let empty = labels(&[]);
    let ab = labels(&[("a", "b")]);
    let ac = labels(&[("a", "c")]);
    let a_empty = labels(&[("a", "")]);
    let other = labels(&[("x", "b")]);
    // (selector, labels, expected)
    let cases: &[(&str, &BTreeMap<String, String>, bool)] = &[
        ("a=b", &ab, true),
        ("a=b", &ac, false),
        ("a=b", &empty, false),
        ("a==b", &ab, true),
        ("a!=b", &ab, false),
        ("a!=b", &ac, true),
        // k8s: `!=` matches when the label is absent.
        ("a!=b", &empty, true),
        ("a!=b", &other, true),
        ("a in (b,c)", &ab, true),
        ("a in (b,c)", &ac, true),
        ("a in (c,d)", &ab, false),
        ("a in (b)", &empty, false),
        ("a notin (b)", &ab, false),
        ("a notin (c)", &ab, true),
        // k8s: `notin` matches when the label is absent.
        ("a notin (b)", &empty, true),
        ("a notin (b)", &other, true),
        ("a", &ab, true),
        ("a", &a_empty, true),
        ("a", &empty, false),
        ("!a", &ab, false),
        ("!a", &a_empty, false),
        ("!a", &empty, true),
        // The empty value is a real value: it needs the label present.
        ("a=", &a_empty, true),
        ("a=", &empty, false),
        ("a in ()", &a_empty, true),
        ("a in ()", &empty, false),
        ("a in (,b)", &ab, true),
        ("a!=", &a_empty, false),
        ("a!=", &empty, true),
        ("a notin ()", &a_empty, false),
        ("a notin ()", &ab, true),
        // Requirements are ANDed.
        ("a=b,!x", &ab, true),
        ("a=b,x", &ab, false),
        ("a=b,a!=c", &ab, true),
        ("a=b,a=c", &ab, false),
        ("", &empty, true),
    ];
    for (text, ls, want) in cases {
        let sel = parse_ok(text);
        assert_eq!(sel.matches(*ls), *want, "{text:?} on {ls:?}");
    }
}

#[test]
fn all_label_containers_agree() {
    let sel = parse_ok("a=b,c notin (d),!e,f");
    let pairs = vec![
        ("a".to_string(), "b".to_string()),
        ("f".to_string(), "".to_string()),
        ("c".to_string(), "x".to_string()),
    ];
    let btree: BTreeMap<_, _> = pairs.iter().cloned().collect();
    let hash: HashMap<_, _> = pairs.iter().cloned().collect();
    assert!(sel.matches(&btree));
    assert!(sel.matches(&hash));
    assert!(sel.matches(&pairs));
    assert!(sel.matches(pairs.as_slice()));
    // First occurrence wins in a pair list.
    let dup = vec![("a".into(), "b".into()), ("a".into(), "z".into())];
    assert_eq!(dup.label("a"), Some("b"));
}

#[test]
fn equality_labels() {
    let sel = parse_ok("a=1,b==2,c in (3),d in (4,5),e!=6,f,!g,h notin (7)");
    assert_eq!(
        sel.equality_labels(),
        BTreeMap::from([("a", "1"), ("b", "2"), ("c", "3")])
    );
    assert_eq!(
        parse_ok("a=").equality_labels(),
        BTreeMap::from([("a", "")])
    );
    assert!(LabelSelector::everything().equality_labels().is_empty());
    // Contradictory pins: the selector matches nothing; one value is still reported.
    assert_eq!(
        parse_ok("a=x,a=y").equality_labels(),
        BTreeMap::from([("a", "x")])
    );
}

// ----- generators for valid selectors -------------------------------------------

fn valid_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => valid_name(),
        1 => (
            "[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?){0,3}",
            valid_name()
        )
            .prop_map(|(p, n)| format!("{p}/{n}")),
    ]
}

fn valid_selector() -> impl Strategy<Value = Vec<Requirement>> {
    prop::collection::vec(requirement_from(valid_key(), valid_value()), 0..6)
}

/// Renders requirements in the given order with arbitrary k8s-legal noise: whitespace
/// between tokens, `==` for `=`, shuffled and duplicated list values.
fn noisy_text(reqs: &[Requirement], noise: &[u8]) -> String {
    let mut n = noise.iter().cycle().copied();
    let mut ws = || match n.next().unwrap_or(0) % 6 {
        0 => "",
        1 => " ",
        2 => "  ",
        3 => "\t",
        4 => "\n",
        _ => "\r\n",
    };
    let mut out = String::new();
    for (i, r) in reqs.iter().enumerate() {
        if i > 0 {
            out.push_str(ws());
            out.push(',');
        }
        out.push_str(ws());
        let k = &r.key;
        match r.operator {
            Operator::Equals => {
                let eq = if ws().is_empty() { "==" } else { "=" };
                out += &format!("{k}{}{eq}{}{}", ws(), ws(), r.values[0]);
            }
            Operator::NotEquals => out += &format!("{k}{}!={}{}", ws(), ws(), r.values[0]),
            Operator::In | Operator::NotIn => {
                let kw = if r.operator == Operator::In {
                    "in"
                } else {
                    "notin"
                };
                let mut vals: Vec<&str> = r.values.iter().map(String::as_str).collect();
                vals.reverse();
                if let Some(first) = vals.first().copied() {
                    vals.push(first);
                }
                out += &format!("{k} {kw}{}({}", ws(), ws());
                for (j, v) in vals.iter().enumerate() {
                    if j > 0 {
                        out += &format!("{},{}", ws(), ws());
                    }
                    out.push_str(v);
                }
                out += &format!("{})", ws());
            }
            Operator::Exists => out.push_str(k),
            Operator::DoesNotExist => out += &format!("!{}{k}", ws()),
        }
    }
    out.push_str(ws());
    out
}

/// Reference semantics written from the k8s docs as set logic over label pairs,
/// independently of `Requirement::matches`.
fn reference_matches(reqs: &[Requirement], pairs: &[(String, String)]) -> bool {
    reqs.iter().all(|r| {
        let has_key = pairs.iter().any(|(k, _)| *k == r.key);
        let has_listed = pairs
            .iter()
            .any(|(k, v)| *k == r.key && r.values.contains(v));
        match r.operator {
            Operator::Exists => has_key,
            Operator::DoesNotExist => !has_key,
            Operator::Equals | Operator::In => has_listed,
            Operator::NotEquals | Operator::NotIn => !has_listed,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn display_parse_round_trip(reqs in valid_selector()) {
        let sel = LabelSelector::from_requirements(reqs).unwrap();
        let text = sel.to_string();
        let back = LabelSelector::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&back, &sel, "{}", text);
        prop_assert_eq!(back.to_string(), text);
    }

    #[test]
    fn noisy_text_parses_to_same_selector(
        reqs in valid_selector(),
        noise in prop::collection::vec(any::<u8>(), 1..32),
    ) {
        let text = noisy_text(&reqs, &noise);
        let parsed = LabelSelector::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed, LabelSelector::from_requirements(reqs).unwrap(), "{:?}", text);
    }

    #[test]
    fn parse_never_panics(text in any::<String>()) {
        let _ = LabelSelector::parse(&text);
    }

    #[test]
    fn parse_never_panics_on_selector_alphabet(text in "[a-c!=(),<> \t\n/._-]{0,40}|[a-z=!(), ]{0,40}") {
        // Whatever parses must print canonically and re-parse to the same thing.
        if let Ok(sel) = LabelSelector::parse(&text) {
            let canonical = sel.to_string();
            prop_assert_eq!(LabelSelector::parse(&canonical).unwrap(), sel);
        }
    }

    #[test]
    fn matching_agrees_with_reference(
        reqs in prop::collection::vec(requirement_from("[abc]", "|x|y|z"), 0..4),
        pairs in prop::collection::btree_map("[abcd]", "|x|y|z", 0..4),
    ) {
        let sel = LabelSelector::from_requirements(reqs).unwrap();
        // Also goes through the parser, so the text form is covered too.
        let sel = LabelSelector::parse(&sel.to_string()).unwrap();
        let vec: Vec<(String, String)> = pairs.clone().into_iter().collect();
        let hash: HashMap<String, String> = pairs.clone().into_iter().collect();
        let want = reference_matches(sel.requirements(), &vec);
        prop_assert_eq!(sel.matches(&pairs), want, "{} on {:?}", sel, pairs);
        prop_assert_eq!(sel.matches(&hash), want);
        prop_assert_eq!(sel.matches(&vec), want);
        prop_assert_eq!(sel.matches(vec.as_slice()), want);
    }
}

#[test]
fn selector_objects_render_once_canonically() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8s;
    let obj: K8s = serde_json::from_value(serde_json::json!({
        "matchLabels": {"z": "1", "tier": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a", "b"]},
            {"key": "gone", "operator": "DoesNotExist"},
            {"key": "app.kubernetes.io/name", "operator": "Exists"}
        ]
    }))
    .unwrap();
    let text = label_selector_to_string(Some(&obj)).unwrap();
    // By key; on one key `=` before `in`; values sorted and deduplicated.
    assert_eq!(
        text,
        "app.kubernetes.io/name,!gone,tier=web,tier in (a,b),z=1"
    );
    // The text parses back to the same selector: API and renderer agree.
    assert_eq!(LabelSelector::parse(&text).unwrap().to_string(), text);
    assert_eq!(label_selector_to_string(None).unwrap(), "");
    assert_eq!(label_selector_to_string(Some(&K8s::default())).unwrap(), "");
    let bad: K8s = serde_json::from_value(serde_json::json!({
        "matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]
    }))
    .unwrap();
    let err = label_selector_to_string(Some(&bad)).unwrap_err();
    assert!(err.message.contains("\"Like\""), "{err}");
    let empty_in: K8s = serde_json::from_value(serde_json::json!({
        "matchExpressions": [{"key": "a", "operator": "In", "values": []}]
    }))
    .unwrap();
    assert!(label_selector_to_string(Some(&empty_in)).is_err());
}
