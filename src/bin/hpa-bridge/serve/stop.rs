//! How `serve` stops: kube-apiserver's order (--shutdown-delay-duration).

use std::sync::Arc;

use anyhow::{Context, Result};
use hpa_bridge_duties::deletion_cost::Leadership;
use hpa_bridge_server::api::transport::shutdown::{drain, Phase, Shutdown};

use super::args::ServeArgs;
use super::ports::Ports;

/// SIGTERM (how Kubernetes stops a pod) or SIGINT (Ctrl-C); the name of the one received.
pub(crate) async fn termination_signal() -> Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

/// After `signal`: give up the leases, fail readiness and keep serving for the shutdown delay
/// while the endpoints and the aggregator catch up, then stop accepting and drain.
pub(crate) async fn stop(
    signal: &'static str,
    args: &ServeArgs,
    shutdown: &Shutdown,
    ports: Ports,
    leases: Vec<Arc<Leadership>>,
) {
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
        futures::future::join_all(ports.accept_loops),
    )
    .await;
    let open: usize = ports.gates.iter().map(|g| g.open()).sum();
    tracing::info!(
        connections = open,
        timeout = ?args.shutdown_timeout,
        "shutdown delay over: listeners closed; draining in-flight requests"
    );
    let left = drain(&ports.gates, args.shutdown_timeout).await;
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
}
