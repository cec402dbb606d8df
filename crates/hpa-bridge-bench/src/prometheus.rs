//! Queries sent to Prometheus per HPA request under 100 concurrent identical requests: with
//! coalescing the goal is about one query round per burst, not one per request.
//!
//! The peer is an in-process loopback HTTP server speaking the Prometheus HTTP API
//! (`POST /api/v1/query`, form-encoded `query` and `time`), counting every query it receives and
//! holding each one for a fixed latency, as a real TSDB takes a few milliseconds to evaluate.
//! It answers from the query itself: the series names in the `__name__=~"a|b"` matcher and the
//! equality matchers (namespace, `hpa_target_name`) become the series' labels, and a query that
//! ends in a range (`[...ms]`) gets a matrix of raw samples, anything else a vector — the two
//! shapes `source::prometheus` asks for. Sample timestamps are the query's evaluation time, so
//! every series is fresh and the answer is a value, checked for every request.
//!
//! The adapter side is `Adapter::answer("hpa_target_replicas", ...)` over a real
//! `PrometheusSource` and its hyper client. Coalescing cannot be switched off (identical queries
//! in flight are always shared by `source::prometheus`, even with `cacheTtl: 0`), so the
//! baseline is what a naive adapter would send: requests × the queries one answer needs,
//! measured from a single request against a fresh source. The real-Prometheus end-to-end test
//! (tests/integration/prometheus.rs) asserts the same coalescing against a real Prometheus 2.42
//! server.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::{BenchError, InPart};
use hpa_bridge_engine::engine::MetricQuery;
use hpa_bridge_engine::engine::{Adapter, EngineBuilder};
use hpa_bridge_rules::clock::{Clock, SystemClock};
use hpa_bridge_rules::config::Config;
use hpa_bridge_rules::policy::Outcome;
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// What a TSDB takes to evaluate a small instant query.
const QUERY_LATENCY: Duration = Duration::from_millis(20);
const CONCURRENT_REQUESTS: u32 = 100;
const METRIC: &str = "hpa_target_replicas";
const SELECTOR: &str = "hpa_target_name=lobby";

/// The series the loopback Prometheus holds for workload `lobby`: two controllers exporting a
/// recommendation and four StatefulSet pods exporting their index (docs/hpa-behaviour.md §4.1 names).
const SERIES: &[(&str, &str, &str, f64)] = &[
    ("hpa_expect_replicas", "controller-0", "10.0.0.1:9100", 3.0),
    ("hpa_expect_replicas", "controller-1", "10.0.0.2:9100", 4.0),
    ("hpa_stateful_index", "lobby-0", "10.0.1.1:9100", 0.0),
    ("hpa_stateful_index", "lobby-1", "10.0.1.2:9100", 1.0),
    ("hpa_stateful_index", "lobby-2", "10.0.1.3:9100", 2.0),
    ("hpa_stateful_index", "lobby-3", "10.0.1.4:9100", 3.0),
];

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusResult {
    pub measured: bool,
    pub note: String,
    pub concurrent_requests: u32,
    /// The loopback server's artificial evaluation time per query.
    pub query_latency_ms: f64,
    /// PromQL queries one answer needs, from a single request against a fresh source.
    pub queries_per_answer: u64,
    /// What a naive adapter would send for the burst: requests × queries per answer.
    pub naive_queries: u64,
    /// Queries the server received for the burst with `cacheTtl: 0` (only in-flight sharing).
    pub queries_coalescing_only: u64,
    /// Queries the server received for the burst with `cacheTtl: 10s`.
    pub queries_with_cache: u64,
    /// Queries per HPA request in the `cacheTtl: 0` burst.
    pub queries_per_request: Option<f64>,
    /// The same with the cache on.
    pub queries_per_request_with_cache: f64,
    /// Naive queries per request (= queries per answer).
    pub naive_queries_per_request: f64,
    /// `hpa_bridge_prometheus_query_cache_hits_total` over the `cacheTtl: 0` burst.
    pub cache_hits_coalescing_only: u64,
    /// Wall time of the whole `cacheTtl: 0` burst.
    pub burst_ms: f64,
    /// The value every request answered.
    pub answer: u64,
}

/// The loopback Prometheus: a query counter and the address it listens on.
struct LoopbackPrometheus {
    url: String,
    queries: Arc<AtomicU64>,
}

impl LoopbackPrometheus {
    async fn start() -> Result<Self, BenchError> {
        let listener = TcpListener::bind("127.0.0.1:0").await.part(PART)?;
        let addr = listener.local_addr().part(PART)?;
        let queries = Arc::new(AtomicU64::new(0));
        let counter = queries.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, counter.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(LoopbackPrometheus {
            url: format!("http://{addr}"),
            queries,
        })
    }

    fn queries(&self) -> u64 {
        self.queries.load(Ordering::SeqCst)
    }
}

const PART: &str = "prometheus";

fn api_error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = json!({"status": "error", "errorType": "bad_data", "error": message});
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("static response parts")
}

async fn handle(
    req: Request<Incoming>,
    queries: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() != "/api/v1/query" {
        return Ok(api_error(StatusCode::NOT_FOUND, "not found"));
    }
    let query_string = req.uri().query().unwrap_or_default().to_owned();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(api_error(StatusCode::BAD_REQUEST, &e.to_string())),
    };
    let mut form = form_fields(&query_string);
    form.extend(form_fields(&String::from_utf8_lossy(&body)));
    let Some(query) = form.get("query") else {
        return Ok(api_error(StatusCode::BAD_REQUEST, "missing query"));
    };
    queries.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(QUERY_LATENCY).await;
    let time = match form.get("time").map(|t| t.parse::<f64>()) {
        Some(Ok(t)) => t,
        Some(Err(_)) => return Ok(api_error(StatusCode::BAD_REQUEST, "bad time")),
        None => SystemClock.now_ms() as f64 / 1000.0,
    };
    let body = match answer(query, time) {
        Ok(v) => v.to_string(),
        Err(e) => return Ok(api_error(StatusCode::BAD_REQUEST, &e)),
    };
    Ok(Response::builder()
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("static response parts"))
}

fn form_fields(s: &str) -> BTreeMap<String, String> {
    s.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let decode = |x: &str| {
                percent_encoding::percent_decode_str(&x.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(k), decode(v))
        })
        .collect()
}

/// The label matchers of the first `{...}` in a PromQL query: (name, operator, value).
fn matchers(query: &str) -> Result<Vec<(String, String, String)>, String> {
    let start = query.find('{').ok_or("no selector in the query")?;
    let mut out = Vec::new();
    let mut chars = query[start + 1..].chars().peekable();
    loop {
        while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
        if chars.next_if_eq(&'}').is_some() {
            return Ok(out);
        }
        let name: String =
            std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_'))
                .collect();
        let op: String = std::iter::from_fn(|| chars.next_if(|c| "=!~".contains(*c))).collect();
        if name.is_empty() || op.is_empty() || chars.next() != Some('"') {
            return Err(format!("unexpected matcher syntax in {query:?}"));
        }
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => value.push(chars.next().ok_or("unterminated string")?),
                Some('"') => break,
                Some(c) => value.push(c),
                None => return Err("unterminated string".into()),
            }
        }
        out.push((name, op, value));
    }
}

/// The API response for `query` evaluated at `time` (seconds).
fn answer(query: &str, time: f64) -> Result<Value, String> {
    let mut names: Vec<String> = Vec::new();
    let mut equal: BTreeMap<String, String> = BTreeMap::new();
    for (name, op, value) in matchers(query)? {
        match (name.as_str(), op.as_str()) {
            ("__name__", "=~") => names = value.split('|').map(str::to_owned).collect(),
            ("__name__", "=") => names = vec![value],
            (_, "=") => {
                equal.insert(name, value);
            }
            _ => {
                return Err(format!(
                    "matcher {name}{op} not supported by the bench server"
                ))
            }
        }
    }
    let matrix = query.trim_end().ends_with("ms]");
    let result: Vec<Value> = SERIES
        .iter()
        .filter(|(name, ..)| names.iter().any(|n| n == name))
        .filter(|_| equal.get("hpa_target_name").is_none_or(|w| w == "lobby"))
        .map(|&(name, pod, instance, v)| {
            let mut labels = equal.clone();
            labels.insert("__name__".into(), name.into());
            labels.insert("job".into(), "pods".into());
            labels.insert("instance".into(), instance.into());
            labels.insert("pod".into(), pod.into());
            let sample = |t: f64| json!([t, v.to_string()]);
            if matrix {
                json!({"metric": labels, "values": [sample(time - 1.0), sample(time)]})
            } else {
                json!({"metric": labels, "value": sample(time)})
            }
        })
        .collect();
    Ok(json!({
        "status": "success",
        "data": {
            "resultType": if matrix { "matrix" } else { "vector" },
            "result": result
        }
    }))
}

/// An adapter over a fresh `PrometheusSource` pointed at `url`, plus its self-metrics.
fn adapter(url: &str, cache_ttl: &str) -> Result<(Arc<Adapter>, Arc<SelfMetrics>), BenchError> {
    let config = Config::from_yaml(&format!(
        "source:\n  prometheus:\n    url: {url}\n    cacheTtl: {cache_ttl}\n"
    ))
    .part(PART)?;
    let metrics = Arc::new(SelfMetrics::new());
    let engine = EngineBuilder::new(config, Arc::new(SystemClock))
        .metrics(metrics.clone())
        .build()
        .part(PART)?;
    if engine.prometheus().is_none() {
        return Err(BenchError::part(PART, "config has no source.prometheus"));
    }
    Ok((engine.adapter().clone(), metrics))
}

/// `n` identical `answer` calls, each its own task so they run on every worker at once. Every
/// answer must be the same value.
async fn burst(adapter: &Arc<Adapter>, n: u32) -> Result<u64, BenchError> {
    let selector = LabelSelector::parse(SELECTOR).part(PART)?;
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let adapter = adapter.clone();
            let selector = selector.clone();
            tokio::spawn(async move {
                adapter
                    .answer_computed(&MetricQuery::external(METRIC, "default", selector.clone()))
                    .await
            })
        })
        .collect();
    let mut values = Vec::with_capacity(tasks.len());
    for t in tasks {
        let answer = t.await.part(PART)?.part(PART)?;
        match answer.outcome {
            Outcome::Value { value, .. } => values.push(value),
            Outcome::Refused { kind, .. } => {
                return Err(BenchError::part(
                    PART,
                    format!("{METRIC} refused ({kind:?}): {}", answer.reason),
                ))
            }
        }
    }
    values.dedup();
    match values.as_slice() {
        [v] => Ok(*v),
        _ => Err(BenchError::part(
            PART,
            format!("identical requests answered {values:?}"),
        )),
    }
}

async fn measure() -> Result<PrometheusResult, BenchError> {
    let n = CONCURRENT_REQUESTS;

    // One request alone: how many queries an answer needs when nothing is shared.
    let single = LoopbackPrometheus::start().await?;
    let (a, _) = adapter(&single.url, "0s")?;
    let answer = burst(&a, 1).await?;
    let queries_per_answer = single.queries();
    if queries_per_answer == 0 {
        return Err(BenchError::part(PART, "a single answer sent no query"));
    }

    // The burst with cacheTtl 0: only queries in flight are shared.
    let coalesce = LoopbackPrometheus::start().await?;
    let (a, metrics) = adapter(&coalesce.url, "0s")?;
    let started = Instant::now();
    let burst_answer = burst(&a, n).await?;
    let burst_ms = started.elapsed().as_secs_f64() * 1e3;
    let queries_coalescing_only = coalesce.queries();
    let cache_hits_coalescing_only = metrics.prometheus_cache_hits.get();

    // The burst with the cache on.
    let cached = LoopbackPrometheus::start().await?;
    let (a, _) = adapter(&cached.url, "10s")?;
    let cached_answer = burst(&a, n).await?;
    let queries_with_cache = cached.queries();

    if burst_answer != answer || cached_answer != answer {
        return Err(BenchError::part(
            PART,
            format!(
                "answers differ: single {answer}, burst {burst_answer}, cached {cached_answer}"
            ),
        ));
    }
    let naive_queries = queries_per_answer * u64::from(n);
    let per = |q: u64| q as f64 / f64::from(n);
    Ok(PrometheusResult {
        measured: true,
        note: format!(
            "{n} concurrent identical `{METRIC}` answers (`{SELECTOR}`) through a real \
             `PrometheusSource` against a loopback Prometheus HTTP API server holding each query \
             {} ms; one answer alone needs {queries_per_answer} PromQL queries, so a naive adapter \
             would send {naive_queries}. Received: {queries_coalescing_only} with cacheTtl 0 \
             (in-flight sharing only), {queries_with_cache} with cacheTtl 10s. \
             tests/integration/prometheus.rs asserts the same coalescing against a real \
             Prometheus 2.42.",
            QUERY_LATENCY.as_millis()
        ),
        concurrent_requests: n,
        query_latency_ms: QUERY_LATENCY.as_secs_f64() * 1e3,
        queries_per_answer,
        naive_queries,
        queries_coalescing_only,
        queries_with_cache,
        queries_per_request: Some(per(queries_coalescing_only)),
        queries_per_request_with_cache: per(queries_with_cache),
        naive_queries_per_request: per(naive_queries),
        cache_hits_coalescing_only,
        burst_ms,
        answer,
    })
}

/// Must be called outside any tokio runtime (see [`super::run`]).
pub fn run() -> Result<PrometheusResult, BenchError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .part(PART)?;
    let result = rt.block_on(measure())?;
    eprintln!(
        "bench: prometheus: {} queries per answer alone; {} requests sent {} queries (cacheTtl 0), {} (cacheTtl 10s)",
        result.queries_per_answer,
        result.concurrent_requests,
        result.queries_coalescing_only,
        result.queries_with_cache
    );
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_server_answers_the_sources_query_shapes() {
        let q = r#"{__name__=~"hpa_expect_replicas|hpa_expect_replicas_count",namespace="default",hpa_target_name="lobby"}[15000ms]"#;
        let v = answer(q, 1000.0).unwrap();
        assert_eq!(v["data"]["resultType"], "matrix");
        let result = v["data"]["result"].as_array().unwrap();
        assert_eq!(result.len(), 2);
        assert_eq!(result[0]["metric"]["namespace"], "default");
        assert_eq!(result[0]["values"][1][0], 1000.0);

        let q = r#"last_over_time({__name__=~"hpa_stateful_index",namespace="default",hpa_target_name="other"}[300000ms]) or label_replace(x, "a", "1", "", "")"#;
        let v = answer(q, 1000.0).unwrap();
        assert_eq!(v["data"]["resultType"], "vector");
        assert!(v["data"]["result"].as_array().unwrap().is_empty());

        assert!(answer(r#"{a!~"x\"y"}"#, 1.0).is_err());
        assert_eq!(
            matchers(r#"{a="x\"y",b=~"c|d"}"#).unwrap(),
            vec![
                ("a".into(), "=".into(), "x\"y".into()),
                ("b".into(), "=~".into(), "c|d".into())
            ]
        );
    }
}
