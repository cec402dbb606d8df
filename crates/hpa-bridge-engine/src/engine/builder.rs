//! The one place that wires the engine: which source answers, where scrape targets go, and who
//! learns the cluster's facts. `serve`, `simulate` and `bench` all build through it, so a
//! benchmark or a simulation measures the same assembly production runs.

use std::sync::Arc;

use crate::engine::static_targets::static_credentials;
use crate::engine::{static_store, Adapter, StatusSection};
use hpa_bridge_rules::clock::Clock;
use hpa_bridge_rules::cluster::Cluster;
use hpa_bridge_rules::config::Config;
use hpa_bridge_sources::source::prometheus::{PrometheusSetupError, PrometheusSource};
use hpa_bridge_sources::source::scrape::{ScrapeSettings, Scraper};
use hpa_bridge_sources::source::EvidenceSource;
use hpa_bridge_store::store::StoreWriter;
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// The default number of targets scraped at once by `serve`.
pub const DEFAULT_SCRAPE_CONCURRENCY: usize = 512;

pub struct EngineBuilder {
    config: Config,
    clock: Arc<dyn Clock>,
    metrics: Arc<SelfMetrics>,
    scrape_concurrency: usize,
    source: Option<Arc<dyn EvidenceSource>>,
    targets: Option<StoreWriter>,
    cluster: Option<Arc<dyn Cluster>>,
    sections: Vec<StatusSection>,
}

/// An assembled engine and the parts that feed it.
pub struct Assembly {
    adapter: Arc<Adapter>,
    /// The embedded scraper over the target set; `None` when a Prometheus-compatible server
    /// holds the samples (or another source was given), since then nothing here scrapes.
    scraper: Option<Scraper>,
    /// The Prometheus source when `source.prometheus` is configured, for its probe and pod set.
    prometheus: Option<Arc<PrometheusSource>>,
    targets: StoreWriter,
}

impl EngineBuilder {
    pub fn new(config: Config, clock: Arc<dyn Clock>) -> Self {
        EngineBuilder {
            config,
            clock,
            metrics: Arc::new(SelfMetrics::new()),
            scrape_concurrency: DEFAULT_SCRAPE_CONCURRENCY,
            source: None,
            targets: None,
            cluster: None,
            sections: Vec::new(),
        }
    }

    /// Share a self-metrics registry with the servers' connection gates.
    pub fn metrics(mut self, metrics: Arc<SelfMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn scrape_concurrency(mut self, concurrency: usize) -> Self {
        self.scrape_concurrency = concurrency.max(1);
        self
    }

    /// Answer from this source instead of the configured one (tests that count or fail reads).
    pub fn source(mut self, source: Arc<dyn EvidenceSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// Keep the target set in the store `targets` writes: discovery, started first so that its
    /// facts can be given to `cluster`, fills it. Without it the engine starts a store holding
    /// the `scrape.static` targets.
    pub fn targets(mut self, targets: StoreWriter) -> Self {
        self.targets = Some(targets);
        self
    }

    /// The cluster's facts (discovery, or the simulator's workload), for the engine and the
    /// Prometheus source's pod set.
    pub fn cluster(mut self, cluster: Arc<dyn Cluster>) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Show a part of `/status` that is kept outside the engine.
    pub fn status_section(mut self, section: StatusSection) -> Self {
        self.sections.push(section);
        self
    }

    pub fn build(self) -> Result<Assembly, PrometheusSetupError> {
        let prometheus = match self
            .config
            .source
            .as_ref()
            .and_then(|s| s.prometheus.as_ref())
        {
            Some(p) if self.source.is_none() => Some(Arc::new(PrometheusSource::new(
                p,
                self.config.scrape.stale_after(),
                self.config.scrape.max_body_bytes,
                self.clock.clone(),
                self.metrics.clone(),
            )?)),
            _ => None,
        };
        let scrapes = prometheus.is_none() && self.source.is_none();
        // Scraped samples go to the target set discovery fills (it starts before the engine is
        // built, to hand the engine its facts); without one, to a store of the static targets.
        let store = match (scrapes, &self.targets) {
            (true, Some(t)) => t.clone(),
            _ => static_store(&self.config),
        };
        let scraper = scrapes.then(|| {
            scraper_for(
                &self.config,
                store.clone(),
                self.clock.clone(),
                self.metrics.clone(),
                self.scrape_concurrency,
            )
        });
        // Answers read the scrape store, by its read half, unless another source holds the
        // samples: only the ingest (discovery, the scraper) writes what the engine reads.
        let source: Arc<dyn EvidenceSource> = match (self.source, &prometheus) {
            (Some(s), _) => s,
            (None, Some(p)) => p.clone(),
            (None, None) => store.reader(),
        };
        if let (Some(c), Some(p)) = (&self.cluster, &prometheus) {
            p.set_pod_set(c.clone(), "pod");
        }
        let mut adapter = Adapter::new(self.config, source, self.cluster, self.clock, self.metrics);
        for section in self.sections {
            adapter = adapter.with_status_section(section);
        }
        // With another source nothing here scrapes: discovered targets go to a store nobody
        // reads or shows, so only the pod set and the workloads' state are used.
        let targets = match (scrapes, self.targets) {
            (true, _) => store,
            (false, Some(t)) => t,
            (false, None) => StoreWriter::default(),
        };
        Ok(Assembly {
            adapter: Arc::new(adapter),
            scraper,
            prometheus,
            targets,
        })
    }
}

impl Assembly {
    /// The provider the API serves from.
    pub fn adapter(&self) -> &Arc<Adapter> {
        &self.adapter
    }

    /// The embedded scraper over the target set, when this engine scrapes.
    pub fn scraper(&self) -> Option<&Scraper> {
        self.scraper.as_ref()
    }

    /// The Prometheus source, when `source.prometheus` is configured.
    pub fn prometheus(&self) -> Option<&Arc<PrometheusSource>> {
        self.prometheus.as_ref()
    }

    /// The write half of the store that keeps the target set: discovery writes it and the
    /// scraper reads it (and, when this engine scrapes, fills it with samples).
    pub fn targets(&self) -> StoreWriter {
        self.targets.clone()
    }
}

/// The embedded scraper over `store`'s targets under the config's `scrape` settings,
/// filling `store`.
fn scraper_for(
    config: &Config,
    store: StoreWriter,
    clock: Arc<dyn Clock>,
    metrics: Arc<SelfMetrics>,
    concurrency: usize,
) -> Scraper {
    let scrape = &config.scrape;
    Scraper::new(
        store,
        ScrapeSettings {
            timeout: scrape.timeout(),
            max_body_bytes: scrape.max_body_bytes,
            limits: scrape.limits(),
            wanted: Arc::new(config.wanted_series()),
            concurrency,
            timestamp_series: Arc::new(config.timestamp_rules().into_iter().collect()),
            credentials: Arc::new(static_credentials(config)),
        },
        clock,
        metrics,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_bridge_rules::clock::ManualClock;

    fn build(yaml: &str) -> Assembly {
        EngineBuilder::new(
            Config::from_yaml(yaml).unwrap(),
            Arc::new(ManualClock::new(0)),
        )
        .build()
        .unwrap()
    }

    #[test]
    fn the_scrape_source_scrapes_the_target_set_the_status_shows() {
        let engine = build("scrape:\n  static:\n    - url: http://127.0.0.1:9/metrics\n");
        assert!(engine.scraper.is_some());
        assert!(engine.prometheus.is_none());
        assert_eq!(engine.targets().targets().len(), 1);
    }

    #[test]
    fn a_prometheus_source_scrapes_nothing_and_keeps_discovered_targets_aside() {
        let engine = build("source:\n  prometheus:\n    url: http://127.0.0.1:9\n");
        assert!(engine.scraper.is_none());
        assert!(engine.prometheus.is_some());
        // Discovery's targets go to a store the answers never read (nor /status shows).
        engine.targets().set_targets(crate::engine::static_targets(
            &Config::from_yaml("scrape:\n  static:\n    - url: http://127.0.0.1:9/metrics\n")
                .unwrap(),
        ));
        assert_eq!(engine.targets().targets().len(), 1);
        assert!(engine.adapter.explainer().target_health().is_empty());
    }
}
