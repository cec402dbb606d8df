//! Bounds on client connections, the same on the API port and the metrics port: how many may be
//! open (in all and per client address), how long a client may take to present a request head,
//! how long a connection may sit idle, and how large a request head may grow. Every client may
//! be hostile: a connection that holds memory or a file descriptor without sending a request is
//! closed, and the excess is refused at accept, before any TLS or HTTP work.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::penalty_box::{PenaltyBox, PenaltyRules, Strike, TRUST};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// Limits applied to every connection of one listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections on the listener; the excess is closed at accept.
    pub max_connections: usize,
    /// Open connections from one client IP address; the excess is closed at accept.
    pub max_connections_per_client: usize,
    /// Time for the TLS handshake plus the first request head, and for every later HTTP/1.1
    /// request head (which is also how long an HTTP/1.1 keep-alive connection may wait idle).
    pub header_timeout: Duration,
    /// Time an HTTP/2 connection may stay open without a request in flight.
    pub idle_timeout: Duration,
    /// Largest request head: the HTTP/1.1 read buffer and the HTTP/2 header list. A larger
    /// head is answered 431 (HTTP/1.1) or reset (HTTP/2), so a connection never holds more.
    pub max_header_bytes: usize,
    /// When an address that keeps misbehaving is kept out (see `penalty_box`, `drop_filter`).
    pub penalty: PenaltyRules,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 1024,
            max_connections_per_client: 64,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            max_header_bytes: 32 * 1024,
            penalty: PenaltyRules::default(),
        }
    }
}

/// hyper's HTTP/1.1 read buffer cannot be smaller than this.
pub const MIN_HEADER_BYTES: usize = 8192;

/// Why a connection was refused at accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    MaxConnections,
    MaxConnectionsPerClient,
    /// The address struck out recently (`penalty_box`).
    Penalized,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "max-connections",
            Refusal::MaxConnectionsPerClient => "max-connections-per-client",
            Refusal::Penalized => "penalized",
        }
    }
}

#[derive(Debug)]
struct Counts {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
    penalties: PenaltyBox,
}

/// The open connections of one listener, counted in all and per client address.
#[derive(Debug)]
pub struct ConnectionGate {
    listener: &'static str,
    limits: ConnectionLimits,
    counts: Mutex<Counts>,
    metrics: Arc<SelfMetrics>,
    /// Woken when an address strikes out, so its connections that never sent a request close.
    struck_out: tokio::sync::Notify,
    /// Signalled when the refused addresses change, so the accept loop updates the kernel's
    /// drop filter (`drop_filter`). Holds its signal until the loop next waits.
    refused_changed: tokio::sync::Notify,
}

impl ConnectionGate {
    pub fn new(
        listener: &'static str,
        limits: ConnectionLimits,
        metrics: Arc<SelfMetrics>,
    ) -> Arc<Self> {
        let counts = Counts {
            total: 0,
            per_client: HashMap::new(),
            penalties: PenaltyBox::new(limits.penalty.clone()),
        };
        Arc::new(ConnectionGate {
            listener,
            limits,
            counts: Mutex::new(counts),
            metrics,
            struck_out: tokio::sync::Notify::new(),
            refused_changed: tokio::sync::Notify::new(),
        })
    }

    pub fn listener(&self) -> &'static str {
        self.listener
    }

    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    pub fn metrics(&self) -> &SelfMetrics {
        &self.metrics
    }

    /// A permit for one more connection from `ip`, or why not. The refusal is counted in
    /// `hpa_bridge_connections_refused_total`.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionPermit, Refusal> {
        // An IPv4 client on a dual-stack socket is one client whichever form its address has.
        let ip = ip.to_canonical();
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let refusal = if counts.penalties.refuses(ip, Instant::now()) {
            Some(Refusal::Penalized)
        } else if counts.total >= self.limits.max_connections {
            Some(Refusal::MaxConnections)
        } else if counts.per_client.get(&ip).copied().unwrap_or(0)
            >= self.limits.max_connections_per_client
        {
            Some(Refusal::MaxConnectionsPerClient)
        } else {
            None
        };
        if let Some(r) = refusal {
            drop(counts);
            self.metrics.connection_refused(self.listener, r.as_str());
            return Err(r);
        }
        counts.total += 1;
        *counts.per_client.entry(ip).or_default() += 1;
        let open = counts.total;
        drop(counts);
        self.metrics.connections_open(self.listener, open);
        Ok(ConnectionPermit {
            gate: self.clone(),
            ip,
        })
    }

    /// A connection from `ip` misbehaved; enough strikes get the address kept out.
    pub fn strike(&self, ip: IpAddr, why: Strike) {
        let ip = ip.to_canonical();
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let penalized = counts.penalties.strike(ip, Instant::now());
        drop(counts);
        if let Some(until) = penalized {
            let seconds = until.saturating_duration_since(Instant::now()).as_secs();
            tracing::warn!(
                listener = self.listener,
                client = %ip,
                strike = why.as_str(),
                strikes = self.limits.penalty.strikes,
                seconds,
                "refusing the client's connections after repeated misbehaviour"
            );
            self.metrics.client_penalized(self.listener, why.as_str());
            self.struck_out.notify_waiters();
            self.refused_changed.notify_one();
        }
    }

    /// Resolves when the refused addresses changed since it last resolved.
    pub async fn refused_changed(&self) {
        self.refused_changed.notified().await
    }

    /// The addresses refused now, in order, and when the next of their penalties ends.
    pub fn refused_now(&self) -> (Vec<IpAddr>, Option<Instant>) {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.penalties.refused(Instant::now())
    }

    /// Whether `ip` is refused now (it struck out).
    pub fn refuses(&self, ip: IpAddr) -> bool {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.penalties.refuses(ip.to_canonical(), Instant::now())
    }

    /// Resolves when some address strikes out; the connection then checks [`Self::refuses`].
    pub fn struck_out(&self) -> tokio::sync::futures::Notified<'_> {
        self.struck_out.notified()
    }

    /// A request from `ip` got past the gatekeeper (authenticated and authorized): the address
    /// is trusted (`penalty_box`).
    pub fn vouch(&self, ip: IpAddr) {
        let ip = ip.to_canonical();
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if counts.penalties.vouch(ip, Instant::now()) {
            self.refused_changed.notify_one();
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    fn release(&self, ip: IpAddr) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_client.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                // Forget the address: the map holds only clients with open connections.
                counts.per_client.remove(&ip);
            }
        }
        let open = counts.total;
        drop(counts);
        self.metrics.connections_open(self.listener, open);
    }
}

/// One admitted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnectionPermit {
    gate: Arc<ConnectionGate>,
    ip: IpAddr,
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        self.gate.release(self.ip);
    }
}

/// Failed accepts (EMFILE, ENFILE, ENOBUFS) wait before the next try, doubling from 10 ms to
/// 1 s, so a full descriptor table does not spin a worker and starve the open connections that
/// would free descriptors. One line is logged when a burst starts and one when it ends.
#[derive(Debug)]
pub struct AcceptBackoff {
    listener: &'static str,
    next: Duration,
    failures: u64,
}

const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

impl AcceptBackoff {
    pub fn new(listener: &'static str) -> Self {
        AcceptBackoff {
            listener,
            next: BACKOFF_MIN,
            failures: 0,
        }
    }

    /// How long to wait after this failure.
    pub fn failed(&mut self, error: &std::io::Error) -> Duration {
        if self.failures == 0 {
            tracing::warn!(listener = self.listener, error = %error, "accept failed; backing off until accepts succeed again");
        }
        self.failures += 1;
        let wait = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        wait
    }

    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!(
                listener = self.listener,
                failures = self.failures,
                "accepting again"
            );
            self.failures = 0;
            self.next = BACKOFF_MIN;
        }
    }
}

/// Requests in flight on one connection and when it was last busy: what the idle timeout reads.
#[derive(Debug)]
pub struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    /// Milliseconds after `opened` at which the connection last started or finished a request.
    last_ms: AtomicU64,
    /// Milliseconds after `opened` at which the connection last vouched for its client
    /// (`NEVER` before the first time).
    vouched_ms: AtomicU64,
}

const NEVER: u64 = u64::MAX;

/// Why a connection is closed by the server before the client closes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// No (first) request head within the header timeout.
    HeaderTimeout,
    /// No request for the idle timeout.
    IdleTimeout,
}

impl Activity {
    pub fn new() -> Self {
        Self::since(Instant::now())
    }

    /// A connection accepted at `opened` (before its TLS handshake, which the header timeout
    /// covers too).
    pub fn since(opened: Instant) -> Self {
        Activity {
            opened,
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
            vouched_ms: AtomicU64::new(NEVER),
        }
    }

    /// Whether this connection should vouch for its client again: the first time, then once
    /// per half of the trust period, so a keep-alive client stays trusted without taking the
    /// gate's lock on every request.
    pub fn vouch_due(&self) -> bool {
        let now = self.opened.elapsed().as_millis() as u64;
        let last = self.vouched_ms.load(Ordering::Relaxed);
        let half = (TRUST / 2).as_millis() as u64;
        if last != NEVER && now.saturating_sub(last) < half {
            return false;
        }
        self.vouched_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    fn touch(&self) {
        let ms = self.opened.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Requests started on the connection so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.touch();
    }

    pub fn end(&self) {
        self.touch();
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// When the connection expires if nothing happens before, and why; `None` while a request
    /// is in flight (its own work is bounded elsewhere).
    pub fn deadline(&self, limits: &ConnectionLimits) -> Option<(Instant, Expiry)> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        if self.requests.load(Ordering::Relaxed) == 0 {
            return Some((self.opened + limits.header_timeout, Expiry::HeaderTimeout));
        }
        let last = self.opened + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        Some((last + limits.idle_timeout, Expiry::IdleTimeout))
    }
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

/// Marks a request finished when dropped, also when the client goes away mid-request.
pub struct InFlight(pub Arc<Activity>);

impl InFlight {
    pub fn start(activity: &Arc<Activity>) -> Self {
        activity.begin();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_client: usize) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: total,
            max_connections_per_client: per_client,
            ..Default::default()
        }
    }

    fn refused(metrics: &SelfMetrics, reason: &str) -> f64 {
        metrics
            .render()
            .lines()
            .find(|l| {
                l.starts_with("hpa_bridge_connections_refused_total{")
                    && l.contains(&format!("reason=\"{reason}\""))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    }

    #[test]
    fn per_client_cap_refuses_the_extra_connection_and_frees_on_drop() {
        let metrics = Arc::new(SelfMetrics::new());
        let gate = ConnectionGate::new("api", limits(10, 2), metrics.clone());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let p1 = gate.admit(a).unwrap();
        let _p2 = gate.admit(a).unwrap();
        assert_eq!(gate.admit(a).unwrap_err(), Refusal::MaxConnectionsPerClient);
        // The same client over a dual-stack socket is still the same client.
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(
            gate.admit(mapped).unwrap_err(),
            Refusal::MaxConnectionsPerClient
        );
        let _pb = gate.admit(b).unwrap();
        assert_eq!(gate.open(), 3);
        drop(p1);
        assert_eq!(gate.open(), 2);
        let _p3 = gate.admit(a).unwrap();
        assert_eq!(refused(&metrics, "max-connections-per-client"), 2.0);
    }

    #[test]
    fn global_cap_refuses_every_client() {
        let metrics = Arc::new(SelfMetrics::new());
        let gate = ConnectionGate::new("metrics", limits(3, 3), metrics.clone());
        let permits: Vec<_> = (1..=3)
            .map(|i| gate.admit(IpAddr::from([10, 0, 0, i])).unwrap())
            .collect();
        assert_eq!(
            gate.admit(IpAddr::from([10, 0, 0, 9])).unwrap_err(),
            Refusal::MaxConnections
        );
        drop(permits);
        assert_eq!(gate.open(), 0);
        assert!(gate.counts.lock().unwrap().per_client.is_empty());
        assert_eq!(refused(&metrics, "max-connections"), 1.0);
    }

    #[test]
    fn backoff_doubles_to_a_second_and_resets() {
        let mut b = AcceptBackoff::new("api");
        let e = std::io::Error::from_raw_os_error(24);
        let waits: Vec<_> = (0..10).map(|_| b.failed(&e)).collect();
        assert_eq!(waits[0], Duration::from_millis(10));
        assert_eq!(waits[1], Duration::from_millis(20));
        assert_eq!(*waits.last().unwrap(), Duration::from_secs(1));
        b.succeeded();
        assert_eq!(b.failed(&e), Duration::from_millis(10));
    }

    #[tokio::test]
    async fn deadline_is_the_header_timeout_before_the_first_request_then_idle() {
        let limits = ConnectionLimits::default();
        let activity = Arc::new(Activity::new());
        let (_, why) = activity.deadline(&limits).unwrap();
        assert_eq!(why, Expiry::HeaderTimeout);
        let req = InFlight::start(&activity);
        assert!(
            activity.deadline(&limits).is_none(),
            "never while in flight"
        );
        drop(req);
        let (_, why) = activity.deadline(&limits).unwrap();
        assert_eq!(why, Expiry::IdleTimeout);
    }
}
