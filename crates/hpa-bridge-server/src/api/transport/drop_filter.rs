//! The kernel drops the TCP segments of penalized IPv4 client addresses before accept.
//!
//! A refusal at accept (`penalty_box`) still costs the server a TCP handshake, an accept and a
//! reset for every reconnect, and a persistent attacker reconnects in waves of thousands per
//! second on the cores that serve the HPA. A classic BPF socket filter on the listening socket
//! runs in the kernel's receive path before the connection is created (Linux runs a listener's
//! filter on each SYN and on the handshake's last ACK), so a penalized address's SYNs are
//! dropped as a firewall would drop them: its client sees its connect time out and retries
//! with the kernel's backoff, and the server does no work at all.
//!
//! Only IPv4 addresses are listed (one comparison each); IPv6 clients, addresses past
//! [`MAX_DROPPED`] or past what the socket's option memory holds (`net.core.optmem_max`, which
//! the kernel charges for the filter), and a kernel that refuses the filter fall back to the
//! refusal at accept.
//!
//! Linux gives each accepted connection the listener's filter as it was when the connection
//! was created. It is taken off every accepted connection while filtering is on: kept, it would
//! cost a comparison per listed address on every segment for the connection's life, and a
//! connection created as its own address was being lifted from the list could keep a copy that
//! drops its own segments.

use std::net::{IpAddr, Ipv4Addr};

use tokio::time::Instant;

use super::connection::ConnectionGate;

/// Addresses listed at most: two instructions each, well below the kernel's 4,096-instruction
/// limit on a classic BPF program and, converted, about 32 KiB of option memory.
pub const MAX_DROPPED: usize = 1024;

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instruction {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

// Opcodes from linux/bpf_common.h and linux/filter.h.
const BPF_LD: u16 = 0x00;
const BPF_ALU: u16 = 0x04;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_W: u16 = 0x00;
const BPF_B: u16 = 0x10;
const BPF_ABS: u16 = 0x20;
const BPF_AND: u16 = 0x50;
const BPF_JEQ: u16 = 0x10;
const BPF_K: u16 = 0x00;
/// Loads at this offset (`SKF_NET_OFF`) read the network header: on a TCP socket the packet
/// data starts at the TCP header.
const SKF_NET_OFF: i32 = -0x100000;
/// Offset of the source address in an IPv4 header.
const IPV4_SOURCE: i32 = 12;
/// A socket filter returns how many bytes of the segment to keep: all of it, or none (drop).
const KEEP: u32 = u32::MAX;
const DROP: u32 = 0;

const fn op(code: u16, jt: u8, jf: u8, k: u32) -> Instruction {
    Instruction { code, jt, jf, k }
}

/// The filter that drops every segment from `sources` and keeps everything else, IPv6
/// included. Jump offsets are 8 bits, so each address is followed by its own drop: a list of
/// any length stays within reach.
pub fn program(sources: &[Ipv4Addr]) -> Vec<Instruction> {
    let mut p = vec![
        // The IP version, from the first byte of the network header.
        op(BPF_LD | BPF_B | BPF_ABS, 0, 0, SKF_NET_OFF as u32),
        op(BPF_ALU | BPF_AND | BPF_K, 0, 0, 0xf0),
        op(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 0x40),
        op(BPF_RET | BPF_K, 0, 0, KEEP),
        // The source address, in host order.
        op(
            BPF_LD | BPF_W | BPF_ABS,
            0,
            0,
            (SKF_NET_OFF + IPV4_SOURCE) as u32,
        ),
    ];
    for source in sources.iter().take(MAX_DROPPED) {
        p.push(op(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, u32::from(*source)));
        p.push(op(BPF_RET | BPF_K, 0, 0, DROP));
    }
    p.push(op(BPF_RET | BPF_K, 0, 0, KEEP));
    p
}

/// Puts the filter for `sources` on `socket`, replacing the one before; with no sources the
/// filter is removed.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn apply<S: std::os::fd::AsFd>(socket: &S, sources: &[Ipv4Addr]) -> std::io::Result<()> {
    let socket = socket2::SockRef::from(socket);
    if sources.is_empty() {
        return match socket.detach_filter() {
            // ENOENT: none was attached.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
    }
    let filter: Vec<socket2::SockFilter> = program(sources)
        .iter()
        .map(|i| socket2::SockFilter::new(i.code, i.jt, i.jf, i.k))
        .collect();
    socket.attach_filter(&filter)
}

/// Socket filters are Linux's; elsewhere every penalized connection is refused at accept.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn apply<S: std::os::fd::AsFd>(_socket: &S, sources: &[Ipv4Addr]) -> std::io::Result<()> {
    if sources.is_empty() {
        return Ok(());
    }
    Err(std::io::ErrorKind::Unsupported.into())
}

/// The filter one listener has on, kept up to date by its accept loop.
#[derive(Debug)]
pub struct DropFilter {
    /// The sources on the listener's filter now.
    applied: Vec<Ipv4Addr>,
    /// The kernel refused a filter: refusals stay at accept for this listener.
    failed: bool,
}

impl DropFilter {
    pub fn new() -> Self {
        DropFilter {
            applied: Vec::new(),
            failed: false,
        }
    }

    /// Whether the listener has a filter on (the accept loop sheds filters whenever kernel
    /// drops are configured, so only the tests ask).
    #[cfg(test)]
    fn active(&self) -> bool {
        !self.applied.is_empty()
    }

    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Lists the IPv4 addresses `gate` refuses now on `listener`'s filter. Returns when the
    /// next penalty ends, when the list must be updated again.
    pub fn refresh<S: std::os::fd::AsFd>(
        &mut self,
        listener: &S,
        gate: &ConnectionGate,
    ) -> Option<Instant> {
        let (refused, next) = gate.refused_now();
        let mut sources: Vec<Ipv4Addr> = refused
            .into_iter()
            .filter_map(|ip| match ip {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(_) => None,
            })
            .take(MAX_DROPPED)
            .collect();
        // An IPv6 address striking out changes nothing here.
        if sources == self.applied {
            return next;
        }
        let name = gate.listener();
        loop {
            match apply(listener, &sources) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::OutOfMemory && !sources.is_empty() => {
                    // The socket's option memory cannot hold this many: list half of them,
                    // and the rest are refused at accept.
                    let keep = sources.len() / 2;
                    tracing::warn!(listener = name, listed = sources.len(), keep, error = %e, "the drop filter does not fit in the socket's option memory (net.core.optmem_max)");
                    sources.truncate(keep);
                }
                Err(e) => {
                    tracing::warn!(listener = name, error = %e, "the kernel refused the drop filter; penalized clients are refused at accept instead");
                    // Never leave an older list dropping addresses whose penalty ends.
                    if let Err(e) = apply(listener, &[]) {
                        tracing::error!(listener = name, error = %e, "could not remove the drop filter");
                    }
                    self.failed = true;
                    sources.clear();
                    break;
                }
            }
        }
        tracing::debug!(
            listener = name,
            dropped = sources.len(),
            "drop filter updated"
        );
        gate.metrics().clients_dropped(name, sources.len());
        self.applied = sources;
        next
    }
}

impl Default for DropFilter {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, SocketAddr, TcpListener};
    use std::time::Duration;

    /// A test bound, long enough that a loopback handshake the kernel does not drop always
    /// completes within it: the handshake never waits for the process, only for the kernel.
    const CONNECT: Duration = Duration::from_secs(2);

    fn connects(source: IpAddr, to: SocketAddr) -> bool {
        let domain = socket2::Domain::for_address(to);
        let socket = socket2::Socket::new(domain, socket2::Type::STREAM, None).unwrap();
        socket.bind(&SocketAddr::new(source, 0).into()).unwrap();
        match socket.connect_timeout(&to.into(), CONNECT) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => false,
            Err(e) => panic!("connect from {source} to {to}: {e}"),
        }
    }

    #[test]
    fn each_listed_address_costs_two_instructions_and_the_list_is_capped() {
        assert_eq!(program(&[]).len(), 6);
        let many: Vec<Ipv4Addr> = (0..5000u32).map(Ipv4Addr::from).collect();
        assert_eq!(program(&many[..3]).len(), 6 + 2 * 3);
        let capped = program(&many);
        assert_eq!(capped.len(), 6 + 2 * MAX_DROPPED);
        assert!(capped.len() <= 4096, "the kernel's limit");
    }

    /// The filter on a real loopback listener: the listed source's handshakes are dropped
    /// in the kernel, another source's complete, and removing the filter lets the listed one in.
    #[test]
    fn the_kernel_drops_the_listed_sources_only() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = listener.local_addr().unwrap();
        let listed = Ipv4Addr::new(127, 0, 0, 7);
        apply(&listener, &[Ipv4Addr::new(127, 0, 0, 9), listed]).unwrap();
        assert!(!connects(IpAddr::V4(listed), to), "a listed source got in");
        assert!(connects(IpAddr::from([127, 0, 0, 8]), to));
        apply(&listener, &[]).unwrap();
        apply(&listener, &[]).unwrap();
        assert!(
            connects(IpAddr::V4(listed), to),
            "the filter was not removed"
        );
    }

    /// The accept loop's view: an address that strikes out on the gate is listed on the
    /// listener's filter, and taken off when a vouch lifts its penalty; the gauge follows.
    #[tokio::test]
    async fn refresh_lists_what_the_gate_refuses() {
        use crate::api::transport::connection::ConnectionLimits;
        use crate::api::transport::penalty_box::Strike;
        let metrics = std::sync::Arc::new(hpa_bridge_telemetry::self_metrics::SelfMetrics::new());
        let mut limits = ConnectionLimits::default();
        limits.penalty.strikes = 1;
        let gate = ConnectionGate::new("api", limits, metrics.clone());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = listener.local_addr().unwrap();
        let offender = IpAddr::from([127, 0, 0, 7]);
        let mut filter = DropFilter::new();
        assert_eq!(filter.refresh(&listener, &gate), None);
        assert!(!filter.active());
        gate.strike(offender, Strike::HeadTooLarge);
        // An IPv6 address is refused at accept, never listed.
        gate.strike(
            IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
            Strike::HeadTooLarge,
        );
        assert!(filter.refresh(&listener, &gate).is_some(), "a penalty ends");
        assert!(filter.active());
        assert!(!connects(offender, to));
        assert!(connects(IpAddr::from([127, 0, 0, 8]), to));
        let gauge = |m: &str| {
            m.lines()
                .find(|l| l.starts_with("hpa_bridge_clients_dropped{"))
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        };
        assert_eq!(gauge(&metrics.render()), Some(1.0));
        gate.vouch(offender);
        filter.refresh(&listener, &gate);
        assert!(connects(offender, to), "the vouch did not take it off");
        assert_eq!(gauge(&metrics.render()), Some(0.0));
    }

    /// IPv4 clients of a dual-stack listener are filtered; IPv6 packets, whose bytes at the
    /// IPv4 source offset are something else, are never dropped.
    #[test]
    fn a_dual_stack_listener_drops_listed_ipv4_clients_and_keeps_ipv6() {
        let listener = TcpListener::bind("[::]:0").unwrap_or_else(|e| {
            panic!("cannot bind [::] ({e}): IPv6 is off on this machine (net.ipv6.conf.all.disable_ipv6)")
        });
        let port = listener.local_addr().unwrap().port();
        // Bytes 12..16 of the IPv6 header of a packet from ::1 are zero.
        apply(
            &listener,
            &[Ipv4Addr::new(127, 0, 0, 7), Ipv4Addr::UNSPECIFIED],
        )
        .unwrap();
        let v4 = SocketAddr::from(([127, 0, 0, 1], port));
        assert!(!connects(IpAddr::from([127, 0, 0, 7]), v4));
        assert!(connects(IpAddr::from([127, 0, 0, 8]), v4));
        let v6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
        assert!(connects(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), v6));
    }
}
