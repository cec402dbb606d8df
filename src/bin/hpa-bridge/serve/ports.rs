//! `serve`'s listeners: the API port, the metrics port and the status port, each behind its
//! own connection gate.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use hpa_bridge_server::api::transport::connection::{ConnectionGate, ConnectionLimits};
use hpa_bridge_server::api::transport::shutdown::Shutdown;
use hpa_bridge_server::api::transport::{Gatekeeper, Listening};
use hpa_bridge_server::api::{metrics_port, server, ApiHandler};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::args::ServeArgs;

/// The listeners serving: their gates, drained at shutdown, and their accept loops, awaited at
/// shutdown so that nothing is accepted after the drain starts.
pub(crate) struct Ports {
    pub(crate) gates: Vec<Arc<ConnectionGate>>,
    pub(crate) accept_loops: Vec<JoinHandle<()>>,
    limits: ConnectionLimits,
    shutdown: Arc<Shutdown>,
}

impl Ports {
    pub(crate) fn new(limits: ConnectionLimits, shutdown: Arc<Shutdown>) -> Ports {
        Ports {
            gates: Vec::new(),
            accept_loops: Vec::new(),
            limits,
            shutdown,
        }
    }

    fn gate(&mut self, name: &'static str, metrics: Arc<SelfMetrics>) -> Arc<ConnectionGate> {
        let gate = ConnectionGate::new(name, self.limits.clone(), metrics);
        self.gates.push(gate.clone());
        gate
    }

    /// `--metrics-bind-address`: /metrics, and the status pages too on a loopback address.
    /// Off loopback it needs `--metrics-secure` (the API's authentication) or the explicit
    /// `--allow-insecure-metrics-bind`, and never shows the status pages.
    pub(crate) async fn serve_metrics(
        &mut self,
        args: &ServeArgs,
        pages: &metrics_port::MetricsPages,
        tls: &Arc<rustls::ServerConfig>,
        gatekeeper: &Option<Arc<dyn Gatekeeper>>,
        metrics: &Arc<SelfMetrics>,
    ) -> Result<()> {
        if args.metrics_bind_address.is_empty() {
            return Ok(());
        }
        let listener = TcpListener::bind(&args.metrics_bind_address)
            .await
            .with_context(|| {
                format!(
                    "binding --metrics-bind-address {}",
                    args.metrics_bind_address
                )
            })?;
        let addr = listener.local_addr()?;
        let loopback = addr.ip().is_loopback();
        if args.metrics_secure && gatekeeper.is_none() {
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
        let listening = Listening {
            gate: self.gate("metrics", metrics.clone()),
            tls: args.metrics_secure.then(|| tls.clone()),
            shutdown: self.shutdown.clone(),
            gatekeeper: args.metrics_secure.then(|| gatekeeper.clone()).flatten(),
        };
        tracing::info!(
            %addr,
            tls = args.metrics_secure,
            status_pages = loopback,
            "serving /metrics"
        );
        self.accept_loops
            .push(tokio::spawn(metrics_port::serve_metrics_on(
                listener,
                listening,
                pages.clone(),
                loopback,
            )));
        Ok(())
    }

    /// `--status-bind-address`: the status pages over plain HTTP, on loopback only, for when
    /// the metrics port faces the network.
    pub(crate) async fn serve_status(
        &mut self,
        args: &ServeArgs,
        pages: &metrics_port::MetricsPages,
        metrics: &Arc<SelfMetrics>,
    ) -> Result<()> {
        if args.status_bind_address.is_empty() {
            return Ok(());
        }
        let listener = TcpListener::bind(&args.status_bind_address)
            .await
            .with_context(|| {
                format!("binding --status-bind-address {}", args.status_bind_address)
            })?;
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            bail!("--status-bind-address {addr} must be a loopback address: the status pages show every workload, label and target");
        }
        let listening = Listening {
            gate: self.gate("status", metrics.clone()),
            tls: None,
            shutdown: self.shutdown.clone(),
            gatekeeper: None,
        };
        tracing::info!(%addr, "serving /status over HTTP");
        self.accept_loops
            .push(tokio::spawn(metrics_port::serve_metrics_on(
                listener,
                listening,
                pages.clone(),
                true,
            )));
        Ok(())
    }

    /// The aggregated API on `listener`, over TLS.
    pub(crate) fn serve_api(
        &mut self,
        listener: TcpListener,
        handler: Arc<ApiHandler>,
        tls: Arc<rustls::ServerConfig>,
        gatekeeper: Option<Arc<dyn Gatekeeper>>,
        metrics: Arc<SelfMetrics>,
    ) {
        let listening = Listening {
            gate: self.gate("api", metrics),
            tls: Some(tls),
            shutdown: self.shutdown.clone(),
            gatekeeper,
        };
        self.accept_loops.push(tokio::spawn(server::serve_api_on(
            listener, listening, handler,
        )));
    }
}

/// The API port, bound before anything is served so that a port in use stops the start.
pub(crate) async fn bind_api(args: &ServeArgs) -> Result<(TcpListener, SocketAddr)> {
    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding --secure-port on {addr}"))?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}
