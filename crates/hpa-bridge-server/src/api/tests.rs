use bytes::Bytes;

use super::request_parts::QueryParamError;
use super::wire::{ExternalMetricValue, ExternalMetricValueList, Metadata};
use super::*;

/// The served list's bytes: keys in the order a `serde_json::Value` tree sorts them, strings
/// escaped as serde_json escapes them (quotes, backslashes, control characters).
#[test]
fn the_served_list_is_written_in_sorted_key_order() {
    let list = ExternalMetricValueList {
        api_version: GROUP_VERSION,
        items: [ExternalMetricValue {
            metric_labels: [("hpa_target_name", "lobby"), ("a\"b", "c\\d\u{1}")]
                .into_iter()
                .collect(),
            metric_name: "hpa_target_replicas",
            timestamp: "2026-12-02T03:36:02Z".into(),
            value: "18446744073709551615".into(),
            window: 60,
        }],
        kind: "ExternalMetricValueList",
        metadata: Metadata {},
    };
    assert_eq!(
        String::from_utf8(serde_json::to_vec(&list).unwrap()).unwrap(),
        r#"{"apiVersion":"external.metrics.k8s.io/v1beta1","items":[{"metricLabels":{"a\"b":"c\\d\u0001","hpa_target_name":"lobby"},"metricName":"hpa_target_replicas","timestamp":"2026-12-02T03:36:02Z","value":"18446744073709551615","window":60}],"kind":"ExternalMetricValueList","metadata":{}}"#
    );
}

#[test]
fn routes() {
    assert_eq!(route("/healthz"), Route::Health("healthz"));
    assert_eq!(route("/apis/"), Route::ApiGroupList);
    assert_eq!(
        route("/apis/external.metrics.k8s.io/v1beta1"),
        Route::ApiResourceList
    );
    assert_eq!(
        route("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas"),
        Route::ExternalMetric("default".into(), "hpa_expect_replicas".into())
    );
    assert_eq!(
        route("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/a/b"),
        Route::NotFound
    );
    assert_eq!(route("/api/v1/pods"), Route::NotFound);
}

#[test]
fn selector_param_is_form_decoded() {
    assert_eq!(
        label_selector_param(Some("labelSelector=app%3Dlobby%2Ctier+in+%28a%29")),
        Ok(Some("app=lobby,tier in (a)".into()))
    );
    assert_eq!(label_selector_param(Some("x=1")), Ok(None));
    assert_eq!(label_selector_param(None), Ok(None));
}

/// The cases where a naive split differs from Go's `url.ParseQuery` + `Values.Get`.
#[test]
fn selector_param_is_decoded_as_go_does() {
    let get = |q: &str| label_selector_param(Some(q));
    // Percent-encoded names are decoded.
    assert_eq!(get("label%53elector=app%3Da"), Ok(Some("app=a".into())));
    // The first of repeated parameters wins.
    assert_eq!(
        get("labelSelector=app%3Da&labelSelector=app%3Db"),
        Ok(Some("app=a".into()))
    );
    assert_eq!(
        get("labelSelector=&labelSelector=app%3Db"),
        Ok(Some("".into()))
    );
    // `+` is a space in names and values; a literal plus is %2B.
    assert_eq!(
        get("label+Selector=x&labelSelector=a+b"),
        Ok(Some("a b".into()))
    );
    assert_eq!(get("labelSelector=a%2Bb"), Ok(Some("a+b".into())));
    // A name without `=` has the empty value; empty pairs are skipped.
    assert_eq!(get("&&labelSelector&x=1"), Ok(Some("".into())));
    // What ParseQuery reports as errors, wherever in the query.
    assert_eq!(
        get("labelSelector=%zz"),
        Err(QueryParamError::Escape("%zz".into()))
    );
    assert_eq!(
        get("labelSelector=a%2"),
        Err(QueryParamError::Escape("%2".into()))
    );
    assert_eq!(
        get("x=%&labelSelector=a"),
        Err(QueryParamError::Escape("%".into()))
    );
    assert_eq!(get("labelSelector=a;b"), Err(QueryParamError::Semicolon));
    assert_eq!(
        get("labelSelector=%ff"),
        Err(QueryParamError::Utf8("%ff".into()))
    );
    // A leading sign is not a hex digit for Go either.
    assert_eq!(
        get("labelSelector=%+1"),
        Err(QueryParamError::Escape("%+1".into()))
    );
}

fn answers_computed(adapter: &Adapter) -> usize {
    adapter
        .explainer()
        .render_self_metrics()
        .lines()
        .filter(|l| l.starts_with("hpa_bridge_answers_total{"))
        .map(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0) as usize
        })
        .sum()
}

/// Selectors parsed once are remembered by their text, within a bound; one that does not
/// parse is refused every time and never remembered. Two spellings of one selector share
/// one rendered answer.
/// The custom metrics API's `metricLabelSelector` is remembered as `labelSelector` is, and
/// one that does not parse is still a 400 naming the parameter.
#[tokio::test]
async fn object_metric_selectors_are_remembered_too() {
    use hpa_bridge_rules::clock::ManualClock;
    let adapter = default_adapter(Arc::new(ManualClock::new(1_000_000)));
    let handler = ApiHandler::new(adapter);
    let get = |selector: &str| {
        Request::get(format!(
                "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/statefulsets.apps/lobby/hpa_expect_replicas?metricLabelSelector={selector}"
            ))
            .body(())
            .unwrap()
    };
    let remembered = || handler.selectors.lock().unwrap().len();
    handler.handle(&get("a%3D1")).await;
    handler.handle(&get("a%3D1")).await;
    assert_eq!(remembered(), 1);
    let bad = handler.handle(&get("a%20in%20(")).await;
    assert_eq!(bad.status().as_u16(), 400);
    let body = String::from_utf8(response_bytes(&bad).unwrap().to_vec()).unwrap();
    assert!(body.contains("metricLabelSelector: "), "{body}");
    assert_eq!(remembered(), 1);
}

#[tokio::test]
async fn parsed_selectors_are_remembered_within_a_bound() {
    use hpa_bridge_rules::clock::ManualClock;
    let adapter = default_adapter(Arc::new(ManualClock::new(1_000_000)));
    let handler = ApiHandler::new(adapter.clone());
    async fn get(h: &ApiHandler, selector: &str) -> u16 {
        let req = Request::get(format!(
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas?labelSelector={selector}"
            ))
            .body(())
            .unwrap();
        h.handle(&req).await.status().as_u16()
    }
    let remembered = || handler.selectors.lock().unwrap().len();
    assert_eq!(get(&handler, "b%3D2,a%3D1").await, 404);
    assert_eq!(get(&handler, "a%3D1,b%3D2").await, 404);
    assert_eq!(remembered(), 2);
    assert_eq!(
        answers_computed(&adapter),
        1,
        "one canonical scope, one answer"
    );
    for _ in 0..2 {
        assert_eq!(get(&handler, "a%20in%20(").await, 400);
    }
    assert_eq!(
        remembered(),
        2,
        "a selector that does not parse is not kept"
    );
    // Many short requirements: each label value has a 63-character limit.
    let long: Vec<String> = (0..MAX_REMEMBERED_SELECTOR / 4)
        .map(|i| format!("k{i}%3D1"))
        .collect();
    let long = long.join("%2C");
    assert_eq!(get(&handler, &long).await, 404);
    assert_eq!(remembered(), 2, "a long selector is not kept");
    for i in 0..MAX_SELECTORS.get() + 10 {
        get(&handler, &format!("a%3D{i}")).await;
        assert!(remembered() <= MAX_SELECTORS.get());
    }
}

#[tokio::test]
async fn rendered_answers_are_reused_only_while_nothing_changed() {
    use hpa_bridge_rules::clock::ManualClock;
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = default_engine(clock.clone());
    let adapter = engine.adapter().clone();
    let handler = ApiHandler::new(adapter.clone());
    async fn get(h: &ApiHandler) -> u16 {
        let req = Request::get(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas",
        )
        .body(())
        .unwrap();
        h.handle(&req).await.status().as_u16()
    }
    assert_eq!(get(&handler).await, 404);
    assert_eq!(answers_computed(&adapter), 1);
    assert_eq!(get(&handler).await, 404);
    assert_eq!(answers_computed(&adapter), 1, "reused within the second");
    clock.advance(hpa_bridge_engine::engine::ANSWER_REUSE_MS);
    assert_eq!(get(&handler).await, 404);
    assert_eq!(
        answers_computed(&adapter),
        2,
        "recomputed after the time bound"
    );
    // A list that changes nothing is no change: a new, never-scraped pod in the namespace is.
    engine.targets().set_targets(Vec::new());
    assert_eq!(get(&handler).await, 404);
    assert_eq!(answers_computed(&adapter), 2, "an unchanged store");
    engine
        .targets()
        .set_targets(vec![hpa_bridge_store::store::ScrapeTarget {
            format: Default::default(),
            id: hpa_bridge_rules::evidence::TargetId("new".into()),
            url: "http://new/metrics".into(),
            labels: [("namespace".to_string(), "default".to_string())].into(),
            workload: None,
        }]);
    assert_eq!(get(&handler).await, 503);
    assert_eq!(
        answers_computed(&adapter),
        3,
        "recomputed after a store change"
    );

    // Without reuse (the bench's comparison) every request computes its answer.
    let fresh = ApiHandler::new(adapter.clone()).without_answer_reuse();
    assert_eq!(get(&fresh).await, 503);
    assert_eq!(get(&fresh).await, 503);
    assert_eq!(answers_computed(&adapter), 5, "no reuse when switched off");
}

/// Reuse follows the workload's own evidence: a re-scrape with the same values, or a
/// change in another namespace, leaves its rendered answer current; a changed value in its
/// scope does not.
#[tokio::test]
async fn a_reused_answer_follows_a_value_change_in_its_scope() {
    use hpa_bridge_exposition::ExposedSample;
    use hpa_bridge_rules::clock::{Clock, ManualClock};
    use hpa_bridge_rules::evidence::TargetId;
    use hpa_bridge_store::store::ScrapeTarget;
    let clock = Arc::new(ManualClock::new(1_000_000));
    let engine = default_engine(clock.clone());
    let adapter = engine.adapter().clone();
    let handler = ApiHandler::new(adapter.clone());
    let target = |name: &str, ns: &str| ScrapeTarget {
        format: Default::default(),
        id: TargetId(name.into()),
        url: format!("http://{name}/metrics"),
        labels: [("namespace".to_string(), ns.to_string())].into(),
        workload: None,
    };
    let (ours, theirs) = (target("a", "default"), target("b", "other"));
    let store = engine.targets();
    store.set_targets(vec![ours.clone(), theirs.clone()]);
    let scrape = |t: &ScrapeTarget, value: f64| {
        let page = vec![ExposedSample {
            name: "hpa_expect_replicas".into(),
            labels: vec![("hpa_target_name".into(), "lobby".into())],
            value,
            timestamp_ms: None,
            unusable: None,
        }];
        store.record_success(t, clock.now_ms(), 1, page);
    };
    scrape(&ours, 3.0);
    scrape(&theirs, 5.0);
    async fn get(h: &ApiHandler) -> (u16, String) {
        let req = Request::get(
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas?labelSelector=hpa_target_name%3Dlobby",
            )
            .body(())
            .unwrap();
        let resp = h.handle(&req).await;
        let v = json_body(&resp);
        (
            resp.status().as_u16(),
            v["items"][0]["value"].as_str().unwrap_or("").to_string(),
        )
    }
    assert_eq!(get(&handler).await, (200, "3".into()));
    let computed = answers_computed(&adapter);
    clock.advance(100);
    scrape(&ours, 3.0);
    scrape(&theirs, 6.0);
    assert_eq!(get(&handler).await, (200, "3".into()));
    assert_eq!(
        answers_computed(&adapter),
        computed,
        "nothing in scope changed: reused"
    );
    scrape(&ours, 4.0);
    assert_eq!(
        get(&handler).await,
        (200, "4".into()),
        "the new value, at once"
    );
    assert_eq!(answers_computed(&adapter), computed + 1);
}

/// An engine over the default config and an empty store, on `clock`.
pub(super) fn default_engine(
    clock: Arc<hpa_bridge_rules::clock::ManualClock>,
) -> hpa_bridge_engine::engine::Assembly {
    hpa_bridge_engine::engine::EngineBuilder::new(
        hpa_bridge_rules::config::Config::from_yaml("").unwrap(),
        clock,
    )
    .build()
    .unwrap()
}

/// The adapter of [`default_engine`].
pub(super) fn default_adapter(clock: Arc<hpa_bridge_rules::clock::ManualClock>) -> Arc<Adapter> {
    default_engine(clock).adapter().clone()
}

/// A handler over the default config and an empty store.
pub(super) fn default_handler() -> ApiHandler {
    ApiHandler::new(default_adapter(Arc::new(
        hpa_bridge_rules::clock::ManualClock::new(1_000_000),
    )))
}

/// The bytes of a response built here (one `Full` frame), without consuming it.
pub(super) fn response_bytes(resp: &ApiResponse) -> Option<Bytes> {
    use http_body_util::BodyExt;
    let mut body = resp.body().clone();
    let frame = futures::FutureExt::now_or_never(body.frame())??.ok()?;
    frame.into_data().ok()
}

pub(super) fn json_body(resp: &ApiResponse) -> serde_json::Value {
    serde_json::from_slice(&response_bytes(resp).unwrap()).unwrap()
}

#[tokio::test]
async fn a_query_go_cannot_parse_is_a_bad_request() {
    let handler = default_handler();
    for query in ["labelSelector=%zz", "x=1;y=2&labelSelector=a%3Db"] {
        let req = Request::get(format!(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas?{query}"
        ))
        .body(())
        .unwrap();
        let resp = handler.handle(&req).await;
        assert_eq!(resp.status().as_u16(), 400, "{query}");
        assert_eq!(json_body(&resp)["reason"], "BadRequest", "{query}");
    }
}

#[tokio::test]
async fn a_write_is_refused_naming_the_group_it_asked_for() {
    let handler = default_handler();
    for (method, path, group, other) in [
            (
                Method::POST,
                "/apis/custom.metrics.k8s.io/v1beta2/namespaces/games/statefulsets.apps/lobby/hpa_target_replicas",
                "custom metrics (custom.metrics.k8s.io)",
                "external",
            ),
            (
                Method::DELETE,
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/games/hpa_target_replicas",
                "external metrics (external.metrics.k8s.io)",
                "custom",
            ),
        ] {
            let req = Request::builder()
                .method(method.clone())
                .uri(path)
                .body(())
                .unwrap();
            let resp = handler.handle(&req).await;
            assert_eq!(resp.status().as_u16(), 405, "{path}");
            let body = json_body(&resp);
            let message = body["message"].as_str().unwrap();
            assert_eq!(
                message,
                format!("method {method} is not supported: {group} are read-only (get, list)")
            );
            assert!(!message.contains(other), "{message}");
            assert_eq!(body["reason"], "MethodNotAllowed");
        }
    let req = Request::builder()
        .method(Method::PUT)
        .uri("/healthz")
        .body(())
        .unwrap();
    assert_eq!(
        json_body(&handler.handle(&req).await)["message"],
        "method PUT is not supported: this server is read-only (get, list)"
    );
}

#[test]
fn namespaces() {
    assert!(valid_namespace("default"));
    assert!(valid_namespace("kube-system"));
    assert!(!valid_namespace("Default"));
    assert!(!valid_namespace("-a"));
    assert!(!valid_namespace(&"a".repeat(64)));
}

/// A gate for the chains' tests: it admits `Authorization: Bearer ok` and refuses anyone else
/// as the real gate refuses an unauthenticated caller.
pub(super) struct BearerGate;

impl transport::Gatekeeper for BearerGate {
    fn admit<'a>(
        &'a self,
        req: &'a http::request::Parts,
        _: &'a transport::Peer,
        _: &'a Route,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ApiResponse>> + Send + 'a>>
    {
        let admitted = req.headers.get(http::header::AUTHORIZATION)
            == Some(&http::HeaderValue::from_static("Bearer ok"));
        Box::pin(std::future::ready(if admitted {
            Ok(())
        } else {
            Err(status_response(
                StatusReason::Unauthorized,
                "Unauthorized: no credentials",
            ))
        }))
    }
}

pub(super) fn bearer_gate() -> Arc<dyn transport::Gatekeeper> {
    Arc::new(BearerGate)
}

/// A connection's peer without a client certificate.
pub(super) fn peer() -> Arc<transport::Peer> {
    Arc::new(transport::Peer {
        addr: "192.0.2.1:40000".parse().unwrap(),
        certificates: None,
    })
}

/// A request to `path` with `method`, from a caller holding the credentials `BearerGate`
/// admits when `authorised`.
pub(super) fn request(method: Method, path: &str, authorised: bool) -> Request<()> {
    let mut req = Request::builder().method(method).uri(path);
    if authorised {
        req = req.header(http::header::AUTHORIZATION, "Bearer ok");
    }
    req.body(()).unwrap()
}

/// The API port's chain for one connection of `peer()`, over `handler`.
pub(super) async fn ask_api(
    handler: &Arc<ApiHandler>,
    gate: Option<&Arc<dyn transport::Gatekeeper>>,
    shutdown: &Arc<transport::shutdown::Shutdown>,
    req: Request<()>,
) -> ApiResponse {
    use tower::ServiceExt;
    let chain = server::api_service(handler, gate, shutdown, peer());
    let Ok(resp) = chain.oneshot(req).await;
    resp
}

/// `hpa_bridge_requests_total{code, metric}` as the self-metrics render it.
pub(super) fn requests_counted(adapter: &Adapter, code: u16, metric: &str) -> f64 {
    let labels = [format!("code=\"{code}\""), format!("metric=\"{metric}\"")];
    adapter
        .explainer()
        .render_self_metrics()
        .lines()
        .filter(|l| l.starts_with("hpa_bridge_requests_total{"))
        .filter(|l| labels.iter().all(|label| l.contains(label.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn a_full_selector_memory_forgets_the_least_recently_asked_selector() {
    let handler = default_handler();
    let parse = |n: usize| handler.parse_selector(format!("a={n}")).unwrap();
    let first = parse(0);
    let second = parse(1);
    for n in 2..MAX_SELECTORS.get() {
        parse(n);
    }
    assert!(Arc::ptr_eq(&parse(0), &first), "remembered");
    parse(MAX_SELECTORS.get());
    assert!(
        Arc::ptr_eq(&parse(0), &first),
        "the selector just asked stays"
    );
    assert!(!Arc::ptr_eq(&parse(1), &second), "the least recent goes");
}

/// The answer's future holds the whole evaluation (several KiB). Every layer's future wraps the
/// one below it and the connection stores the outermost, so unless the answer is boxed where
/// the chain ends, each request copies those KiB once per layer.
#[test]
fn the_chain_moves_a_pointer_to_the_answer_not_the_answer() {
    use tower::Service;
    let handler = Arc::new(default_handler());
    let shutdown = transport::shutdown::Shutdown::new();
    let gate = bearer_gate();
    let path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/m";
    let req = request(Method::GET, path, true);
    let route = super::route(req.uri().path());
    let answer = std::mem::size_of_val(&handler.answer(&req, &route));
    let mut chain = server::api_service(&handler, Some(&gate), &shutdown, peer());
    let whole = std::mem::size_of_val(&chain.call(request(Method::GET, path, true)));
    assert!(
        whole * 4 < answer,
        "the chain's future is {whole} bytes against the answer's {answer}: it holds the answer inline"
    );
}
