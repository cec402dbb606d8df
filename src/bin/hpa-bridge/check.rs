//! `hpa-bridge check`: HPA specs that silently defeat absolute targets, in manifests or a live
//! cluster (docs/check.md).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use hpa_bridge_rules::config::Config;

use crate::parse_duration;

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("input").required(true).multiple(true).args(["files", "cluster"])))]
pub(crate) struct CheckArgs {
    /// Manifest files or directories (YAML or JSON, multi-document, List objects); `-` is stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE_OR_DIR", num_args = 1..)]
    files: Vec<PathBuf>,
    /// Read the live HPAs, their scale targets, the APIService and the adapter's answers
    /// through the kubeconfig.
    #[arg(long)]
    cluster: bool,
    /// Kubeconfig file for --cluster (default: KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context for --cluster.
    #[arg(long)]
    context: Option<String>,
    /// Only HPAs in this namespace (--cluster); all namespaces by default.
    #[arg(short, long)]
    namespace: Option<String>,
    /// The adapter's configuration: which metric names are served. Default: the built-in metrics.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_parser = ["table", "json"], default_value = "table")]
    output: String,
    /// The cluster's --horizontal-pod-autoscaler-tolerance.
    #[arg(long, default_value_t = 0.1)]
    cluster_tolerance: f64,
    /// Kubernetes version of the control plane (decides the tolerance rule, field support and
    /// whether minReplicas 0 is allowed). Default: the newest version hpa-bridge's HPA model knows.
    #[arg(long, default_value_t = hpa_bridge::check::KubeVersion::NEWEST, value_parser = hpa_bridge::check::KubeVersion::parse)]
    kube_version: hpa_bridge::check::KubeVersion,
    /// The recommender's own stabilisation window; shorter HPA scale-down windows are flagged.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    recommender_window: Duration,
    /// Flag scale-up policies that need longer than this to go from minReplicas to maxReplicas.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    max_scale_up_time: Duration,
    /// The HPAScaleToZero feature gate is enabled on a cluster older than 1.37, where it is off
    /// by default (minReplicas 0 is allowed).
    #[arg(long)]
    scale_to_zero: bool,
    /// The Service that should own the external metrics APIService, as namespace/name.
    #[arg(long, default_value = "hpa-bridge/hpa-bridge")]
    adapter_service: String,
}

/// Run `check`; the exit code: 0 clean or warnings only, 1 error findings, 2 unusable input.
pub(crate) fn main(args: CheckArgs) -> i32 {
    match run_check(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}

fn run_check(args: CheckArgs) -> Result<i32> {
    use hpa_bridge::check;
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::from_yaml("")?,
    };
    let (svc_ns, svc_name) = args
        .adapter_service
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .with_context(|| {
            format!(
                "--adapter-service {:?} must be namespace/name",
                args.adapter_service
            )
        })?;
    if !(args.cluster_tolerance.is_finite() && args.cluster_tolerance >= 0.0) {
        bail!("--cluster-tolerance must be a number >= 0");
    }
    let settings = check::CheckSettings {
        cluster_tolerance: args.cluster_tolerance,
        kube_version: args.kube_version,
        recommender_window_s: args.recommender_window.as_secs() as i64,
        max_scale_up_s: args.max_scale_up_time.as_secs() as i64,
        scale_to_zero: args.scale_to_zero,
        adapter_service: (svc_ns.to_string(), svc_name.to_string()),
    };
    let mut inputs = if args.files.is_empty() {
        check::Inputs::default()
    } else {
        check::manifest::load_paths(&args.files)?
    };
    if args.cluster {
        let opts = check::cluster::ClusterOptions {
            kubeconfig: args.kubeconfig.clone(),
            context: args.context.clone(),
            namespace: args.namespace.clone(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let live = runtime.block_on(async {
            let client = check::cluster::client(&opts).await?;
            check::cluster::read(client, &opts, &config, &settings).await
        })?;
        inputs.hpas.extend(live.hpas);
        inputs.workloads.extend(live.workloads);
        inputs.scaled_objects.extend(live.scaled_objects);
        inputs.answers.extend(live.answers);
        inputs.api_service = live.api_service.or(inputs.api_service);
        inputs.custom_api_service = live.custom_api_service.or(inputs.custom_api_service);
        inputs.custom_api_service_unreadable = live.custom_api_service_unreadable;
        inputs.live = true;
    }
    let report = check::check(&inputs, &config, &settings);
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.to_table());
    }
    Ok(report.exit_code())
}
