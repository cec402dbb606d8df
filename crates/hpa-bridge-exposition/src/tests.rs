use super::*;
use proptest::prelude::*;
use std::cell::RefCell;

fn s(name: &str, labels: &[(&str, &str)], value: f64, ts: Option<i64>) -> ExposedSample {
    ExposedSample {
        timestamp_ms: ts,
        ..ExposedSample::scraped(name, labels, value)
    }
}

fn only<'a>(names: &'a [&'a str]) -> impl Fn(&str) -> bool + 'a {
    move |n| names.contains(&n)
}

fn err(body: &str, wanted: &dyn Fn(&str) -> bool) -> String {
    parse(body.as_bytes(), wanted)
        .expect_err("expected a parse error")
        .to_string()
}

/// NaN-aware equality: `ExposedSample`'s derived `PartialEq` says NaN != NaN.
fn same(a: &[ExposedSample], b: &[ExposedSample]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.name == y.name
                && x.labels == y.labels
                && x.timestamp_ms == y.timestamp_ms
                && (x.value == y.value || (x.value.is_nan() && y.value.is_nan()))
                && x.value.is_sign_negative() == y.value.is_sign_negative()
        })
}

// ---- conformance -------------------------------------------------------------------

#[test]
fn recording_rule_names_with_colons() {
    let body = "job:http_requests:rate5m{job=\"api\"} 3.5\n:leading_colon 1\nplain 2\n";
    let got = parse(
        body.as_bytes(),
        &only(&["job:http_requests:rate5m", ":leading_colon"]),
    );
    assert_eq!(
        got.unwrap(),
        vec![
            s("job:http_requests:rate5m", &[("job", "api")], 3.5, None),
            s(":leading_colon", &[], 1.0, None),
        ]
    );
}

#[test]
fn label_values_with_separators_and_braces() {
    let body = r##"m{a="x=y",b="1,2",c="}",d="{",e="# not a comment",f="sp ace"} 7"##;
    assert_eq!(
        parse_all(body.as_bytes()).unwrap(),
        vec![s(
            "m",
            &[
                ("a", "x=y"),
                ("b", "1,2"),
                ("c", "}"),
                ("d", "{"),
                ("e", "# not a comment"),
                ("f", "sp ace"),
            ],
            7.0,
            None
        )]
    );
}

#[test]
fn label_value_escapes() {
    let body = r#"m{q="say \"hi\"",b="back\\slash",n="two\nlines",bn="\\n",x="\x\ü",e=""} 1"#;
    assert_eq!(
        parse_all(body.as_bytes()).unwrap(),
        vec![s(
            "m",
            &[
                ("q", "say \"hi\""),
                ("b", "back\\slash"),
                ("n", "two\nlines"),
                ("bn", "\\n"),
                // Unknown escapes keep their backslash, as Prometheus's scrape parser does.
                ("x", "\\x\\ü"),
                ("e", ""),
            ],
            1.0,
            None
        )]
    );
}

fn parse_as(format: Format, body: &str) -> Result<Vec<ExposedSample>, ExpositionError> {
    let options = Options {
        format,
        ..Options::default()
    };
    parse_with(body.as_bytes(), &|_| true, &options)
}

#[test]
fn timestamps() {
    let body = "a 1 1712345678901\nb 2 0\nd 4 17\n";
    assert_eq!(
        parse_all(body.as_bytes()).unwrap(),
        vec![
            s("a", &[], 1.0, Some(1_712_345_678_901)),
            s("b", &[], 2.0, Some(0)),
            s("d", &[], 4.0, Some(17)),
        ]
    );
}

#[test]
fn timestamp_units_follow_the_content_type() {
    use Format::*;
    assert_eq!(Format::from_content_type(None), PrometheusText);
    assert_eq!(
        Format::from_content_type(Some("text/plain; version=0.0.4; charset=utf-8")),
        PrometheusText
    );
    assert_eq!(
        Format::from_content_type(Some(
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        )),
        OpenMetrics
    );
    assert_eq!(
        Format::from_content_type(Some(" Application/OpenMetrics-Text")),
        OpenMetrics
    );
    assert_eq!(Format::from_content_type(Some("text/html")), PrometheusText);

    // The issue's page: 123 is seconds in OpenMetrics, milliseconds in the text format.
    let ts = |format, body| parse_as(format, body).map(|v| v[0].timestamp_ms);
    assert_eq!(ts(OpenMetrics, "a_total 0 123\n# EOF\n"), Ok(Some(123_000)));
    assert_eq!(ts(PrometheusText, "a_total 0 123\n"), Ok(Some(123)));
    // Fractional seconds truncate toward zero, as Prometheus's int64(ts * 1000) does.
    assert_eq!(
        ts(OpenMetrics, "a 1 1520879607.789\n# EOF\n"),
        Ok(Some(1_520_879_607_789))
    );
    assert_eq!(ts(OpenMetrics, "a 1 1.2349\n# EOF\n"), Ok(Some(1234)));
    assert_eq!(ts(OpenMetrics, "a 1 -1.2349\n# EOF\n"), Ok(Some(-1234)));
    assert_eq!(ts(OpenMetrics, "a 1 1.5e3\n# EOF\n"), Ok(Some(1_500_000)));
    assert_eq!(ts(OpenMetrics, "a 1 0\n# EOF\n"), Ok(Some(0)));
    // A fractional timestamp is an error in the text format, as in Prometheus's
    // promparse (its lexer takes digits only, then strconv.ParseInt).
    for bad in ["a 1 1.5\n", "a 1 1e3\n", "a 1 -5\n", "a 1 +17\n"] {
        let e = parse_as(PrometheusText, bad).unwrap_err();
        assert!(
            e.message.contains("expected integer milliseconds"),
            "{bad:?}: {e}"
        );
    }
    for bad in [
        "a 1 NaN\n",
        "a 1 Inf\n",
        "a 1 1e400\n",
        "a 1 0x1p3\n",
        "a 1 1_0\n",
    ] {
        assert!(parse_as(OpenMetrics, bad).is_err(), "{bad:?}");
    }
}

#[test]
fn comments_type_help_unit_and_blank_lines_are_skipped() {
    let body = "# HELP m A help text with {braces} and \"quotes\" = ,\n\
                    # TYPE m gauge\n\
                    # UNIT m seconds\n\
                    #\n\
                    # just a comment m 1\n\
                    \n\
                    \t  \n\
                    m 42\n";
    let seen = RefCell::new(Vec::new());
    let wanted = |n: &str| {
        seen.borrow_mut().push(n.to_owned());
        true
    };
    assert_eq!(
        parse(body.as_bytes(), &wanted).unwrap(),
        vec![s("m", &[], 42.0, None)]
    );
    assert_eq!(*seen.borrow(), vec!["m".to_owned()]);
}

#[test]
fn special_float_values() {
    let body = "a NaN\nb +Inf\nc -Inf\nd Inf\ne inf\nf nan\ng -infinity\nh 1e-3\ni -0\nj .5\nk 5.\nl 1E+2\n";
    let got = parse_all(body.as_bytes()).unwrap();
    let values: Vec<f64> = got.iter().map(|x| x.value).collect();
    assert!(values[0].is_nan() && values[5].is_nan());
    assert_eq!(values[1], f64::INFINITY);
    assert_eq!(values[2], f64::NEG_INFINITY);
    assert_eq!(values[3], f64::INFINITY);
    assert_eq!(values[4], f64::INFINITY);
    assert_eq!(values[6], f64::NEG_INFINITY);
    assert_eq!(values[7], 0.001);
    assert!(values[8] == 0.0 && values[8].is_sign_negative());
    assert_eq!(&values[9..], &[0.5, 5.0, 100.0]);
}

#[test]
fn openmetrics_page_with_created_exemplars_and_eof() {
    let body = "# TYPE http_requests counter\n\
                    # UNIT http_requests requests\n\
                    # HELP http_requests Requests.\n\
                    http_requests_total{code=\"200\"} 1027 1520879607.789 # {trace_id=\"KOO5S4vxi0o\"} 0.67\n\
                    http_requests_created{code=\"200\"} 1520430000.123\n\
                    # TYPE lat histogram\n\
                    lat_bucket{le=\"0.1\"} 8 # {trace_id=\"a b\",span=\"}\"} 0.054 1520879607.7\n\
                    lat_bucket{le=\"+Inf\"} 17\n\
                    lat_count 17\n\
                    lat_sum 324789.3\n\
                    lat_created 1520430000.123\n\
                    # EOF\n\
                    http_requests_total{this is not parsed at all\n\
                    {garbage\n";
    let got = parse_with(
        body.as_bytes(),
        &only(&[
            "http_requests_total",
            "http_requests_created",
            "lat_bucket",
            "lat_created",
        ]),
        &Options {
            format: Format::OpenMetrics,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            s(
                "http_requests_total",
                &[("code", "200")],
                1027.0,
                Some(1_520_879_607_789)
            ),
            s(
                "http_requests_created",
                &[("code", "200")],
                1_520_430_000.123,
                None
            ),
            s("lat_bucket", &[("le", "0.1")], 8.0, None),
            s("lat_bucket", &[("le", "+Inf")], 17.0, None),
            s("lat_created", &[], 1_520_430_000.123, None),
        ]
    );
}

#[test]
fn eof_without_trailing_newline_and_with_crlf() {
    assert_eq!(
        parse_all(b"a 1\n# EOF").unwrap(),
        vec![s("a", &[], 1.0, None)]
    );
    assert_eq!(
        parse_all(b"a 1\r\n# EOF\r\n{bad").unwrap(),
        vec![s("a", &[], 1.0, None)]
    );
    // Not the marker: parsing goes on.
    assert_eq!(
        parse_all(b"# EOFX\n#EOF\na 1").unwrap(),
        vec![s("a", &[], 1.0, None)]
    );
}

fn openmetrics(body: &[u8]) -> Result<Vec<ExposedSample>, ExpositionError> {
    let options = Options {
        limits: Limits::DEFAULT,
        cancel: None,
        format: Format::OpenMetrics,
    };
    parse_with(body, &|_| true, &options)
}

#[test]
fn openmetrics_needs_its_eof_and_a_cut_line_is_recognised() {
    // OpenMetrics: `# EOF` may end the body, and must be there.
    assert_eq!(
        openmetrics(b"a 1\n# EOF").unwrap(),
        vec![s("a", &[], 1.0, None)]
    );
    let e = openmetrics(b"a 1\nb 2\n").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Syntax, "{e}");
    assert!(e.to_string().contains("# EOF"), "{e}");
    assert!(openmetrics(b"").is_err());
    // The text format's last line may lack its line feed; `ends_mid_line` says so.
    // Whether each body ends inside a line.
    let cases: [(&[u8], bool); 19] = [
        (b"a 3\nhpa_expect_replicas 1", true),
        (b"a 3\n# HELP a x", true),
        (b"x", true),
        (b"a 1\n  b 2\t", true),
        (b"a 1 # EOF\nb 2", true),
        (b"# EOFX\nb 2", true),
        (b"", false),
        (b"a 3\n", false),
        (b"a 3\n\t\t", false),
        (b"a 3\r\n", false),
        (b"a 3\n\r", false),
        (b"a 1\n# EOF", false),
        (b"a 1\n# EOF  ", false),
        (b"a 1\n# EOF\r", false),
        (b"a 1\n# EOF\nb 2", false),
        (b"a 1\n  # EOF \t\r\nb 2\n# EOF\nc", false),
        (b"\r", false),
        (b" \t ", false),
        (b"\n\n", false),
    ];
    for (body, cut) in cases {
        assert_eq!(
            ends_mid_line(body),
            cut,
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn series_per_page_cap_counts_wanted_samples_only() {
    let options = Options {
        limits: Limits {
            max_series: 2,
            ..Limits::DEFAULT
        },
        cancel: None,
        format: Format::PrometheusText,
    };
    let wanted = |n: &str| n == "w";
    let two = parse_with(
        b"w{a=\"1\"} 1\nu 1\nu 2\nu 3\nw{a=\"2\"} 2\n",
        &wanted,
        &options,
    );
    assert_eq!(two.unwrap().len(), 2);
    let e = parse_with(
        b"w{a=\"1\"} 1\nw{a=\"2\"} 2\nu 1\nw{a=\"3\"} 3\n",
        &wanted,
        &options,
    )
    .unwrap_err();
    assert_eq!(
        (e.kind, e.to_string()),
        (
            ErrorKind::Limit,
            "line 4: the page holds more than scrape.maxSeriesPerPage (2) samples of wanted series"
                .to_owned()
        )
    );
}

#[test]
fn trailing_comma_and_empty_label_sets() {
    let body = "a{x=\"1\",} 1\nb{} 2\nc{ } 3\nd{x=\"1\" , y=\"2\" , } 4\n";
    assert_eq!(
        parse_all(body.as_bytes()).unwrap(),
        vec![
            s("a", &[("x", "1")], 1.0, None),
            s("b", &[], 2.0, None),
            s("c", &[], 3.0, None),
            s("d", &[("x", "1"), ("y", "2")], 4.0, None),
        ]
    );
}

#[test]
fn whitespace_variants() {
    let body = "  a 1\n\
                    b\t2\t3\n\
                    c {x = \"1\"}\t 4 \n\
                    d{\tx=\"1\"\t}5\n\
                    e   6   7   \n";
    assert_eq!(
        parse_all(body.as_bytes()).unwrap(),
        vec![
            s("a", &[], 1.0, None),
            s("b", &[], 2.0, Some(3)),
            s("c", &[("x", "1")], 4.0, None),
            s("d", &[("x", "1")], 5.0, None),
            s("e", &[], 6.0, Some(7)),
        ]
    );
}

#[test]
fn crlf_line_endings() {
    let body = "# HELP a x\r\n# TYPE a gauge\r\na{x=\"1\"} 1 5\r\n\r\nb 2\r\n";
    assert_eq!(
        parse_all(body.as_bytes()).unwrap(),
        vec![s("a", &[("x", "1")], 1.0, Some(5)), s("b", &[], 2.0, None)]
    );
}

#[test]
fn last_line_without_newline_and_empty_inputs() {
    assert_eq!(parse_all(b"a 1").unwrap(), vec![s("a", &[], 1.0, None)]);
    assert_eq!(parse_all(b"").unwrap(), vec![]);
    assert_eq!(parse_all(b"\n\n# only comments\n").unwrap(), vec![]);
}

#[test]
fn unwanted_malformed_lines_are_skipped() {
    let body = b"junk{a=\"unterminated 1\n\
                     junk not_a_number\n\
                     junk{=} 1\n\
                     junk{a=\"\xff\xfe\"} 1\n\
                     junk\n\
                     junk 1 2 3 4\n\
                     good 1\n";
    assert_eq!(
        parse(body, &only(&["good"])).unwrap(),
        vec![s("good", &[], 1.0, None)]
    );
}

#[test]
fn cached_name_does_not_swallow_longer_names() {
    let body = "foo 1\nfoo_bar 2\nfoo{a=\"b\"} 3\nfoo:x 4\nfoo\t5\n";
    assert_eq!(
        parse(body.as_bytes(), &only(&["foo"])).unwrap(),
        vec![
            s("foo", &[], 1.0, None),
            s("foo", &[("a", "b")], 3.0, None),
            s("foo", &[], 5.0, None),
        ]
    );
    assert_eq!(
        parse(body.as_bytes(), &only(&["foo_bar", "foo:x"])).unwrap(),
        vec![s("foo_bar", &[], 2.0, None), s("foo:x", &[], 4.0, None)]
    );
}

#[test]
fn sample_name_helper() {
    assert_eq!(sample_name(b"a:b{x=\"1\"} 1"), Some("a:b"));
    assert_eq!(sample_name(b"  a 1"), Some("a"));
    assert_eq!(sample_name(b"a"), Some("a"));
    assert_eq!(sample_name(b"# TYPE a gauge"), None);
    assert_eq!(sample_name(b""), None);
    assert_eq!(sample_name(b"{a=\"b\"} 1"), None);
    assert_eq!(sample_name(b"a-b 1"), None);
}

// ---- errors: every malformed wanted line reports its 1-based line number ------------

#[test]
fn error_unterminated_label_value() {
    let body = "# TYPE m gauge\nm{a=\"1\"} 1\nm{pod=\"web-1} 1\n";
    assert_eq!(
        err(body, &|_| true),
        "line 3: label value for \"pod\" is not terminated"
    );
    // An escaped quote does not terminate, nor does a trailing backslash.
    assert_eq!(
        err("m{pod=\"a\\\"} 1", &|_| true),
        "line 1: label value for \"pod\" is not terminated"
    );
    assert_eq!(
        err("m{pod=\"a\\", &|_| true),
        "line 1: label value for \"pod\" is not terminated"
    );
}

#[test]
fn error_label_syntax() {
    let cases = [
            ("m{1a=\"x\"} 1", "line 1: expected a label name matching [a-zA-Z_][a-zA-Z0-9_]* or '}' in the labels of \"m\", found '1'"),
            ("\nm{a:b=\"x\"} 1", "line 2: expected '=' after label name \"a\", found ':'"),
            ("m{a} 1", "line 1: expected '=' after label name \"a\", found '}'"),
            ("m{a=x} 1", "line 1: expected '\"' to open the value of label \"a\", found 'x'"),
            ("m{a=\"x\" b=\"y\"} 1", "line 1: expected ',' or '}' after the value of label \"a\", found 'b'"),
            ("m{a=\"x\",,} 1", "line 1: expected a label name matching [a-zA-Z_][a-zA-Z0-9_]* or '}' in the labels of \"m\", found ','"),
            ("m{,} 1", "line 1: expected a label name matching [a-zA-Z_][a-zA-Z0-9_]* or '}' in the labels of \"m\", found ','"),
            ("m{a=\"x\"", "line 1: expected ',' or '}' after the value of label \"a\", found end of line"),
            ("m{a=\"x\",", "line 1: label set of \"m\" is not terminated"),
            ("m{", "line 1: label set of \"m\" is not terminated"),
            ("m{a=\"1\",b=\"2\",a=\"3\"} 1", "line 1: duplicate label \"a\""),
        ];
    for (body, want) in cases {
        assert_eq!(err(body, &|_| true), want, "input {body:?}");
    }
}

#[test]
fn error_missing_or_bad_value() {
    let cases = [
        ("a 1\nm\n", "line 2: missing value for \"m\""),
        ("m{a=\"b\"}", "line 1: missing value for \"m\""),
        ("m{a=\"b\"}   \r\n", "line 1: missing value for \"m\""),
        (
            "m abc",
            "line 1: invalid value \"abc\" for \"m\": not a number",
        ),
        (
            "m 1,5",
            "line 1: invalid value \"1,5\" for \"m\": not a number",
        ),
        (
            "m 0x1p4",
            "line 1: invalid value \"0x1p4\" for \"m\": not a number",
        ),
        (
            "m 1_000",
            "line 1: invalid value \"1_000\" for \"m\": not a number",
        ),
        (
            "m +NaN",
            "line 1: invalid value \"+NaN\" for \"m\": NaN cannot carry a sign",
        ),
        (
            "m 1e400",
            "line 1: invalid value \"1e400\" for \"m\": out of range for a 64-bit float",
        ),
        (
            "m 1#x",
            "line 1: invalid value \"1#x\" for \"m\": not a number",
        ),
        (
            "m # {a=\"b\"} 1",
            "line 1: invalid value \"#\" for \"m\": not a number",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(err(body, &|_| true), want, "input {body:?}");
    }
}

#[test]
fn error_bad_timestamp() {
    let cases = [
            ("m 1 abc", "line 1: invalid timestamp \"abc\" for \"m\": expected integer milliseconds (Prometheus text format)"),
            ("m 1 99999999999999999999", "line 1: invalid timestamp \"99999999999999999999\" for \"m\": out of range"),
            ("m 1 1e300", "line 1: invalid timestamp \"1e300\" for \"m\": expected integer milliseconds (Prometheus text format)"),
            ("m 1 NaN", "line 1: invalid timestamp \"NaN\" for \"m\": expected integer milliseconds (Prometheus text format)"),
            ("m 1 2 3", "line 1: unexpected \"3\" after the timestamp of \"m\""),
        ];
    for (body, want) in cases {
        assert_eq!(err(body, &|_| true), want, "input {body:?}");
    }
}

#[test]
fn error_non_utf8_in_wanted_line() {
    let body = b"ok 1\nm{a=\"\xff\"} 1\n";
    let e = parse(body, &|_| true).unwrap_err();
    assert_eq!(e.line, 2);
    assert_eq!(
        e.message,
        "sample line is not valid UTF-8 (invalid byte at column 6)"
    );
    // The same line is fine when its family is not wanted.
    assert_eq!(parse(body, &only(&["ok"])).unwrap().len(), 1);
}

#[test]
fn error_unextractable_name_even_when_nothing_is_wanted() {
    let nothing = |_: &str| false;
    let cases = [
        (
            "a 1\n{a=\"b\"} 1\n",
            "line 2: expected a metric name matching [a-zA-Z_:][a-zA-Z0-9_:]*, found '{'",
        ),
        (
            "1abc 1",
            "line 1: expected a metric name matching [a-zA-Z_:][a-zA-Z0-9_:]*, found '1'",
        ),
        (
            "a\n\nfoo-bar 1",
            "line 3: invalid character '-' in metric name \"foo\"",
        ),
        (
            "foo.bar 1",
            "line 1: invalid character '.' in metric name \"foo\"",
        ),
        (
            "\u{e9}t\u{e9} 1",
            "line 1: expected a metric name matching [a-zA-Z_:][a-zA-Z0-9_:]*, found byte 0xc3",
        ),
        (
            "a\rb 1",
            "line 1: invalid character '\\r' in metric name \"a\"",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(err(body, &nothing), want, "input {body:?}");
    }
}

#[test]
fn error_display_format() {
    let e = ExpositionError {
        line: 3,
        message: "label value for \"pod\" is not terminated".into(),
        kind: ErrorKind::Syntax,
    };
    assert_eq!(
        e.to_string(),
        "line 3: label value for \"pod\" is not terminated"
    );
}

// ---- peer conformance cases (tests/fixtures/conformance) ------------------------------

/// Every row of the Prometheus-text and OpenMetrics suites taken from Prometheus's own
/// tests. The parser may refuse a page the peers accept only where it documents so (quoted
/// UTF-8 names); it must never return a sample the peers would not: on `parse` and `either`
/// rows exactly the expected samples, on `reject` rows at most the tolerated ones.
#[test]
fn conformance_cases() {
    let suites = [
        include_str!("../../../tests/fixtures/conformance/prom_text.json"),
        include_str!("../../../tests/fixtures/conformance/openmetrics.json"),
    ];
    let mut failures = Vec::new();
    let mut rows = 0;
    for suite in suites {
        let suite: serde_json::Value = serde_json::from_str(suite).unwrap();
        for case in suite["cases"].as_array().unwrap() {
            rows += 1;
            if let Some(failure) = check_case(case) {
                failures.push(failure);
            }
        }
    }
    assert!(rows > 400, "only {rows} conformance rows");
    assert!(
        failures.is_empty(),
        "{} of {rows} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn check_case(case: &serde_json::Value) -> Option<String> {
    let id = case["id"].as_str().unwrap();
    let input = match case["input"].as_str() {
        Some(text) => text.as_bytes().to_vec(),
        None => hex::decode(case["input_hex"].as_str().unwrap()).unwrap(),
    };
    let format = match case["format"].as_str().unwrap() {
        "openmetrics" => Format::OpenMetrics,
        _ => Format::PrometheusText,
    };
    let options = Options {
        format,
        ..Options::default()
    };
    let got = parse_with(&input, &|_| true, &options);
    let expect = case["expect"].as_str().unwrap();
    // Quoted names (`{"name.with.dots"}`) are documented as unsupported: refusing them is
    // no wrong sample.
    let text = String::from_utf8_lossy(&input);
    let quoted_names = ["{\"", ", \"", ",\""].iter().any(|q| text.contains(q));
    // Where Go's int64(float) conversion is undefined (seconds beyond the int64 range of
    // milliseconds), refusing the page is the only portable answer.
    let unportable = case["samples"]
        .as_array()
        .is_some_and(|s| s.iter().any(|r| r["ts_ms"].is_string()));
    // PromParser takes `{ quantile = "2.0" a = "b" }` without a comma, which its own test
    // calls probably unintentional (promparse_test.go:275); we require the comma.
    let missing_comma = matches!(id, "promparse/TestPromParse" | "promparse/line-92-only");
    match (expect, got) {
        ("parse", Err(e)) if !(quoted_names || unportable || missing_comma) => {
            Some(format!("{id}: refused a valid page: {e}"))
        }
        (_, Err(_)) => None,
        ("reject", Ok(got)) => {
            let tolerated = expected_samples(&case["tolerated_samples"]);
            let mut left = tolerated.clone();
            for g in &got {
                match left.iter().position(|t| same_sample(g, t)) {
                        Some(i) => {
                            left.remove(i);
                        }
                        None => {
                            return Some(format!(
                                "{id}: accepted an invalid page and returned {g:?}, which is not among the tolerated {tolerated:?}"
                            ))
                        }
                    }
            }
            None
        }
        (_, Ok(got)) => {
            let want = expected_samples(&case["samples"]);
            let equal =
                got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| same_sample(g, w));
            (!equal).then(|| format!("{id}: got {got:?}\n    want {want:?}"))
        }
    }
}

fn expected_samples(v: &serde_json::Value) -> Vec<ExposedSample> {
    v.as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| ExposedSample {
                    name: r["name"].as_str().unwrap().to_owned(),
                    labels: r["labels"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|kv| {
                            (
                                kv[0].as_str().unwrap().to_owned(),
                                kv[1].as_str().unwrap().to_owned(),
                            )
                        })
                        .collect(),
                    value: r["value"].as_str().unwrap().parse().unwrap(),
                    timestamp_ms: r["ts_ms"].as_i64(),
                    unusable: None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Label order does not matter; `le` and `quantile` compare numerically (Prometheus
/// rewrites them to canonical floats for histograms and summaries).
fn same_sample(got: &ExposedSample, want: &ExposedSample) -> bool {
    let mut g = got.labels.clone();
    let mut w = want.labels.clone();
    g.sort();
    w.sort();
    let labels_match = g.len() == w.len() && g.iter().zip(&w).all(|((gk, gv), (wk, wv))| {
        gk == wk
            && (gv == wv
                || ((gk == "le" || gk == "quantile")
                    && matches!((gv.parse::<f64>(), wv.parse::<f64>()), (Ok(a), Ok(b)) if a == b)))
    });
    got.name == want.name
        && labels_match
        && got.timestamp_ms == want.timestamp_ms
        && (got.value == want.value || (got.value.is_nan() && want.value.is_nan()))
}

// ---- limits: bounded, linear work on hostile pages -------------------------

fn many_labels(n: usize) -> Vec<u8> {
    let mut line = String::from("m{");
    for i in 0..n {
        line.push_str(&format!("l{i}=\"v\","));
    }
    line.push_str("} 1\n");
    line.into_bytes()
}

fn label_work() -> u64 {
    LABEL_WORK.with(|w| w.get())
}

fn label_work_for(
    body: &[u8],
    limits: Limits,
) -> (Result<Vec<ExposedSample>, ExpositionError>, u64) {
    let before = label_work();
    let options = Options {
        limits,
        cancel: None,
        format: Format::PrometheusText,
    };
    let got = parse_with(body, &|_| true, &options);
    (got, label_work() - before)
}

const ROOMY: Limits = Limits {
    max_line_bytes: usize::MAX,
    max_labels_per_series: usize::MAX,
    max_label_name_bytes: usize::MAX,
    max_label_value_bytes: usize::MAX,
    max_series: usize::MAX,
    max_json_nodes: usize::MAX,
    max_json_depth: usize::MAX,
};

#[test]
fn a_hundred_thousand_labels_are_refused_by_the_label_cap() {
    let page = many_labels(100_000);
    let limits = Limits {
        max_line_bytes: usize::MAX,
        ..Limits::DEFAULT
    };
    let (got, work) = label_work_for(&page, limits);
    let e = got.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit);
    assert_eq!(
        e.to_string(),
        "line 1: \"m\" has more than scrape.maxLabelsPerSeries (128) labels"
    );
    // Refused at label 129, not after reading all 100k.
    assert!(work < 16 * 16 + 128, "duplicate check did {work} steps");
}

#[test]
fn an_oversized_wanted_line_is_refused_before_any_label_work() {
    let page = many_labels(110_000);
    assert!(page.len() > 1_100_000);
    let (got, work) = label_work_for(&page, Limits::DEFAULT);
    let e = got.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit);
    assert_eq!(
        e.to_string(),
        format!(
            "line 1: line is {} bytes, more than scrape.maxLineBytes (65536)",
            page.len() - 1
        )
    );
    assert_eq!(work, 0);
    // The same line in a family nobody wants is skipped, not refused.
    let mut mixed = page.clone();
    mixed.extend_from_slice(b"ok 1\n");
    let got = parse_with(&mixed, &|n| n == "ok", &Options::default()).unwrap();
    assert_eq!(got, vec![s("ok", &[], 1.0, None)]);
}

#[test]
fn duplicate_label_check_is_linear_in_the_labels() {
    let (got, w1) = label_work_for(&many_labels(10_000), ROOMY);
    assert_eq!(got.unwrap()[0].labels.len(), 10_000);
    let (got, w2) = label_work_for(&many_labels(20_000), ROOMY);
    assert_eq!(got.unwrap()[0].labels.len(), 20_000);
    let (_, w4) = label_work_for(&many_labels(40_000), ROOMY);
    // O(N): doubling the labels at most doubles the work (plus the small-set scan).
    assert!(w1 <= 10_000 + 16 * 16, "10k labels: {w1} steps");
    assert!(w2 <= 2 * w1 && w4 <= 2 * w2, "{w1}, {w2}, {w4}");
    // Duplicates are still found past the small-set scan, at their first repeat.
    let mut dup = many_labels(100);
    dup.splice(2..2, b"l77=\"x\",".iter().copied());
    assert_eq!(
        parse_with(
            &dup,
            &|_| true,
            &Options {
                limits: ROOMY,
                ..Options::default()
            }
        )
        .unwrap_err()
        .to_string(),
        "line 1: duplicate label \"l77\""
    );
}

#[test]
fn label_name_and_value_caps() {
    let limits = Limits {
        max_label_name_bytes: 4,
        max_label_value_bytes: 3,
        ..Limits::DEFAULT
    };
    let options = Options {
        limits,
        cancel: None,
        format: Format::PrometheusText,
    };
    let e = parse_with(
        b"a 1\nm{abcd=\"xyz\"} 1\nm{abcde=\"x\"} 1\n",
        &|_| true,
        &options,
    )
    .unwrap_err();
    assert_eq!(
        (e.kind, e.to_string()),
        (
            ErrorKind::Limit,
            "line 3: a label name of \"m\" is 5 bytes, more than scrape.maxLabelNameBytes (4)"
                .to_owned()
        )
    );
    // The decoded value counts: `\"` is one byte.
    assert!(parse_with(b"m{a=\"\\\"\\\"\\\"\"} 1", &|_| true, &options).is_ok());
    let e = parse_with(b"m{a=\"wxyz\"} 1", &|_| true, &options).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1: value of label \"a\" is 4 bytes, more than scrape.maxLabelValueBytes (3)"
    );
}

#[test]
fn a_cancelled_parse_stops_at_the_next_line() {
    let cancel = AtomicBool::new(true);
    let options = Options {
        limits: Limits::DEFAULT,
        cancel: Some(&cancel),
        format: Format::PrometheusText,
    };
    let e = parse_with(b"a 1\nb 2\n", &|_| true, &options).unwrap_err();
    assert_eq!((e.line, e.kind), (1, ErrorKind::Cancelled));
    cancel.store(false, Ordering::Relaxed);
    assert_eq!(
        parse_with(b"a 1\nb 2\n", &|_| true, &options)
            .unwrap()
            .len(),
        2
    );
}

// ---- property tests ----------------------------------------------------------------

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        r#"["\\\n=,{}# an]{0,12}"#,
        prop::collection::vec(any::<char>(), 0..8).prop_map(String::from_iter),
    ]
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        -1e6..1e6f64,
        (-1000i64..1000).prop_map(|i| i as f64),
    ]
}

#[derive(Clone, Debug)]
struct Style {
    crlf: bool,
    blanks: bool,
    trailing_comma: bool,
    exemplar: bool,
}

fn sample() -> impl Strategy<Value = (ExposedSample, Style)> {
    (
        "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}",
        prop::collection::vec(("[a-zA-Z_][a-zA-Z0-9_]{0,10}", label_value()), 0..5),
        value(),
        prop::option::of(0..i64::MAX),
        any::<(bool, bool, bool, bool)>(),
    )
        .prop_map(
            |(name, raw_labels, value, timestamp_ms, (crlf, blanks, trailing_comma, exemplar))| {
                let mut labels: Vec<(String, String)> = Vec::new();
                for (k, v) in raw_labels {
                    if !labels.iter().any(|(n, _)| *n == k) {
                        labels.push((k, v));
                    }
                }
                (
                    ExposedSample {
                        name,
                        labels,
                        value,
                        timestamp_ms,
                        unusable: None,
                    },
                    Style {
                        crlf,
                        blanks,
                        trailing_comma,
                        exemplar,
                    },
                )
            },
        )
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn render_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v:?}")
    }
}

fn render(sample: &ExposedSample, style: &Style, out: &mut Vec<u8>) {
    let sp = if style.blanks { " \t" } else { "" };
    let mut line = sample.name.clone();
    if !sample.labels.is_empty() || style.blanks {
        line.push_str(sp);
        line.push('{');
        for (i, (k, v)) in sample.labels.iter().enumerate() {
            if i > 0 {
                line.push_str(sp);
                line.push(',');
            }
            line.push_str(&format!("{sp}{k}{sp}={sp}\"{}\"", escape(v)));
        }
        if style.trailing_comma && !sample.labels.is_empty() {
            line.push(',');
        }
        line.push_str(sp);
        line.push('}');
    }
    line.push(' ');
    line.push_str(&render_value(sample.value));
    if let Some(ts) = sample.timestamp_ms {
        line.push_str(&format!("{sp} {ts}"));
    }
    if style.exemplar {
        line.push_str(" # {trace_id=\"a,b=}\"} 0.5 1520879607.789");
    }
    line.push_str(sp);
    line.push_str(if style.crlf { "\r\n" } else { "\n" });
    out.extend_from_slice(line.as_bytes());
}

#[derive(Clone, Debug)]
enum Item {
    Wanted(ExposedSample, Style),
    Unwanted(ExposedSample, Style),
    Malformed(String, u8),
    Comment(String),
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        3 => sample().prop_map(|(s, st)| Item::Wanted(s, st)),
        3 => sample().prop_map(|(s, st)| Item::Unwanted(s, st)),
        1 => ("[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", 0u8..5).prop_map(|(n, k)| Item::Malformed(n, k)),
        1 => label_value().prop_map(|t| Item::Comment(t.replace(['\n', '\r'], " "))),
    ]
}

fn build_page(items: &[Item]) -> (Vec<u8>, Vec<String>, Vec<ExposedSample>) {
    let wanted_names: Vec<String> = items
        .iter()
        .filter_map(|i| match i {
            Item::Wanted(s, _) => Some(s.name.clone()),
            _ => None,
        })
        .collect();
    let mut page = Vec::new();
    let mut expected = Vec::new();
    for item in items {
        match item {
            Item::Wanted(s, st) => {
                render(s, st, &mut page);
                expected.push(s.clone());
            }
            Item::Unwanted(s, st) if !wanted_names.contains(&s.name) => render(s, st, &mut page),
            Item::Malformed(n, kind) if !wanted_names.contains(n) => {
                let junk: &[u8] = match kind {
                    0 => b"{a=\"unterminated 1",
                    1 => b" not_a_number",
                    2 => b"{=} 1",
                    3 => b"{a=\"\xff\"} 1",
                    _ => b"",
                };
                page.extend_from_slice(n.as_bytes());
                page.extend_from_slice(junk);
                page.push(b'\n');
            }
            Item::Comment(text) => {
                page.extend_from_slice(format!("# HELP x {text}\n# TYPE x gauge\n\n").as_bytes())
            }
            _ => {}
        }
    }
    (page, wanted_names, expected)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes, &|_| true);
        let _ = parse(&bytes, &|n| n.len() % 2 == 0);
    }

    #[test]
    fn exposition_like_text_never_panics(text in r#"[a-c:_{}="\\, \t#\r\n0-9.eE+\-InfNa\u{e9}]{0,200}"#) {
        let all = parse(text.as_bytes(), &|_| true);
        let some = parse(text.as_bytes(), &|n| n.starts_with('a'));
        // Skipping lines can only remove errors, never add them.
        if let Ok(all) = all {
            let some = some.expect("filtered parse failed where the full parse succeeded");
            let filtered: Vec<_> = all.into_iter().filter(|s| s.name.starts_with('a')).collect();
            prop_assert!(same(&some, &filtered));
        }
    }

    #[test]
    fn round_trip_returns_exactly_the_wanted_samples(items in prop::collection::vec(item(), 0..24)) {
        let (page, wanted_names, expected) = build_page(&items);
        let got = parse(&page, &|n| wanted_names.iter().any(|w| w == n));
        let got = match got {
            Ok(got) => got,
            Err(e) => return Err(TestCaseError::fail(format!(
                "{e}\npage:\n{}", String::from_utf8_lossy(&page)
            ))),
        };
        prop_assert!(same(&got, &expected), "got {got:?}\nexpected {expected:?}");
    }
}
