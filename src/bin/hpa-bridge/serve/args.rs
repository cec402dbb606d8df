//! `serve`'s flags.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use hpa_bridge_duties::deletion_cost::{LeaseName, LeaseTimings, DEFAULT_LEASE_NAME};
use hpa_bridge_duties::memory::DEFAULT_MEMORY_NAME;
use hpa_bridge_server::api::transport::connection::{ConnectionLimits, MIN_HEADER_BYTES};
use hpa_bridge_server::api::transport::penalty_box::{AddressRange, PenaltyRules};

use super::auth::AuthArgs;
use crate::{parse_duration, parse_qps};

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// YAML configuration file (see examples/local.yaml). Without it, the three default metrics are served
    /// and nothing is scraped.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Run the local demo: examples/local.yaml, built in (the demo exporter on 127.0.0.1:9101,
    /// five minutes of history). In a container: `docker run --network host IMAGE serve --demo`.
    #[arg(long, conflicts_with = "config")]
    pub(crate) demo: bool,
    /// The port on which to serve HTTPS.
    #[arg(long, default_value_t = 6443)]
    pub(crate) secure_port: u16,
    /// The IP address on which to listen for the --secure-port port. Without authentication configured,
    /// only loopback addresses are allowed.
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) bind_address: IpAddr,
    /// File containing the default x509 certificate for HTTPS (PEM, leaf first, then intermediates).
    /// Re-read when it changes. Without it, a self-signed certificate is generated at startup.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// File containing the default x509 private key matching --tls-cert-file (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub(crate) tls_private_key_file: Option<PathBuf>,
    /// Extra DNS names or IPs for the self-signed certificate (e.g. hpa-bridge.hpa-bridge.svc).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub(crate) self_signed_names: Vec<String>,
    /// Address serving /metrics (Prometheus). On a loopback address it also serves /status (the
    /// explanation of every answer). Empty disables it. A non-loopback address needs
    /// --metrics-secure, or --allow-insecure-metrics-bind to serve /metrics in the clear.
    #[arg(long, default_value = "127.0.0.1:9100")]
    pub(crate) metrics_bind_address: String,
    /// Serve the metrics port over TLS (the serving certificate of --secure-port) with the same
    /// delegated authentication and authorization: a SubjectAccessReview of the non-resource
    /// verb `get` on the path (/metrics, /status), as controller-runtime's secure metrics do.
    #[arg(long)]
    pub(crate) metrics_secure: bool,
    /// Allow --metrics-bind-address on a non-loopback address without --metrics-secure: anyone
    /// who can connect reads /metrics. The status pages are never served there.
    #[arg(long)]
    pub(crate) allow_insecure_metrics_bind: bool,
    /// A loopback address serving the status pages (/status and below) over plain HTTP, for when
    /// --metrics-bind-address faces the network. Empty: the status pages are served on the
    /// metrics address only when it is a loopback one.
    #[arg(long, default_value = "")]
    pub(crate) status_bind_address: String,
    /// Open connections per listener (API, metrics); the excess is closed at accept and counted
    /// in hpa_bridge_connections_refused_total.
    #[arg(long, default_value_t = 1024)]
    pub(crate) max_connections: usize,
    /// Open connections per client IP address per listener; the excess is closed at accept.
    #[arg(long, default_value_t = 64)]
    pub(crate) max_connections_per_client: usize,
    /// Time a client has for the TLS handshake and a complete request head; HTTP/1.1
    /// keep-alive connections must send their next request head within it too.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) request_header_timeout: Duration,
    /// Time an HTTP/2 connection may stay open without a request.
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    pub(crate) idle_timeout: Duration,
    /// Largest request head in bytes (request line and headers; at least 8192). Larger heads
    /// get 431 on HTTP/1.1; on HTTP/2 it is the advertised header list size.
    #[arg(long, default_value_t = 32 * 1024)]
    pub(crate) max_request_header_bytes: usize,
    /// Connections from one client address that misbehave (no TLS handshake or no first
    /// request head within --request-header-timeout, or an HTTP/1.1 head over
    /// --max-request-header-bytes) before the address is kept out of that listener for
    /// --client-penalty (see --client-penalty-kernel-drop). An address that got a request
    /// past authentication and authorization on the listener within the last 10 minutes is
    /// never refused. 0 turns this off.
    #[arg(long, default_value_t = 5)]
    pub(crate) client_penalty_strikes: u32,
    /// The window in which --client-penalty-strikes must fall.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(crate) client_penalty_window: Duration,
    /// How long a client address that struck out is kept out.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(crate) client_penalty: Duration,
    /// Client addresses (CIDR ranges or single addresses, comma-separated) never struck nor
    /// refused: for example the nodes' addresses, from which the kubelet's anonymous probes come.
    #[arg(long, value_delimiter = ',')]
    pub(crate) client_penalty_exempt: Vec<AddressRange>,
    /// Have the kernel drop the TCP segments of a penalized IPv4 address before accept (a
    /// socket filter on the listener), so its reconnects cost the server nothing; its clients'
    /// connects time out instead of being reset. false refuses every penalized connection at
    /// accept, as IPv6 addresses always are.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) client_penalty_kernel_drop: bool,
    /// After SIGTERM, how long /readyz fails while requests are still served, so endpoints
    /// and the aggregator stop routing here first (kube-apiserver's --shutdown-delay-duration).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub(crate) shutdown_delay: Duration,
    /// After the delay, how long in-flight requests get to finish before the process exits.
    /// terminationGracePeriodSeconds must cover the delay plus this.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub(crate) shutdown_timeout: Duration,
    /// Kubeconfig for pod discovery (scrape.kubernetes). Without it, KUBECONFIG, ~/.kube/config or the
    /// in-cluster service account are used, in that order.
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Write `controller.kubernetes.io/pod-deletion-cost` on the pods of Deployments annotated
    /// `hpa-bridge.io/deletion-cost: "stateful-index"`: each Running pod's fresh stateful index
    /// (docs/deletion-cost.md). Only the replica holding --deletion-cost-lease writes. Needs
    /// scrape.kubernetes, `patch` on pods and get, create and update on that Lease
    /// (manifests/overlays/deletion-cost).
    #[arg(long)]
    pub(crate) write_deletion_cost: bool,
    /// Deletion-cost patches per second, across the cluster's pods (one replica writes).
    #[arg(long, default_value_t = 10.0, value_parser = parse_qps)]
    pub(crate) deletion_cost_qps: f64,
    /// The coordination.k8s.io Lease that elects the one replica writing deletion costs.
    /// Without a namespace: POD_NAMESPACE (the downward API), else the kubeconfig's namespace
    /// (in a pod, the service account's).
    #[arg(long, value_name = "[NAMESPACE/]NAME", default_value = DEFAULT_LEASE_NAME)]
    pub(crate) deletion_cost_lease: LeaseName,
    /// How long another replica waits, on its own clock, for the writer to renew the lease
    /// before it takes over (whole seconds).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub(crate) deletion_cost_lease_duration: Duration,
    /// How long the writer keeps writing without renewing the lease; shorter than
    /// --deletion-cost-lease-duration.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) deletion_cost_renew_deadline: Duration,
    /// The time between two reads (or renewals) of the lease; shorter than
    /// --deletion-cost-renew-deadline.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub(crate) deletion_cost_retry_period: Duration,
    /// Keep no memory across restarts: a restarted replica then rules a target unreachable
    /// since its start in or out by its workload alone (docs/unknown-input.md). Without this,
    /// with scrape.kubernetes, the replica holding --memory-lease writes --memory-config-map.
    #[arg(long)]
    pub(crate) no_memory: bool,
    /// The ConfigMap that keeps which targets carried which series and their last values, read
    /// at every start. Needs get, create and update on it (manifests/base/rbac.yaml).
    #[arg(long, value_name = "[NAMESPACE/]NAME", default_value = DEFAULT_MEMORY_NAME)]
    pub(crate) memory_config_map: LeaseName,
    /// The Lease that elects the one replica writing the memory; its timings are the
    /// --deletion-cost-lease-* ones.
    #[arg(long, value_name = "[NAMESPACE/]NAME", default_value = DEFAULT_MEMORY_NAME)]
    pub(crate) memory_lease: LeaseName,
    /// At most one write of the memory per this, and only when what it holds changed.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) memory_write_interval: Duration,
    /// Predict no HPA: without this, with scrape.kubernetes, the adapter watches the HPAs of
    /// the served namespaces, explains the next sync of each one that reads its metrics (or is
    /// annotated hpa-bridge.io/shadow-metric) and checks it after that sync (docs/explain.md).
    /// Needs list and watch on HPAs and get on the targets' scale (manifests/base/rbac.yaml).
    #[arg(long)]
    pub(crate) no_hpa_predictions: bool,
    /// The longest an HPA goes without being predicted again; each is predicted just after
    /// each of its syncs.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub(crate) hpa_prediction_interval: Duration,
    #[command(flatten)]
    pub(crate) auth: Box<AuthArgs>,
}

impl ServeArgs {
    pub(crate) fn lease_timings(&self) -> LeaseTimings {
        LeaseTimings {
            lease_duration: self.deletion_cost_lease_duration,
            renew_deadline: self.deletion_cost_renew_deadline,
            retry_period: self.deletion_cost_retry_period,
        }
    }

    /// Each listener's connection limits and client penalties.
    pub(crate) fn connection_limits(&self) -> Result<ConnectionLimits> {
        if self.max_request_header_bytes < MIN_HEADER_BYTES {
            bail!("--max-request-header-bytes must be at least {MIN_HEADER_BYTES}");
        }
        Ok(ConnectionLimits {
            max_connections: self.max_connections.max(1),
            max_connections_per_client: self.max_connections_per_client.max(1),
            header_timeout: self.request_header_timeout,
            idle_timeout: self.idle_timeout,
            max_header_bytes: self.max_request_header_bytes,
            penalty: PenaltyRules {
                strikes: self.client_penalty_strikes,
                window: self.client_penalty_window,
                penalty: self.client_penalty,
                exempt: self.client_penalty_exempt.clone(),
                drop_in_kernel: self.client_penalty_kernel_drop,
            },
        })
    }
}
