//! Client addresses that keep misbehaving are refused at accept for a while, before any TLS or
//! HTTP work.
//!
//! The connection caps bound what hostile clients can hold, but every connection they open
//! within the caps still costs a TLS handshake (hundreds of microseconds of CPU) and reading up
//! to the head cap, on the cores that serve the HPA. A client that sends oversized heads, or
//! holds connections without ever completing a request head, would otherwise be handshaken
//! again every time it reconnects. After `strikes` such connections within `window`, its
//! address is refused for `penalty`: a refusal costs one accept and one close.
//!
//! An address that recently got a request past authentication is trusted and never refused:
//! the aggregator's address must not be locked out by a hostile client that shares it (a
//! host-network pod on the same node, or a NAT). Such an attacker is still bound by the caps.
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
}

impl Default for PenaltyRules {
    fn default() -> Self {
        PenaltyRules {
            strikes: 5,
            window: Duration::from_secs(60),
            penalty: Duration::from_secs(60),
        }
    }
}

/// How long an address that got a request past authentication stays trusted.
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
        if self.rules.strikes == 0 {
            return None;
        }
        let rules = self.rules.clone();
        let standing = self.standing(ip, now)?;
        if standing.trusted_until.is_some_and(|t| t > now) {
            return None;
        }
        if standing.since.is_none_or(|s| s + rules.window <= now) {
            standing.since = Some(now);
            standing.strikes = 0;
        }
        standing.strikes += 1;
        if standing.strikes < rules.strikes {
            return None;
        }
        let until = now + rules.penalty;
        standing.strikes = 0;
        standing.since = None;
        standing.refused_until = Some(until);
        Some(until)
    }

    /// `ip` got a request past authentication: it is trusted for [`TRUST`], and a penalty it
    /// was under ends.
    pub fn vouch(&mut self, ip: IpAddr, now: Instant) {
        if let Some(standing) = self.standing(ip, now) {
            standing.trusted_until = Some(now + TRUST);
            standing.refused_until = None;
            standing.strikes = 0;
            standing.since = None;
        }
    }

    /// Addresses remembered now.
    pub fn tracked(&self) -> usize {
        self.clients.len()
    }

    /// The entry for `ip`, making room by forgetting expired entries; `None` when every entry
    /// is still live and the table is full.
    fn standing(&mut self, ip: IpAddr, now: Instant) -> Option<&mut Standing> {
        if !self.clients.contains_key(&ip) && self.clients.len() >= MAX_TRACKED {
            let rules = &self.rules;
            self.clients.retain(|_, s| !s.expired(rules, now));
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
        // Once the penalties and windows have passed, the entries make room.
        let later = t0 + Duration::from_secs(61);
        assert!(b.strike(extra, later).is_some());
        assert_eq!(b.tracked(), 1);
    }
}
