//! The `hpa-bridge` binary: the command line and process wiring. `anyhow` lives only here.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use hpa_bridge::adapter::Adapter;
use hpa_bridge::api::{server, ApiHandler};
use hpa_bridge::clock::SystemClock;
use hpa_bridge::config::Config;
use hpa_bridge::source::scrape::{ScrapeSettings, Scraper};
use hpa_bridge::telemetry::{self, SelfMetrics};
use hpa_bridge::{demo, tls};

#[derive(Parser, Debug)]
#[command(
    name = "hpa-bridge",
    version,
    about = "Serve absolute replica targets to the Kubernetes HPA on external.metrics.k8s.io",
    long_about = "hpa-bridge scrapes replica recommendations (hpa_expect_replicas) and per-pod stateful indices \
(hpa_stateful_index) and serves them as external metrics that an autoscaling/v2 HPA consumes with \
target.type AverageValue and averageValue \"1\". It takes the max (never the sum) of duplicate \
recommendations, keeps state-owning pods as a scale-down floor, and refuses to answer rather than \
let unknown input shrink a workload."
)]
struct Cli {
    /// Verbosity: -v for debug, -vv for trace. RUST_LOG overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log format.
    #[arg(long, value_parser = ["text", "json"], default_value = "text", global = true)]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Scrape the configured targets and serve external.metrics.k8s.io/v1beta1 over TLS.
    Serve(ServeArgs),
    /// Run the demo exporter on its own (the local demo also starts it from `demo:` in the config).
    DemoExporter(DemoArgs),
    /// Measure the serve path, the parse path, scale and memory against their limits; writes
    /// BENCHMARKS.md and benchmarks.json (documented in BENCHMARKS.md).
    Bench(BenchArgs),
    /// The bench's scale exporter, started as a child process by `bench`.
    #[command(hide = true)]
    BenchExporter(BenchExporterArgs),
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// A short run (a few seconds per part, small scale) whose figures are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Exit non-zero if any figure misses its goal.
    #[arg(long)]
    check: bool,
    /// Directory for BENCHMARKS.md and benchmarks.json.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Parts to run (default all): serve, parse, scale, prometheus.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

#[derive(Args, Debug)]
struct BenchExporterArgs {
    #[arg(long)]
    targets: usize,
    #[arg(long)]
    workloads: usize,
    #[arg(long)]
    page_bytes: usize,
    #[arg(long)]
    shared_host: bool,
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// YAML configuration file (see examples/local.yaml). Without it, the three default metrics are served
    /// and nothing is scraped.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The port on which to serve HTTPS.
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// The IP address on which to listen for the --secure-port port. Without authentication configured,
    /// only loopback addresses are allowed.
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: IpAddr,
    /// File containing the default x509 certificate for HTTPS (PEM, leaf first, then intermediates).
    /// Re-read when it changes. Without it, a self-signed certificate is generated at startup.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// File containing the default x509 private key matching --tls-cert-file (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// Extra DNS names or IPs for the self-signed certificate (e.g. hpa-bridge.hpa-bridge.svc).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    self_signed_names: Vec<String>,
    /// Plain-HTTP address serving /metrics (Prometheus) and /status (the explanation of every answer).
    /// Empty disables it.
    #[arg(long, default_value = "127.0.0.1:9100")]
    metrics_bind_address: String,
}

#[derive(Args, Debug)]
struct DemoArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9101")]
    listen: String,
    /// Workload name exported as hpa_target_name.
    #[arg(long, default_value = "lobby")]
    workload: String,
    /// Number of pods (paths /pods/0 .. /pods/N-1).
    #[arg(long, default_value_t = 6)]
    pods: u32,
    /// Period of the recommendation's triangle wave, e.g. 2m.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    period: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    hpa_bridge::config::HumanDuration::parse(s).map(|d| d.0)
}

fn main() {
    let cli = Cli::parse();
    telemetry::init_logging(cli.verbose, cli.log_format == "json");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve(args).await,
            Command::DemoExporter(args) => demo_exporter(args).await,
            Command::Bench(args) => bench(args).await,
            Command::BenchExporter(args) => {
                hpa_bridge::bench::exporter::serve(hpa_bridge::bench::exporter::ExporterSpec {
                    targets: args.targets,
                    workloads: args.workloads.max(1),
                    page_bytes: args.page_bytes,
                    shared_host: args.shared_host,
                })
                .await
                .context("bench exporter")
            }
        }
    });
    if let Err(e) = result {
        tracing::error!(error = %format!("{e:#}"), "exiting");
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

async fn demo_exporter(args: DemoArgs) -> Result<()> {
    let (listener, addr) = demo::bind(&args.listen)
        .await
        .with_context(|| format!("binding demo exporter on {}", args.listen))?;
    tracing::info!(%addr, workload = %args.workload, pods = args.pods, "demo exporter listening");
    demo::serve(
        listener,
        demo::DemoWorkload {
            workload: args.workload,
            pods: args.pods,
            period: args.period,
        },
    )
    .await;
    Ok(())
}

async fn bench(args: BenchArgs) -> Result<()> {
    let mut command = String::from("cargo run --release -- bench");
    if args.quick {
        command.push_str(" --quick");
    }
    let opts = hpa_bridge::bench::BenchOptions {
        quick: args.quick,
        out_dir: args.out.clone(),
        parts: args.only.clone(),
        exe: std::env::current_exe().context("locating the hpa-bridge binary")?,
        command,
    };
    // The bench builds runtimes with pinned worker counts, which cannot nest inside this one.
    let worker = std::thread::spawn(move || hpa_bridge::bench::run(&opts));
    let report = tokio::task::spawn_blocking(move || worker.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the bench panicked"))??;
    println!("{}", report.markdown());
    println!(
        "wrote {} and {}",
        args.out.join("BENCHMARKS.md").display(),
        args.out.join("benchmarks.json").display()
    );
    let unmet = report.unmet();
    if args.check && !unmet.is_empty() {
        for f in &unmet {
            eprintln!("goal not met: {} (ratio {:?})", f.name, f.ratio);
        }
        bail!("{} benchmark goal(s) not met", unmet.len());
    }
    Ok(())
}

async fn serve(args: ServeArgs) -> Result<()> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::from_yaml("")?,
    };
    // Without authentication anybody who can connect could read every metric; keep the
    // unauthenticated mode to this machine.
    if !args.bind_address.is_loopback() {
        bail!(
            "refusing to listen on {} without authentication: no authentication is configured, so only loopback \
             addresses (127.0.0.1, ::1) are allowed",
            args.bind_address
        );
    }
    let metrics = Arc::new(SelfMetrics::new());
    let clock = Arc::new(SystemClock);

    if let Some(d) = &config.demo {
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
    }

    let adapter = Arc::new(Adapter::new(config, clock.clone(), metrics.clone()));
    let cert = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(c), Some(k)) => tls::ServingCert::from_files(c, k)?,
        _ => {
            let cert = tls::ServingCert::self_signed(&args.self_signed_names)?;
            tracing::info!(fingerprint = %cert.leaf_fingerprint(), "generated a self-signed serving certificate (sha256)");
            cert
        }
    };
    cert.spawn_reloader(Duration::from_secs(10));
    let tls_config = Arc::new(tls::server_config(cert, None)?);

    let api_addr = SocketAddr::new(args.bind_address, args.secure_port);
    let api_listener = tokio::net::TcpListener::bind(api_addr)
        .await
        .with_context(|| format!("binding --secure-port on {api_addr}"))?;
    let api_addr = api_listener.local_addr()?;
    if !args.metrics_bind_address.is_empty() {
        let listener = tokio::net::TcpListener::bind(&args.metrics_bind_address)
            .await
            .with_context(|| {
                format!(
                    "binding --metrics-bind-address {}",
                    args.metrics_bind_address
                )
            })?;
        tracing::info!(addr = %listener.local_addr()?, "serving /metrics and /status over HTTP");
        tokio::spawn(server::serve_metrics(listener, adapter.clone()));
    }

    let scrape = &adapter.config.scrape;
    let scraper = Scraper::new(
        adapter.store.clone(),
        ScrapeSettings {
            timeout: scrape.timeout.0,
            max_body_bytes: scrape.max_body_bytes,
            wanted: Arc::new(adapter.config.wanted_series()),
            concurrency: 512,
        },
        clock,
        metrics,
    );
    let interval = scrape.interval.0;
    let scrape_adapter = adapter.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            scraper.scrape_round().await;
            scrape_adapter.mark_ready();
        }
    });

    tracing::info!(
        addr = %api_addr,
        targets = adapter.store.targets().len(),
        metrics = %adapter.served_metric_names().join(","),
        "serving external.metrics.k8s.io/v1beta1 over TLS"
    );
    let handler = Arc::new(ApiHandler {
        adapter: adapter.clone(),
    });
    tokio::select! {
        _ = server::serve_api(api_listener, tls_config, handler, None) => {}
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; shutting down"),
    }
    Ok(())
}
