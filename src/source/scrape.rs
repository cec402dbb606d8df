//! Scraping Prometheus-text endpoints into the store.
//!
//! Each target is scraped with a deadline covering connect, headers and body, and a body cap,
//! so a slow, huge or garbage target fails its own scrape and nothing else.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::stream::{self, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::clock::Clock;
use crate::exposition;
use crate::store::{ScrapeTarget, Store};
use crate::telemetry::SelfMetrics;

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
    #[error("body exceeds scrape.maxBodyBytes ({limit} bytes)")]
    TooLarge { limit: u64 },
    #[error("reading body failed: {0}")]
    Body(String),
    #[error("malformed exposition text: {0}")]
    Parse(#[from] exposition::ExpositionError),
}

impl ScrapeError {
    /// A low-cardinality label for the error counter.
    pub fn reason(&self) -> &'static str {
        match self {
            ScrapeError::Url(_) => "url",
            ScrapeError::Timeout(_) => "timeout",
            ScrapeError::Request(_) => "connect",
            ScrapeError::Status(_) => "status",
            ScrapeError::TooLarge { .. } => "too_large",
            ScrapeError::Body(_) => "body",
            ScrapeError::Parse(_) => "parse",
        }
    }
}

#[derive(Clone, Debug)]
pub struct ScrapeSettings {
    pub timeout: Duration,
    pub max_body_bytes: u64,
    /// Source series names to keep; every other family is skipped before full parsing.
    pub wanted: Arc<BTreeSet<String>>,
    /// Scrapes in flight at once.
    pub concurrency: usize,
}

pub struct Scraper {
    client: Client<HttpConnector, Empty<Bytes>>,
    store: Arc<Store>,
    settings: ScrapeSettings,
    clock: Arc<dyn Clock>,
    metrics: Arc<SelfMetrics>,
}

impl Scraper {
    pub fn new(
        store: Arc<Store>,
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

    async fn scrape_one(&self, target: &ScrapeTarget) {
        let at = self.clock.now_ms();
        let started = Instant::now();
        let result = tokio::time::timeout(self.settings.timeout, self.fetch_and_parse(target))
            .await
            .unwrap_or(Err(ScrapeError::Timeout(self.settings.timeout)));
        let elapsed = started.elapsed();
        let duration_ms = elapsed.as_millis() as u64;
        self.metrics.scrape_duration.observe(elapsed.as_secs_f64());
        match result {
            Ok(samples) => {
                self.metrics.samples_scraped.inc_by(samples.len() as u64);
                self.store.record_success(target, at, duration_ms, samples);
            }
            Err(e) => {
                tracing::warn!(target_id = %target.id, error = %e, "scrape failed");
                self.metrics.scrape_error(&target.id, e.reason());
                self.store
                    .record_failure(target, at, duration_ms, e.to_string());
            }
        }
    }

    async fn fetch_and_parse(
        &self,
        target: &ScrapeTarget,
    ) -> Result<Vec<exposition::ExposedSample>, ScrapeError> {
        let body = self.fetch(target).await?;
        let wanted = &self.settings.wanted;
        Ok(exposition::parse(&body, &|name: &str| {
            wanted.contains(name)
        })?)
    }

    async fn fetch(&self, target: &ScrapeTarget) -> Result<Bytes, ScrapeError> {
        let uri: http::Uri = target
            .url
            .parse()
            .map_err(|_| ScrapeError::Url(target.url.clone()))?;
        let request = http::Request::get(uri)
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
        if !status.is_success() {
            return Err(ScrapeError::Status(status.as_u16()));
        }
        let limit = self.settings.max_body_bytes;
        if let Some(len) = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
        {
            if len > limit {
                return Err(ScrapeError::TooLarge { limit });
            }
        }
        let mut body = response.into_body();
        let mut buf = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| ScrapeError::Body(error_chain(&e)))?;
            if let Ok(data) = frame.into_data() {
                if buf.len() as u64 + data.len() as u64 > limit {
                    return Err(ScrapeError::TooLarge { limit });
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(buf.freeze())
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
