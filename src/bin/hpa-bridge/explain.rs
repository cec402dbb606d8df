//! `hpa-bridge explain hpa NAME`: what an HPA will do next and why (docs/explain.md).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use hpa_bridge_rules::clock::SystemClock;

#[derive(Args, Debug)]
pub(crate) struct ExplainArgs {
    #[command(subcommand)]
    what: ExplainWhat,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ExplainWhat {
    /// One HorizontalPodAutoscaler.
    Hpa(ExplainHpaArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ExplainHpaArgs {
    /// The HPA's name.
    name: String,
    /// The HPA's namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context.
    #[arg(long)]
    context: Option<String>,
    /// The adapter's status port (`--status-bind-address`, 127.0.0.1:9101 in the shipped
    /// manifests and chart). It listens on the adapter pod's loopback only: run
    /// `kubectl port-forward -n hpa-bridge deploy/hpa-bridge 9101:9101` first, or point this at
    /// a status port you can reach (the local demo's is http://127.0.0.1:9100).
    #[arg(long, default_value = "http://127.0.0.1:9101")]
    status_url: String,
    /// The Service that should own the external metrics APIService, as namespace/name.
    #[arg(long, default_value = "hpa-bridge/hpa-bridge")]
    adapter_service: String,
    /// Output format.
    #[arg(short, long, value_parser = ["text", "json"], default_value = "text")]
    output: String,
}

/// `explain hpa`: 0 when explained, 2 when the HPA or the cluster cannot be read.
pub(crate) fn main(args: ExplainArgs) -> i32 {
    let ExplainWhat::Hpa(args) = args.what;
    match run_explain(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}

fn run_explain(args: ExplainHpaArgs) -> Result<()> {
    use hpa_bridge::explain;
    let (svc_ns, svc_name) = args
        .adapter_service
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .with_context(|| {
            format!(
                "--adapter-service {:?} must be namespace/name",
                args.adapter_service
            )
        })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let observation = runtime.block_on(async {
        let client =
            hpa_bridge::check::cluster::client(&hpa_bridge::check::cluster::ClusterOptions {
                kubeconfig: args.kubeconfig.clone(),
                context: args.context.clone(),
                namespace: Some(args.namespace.clone()),
            })
            .await?;
        let target = explain::read::Target {
            namespace: &args.namespace,
            name: &args.name,
            status_url: &args.status_url,
            adapter_service: (svc_ns, svc_name),
        };
        let now_ms = hpa_bridge_rules::clock::Clock::now_ms(&SystemClock);
        anyhow::Ok(explain::read::observe(&client, &target, now_ms).await?)
    })?;
    let explanation = explain::explain(&observation)?;
    let adapter_view = runtime.block_on(explain::read::adapter_prediction(
        &args.status_url,
        &args.namespace,
        &args.name,
    ));
    if args.output == "json" {
        let mut doc = serde_json::to_value(&explanation)?;
        if let (Some(obj), Some(view)) = (doc.as_object_mut(), &adapter_view) {
            for key in ["shadow", "prediction"] {
                if let Some(v) = view.get(key) {
                    obj.insert(key.into(), v.clone());
                }
            }
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", explain::text::render(&explanation));
        if let Some(view) = &adapter_view {
            print!("{}", explain::text::render_adapter_view(view));
        }
    }
    Ok(())
}
