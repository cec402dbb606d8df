//! The JSON source against a document shaped like SeaTunnel's `GET /autoscaler/status`
//! (tests/fixtures/json/seatunnel-status.json), and every conversion and failure the JSON
//! source defines.

use super::*;

const STATUS: &str = include_str!("../../../../tests/fixtures/json/seatunnel-status.json");

fn path(text: &str) -> JsonPath {
    JsonPath::parse(text).unwrap()
}

fn rule(series: &str, value: &str) -> JsonSampleRule {
    JsonSampleRule {
        series: series.into(),
        value: path(value),
        timestamp: Some(path("$.timestamp")),
        labels: Vec::new(),
    }
}

/// The block of examples/seatunnel-rest.yaml.
fn seatunnel() -> JsonExtraction {
    let mut recommended = rule(
        "seatunnel_autoscaler_recommended_workers",
        "$.recommendedWorkers",
    );
    recommended.labels = vec![
        ("master_epoch".into(), path("$.masterEpoch")),
        ("action".into(), path("$.action")),
    ];
    JsonExtraction {
        name: "jsonConfigs.seatunnel".into(),
        samples: vec![
            recommended,
            rule("seatunnel_autoscaler_current_workers", "$.currentWorkers"),
            rule(
                "seatunnel_autoscaler_metrics_valid",
                "$.metricsSnapshot.metricsValid",
            ),
        ],
        reason: Some(path("$.reason")),
        valid_until: Some(path("$.validUntil")),
        timestamp_unit: TimestampUnit::Millis,
    }
}

fn read(x: &JsonExtraction, body: &str) -> Result<JsonPage, JsonPageError> {
    x.read(body.as_bytes(), &|_| true, &Limits::DEFAULT, None)
}

fn with(field: &str, value: serde_json::Value) -> String {
    let mut doc: serde_json::Value = serde_json::from_str(STATUS).unwrap();
    doc[field] = value;
    doc.to_string()
}

#[test]
fn the_status_document_reads_as_three_series_with_the_producers_time_and_reason() {
    let page = read(&seatunnel(), STATUS).unwrap();
    let at = Some(1_764_547_200_000);
    assert_eq!(
        page.samples,
        vec![
            ExposedSample {
                name: "seatunnel_autoscaler_recommended_workers".into(),
                labels: vec![
                    ("master_epoch".into(), "4".into()),
                    ("action".into(), "SCALE_IN_CANDIDATE".into())
                ],
                value: 4.0,
                timestamp_ms: at,
                unusable: None,
            },
            ExposedSample {
                name: "seatunnel_autoscaler_current_workers".into(),
                labels: vec![],
                value: 6.0,
                timestamp_ms: at,
                unusable: None,
            },
            ExposedSample {
                name: "seatunnel_autoscaler_metrics_valid".into(),
                labels: vec![],
                value: 1.0,
                timestamp_ms: at,
                unusable: None,
            },
        ]
    );
    assert_eq!(
        page.reason.as_deref(),
        Some("backlog drained for 300s; 2 workers idle")
    );
    // 2025-12-01T00:01:00Z
    assert_eq!(page.valid_until_ms, Some(1_764_547_260_000));
}

#[test]
fn values_are_numbers_booleans_or_numeric_strings_and_nothing_else() {
    let x = seatunnel();
    for (given, want) in [
        (serde_json::json!(7), Some(7.0)),
        (serde_json::json!(2.5), Some(2.5)),
        (serde_json::json!(true), Some(1.0)),
        (serde_json::json!(false), Some(0.0)),
        (serde_json::json!("12"), Some(12.0)),
        (serde_json::json!(" 3 "), Some(3.0)),
        (serde_json::json!("three"), None),
        (serde_json::json!(null), None),
        (serde_json::json!([4]), None),
        (serde_json::json!({"n": 4}), None),
    ] {
        let page = read(&x, &with("recommendedWorkers", given.clone())).unwrap();
        let s = &page.samples[0];
        match want {
            Some(v) => assert!(s.value == v && s.unusable.is_none(), "{given}: {s:?}"),
            None => assert!(
                s.value.is_nan() && s.unusable == Some(Unusable::NotANumber),
                "{given}: {s:?}"
            ),
        }
    }
}

#[test]
fn a_path_that_matches_nothing_leaves_the_series_out_of_the_page() {
    let mut doc: serde_json::Value = serde_json::from_str(STATUS).unwrap();
    doc.as_object_mut().unwrap().remove("recommendedWorkers");
    let page = read(&seatunnel(), &doc.to_string()).unwrap();
    let names: Vec<&str> = page.samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "seatunnel_autoscaler_current_workers",
            "seatunnel_autoscaler_metrics_valid"
        ]
    );
}

#[test]
fn a_path_that_could_match_several_values_is_refused_when_read_from_config() {
    // Only singular queries: each of these selects any number of values on some page, and
    // `..` walks the whole document for every path.
    for (bad, why) in [
        (
            "$..recommendedWorkers",
            "`..` (descendant) selects every match at any depth",
        ),
        ("$.metricsSnapshot.*", "`*` (wildcard) selects every member"),
        ("$.jobs[0:2]", "a slice selects several values"),
        (
            "$.jobs[?@.id == 1].workers",
            "a filter selects every member it matches",
        ),
        ("$['a','b']", "a list of selectors selects several values"),
        (
            "$.jobs[-1]",
            "a negative index counts from the end of an array",
        ),
    ] {
        let err = JsonPath::parse(bad).unwrap_err();
        assert!(
            err.starts_with(&format!("{bad:?}: {why}"))
                && err.contains("an RFC 9535 singular query"),
            "{err}"
        );
    }
    for good in ["$", "$.a", "$['a b'].c[0]", "$[\"x\"][3].y", "$.a[ 1 ]"] {
        assert!(JsonPath::parse(good).is_ok(), "{good}");
    }
    assert_eq!(
        path("$['a\\'b'][2].c").steps,
        [
            Step::Name("a'b".into()),
            Step::Index(2),
            Step::Name("c".into())
        ]
    );
}

#[test]
fn timestamps_are_unix_numbers_in_the_unit_given_or_rfc3339_strings() {
    let mut x = seatunnel();
    let at = |doc: String, x: &JsonExtraction| {
        let s = read(x, &doc).unwrap().samples[1].clone();
        (s.timestamp_ms, s.unusable)
    };
    assert_eq!(
        at(
            with("timestamp", serde_json::json!(1_764_547_200_123i64)),
            &x
        ),
        (Some(1_764_547_200_123), None)
    );
    assert_eq!(
        at(
            with(
                "timestamp",
                serde_json::json!("2025-12-01T01:00:00.5+01:00")
            ),
            &x
        ),
        (Some(1_764_547_200_500), None)
    );
    x.timestamp_unit = TimestampUnit::Seconds;
    assert_eq!(
        at(with("timestamp", serde_json::json!(1_764_547_200.25)), &x),
        (Some(1_764_547_200_250), None)
    );
    // A time that cannot be read, or none at all, leaves the value's age unknown.
    for bad in [
        serde_json::json!("yesterday"),
        serde_json::json!("1764547200"),
        serde_json::json!(-5),
        serde_json::json!(true),
        serde_json::json!(1e300),
    ] {
        assert_eq!(
            at(with("timestamp", bad.clone()), &x),
            (None, Some(Unusable::NoProducerTime)),
            "{bad}"
        );
    }
    let mut doc: serde_json::Value = serde_json::from_str(STATUS).unwrap();
    doc.as_object_mut().unwrap().remove("timestamp");
    assert_eq!(
        at(doc.to_string(), &x),
        (None, Some(Unusable::NoProducerTime))
    );
}

#[test]
fn labels_are_strings_or_integers_and_anything_else_refuses_the_page() {
    let page = read(&seatunnel(), &with("masterEpoch", serde_json::json!("5"))).unwrap();
    assert_eq!(
        page.samples[0].labels[0],
        ("master_epoch".into(), "5".into())
    );
    for bad in [
        serde_json::json!(4.5),
        serde_json::json!(true),
        serde_json::json!([4]),
    ] {
        let err = read(&seatunnel(), &with("masterEpoch", bad.clone())).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("label master_epoch from $.masterEpoch: ")
                && err
                    .to_string()
                    .ends_with("is neither a string nor an integer"),
            "{bad}: {err}"
        );
    }
    // A label whose path matches nothing is left off, as an empty label is.
    let mut doc: serde_json::Value = serde_json::from_str(STATUS).unwrap();
    doc.as_object_mut().unwrap().remove("action");
    let page = read(&seatunnel(), &doc.to_string()).unwrap();
    assert_eq!(
        page.samples[0].labels,
        [("master_epoch".into(), "4".into())]
    );
    // A label value is bounded like an exposition label's.
    let long = "x".repeat(Limits::DEFAULT.max_label_value_bytes + 1);
    let err = read(&seatunnel(), &with("action", serde_json::json!(long))).unwrap_err();
    assert!(
        err.is_limit() && err.to_string().contains("scrape.maxLabelValueBytes"),
        "{err}"
    );
}

#[test]
fn a_body_that_is_not_json_fails_the_page() {
    for body in [
        "",
        "recommendedWorkers 4\n",
        "{\"recommendedWorkers\": 4",
        "[1,]",
        // Which of the two is meant is unknown (RFC 8259 §4): 10 to one reader, 1 to another.
        "{\"recommendedWorkers\": 10, \"recommendedWorkers\": 1}",
    ] {
        let err = read(&seatunnel(), body).unwrap_err();
        assert!(
            err.to_string().starts_with("body is not JSON: "),
            "{body:?}: {err}"
        );
    }
}

#[test]
fn the_reason_is_cut_and_a_bad_valid_until_refuses_the_page() {
    let long = "why ".repeat(100);
    let page = read(&seatunnel(), &with("reason", serde_json::json!(long))).unwrap();
    assert_eq!(page.reason.unwrap().chars().count(), REASON_MAX_CHARS);
    let err = read(&seatunnel(), &with("validUntil", serde_json::json!("soon"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "validUntil $.validUntil: \"soon\" is not a time (a number of Unix milliseconds or an RFC 3339 string)"
    );
}

#[test]
fn only_wanted_series_are_read() {
    let page = seatunnel()
        .read(
            STATUS.as_bytes(),
            &|name| name == "seatunnel_autoscaler_current_workers",
            &Limits::DEFAULT,
            None,
        )
        .unwrap();
    assert_eq!(page.samples.len(), 1);
}

#[test]
fn hostile_documents_are_refused_or_read_in_bounded_work() {
    // Far deeper than the budget: refused at the budget, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let err = read(&seatunnel(), &deep).unwrap_err();
    assert!(
        err.is_limit() && err.to_string().contains("scrape.maxJsonDepth (64)"),
        "{err}"
    );
    // 64 levels below the root: read, and the paths find nothing in it; one more is refused.
    let at = |levels: usize| format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels));
    assert_eq!(read(&seatunnel(), &at(64)).unwrap().samples, vec![]);
    assert!(read(&seatunnel(), &at(65)).unwrap_err().is_limit());
    // 90,000 keys beside the real ones fit the node budget; 100,000 do not, and the message
    // names the budget.
    let with_keys = |n: usize| {
        let mut doc: serde_json::Value = serde_json::from_str(STATUS).unwrap();
        for i in 0..n {
            doc[format!("k{i}")] = serde_json::json!(i);
        }
        doc.to_string()
    };
    let page = read(&seatunnel(), &with_keys(90_000)).unwrap();
    assert_eq!(page.samples[0].value, 4.0);
    let err = read(&seatunnel(), &with_keys(100_000)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the document holds more than scrape.maxJsonNodes (100000) values"
    );
    assert!(err.is_limit());
}

#[test]
fn a_set_cancel_flag_stops_the_read() {
    let flag = std::sync::atomic::AtomicBool::new(true);
    let err = seatunnel()
        .read(STATUS.as_bytes(), &|_| true, &Limits::DEFAULT, Some(&flag))
        .unwrap_err();
    assert_eq!(err, JsonPageError::Cancelled);
    assert_eq!(
        err.to_string(),
        "parsing cancelled: the scrape deadline passed"
    );
}

#[test]
fn paths_that_are_not_rfc9535_are_refused_with_their_text() {
    for bad in ["recommendedWorkers", "$.", "$[?@.a ==]", "$..["] {
        let err = JsonPath::parse(bad).unwrap_err();
        assert!(
            err.starts_with(&format!("{bad:?} is not an RFC 9535 JSONPath")),
            "{err}"
        );
    }
}
