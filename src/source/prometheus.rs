//! A Prometheus-compatible query source: the path for large clusters, where the adapter reads
//! the series Prometheus already scrapes instead of scraping every pod itself.
//!
//! The adapter never asks Prometheus for a verdict (no server-side `sum`, `max` or staleness):
//! it fetches the RAW series in scope and builds the same [`Evidence`] the scrape store builds,
//! so the same `policy` functions apply max-not-sum, retention and freshness
//! (REFERENCE.md §1.2, §1.6, §4.1). Per scope it sends two queries, at one evaluation time:
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
//! beside `source.prometheus`) a [`PodSet`] says so: series of deleted pods stop counting at
//! once, every existing pod (Running or not) keeps its last value within `retainFor`, series
//! are attributed to their pod's workload, and a Running pod of an observed workload with no
//! series yet makes the evidence incomplete, as a never-scraped pod does in the scrape store.
//! Without a pod set the last value within `retainFor` stands in for the retained value.
//! Trade-off: a pod deleted less than `retainFor` ago still holds the floor until `retainFor`
//! passes; a pod failing for longer than `retainFor` loses its protection. The last value is
//! used, not `max_over_time`: the index is 0 while a pod is not Ready (REFERENCE.md §4.1), so
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
use serde::Deserialize;
use serde_json::json;

use super::{EvidenceSource, SourceError};
use crate::clock::{rfc3339, Clock, Millis};
use crate::config::PrometheusSourceConfig;
use crate::selector::{
    is_prometheus_label_name, promql_quote, re2_escape, LabelSelector, Operator, Requirement,
};
use crate::source::scrape::error_chain;
use crate::store::{
    invalid_reason, Evidence, Observation, Scope, TargetId, UnknownTarget, WorkloadRef,
};
use crate::telemetry::SelfMetrics;

/// The name in `SourceError` messages, so a refusal says which source failed.
const SOURCE_NAME: &str = "Prometheus";
/// Marks the series of the `retained` query that are gone from a healthy target.
const GONE_LABEL: &str = "__hpa_bridge_gone__";
/// Carries `__name__` through `unless`, which ignores the metric name when matching.
const NAME_COPY_LABEL: &str = "__hpa_bridge_name__";

/// Which pods exist right now, from the Kubernetes API. Prometheus keeps a series for as long
/// as it is asked to look back and cannot tell a deleted pod from a failing one; with a pod set,
/// series of deleted pods stop counting at once and `retainFor` only bounds how far back
/// Prometheus is read. Discovery plugs in here.
pub trait PodSet: Send + Sync {
    /// Every pod object that exists in `namespace`, whatever its phase, by name; `None` while
    /// unknown (then every series within `retainFor` counts and no pod is reported unknown).
    fn pods(&self, namespace: &str) -> Option<BTreeMap<String, PodFacts>>;
}

/// What Kubernetes says about one existing pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// `status.phase` is Running: only such a pod has an exporter Prometheus could scrape, so
    /// only it makes the evidence incomplete while Prometheus has no series for it.
    pub running: bool,
    /// The owning workload (a ReplicaSet's pods resolve to their Deployment).
    pub workload: Option<WorkloadRef>,
}

/// How one query to Prometheus failed. The text reaches the refusal, `/status` and the log.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PromQueryError {
    #[error("timed out after {0:?} (source.prometheus.timeout)")]
    Timeout(Duration),
    #[error("request failed: {0}")]
    Request(String),
    #[error("HTTP status {status}: {detail}")]
    Status { status: u16, detail: String },
    #[error("query failed ({error_type}): {error}")]
    Api { error_type: String, error: String },
    #[error("response is not Prometheus API JSON: {0}")]
    NotJson(String),
    #[error("expected resultType {expected:?}, got {got:?}")]
    ResultType { expected: &'static str, got: String },
    #[error("malformed result: {0}")]
    Malformed(String),
    /// Prometheus (or Thanos, Mimir...) answered but says the data may be incomplete.
    #[error("partial result, Prometheus returned warnings: {}", .0.join("; "))]
    Warnings(Vec<String>),
    #[error("response exceeds {limit} bytes (scrape.maxBodyBytes)")]
    TooLarge { limit: u64 },
    #[error("cannot read source.prometheus.bearerTokenFile {path}: {error}")]
    Token { path: String, error: String },
}

impl PromQueryError {
    /// A low-cardinality label for `hpa_bridge_prometheus_queries_total{outcome}`.
    pub fn outcome(&self) -> &'static str {
        match self {
            PromQueryError::Timeout(_) => "timeout",
            PromQueryError::Request(_) => "connect",
            PromQueryError::Status { .. } => "http_status",
            PromQueryError::Api { .. } => "api_error",
            PromQueryError::NotJson(_)
            | PromQueryError::ResultType { .. }
            | PromQueryError::Malformed(_) => "bad_response",
            PromQueryError::Warnings(_) => "warnings",
            PromQueryError::TooLarge { .. } => "too_large",
            PromQueryError::Token { .. } => "token",
        }
    }
}

/// The configuration cannot be turned into a working client.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusSetupError {
    #[error("source.prometheus.url {url:?}: {message}")]
    Url { url: String, message: String },
    #[error("source.prometheus.headers: {0}")]
    Header(String),
    #[error("source.prometheus.tls.caFile {path}: {message}")]
    CaFile { path: String, message: String },
    #[error("source.prometheus.tls: {0}")]
    Tls(String),
}

/// One series as Prometheus returned it: all labels including `__name__`, and its samples
/// (one for a vector, the raw samples for a matrix), oldest first.
#[derive(Clone, Debug, PartialEq)]
pub struct PromSeries {
    pub labels: BTreeMap<String, String>,
    pub samples: Vec<(Millis, f64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultType {
    Vector,
    Matrix,
}

impl ResultType {
    fn as_str(self) -> &'static str {
        match self {
            ResultType::Vector => "vector",
            ResultType::Matrix => "matrix",
        }
    }
}

#[derive(Deserialize)]
struct ApiEnvelope {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct ApiData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct VectorItem {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

#[derive(Deserialize)]
struct MatrixItem {
    metric: BTreeMap<String, String>,
    values: Vec<(f64, String)>,
}

/// Prometheus renders sample values as strings, with `NaN`, `+Inf` and `-Inf` spelled out.
fn parse_value(s: &str) -> Result<f64, PromQueryError> {
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => s
            .parse::<f64>()
            .map_err(|_| PromQueryError::Malformed(format!("sample value {s:?} is not a number"))),
    }
}

fn parse_time(t: f64) -> Result<Millis, PromQueryError> {
    if !t.is_finite() || t < 0.0 {
        return Err(PromQueryError::Malformed(format!(
            "sample timestamp {t} is not a valid time"
        )));
    }
    Ok((t * 1000.0).round() as Millis)
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if body.len() > 200 {
        format!("{}...", text.trim())
    } else {
        text.trim().to_string()
    }
}

/// Parses a `/api/v1/query` response body. Anything but a clean success of the expected type
/// is an error: a partial or surprising answer must never become an empty success.
pub fn parse_response(body: &[u8], expect: ResultType) -> Result<Vec<PromSeries>, PromQueryError> {
    let env: ApiEnvelope = serde_json::from_slice(body)
        .map_err(|e| PromQueryError::NotJson(format!("{e} (body starts {:?})", snippet(body))))?;
    if env.status != "success" {
        return Err(PromQueryError::Api {
            error_type: env.error_type.unwrap_or_else(|| "unknown".into()),
            error: env
                .error
                .unwrap_or_else(|| format!("status {:?} without an error message", env.status)),
        });
    }
    if !env.warnings.is_empty() {
        return Err(PromQueryError::Warnings(env.warnings));
    }
    let data = env
        .data
        .ok_or_else(|| PromQueryError::Malformed("success without data".into()))?;
    if data.result_type != expect.as_str() {
        return Err(PromQueryError::ResultType {
            expected: expect.as_str(),
            got: data.result_type,
        });
    }
    let bad = |e: serde_json::Error| {
        PromQueryError::Malformed(format!("{} result: {e}", expect.as_str()))
    };
    match expect {
        ResultType::Vector => {
            let items: Vec<VectorItem> = serde_json::from_value(data.result).map_err(bad)?;
            items
                .into_iter()
                .map(|i| {
                    Ok(PromSeries {
                        labels: i.metric,
                        samples: vec![(parse_time(i.value.0)?, parse_value(&i.value.1)?)],
                    })
                })
                .collect()
        }
        ResultType::Matrix => {
            let items: Vec<MatrixItem> = serde_json::from_value(data.result).map_err(bad)?;
            items
                .into_iter()
                .map(|i| {
                    let mut samples = i
                        .values
                        .iter()
                        .map(|(t, v)| Ok((parse_time(*t)?, parse_value(v)?)))
                        .collect::<Result<Vec<_>, PromQueryError>>()?;
                    samples.sort_by_key(|(t, _)| *t);
                    Ok(PromSeries {
                        labels: i.metric,
                        samples,
                    })
                })
                .collect()
        }
    }
}

/// The two PromQL queries for one scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeQueries {
    /// Raw samples within `staleAfter`: a matrix.
    pub fresh: String,
    /// The last value of every series within `retainFor`, plus the gone markers: a vector.
    pub retained: String,
}

fn is_metric_name(s: &str) -> bool {
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
        .and_then(|s| s.promql_matchers())
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

/// The result of one scope's queries, evaluated at `eval_ms`.
#[derive(Clone, Debug)]
pub struct ScopeSamples {
    pub eval_ms: Millis,
    pub fresh: Vec<PromSeries>,
    pub retained: Vec<PromSeries>,
}

fn target_of(labels: &BTreeMap<String, String>) -> TargetId {
    match (labels.get("job"), labels.get("instance")) {
        (Some(job), Some(instance)) => TargetId(format!("{job}/{instance}").into()),
        _ => {
            let text = labels
                .iter()
                .filter(|(k, _)| k.as_str() != "__name__")
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join(",");
            TargetId(format!("{{{text}}}").into())
        }
    }
}

fn valid(v: f64) -> Option<u64> {
    invalid_reason(v).is_none().then_some(v as u64)
}

/// Which pods exist, for filtering series by their pod label.
pub struct PodFilter<'a> {
    pub label: &'a str,
    /// The namespace the pods live in (the scope's), for the ids of unknown pods.
    pub namespace: &'a str,
    pub pods: &'a BTreeMap<String, PodFacts>,
}

/// The raw samples of a fresh series without trailing staleness markers. Prometheus leaves the
/// markers out of range results; VictoriaMetrics returns them as `NaN` samples, so a series
/// whose target just failed would look fresh with a NaN value instead of stale. JSON cannot
/// tell a marker from an exported NaN, but `last_over_time` skips markers and not exported
/// NaNs: when the series' retained value (same evaluation time) is a number, the NaNs after
/// its last number are markers.
fn without_staleness_markers<'s>(
    series: &'s PromSeries,
    retained: &BTreeMap<BTreeMap<String, String>, f64>,
) -> &'s [(Millis, f64)] {
    let mut samples = series.samples.as_slice();
    if retained.get(&series.labels).is_some_and(|v| !v.is_nan()) {
        while let Some((&(_, v), rest)) = samples.split_last() {
            if !v.is_nan() {
                break;
            }
            samples = rest;
        }
    }
    samples
}

/// Turns one scope's query results into the evidence the scrape store would give for the
/// same series. Pure: `stale_after_ms` is the freshness window the fresh query used.
pub fn evidence_from(
    samples: &ScopeSamples,
    stale_after_ms: Millis,
    pods: Option<PodFilter<'_>>,
) -> Evidence {
    let mut gone: HashSet<BTreeMap<String, String>> = HashSet::new();
    let mut retained: BTreeMap<BTreeMap<String, String>, f64> = BTreeMap::new();
    for s in &samples.retained {
        let Some(&(_, v)) = s.samples.last() else {
            continue;
        };
        if s.labels.contains_key(GONE_LABEL) {
            let mut key = s.labels.clone();
            key.remove(GONE_LABEL);
            key.remove(NAME_COPY_LABEL);
            gone.insert(key);
        } else {
            retained.insert(s.labels.clone(), v);
        }
    }
    let fresh: BTreeMap<&BTreeMap<String, String>, &[(Millis, f64)]> = samples
        .fresh
        .iter()
        .map(|s| (&s.labels, without_staleness_markers(s, &retained)))
        .filter(|(_, samples)| !samples.is_empty())
        .collect();
    let keys: BTreeSet<&BTreeMap<String, String>> =
        retained.keys().chain(fresh.keys().copied()).collect();
    let mut ev = Evidence::default();
    for key in keys {
        let Some(name) = key.get("__name__") else {
            continue;
        };
        if let Some(filter) = &pods {
            if let Some(pod) = key.get(filter.label) {
                if !filter.pods.contains_key(pod) {
                    continue;
                }
            }
        }
        let mut labels = key.clone();
        labels.remove("__name__");
        let target = target_of(key);
        let observation = match fresh.get(key) {
            Some(series) => {
                let &(at, value) = series.last().expect("non-empty");
                let last_valid = series
                    .iter()
                    .rev()
                    .find_map(|&(t, v)| valid(v).map(|v| (v, t)));
                Observation {
                    target,
                    series: name.clone(),
                    labels: Arc::new(labels),
                    value,
                    observed_at_ms: at,
                    last_valid,
                    present: true,
                    target_failing: false,
                }
            }
            None => {
                let value = retained.get(key).copied().unwrap_or(f64::NAN);
                // No sample within staleAfter: Prometheus cannot cheaply say how old the last
                // one is (see the module docs), so the age is the lower bound, just past the
                // window. The policy only needs to know that it is stale.
                let at = samples.eval_ms - stale_after_ms - 1;
                let present = !gone.contains(key);
                Observation {
                    target,
                    series: name.clone(),
                    labels: Arc::new(labels),
                    value,
                    observed_at_ms: at,
                    last_valid: valid(value).map(|v| (v, at)),
                    present,
                    target_failing: present,
                }
            }
        };
        ev.observations.push(observation);
    }
    ev.observations
        .sort_by(|a, b| (&a.target, &a.series, &a.labels).cmp(&(&b.target, &b.series, &b.labels)));
    if let Some(filter) = &pods {
        attribute_to_pods(&mut ev, filter);
    }
    ev
}

/// With Kubernetes: name the workloads behind the observations (for `spec.replicas` and
/// `ordinals.start`), and report each Running pod of those workloads that has no in-scope
/// series in Prometheus as unknown, as the scrape store reports a pod it has never scraped
/// successfully: the floor is incomplete until Prometheus has seen it (REFERENCE.md §4.1).
/// A pod of another workload cannot hold this workload's state, so it is not counted; with no
/// workload observed at all nothing is, since Prometheus cannot tell a pod that never exported
/// the series from one it never scraped.
fn attribute_to_pods(ev: &mut Evidence, filter: &PodFilter<'_>) {
    let observed: BTreeSet<&str> = ev
        .observations
        .iter()
        .filter_map(|o| o.labels.get(filter.label))
        .map(String::as_str)
        .collect();
    for pod in &observed {
        if let Some(w) = filter.pods.get(*pod).and_then(|f| f.workload.as_ref()) {
            if !ev.workloads.contains(w) {
                ev.workloads.push(w.clone());
            }
        }
    }
    for (name, facts) in filter.pods {
        let in_scope = facts
            .workload
            .as_ref()
            .is_some_and(|w| ev.workloads.contains(w));
        if facts.running && in_scope && !observed.contains(name.as_str()) {
            ev.unknown_targets.push(UnknownTarget {
                target: TargetId(format!("{}/{name}", filter.namespace).into()),
                last_error: Some(
                    "Kubernetes reports the pod Running, but Prometheus has no in-scope series \
                     for it within retainFor"
                        .into(),
                ),
            });
        }
    }
}

#[derive(Clone, Debug, Default)]
struct SourceHealth {
    last_success_ms: Option<Millis>,
    last_error: Option<String>,
    last_error_ms: Option<Millis>,
    consecutive_failures: u32,
    version: Option<String>,
}

type SharedQuery = Shared<BoxFuture<'static, Result<Arc<ScopeSamples>, PromQueryError>>>;

struct CacheEntry {
    started_ms: Millis,
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
    pod_set: RwLock<Option<(Arc<dyn PodSet>, String)>>,
}

/// `insecureSkipVerify: true`. Signatures are still checked so the handshake is well-formed;
/// the certificate chain and name are not.
#[derive(Debug)]
struct AcceptAnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn build_client(
    cfg: &PrometheusSourceConfig,
) -> Result<Client<HttpsConnector<HttpConnector>, Full<Bytes>>, PrometheusSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls_err = |e: rustls::Error| PrometheusSetupError::Tls(e.to_string());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = if cfg.tls.insecure_skip_verify {
        let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(provider)))
            .with_no_client_auth();
        builder.with_tls_config(tls)
    } else if let Some(path) = &cfg.tls.ca_file {
        let ca_err = |message: String| PrometheusSetupError::CaFile {
            path: path.clone(),
            message,
        };
        let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert = cert.map_err(|e| ca_err(e.to_string()))?;
            roots.add(cert).map_err(|e| ca_err(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(ca_err("no PEM certificates found".into()));
        }
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        builder.with_tls_config(tls)
    } else {
        builder
            .with_provider_and_native_roots(provider)
            .map_err(|e| PrometheusSetupError::Tls(format!("loading system roots: {e}")))?
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(cfg.timeout.0));
    http.set_nodelay(true);
    let connector = builder.https_or_http().enable_http1().wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector))
}

const FORM: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn form_field(key: &str, value: &str) -> String {
    format!(
        "{key}={}",
        percent_encoding::utf8_percent_encode(value, FORM)
    )
}

/// Seconds with millisecond precision, as `/api/v1/query?time=` takes them.
fn prom_time(ms: Millis) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
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
            url: cfg.url.clone(),
            message: format!("{e}"),
        })?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(PrometheusSetupError::Url {
                url: cfg.url.clone(),
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
    pub fn set_pod_set(&self, pods: Arc<dyn PodSet>, pod_label: &str) {
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
        let now = self.inner.clock.now_ms();
        let shared = {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let usable = |e: &CacheEntry| match e.query.peek() {
                None => true,
                Some(Ok(_)) => now - e.started_ms < self.cache_ttl_ms,
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
                            started_ms: now,
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
            // the parameter. See README, "Large clusters".
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
    fn evidence<'a>(
        &'a self,
        scope: &'a Scope<'a>,
        _now: Millis,
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
            Ok(evidence_from(&samples, self.stale_after_ms, filter))
        })
    }

    fn status(&self) -> Option<serde_json::Value> {
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
        Some(json!({
            "kind": "prometheus",
            "url": self.inner.display_url,
            "version": h.version,
            "healthy": healthy,
            "lastSuccess": h.last_success_ms.map(rfc3339),
            "lastError": h.last_error,
            "lastErrorAt": h.last_error_ms.map(rfc3339),
            "consecutiveFailures": h.consecutive_failures,
            "cacheTtlSeconds": self.cache_ttl_ms as f64 / 1000.0,
            "retainForSeconds": self.retain_for_ms as f64 / 1000.0,
        }))
    }
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

    #[test]
    fn responses_other_than_a_clean_success_are_precise_errors() {
        let err = |body: &str, t| parse_response(body.as_bytes(), t).unwrap_err();
        assert_eq!(
            err(
                r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
                ResultType::Vector
            ),
            PromQueryError::Api {
                error_type: "bad_data".into(),
                error: "parse error".into()
            }
        );
        assert!(
            matches!(err("<html>proxy</html>", ResultType::Vector), PromQueryError::NotJson(m) if m.contains("<html>"))
        );
        assert_eq!(
            err(
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}"#,
                ResultType::Vector
            ),
            PromQueryError::ResultType {
                expected: "vector",
                got: "scalar".into()
            }
        );
        assert_eq!(
            err(
                r#"{"status":"success","warnings":["store unavailable"],"data":{"resultType":"vector","result":[]}}"#,
                ResultType::Vector
            ),
            PromQueryError::Warnings(vec!["store unavailable".into()])
        );
        assert!(matches!(
            err(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"seven"]}]}}"#, ResultType::Vector),
            PromQueryError::Malformed(m) if m.contains("seven")
        ));
        assert!(matches!(
            err(
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
                ResultType::Vector
            ),
            PromQueryError::Malformed(_)
        ));
        assert!(matches!(
            err(r#"{"status":"success"}"#, ResultType::Vector),
            PromQueryError::Malformed(_)
        ));
        assert_eq!(
            err(r#"{"status":"success"}"#, ResultType::Vector).outcome(),
            "bad_response"
        );
    }

    #[test]
    fn special_values_and_timestamps_parse() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"a"},"values":[[1700000001.5,"NaN"],[1700000000.25,"+Inf"],[1700000002,"-Inf"],[1700000003.001,"4"]]}]}}"#;
        let s = parse_response(body.as_bytes(), ResultType::Matrix).unwrap();
        let samples = &s[0].samples;
        assert_eq!(samples[0], (1_700_000_000_250, f64::INFINITY));
        assert_eq!(samples[1].0, 1_700_000_001_500);
        assert!(samples[1].1.is_nan());
        assert_eq!(samples[2], (1_700_000_002_000, f64::NEG_INFINITY));
        assert_eq!(samples[3], (1_700_000_003_001, 4.0));
        assert_eq!(prom_time(1_700_000_003_001), "1700000003.001");
        assert_eq!(prom_time(5), "0.005");
    }

    fn series(labels: &[(&str, &str)], samples: &[(Millis, f64)]) -> PromSeries {
        PromSeries {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            samples: samples.to_vec(),
        }
    }

    fn labels(name: &str, instance: &str) -> Vec<(&'static str, String)> {
        vec![
            ("__name__", name.to_string()),
            ("instance", instance.to_string()),
            ("job", "j".to_string()),
            ("namespace", "default".to_string()),
            ("pod", instance.to_string()),
        ]
    }

    fn s(
        l: &[(&'static str, String)],
        extra: &[(&'static str, &str)],
        samples: &[(Millis, f64)],
    ) -> PromSeries {
        let mut all: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
        all.extend_from_slice(extra);
        series(&all, samples)
    }

    #[test]
    fn trailing_staleness_markers_make_a_series_stale_not_nan() {
        // VictoriaMetrics returns the marker written when a target failed as a NaN sample;
        // `last_over_time` skipped it (retained 4). c1 has only the marker within staleAfter:
        // stale, as Prometheus (which returns no sample) makes it. c3 has a number before the
        // marker: fresh with that number. An exported NaN (c2) is kept: there
        // `last_over_time` returns the NaN itself.
        let eval = 1_000_000;
        let marked = labels("hpa_expect_replicas", "c1");
        let exported_nan = labels("hpa_expect_replicas", "c2");
        let marked_after_value = labels("hpa_expect_replicas", "c3");
        let samples = ScopeSamples {
            eval_ms: eval,
            fresh: vec![
                s(&marked, &[], &[(eval - 1_000, f64::NAN)]),
                s(
                    &exported_nan,
                    &[],
                    &[(eval - 2_000, 6.0), (eval - 1_000, f64::NAN)],
                ),
                s(
                    &marked_after_value,
                    &[],
                    &[(eval - 2_000, 4.0), (eval - 1_000, f64::NAN)],
                ),
            ],
            retained: vec![
                s(&marked, &[], &[(eval, 4.0)]),
                s(&exported_nan, &[], &[(eval, f64::NAN)]),
                s(&marked_after_value, &[], &[(eval, 4.0)]),
            ],
        };
        let ev = evidence_from(&samples, 3_000, None);
        let find = |inst: &str| {
            ev.observations
                .iter()
                .find(|o| o.labels["instance"] == inst)
                .unwrap()
        };
        let c1 = find("c1");
        assert_eq!(c1.value, 4.0);
        assert!(eval - c1.observed_at_ms > 3_000, "stale: {c1:?}");
        assert!(c1.present && c1.target_failing, "{c1:?}");
        let c2 = find("c2");
        assert!(c2.value.is_nan());
        assert_eq!(c2.observed_at_ms, eval - 1_000);
        assert_eq!(c2.last_valid, Some((6, eval - 2_000)));
        let c3 = find("c3");
        assert_eq!((c3.value, c3.observed_at_ms), (4.0, eval - 2_000));
        assert!(c3.present && !c3.target_failing, "{c3:?}");
    }

    #[test]
    fn evidence_maps_fresh_stale_and_gone_series() {
        let eval = 1_000_000;
        let fresh_a = labels("hpa_expect_replicas", "c1");
        let alias_a = labels("hpa_expect_replicas_count", "c1");
        let stale_b = labels("hpa_expect_replicas", "c2");
        let gone_c = labels("hpa_expect_replicas", "c3");
        let samples = ScopeSamples {
            eval_ms: eval,
            fresh: vec![
                s(
                    &fresh_a,
                    &[],
                    &[(eval - 2_000, 4.0), (eval - 1_000, f64::NAN)],
                ),
                s(&alias_a, &[], &[(eval - 1_000, 5.0)]),
            ],
            retained: vec![
                s(&fresh_a, &[], &[(eval, f64::NAN)]),
                s(&alias_a, &[], &[(eval, 5.0)]),
                s(&stale_b, &[], &[(eval, 9.0)]),
                s(&gone_c, &[], &[(eval, 8.0)]),
                s(
                    &gone_c,
                    &[(GONE_LABEL, "1"), (NAME_COPY_LABEL, "hpa_expect_replicas")],
                    &[(eval, 8.0)],
                ),
            ],
        };
        let ev = evidence_from(&samples, 3_000, None);
        assert_eq!(ev.observations.len(), 4, "{ev:?}");
        let find = |inst: &str, name: &str| {
            ev.observations
                .iter()
                .find(|o| o.labels["instance"] == inst && o.series == name)
                .unwrap()
        };
        let a = find("c1", "hpa_expect_replicas");
        assert!(a.value.is_nan());
        assert_eq!(a.observed_at_ms, eval - 1_000);
        assert_eq!(a.last_valid, Some((4, eval - 2_000)));
        assert!(a.present && !a.target_failing);
        assert!(!a.labels.contains_key("__name__"));
        assert_eq!(&*a.target.0, "j/c1");
        assert_eq!(find("c1", "hpa_expect_replicas_count").value, 5.0);
        let b = find("c2", "hpa_expect_replicas");
        assert!(
            eval - b.observed_at_ms > 3_000,
            "stale by more than staleAfter"
        );
        assert_eq!(b.last_valid.map(|(v, _)| v), Some(9));
        assert!(b.present && b.target_failing);
        let c = find("c3", "hpa_expect_replicas");
        assert!(!c.present, "gone from a healthy target");

        // Only existing pods count once discovery knows them; a pod that exists but is not
        // Running (its exporter is down) keeps its series.
        let lobby = WorkloadRef {
            kind: "StatefulSet".into(),
            namespace: "default".into(),
            name: "lobby".into(),
        };
        let other = WorkloadRef {
            name: "chat".into(),
            ..lobby.clone()
        };
        let facts = |running: bool, w: &WorkloadRef| PodFacts {
            running,
            workload: Some(w.clone()),
        };
        let pods: BTreeMap<String, PodFacts> = [
            ("c1", facts(true, &lobby)),
            ("c3", facts(false, &lobby)),
            // Running, same workload, nothing in Prometheus yet: unknown.
            ("c4", facts(true, &lobby)),
            // Not Running yet: no exporter to wait for.
            ("c5", facts(false, &lobby)),
            // Another workload's new pod cannot hold lobby's state.
            ("c6", facts(true, &other)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let ev = evidence_from(
            &samples,
            3_000,
            Some(PodFilter {
                label: "pod",
                namespace: "default",
                pods: &pods,
            }),
        );
        assert!(ev.observations.iter().all(|o| o.labels["pod"] != "c2"));
        assert!(ev.observations.iter().any(|o| o.labels["pod"] == "c3"));
        assert_eq!(ev.workloads, vec![lobby]);
        let unknown: Vec<&str> = ev.unknown_targets.iter().map(|u| &*u.target.0).collect();
        assert_eq!(unknown, vec!["default/c4"]);
        assert_eq!(ev.observations.len(), 3);
    }
}
