//! What a request's path and query say, decoded as the API server's Go code decodes them:
//! percent-decoded path segments, `url.ParseQuery`'s pairs, and the namespace name rule.

use std::borrow::Cow;

/// A path segment as the API server reads it: percent-decoded, invalid UTF-8 replaced.
pub(crate) fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// A query Go's `url.ParseQuery` reports an error for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryParamError {
    #[error("invalid URL escape {0:?} in the query")]
    Escape(String),
    #[error("invalid semicolon separator in query")]
    Semicolon,
    #[error("query parameter {0:?} is not valid UTF-8 once decoded")]
    Utf8(String),
}

/// The `labelSelector` query parameter, decoded as Go's `url.ParseQuery` does: names and
/// values are percent-decoded (`label%53elector` is `labelSelector`), `+` is a space in both,
/// and of repeated parameters the first counts (`url.Values.Get`).
///
/// Where Go reports an error (a bad escape, a `;`), the API server's handlers read
/// `req.URL.Query()`, which drops the pair and carries on; dropping a `labelSelector` would
/// widen the answer to the whole namespace, so any such query is refused instead (400). That
/// guards direct callers only: the aggregator forwards `req.URL.Query().Encode()`, in which
/// such a pair is already gone (docs/hpa-behaviour.md §3.1), and the HPA's own client never
/// sends one.
pub fn label_selector_param(query: Option<&str>) -> Result<Option<String>, QueryParamError> {
    query_param(query, "labelSelector")
}

/// The parameter `wanted` of a query (the first of a repeated name, as `url.Values.Get`),
/// decoded as `label_selector_param` describes.
pub fn query_param(query: Option<&str>, wanted: &str) -> Result<Option<String>, QueryParamError> {
    let mut found = None;
    each_query_pair(query, |name, value| {
        if found.is_none() && name == wanted {
            found = Some(value.into_owned());
        }
    })?;
    Ok(found)
}

/// Every query parameter, decoded as Go's `url.ParseQuery` does, in order (the first of a
/// repeated name is the one `url.Values.Get` returns). A bad escape or a `;` refuses the
/// whole query, for the reason given on `label_selector_param`.
pub fn query_pairs(query: Option<&str>) -> Result<Vec<(String, String)>, QueryParamError> {
    let mut pairs = Vec::new();
    each_query_pair(query, |name, value| {
        pairs.push((name.into_owned(), value.into_owned()))
    })?;
    Ok(pairs)
}

/// Each decoded pair of `query` in order, up to the first error, which is the answer: the
/// callers drop what they saw, since an error anywhere refuses the whole query (as
/// `query_pairs` says). Names and values without escapes are lent, not copied: the HPA's query
/// is one parameter whose name has none.
fn each_query_pair<'q>(
    query: Option<&'q str>,
    mut pair: impl FnMut(Cow<'q, str>, Cow<'q, str>),
) -> Result<(), QueryParamError> {
    for p in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        if p.contains(';') {
            return Err(QueryParamError::Semicolon);
        }
        let (name, value) = p.split_once('=').unwrap_or((p, ""));
        pair(query_unescape(name)?, query_unescape(value)?);
    }
    Ok(())
}

/// Go's `url.QueryUnescape`: `+` is a space, `%` takes exactly two hex digits.
fn query_unescape(s: &str) -> Result<Cow<'_, str>, QueryParamError> {
    if !s.contains(['%', '+']) {
        return Ok(Cow::Borrowed(s));
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let digit = |j: usize| {
                    let c = *bytes.get(j).filter(|c| c.is_ascii_hexdigit())?;
                    (c as char).to_digit(16).map(|d| d as u8)
                };
                let (Some(high), Some(low)) = (digit(i + 1), digit(i + 2)) else {
                    let end = (i + 3).min(bytes.len());
                    return Err(QueryParamError::Escape(
                        String::from_utf8_lossy(&bytes[i..end]).into_owned(),
                    ));
                };
                let b = high << 4 | low;
                out.push(b);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out)
        .map(Cow::Owned)
        .map_err(|_| QueryParamError::Utf8(s.to_string()))
}

/// A DNS-1123 label, which every namespace name is.
pub(crate) fn valid_namespace(ns: &str) -> bool {
    !ns.is_empty()
        && ns.len() <= 63
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-')
}
