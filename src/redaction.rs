//! What may be shown of a target URL. A leaf module: the store, config, scraper, engine and
//! self-metrics all show target URLs, and each goes through the one function here.

use std::borrow::Cow;

/// A URL as it may be shown anywhere: `/status`, metric labels, logs and error messages. The
/// password of a userinfo becomes `xxxxx`, as Go's `url.URL.Redacted` shows it in Prometheus;
/// a userinfo without a password is replaced whole, because a lone user name is often a token.
/// Every place that shows a target URL goes through here (issue 13).
pub fn redact_url(url: &str) -> Cow<'_, str> {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[authority_start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let Some(at) = authority.rfind('@') else {
        return Cow::Borrowed(url);
    };
    let shown = match authority[..at].split_once(':') {
        Some((user, _)) => format!("{user}:xxxxx"),
        None => "xxxxx".to_owned(),
    };
    Cow::Owned(format!(
        "{}{shown}{}",
        &url[..authority_start],
        &url[authority_start + at..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_userinfo_and_nothing_else() {
        let cases = [
            (
                "http://user:pass@host:9100/metrics",
                "http://user:xxxxx@host:9100/metrics",
            ),
            (
                "http://user:p%40ss:w@host/m?a=b@c",
                "http://user:xxxxx@host/m?a=b@c",
            ),
            ("http://token@host/m", "http://xxxxx@host/m"),
            ("http://:secret@host", "http://:xxxxx@host"),
            ("http://a:b@c@host/m", "http://a:xxxxx@host/m"),
            ("user:pass@host/m", "user:xxxxx@host/m"),
            ("http://host/path@x", "http://host/path@x"),
            ("http://host/m#frag@x", "http://host/m#frag@x"),
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
}
