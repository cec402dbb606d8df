//! Aggregated-API security: who is calling (authentication) and may they (authorization).
//!
//! Authentication runs the chain k8s.io/apiserver uses for a delegated server (docs/hpa-behaviour.md §3.2):
//! 1. front proxy: a client certificate verified against the requestheader CA, with an allowed
//!    CN, vouches for the user in the `X-Remote-*` headers;
//! 2. x509: a client certificate verified against the client CA is the user CN, groups O;
//! 3. bearer token: checked with a `TokenReview`, cached briefly.
//!
//! Anything else is anonymous, which reaches only the health paths (the server answers those
//! before the gate). Authorization is a `SubjectAccessReview` unless the user is in an
//! always-allowed group (docs/hpa-behaviour.md §3.3).

pub mod authz;
pub mod requestheader;
pub mod token;
pub mod trust;
pub mod x509;

use std::collections::BTreeMap;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::HeaderMap;
use rustls::pki_types::CertificateDer;
use tokio::time::Instant;

use crate::api::response::{status_response, ApiResponse, StatusReason};
use crate::api::transport::{Gatekeeper, Peer};
use crate::api::Route;

pub use authz::{Attributes, Authorizer, Decision};
pub use token::TokenReviewer;
pub use trust::{TrustSettings, TrustStore};

/// Every authenticated user carries this group (docs/hpa-behaviour.md §3.2).
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// An authenticated caller, as a SubjectAccessReview describes it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AuthUser {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl AuthUser {
    /// Add `system:authenticated` unless the authenticator already did.
    fn authenticated(mut self) -> Self {
        if !self.groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            self.groups.push(AUTHENTICATED_GROUP.to_string());
        }
        self
    }
}

/// Which link of the chain authenticated the request (for logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMethod {
    FrontProxy,
    ClientCertificate,
    BearerToken,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::FrontProxy => "front-proxy",
            AuthMethod::ClientCertificate => "client-certificate",
            AuthMethod::BearerToken => "bearer-token",
        }
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum AuthnError {
    /// The credential was checked and rejected.
    #[error("{0}")]
    Rejected(String),
    /// The credential could not be checked (TokenReview failed).
    #[error("{0}")]
    Unavailable(String),
}

/// The authentication chain.
pub struct Authenticator {
    pub trust: Arc<TrustStore>,
    pub tokens: Option<TokenReviewer>,
}

impl Authenticator {
    /// `Ok(None)` is anonymous: no credential at all.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        certificates: Option<&[CertificateDer<'static>]>,
    ) -> Result<Option<(AuthUser, AuthMethod)>, AuthnError> {
        let trust = self.trust.current();
        if let Some(chain) = certificates.filter(|c| !c.is_empty()) {
            // Re-verified per request, not just at the handshake: the CA that accepted the
            // connection may have rotated away since, and the handshake verifier accepts
            // either CA while only the requestheader CA may vouch for headers (§3.2).
            if let Some(rh) = &trust.request_header {
                if let Some(subject) = rh.ca.verified_subject(chain) {
                    match subject.map(|(cn, _)| cn) {
                        Ok(cn) if rh.config.name_allowed(&cn) => {
                            if let Some(user) =
                                requestheader::user_from_headers(headers, &rh.config)
                            {
                                return Ok(Some((user.authenticated(), AuthMethod::FrontProxy)));
                            }
                        }
                        Ok(cn) => {
                            tracing::debug!(cn = %cn, "front-proxy certificate CN is not in requestheader-allowed-names");
                        }
                        Err(e) => tracing::debug!(error = %e, "unreadable front-proxy certificate"),
                    }
                }
            }
            if let Some(ca) = &trust.client_ca {
                if let Some(subject) = ca.verified_subject(chain) {
                    let (cn, orgs) = subject.map_err(AuthnError::Rejected)?;
                    if cn.is_empty() {
                        return Err(AuthnError::Rejected(
                            "the client certificate has no common name (CN) to use as the user name"
                                .into(),
                        ));
                    }
                    let user = AuthUser {
                        name: cn,
                        uid: String::new(),
                        groups: orgs,
                        extra: BTreeMap::new(),
                    };
                    return Ok(Some((user.authenticated(), AuthMethod::ClientCertificate)));
                }
            }
        }
        if let Some(token) = bearer_token(headers) {
            let Some(reviewer) = &self.tokens else {
                return Err(AuthnError::Rejected(
                    "bearer tokens are not accepted: no --authentication-kubeconfig (TokenReview) is configured"
                        .into(),
                ));
            };
            let user = reviewer.review(token).await?;
            return Ok(Some((user.authenticated(), AuthMethod::BearerToken)));
        }
        Ok(None)
    }
}

impl Authenticator {
    /// Whether `chain` is the front proxy's certificate, with the trust in force now.
    pub fn is_front_proxy(&self, chain: &[CertificateDer<'static>]) -> bool {
        let trust = self.trust.current();
        trust
            .request_header
            .as_ref()
            .is_some_and(|rh| rh.is_front_proxy(chain))
    }
}

/// `Authorization: Bearer <token>`, the scheme compared case-insensitively as k8s does.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Authentication then authorization, in front of every non-health route.
pub struct AuthGate {
    pub authenticator: Authenticator,
    pub authorizer: Authorizer,
}

impl AuthGate {
    pub async fn check(
        &self,
        method: &http::Method,
        path: &str,
        headers: &HeaderMap,
        certificates: Option<&[CertificateDer<'static>]>,
        route: &Route,
    ) -> Result<AuthUser, ApiResponse> {
        let (user, how) = match self.authenticator.authenticate(headers, certificates).await {
            Ok(Some(u)) => u,
            Ok(None) => {
                tracing::debug!(path, "anonymous request refused");
                return Err(status_response(
                    StatusReason::Unauthorized,
                    "Unauthorized: anonymous requests may only reach /healthz, /livez and /readyz; \
                     present a client certificate or a bearer token",
                ));
            }
            Err(AuthnError::Rejected(msg)) => {
                tracing::debug!(path, reason = %msg, "authentication rejected");
                return Err(status_response(
                    StatusReason::Unauthorized,
                    &format!("Unauthorized: {msg}"),
                ));
            }
            Err(AuthnError::Unavailable(msg)) => {
                tracing::warn!(path, error = %msg, "authentication unavailable");
                return Err(status_response(
                    StatusReason::ServiceUnavailable,
                    &format!("authentication is unavailable: {msg}"),
                ));
            }
        };
        let attrs = Attributes::for_request(method, path, route);
        match self.authorizer.authorize(&user, &attrs).await {
            Ok(Decision::Allow) => {
                tracing::debug!(user = %user.name, method = how.as_str(), %attrs, "allowed");
                Ok(user)
            }
            Ok(Decision::Deny(reason)) => {
                tracing::info!(user = %user.name, method = how.as_str(), %attrs, reason = %reason, "forbidden");
                Err(status_response(
                    StatusReason::Forbidden,
                    &attrs.forbidden_message(&user.name, &reason),
                ))
            }
            Err(e) => {
                // Never allow when the authorizer cannot answer (k8s answers 500 here too).
                tracing::warn!(user = %user.name, %attrs, error = %e, "authorization failed");
                Err(status_response(
                    StatusReason::InternalError,
                    &format!("authorization failed for user {:?}: {e}", user.name),
                ))
            }
        }
    }
}

impl Gatekeeper for AuthGate {
    fn admit<'a>(
        &'a self,
        req: &'a http::request::Parts,
        peer: &'a Peer,
        route: &'a Route,
    ) -> Pin<Box<dyn Future<Output = Result<(), ApiResponse>> + Send + 'a>> {
        Box::pin(async move {
            self.check(
                &req.method,
                req.uri.path(),
                &req.headers,
                peer.certificates.as_deref().map(|c| c.as_slice()),
                route,
            )
            .await
            .map(|_| ())
        })
    }

    fn is_front_proxy(&self, certificates: &[CertificateDer<'static>]) -> bool {
        self.authenticator.is_front_proxy(certificates)
    }
}

/// A small expiring map for review answers, the least recently used out first when full. Time
/// is a parameter so the cache logic has no clock. Keys come from what a client sends before
/// it is authenticated, so they keep SipHash (std's `RandomState`).
pub struct TtlCache<K, V> {
    entries: Mutex<lru::LruCache<K, (Instant, V), std::hash::RandomState>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(max_entries: usize) -> Self {
        let entries = hpa_bridge_engine::bounded_lru::bounded_lru(
            std::num::NonZeroUsize::new(max_entries).unwrap_or(std::num::NonZeroUsize::MIN),
        );
        TtlCache {
            entries: Mutex::new(entries),
        }
    }

    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key) {
            Some((expires, v)) if *expires > now => Some(v.clone()),
            Some(_) => {
                entries.pop(key);
                None
            }
            None => None,
        }
    }

    pub fn insert(&self, key: K, value: V, now: Instant, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.put(key, (now + ttl, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_scheme_is_case_insensitive_and_token_required() {
        let mut h = HeaderMap::new();
        h.insert("authorization", "bearer abc".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc"));
        h.insert("authorization", "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }

    #[test]
    fn authenticated_group_added_once() {
        let u = AuthUser {
            name: "a".into(),
            groups: vec![AUTHENTICATED_GROUP.into()],
            ..Default::default()
        }
        .authenticated();
        assert_eq!(u.groups, vec![AUTHENTICATED_GROUP.to_string()]);
        let u = AuthUser::default().authenticated();
        assert_eq!(u.groups, vec![AUTHENTICATED_GROUP.to_string()]);
    }

    #[test]
    fn cache_expires_at_ttl() {
        let c = TtlCache::new(2);
        let t0 = Instant::now();
        c.insert("k", 1, t0, Duration::from_secs(10));
        assert_eq!(c.get(&"k", t0 + Duration::from_secs(9)), Some(1));
        assert_eq!(c.get(&"k", t0 + Duration::from_secs(10)), None);
        c.insert("z", 1, t0, Duration::ZERO);
        assert_eq!(c.get(&"z", t0), None);
    }

    #[test]
    fn cache_is_bounded() {
        let c = TtlCache::new(2);
        let t0 = Instant::now();
        for i in 0..10 {
            c.insert(i, i, t0, Duration::from_secs(10));
        }
        assert!(c.entries.lock().unwrap().len() <= 2);
        assert_eq!(c.get(&9, t0), Some(9));
    }

    #[test]
    fn a_full_cache_forgets_the_least_recently_used_entry() {
        let c = TtlCache::new(2);
        let t0 = Instant::now();
        let ttl = Duration::from_secs(10);
        c.insert("a", 1, t0, ttl);
        c.insert("b", 2, t0, ttl);
        assert_eq!(c.get(&"a", t0), Some(1));
        c.insert("c", 3, t0, ttl);
        assert_eq!(c.get(&"a", t0), Some(1), "the entry just used stays");
        assert_eq!(c.get(&"b", t0), None, "the least recent goes");
        assert_eq!(c.get(&"c", t0), Some(3));
    }
}
