//! `hpa-bridge serve`: the process wiring, in the order data flows (config → cluster facts →
//! sources → store → engine → api), then the wait for a signal and the shutdown.

mod args;
mod auth;
mod cluster;
mod ports;
mod stop;

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use hpa_bridge::demo;
use hpa_bridge::prediction::{self, HpaWatch, Predictions};
use hpa_bridge_engine::engine::{self, Assembly, EngineBuilder};
use hpa_bridge_rules::clock::SystemClock;
use hpa_bridge_rules::config::Config;
use hpa_bridge_server::api::ready::Ready;
use hpa_bridge_server::api::transport::shutdown::Shutdown;
use hpa_bridge_server::api::transport::Gatekeeper;
use hpa_bridge_server::api::{metrics_port, ApiHandler};
use hpa_bridge_server::tls;
use hpa_bridge_sources::source::discovery::Discovery;
use hpa_bridge_telemetry::self_metrics::{SelfMetrics, HPA_PREDICTION_FAMILIES};

pub(crate) use args::ServeArgs;
use ports::Ports;

pub(crate) async fn run(args: ServeArgs) -> Result<()> {
    let config = load_config(&args)?;
    // Without authentication anybody who can connect could read every metric; keep the
    // unauthenticated mode to this machine.
    if !args.auth.configured() && !args.bind_address.is_loopback() {
        bail!(
            "refusing to listen on {} without authentication: no authentication is configured, so only loopback \
             addresses (127.0.0.1, ::1) are allowed",
            args.bind_address
        );
    }
    cluster::check_flags(&args, &config)?;
    let metrics = Arc::new(SelfMetrics::new());
    let clock = Arc::new(SystemClock);
    start_demo_exporter(&config).await?;

    // Discovery starts first: it fills the target set the engine scrapes, and its watch
    // caches are the cluster facts the engine is built with.
    let static_targets = engine::static_targets(&config);
    let targets = engine::static_store(&config);
    let scrape_interval = config.scrape.interval.0;
    let kubernetes = config.scrape.kubernetes.clone();
    let duties = match &kubernetes {
        Some(k) => Some(
            cluster::start(
                &args,
                k,
                &config,
                &targets,
                static_targets,
                &clock,
                &metrics,
            )
            .await?,
        ),
        None => None,
    };
    // Each HPA that reads the served metrics is explained after each of its syncs.
    let hpa_watch = match (&duties, kubernetes) {
        (Some(d), Some(k)) if !args.no_hpa_predictions => Some((
            d.client.clone(),
            k.namespaces,
            Arc::new(Predictions::default()),
        )),
        _ => None,
    };

    let mut builder = EngineBuilder::new(config, clock.clone())
        .metrics(metrics.clone())
        .targets(targets);
    let (discovery, leases) = match duties {
        Some(d) => {
            builder = builder.cluster(d.discovery.clone());
            for section in d.sections {
                builder = builder.status_section(section);
            }
            (Some(d.discovery), d.leases)
        }
        None => (None, Vec::new()),
    };
    if let Some((_, _, p)) = &hpa_watch {
        let p = p.clone();
        builder = builder.status_section(("hpas", Arc::new(move || p.document(None))));
    }
    let engine = builder.build()?;
    let adapter = engine.adapter().clone();
    // Without predictions their families would only ever say 0.
    metrics.set_absent(&HPA_PREDICTION_FAMILIES, hpa_watch.is_none());
    let hpa_panel = hpa_watch.map(|(client, namespaces, predictions)| {
        HpaWatch {
            client,
            namespaces,
            adapter: adapter.clone(),
            predictions: predictions.clone(),
            interval: args.hpa_prediction_interval,
        }
        .spawn();
        Arc::new(move || prediction::panel::html(&predictions)) as metrics_port::PagePanel
    });
    // One readiness for the API port's /readyz and the status port's pages.
    let ready = Ready::new(metrics.clone());
    let pages =
        metrics_port::MetricsPages::new(adapter.clone(), ready.clone()).with_hpa_panel(hpa_panel);

    let (tls_config, gatekeeper) = tls_and_auth(&args).await?;
    let limits = args.connection_limits()?;
    let shutdown = Shutdown::new();
    let (api_listener, api_addr) = ports::bind_api(&args).await?;
    let mut ports = Ports::new(limits, shutdown.clone());
    ports
        .serve_metrics(&args, &pages, &tls_config, &gatekeeper, &metrics)
        .await?;
    ports.serve_status(&args, &pages, &metrics).await?;
    let target_count = engine.targets().targets().len();
    start_sources(&engine, discovery, &ready, scrape_interval);
    tracing::info!(
        addr = %api_addr,
        targets = target_count,
        metrics = %adapter.served_metric_names().join(","),
        "serving external.metrics.k8s.io/v1beta1 over TLS"
    );
    ports.serve_api(
        api_listener,
        Arc::new(ApiHandler::new(adapter.clone()).with_ready(ready)),
        tls_config,
        gatekeeper,
        adapter.self_metrics(),
    );

    let signal = stop::termination_signal().await?;
    stop::stop(signal, &args, &shutdown, ports, leases).await;
    Ok(())
}

/// `--config`, the built-in demo config with `--demo`, or the defaults; its warnings logged.
fn load_config(args: &ServeArgs) -> Result<Config> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None if args.demo => Config::from_yaml(demo::LOCAL_CONFIG)?,
        None => Config::from_yaml("")?,
    };
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    Ok(config)
}

/// The demo exporter, when the config has `demo:` (the local demo).
async fn start_demo_exporter(config: &Config) -> Result<()> {
    let Some(d) = &config.demo else {
        return Ok(());
    };
    let (listener, addr) = demo::bind(&d.listen)
        .await
        .with_context(|| format!("demo.listen: binding {}", d.listen))?;
    tracing::warn!(%addr, "demo exporter enabled (demo: in the config); never use it in production");
    tokio::spawn(demo::serve(
        listener,
        demo::DemoWorkload {
            workload: d.workload.clone(),
            pods: d.pods,
            period: d.period.0,
        },
    ));
    Ok(())
}

/// The serving certificate (files, reloaded, or self-signed) and, when authentication is
/// configured, the client-certificate verifier in the TLS config and the gatekeeper.
async fn tls_and_auth(
    args: &ServeArgs,
) -> Result<(Arc<rustls::ServerConfig>, Option<Arc<dyn Gatekeeper>>)> {
    let cert = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(c), Some(k)) => tls::ServingCert::from_files(c, k)?,
        _ => {
            let cert = tls::ServingCert::self_signed(&args.self_signed_names)?;
            tracing::info!(fingerprint = %cert.leaf_fingerprint(), "generated a self-signed serving certificate (sha256)");
            cert
        }
    };
    cert.spawn_reloader(args.auth.tls_reload_interval);
    let auth = auth::build_auth(&args.auth).await?;
    let tls_config = Arc::new(tls::server_config(
        cert,
        auth.as_ref().map(|(_, verifier)| verifier.clone()),
    )?);
    Ok((
        tls_config,
        auth.map(|(gate, _)| gate as Arc<dyn Gatekeeper>),
    ))
}

/// Start reading evidence: the scraper's rounds, or the Prometheus source's probe. Readiness
/// waits for the pod set when pods are discovered: before it, deleted pods would still hold
/// the floor and new ones would not make it incomplete (docs/hpa-behaviour.md §1.6: never
/// serve a guess).
fn start_sources(
    engine: &Assembly,
    discovery: Option<Arc<Discovery>>,
    ready: &Ready,
    interval: std::time::Duration,
) {
    let (scraper, prometheus) = (engine.scraper().cloned(), engine.prometheus().cloned());
    if let Some(p) = prometheus {
        // Ready at once: readiness is the adapter's own health. Gating it on Prometheus would
        // take every replica out of the Service during a Prometheus outage, turning precise
        // per-request 503s into an unavailable APIService, which also breaks discovery and
        // namespace deletion (docs/hpa-behaviour.md §3.1). The probe only reports the version.
        match discovery {
            Some(d) => {
                let ready = ready.clone();
                tokio::spawn(async move {
                    d.wait_synced().await;
                    ready.mark();
                });
            }
            None => ready.mark(),
        }
        tracing::info!(url = %p.url(), "reading evidence from Prometheus; not scraping");
        tokio::spawn(async move {
            match p.probe().await {
                Ok(version) => {
                    tracing::info!(url = %p.url(), %version, "prometheus source reachable")
                }
                Err(e) => {
                    tracing::warn!(url = %p.url(), error = %e, "prometheus source not reachable yet")
                }
            }
        });
    } else if let Some(scraper) = scraper {
        let ready = ready.clone();
        tokio::spawn(async move {
            if let Some(d) = &discovery {
                d.wait_synced().await;
            }
            scraper.run(interval, move || ready.mark()).await;
        });
    }
}
