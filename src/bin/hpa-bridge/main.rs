//! The `hpa-bridge` binary: the command line and its dispatch; each command is a module of its
//! own. `anyhow` lives only in this binary.

mod bench;
mod check;
mod config_command;
mod demo_exporter;
mod explain;
mod serve;
mod simulate;

use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use hpa_bridge_telemetry::logging;

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
    // Its flags are long: help below each flag reads at 80 columns.
    #[command(next_line_help = true)]
    Serve(Box<serve::ServeArgs>),
    /// Run the demo exporter on its own (the local demo also starts it from `demo:` in the config).
    DemoExporter(demo_exporter::DemoArgs),
    /// Run a fault scenario: the real adapter against loopback exporters, polled over HTTPS by a
    /// model of the HPA on a fast clock. Exit code 1 when an invariant or expectation fails, 2
    /// when the scenario cannot be run (unreadable or invalid).
    Simulate(simulate::SimulateArgs),
    /// Find HPA specs that silently defeat absolute targets, in manifests (-f) or a live cluster
    /// (--cluster). Exit code 1 when an error-level finding exists, 2 for unusable input.
    #[command(next_line_help = true)]
    Check(check::CheckArgs),
    /// The configuration file: `config schema` prints its JSON Schema (docs/configuration.md is
    /// generated from it; editors validate config files with it).
    #[command(subcommand)]
    Config(config_command::ConfigCommand),
    /// Measure the serve path, the parse path, scale and memory against their limits; writes
    /// BENCHMARKS.md and benchmarks.json (documented in BENCHMARKS.md). Runs the separate
    /// `hpa-bridge-bench` binary from beside this one (`cargo build --release --bin
    /// hpa-bridge-bench`); `hpa-bridge bench --help` shows its flags.
    #[command(disable_help_flag = true)]
    Bench(bench::BenchArgs),
    /// Explain what an HPA will do next and why, per metric, from the API server and
    /// hpa-bridge's status port (docs/explain.md). Exit code 2 when the HPA cannot be read.
    Explain(explain::ExplainArgs),
}

/// The name kubectl runs a plugin by: `kubectl hpa-bridge ...` executes `kubectl-hpa_bridge`.
const KUBECTL_PLUGIN_NAME: &str = "kubectl-hpa_bridge";

fn main() {
    let invoked_as = std::env::args_os().next().and_then(|a| {
        PathBuf::from(a)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
    });
    let cli = if invoked_as.as_deref() == Some(KUBECTL_PLUGIN_NAME) {
        // Help and errors then name the command as the user typed it.
        let matches = Cli::command().bin_name("kubectl hpa-bridge").get_matches();
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    } else {
        Cli::parse()
    };
    if let Command::Serve(args) = &cli.command {
        if let Err(e) = args.lease_timings().check() {
            Cli::command()
                .error(
                    clap::error::ErrorKind::ValueValidation,
                    format!("--deletion-cost-lease-duration, --deletion-cost-renew-deadline, --deletion-cost-retry-period: {e}"),
                )
                .exit();
        }
    }
    if matches!(cli.command, Command::Simulate(_)) && cli.verbose == 0 {
        // The table is simulate's output; every failed scrape it provokes on purpose would
        // otherwise log a warning. -v brings the adapter's logs back.
        logging::init_logging_with_default("error", cli.log_format == "json");
    } else {
        logging::init_logging(cli.verbose, cli.log_format == "json");
    }
    let simulating = matches!(cli.command, Command::Simulate(_));
    let command = match cli.command {
        Command::Check(args) => std::process::exit(check::main(args)),
        Command::Explain(args) => std::process::exit(explain::main(args)),
        Command::Config(command) => std::process::exit(config_command::main(command)),
        Command::Bench(args) => {
            let err = bench::run(cli.verbose, &cli.log_format, args);
            eprintln!("error: {err:#}");
            std::process::exit(1);
        }
        other => other,
    };
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
        match command {
            Command::Serve(args) => serve::run(*args).await,
            Command::DemoExporter(args) => demo_exporter::run(args).await,
            Command::Simulate(args) => simulate::run(args).await,
            Command::Check(_) | Command::Bench(_) | Command::Explain(_) | Command::Config(_) => {
                unreachable!("handled above")
            }
        }
    });
    // Tasks still running (connections cut by the shutdown timeout, scrapes) end with the
    // runtime; a blocking task must not hold the exit past the shutdown bound.
    runtime.shutdown_timeout(Duration::from_secs(1));
    if let Err(e) = result {
        // Printed once: a JSON log line where logs are collected as JSON, else a plain line.
        if cli.log_format == "json" {
            tracing::error!(error = %format!("{e:#}"), "exiting");
        } else {
            eprintln!("error: {e:#}");
        }
        // `simulate`, like `check`: 1 is a failed scenario, 2 one that could not be run.
        let code = match (simulating, e.downcast_ref::<simulate::ScenarioFailed>()) {
            (true, None) => 2,
            _ => 1,
        };
        std::process::exit(code);
    }
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    hpa_bridge_rules::config::HumanDuration::parse(s).map(|d| d.0)
}

/// A rate: a number from 0.001 to 1000.
pub(crate) fn parse_qps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(q) if (0.001..=1000.0).contains(&q) => Ok(q),
        _ => Err(format!("{s:?} is not a rate in [0.001, 1000] per second")),
    }
}
