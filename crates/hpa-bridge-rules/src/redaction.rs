//! What may be shown of a target URL. A leaf module: the store, config, scraper, engine and
//! self-metrics all show target URLs, and each goes through the one function here.

use std::borrow::Cow;

/// What replaces a secret in a shown URL.
const MASK: &str = "xxxxx";

/// A URL as it may be shown anywhere: `/status`, the status page, metric labels, logs and error
/// messages. The password of a userinfo becomes `xxxxx`, as Go's `url.URL.Redacted` shows it in
/// Prometheus; a userinfo without a password is replaced whole, because a lone user name is
/// often a token. Every query value becomes `xxxxx` and the keys stay: exporters take tokens
/// as query parameters (`?token=`), and the keys alone still say what the URL asks for. Every
/// place that shows a target URL goes through here, so no page, log or metric shows a token.
pub fn redact_url(url: &str) -> Cow<'_, str> {
    match without_password(url) {
        Cow::Borrowed(url) => without_query_values(url),
        Cow::Owned(url) => Cow::Owned(without_query_values(&url).into_owned()),
    }
}

/// `url` with only its password masked. It keeps the query values, so it tells apart URLs that
/// `redact_url` shows alike; it is for comparing URLs and is never shown.
///
/// An authority ends at the first `/`, `?` or `#` (RFC 3986 §3.2), so `user:pa/ss@host` parses
/// as the host `user` and the path `/ss@host`; but that is a password that was not
/// percent-encoded, and it must not be shown whole either. So when the authority holds no `@`
/// and an `@` follows, everything before the last `@` is masked: a URL with an `@` in its path
/// or query is shown less clearly, and no password is ever shown.
pub fn without_password(url: &str) -> Cow<'_, str> {
    let authority_start = authority_start(url);
    let rest = &url[authority_start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let (at, shown) = match authority.rfind('@') {
        Some(at) => match authority[..at].split_once(':') {
            Some((user, _)) => (at, format!("{user}:{MASK}")),
            None => (at, MASK.to_owned()),
        },
        None => match rest.rfind('@') {
            Some(at) => (at, MASK.to_owned()),
            None => return Cow::Borrowed(url),
        },
    };
    Cow::Owned(format!(
        "{}{shown}{}",
        &url[..authority_start],
        &url[authority_start + at..]
    ))
}

fn authority_start(url: &str) -> usize {
    url.find("://").map_or(0, |i| i + 3)
}

/// `url` with every non-empty query value masked. A component without `=` is a key alone and
/// stays; a value runs to the next `&`, so whatever else a server might split on is masked.
fn without_query_values(url: &str) -> Cow<'_, str> {
    let fragment = url.find('#').unwrap_or(url.len());
    let start = authority_start(url).min(fragment);
    let Some(query) = url[start..fragment].find('?').map(|q| start + q + 1) else {
        return Cow::Borrowed(url);
    };
    let has_value = |c: &str| c.split_once('=').is_some_and(|(_, v)| !v.is_empty());
    if !url[query..fragment].split('&').any(has_value) {
        return Cow::Borrowed(url);
    }
    let mut shown = String::with_capacity(url.len());
    shown.push_str(&url[..query]);
    for (i, component) in url[query..fragment].split('&').enumerate() {
        if i > 0 {
            shown.push('&');
        }
        match component.split_once('=') {
            Some((key, value)) if !value.is_empty() => {
                shown.push_str(key);
                shown.push('=');
                shown.push_str(MASK);
            }
            _ => shown.push_str(component),
        }
    }
    shown.push_str(&url[fragment..]);
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_userinfo_and_query_values_and_nothing_else() {
        let cases = [
            (
                "http://user:pass@host:1/metrics?token=SECRETT&x=SECRETX",
                "http://user:xxxxx@host:1/metrics?token=xxxxx&x=xxxxx",
            ),
            (
                "http://host/m?flag&empty=&a=b=c;d=e#frag?k=v",
                "http://host/m?flag&empty=&a=xxxxx#frag?k=v",
            ),
            ("http://host/m?", "http://host/m?"),
            ("http://host?t=1", "http://host?t=xxxxx"),
            ("http://t@host?t=1", "http://xxxxx@host?t=xxxxx"),
            (
                "http://user:pass@host:9100/metrics",
                "http://user:xxxxx@host:9100/metrics",
            ),
            (
                "http://user:p%40ss:w@host/m?a=b@c",
                "http://user:xxxxx@host/m?a=xxxxx",
            ),
            ("http://token@host/m", "http://xxxxx@host/m"),
            ("http://:secret@host", "http://:xxxxx@host"),
            ("http://a:b@c@host/m", "http://a:xxxxx@host/m"),
            ("user:pass@host/m", "user:xxxxx@host/m"),
            // An `@` past the authority may end a password that holds `/`, `?` or `#`.
            ("http://user:pa/ss@host:9/m", "http://xxxxx@host:9/m"),
            ("http://user:pa#ss@host/m", "http://xxxxx@host/m"),
            (
                "http://user:pa?ss@host/m?t=1",
                "http://xxxxx@host/m?t=xxxxx",
            ),
            ("http://user:12/34@host/m", "http://xxxxx@host/m"),
            ("http://host/path@x", "http://xxxxx@x"),
            ("http://host/m#frag@x", "http://xxxxx@x"),
            (
                "http://10.0.0.1:9100/metrics",
                "http://10.0.0.1:9100/metrics",
            ),
            ("games/lobby-0", "games/lobby-0"),
            ("", ""),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn no_character_of_a_password_is_ever_shown() {
        for secret in [
            "s3cr/et", "s3cr#et", "s3cr?et", "s3cr@et", "s3cr:et", "/s3cret", "s3cret#", "s3cret/",
        ] {
            for url in [
                format!("http://user:{secret}@host:9100/metrics"),
                format!("http://user:{secret}@host:9100/metrics?a=b"),
                // A lone userinfo holding `:` is a user name and a password; the name is shown.
                format!("http://{}@host/m", secret.replace(':', "")),
                format!("user:{secret}@host/m"),
            ] {
                let shown = redact_url(&url);
                assert!(
                    !shown.contains("s3cr") && !shown.contains("et@"),
                    "{url} shown as {shown}"
                );
            }
        }
    }

    #[test]
    fn without_password_keeps_the_query() {
        assert_eq!(
            without_password("http://u:p@h/m?target=a"),
            "http://u:xxxxx@h/m?target=a"
        );
        assert_eq!(
            without_password("http://h/m?target=a"),
            "http://h/m?target=a"
        );
    }
}
