//! The front proxy's identity headers (docs/hpa-behaviour.md §3.2). Only called once the request's client
//! certificate has verified against the requestheader CA with an allowed CN: on any other
//! request these headers are attacker-controlled and are never read.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::AuthUser;

/// What the front proxy's certificate must look like and which headers carry the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// Allowed certificate CNs; empty accepts any CN signed by the requestheader CA.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefixes: Vec<String>,
}

impl Default for RequestHeaderConfig {
    fn default() -> Self {
        RequestHeaderConfig {
            allowed_names: Vec::new(),
            username_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
        }
    }
}

impl RequestHeaderConfig {
    pub fn name_allowed(&self, cn: &str) -> bool {
        self.allowed_names.is_empty() || self.allowed_names.iter().any(|n| n == cn)
    }
}

/// The user the front proxy vouches for, or `None` when no username header is set.
pub fn user_from_headers(headers: &HeaderMap, config: &RequestHeaderConfig) -> Option<AuthUser> {
    // The first configured header with a non-empty first value names the user.
    let name = config.username_headers.iter().find_map(|h| {
        headers
            .get(h.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(String::from)
    })?;
    let mut groups = Vec::new();
    for h in &config.group_headers {
        for v in headers.get_all(h.as_str()) {
            if let Ok(v) = v.to_str() {
                groups.push(v.to_string());
            }
        }
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        let lower = name.as_str(); // http normalises header names to lower case
        for prefix in &config.extra_headers_prefixes {
            // Prefixes match without regard to case, compared in place: this runs for every
            // header of every request.
            let Some(key) = lower
                .get(..prefix.len())
                .filter(|head| head.eq_ignore_ascii_case(prefix))
                .map(|_| &lower[prefix.len()..])
            else {
                continue;
            };
            if key.is_empty() {
                continue;
            }
            // Keys are lower-cased then %-decoded, so an encoded upper-case letter survives.
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .into_owned();
            if let Ok(v) = value.to_str() {
                extra.entry(key).or_default().push(v.to_string());
            }
        }
    }
    Some(AuthUser {
        name,
        uid: String::new(),
        groups,
        extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn user_groups_and_extra() {
        let h = headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-User", "mallory"),
            ("X-Remote-Group", "a"),
            ("X-Remote-Group", "b"),
            ("X-Remote-Extra-Scopes", "s1"),
            ("X-Remote-Extra-Scopes", "s2"),
            ("X-Remote-Extra-Example.com%2fKey%41", "v"),
        ]);
        let u = user_from_headers(&h, &RequestHeaderConfig::default()).unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, vec!["a", "b"]);
        assert_eq!(u.extra["scopes"], vec!["s1", "s2"]);
        // lower-cased first, then decoded: %41 stays an upper-case A
        assert_eq!(u.extra["example.com/keyA"], vec!["v"]);
    }

    #[test]
    fn no_username_header_is_no_user() {
        let h = headers(&[("X-Remote-Group", "a"), ("X-Remote-User", "")]);
        assert_eq!(user_from_headers(&h, &RequestHeaderConfig::default()), None);
    }

    #[test]
    fn configured_header_names() {
        let config = RequestHeaderConfig {
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec!["X-Proxy-User".into(), "X-Remote-User".into()],
            group_headers: vec!["X-Proxy-Group".into()],
            extra_headers_prefixes: vec!["X-Proxy-Extra-".into()],
        };
        let h = headers(&[
            ("X-Remote-User", "second"),
            ("X-Proxy-Group", "g"),
            ("X-Remote-Group", "ignored"),
        ]);
        let u = user_from_headers(&h, &config).unwrap();
        assert_eq!(u.name, "second");
        assert_eq!(u.groups, vec!["g"]);
        assert!(config.name_allowed("front-proxy-client"));
        assert!(!config.name_allowed("front-proxy-clientx"));
        assert!(RequestHeaderConfig::default().name_allowed("anything"));
    }
}
