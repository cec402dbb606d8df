//! The `hpa-bridge` binary: the command line and process wiring. `anyhow` lives only here.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, CommandFactory, Parser, Subcommand};

use hpa_bridge::api::transport::connection::{ConnectionGate, ConnectionLimits, MIN_HEADER_BYTES};
use hpa_bridge::api::transport::penalty_box::{AddressRange, PenaltyRules};
use hpa_bridge::api::transport::shutdown::{drain, Phase, Shutdown};
use hpa_bridge::api::transport::{self, Listening};
use hpa_bridge::api::{metrics_port, server, ApiHandler};
use hpa_bridge::clock::SystemClock;
use hpa_bridge::config::Config;
use hpa_bridge::deletion_cost::{
    self, DeletionCostWriter, Leadership, LeaseName, LeaseTimings, DEFAULT_LEASE_NAME,
};
use hpa_bridge::engine::{self, EngineBuilder};
use hpa_bridge::lease::Duty;
use hpa_bridge::memory::{MemoryKeeper, MemoryObject, MemoryTimings, DEFAULT_MEMORY_NAME};
use hpa_bridge::source::discovery::Discovery;
use hpa_bridge::telemetry::{self, SelfMetrics};
use hpa_bridge::{auth, demo, tls};

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
    Serve(Box<ServeArgs>),
    /// Run the demo exporter on its own (the local demo also starts it from `demo:` in the config).
    DemoExporter(DemoArgs),
    /// Run a fault scenario: the real adapter against loopback exporters, polled over HTTPS by a
    /// model of the HPA on a fast clock. Exit code 1 when an invariant or expectation fails, 2
    /// when the scenario cannot be run (unreadable or invalid).
    Simulate(SimulateArgs),
    /// Find HPA specs that silently defeat absolute targets, in manifests (-f) or a live cluster
    /// (--cluster). Exit code 1 when an error-level finding exists, 2 for unusable input.
    #[command(next_line_help = true)]
    Check(CheckArgs),
    /// The configuration file: `config schema` prints its JSON Schema (docs/configuration.md is
    /// generated from it; editors validate config files with it).
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Measure the serve path, the parse path, scale and memory against their limits; writes
    /// BENCHMARKS.md and benchmarks.json (documented in BENCHMARKS.md). Runs the separate
    /// `hpa-bridge-bench` binary from beside this one (`cargo build --release --bin
    /// hpa-bridge-bench`); `hpa-bridge bench --help` shows its flags.
    #[command(disable_help_flag = true)]
    Bench(BenchArgs),
    /// Explain what an HPA will do next and why, per metric, from the API server and
    /// hpa-bridge's status port (docs/explain.md). Exit code 2 when the HPA cannot be read.
    Explain(ExplainArgs),
}

#[derive(Args, Debug)]
struct ExplainArgs {
    #[command(subcommand)]
    what: ExplainWhat,
}

#[derive(Subcommand, Debug)]
enum ExplainWhat {
    /// One HorizontalPodAutoscaler.
    Hpa(ExplainHpaArgs),
}

#[derive(Args, Debug)]
struct ExplainHpaArgs {
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

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Print the JSON Schema (draft 2020-12) of the file `serve --config` reads.
    Schema,
    /// Print the configuration reference (docs/configuration.md), written from that schema.
    Reference,
}

#[derive(Args, Debug)]
struct SimulateArgs {
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

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("input").required(true).multiple(true).args(["files", "cluster"])))]
struct CheckArgs {
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

/// Everything after `bench`, handed to `hpa-bridge-bench` unchanged.
#[derive(Args, Debug)]
struct BenchArgs {
    /// Flags of `hpa-bridge-bench`: --quick, --check, --out DIR, --only PARTS.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<std::ffi::OsString>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// YAML configuration file (see examples/local.yaml). Without it, the three default metrics are served
    /// and nothing is scraped.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Run the local demo: examples/local.yaml, built in (the demo exporter on 127.0.0.1:9101,
    /// five minutes of history). In a container: `docker run --network host IMAGE serve --demo`.
    #[arg(long, conflicts_with = "config")]
    demo: bool,
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
    /// Address serving /metrics (Prometheus). On a loopback address it also serves /status (the
    /// explanation of every answer). Empty disables it. A non-loopback address needs
    /// --metrics-secure, or --allow-insecure-metrics-bind to serve /metrics in the clear.
    #[arg(long, default_value = "127.0.0.1:9100")]
    metrics_bind_address: String,
    /// Serve the metrics port over TLS (the serving certificate of --secure-port) with the same
    /// delegated authentication and authorization: a SubjectAccessReview of the non-resource
    /// verb `get` on the path (/metrics, /status), as controller-runtime's secure metrics do.
    #[arg(long)]
    metrics_secure: bool,
    /// Allow --metrics-bind-address on a non-loopback address without --metrics-secure: anyone
    /// who can connect reads /metrics. The status pages are never served there.
    #[arg(long)]
    allow_insecure_metrics_bind: bool,
    /// A loopback address serving the status pages (/status and below) over plain HTTP, for when
    /// --metrics-bind-address faces the network. Empty: the status pages are served on the
    /// metrics address only when it is a loopback one.
    #[arg(long, default_value = "")]
    status_bind_address: String,
    /// Open connections per listener (API, metrics); the excess is closed at accept and counted
    /// in hpa_bridge_connections_refused_total.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Open connections per client IP address per listener; the excess is closed at accept.
    #[arg(long, default_value_t = 64)]
    max_connections_per_client: usize,
    /// Time a client has for the TLS handshake and a complete request head; HTTP/1.1
    /// keep-alive connections must send their next request head within it too.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    request_header_timeout: Duration,
    /// Time an HTTP/2 connection may stay open without a request.
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Largest request head in bytes (request line and headers; at least 8192). Larger heads
    /// get 431 on HTTP/1.1; on HTTP/2 it is the advertised header list size.
    #[arg(long, default_value_t = 32 * 1024)]
    max_request_header_bytes: usize,
    /// Connections from one client address that misbehave (no TLS handshake or no first
    /// request head within --request-header-timeout, or an HTTP/1.1 head over
    /// --max-request-header-bytes) before the address is kept out of that listener for
    /// --client-penalty (see --client-penalty-kernel-drop). An address that got a request
    /// past authentication and authorization on the listener within the last 10 minutes is
    /// never refused. 0 turns this off.
    #[arg(long, default_value_t = 5)]
    client_penalty_strikes: u32,
    /// The window in which --client-penalty-strikes must fall.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    client_penalty_window: Duration,
    /// How long a client address that struck out is kept out.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    client_penalty: Duration,
    /// Client addresses (CIDR ranges or single addresses, comma-separated) never struck nor
    /// refused: for example the nodes' addresses, from which the kubelet's anonymous probes come.
    #[arg(long, value_delimiter = ',')]
    client_penalty_exempt: Vec<AddressRange>,
    /// Have the kernel drop the TCP segments of a penalized IPv4 address before accept (a
    /// socket filter on the listener), so its reconnects cost the server nothing; its clients'
    /// connects time out instead of being reset. false refuses every penalized connection at
    /// accept, as IPv6 addresses always are.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    client_penalty_kernel_drop: bool,
    /// After SIGTERM, how long /readyz fails while requests are still served, so endpoints
    /// and the aggregator stop routing here first (kube-apiserver's --shutdown-delay-duration).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    shutdown_delay: Duration,
    /// After the delay, how long in-flight requests get to finish before the process exits.
    /// terminationGracePeriodSeconds must cover the delay plus this.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    shutdown_timeout: Duration,
    /// Kubeconfig for pod discovery (scrape.kubernetes). Without it, KUBECONFIG, ~/.kube/config or the
    /// in-cluster service account are used, in that order.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Write `controller.kubernetes.io/pod-deletion-cost` on the pods of Deployments annotated
    /// `hpa-bridge.io/deletion-cost: "stateful-index"`: each Running pod's fresh stateful index
    /// (docs/deletion-cost.md). Only the replica holding --deletion-cost-lease writes. Needs
    /// scrape.kubernetes, `patch` on pods and get, create and update on that Lease
    /// (manifests/overlays/deletion-cost).
    #[arg(long)]
    write_deletion_cost: bool,
    /// Deletion-cost patches per second, across the cluster's pods (one replica writes).
    #[arg(long, default_value_t = 10.0, value_parser = parse_qps)]
    deletion_cost_qps: f64,
    /// The coordination.k8s.io Lease that elects the one replica writing deletion costs.
    /// Without a namespace: POD_NAMESPACE (the downward API), else the kubeconfig's namespace
    /// (in a pod, the service account's).
    #[arg(long, value_name = "[NAMESPACE/]NAME", default_value = DEFAULT_LEASE_NAME)]
    deletion_cost_lease: LeaseName,
    /// How long another replica waits, on its own clock, for the writer to renew the lease
    /// before it takes over (whole seconds).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    deletion_cost_lease_duration: Duration,
    /// How long the writer keeps writing without renewing the lease; shorter than
    /// --deletion-cost-lease-duration.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    deletion_cost_renew_deadline: Duration,
    /// The time between two reads (or renewals) of the lease; shorter than
    /// --deletion-cost-renew-deadline.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    deletion_cost_retry_period: Duration,
    /// Keep no memory across restarts: a restarted replica then rules a target unreachable
    /// since its start in or out by its workload alone (docs/unknown-input.md). Without this,
    /// with scrape.kubernetes, the replica holding --memory-lease writes --memory-config-map.
    #[arg(long)]
    no_memory: bool,
    /// The ConfigMap that keeps which targets carried which series and their last values, read
    /// at every start. Needs get, create and update on it (manifests/base/rbac.yaml).
    #[arg(long, value_name = "[NAMESPACE/]NAME", default_value = DEFAULT_MEMORY_NAME)]
    memory_config_map: LeaseName,
    /// The Lease that elects the one replica writing the memory; its timings are the
    /// --deletion-cost-lease-* ones.
    #[arg(long, value_name = "[NAMESPACE/]NAME", default_value = DEFAULT_MEMORY_NAME)]
    memory_lease: LeaseName,
    /// At most one write of the memory per this, and only when what it holds changed.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    memory_write_interval: Duration,
    /// Predict no HPA: without this, with scrape.kubernetes, the adapter watches the HPAs of
    /// the served namespaces, explains the next sync of each one that reads its metrics (or is
    /// annotated hpa-bridge.io/shadow-metric) and checks it after that sync (docs/explain.md).
    /// Needs list and watch on HPAs and get on the targets' scale (manifests/base/rbac.yaml).
    #[arg(long)]
    no_hpa_predictions: bool,
    /// The longest an HPA goes without being predicted again; each is predicted just after
    /// each of its syncs.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    hpa_prediction_interval: Duration,
    #[command(flatten)]
    auth: Box<AuthArgs>,
}

/// Aggregated-API security (docs/hpa-behaviour.md §3.2–3.3). The flag names are k8s.io/apiserver's.
#[derive(Args, Debug)]
struct AuthArgs {
    /// CA bundle (PEM) that verifies the front proxy's client certificate (the aggregator's
    /// --proxy-client-cert-file). Replaces every requestheader-* key of the
    /// kube-system/extension-apiserver-authentication ConfigMap. Re-read periodically.
    #[arg(long, value_name = "FILE")]
    requestheader_client_ca_file: Option<PathBuf>,
    /// Common names allowed on the front proxy's certificate (comma list). Empty allows any CN
    /// signed by --requestheader-client-ca-file.
    #[arg(long, value_name = "CN", value_delimiter = ',')]
    requestheader_allowed_names: Vec<String>,
    /// Headers carrying the user name, first non-empty wins.
    #[arg(
        long,
        value_name = "HEADER",
        value_delimiter = ',',
        default_value = "X-Remote-User"
    )]
    requestheader_username_headers: Vec<String>,
    /// Headers carrying groups; every value counts.
    #[arg(
        long,
        value_name = "HEADER",
        value_delimiter = ',',
        default_value = "X-Remote-Group"
    )]
    requestheader_group_headers: Vec<String>,
    /// Header prefixes carrying extra attributes (key lower-cased and %-decoded).
    #[arg(
        long,
        value_name = "PREFIX",
        value_delimiter = ',',
        default_value = "X-Remote-Extra-"
    )]
    requestheader_extra_headers_prefix: Vec<String>,
    /// CA bundle (PEM) that verifies client certificates: user = CN, groups = O. Replaces the
    /// ConfigMap's client-ca-file. Re-read periodically.
    #[arg(long, value_name = "FILE")]
    client_ca_file: Option<PathBuf>,
    /// Kubeconfig for TokenReview and for reading the extension-apiserver-authentication ConfigMap.
    /// Without it, the in-cluster configuration is used when running in a pod.
    #[arg(long, value_name = "FILE")]
    authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig for SubjectAccessReview. Defaults to --authentication-kubeconfig, then in-cluster.
    #[arg(long, value_name = "FILE")]
    authorization_kubeconfig: Option<PathBuf>,
    /// Do not read the extension-apiserver-authentication ConfigMap; trust only the CA flags.
    #[arg(long)]
    authentication_skip_lookup: bool,
    /// Start even if the ConfigMap cannot be read (it is retried on every reload).
    #[arg(long)]
    authentication_tolerate_lookup_failure: bool,
    /// Groups allowed without a SubjectAccessReview (comma list).
    #[arg(
        long,
        value_name = "GROUP",
        value_delimiter = ',',
        default_value = "system:masters"
    )]
    authorization_always_allow_groups: Vec<String>,
    /// How long TokenReview answers are cached.
    #[arg(long, value_name = "TTL", default_value = "10s", value_parser = parse_duration)]
    authentication_token_webhook_cache_ttl: Duration,
    /// How long allowing SubjectAccessReview answers are cached.
    #[arg(long, value_name = "TTL", default_value = "10s", value_parser = parse_duration)]
    authorization_webhook_cache_authorized_ttl: Duration,
    /// How long denying SubjectAccessReview answers are cached (shorter: a new RoleBinding
    /// should take effect quickly).
    #[arg(long, value_name = "TTL", default_value = "5s", value_parser = parse_duration)]
    authorization_webhook_cache_unauthorized_ttl: Duration,
    /// How often CA files and the ConfigMap are re-read.
    #[arg(long, default_value = "60s", value_parser = parse_duration, hide = true)]
    authentication_reload_interval: Duration,
    /// How often the serving certificate files are checked for changes.
    #[arg(long, default_value = "10s", value_parser = parse_duration, hide = true)]
    tls_reload_interval: Duration,
}

impl AuthArgs {
    fn running_in_cluster() -> bool {
        std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
    }

    /// Is any authentication configured? Without it the server stays loopback-only.
    fn configured(&self) -> bool {
        self.requestheader_client_ca_file.is_some()
            || self.client_ca_file.is_some()
            || self.authentication_kubeconfig.is_some()
            || self.authorization_kubeconfig.is_some()
            || Self::running_in_cluster()
    }
}

/// A client configuration from an explicit kubeconfig file; errors name the flag.
async fn kubeconfig_file(path: &std::path::Path, what: &str) -> Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("{what}: reading {}", path.display()))?;
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .with_context(|| format!("{what}: {}", path.display()))
}

async fn kube_client(kubeconfig: Option<&PathBuf>, what: &str) -> Result<Option<kube::Client>> {
    let config = match kubeconfig {
        Some(path) => kubeconfig_file(path, what).await?,
        None if AuthArgs::running_in_cluster() => kube::Config::incluster()
            .with_context(|| format!("{what}: in-cluster configuration"))?,
        None => return Ok(None),
    };
    Ok(Some(
        kube::Client::try_from(config).with_context(|| format!("{what}: building the client"))?,
    ))
}

/// The gatekeeper and the TLS client-certificate verifier, if authentication is configured.
async fn build_auth(
    a: &AuthArgs,
) -> Result<
    Option<(
        Arc<auth::AuthGate>,
        Arc<dyn rustls::server::danger::ClientCertVerifier>,
    )>,
> {
    if !a.configured() {
        return Ok(None);
    }
    const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
    let authn_client = kube_client(
        a.authentication_kubeconfig.as_ref(),
        "--authentication-kubeconfig",
    )
    .await?;
    let authz_client = match &a.authorization_kubeconfig {
        Some(p) => kube_client(Some(p), "--authorization-kubeconfig").await?,
        None => authn_client.clone(),
    };
    let settings = auth::TrustSettings {
        requestheader_client_ca_file: a.requestheader_client_ca_file.clone(),
        requestheader: auth::requestheader::RequestHeaderConfig {
            allowed_names: a.requestheader_allowed_names.clone(),
            username_headers: a.requestheader_username_headers.clone(),
            group_headers: a.requestheader_group_headers.clone(),
            extra_headers_prefixes: a.requestheader_extra_headers_prefix.clone(),
        },
        client_ca_file: a.client_ca_file.clone(),
        lookup: if a.authentication_skip_lookup {
            None
        } else {
            authn_client.clone()
        },
    };
    let trust = auth::TrustStore::load(settings, a.authentication_tolerate_lookup_failure)
        .await
        .context("loading client certificate trust")?;
    trust.spawn_reloader(a.authentication_reload_interval);
    {
        let t = trust.current();
        let (requestheader_ca, client_ca) = t.origins();
        tracing::info!(
            requestheader_ca,
            client_ca,
            token_review = authn_client.is_some(),
            subject_access_review = authz_client.is_some(),
            "authentication configured"
        );
    }
    let verifier = trust.client_verifier();
    let gate = auth::AuthGate {
        authenticator: auth::Authenticator {
            trust,
            tokens: authn_client.map(|c| {
                auth::TokenReviewer::new(
                    c,
                    a.authentication_token_webhook_cache_ttl,
                    REVIEW_TIMEOUT,
                )
            }),
        },
        authorizer: auth::Authorizer::new(
            authz_client,
            a.authorization_always_allow_groups.clone(),
            a.authorization_webhook_cache_authorized_ttl,
            a.authorization_webhook_cache_unauthorized_ttl,
            REVIEW_TIMEOUT,
        ),
    };
    Ok(Some((Arc::new(gate), verifier)))
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

/// A rate: a number from 0.001 to 1000.
fn parse_qps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(q) if (0.001..=1000.0).contains(&q) => Ok(q),
        _ => Err(format!("{s:?} is not a rate in [0.001, 1000] per second")),
    }
}

impl ServeArgs {
    fn lease_timings(&self) -> LeaseTimings {
        LeaseTimings {
            lease_duration: self.deletion_cost_lease_duration,
            renew_deadline: self.deletion_cost_renew_deadline,
            retry_period: self.deletion_cost_retry_period,
        }
    }
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
        telemetry::init_logging_with_default("error", cli.log_format == "json");
    } else {
        telemetry::init_logging(cli.verbose, cli.log_format == "json");
    }
    let simulating = matches!(cli.command, Command::Simulate(_));
    let command = match cli.command {
        Command::Check(args) => std::process::exit(check_main(args)),
        Command::Explain(args) => std::process::exit(explain_main(args)),
        Command::Config(ConfigCommand::Schema) => {
            let schema = Config::json_schema();
            match serde_json::to_string_pretty(&schema) {
                Ok(text) => println!("{text}"),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(1);
                }
            }
            return;
        }
        Command::Config(ConfigCommand::Reference) => {
            print!(
                "{}",
                hpa_bridge::config_reference::render(&Config::json_schema())
            );
            return;
        }
        Command::Bench(args) => {
            let err = run_bench_binary(cli.verbose, &cli.log_format, args);
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
            Command::Serve(args) => serve(*args).await,
            Command::DemoExporter(args) => demo_exporter(args).await,
            Command::Simulate(args) => simulate(args).await,
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
        let code = match (simulating, e.downcast_ref::<ScenarioFailed>()) {
            (true, None) => 2,
            _ => 1,
        };
        std::process::exit(code);
    }
}

/// A scenario that ran and broke an invariant or an expectation (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ScenarioFailed(String);

async fn simulate(args: SimulateArgs) -> Result<()> {
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

/// Run `check`; the exit code: 0 clean or warnings only, 1 error findings, 2 unusable input.
/// `explain hpa`: 0 when explained, 2 when the HPA or the cluster cannot be read.
fn explain_main(args: ExplainArgs) -> i32 {
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
        let now_ms = hpa_bridge::clock::Clock::now_ms(&SystemClock);
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

fn check_main(args: CheckArgs) -> i32 {
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

/// Replace this process with `hpa-bridge-bench` from the same directory, forwarding the
/// arguments; returns only on failure. The bench is its own binary so that the server links
/// none of its code.
fn run_bench_binary(verbose: u8, log_format: &str, args: BenchArgs) -> anyhow::Error {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return anyhow::anyhow!("locating the hpa-bridge binary: {e}"),
    };
    let bench = exe.with_file_name(format!("hpa-bridge-bench{}", std::env::consts::EXE_SUFFIX));
    if !bench.is_file() {
        return anyhow::anyhow!(
            "`hpa-bridge bench` runs the separate hpa-bridge-bench binary, which is not beside {}; \
             build it with `cargo build --release --bin hpa-bridge-bench` (or run \
             `cargo run --release --bin hpa-bridge-bench -- ARGS`)",
            exe.display()
        );
    }
    let mut cmd = std::process::Command::new(&bench);
    if verbose > 0 {
        cmd.arg(format!("-{}", "v".repeat(usize::from(verbose))));
    }
    cmd.arg("--log-format").arg(log_format).args(&args.args);
    #[cfg(unix)]
    let failure = {
        use std::os::unix::process::CommandExt;
        anyhow::Error::from(cmd.exec())
    };
    #[cfg(not(unix))]
    let failure = match cmd.status() {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => anyhow::Error::from(e),
    };
    failure.context(format!("running {}", bench.display()))
}

async fn serve(args: ServeArgs) -> Result<()> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None if args.demo => Config::from_yaml(demo::LOCAL_CONFIG)?,
        None => Config::from_yaml("")?,
    };
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    // Without authentication anybody who can connect could read every metric; keep the
    // unauthenticated mode to this machine.
    if !args.auth.configured() && !args.bind_address.is_loopback() {
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

    // Discovery starts first: it fills the target set the engine scrapes, and its watch
    // caches are the cluster facts the engine is built with.
    let static_targets = engine::static_targets(&config);
    let targets = Arc::new(engine::store_for(&config));
    targets.set_targets(static_targets.clone());
    let scrape_interval = config.scrape.interval.0;
    if args.write_deletion_cost && config.scrape.kubernetes.is_none() {
        bail!("--write-deletion-cost needs scrape.kubernetes in the config: it writes to the pods discovery finds");
    }
    let mut leadership = None;
    let mut memory_status = None;
    let mut leases = Vec::new();
    let mut hpa_watch = None;
    let discovery = match &config.scrape.kubernetes {
        Some(k) => {
            let client = discovery_client(args.kubeconfig.as_deref()).await?;
            if !args.no_hpa_predictions {
                hpa_watch = Some((
                    client.clone(),
                    k.namespaces.clone(),
                    Arc::new(hpa_bridge::prediction::Predictions::default()),
                ));
            }
            let namespace_of = |name: &LeaseName| {
                name.namespace
                    .clone()
                    .or_else(|| {
                        std::env::var("POD_NAMESPACE")
                            .ok()
                            .filter(|s| !s.is_empty())
                    })
                    .unwrap_or_else(|| client.default_namespace().to_string())
            };
            // The memory is read before discovery starts, so that no target set reaches the
            // store before it: a remembered target is never seen unscraped by an answer.
            let memory = (!args.no_memory).then(|| {
                MemoryObject::new(
                    client.clone(),
                    &namespace_of(&args.memory_config_map),
                    &args.memory_config_map.name,
                )
            });
            let memory_read = match &memory {
                Some(object) => Some(read_memory(object, &targets).await),
                None => None,
            };
            let discovery =
                Discovery::start(client.clone(), k.clone(), targets.clone(), static_targets);
            if let Some(object) = memory {
                let lease = Leadership::start(
                    Duty::Memory,
                    client.clone(),
                    (&namespace_of(&args.memory_lease), &args.memory_lease.name),
                    deletion_cost::identity(),
                    args.lease_timings(),
                    clock.clone(),
                    metrics.clone(),
                );
                let keeper = MemoryKeeper::new(
                    targets.clone(),
                    object,
                    lease.clone(),
                    clock.clone(),
                    metrics.clone(),
                    MemoryTimings {
                        write_interval: args.memory_write_interval,
                        hold: Duration::from_secs(300),
                    },
                );
                if let Some(outcome) = memory_read {
                    keeper.read_at_start(outcome);
                }
                memory_status = Some(keeper.status());
                keeper.spawn();
                leases.push(lease);
            }
            if args.write_deletion_cost {
                let lease = &args.deletion_cost_lease;
                let namespace = namespace_of(lease);
                let l = Leadership::start(
                    Duty::DeletionCost,
                    client.clone(),
                    (&namespace, &lease.name),
                    deletion_cost::identity(),
                    args.lease_timings(),
                    clock.clone(),
                    metrics.clone(),
                );
                DeletionCostWriter::new(
                    discovery.clone(),
                    targets.clone(),
                    clock.clone(),
                    metrics.clone(),
                    l.clone(),
                    &config,
                    args.deletion_cost_qps,
                )
                .spawn();
                leases.push(l.clone());
                leadership = Some(l);
            }
            Some(discovery)
        }
        None => None,
    };
    let mut builder = EngineBuilder::new(config, clock.clone())
        .metrics(metrics.clone())
        .targets(targets);
    if let Some(d) = &discovery {
        builder = builder.cluster(d.clone());
        let annotated = d.clone();
        builder = builder.status_section((
            "deletionCostAnnotationsUnknown",
            Arc::new(move || unknown_deletion_cost_json(&annotated)),
        ));
        tokio::spawn(warn_unknown_deletion_cost(d.clone()));
    }
    if let Some(l) = &leadership {
        let l = l.clone();
        builder = builder.status_section(("deletionCostLease", Arc::new(move || l.status())));
    }
    if let Some(shown) = memory_status {
        builder = builder.status_section(("memory", Arc::new(shown)));
    }
    if let Some((_, _, predictions)) = &hpa_watch {
        let predictions = predictions.clone();
        builder = builder.status_section(("hpas", Arc::new(move || predictions.document(None))));
    }
    let engine = builder.build()?;
    let adapter = engine.adapter().clone();
    // Without predictions their families would only ever say 0.
    metrics.set_absent(
        &hpa_bridge::telemetry::HPA_PREDICTION_FAMILIES,
        hpa_watch.is_none(),
    );
    let predictions = hpa_watch.map(|(client, namespaces, predictions)| {
        hpa_bridge::prediction::HpaWatch {
            client,
            namespaces,
            adapter: adapter.clone(),
            predictions: predictions.clone(),
            interval: args.hpa_prediction_interval,
        }
        .spawn();
        predictions
    });
    let hpa_panel = predictions.map(|p| -> metrics_port::PagePanel {
        Arc::new(move || hpa_bridge::prediction::panel::html(&p))
    });
    let pages = metrics_port::MetricsPages::new(adapter.clone()).with_hpa_panel(hpa_panel);
    let cert = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(c), Some(k)) => tls::ServingCert::from_files(c, k)?,
        _ => {
            let cert = tls::ServingCert::self_signed(&args.self_signed_names)?;
            tracing::info!(fingerprint = %cert.leaf_fingerprint(), "generated a self-signed serving certificate (sha256)");
            cert
        }
    };
    cert.spawn_reloader(args.auth.tls_reload_interval);
    let auth = build_auth(&args.auth).await?;
    let tls_config = Arc::new(tls::server_config(
        cert,
        auth.as_ref().map(|(_, verifier)| verifier.clone()),
    )?);
    let gate = auth.map(|(gate, _)| gate as Arc<dyn transport::Gatekeeper>);

    let limits = ConnectionLimits {
        max_connections: args.max_connections.max(1),
        max_connections_per_client: args.max_connections_per_client.max(1),
        header_timeout: args.request_header_timeout,
        idle_timeout: args.idle_timeout,
        max_header_bytes: args.max_request_header_bytes,
        penalty: PenaltyRules {
            strikes: args.client_penalty_strikes,
            window: args.client_penalty_window,
            penalty: args.client_penalty,
            exempt: args.client_penalty_exempt.clone(),
            drop_in_kernel: args.client_penalty_kernel_drop,
        },
    };
    if limits.max_header_bytes < MIN_HEADER_BYTES {
        bail!("--max-request-header-bytes must be at least {MIN_HEADER_BYTES}");
    }
    let shutdown = Shutdown::new();
    let api_addr = SocketAddr::new(args.bind_address, args.secure_port);
    let api_listener = tokio::net::TcpListener::bind(api_addr)
        .await
        .with_context(|| format!("binding --secure-port on {api_addr}"))?;
    let api_addr = api_listener.local_addr()?;
    let mut gates = Vec::new();
    // The accept loops, awaited at shutdown so that nothing is accepted after the drain starts.
    let mut accept_loops = Vec::new();
    if !args.metrics_bind_address.is_empty() {
        let listener = tokio::net::TcpListener::bind(&args.metrics_bind_address)
            .await
            .with_context(|| {
                format!(
                    "binding --metrics-bind-address {}",
                    args.metrics_bind_address
                )
            })?;
        let addr = listener.local_addr()?;
        let loopback = addr.ip().is_loopback();
        if args.metrics_secure && gate.is_none() {
            bail!(
                "--metrics-secure needs authentication configured (the same flags as the API: \
                 --client-ca-file, --authentication-kubeconfig, or running in a cluster)"
            );
        }
        if !loopback && !args.metrics_secure && !args.allow_insecure_metrics_bind {
            bail!(
                "refusing to serve /metrics over plain HTTP on {addr} without authentication: use \
                 --metrics-secure, a loopback --metrics-bind-address, or --allow-insecure-metrics-bind"
            );
        }
        if !loopback && !args.metrics_secure {
            tracing::warn!(%addr, "serving /metrics over plain HTTP without authentication (--allow-insecure-metrics-bind)");
        }
        let metrics_gate = ConnectionGate::new("metrics", limits.clone(), metrics.clone());
        gates.push(metrics_gate.clone());
        let secure = args.metrics_secure.then(|| gate.clone()).flatten();
        let listening = Listening {
            gate: metrics_gate,
            tls: args.metrics_secure.then(|| tls_config.clone()),
            shutdown: shutdown.clone(),
            gatekeeper: secure,
        };
        tracing::info!(
            %addr,
            tls = args.metrics_secure,
            status_pages = loopback,
            "serving /metrics"
        );
        accept_loops.push(tokio::spawn(metrics_port::serve_metrics_on(
            listener,
            listening,
            pages.clone(),
            loopback,
        )));
    }
    if !args.status_bind_address.is_empty() {
        let listener = tokio::net::TcpListener::bind(&args.status_bind_address)
            .await
            .with_context(|| {
                format!("binding --status-bind-address {}", args.status_bind_address)
            })?;
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            bail!("--status-bind-address {addr} must be a loopback address: the status pages show every workload, label and target");
        }
        let status_gate = ConnectionGate::new("status", limits.clone(), metrics.clone());
        gates.push(status_gate.clone());
        tracing::info!(%addr, "serving /status over HTTP");
        accept_loops.push(tokio::spawn(metrics_port::serve_metrics_on(
            listener,
            Listening {
                gate: status_gate,
                tls: None,
                shutdown: shutdown.clone(),
                gatekeeper: None,
            },
            pages.clone(),
            true,
        )));
    }

    let engine_targets = engine.targets();
    let (scraper, prometheus) = (engine.scraper().cloned(), engine.prometheus().cloned());
    let target_count = engine_targets.targets().len();
    if let Some(p) = prometheus {
        // Ready at once: readiness is the adapter's own health. Gating it on Prometheus would
        // take every replica out of the Service during a Prometheus outage, turning precise
        // per-request 503s into an unavailable APIService, which also breaks discovery and
        // namespace deletion (docs/hpa-behaviour.md §3.1). The probe only reports the version.
        match discovery {
            // The pod set must be known first: before it, deleted pods would still hold the
            // floor and new ones would not make it incomplete.
            Some(d) => {
                let ready = adapter.clone();
                tokio::spawn(async move {
                    d.wait_synced().await;
                    ready.mark_ready();
                });
            }
            None => adapter.mark_ready(),
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
        let interval = scrape_interval;
        let scrape_adapter = adapter.clone();
        tokio::spawn(async move {
            // Ready only once the pods are known: a first round without them would serve a
            // floor that misses every pod (docs/hpa-behaviour.md §1.6: never serve a guess).
            if let Some(d) = &discovery {
                d.wait_synced().await;
            }
            scraper
                .run(interval, move || scrape_adapter.mark_ready())
                .await;
        });
    }

    tracing::info!(
        addr = %api_addr,
        targets = target_count,
        metrics = %adapter.served_metric_names().join(","),
        "serving external.metrics.k8s.io/v1beta1 over TLS"
    );
    let handler = Arc::new(ApiHandler::new(adapter.clone()));
    let api_gate = ConnectionGate::new("api", limits, adapter.self_metrics());
    gates.push(api_gate.clone());
    accept_loops.push(tokio::spawn(server::serve_api_on(
        api_listener,
        Listening {
            gate: api_gate,
            tls: Some(tls_config),
            shutdown: shutdown.clone(),
            gatekeeper: gate,
        },
        handler,
    )));
    let signal = termination_signal().await?;
    // A second Ctrl-C means "now": an operator at a terminal should not wait out the delay.
    tokio::spawn(async {
        if let Ok(mut int) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        {
            int.recv().await;
            eprintln!("second interrupt: exiting without draining");
            std::process::exit(130);
        }
    });
    // The leases are given up at once, so another replica takes over writing while this one
    // still serves.
    let resigning = (!leases.is_empty()).then(|| {
        tokio::spawn(futures::future::join_all(
            leases.into_iter().map(|l| async move { l.resign().await }),
        ))
    });
    // kube-apiserver's order (--shutdown-delay-duration): fail readiness, keep serving while
    // the endpoints and the aggregator catch up, then stop accepting and drain.
    shutdown.advance(Phase::Terminating);
    tracing::info!(
        signal,
        delay = ?args.shutdown_delay,
        "shutting down: /readyz fails; still serving for the shutdown delay"
    );
    tokio::time::sleep(args.shutdown_delay).await;
    shutdown.advance(Phase::Stopping);
    // Each loop returns at its next poll; until then it could still accept a connection that
    // the drain below would not count.
    let _ = tokio::time::timeout(
        args.shutdown_timeout,
        futures::future::join_all(accept_loops),
    )
    .await;
    let open: usize = gates.iter().map(|g| g.open()).sum();
    tracing::info!(
        connections = open,
        timeout = ?args.shutdown_timeout,
        "shutdown delay over: listeners closed; draining in-flight requests"
    );
    let left = drain(&gates, args.shutdown_timeout).await;
    if let Some(resigning) = resigning {
        // A release that cannot finish is not waited for: the lease then expires.
        let _ = tokio::time::timeout(args.deletion_cost_renew_deadline, resigning).await;
    }
    if left == 0 {
        tracing::info!("drained; exiting");
    } else {
        tracing::warn!(
            connections = left,
            "shutdown timeout reached; closing the remaining connections"
        );
    }
    Ok(())
}

/// The Deployments whose `hpa-bridge.io/deletion-cost` value opts nothing in, for `/status`.
fn unknown_deletion_cost_json(discovery: &Discovery) -> serde_json::Value {
    discovery
        .unknown_deletion_cost_values()
        .into_iter()
        .map(|(w, value)| {
            serde_json::json!({
                "namespace": w.namespace,
                "name": w.name,
                "value": value,
                "expected": hpa_bridge::cluster::DELETION_COST_FROM_INDEX,
            })
        })
        .collect()
}

/// Logs each Deployment annotated `hpa-bridge.io/deletion-cost` with a value that opts nothing
/// in, once per Deployment and value: its owner meant to opt in, and nothing else would say
/// that its pods get no deletion cost.
async fn warn_unknown_deletion_cost(discovery: Arc<Discovery>) {
    discovery.wait_synced().await;
    let mut warned = std::collections::BTreeSet::new();
    loop {
        for (w, value) in discovery.unknown_deletion_cost_values() {
            if warned.insert((w.clone(), value.clone())) {
                tracing::warn!(
                    deployment = %format!("{}/{}", w.namespace, w.name),
                    annotation = hpa_bridge::cluster::DELETION_COST_OPT_IN,
                    %value,
                    expected = hpa_bridge::cluster::DELETION_COST_FROM_INDEX,
                    "unknown deletion-cost annotation value: the Deployment is not opted in"
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
}

/// SIGTERM (how Kubernetes stops a pod) or SIGINT (Ctrl-C); the name of the one received.
async fn termination_signal() -> Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

/// The Kubernetes client for discovery: an explicit kubeconfig, or whatever `Config::infer`
/// finds (KUBECONFIG, ~/.kube/config, then the in-cluster service account).
/// Read the memory a predecessor wrote and give it to the store, retrying for up to 10 s (an
/// API server that is slow to answer a starting pod); after that this replica goes on without
/// it. Returns the memory's time, or why it could not be read.
async fn read_memory(
    object: &MemoryObject,
    store: &hpa_bridge::store::Store,
) -> std::result::Result<Option<i64>, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match object.read().await {
            Ok(Some(memory)) => {
                let written_at = memory.written_at;
                tracing::info!(config_map = %object.describe(), targets = memory.targets.len(), series = memory.series_count(), written_at = %hpa_bridge::clock::rfc3339(written_at), "read the memory: targets never scraped since this start hold their remembered series");
                store.remember(memory);
                return Ok(Some(written_at));
            }
            Ok(None) => {
                tracing::info!(config_map = %object.describe(), "no memory written yet");
                return Ok(None);
            }
            Err(e)
                if tokio::time::Instant::now() >= deadline
                    || matches!(e.kind(), "forbidden" | "malformed") =>
            {
                tracing::warn!(error = %e, "the memory could not be read: going on without it; a target never scraped since this start is ruled in or out by its workload alone (docs/unknown-input.md)");
                return Err(e.to_string());
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading the memory failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

async fn discovery_client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => kubeconfig_file(path, "--kubeconfig").await?,
        None => kube::Config::infer()
            .await
            .context("scrape.kubernetes: no Kubernetes configuration found (in-cluster, KUBECONFIG or --kubeconfig)")?,
    };
    tracing::info!(server = %config.cluster_url, "kubernetes discovery enabled");
    kube::Client::try_from(config).context("building the Kubernetes client")
}
