//! Hostile or careless exporters and target lists, end to end through the real binary:
//! duplicate series in one page, and the adapter's own /metrics valid whatever a
//! target id holds. Credentials: scrape_credentials.rs.

use hpa_bridge_kit::exporter::TestExporter;

use crate::common::*;
use hpa_bridge_store::store::TargetId;
use hpa_bridge_telemetry::self_metrics::{ScopeGauges, SelfMetrics};

/// The adapter scraping `targets`, once it serves `value` for the lobby's recommendation.
async fn serving_lobby(targets: &[(String, &str, &str)], value: &str) -> AdapterProcess {
    let adapter = AdapterProcess::start(&fast_config(targets)).await;
    adapter
        .eventually_value(
            "default",
            "hpa_expect_replicas",
            "hpa_target_name=lobby",
            value,
        )
        .await;
    adapter
}

/// A page holding the same series twice (10, then 2): Prometheus keeps the first sample and
/// reports the page. Here neither value is trusted: the answer never drops to 2, the input is
/// shown as ambiguous on /status, and /metrics counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_twice_in_one_page_is_ambiguous_never_lowers_and_is_counted() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "10"));
    let adapter = serving_lobby(&[(ex.url("/ctl"), "default", "ctl-0")], "10").await;

    ex.page(
        "/ctl",
        format!(
            "{}{}",
            expect_page("ctl-0", "10"),
            expect_page("ctl-0", "2").lines().nth(1).unwrap()
        ) + "\n",
    );
    let refused = adapter
        .eventually(
            "default",
            "hpa_expect_replicas",
            "hpa_target_name=lobby",
            "ambiguous",
            |c, v| {
                c != 200
                    && v["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("ambiguous")
            },
        )
        .await;
    assert_eq!(refused["kind"], "Status", "{refused}");
    assert!(single_value(&refused).is_none(), "{refused}");

    let status = adapter.status().await.to_string();
    assert!(status.contains("exported twice in one scrape"), "{status}");
    let (_, metrics) = adapter.plain_get("/metrics").await;
    let counted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hpa_bridge_scrape_duplicate_series_total "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(counted.is_some_and(|n| n >= 1.0), "{metrics}");
}

/// A sample timestamped before the one its series holds (10 now, then 2 from 20 s before) is
/// out of order, as Prometheus rejects it: the answer never drops to 2, the refusal and /status
/// say why, and /metrics counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_older_than_the_one_held_is_out_of_order_and_counted() {
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    };
    let timed = |value: &str, at: u128| {
        expect_page("ctl-0", value).replace(&format!(" {value}\n"), &format!(" {value} {at}\n"))
    };
    let ex = TestExporter::start().await;
    let held = now_ms();
    ex.page("/ctl", timed("10", held));
    let adapter = serving_lobby(&[(ex.url("/ctl"), "default", "ctl-0")], "10").await;

    ex.page("/ctl", timed("2", held - 20_000));
    let refused = adapter
        .eventually(
            "default",
            "hpa_expect_replicas",
            "hpa_target_name=lobby",
            "out of order",
            |c, v| {
                c != 200
                    && v["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("out of order")
            },
        )
        .await;
    assert!(single_value(&refused).is_none(), "{refused}");
    let status = adapter.status().await.to_string();
    assert!(status.contains("so it is out of order"), "{status}");
    let (_, metrics) = adapter.plain_get("/metrics").await;
    let counted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("hpa_bridge_scrape_out_of_order_series_total "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(counted.is_some_and(|n| n >= 1.0), "{metrics}");
}

/// A password and query values in a target URL (`?token=`, as some exporters take a token)
/// appear nowhere: not in /status, /status/history, the status page, /metrics, nor the log of
/// the failing scrape. The query keys stay, so the URL still says what it asks for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_values_in_target_urls_are_masked_everywhere_and_keys_stay() {
    let ex = TestExporter::start().await;
    ex.page("/ok", expect_page("ctl-0", "3"));
    let authority = ex.url("").trim_start_matches("http://").to_owned();
    // Userinfo is refused at startup (scrape_credentials.rs), so only
    // the query carries secrets here.
    let failing = format!("http://{authority}/missing?token=SECRETT&x=SECRETX");
    let adapter = serving_lobby(
        &[
            (ex.url("/ok"), "default", "ctl-0"),
            // In another namespace: a static target failing since the start would otherwise
            // refuse lobby's answer (docs/unknown-input.md).
            (failing, "elsewhere", "ctl-1"),
        ],
        "3",
    )
    .await;
    let shown = format!("http://{authority}/missing?token=xxxxx&x=xxxxx");
    let mut pages = Vec::new();
    for path in ["/status", "/status/history", "/", "/metrics"] {
        let (code, body) = adapter.plain_get(path).await;
        assert_eq!(code, 200, "{path}: {body}");
        pages.push((path, body));
    }
    pages.push(("the log", adapter.log()));
    for (path, body) in &pages {
        for secret in ["SECRETT", "SECRETX"] {
            assert!(!body.contains(secret), "{path} shows {secret:?}: {body}");
        }
    }
    for (path, body) in &pages {
        if ["/status", "/", "/metrics", "the log"].contains(path) {
            let in_html = shown.replace('&', "&amp;");
            assert!(
                body.contains(&shown) || body.contains(&in_html),
                "{path} does not show {shown}: {body}"
            );
        }
    }
    assert!(pages[4].1.contains("scrape failed"), "{}", pages[4].1);
}

/// Every label value the adapter writes into its own /metrics (a target id, a metric name
/// from a request path, a listener, a scope) may hold `"`, `\` and a line feed: the page still
/// passes `promtool check metrics`, and each value parses back exactly.
#[test]
fn odd_label_values_leave_the_self_metrics_page_valid_and_parse_back_exactly() {
    let odd = "http://h/m?a=\"q\"\\b\nc";
    let m = SelfMetrics::new();
    m.scrape_error(&TargetId(odd.into()), "connect");
    m.request(200, odd, 0.001);
    m.answer(odd, odd);
    m.prometheus_query(odd, 0.1);
    m.connections_open(odd, 1);
    m.connection_refused(odd, odd);
    m.connection_expired(odd, odd);
    m.client_penalized(odd, odd);
    m.clients_dropped(odd, 1);
    m.set_scopes(
        &[ScopeGauges {
            namespace: odd.into(),
            metric: odd.into(),
            workload: odd.into(),
            refusing: true,
            refusing_since_seconds: Some(1.0),
            floor_holds: true,
        }],
        1,
        0,
    );
    let page = m.render_text_format();

    let (code, said) = peers::promtool_check_metrics(&page);
    // promtool exits 1 when it cannot parse the page, 3 when its linter finds something (a
    // counter's HELP on the family name, as OpenMetrics has it, draws "no help text"): the
    // text format a client without an Accept header gets is clean.
    assert_eq!(code, Some(0), "promtool check metrics: {said}\n{page}");
    assert!(said.trim().is_empty(), "promtool: {said}\n{page}");

    let samples = hpa_bridge_exposition::parse(page.as_bytes(), &|_| true)
        .unwrap_or_else(|e| panic!("{e}\n{page}"));
    let labelled: Vec<_> = samples.iter().filter(|s| !s.labels.is_empty()).collect();
    for family in [
        "hpa_bridge_scrape_errors_total",
        "hpa_bridge_requests_total",
        "hpa_bridge_answers_total",
        "hpa_bridge_prometheus_queries_total",
        "hpa_bridge_connections",
        "hpa_bridge_connections_refused_total",
        "hpa_bridge_connections_expired_total",
        "hpa_bridge_clients_penalized_total",
        "hpa_bridge_clients_dropped",
        "hpa_bridge_scope_refusing",
    ] {
        assert!(
            labelled.iter().any(|s| s.name == family),
            "{family} missing:\n{page}"
        );
    }
    for s in labelled {
        for (key, value) in &s.labels {
            let expected = match (s.name.as_str(), key.as_str()) {
                ("hpa_bridge_scrape_errors_total", "reason") => "connect",
                ("hpa_bridge_requests_total", "code") => "200",
                (_, "le") => continue,
                _ => odd,
            };
            assert_eq!(value, expected, "{} {key}:\n{page}", s.name);
        }
    }
}
