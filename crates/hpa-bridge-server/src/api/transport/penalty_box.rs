//! Client addresses that keep misbehaving are refused at accept for a while, before any TLS or
//! HTTP work.
//!
//! The connection caps bound what hostile clients can hold, but every connection they open within
//! the caps still costs a TLS handshake (its public-key operations dominate a connection's CPU) and
//! reading up to the head cap, on the cores that serve the HPA. A client that sends oversized
//! heads, or holds connections without ever completing a request head, would otherwise be
//! handshaken again every time it reconnects. After `strikes` such connections within `window`, its
//! address is refused for `penalty`: a refusal costs one accept and one reset, and for an IPv4
//! address nothing at all, as the kernel drops its handshakes before accept (`drop_filter`).
//!
//! An address that recently got a request past authentication and authorization is trusted
//! and never refused: the aggregator's address must not be locked out by a hostile client that
//! shares it (a host-network pod on the same node, or a NAT). Such an attacker is still bound
//! by the caps. Anonymous callers (the kubelet's probes of `/healthz` and `/readyz`) cannot
//! earn trust, so addresses that must never be refused are listed in `exempt`.
//!
//! Pure: the caller passes the time.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;

/// When misbehaviour gets an address refused. `strikes == 0` turns refusals off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PenaltyRules {
    pub strikes: u32,
    pub window: Duration,
    pub penalty: Duration,
    /// Addresses never struck nor refused.
    pub exempt: Vec<AddressRange>,
    /// Whether the kernel drops a refused IPv4 address's segments before accept
    /// (`drop_filter`), instead of the server accepting and resetting each connection.
    pub drop_in_kernel: bool,
}

/// A CIDR range of client addresses (`10.0.0.0/8`, `fd00::/8`, or one address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressRange {
    network: IpAddr,
    prefix: u8,
}

impl AddressRange {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for AddressRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let network: IpAddr = addr
            .trim()
            .parse()
            .map_err(|e| format!("{s:?} is not an address or CIDR range: {e}"))?;
        let network = network.to_canonical();
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(AddressRange { network, prefix })
    }
}

impl Default for PenaltyRules {
    fn default() -> Self {
        PenaltyRules {
            strikes: 5,
            window: Duration::from_secs(60),
            penalty: Duration::from_secs(60),
            exempt: Vec::new(),
            drop_in_kernel: true,
        }
    }
}

/// How long an address that got a request past authentication and authorization stays trusted.
pub const TRUST: Duration = Duration::from_secs(600);

/// Addresses remembered at once. An attacker with more addresses than this (IPv6) gets the
/// caps alone for the new ones until old entries expire; memory stays bounded either way.
pub const MAX_TRACKED: usize = 4096;

/// What a client did to earn a strike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strike {
    /// No TLS handshake within the header timeout.
    HandshakeTimeout,
    /// No complete first request head within the header timeout.
    HeaderTimeout,
    /// A request head over the size cap (431).
    HeadTooLarge,
}

impl Strike {
    pub fn as_str(self) -> &'static str {
        match self {
            Strike::HandshakeTimeout => "tls-handshake-timeout",
            Strike::HeaderTimeout => "header-timeout",
            Strike::HeadTooLarge => "head-too-large",
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Standing {
    strikes: u32,
    /// When the current window of strikes started.
    since: Option<Instant>,
    refused_until: Option<Instant>,
    trusted_until: Option<Instant>,
}

impl Standing {
    fn expired(&self, rules: &PenaltyRules, now: Instant) -> bool {
        let past = |t: Option<Instant>| t.is_none_or(|t| t <= now);
        past(self.refused_until)
            && past(self.trusted_until)
            && past(self.since.map(|s| s + rules.window))
    }
}

/// The standing of the client addresses of one listener.
#[derive(Debug)]
pub struct PenaltyBox {
    rules: PenaltyRules,
    clients: HashMap<IpAddr, Standing>,
}

impl PenaltyBox {
    pub fn new(rules: PenaltyRules) -> Self {
        PenaltyBox {
            rules,
            clients: HashMap::new(),
        }
    }

    /// Whether a connection from `ip` is refused now.
    pub fn refuses(&self, ip: IpAddr, now: Instant) -> bool {
        self.clients
            .get(&ip)
            .and_then(|s| s.refused_until)
            .is_some_and(|until| until > now)
    }

    /// Counts a strike against `ip`. Returns the end of the penalty when this strike starts
    /// one, so the caller logs it once.
    pub fn strike(&mut self, ip: IpAddr, now: Instant) -> Option<Instant> {
        if self.rules.strikes == 0 || self.rules.exempt.iter().any(|r| r.contains(ip)) {
            return None;
        }
        let (strikes, window, penalty) =
            (self.rules.strikes, self.rules.window, self.rules.penalty);
        let standing = self.standing(ip, now, false)?;
        // Trusted, or already refused: connections that were admitted before the penalty
        // began and expire during it add nothing.
        if [standing.trusted_until, standing.refused_until]
            .iter()
            .any(|t| t.is_some_and(|t| t > now))
        {
            return None;
        }
        if standing.since.is_none_or(|s| s + window <= now) {
            standing.since = Some(now);
            standing.strikes = 0;
        }
        standing.strikes += 1;
        if standing.strikes < strikes {
            return None;
        }
        let until = now + penalty;
        standing.strikes = 0;
        standing.since = None;
        standing.refused_until = Some(until);
        Some(until)
    }

    /// `ip` got a request past authentication and authorization: it is trusted for [`TRUST`],
    /// and a penalty it was under ends. Returns whether one did.
    pub fn vouch(&mut self, ip: IpAddr, now: Instant) -> bool {
        let Some(standing) = self.standing(ip, now, true) else {
            return false;
        };
        let lifted = standing.refused_until.is_some_and(|until| until > now);
        standing.trusted_until = Some(now + TRUST);
        standing.refused_until = None;
        standing.strikes = 0;
        standing.since = None;
        lifted
    }

    /// The addresses refused now, in order, and when the next of their penalties ends.
    pub fn refused(&self, now: Instant) -> (Vec<IpAddr>, Option<Instant>) {
        let mut refused: Vec<(IpAddr, Instant)> = self
            .clients
            .iter()
            .filter_map(|(ip, s)| s.refused_until.filter(|u| *u > now).map(|u| (*ip, u)))
            .collect();
        let next = refused.iter().map(|(_, until)| *until).min();
        refused.sort_unstable();
        (refused.into_iter().map(|(ip, _)| ip).collect(), next)
    }

    /// Addresses remembered now.
    pub fn tracked(&self) -> usize {
        self.clients.len()
    }

    /// The entry for `ip`, making room by forgetting expired entries; for a vouch, an entry
    /// that is not trusted goes if need be (trust protects the aggregator, strikes only cost an
    /// attacker). `None` when no room can be made. Memory stays bounded by [`MAX_TRACKED`];
    /// making room scans the table, which happens only while it is full.
    fn standing(&mut self, ip: IpAddr, now: Instant, vouching: bool) -> Option<&mut Standing> {
        if !self.clients.contains_key(&ip) && self.clients.len() >= MAX_TRACKED {
            let rules = &self.rules;
            self.clients.retain(|_, s| !s.expired(rules, now));
            if self.clients.len() >= MAX_TRACKED && vouching {
                let untrusted = self
                    .clients
                    .iter()
                    .find(|(_, s)| s.trusted_until.is_none_or(|t| t <= now))
                    .map(|(ip, _)| *ip);
                if let Some(untrusted) = untrusted {
                    self.clients.remove(&untrusted);
                }
            }
            if self.clients.len() >= MAX_TRACKED {
                return None;
            }
        }
        Some(self.clients.entry(ip).or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(strikes: u32) -> PenaltyRules {
        PenaltyRules {
            strikes,
            window: Duration::from_secs(60),
            penalty: Duration::from_secs(30),
            exempt: Vec::new(),
            drop_in_kernel: true,
        }
    }

    fn ip(n: u32) -> IpAddr {
        IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n))
    }

    #[test]
    fn the_last_strike_within_the_window_refuses_the_address_for_the_penalty() {
        let t0 = Instant::now();
        let mut b = PenaltyBox::new(rules(3));
        assert_eq!(b.strike(ip(1), t0), None);
        assert_eq!(b.strike(ip(1), t0 + Duration::from_secs(1)), None);
        assert!(!b.refuses(ip(1), t0 + Duration::from_secs(1)));
        let third = t0 + Duration::from_secs(2);
        assert_eq!(
            b.strike(ip(1), third),
            Some(third + Duration::from_secs(30))
        );
        assert!(b.refuses(ip(1), third));
        assert!(b.refuses(ip(1), third + Duration::from_secs(29)));
        assert!(!b.refuses(ip(1), third + Duration::from_secs(30)));
        // Another address is not affected.
        assert!(!b.refuses(ip(2), third));
    }

    #[test]
    fn the_refused_list_is_ordered_and_names_the_next_end() {
        let t0 = Instant::now();
        let mut b = PenaltyBox::new(rules(1));
        assert_eq!(b.refused(t0), (vec![], None));
        b.strike(ip(2), t0);
        b.strike(ip(1), t0 + Duration::from_secs(5));
        b.strike(ip(3), t0 + Duration::from_secs(10));
        assert!(!b.vouch(ip(4), t0 + Duration::from_secs(11)));
        assert!(b.vouch(ip(3), t0 + Duration::from_secs(11)));
        let at = t0 + Duration::from_secs(12);
        assert_eq!(
            b.refused(at),
            (vec![ip(1), ip(2)], Some(t0 + Duration::from_secs(30)))
        );
        // The first penalty ended; vouching lifted the third.
        let later = t0 + Duration::from_secs(31);
        assert_eq!(
            b.refused(later),
            (vec![ip(1)], Some(t0 + Duration::from_secs(35)))
        );
        assert_eq!(b.refused(t0 + Duration::from_secs(35)), (vec![], None));
    }

    #[test]
    fn strikes_older_than_the_window_are_forgotten() {
        let t0 = Instant::now();
        let mut b = PenaltyBox::new(rules(2));
        assert_eq!(b.strike(ip(1), t0), None);
        assert_eq!(b.strike(ip(1), t0 + Duration::from_secs(61)), None);
        assert!(!b.refuses(ip(1), t0 + Duration::from_secs(61)));
        assert!(b.strike(ip(1), t0 + Duration::from_secs(62)).is_some());
    }

    #[test]
    fn a_trusted_address_is_never_refused_and_vouching_lifts_a_penalty() {
        let t0 = Instant::now();
        let mut b = PenaltyBox::new(rules(1));
        b.vouch(ip(1), t0);
        for s in 0..100 {
            assert_eq!(b.strike(ip(1), t0 + Duration::from_secs(s)), None);
        }
        assert!(!b.refuses(ip(1), t0 + Duration::from_secs(100)));
        // Trust runs out.
        let later = t0 + TRUST + Duration::from_secs(1);
        assert!(b.strike(ip(1), later).is_some());
        assert!(b.refuses(ip(1), later));
        b.vouch(ip(1), later);
        assert!(!b.refuses(ip(1), later));
    }

    #[test]
    fn zero_strikes_turns_refusals_off() {
        let t0 = Instant::now();
        let mut b = PenaltyBox::new(rules(0));
        for _ in 0..100 {
            assert_eq!(b.strike(ip(1), t0), None);
        }
        assert!(!b.refuses(ip(1), t0));
        assert_eq!(b.tracked(), 0);
    }

    #[test]
    fn the_table_is_bounded_and_makes_room_from_expired_entries() {
        let t0 = Instant::now();
        let mut b = PenaltyBox::new(rules(1));
        for n in 0..MAX_TRACKED as u32 {
            assert!(b.strike(ip(n), t0).is_some());
        }
        assert_eq!(b.tracked(), MAX_TRACKED);
        // Full of live penalties: a new address is not tracked, the old ones keep theirs.
        let extra = ip(MAX_TRACKED as u32);
        assert_eq!(b.strike(extra, t0), None);
        assert!(!b.refuses(extra, t0));
        assert!(b.refuses(ip(0), t0));
        assert_eq!(b.tracked(), MAX_TRACKED);
        // A vouch makes room by dropping an untrusted entry.
        let aggregator = ip(MAX_TRACKED as u32 + 1);
        b.vouch(aggregator, t0);
        assert_eq!(b.tracked(), MAX_TRACKED);
        assert_eq!(b.strike(aggregator, t0), None);
        assert!(!b.refuses(aggregator, t0));
        // Once the penalties and windows have passed, the entries make room.
        let later = t0 + Duration::from_secs(61);
        assert!(b.strike(extra, later).is_some());
        // The trusted entry is still live; every other one expired.
        assert_eq!(b.tracked(), 2);
    }

    #[test]
    fn strikes_during_a_penalty_add_nothing() {
        let t0 = Instant::now();
        let mut b = PenaltyBox::new(rules(2));
        assert_eq!(b.strike(ip(1), t0), None);
        let until = b.strike(ip(1), t0).unwrap();
        for s in 1..30 {
            assert_eq!(b.strike(ip(1), t0 + Duration::from_secs(s)), None);
        }
        assert!(!b.refuses(ip(1), until));
        // After the penalty the count starts again.
        assert_eq!(b.strike(ip(1), until), None);
        assert!(b.strike(ip(1), until).is_some());
    }

    #[test]
    fn exempt_ranges_are_never_struck() {
        let t0 = Instant::now();
        let mut r = rules(1);
        r.exempt = vec!["10.0.0.0/30".parse().unwrap(), "fd00::1".parse().unwrap()];
        let mut b = PenaltyBox::new(r);
        for n in 0..4 {
            assert_eq!(b.strike(ip(n), t0), None, "10.0.0.{n}");
        }
        assert!(b.strike(ip(4), t0).is_some());
        assert_eq!(b.strike("fd00::1".parse().unwrap(), t0), None);
        assert!(b.strike("fd00::2".parse().unwrap(), t0).is_some());
        // An IPv4 client seen on a dual-stack socket is in its IPv4 range.
        assert_eq!(b.strike("::ffff:10.0.0.2".parse().unwrap(), t0), None);
    }

    #[test]
    fn address_ranges_parse_as_cidr() {
        let r: AddressRange = "192.168.1.7/24".parse().unwrap();
        assert!(r.contains("192.168.1.200".parse().unwrap()));
        assert!(!r.contains("192.168.2.1".parse().unwrap()));
        assert!(!r.contains("::1".parse().unwrap()));
        let all: AddressRange = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        let v6: AddressRange = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains("2001:db9::".parse().unwrap()));
        for bad in [
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0/8",
            "x",
            "10.0.0.0/-1",
            "",
        ] {
            assert!(bad.parse::<AddressRange>().is_err(), "{bad}");
        }
    }
}
