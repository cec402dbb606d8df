//! A Prometheus-compatible query source: the path for large clusters, where the adapter reads
//! the series Prometheus already scrapes instead of scraping every pod itself.
//!
//! The adapter never asks Prometheus for a verdict (no server-side `sum`, `max` or staleness):
//! it fetches the RAW series in scope and builds the same [`Evidence`] the scrape store builds,
//! so the same `policy` functions apply max-not-sum, retention and freshness
//! (docs/hpa-behaviour.md §1.2, §1.6, §4.1). Per scope it sends two queries, at one evaluation time:
//!
//! 1. **fresh** — `SEL[staleAfter]`, a range selector returning raw samples with their own
//!    timestamps. A series with a sample in that window is fresh; its newest sample gives the
//!    value and `observed_at`. `timestamp(SEL)` would give the same timestamps, but it drops the
//!    metric name (two aliases with the same labels then make Prometheus fail the whole query
//!    with "vector cannot contain metrics with the same labelset"), and Prometheus's 5-minute
//!    lookback would keep a series "current" long after `staleAfter`; the raw window avoids both
//!    and is a handful of samples per series.
//! 2. **retained** — `last_over_time(SEL[retainFor])`, which keeps the metric name and skips
//!    Prometheus staleness markers: every series seen within `retainFor` with its last value.
//!    A series here but not in (1) is stale. Joined by `or` in the same query, the series that
//!    are *gone*: their target's `up` is 1 (it is scraped fine) yet Prometheus no longer has
//!    them current, i.e. the exporter stopped exporting them. Those are `present = false`, as
//!    the scrape store marks a series missing from a successful scrape; the rest of the stale
//!    ones belong to failing targets (or carry an old explicit timestamp) and stay present, so
//!    a stale series that might be higher blocks the answer instead of vanishing.
//!
//! Retention: the scrape store keeps a target's last valid values while the target exists.
//! Prometheus cannot say which pods still exist. With Kubernetes discovery (`scrape.kubernetes`
//! beside `source.prometheus`) a pod set ([`Cluster::pods`]) says so: series of deleted pods stop counting at
//! once, every existing pod (Running or not) keeps its last value within `retainFor`, series
//! are attributed to their pod's workload, and a Running pod of an observed workload with no
//! series yet makes the evidence incomplete, as a never-scraped pod does in the scrape store.
//! Without a pod set the last value within `retainFor` stands in for the retained value.
//! Trade-off: a pod deleted less than `retainFor` ago still holds the floor until `retainFor`
//! passes; a pod failing for longer than `retainFor` loses its protection. The last value is
//! used, not `max_over_time`: the index is 0 while a pod is not Ready (docs/hpa-behaviour.md §4.1), so
//! the newest value is the truth and a max would hold a released ordinal for `retainFor` (and
//! disagree with the scrape source).
//!
//! Push-style series with explicit timestamps (Pushgateway with `honor_timestamps`, or any
//! exporter writing timestamps): freshness is the sample timestamp Prometheus stores, nothing
//! else. Prometheus writes no staleness markers for them, so such a series stays current in
//! Prometheus for 5 minutes; here it is stale once its timestamp is older than `staleAfter`,
//! and it stays present (it is still exported), so a pushed value that is never updated
//! refuses rather than serves — the safe answer.
//!
//! Identical queries are coalesced and cached for `cacheTtl`: one in-flight future per query
//! text is shared by every request that needs it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde::{Deserialize, Serialize};

use crate::source::scrape::error_chain;
use crate::source::{EvidenceSource, SourceError, SourceStatus};
use hpa_bridge_rules::clock::{rfc3339, Clock, Millis};
use hpa_bridge_rules::cluster::Cluster;
pub use hpa_bridge_rules::cluster::PodFacts;
use hpa_bridge_rules::config::PrometheusSourceConfig;
use hpa_bridge_rules::evidence::{
    invalid_reason, Evidence, Observation, Read, Scope, TargetId, UnknownTarget,
};
use hpa_bridge_rules::selector::{is_prometheus_label_name, LabelSelector, Operator, Requirement};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// The name in `SourceError` messages, so a refusal says which source failed.
const SOURCE_NAME: &str = "Prometheus";
/// Marks the series of the `retained` query that are gone from a healthy target.
const GONE_LABEL: &str = "__hpa_bridge_gone__";
/// Carries `__name__` through `unless`, which ignores the metric name when matching.
const NAME_COPY_LABEL: &str = "__hpa_bridge_name__";

mod client;
mod evidence;
mod promql;
mod query;
mod response;

pub use client::*;
pub use evidence::*;
pub use promql::*;
pub use query::*;
pub use response::*;

#[derive(Clone, Debug, Default)]
struct SourceHealth {
    last_success_ms: Option<Millis>,
    last_error: Option<String>,
    last_error_ms: Option<Millis>,
    consecutive_failures: u32,
    version: Option<String>,
}

/// The Prometheus source's health as `/status` shows it (under `"kind": "prometheus"`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusStatus {
    pub url: String,
    pub version: Option<String>,
    pub healthy: bool,
    pub last_success: Option<String>,
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    pub consecutive_failures: u32,
    pub cache_ttl_seconds: f64,
    pub retain_for_seconds: f64,
}

type SharedQuery = Shared<BoxFuture<'static, Result<Arc<ScopeSamples>, PromQueryError>>>;

struct CacheEntry {
    /// When the query started, on the monotonic clock: how long a result is reused is a
    /// duration, which a step of the wall clock must not stretch.
    started_mono: Millis,
    query: SharedQuery,
}

/// What every query needs; shared with the in-flight futures, which outlive the request that
/// started them.
struct Inner {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `scheme://authority/path` without a trailing slash.
    base: String,
    /// For `/status` and messages: the base URL without any user info.
    display_url: String,
    timeout: Duration,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    bearer_token_file: Option<String>,
    max_body_bytes: u64,
    metrics: Arc<SelfMetrics>,
    clock: Arc<dyn Clock>,
    health: Mutex<SourceHealth>,
}

/// Evidence from a Prometheus-compatible HTTP API (`/api/v1/query`).
pub struct PrometheusSource {
    inner: Arc<Inner>,
    cache_ttl_ms: Millis,
    retain_for_ms: Millis,
    stale_after_ms: Millis,
    cache: Mutex<HashMap<String, CacheEntry>>,
    pod_set: RwLock<Option<(Arc<dyn Cluster>, String)>>,
}

impl PrometheusSource {
    pub fn new(
        cfg: &PrometheusSourceConfig,
        stale_after: Duration,
        max_body_bytes: u64,
        clock: Arc<dyn Clock>,
        metrics: Arc<SelfMetrics>,
    ) -> Result<Self, PrometheusSetupError> {
        let uri: http::Uri = cfg.url.parse().map_err(|e| PrometheusSetupError::Url {
            url: hpa_bridge_rules::redaction::redact_url(&cfg.url).into_owned(),
            message: format!("{e}"),
        })?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(PrometheusSetupError::Url {
                url: hpa_bridge_rules::redaction::redact_url(&cfg.url).into_owned(),
                message: "needs a scheme and a host".into(),
            });
        };
        let path = uri.path().trim_end_matches('/');
        let base = format!("{scheme}://{authority}{path}");
        let host = authority.as_str().rsplit('@').next().unwrap_or_default();
        let display_url = format!("{scheme}://{host}{path}");
        let mut headers = Vec::new();
        for (k, v) in &cfg.headers {
            let name = http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| PrometheusSetupError::Header(format!("{k:?}: {e}")))?;
            let mut value = http::HeaderValue::from_str(v)
                .map_err(|e| PrometheusSetupError::Header(format!("value of {k:?}: {e}")))?;
            value.set_sensitive(true);
            headers.push((name, value));
        }
        let client = build_client(cfg)?;
        Ok(PrometheusSource {
            inner: Arc::new(Inner {
                client,
                base,
                display_url,
                timeout: cfg.timeout.0,
                headers,
                bearer_token_file: cfg.bearer_token_file.clone(),
                max_body_bytes,
                metrics,
                clock,
                health: Mutex::new(SourceHealth::default()),
            }),
            cache_ttl_ms: cfg.cache_ttl.0.as_millis() as Millis,
            retain_for_ms: cfg.retain_for.0.as_millis() as Millis,
            stale_after_ms: stale_after.as_millis() as Millis,
            cache: Mutex::new(HashMap::new()),
            pod_set: RwLock::new(None),
        })
    }

    /// Count only series of pods that exist (from discovery); `pod_label` names the label
    /// holding the pod name.
    pub fn set_pod_set(&self, pods: Arc<dyn Cluster>, pod_label: &str) {
        *self.pod_set.write().unwrap_or_else(|e| e.into_inner()) = Some((pods, pod_label.into()));
    }

    pub fn url(&self) -> &str {
        &self.inner.display_url
    }

    /// Ask `/api/v1/status/buildinfo` once, for the log and `/status`. Readiness does not wait
    /// for it: see `main.rs`.
    pub async fn probe(&self) -> Result<String, PromQueryError> {
        let inner = self.inner.clone();
        let result = tokio::time::timeout(inner.timeout, inner.buildinfo())
            .await
            .unwrap_or(Err(PromQueryError::Timeout(inner.timeout)));
        let mut health = inner.health.lock().unwrap_or_else(|e| e.into_inner());
        match &result {
            Ok(version) => health.version = Some(version.clone()),
            Err(e) => {
                health.last_error = Some(e.to_string());
                health.last_error_ms = Some(inner.clock.now_ms());
            }
        }
        result
    }

    /// The samples for one pair of queries: from the cache, from an identical query in flight,
    /// or from a new one.
    async fn samples(&self, queries: &ScopeQueries) -> Result<Arc<ScopeSamples>, PromQueryError> {
        let key = format!("{}\n{}", queries.fresh, queries.retained);
        // Sample times are the server's wall-clock timestamps, so the query is evaluated, and
        // its samples aged (policy::observation), on the wall clock; only the reuse of a
        // result is timed on the monotonic one.
        let now = self.inner.clock.now_ms();
        let mono = self.inner.clock.mono_ms();
        let shared = {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let usable = |e: &CacheEntry| match e.query.peek() {
                None => true,
                Some(Ok(_)) => mono - e.started_mono < self.cache_ttl_ms,
                // Failures are shared while in flight only: the next request tries again.
                Some(Err(_)) => false,
            };
            match cache.get(&key) {
                Some(entry) if usable(entry) => {
                    self.inner.metrics.prometheus_cache_hits.inc();
                    entry.query.clone()
                }
                _ => {
                    cache.retain(|_, e| usable(e));
                    let inner = self.inner.clone();
                    let queries = queries.clone();
                    let query = async move {
                        let (fresh, retained) = futures::join!(
                            inner.query(&queries.fresh, now, ResultType::Matrix),
                            inner.query(&queries.retained, now, ResultType::Vector),
                        );
                        Ok(Arc::new(ScopeSamples {
                            eval_ms: now,
                            fresh: fresh?,
                            retained: retained?,
                        }))
                    }
                    .boxed()
                    .shared();
                    cache.insert(
                        key,
                        CacheEntry {
                            started_mono: mono,
                            query: query.clone(),
                        },
                    );
                    query
                }
            }
        };
        shared.await
    }
}

impl Inner {
    async fn query(
        &self,
        promql: &str,
        eval_ms: Millis,
        expect: ResultType,
    ) -> Result<Vec<PromSeries>, PromQueryError> {
        let started = Instant::now();
        let result = tokio::time::timeout(self.timeout, self.send_query(promql, eval_ms, expect))
            .await
            .unwrap_or(Err(PromQueryError::Timeout(self.timeout)));
        let outcome = match &result {
            Ok(_) => "success",
            Err(e) => e.outcome(),
        };
        self.metrics
            .prometheus_query(outcome, started.elapsed().as_secs_f64());
        let now = self.clock.now_ms();
        let mut health = self.health.lock().unwrap_or_else(|e| e.into_inner());
        match &result {
            Ok(series) => {
                tracing::debug!(query = promql, series = series.len(), "prometheus query");
                health.last_success_ms = Some(now);
                health.consecutive_failures = 0;
            }
            Err(e) => {
                tracing::warn!(url = %self.display_url, error = %e, outcome, "prometheus query failed");
                health.last_error = Some(e.to_string());
                health.last_error_ms = Some(now);
                health.consecutive_failures = health.consecutive_failures.saturating_add(1);
            }
        }
        result
    }

    fn request(
        &self,
        method: http::Method,
        path: &str,
        body: String,
    ) -> Result<http::Request<Full<Bytes>>, PromQueryError> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(http::header::ACCEPT, "application/json");
        if !body.is_empty() {
            req = req.header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            );
        }
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        // Re-read on every query so a rotated (projected service account) token is picked up.
        if let Some(path) = &self.bearer_token_file {
            let token = std::fs::read_to_string(path).map_err(|e| PromQueryError::Token {
                path: path.clone(),
                error: e.to_string(),
            })?;
            let mut value = http::HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                .map_err(|_| PromQueryError::Token {
                    path: path.clone(),
                    error: "the token is not a valid header value".into(),
                })?;
            value.set_sensitive(true);
            req = req.header(http::header::AUTHORIZATION, value);
        }
        req.body(Full::new(Bytes::from(body)))
            .map_err(|e| PromQueryError::Request(e.to_string()))
    }

    async fn fetch(&self, req: http::Request<Full<Bytes>>) -> Result<Bytes, PromQueryError> {
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| PromQueryError::Request(error_chain(&e)))?;
        let status = resp.status();
        let limit = self.max_body_bytes;
        let body = Limited::new(resp.into_body(), limit as usize)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    PromQueryError::TooLarge { limit }
                } else {
                    PromQueryError::Request(format!("reading the response: {e}"))
                }
            })?
            .to_bytes();
        if !status.is_success() {
            // Prometheus explains 400/422/503 in its JSON envelope; proxies send text or HTML.
            let detail = match serde_json::from_slice::<ApiEnvelope>(&body) {
                Ok(env) if env.error.is_some() => format!(
                    "{}: {}",
                    env.error_type.unwrap_or_else(|| "error".into()),
                    env.error.unwrap_or_default()
                ),
                _ => snippet(&body),
            };
            return Err(PromQueryError::Status {
                status: status.as_u16(),
                detail,
            });
        }
        Ok(body)
    }

    async fn send_query(
        &self,
        promql: &str,
        eval_ms: Millis,
        expect: ResultType,
    ) -> Result<Vec<PromSeries>, PromQueryError> {
        let body = [
            form_field("query", promql),
            form_field("time", &prom_time(eval_ms)),
            form_field("timeout", &format!("{}ms", self.timeout.as_millis())),
            // VictoriaMetrics moves an instant query whose `time` lies within its
            // `-search.latencyOffset` (30 s by default) of now back to now - 30 s unless
            // `nocache=1`: a series that stopped being exported would look current, and a value
            // changed since would look unchanged, for 30 s. Prometheus, Thanos and Mimir ignore
            // the parameter. See docs/prometheus-source.md.
            "nocache=1".to_string(),
        ]
        .join("&");
        let req = self.request(http::Method::POST, "/api/v1/query", body)?;
        let body = self.fetch(req).await?;
        parse_response(&body, expect)
    }

    async fn buildinfo(&self) -> Result<String, PromQueryError> {
        let req = self.request(http::Method::GET, "/api/v1/status/buildinfo", String::new())?;
        let body = self.fetch(req).await?;
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
            PromQueryError::NotJson(format!("{e} (body starts {:?})", snippet(&body)))
        })?;
        Ok(v["data"]["version"]
            .as_str()
            .unwrap_or("unknown")
            .to_string())
    }
}

impl EvidenceSource for PrometheusSource {
    /// Prometheus keeps no digests and no index of a label here: every read lists every
    /// series in scope, with the scope-wide part (it reads no parts: `read_together`, which
    /// asks for them, is not offered).
    fn read<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        _read: Read<'a>,
        now: Millis,
    ) -> BoxFuture<'a, Result<Evidence, SourceError>> {
        Box::pin(async move {
            let fail = |message: String| SourceError {
                source_name: SOURCE_NAME,
                message,
            };
            let queries = scope_queries(scope, self.stale_after_ms, self.retain_for_ms)
                .map_err(|e| fail(format!("cannot build the query: {e}")))?;
            let Some(queries) = queries else {
                return Ok(Evidence::default());
            };
            let samples = self
                .samples(&queries)
                .await
                .map_err(|e| fail(format!("query to {} failed: {e}", self.inner.display_url)))?;
            let pod_set = self
                .pod_set
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let pods = pod_set
                .as_ref()
                .and_then(|(set, label)| set.pods(scope.namespace).map(|p| (p, label)));
            let filter = pods.as_ref().map(|(pods, label)| PodFilter {
                label: label.as_str(),
                namespace: scope.namespace,
                pods,
            });
            Ok(evidence_from(&samples, self.stale_after_ms, now, filter))
        })
    }

    fn status(&self) -> Option<SourceStatus> {
        let h = self
            .inner
            .health
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let healthy = match (h.last_success_ms, h.last_error_ms) {
            (Some(ok), Some(err)) => ok > err,
            (Some(_), None) => true,
            _ => false,
        };
        Some(SourceStatus::Prometheus(PrometheusStatus {
            url: self.inner.display_url.clone(),
            version: h.version,
            healthy,
            last_success: h.last_success_ms.map(rfc3339),
            last_error: h.last_error,
            last_error_at: h.last_error_ms.map(rfc3339),
            consecutive_failures: h.consecutive_failures,
            cache_ttl_seconds: self.cache_ttl_ms as f64 / 1000.0,
            retain_for_seconds: self.retain_for_ms as f64 / 1000.0,
        }))
    }
}
