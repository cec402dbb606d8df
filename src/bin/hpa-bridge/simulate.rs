//! `hpa-bridge simulate SCENARIO.yaml`: a fault scenario against the real adapter and a model
//! of the HPA on a fast clock.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Args, Debug)]
pub(crate) struct SimulateArgs {
    /// Scenario file (see tests/faults/*.yaml).
    #[arg(value_name = "SCENARIO.yaml")]
    scenario: PathBuf,
    /// Write an SVG plot of replicas, recommendation and floor, with fault periods shaded.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Print only the outcome lines, not the per-sync table.
    #[arg(long)]
    quiet: bool,
}

/// A scenario that ran and broke an invariant or an expectation (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ScenarioFailed(String);

pub(crate) async fn run(args: SimulateArgs) -> Result<()> {
    use hpa_bridge::hpa::{plot, simulate};
    let scenario = simulate::Scenario::load(&args.scenario)?;
    let report = simulate::run(scenario).await?;
    if !args.quiet {
        print!("{}", report.table());
        println!();
    }
    print!("{}", report.summary());
    if let Some(path) = &args.plot {
        std::fs::write(path, plot::render(&report))
            .with_context(|| format!("writing --plot {}", path.display()))?;
    }
    if !report.passed() {
        return Err(ScenarioFailed(format!(
            "scenario {} failed: {} invariant violation(s), {} failed expectation(s)",
            report.name,
            report.violations.len(),
            report.expectations.iter().filter(|e| !e.ok).count()
        ))
        .into());
    }
    Ok(())
}
