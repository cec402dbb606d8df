//! The server's lifecycle on SIGTERM, as kube-apiserver's `--shutdown-delay-duration` does it:
//! `/readyz` fails at once so the endpoints controller and the aggregator stop sending new
//! requests, the server keeps serving for a delay while they catch up, then it stops accepting
//! and drains the requests in flight within a bound.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::connection::ConnectionGate;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Normal operation.
    Serving,
    /// SIGTERM received: `/readyz` answers 503, everything else is still served.
    Terminating,
    /// Listeners closed; open connections finish their requests and close.
    Stopping,
}

/// The current phase, shared by every listener and connection.
#[derive(Debug)]
pub struct Shutdown {
    phase: watch::Sender<Phase>,
}

impl Shutdown {
    pub fn new() -> Arc<Self> {
        Arc::new(Shutdown {
            phase: watch::Sender::new(Phase::Serving),
        })
    }

    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// `/readyz` fails from now on.
    pub fn terminating(&self) -> bool {
        self.phase() >= Phase::Terminating
    }

    pub fn advance(&self, to: Phase) {
        self.phase.send_if_modified(|p| {
            let later = to > *p;
            if later {
                *p = to;
            }
            later
        });
    }

    /// Resolves once the listeners should close.
    pub async fn stopping(&self) {
        let mut rx = self.phase.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = rx.wait_for(|p| *p == Phase::Stopping).await;
    }
}

/// Wait until no connection is open on `gates`, or `timeout` passed; the connections still
/// open at the end.
pub async fn drain(gates: &[Arc<ConnectionGate>], timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        let open: usize = gates.iter().map(|g| g.open()).sum();
        if open == 0 || Instant::now() >= deadline {
            return open;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn phases_only_move_forward() {
        let s = Shutdown::new();
        assert!(!s.terminating());
        s.advance(Phase::Terminating);
        assert!(s.terminating());
        s.advance(Phase::Serving);
        assert_eq!(s.phase(), Phase::Terminating);
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move { s.stopping().await })
        };
        s.advance(Phase::Stopping);
        waiter.await.unwrap();
    }
}
