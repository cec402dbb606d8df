//! Scraping Prometheus-text endpoints into the store.
//!
//! Each target is scraped with a deadline covering connect, headers, body and parse, a body cap
//! and parse limits, so a slow, huge or garbage target fails its own scrape and nothing else.
//! The parse runs on a blocking thread: however hostile the page, the async workers that serve
//! the API and `/healthz` never wait for it.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::stream::{self, FuturesUnordered, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::source::scrape_schedule::ScrapeSchedule;
use hpa_bridge_exposition as exposition;
use hpa_bridge_rules::clock::Clock;
use hpa_bridge_rules::config::ScrapeCredentials;
use hpa_bridge_rules::evidence::TargetId;
use hpa_bridge_rules::redaction::redact_url;
use hpa_bridge_store::store::{Page, PageFormat, ScrapeTarget, StoreWriter};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// How a scrape failed; the text lands in `/status` and the error counter's `reason` label.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("invalid URL {0:?}")]
    Url(String),
    #[error("timed out after {0:?} (scrape.timeout)")]
    Timeout(Duration),
    #[error("request failed: {0}")]
    Request(String),
    #[error("HTTP status {0}")]
    Status(u16),
    /// A 401 or 403: what the exporter asked for, and what this target sent.
    #[error("HTTP status {status}: {why}")]
    Unauthorized { status: u16, why: &'static str },
    /// A credentials file could not be read; its key and path are named, never its content.
    #[error("{0}")]
    Credentials(String),
    #[error("body exceeds scrape.maxBodyBytes ({limit} bytes)")]
    TooLarge { limit: u64 },
    #[error("reading body failed: {0}")]
    Body(String),
    #[error("the body ended with the connection, inside a line: it may have been cut short")]
    CutShort,
    #[error("parser thread failed: {0}")]
    Parser(String),
    #[error("malformed exposition text: {0}")]
    Parse(#[from] exposition::ExpositionError),
    #[error("JSON status document: {0}")]
    Json(#[from] exposition::json_page::JsonPageError),
    #[error("{0}")]
    JsonConfig(String),
}

impl ScrapeError {
    /// A low-cardinality label for the error counter.
    pub fn reason(&self) -> &'static str {
        match self {
            ScrapeError::Url(_) => "url",
            ScrapeError::Timeout(_) => "timeout",
            ScrapeError::Request(_) => "connect",
            ScrapeError::Status(_) | ScrapeError::Unauthorized { .. } => "status",
            ScrapeError::Credentials(_) => "credentials",
            ScrapeError::TooLarge { .. } => "too_large",
            ScrapeError::Body(_) | ScrapeError::CutShort => "body",
            ScrapeError::Parser(_) => "parse",
            ScrapeError::Json(e) if e.is_limit() => "limit",
            ScrapeError::Json(exposition::json_page::JsonPageError::Cancelled) => "timeout",
            ScrapeError::Json(_) => "parse",
            ScrapeError::JsonConfig(_) => "config",
            ScrapeError::Parse(e) => match e.kind {
                exposition::ErrorKind::Syntax => "parse",
                exposition::ErrorKind::Limit => "limit",
                exposition::ErrorKind::Cancelled => "timeout",
            },
        }
    }
}

#[derive(Clone, Debug)]
pub struct ScrapeSettings {
    pub timeout: Duration,
    pub max_body_bytes: u64,
    /// Bounds on the parse of each page.
    pub limits: exposition::Limits,
    /// Source series names to keep; every other family is skipped before full parsing.
    pub wanted: Arc<BTreeSet<String>>,
    /// Scrapes in flight at once.
    pub concurrency: usize,
    /// Series timed by another series of their page (`timestampSeries`): series → that series.
    pub timestamp_series: Arc<HashMap<String, String>>,
    /// How each target that needs them authenticates (`basicAuth`, `bearerTokenFile`).
    pub credentials: Arc<HashMap<TargetId, ScrapeCredentials>>,
}

/// Pages up to this size are parsed on the async worker that fetched them (see
/// `fetch_and_parse`); larger ones on the blocking pool.
const INLINE_PARSE_MAX_BYTES: usize = 16 * 1024;

/// Bytes of each pooled scrape connection's read buffer.
const READ_BUFFER_BYTES: usize = 8 * 1024;

/// A clone shares the connection pool, the store and the counters: it is the same scraper.
#[derive(Clone)]
pub struct Scraper {
    client: Client<HttpConnector, Empty<Bytes>>,
    store: StoreWriter,
    settings: ScrapeSettings,
    clock: Arc<dyn Clock>,
    metrics: Arc<SelfMetrics>,
}

impl Scraper {
    pub fn new(
        store: StoreWriter,
        settings: ScrapeSettings,
        clock: Arc<dyn Clock>,
        metrics: Arc<SelfMetrics>,
    ) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(settings.timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(4)
            // A pooled connection keeps its read buffer between scrapes, and hyper grows it
            // towards the largest page seen; with one connection per pod that is most of the
            // scraper's memory. A fixed small buffer bounds it per connection; the body is
            // collected into its own buffer anyway.
            .http1_read_buf_exact_size(READ_BUFFER_BYTES)
            .build(connector);
        Scraper {
            client,
            store,
            settings,
            clock,
            metrics,
        }
    }

    /// Scrape every target once, concurrently, and record each result.
    pub async fn scrape_round(&self) {
        let targets = self.store.targets();
        self.forget_gone_targets(&targets);
        let started = Instant::now();
        stream::iter(targets)
            .for_each_concurrent(self.settings.concurrency, |t| async move {
                self.scrape_one(&t).await;
            })
            .await;
        self.metrics
            .scrape_round_duration
            .observe(started.elapsed().as_secs_f64());
    }

    /// Scrape every target once at once, call `after_first_round`, then scrape each target once
    /// per interval at its own phase (docs/hpa-behaviour.md §5.1), forever.
    ///
    /// The first round is a burst on purpose: readiness needs every target's first page, and
    /// waiting a whole interval for it would hold back a restarted adapter. From then on the
    /// schedule spreads the targets, so a large target set costs a flat load instead of a
    /// burst at the top of every interval. A target still being scraped (or waiting for a
    /// concurrency slot) when it is due again is not queued twice.
    pub async fn run(&self, interval: Duration, after_first_round: impl FnOnce()) {
        self.scrape_round().await;
        // Phases are points in an interval of elapsed time: on the monotonic clock, a step of
        // the wall clock neither skips targets' scrapes nor crowds them together.
        let mut last = self.clock.mono_ms();
        after_first_round();
        // About 100 ticks per interval: each scrapes the targets whose phase passed since the
        // last tick, so a target's scrapes stay within one tick of one interval apart.
        let tick_every = (interval / 100).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut tick = tokio::time::interval(tick_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut schedule = ScrapeSchedule::default();
        let mut schedule_version = None;
        let mut pending: HashSet<TargetId> = HashSet::new();
        let mut queue: VecDeque<Arc<ScrapeTarget>> = VecDeque::new();
        let mut in_flight = FuturesUnordered::new();
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let version = self.store.target_set_version();
                    if schedule_version != Some(version) {
                        let targets = self.store.targets();
                        self.forget_gone_targets(&targets);
                        schedule = ScrapeSchedule::new(interval, targets);
                        schedule_version = Some(version);
                    }
                    let now = self.clock.mono_ms();
                    for t in schedule.due(last, now) {
                        if pending.insert(t.id.clone()) {
                            queue.push_back(t.clone());
                        }
                    }
                    last = now;
                }
                Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                    pending.remove(&done);
                }
            }
            while in_flight.len() < self.settings.concurrency.max(1) {
                let Some(t) = queue.pop_front() else { break };
                in_flight.push(async move {
                    self.scrape_one(&t).await;
                    t.id.clone()
                });
            }
        }
    }

    async fn scrape_one(&self, target: &ScrapeTarget) {
        let at = self.clock.now();
        let started = Instant::now();
        let result = tokio::time::timeout(self.settings.timeout, self.fetch_and_parse(target))
            .await
            .unwrap_or(Err(ScrapeError::Timeout(self.settings.timeout)));
        let elapsed = started.elapsed();
        let duration_ms = elapsed.as_millis() as u64;
        self.metrics.scrape_duration.observe(elapsed.as_secs_f64());
        match result {
            Ok(page) => {
                self.metrics
                    .samples_scraped
                    .inc_by(page.samples.len() as u64);
                let page = self.store.record_success(target, at, duration_ms, page);
                let duplicates = page.duplicates;
                if page.forgotten > 0 {
                    self.metrics.forgotten_series.inc_by(page.forgotten);
                    tracing::warn!(target = %target.id, forgotten = page.forgotten, retained = hpa_bridge_store::store::MAX_RETAINED_ABSENT_SERIES, "target stopped exporting more series than are retained per target; dropped the longest unseen");
                }
                if duplicates > 0 {
                    self.metrics.duplicate_series.inc_by(duplicates);
                    tracing::warn!(target = %target.id, duplicates, "page holds series twice (same name and labels); not using their values");
                }
                if page.out_of_order > 0 {
                    self.metrics.out_of_order_series.inc_by(page.out_of_order);
                    tracing::warn!(target = %target.id, out_of_order = page.out_of_order, "page holds samples timestamped before the ones their series hold; not using their values");
                }
            }
            Err(e) => {
                tracing::warn!(target_id = %target.id, error = %e, "scrape failed");
                self.metrics.scrape_error(&target.id, e.reason());
                // The target may have left while its scrape ran, and after the sweep that
                // followed; its series would then outlive it.
                if !self.store.has_target(&target.id) {
                    self.metrics.retain_targets(|id| *id != target.id);
                }
                self.store
                    .record_failure(target, at.wall, duration_ms, e.to_string());
            }
        }
    }

    /// Drop the self-metric series of targets no longer in `targets`.
    fn forget_gone_targets(&self, targets: &[Arc<ScrapeTarget>]) {
        let ids: HashSet<&TargetId> = targets.iter().map(|t| &t.id).collect();
        self.metrics.retain_targets(|id| ids.contains(id));
    }

    async fn fetch_and_parse(&self, target: &ScrapeTarget) -> Result<Page, ScrapeError> {
        let json = match &target.format {
            PageFormat::Exposition => None,
            PageFormat::Json(x) => Some(x.clone()),
            PageFormat::UnusableJsonConfig(why) => {
                return Err(ScrapeError::JsonConfig(why.to_string()))
            }
        };
        let (body, format, close_delimited) = self.fetch(target).await?;
        let wanted = self.settings.wanted.clone();
        let limits = self.settings.limits;
        let timestamp_series = self.settings.timestamp_series.clone();
        let inline = body.len() <= INLINE_PARSE_MAX_BYTES;
        let parse = move |cancel: Option<&AtomicBool>| -> Result<Page, ScrapeError> {
            let wanted = |name: &str| wanted.contains(name);
            let mut page = match &json {
                None => {
                    // A text format page may end without its final line feed (Prometheus
                    // accepts it), but not one whose end is only the connection's: `12` cut to
                    // `1` would read as whole.
                    if close_delimited
                        && format == exposition::Format::PrometheusText
                        && exposition::ends_mid_line(&body)
                    {
                        return Err(ScrapeError::CutShort);
                    }
                    let options = exposition::Options {
                        format,
                        limits,
                        cancel,
                    };
                    Page::from(exposition::parse_with(&body, &wanted, &options)?)
                }
                Some(x) => {
                    let read = x.read(&body, &wanted, &limits, cancel)?;
                    Page {
                        samples: read.samples,
                        valid_until_ms: read.valid_until_ms,
                        reason: read.reason.map(Arc::from),
                    }
                }
            };
            exposition::producer_time::apply(&mut page.samples, &timestamp_series);
            Ok(page)
        };
        // Handing a page to the blocking pool wakes a thread and costs more CPU than parsing
        // a small page. A page this small is bounded work even at its worst: the parse is
        // linear and the limits bound every line, so even a page of lines full of maximal
        // labels holds the async worker only briefly.
        if inline {
            return parse(None);
        }
        // The deadline drops this future; the guard then tells the parse, which a dropped
        // JoinHandle cannot stop, to give up at its next line.
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let flag = cancel.0.clone();
        let parsed = tokio::task::spawn_blocking(move || parse(Some(&flag)))
            .await
            .map_err(|e| ScrapeError::Parser(e.to_string()))?;
        parsed
    }

    /// The body, its format from the Content-Type, and whether its end was only the
    /// connection's.
    async fn fetch(
        &self,
        target: &ScrapeTarget,
    ) -> Result<(Bytes, exposition::Format, bool), ScrapeError> {
        let uri: http::Uri = target
            .url
            .parse()
            .map_err(|_| ScrapeError::Url(redact_url(&target.url).into_owned()))?;
        let credentials = self.settings.credentials.get(&target.id);
        let mut request = http::Request::get(uri);
        if let Some(c) = credentials {
            request = request.header(http::header::AUTHORIZATION, authorization(c).await?);
        }
        let request = request
            .header(
                http::header::ACCEPT,
                "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1",
            )
            .header(http::header::USER_AGENT, concat!("hpa-bridge/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .map_err(|e| ScrapeError::Request(e.to_string()))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| ScrapeError::Request(error_chain(&e)))?;
        let status = response.status();
        if status == http::StatusCode::UNAUTHORIZED || status == http::StatusCode::FORBIDDEN {
            return Err(ScrapeError::Unauthorized {
                status: status.as_u16(),
                why: match credentials {
                    None => "the exporter wants credentials: set basicAuth or bearerTokenFile on this target",
                    Some(ScrapeCredentials::Basic { .. }) => "the exporter refused this target's basicAuth",
                    Some(ScrapeCredentials::Bearer { .. }) => "the exporter refused this target's bearerTokenFile token",
                },
            });
        }
        // Exactly 200, as Prometheus's scraper requires: a 204 or 206 is no whole page, and an
        // empty one would read every series as gone.
        if status != http::StatusCode::OK {
            return Err(ScrapeError::Status(status.as_u16()));
        }
        // HTTP/1 whose body is neither chunked nor of a stated length (a transfer coding
        // overrides a length, RFC 9112 §6.3): it ends where the connection does, so an
        // exporter that dies mid-write leaves a body that looks whole.
        let headers = response.headers();
        let chunked = headers
            .get_all(http::header::TRANSFER_ENCODING)
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|codings| codings.rsplit(',').next())
            .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        let framed = chunked
            || (!headers.contains_key(http::header::TRANSFER_ENCODING)
                && headers.contains_key(http::header::CONTENT_LENGTH));
        let close_delimited = response.version() < http::Version::HTTP_2 && !framed;
        let format = exposition::Format::from_content_type(
            response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        );
        let limit = self.settings.max_body_bytes;
        // A stated length counts only where hyper reads by it: not beside a transfer coding.
        let stated = (!headers.contains_key(http::header::TRANSFER_ENCODING))
            .then(|| headers.get(http::header::CONTENT_LENGTH))
            .flatten()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if stated.is_some_and(|len| len > limit) {
            return Err(ScrapeError::TooLarge { limit });
        }
        let mut body = response.into_body();
        // A stated length (within the limit, checked above) is allocated once: growing by
        // doubling would hold up to twice the body while the last frames arrive.
        let mut buf = BytesMut::with_capacity(stated.map_or(0, |n| n as usize));
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| ScrapeError::Body(error_chain(&e)))?;
            if let Ok(data) = frame.into_data() {
                if buf.len() as u64 + data.len() as u64 > limit {
                    return Err(ScrapeError::TooLarge { limit });
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok((buf.freeze(), format, close_delimited))
    }
}

/// The `Authorization` header `c` asks for, its secret read from its file now, so a rotated
/// Secret is used from the next scrape on (Prometheus reads its files at each scrape too, and
/// trims surrounding whitespace as it does). The value is marked sensitive and never logged.
async fn authorization(c: &ScrapeCredentials) -> Result<http::HeaderValue, ScrapeError> {
    let (file, key) = match c {
        ScrapeCredentials::Basic {
            password_file, key, ..
        } => (password_file, key),
        ScrapeCredentials::Bearer { token_file, key } => (token_file, key),
    };
    let secret = tokio::fs::read_to_string(file)
        .await
        .map_err(|e| ScrapeError::Credentials(format!("reading {key} {}: {e}", file.display())))?;
    let secret = secret.trim();
    let text = match c {
        ScrapeCredentials::Basic { username, .. } => {
            use base64::Engine as _;
            let pair = format!("{username}:{secret}");
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        }
        ScrapeCredentials::Bearer { .. } => format!("Bearer {secret}"),
    };
    let mut value = http::HeaderValue::from_str(&text).map_err(|_| {
        ScrapeError::Credentials(format!(
            "{key} {}: the secret holds a character an HTTP header cannot carry",
            file.display()
        ))
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// Sets its flag when dropped, which includes being dropped by an expired timeout.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The error and its causes on one line: hyper's top-level message alone is rarely enough.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use hpa_bridge_rules::clock::{ManualClock, Millis};
    use std::collections::{BTreeMap, HashMap};
    use std::net::SocketAddr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback exporter answering each path with a fixed content type and body.
    pub(crate) async fn serve_pages(pages: HashMap<String, (String, Vec<u8>)>) -> SocketAddr {
        serve_counted_pages(pages).await.0
    }

    /// The path of the request whose head arrives on `conn`, once all of the head has.
    async fn request_path(conn: &mut tokio::net::TcpStream) -> Option<String> {
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let text = String::from_utf8_lossy(&head);
        Some(text.split(' ').nth(1).unwrap_or("/").to_owned())
    }

    type Hits = Arc<std::sync::Mutex<HashMap<String, usize>>>;

    /// `serve_pages`, also counting the requests for each path.
    async fn serve_counted_pages(pages: HashMap<String, (String, Vec<u8>)>) -> (SocketAddr, Hits) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pages = Arc::new(pages);
        let hits = Hits::default();
        let counter = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let pages = pages.clone();
                let counter = counter.clone();
                tokio::spawn(async move {
                    let Some(path) = request_path(&mut conn).await else {
                        return;
                    };
                    *counter.lock().unwrap().entry(path.clone()).or_default() += 1;
                    let (status, ct, body) = match pages.get(&path) {
                        Some((ct, body)) => ("200 OK", ct.as_str(), body.as_slice()),
                        None => ("404 Not Found", "text/plain", &b""[..]),
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(response.as_bytes()).await;
                    let _ = conn.write_all(body).await;
                });
            }
        });
        (addr, hits)
    }

    /// Everything the store holds of `idx` in namespace `default`.
    fn idx_evidence(
        store: &hpa_bridge_store::store::Store,
    ) -> hpa_bridge_rules::evidence::Evidence {
        let series = vec!["idx".to_owned()];
        let selector = hpa_bridge_rules::selector::LabelSelector::everything();
        store.read(
            &hpa_bridge_rules::evidence::Scope {
                series: &series,
                namespace_label: "namespace",
                namespace: "default",
                selector: &selector,
            },
            hpa_bridge_rules::evidence::Read::Listed,
        )
    }

    pub(crate) fn static_target(url: String) -> ScrapeTarget {
        ScrapeTarget {
            format: Default::default(),
            id: hpa_bridge_rules::evidence::TargetId(url.as_str().into()),
            url,
            labels: BTreeMap::from([("namespace".to_owned(), "default".to_owned())]),
            workload: None,
        }
    }

    pub(crate) fn scraper(store: StoreWriter, metrics: Arc<SelfMetrics>) -> Scraper {
        Scraper::new(
            store,
            ScrapeSettings {
                timeout: Duration::from_secs(30),
                max_body_bytes: 16 << 20,
                limits: exposition::Limits::DEFAULT,
                wanted: Arc::new(BTreeSet::from(["idx".to_owned()])),
                concurrency: 4,
                timestamp_series: Arc::default(),
                credentials: Arc::default(),
            },
            Arc::new(ManualClock::new(1_000_000)),
            metrics,
        )
    }

    /// A target that leaves the target set takes its `scrape_errors` series with it, so pod
    /// churn does not grow /metrics for good; a remaining target's series stay. A scrape that
    /// was in flight when its target left adds none back.
    #[tokio::test]
    async fn a_target_that_leaves_takes_its_error_series_with_it() {
        let addr = serve_pages(HashMap::new()).await;
        let targets: Vec<ScrapeTarget> = ["a", "b", "c"]
            .iter()
            .map(|p| static_target(format!("http://{addr}/{p}")))
            .collect();
        let store = StoreWriter::default();
        store.set_targets(targets.clone());
        let metrics = Arc::new(SelfMetrics::new());
        let scraper = Arc::new(scraper(store.clone(), metrics.clone()));
        let (first_round, first_round_done) = tokio::sync::oneshot::channel();
        let running = tokio::spawn({
            let scraper = scraper.clone();
            async move {
                scraper
                    .run(Duration::from_millis(100), move || {
                        let _ = first_round.send(());
                    })
                    .await
            }
        });
        first_round_done.await.unwrap();
        let series = |t: &ScrapeTarget| {
            format!(
                "hpa_bridge_scrape_errors_total{{target=\"{}\",reason=\"status\"}}",
                t.id
            )
        };
        let page = metrics.render();
        for t in &targets {
            assert!(page.contains(&series(t)), "{}: {page}", t.id);
        }

        store.set_targets(vec![targets[2].clone()]);
        // The scraper sweeps at its next tick after the target set changed.
        let deadline = Instant::now() + Duration::from_secs(10);
        let gone = |page: &str| !targets[..2].iter().any(|t| page.contains(&series(t)));
        while !gone(&metrics.render()) {
            assert!(Instant::now() < deadline, "{}", metrics.render());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        scraper.scrape_one(&targets[0]).await;
        let page = metrics.render();
        assert!(gone(&page), "{page}");
        assert!(page.contains(&series(&targets[2])), "{page}");
        running.abort();
    }

    #[tokio::test]
    async fn a_hostile_page_fails_its_own_scrape_and_nothing_else() {
        let mut huge = String::from("idx{");
        for i in 0..100_000 {
            huge.push_str(&format!("l{i}=\"v\","));
        }
        huge.push_str("} 1\n");
        let text = "text/plain; version=0.0.4".to_owned();
        let addr = serve_pages(HashMap::from([
            ("/hostile".to_owned(), (text.clone(), huge.into_bytes())),
            ("/fine".to_owned(), (text, b"idx 3\n".to_vec())),
        ]))
        .await;
        let store = StoreWriter::default();
        let (hostile, fine) = (
            static_target(format!("http://{addr}/hostile")),
            static_target(format!("http://{addr}/fine")),
        );
        store.set_targets(vec![hostile.clone(), fine.clone()]);
        let metrics = Arc::new(SelfMetrics::new());
        scraper(store.clone(), metrics.clone()).scrape_round().await;

        let health: HashMap<String, _> = store
            .target_health()
            .into_iter()
            .map(|(t, h)| (t.url.clone(), h))
            .collect();
        let h = &health[&hostile.url];
        assert!(!h.ever_succeeded());
        let error = h.last_error.as_deref().unwrap();
        assert!(
            error.contains("line 1") && error.contains("scrape.maxLineBytes (65536)"),
            "{error}"
        );
        assert!(health[&fine.url].ever_succeeded());
        assert!(health[&fine.url].last_error.is_none());
        let rendered = metrics.render();
        assert!(
            rendered.contains(&format!(
                "hpa_bridge_scrape_errors_total{{target=\"{}\",reason=\"limit\"}} 1",
                hostile.url
            )),
            "{rendered}"
        );
    }

    /// A loopback exporter writing each path's whole response (head and body) as given, then
    /// closing the connection.
    async fn serve_raw(responses: HashMap<&'static str, &'static [u8]>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let path = request_path(&mut conn).await.unwrap_or_default();
                let response = responses
                    .get(path.as_str())
                    .copied()
                    .unwrap_or(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                let _ = conn.write_all(response).await;
                let _ = conn.shutdown().await;
            }
        });
        addr
    }

    /// A page is taken only with status 200 exactly (Prometheus's rule), and a body that ended
    /// with the connection must not end inside a line (a cut at a line boundary cannot be
    /// told). A framed body may (Prometheus accepts it), and a page over `maxSeriesPerPage`
    /// fails as a limit.
    #[tokio::test]
    async fn only_a_whole_page_is_taken() {
        let addr = serve_raw(HashMap::from([
            ("/cut", &b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nidx 3\nidx{a=\"b\"} 1"[..]),
            ("/whole", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nidx 3\n"),
            ("/http10", b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nidx 1"),
            // A coding other than chunked last: read to the close, whatever the length says.
            ("/identity", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\nConnection: close\r\n\r\nidx 7"),
            ("/eof", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nidx 8\n# EOF\r"),
            ("/framed", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nidx 4"),
            ("/chunked", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nidx 5\r\n0\r\n\r\n"),
            ("/no-content", b"HTTP/1.1 204 No Content\r\n\r\n"),
            ("/partial", b"HTTP/1.1 206 Partial Content\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nidx 6\n"),
            ("/many", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 32\r\n\r\nidx{a=\"1\"} 1\nidx{a=\"2\"} 1\nidx 1\n"),
        ]))
        .await;
        let store = StoreWriter::default();
        let metrics = Arc::new(SelfMetrics::new());
        let mut scraper = scraper(store.clone(), metrics.clone());
        scraper.settings.limits.max_series = 2;
        let outcome = |path: &str| {
            let target = static_target(format!("http://{addr}{path}"));
            let scraper = &scraper;
            async move {
                scraper
                    .fetch_and_parse(&target)
                    .await
                    .map(|page| page.samples.iter().map(|s| s.value).collect::<Vec<_>>())
                    .map_err(|e| (e.reason(), e.to_string()))
            }
        };
        assert_eq!(outcome("/whole").await, Ok(vec![3.0]));
        assert_eq!(outcome("/framed").await, Ok(vec![4.0]));
        assert_eq!(outcome("/chunked").await, Ok(vec![5.0]));
        assert_eq!(outcome("/eof").await, Ok(vec![8.0]));
        for cut in ["/cut", "/http10", "/identity"] {
            let (reason, text) = outcome(cut).await.unwrap_err();
            assert_eq!(reason, "body", "{cut}: {text}");
            assert!(text.contains("cut short"), "{cut}: {text}");
        }
        assert_eq!(
            outcome("/no-content").await,
            Err(("status", "HTTP status 204".to_owned()))
        );
        assert_eq!(
            outcome("/partial").await,
            Err(("status", "HTTP status 206".to_owned()))
        );
        let (reason, text) = outcome("/many").await.unwrap_err();
        assert_eq!(reason, "limit", "{text}");
        assert!(text.contains("scrape.maxSeriesPerPage (2)"), "{text}");
    }

    /// A JSON status document served over real HTTP is read through its block: the
    /// producer's time and reason reach the store; a non-JSON body fails the scrape with the
    /// reason on the target's health; a pod whose annotation names no block fails too.
    #[tokio::test]
    async fn a_json_status_document_is_scraped_with_its_time_and_reason() {
        let status = include_str!("../../../../tests/fixtures/json/seatunnel-status.json");
        let json = "application/json".to_owned();
        let addr = serve_pages(HashMap::from([
            (
                "/status".to_owned(),
                (json.clone(), status.as_bytes().to_vec()),
            ),
            ("/garbage".to_owned(), (json, b"idx 3\n".to_vec())),
        ]))
        .await;
        let config = hpa_bridge_rules::config::Config::from_yaml(
            "jsonConfigs:\n  st:\n    samples:\n      - {series: idx, value: $.recommendedWorkers, timestamp: $.timestamp, labels: {master_epoch: $.masterEpoch}}\n    reason: $.reason\n    validUntil: $.validUntil\n",
        )
        .unwrap();
        let block = config.json_configs["st"].compile("jsonConfigs.st").unwrap();
        let json_target = |path: &str| ScrapeTarget {
            format: PageFormat::Json(Arc::new(block.clone())),
            ..static_target(format!("http://{addr}{path}"))
        };
        let (good, garbage) = (json_target("/status"), json_target("/garbage"));
        let unconfigured = ScrapeTarget {
            format: PageFormat::UnusableJsonConfig("names \"nope\"".into()),
            ..static_target(format!("http://{addr}/status"))
        };
        let store = StoreWriter::default();
        store.set_targets(vec![good.clone(), garbage.clone()]);
        let metrics = Arc::new(SelfMetrics::new());
        let mut scraper = scraper(store.clone(), metrics.clone());
        // Half a minute after the document's timestamp.
        scraper.clock = Arc::new(ManualClock::new(1_764_547_230_000));
        scraper.scrape_round().await;
        let health: HashMap<String, _> = store
            .target_health()
            .into_iter()
            .map(|(t, h)| (t.url.clone(), h))
            .collect();
        assert_eq!(
            health[&good.url].producer_reason.as_deref(),
            Some("backlog drained for 300s; 2 workers idle")
        );
        let error = health[&garbage.url].last_error.as_deref().unwrap();
        assert!(
            error.starts_with("JSON status document: body is not JSON"),
            "{error}"
        );
        let ev = idx_evidence(&store);
        let [o] = ev.observations.as_slice() else {
            panic!("{ev:?}")
        };
        assert_eq!(
            (o.value, o.observed_at_ms, o.unusable),
            (4.0, 1_764_547_200_000, None)
        );
        assert_eq!(o.valid_until_ms, Some(1_764_547_260_000));
        assert_eq!(
            o.id.labels.get("master_epoch").map(String::as_str),
            Some("4")
        );
        // The reason travels with the evidence its target feeds.
        let [r] = ev.producer_reasons.as_slice() else {
            panic!("{ev:?}")
        };
        assert_eq!(
            (&*r.target.0, &*r.reason),
            (
                good.url.as_str(),
                "backlog drained for 300s; 2 workers idle"
            )
        );
        let err = scraper.fetch_and_parse(&unconfigured).await.unwrap_err();
        assert_eq!(
            (err.to_string().as_str(), err.reason()),
            ("names \"nope\"", "config")
        );
    }

    #[tokio::test]
    async fn the_content_type_decides_the_timestamp_unit() {
        let addr = serve_pages(HashMap::from([
            (
                "/om".to_owned(),
                (
                    "application/openmetrics-text; version=1.0.0; charset=utf-8".to_owned(),
                    b"idx 1 123\n# EOF\n".to_vec(),
                ),
            ),
            (
                "/text".to_owned(),
                (
                    "text/plain; version=0.0.4".to_owned(),
                    b"idx 1 123\n".to_vec(),
                ),
            ),
        ]))
        .await;
        let store = StoreWriter::default();
        let om = static_target(format!("http://{addr}/om"));
        let text = static_target(format!("http://{addr}/text"));
        store.set_targets(vec![om.clone(), text.clone()]);
        scraper(store.clone(), Arc::new(SelfMetrics::new()))
            .scrape_round()
            .await;
        let ev = idx_evidence(&store);
        let at: HashMap<String, i64> = ev
            .observations
            .iter()
            .map(|o| (o.id.target.to_string(), o.observed_at_ms))
            .collect();
        assert_eq!(at[&om.url], 123_000, "OpenMetrics: seconds");
        assert_eq!(at[&text.url], 123, "Prometheus text: milliseconds");
    }

    #[tokio::test]
    async fn after_one_burst_each_target_is_scraped_once_per_interval_at_its_phase() {
        let paths: Vec<String> = (0..40).map(|i| format!("/t{i}")).collect();
        let pages = paths
            .iter()
            .map(|p| (p.clone(), ("text/plain".to_owned(), b"idx 1\n".to_vec())))
            .collect();
        let (addr, hits) = serve_counted_pages(pages).await;
        let store = StoreWriter::default();
        store.set_targets(
            paths
                .iter()
                .map(|p| static_target(format!("http://{addr}{p}")))
                .collect(),
        );
        // The clock is manual, so which targets are due is decided by the test, and the
        // real ticks only poll it: nothing here depends on how fast the machine is.
        let start: Millis = 1_764_547_200_000;
        let clock = Arc::new(ManualClock::new(start));
        let mut scraper = scraper(store.clone(), Arc::new(SelfMetrics::new()));
        scraper.clock = clock.clone() as Arc<dyn Clock>;
        let interval = Duration::from_secs(1);
        let (first_round, first_round_done) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            scraper
                .run(interval, move || {
                    let _ = first_round.send(());
                })
                .await
        });
        let counts = || -> Vec<usize> {
            let h = hits.lock().unwrap();
            paths
                .iter()
                .map(|p| h.get(p).copied().unwrap_or(0))
                .collect()
        };
        let wait_for = |want: Vec<usize>| {
            let counts = &counts;
            async move {
                for _ in 0..2_000 {
                    if counts() == want {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                panic!("scrape counts {:?}, want {want:?}", counts());
            }
        };
        first_round_done.await.unwrap();
        assert_eq!(
            counts(),
            vec![1; 40],
            "the first round scrapes everyone once"
        );

        // Half an interval passes: exactly the targets whose phase lies in it are scraped.
        clock.advance(500);
        let phase = |p: &str| {
            crate::source::scrape_schedule::ScrapeSchedule::phase(
                1_000,
                &format!("http://{addr}{p}"),
            )
        };
        let half: Vec<usize> = paths
            .iter()
            .map(|p| if phase(p) < 500 { 2 } else { 1 })
            .collect();
        assert!(
            half.contains(&1) && half.contains(&2),
            "phases spread: {half:?}"
        );
        wait_for(half.clone()).await;
        // The clock does not move: however often the driver ticks, nobody is scraped again.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(counts(), half);
        // The rest of the interval: everyone has been scraped once more.
        clock.advance(500);
        wait_for(vec![2; 40]).await;
        // A late tick (three intervals at once) scrapes each target once, not three times.
        clock.advance(3_000);
        wait_for(vec![3; 40]).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(counts(), vec![3; 40]);
    }
}
