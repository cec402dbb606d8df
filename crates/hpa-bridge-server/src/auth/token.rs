//! Bearer tokens, checked by the Kubernetes API with a `TokenReview` (authentication.k8s.io/v1)
//! and cached briefly (docs/hpa-behaviour.md §3.2). The cache key is the token's SHA-256, so the clear
//! token is held only for the duration of one review.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::PostParams;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::{AuthUser, AuthnError, TtlCache};

/// The review's verdict: a user, or the reason the token was refused.
type Verdict = Result<AuthUser, String>;

pub struct TokenReviewer {
    client: kube::Client,
    /// Both verdicts are cached for this long (k8s's delegated authenticator does the same);
    /// failures to reach the API are not cached.
    ttl: Duration,
    timeout: Duration,
    cache: TtlCache<[u8; 32], Verdict>,
}

impl TokenReviewer {
    pub fn new(client: kube::Client, ttl: Duration, timeout: Duration) -> Self {
        TokenReviewer {
            client,
            ttl,
            timeout,
            cache: TtlCache::new(4096),
        }
    }

    pub async fn review(&self, token: &str) -> Result<AuthUser, AuthnError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(v) = self.cache.get(&key, Instant::now()) {
            return v.map_err(AuthnError::Rejected);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                // No audiences: the API server's own audience, as k8s delegated servers default to.
                audiences: None,
            },
            ..Default::default()
        };
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let answer =
            tokio::time::timeout(self.timeout, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| {
                    AuthnError::Unavailable(format!(
                        "TokenReview did not answer within {:?}",
                        self.timeout
                    ))
                })?
                .map_err(|e| AuthnError::Unavailable(format!("TokenReview failed: {e}")))?;
        let verdict = verdict(answer);
        self.cache
            .insert(key, verdict.clone(), Instant::now(), self.ttl);
        verdict.map_err(AuthnError::Rejected)
    }
}

fn verdict(answer: TokenReview) -> Verdict {
    let status = answer.status.unwrap_or_default();
    let user = status.user.unwrap_or_default();
    match (status.authenticated, user.username) {
        (Some(true), Some(name)) if !name.is_empty() => Ok(AuthUser {
            name,
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }),
        _ => Err(match status.error.filter(|e| !e.is_empty()) {
            Some(e) => format!("the bearer token was not accepted: {e}"),
            None => "the bearer token was not accepted".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};

    #[test]
    fn verdicts() {
        let ok = TokenReview {
            status: Some(TokenReviewStatus {
                authenticated: Some(true),
                user: Some(UserInfo {
                    username: Some("system:serviceaccount:kube-system:hpa".into()),
                    uid: Some("u1".into()),
                    groups: Some(vec!["system:serviceaccounts".into()]),
                    extra: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let u = verdict(ok).unwrap();
        assert_eq!(u.uid, "u1");
        assert_eq!(u.groups, vec!["system:serviceaccounts"]);
        let bad = TokenReview {
            status: Some(TokenReviewStatus {
                authenticated: Some(false),
                error: Some("token expired".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(verdict(bad).unwrap_err().contains("token expired"));
        // authenticated without a user name is not a user
        let odd = TokenReview {
            status: Some(TokenReviewStatus {
                authenticated: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(verdict(odd).is_err());
    }
}
