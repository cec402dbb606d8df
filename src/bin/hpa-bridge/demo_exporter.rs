//! `hpa-bridge demo-exporter`: the demo's exporter on its own.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use hpa_bridge::demo;

use crate::parse_duration;

#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
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

pub(crate) async fn run(args: DemoArgs) -> Result<()> {
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
