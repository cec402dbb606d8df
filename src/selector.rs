//! Kubernetes label selectors: parsing, matching, canonical rendering and PromQL matchers.
//!
//! The HPA sends `metric.selector` as the `labelSelector` query parameter in the standard
//! string syntax (docs/hpa-behaviour.md §1.2). The grammar, validation and matching here follow
//! `k8s.io/apimachinery/pkg/labels` (selector.go), so a selector accepted by the API server
//! means the same thing here. Deliberate deviations are noted where they occur.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{self, Write as _};
use std::hash::BuildHasher;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operator {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    /// The canonical text (`Display`), written once: the serving path keys caches and
    /// explanations by it several times per request.
    text: String,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {message}")]
pub struct SelectorError {
    pub selector: String,
    pub message: String,
}

/// Anything labels can be looked up in.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// For pair lists (e.g. Prometheus series labels) the first occurrence of a key wins.
impl Labels for [(String, String)] {
    fn label(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

impl Labels for Vec<(String, String)> {
    fn label(&self, key: &str) -> Option<&str> {
        self.as_slice().label(key)
    }
}

/// k8s caps the name part of a key and every value at 63 characters (IsQualifiedName,
/// IsValidLabelValue); the optional key prefix is a DNS subdomain of at most 253.
const MAX_NAME_LEN: usize = 63;
const MAX_PREFIX_LEN: usize = 253;

impl Requirement {
    /// Whether this single requirement holds, with k8s `Requirement.Matches` semantics:
    /// `!=` and `notin` also match when the label is absent; `=` and `in` need it present.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label(&self.key);
        let listed = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }

    /// Checks the key, value count and values the way k8s `NewRequirement` does, and
    /// normalises the values (sorted, deduplicated) as k8s's `sets.String.List()` does.
    fn validated(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        validate_key(key)?;
        let values: Vec<String> = values
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err(format!(
                    "'{}' on label {key:?} needs at least one value",
                    operator_text(operator)
                ))
            }
            Operator::Equals | Operator::NotEquals if values.len() != 1 => {
                return Err(format!(
                    "'{}' on label {key:?} needs exactly one value",
                    operator_text(operator)
                ))
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err(format!(
                    "exists / does-not-exist on label {key:?} takes no values"
                ))
            }
            _ => {}
        }
        for value in &values {
            validate_value(key, value)?;
        }
        Ok(Requirement {
            key: key.to_owned(),
            operator,
            values,
        })
    }

    /// Sort key giving a total order, so that the canonical text is deterministic and parsing
    /// it again yields the identical requirement list (k8s sorts by key only, with an
    /// unstable sort; ties between requirements on the same key are broken here).
    fn order_key(&self) -> (&str, Operator, &[String]) {
        (&self.key, self.operator, &self.values)
    }

    /// One PromQL label matcher for this requirement.
    fn promql_matcher(&self) -> Result<String, String> {
        let key = &self.key;
        if !is_prometheus_label_name(key) {
            return Err(format!(
                "label key {key:?} is not a valid Prometheus label name \
                 (must match [a-zA-Z_][a-zA-Z0-9_]* and not start with \"__\")"
            ));
        }
        let single = || match self.values.as_slice() {
            [v] => Ok(v.as_str()),
            _ => Err(format!(
                "'{}' on label {key:?} needs exactly one value",
                operator_text(self.operator)
            )),
        };
        let alternation = || {
            if self.values.is_empty() {
                // An empty alternation would render as `=~""`, i.e. "label absent", which
                // is not what an (invalid) empty `in` list means.
                return Err(format!(
                    "'{}' on label {key:?} needs at least one value",
                    operator_text(self.operator)
                ));
            }
            Ok(self
                .values
                .iter()
                .map(|v| re2_escape(v))
                .collect::<Vec<_>>()
                .join("|"))
        };
        let no_values = || {
            if self.values.is_empty() {
                Ok("")
            } else {
                Err(format!(
                    "exists / does-not-exist on label {key:?} takes no values"
                ))
            }
        };
        // Prometheus treats an empty label value as an absent label, so `key!=""` is
        // "exists" and `key=""` is "does not exist". The flip side: `k=""` / `k in ("")`
        // also match series without `k`, where k8s would require the label to be present.
        let (op, body) = match self.operator {
            Operator::Equals => ("=", single()?.to_owned()),
            Operator::NotEquals => ("!=", single()?.to_owned()),
            // Prometheus anchors regex matchers on both ends, so a plain alternation of
            // escaped literals matches exactly the listed values.
            Operator::In => ("=~", alternation()?),
            Operator::NotIn => ("!~", alternation()?),
            Operator::Exists => ("!=", no_values()?.to_owned()),
            Operator::DoesNotExist => ("=", no_values()?.to_owned()),
        };
        Ok(format!("{key}{op}{}", promql_quote(&body)))
    }
}

impl fmt::Display for Requirement {
    /// Same layout as k8s `Requirement.String()`: `k=v`, `k!=v`, `k in (a,b)`, `k`, `!k`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let values = || {
            let mut sorted: Vec<&str> = self.values.iter().map(String::as_str).collect();
            sorted.sort_unstable();
            sorted.dedup();
            sorted.join(",")
        };
        match self.operator {
            Operator::Equals => write!(f, "{key}={}", values()),
            Operator::NotEquals => write!(f, "{key}!={}", values()),
            Operator::In => write!(f, "{key} in ({})", values()),
            Operator::NotIn => write!(f, "{key} notin ({})", values()),
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
        }
    }
}

impl LabelSelector {
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// Parses the k8s string syntax. Empty (or whitespace-only) text selects everything,
    /// matching k8s, where an absent or empty selector is `labels.Everything()`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let tokens = lex(text);
        let requirements =
            Parser { tokens, pos: 0 }
                .selector()
                .map_err(|message| SelectorError {
                    selector: text.to_owned(),
                    message,
                })?;
        Ok(Self::sorted(requirements))
    }

    /// Builds a selector from structured requirements (e.g. `matchExpressions`), validating
    /// each one exactly as the parser would.
    pub fn from_requirements(
        requirements: impl IntoIterator<Item = Requirement>,
    ) -> Result<Self, SelectorError> {
        let mut checked = Vec::new();
        for r in requirements {
            match Requirement::validated(&r.key, r.operator, r.values.clone()) {
                Ok(v) => checked.push(v),
                Err(message) => {
                    return Err(SelectorError {
                        selector: r.to_string(),
                        message,
                    })
                }
            }
        }
        Ok(Self::sorted(checked))
    }

    fn sorted(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        Self::unchecked(requirements)
    }

    /// Canonical form like k8s `internalSelector.String()`: requirements sorted, joined by
    /// `,` with no spaces. Parsing it again gives an equal selector.
    fn unchecked(requirements: Vec<Requirement>) -> Self {
        let mut text = String::new();
        for (i, r) in requirements.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            let _ = write!(text, "{r}");
        }
        LabelSelector { requirements, text }
    }

    /// The canonical text, as `Display` writes it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// All requirements must hold (k8s ANDs them); no requirements matches everything.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Labels whose value the selector pins to exactly one value: `k=v` and `k in (v)`.
    /// If the selector pins one key to two different values it matches nothing; the first
    /// requirement in canonical order is kept.
    pub fn equality_labels(&self) -> BTreeMap<&str, &str> {
        let mut out = BTreeMap::new();
        for r in &self.requirements {
            if let (Operator::Equals | Operator::In, [v]) = (r.operator, r.values.as_slice()) {
                out.entry(r.key.as_str()).or_insert(v.as_str());
            }
        }
        out
    }

    /// One PromQL label matcher per requirement, e.g. `app="web"`, `zone=~"a|b"`.
    ///
    /// Values are RE2-escaped (for regex matchers) and then escaped for a PromQL
    /// double-quoted string, so any value is matched literally, whatever characters it
    /// holds. Keys that are not Prometheus label names (`app.kubernetes.io/name`, `a-b`)
    /// are an error rather than being mangled into a different label.
    pub fn promql_matchers(&self) -> Result<Vec<String>, SelectorError> {
        self.requirements
            .iter()
            .map(|r| {
                r.promql_matcher().map_err(|message| SelectorError {
                    selector: self.to_string(),
                    message,
                })
            })
            .collect()
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical form (`unchecked`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

fn operator_text(op: Operator) -> &'static str {
    match op {
        Operator::Equals => "=",
        Operator::NotEquals => "!=",
        Operator::In => "in",
        Operator::NotIn => "notin",
        Operator::Exists => "exists",
        Operator::DoesNotExist => "!",
    }
}

// ---------------------------------------------------------------------------------------
// Lexer

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token<'a> {
    /// Any run of non-special, non-whitespace characters. `in` / `notin` are keywords only
    /// in operator position; k8s lexes them as identifiers in key and value positions, so
    /// `in in (notin)` is a valid selector.
    Word(&'a str),
    Bang,
    NotEquals,
    Equals,
    DoubleEquals,
    Greater,
    Less,
    Open,
    Close,
    Comma,
    End,
}

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Token::Word(w) => return write!(f, "'{w}'"),
            Token::End => return f.write_str("end of selector"),
            Token::Bang => "!",
            Token::NotEquals => "!=",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::Greater => ">",
            Token::Less => "<",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
        };
        write!(f, "'{s}'")
    }
}

/// k8s `isWhitespace`: only these four; other Unicode spaces end up inside a word and fail
/// validation, as they would in k8s.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// k8s `isSpecialSymbol`. `<` and `>` are the numeric `lt`/`gt` operators in k8s; they are
/// lexed so they split words the same way, and rejected by the parser.
fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '<' | '>')
}

/// Tokenises like the k8s Lexer: whitespace separates, special symbols are taken greedily
/// (`!=`, `==` before `!`, `=`), everything else forms words. Unlike k8s, a NUL byte is an
/// ordinary character (k8s treats it as end of input and silently ignores the rest).
fn lex(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if is_space(c) {
            i += 1;
            continue;
        }
        let next = bytes.get(i + 1).copied().map(char::from);
        let (tok, len) = match (c, next) {
            ('!', Some('=')) => (Token::NotEquals, 2),
            ('=', Some('=')) => (Token::DoubleEquals, 2),
            ('!', _) => (Token::Bang, 1),
            ('=', _) => (Token::Equals, 1),
            ('(', _) => (Token::Open, 1),
            (')', _) => (Token::Close, 1),
            (',', _) => (Token::Comma, 1),
            ('<', _) => (Token::Less, 1),
            ('>', _) => (Token::Greater, 1),
            _ => {
                // Specials and whitespace are ASCII, so a byte scan never splits a UTF-8
                // sequence.
                let end = bytes[i..]
                    .iter()
                    .position(|&b| is_space(b as char) || is_special(b as char))
                    .map_or(bytes.len(), |p| i + p);
                (Token::Word(&text[i..end]), end - i)
            }
        };
        tokens.push(tok);
        i += len;
    }
    tokens.push(Token::End);
    tokens
}

// ---------------------------------------------------------------------------------------
// Parser

struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        self.tokens[self.pos]
    }

    fn next(&mut self) -> Token<'a> {
        let t = self.tokens[self.pos];
        if t != Token::End {
            self.pos += 1;
        }
        t
    }

    fn selector(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        match self.peek() {
            Token::End => return Ok(requirements),
            Token::Word(_) | Token::Bang => {}
            t => return Err(format!("expected label key or '!', found {t}")),
        }
        loop {
            let r = self.requirement()?;
            match self.next() {
                Token::End => {
                    requirements.push(r);
                    return Ok(requirements);
                }
                // k8s rejects a trailing comma and empty requirements (`a,,b`).
                Token::Comma => match self.peek() {
                    Token::Word(_) | Token::Bang => {}
                    t => return Err(format!("expected label key or '!' after ',', found {t}")),
                },
                t => {
                    return Err(format!(
                        "expected ',' or end of selector after '{r}', found {t}"
                    ))
                }
            }
            requirements.push(r);
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let negated = self.peek() == Token::Bang;
        if negated {
            self.next();
        }
        let key = match self.next() {
            Token::Word(w) => w,
            t if negated => return Err(format!("expected label key after '!', found {t}")),
            t => return Err(format!("expected label key, found {t}")),
        };
        validate_key(key)?;
        if negated || matches!(self.peek(), Token::End | Token::Comma) {
            // k8s infers exists / does-not-exist when the key is followed by `,` or the
            // end; after `!` it takes no operator, and anything else is left for the
            // caller to reject as trailing garbage (e.g. `!a=b`).
            let op = if negated {
                Operator::DoesNotExist
            } else {
                Operator::Exists
            };
            return Requirement::validated(key, op, Vec::new());
        }
        let (op, values) = match self.next() {
            Token::Word("in") => (Operator::In, self.value_list("in")?),
            Token::Word("notin") => (Operator::NotIn, self.value_list("notin")?),
            // `==` is k8s's DoubleEquals, which behaves exactly like `=`.
            Token::Equals | Token::DoubleEquals => (Operator::Equals, self.exact_value("=")?),
            Token::NotEquals => (Operator::NotEquals, self.exact_value("!=")?),
            t @ (Token::Greater | Token::Less) => {
                return Err(format!(
                    "operator {t} (numeric comparison) is not supported in this selector"
                ))
            }
            t => {
                return Err(format!(
                    "expected operator (=, ==, !=, in, notin) after key '{key}', found {t}"
                ))
            }
        };
        Requirement::validated(key, op, values)
    }

    /// k8s `parseExactValue`: a missing value (`k=` followed by `,` or the end) is the
    /// empty string, which is a valid label value.
    fn exact_value(&mut self, op: &str) -> Result<Vec<String>, String> {
        match self.peek() {
            Token::End | Token::Comma => Ok(vec![String::new()]),
            Token::Word(w) => {
                self.next();
                Ok(vec![w.to_owned()])
            }
            t => Err(format!("expected value after '{op}', found {t}")),
        }
    }

    /// k8s `parseValues` / `parseIdentifiersList`: comma-separated items where an empty item
    /// is the empty value, so `()` is `("")` and `(,a)` is `("", a)`.
    fn value_list(&mut self, op: &str) -> Result<Vec<String>, String> {
        if self.next() != Token::Open {
            return Err(format!("expected '(' after '{op}'"));
        }
        let mut values = Vec::new();
        loop {
            match self.next() {
                Token::Word(w) => {
                    values.push(w.to_owned());
                    match self.next() {
                        Token::Comma => {}
                        Token::Close => return Ok(values),
                        t => {
                            return Err(format!(
                                "expected ',' or ')' after value '{w}' in '{op}' list, found {t}"
                            ))
                        }
                    }
                }
                Token::Comma => values.push(String::new()),
                Token::Close => {
                    values.push(String::new());
                    return Ok(values);
                }
                t => {
                    return Err(format!(
                        "expected value, ',' or ')' in '{op}' list, found {t}"
                    ))
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Validation (k8s.io/apimachinery/pkg/util/validation)

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, the k8s qualified-name / label-value charset.
fn is_name_chars(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// k8s `IsDNS1123Subdomain`: lowercase alphanumeric labels with inner `-`, joined by `.`.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => {
                (f.is_ascii_lowercase() || f.is_ascii_digit())
                    && (l.is_ascii_lowercase() || l.is_ascii_digit())
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            }
            _ => false,
        }
    })
}

/// k8s `IsQualifiedName`, which label keys must satisfy: `[prefix/]name`.
fn validate_key(key: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid label key {key:?}: {why}"));
    let name = match key.split_once('/') {
        None => key,
        Some((_, name)) if name.contains('/') => return bad("may contain at most one '/'"),
        Some(("", _)) => return bad("prefix part must be non-empty"),
        Some((prefix, _)) if prefix.len() > MAX_PREFIX_LEN => {
            return bad("prefix part must be no more than 253 characters")
        }
        Some((prefix, _)) if !is_dns1123_subdomain(prefix) => {
            return bad(
                "prefix part must be a lowercase RFC 1123 subdomain (lowercase alphanumerics, \
                 '-' and '.', starting and ending with an alphanumeric)",
            )
        }
        Some((_, name)) => name,
    };
    if name.is_empty() {
        return bad("name part must be non-empty");
    }
    if name.len() > MAX_NAME_LEN {
        return bad("name part must be no more than 63 characters");
    }
    if !is_name_chars(name) {
        return bad("name part must consist of alphanumerics, '-', '_' or '.', \
             and must start and end with an alphanumeric");
    }
    Ok(())
}

/// k8s `IsValidLabelValue`: empty, or at most 63 name characters.
fn validate_value(key: &str, value: &str) -> Result<(), String> {
    if value.len() > MAX_NAME_LEN {
        return Err(format!(
            "invalid value {value:?} for label {key:?}: must be no more than 63 characters"
        ));
    }
    if !value.is_empty() && !is_name_chars(value) {
        return Err(format!(
            "invalid value {value:?} for label {key:?}: must be empty or consist of \
             alphanumerics, '-', '_' or '.', and must start and end with an alphanumeric"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// PromQL rendering

/// Prometheus label names are `[a-zA-Z_][a-zA-Z0-9_]*`; names starting with `__` are
/// reserved for Prometheus internals (`__name__` would let a selector replace the metric).
pub(crate) fn is_prometheus_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match b.first() {
        Some(f) if f.is_ascii_alphabetic() || *f == b'_' => {
            !s.starts_with("__") && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        }
        _ => false,
    }
}

/// Escapes every RE2 metacharacter (the set Go's `regexp.QuoteMeta` escapes), so the result
/// matches `s` literally. RE2 allows a backslash before any ASCII punctuation.
pub(crate) fn re2_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(
            c,
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Renders a PromQL double-quoted string literal. The PromQL lexer rejects a raw newline
/// and ends the string at an unescaped `"`; it decodes Go escapes, so every control
/// character is written as an escape and nothing else needs to be.
pub(crate) fn promql_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // All Unicode control characters (C0, DEL, C1) are below U+10000.
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `labelSelector` text for a `metav1.LabelSelector` object, as the HPA sends it
/// (docs/hpa-behaviour.md §1.2): `matchLabels` as `k=v`, `matchExpressions` as `k in (..)`,
/// `k notin (..)`, `k` and `!k`, in this module's canonical order (by key, as
/// `labels.Selector` orders them; ties on one key by operator, then values) with the values in
/// parentheses sorted and without duplicates. An absent or empty selector gives `""`: then no
/// parameter is sent at all. This is the one place a selector object becomes text; `check`,
/// the HPA model and the simulator all call it, so they agree with what the API parses.
///
/// A requirement the API server would reject (unknown operator, bad key or value, `In`
/// without values) is an error naming it.
pub fn label_selector_to_string(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> Result<String, SelectorError> {
    let Some(selector) = selector else {
        return Ok(String::new());
    };
    let mut requirements = Vec::new();
    for (key, value) in selector.match_labels.iter().flatten() {
        requirements.push(Requirement {
            key: key.clone(),
            operator: Operator::Equals,
            values: vec![value.clone()],
        });
    }
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default();
        let operator = match e.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                return Err(SelectorError {
                    selector: format!("{} {other} ({})", e.key, values.join(",")),
                    message: format!(
                        "operator {other:?} is not one of In, NotIn, Exists, DoesNotExist"
                    ),
                })
            }
        };
        requirements.push(Requirement {
            key: e.key.clone(),
            operator,
            values,
        });
    }
    Ok(LabelSelector::from_requirements(requirements)?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn parse_ok(text: &str) -> LabelSelector {
        LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text:?} should parse: {e}"))
    }

    fn parse_err(text: &str) -> String {
        match LabelSelector::parse(text) {
            Ok(s) => panic!("{text:?} should fail, parsed as {s:?}"),
            Err(e) => {
                assert_eq!(e.selector, text);
                e.to_string()
            }
        }
    }

    // ----- parsing -----------------------------------------------------------------

    #[test]
    fn parses_every_operator() {
        use Operator::*;
        let cases: &[(&str, Requirement, &str)] = &[
            ("a=b", req("a", Equals, &["b"]), "a=b"),
            ("a==b", req("a", Equals, &["b"]), "a=b"),
            ("a!=b", req("a", NotEquals, &["b"]), "a!=b"),
            ("a in (x,y)", req("a", In, &["x", "y"]), "a in (x,y)"),
            ("a in (y,x,y)", req("a", In, &["x", "y"]), "a in (x,y)"),
            ("a notin (x)", req("a", NotIn, &["x"]), "a notin (x)"),
            ("a", req("a", Exists, &[]), "a"),
            ("!a", req("a", DoesNotExist, &[]), "!a"),
            // Empty values, as k8s allows them.
            ("a=", req("a", Equals, &[""]), "a="),
            ("a!=", req("a", NotEquals, &[""]), "a!="),
            ("a in ()", req("a", In, &[""]), "a in ()"),
            ("a in (,x)", req("a", In, &["", "x"]), "a in (,x)"),
            ("a in (x,)", req("a", In, &["", "x"]), "a in (,x)"),
            ("a in (x,,y)", req("a", In, &["", "x", "y"]), "a in (,x,y)"),
            ("a notin (,)", req("a", NotIn, &[""]), "a notin ()"),
            // Keywords are plain identifiers in key and value position.
            (
                "in in (in,notin)",
                req("in", In, &["in", "notin"]),
                "in in (in,notin)",
            ),
            ("notin", req("notin", Exists, &[]), "notin"),
            ("!in", req("in", DoesNotExist, &[]), "!in"),
            ("a=in", req("a", Equals, &["in"]), "a=in"),
            // Qualified keys and full-charset values.
            (
                "app.kubernetes.io/name=my-app_1.0",
                req("app.kubernetes.io/name", Equals, &["my-app_1.0"]),
                "app.kubernetes.io/name=my-app_1.0",
            ),
        ];
        for (text, want, canonical) in cases {
            let sel = parse_ok(text);
            assert_eq!(sel.requirements(), std::slice::from_ref(want), "{text:?}");
            assert_eq!(sel.to_string(), *canonical, "{text:?}");
            assert_eq!(parse_ok(canonical), sel, "{text:?}");
        }
    }

    #[test]
    fn whitespace_variants() {
        let canonical = "a=b,c!=d,e in (f,g),h notin (i),j,!k";
        let variants = [
            canonical,
            " a = b , c != d , e in ( f , g ) , h notin ( i ) , j , ! k ",
            "a==b,c!=d,e in(f,g),h notin(i),j,!k",
            "\ta\t=\tb,\nc\r\n!=d,e  in  (f,\tg),h notin (i),j,!k\n",
            "a=b,  c!=d,e in (g,f,g),h notin (i,i),  j,!  k",
        ];
        let want = parse_ok(canonical);
        assert_eq!(want.requirements().len(), 6);
        for v in variants {
            assert_eq!(parse_ok(v), want, "{v:?}");
        }
        // `!` and `=` are single tokens even when glued to the key.
        assert_eq!(parse_ok("!a"), parse_ok("! a"));
    }

    #[test]
    fn empty_and_blank_select_everything() {
        for text in ["", " ", "\t\r\n  "] {
            let sel = parse_ok(text);
            assert!(sel.is_everything());
            assert_eq!(sel, LabelSelector::everything());
            assert_eq!(sel.to_string(), "");
            assert!(sel.matches(&labels(&[])));
            assert!(sel.matches(&labels(&[("a", "b")])));
        }
        // k8s only treats ASCII space, tab, CR and LF as whitespace.
        parse_err("\u{a0}");
    }

    #[test]
    fn multiple_requirements_sorted_by_key() {
        let sel = parse_ok("z=1,b in (2),a,!m,b!=3");
        let keys: Vec<_> = sel.requirements().iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "b", "m", "z"]);
        // Ties on the key are ordered by operator so the output is deterministic.
        assert_eq!(sel.to_string(), "a,b!=3,b in (2),!m,z=1");
        assert_eq!(parse_ok(&sel.to_string()), sel);
    }

    #[test]
    fn error_cases() {
        let cases: &[(&str, &str)] = &[
            ("a in b", "expected '(' after 'in'"),
            ("a notin b", "expected '(' after 'notin'"),
            ("a in", "expected '(' after 'in'"),
            (
                "a in (b",
                "expected ',' or ')' after value 'b' in 'in' list, found end of selector",
            ),
            ("a in (b,c", "expected ',' or ')' after value 'c'"),
            (
                "a in (",
                "expected value, ',' or ')' in 'in' list, found end of selector",
            ),
            (
                "a in (b))",
                "expected ',' or end of selector after 'a in (b)', found ')'",
            ),
            (
                "a in ((b))",
                "expected value, ',' or ')' in 'in' list, found '('",
            ),
            (
                "a in (b c)",
                "expected ',' or ')' after value 'b' in 'in' list, found 'c'",
            ),
            (
                "a)",
                "expected operator (=, ==, !=, in, notin) after key 'a', found ')'",
            ),
            ("(a)", "expected label key or '!', found '('"),
            ("=b", "expected label key or '!', found '='"),
            (
                "a b",
                "expected operator (=, ==, !=, in, notin) after key 'a', found 'b'",
            ),
            (
                "a=b,",
                "expected label key or '!' after ',', found end of selector",
            ),
            ("a=b,,c", "expected label key or '!' after ',', found ','"),
            (",a", "expected label key or '!', found ','"),
            ("!", "expected label key after '!', found end of selector"),
            ("!,a", "expected label key after '!', found ','"),
            ("!=a", "expected label key or '!', found '!='"),
            ("!!a", "expected label key after '!', found '!'"),
            (
                "!a=b",
                "expected ',' or end of selector after '!a', found '='",
            ),
            (
                "a=b=c",
                "expected ',' or end of selector after 'a=b', found '='",
            ),
            (
                "a=b c",
                "expected ',' or end of selector after 'a=b', found 'c'",
            ),
            ("a=(b)", "expected value after '=', found '('"),
            ("a!==b", "expected value after '!=', found '='"),
            ("a>1", "operator '>' (numeric comparison) is not supported"),
            ("a<1", "operator '<' (numeric comparison) is not supported"),
            ("a b=c", "found 'b'"),
            (
                "a@b=c",
                "invalid label key \"a@b\": name part must consist of",
            ),
            ("-a", "invalid label key \"-a\": name part must consist of"),
            ("a-=b", "invalid label key \"a-\""),
            (
                "/a",
                "invalid label key \"/a\": prefix part must be non-empty",
            ),
            (
                "x/",
                "invalid label key \"x/\": name part must be non-empty",
            ),
            (
                "a/b/c",
                "invalid label key \"a/b/c\": may contain at most one '/'",
            ),
            (
                "Example.com/a",
                "prefix part must be a lowercase RFC 1123 subdomain",
            ),
            (
                "ex..com/a",
                "prefix part must be a lowercase RFC 1123 subdomain",
            ),
            (
                "a=b@c",
                "invalid value \"b@c\" for label \"a\": must be empty or consist",
            ),
            ("a in (x,-y)", "invalid value \"-y\" for label \"a\""),
            ("a=b\u{0}", "invalid value \"b\\0\""),
            ("ключ=v", "invalid label key \"ключ\""),
        ];
        for (text, want) in cases {
            let got = parse_err(text);
            let prefix = format!("invalid label selector {text:?}: ");
            assert!(got.starts_with(&prefix), "{text:?}: {got}");
            assert!(got.contains(want), "{text:?}: got {got:?}, want {want:?}");
        }
        // The exact wording the brief promises.
        assert_eq!(
            parse_err("a in b"),
            "invalid label selector \"a in b\": expected '(' after 'in'"
        );
    }

    #[test]
    fn length_limits() {
        let n63 = "a".repeat(63);
        let n64 = "a".repeat(64);
        parse_ok(&format!("{n63}={n63}"));
        parse_ok(&format!("{}/{n63}", "p".repeat(253)));
        assert!(
            parse_err(&format!("{n64}=x")).contains("name part must be no more than 63 characters")
        );
        assert!(parse_err(&format!("x={n64}")).contains("must be no more than 63 characters"));
        assert!(parse_err(&format!("x in (a,{n64})")).contains("no more than 63"));
        assert!(parse_err(&format!("{}/a", "p".repeat(254)))
            .contains("prefix part must be no more than 253 characters"));
    }

    #[test]
    fn from_requirements_validates_and_normalises() {
        let sel = LabelSelector::from_requirements([
            req("b", Operator::In, &["y", "x", "y"]),
            req("a", Operator::Exists, &[]),
        ])
        .unwrap();
        assert_eq!(sel, parse_ok("a,b in (x,y)"));
        for bad in [
            req("a", Operator::In, &[]),
            req("a", Operator::Equals, &["x", "y"]),
            req("a", Operator::Exists, &["x"]),
            req("a b", Operator::Exists, &[]),
            req("a", Operator::NotEquals, &["\"}"]),
        ] {
            assert!(
                LabelSelector::from_requirements([bad.clone()]).is_err(),
                "{bad:?}"
            );
        }
    }

    // ----- matching ----------------------------------------------------------------

    #[test]
    fn matching_table() {
        let empty = labels(&[]);
        let ab = labels(&[("a", "b")]);
        let ac = labels(&[("a", "c")]);
        let a_empty = labels(&[("a", "")]);
        let other = labels(&[("x", "b")]);
        // (selector, labels, expected)
        let cases: &[(&str, &BTreeMap<String, String>, bool)] = &[
            ("a=b", &ab, true),
            ("a=b", &ac, false),
            ("a=b", &empty, false),
            ("a==b", &ab, true),
            ("a!=b", &ab, false),
            ("a!=b", &ac, true),
            // k8s: `!=` matches when the label is absent.
            ("a!=b", &empty, true),
            ("a!=b", &other, true),
            ("a in (b,c)", &ab, true),
            ("a in (b,c)", &ac, true),
            ("a in (c,d)", &ab, false),
            ("a in (b)", &empty, false),
            ("a notin (b)", &ab, false),
            ("a notin (c)", &ab, true),
            // k8s: `notin` matches when the label is absent.
            ("a notin (b)", &empty, true),
            ("a notin (b)", &other, true),
            ("a", &ab, true),
            ("a", &a_empty, true),
            ("a", &empty, false),
            ("!a", &ab, false),
            ("!a", &a_empty, false),
            ("!a", &empty, true),
            // The empty value is a real value: it needs the label present.
            ("a=", &a_empty, true),
            ("a=", &empty, false),
            ("a in ()", &a_empty, true),
            ("a in ()", &empty, false),
            ("a in (,b)", &ab, true),
            ("a!=", &a_empty, false),
            ("a!=", &empty, true),
            ("a notin ()", &a_empty, false),
            ("a notin ()", &ab, true),
            // Requirements are ANDed.
            ("a=b,!x", &ab, true),
            ("a=b,x", &ab, false),
            ("a=b,a!=c", &ab, true),
            ("a=b,a=c", &ab, false),
            ("", &empty, true),
        ];
        for (text, ls, want) in cases {
            let sel = parse_ok(text);
            assert_eq!(sel.matches(*ls), *want, "{text:?} on {ls:?}");
        }
    }

    #[test]
    fn all_label_containers_agree() {
        let sel = parse_ok("a=b,c notin (d),!e,f");
        let pairs = vec![
            ("a".to_string(), "b".to_string()),
            ("f".to_string(), "".to_string()),
            ("c".to_string(), "x".to_string()),
        ];
        let btree: BTreeMap<_, _> = pairs.iter().cloned().collect();
        let hash: HashMap<_, _> = pairs.iter().cloned().collect();
        assert!(sel.matches(&btree));
        assert!(sel.matches(&hash));
        assert!(sel.matches(&pairs));
        assert!(sel.matches(pairs.as_slice()));
        // First occurrence wins in a pair list.
        let dup = vec![("a".into(), "b".into()), ("a".into(), "z".into())];
        assert_eq!(dup.label("a"), Some("b"));
    }

    #[test]
    fn equality_labels() {
        let sel = parse_ok("a=1,b==2,c in (3),d in (4,5),e!=6,f,!g,h notin (7)");
        assert_eq!(
            sel.equality_labels(),
            BTreeMap::from([("a", "1"), ("b", "2"), ("c", "3")])
        );
        assert_eq!(
            parse_ok("a=").equality_labels(),
            BTreeMap::from([("a", "")])
        );
        assert!(LabelSelector::everything().equality_labels().is_empty());
        // Contradictory pins: the selector matches nothing; one value is still reported.
        assert_eq!(
            parse_ok("a=x,a=y").equality_labels(),
            BTreeMap::from([("a", "x")])
        );
    }

    // ----- PromQL -------------------------------------------------------------------

    #[test]
    fn promql_matchers_table() {
        let sel = parse_ok("a=b,c!=d,e in (f,g.h),i notin (j),k,!l,m=");
        assert_eq!(
            sel.promql_matchers().unwrap(),
            [
                r#"a="b""#,
                r#"c!="d""#,
                r#"e=~"f|g\\.h""#,
                r#"i!~"j""#,
                r#"k!="""#,
                r#"l="""#,
                r#"m="""#,
            ]
        );
        assert!(LabelSelector::everything()
            .promql_matchers()
            .unwrap()
            .is_empty());
    }

    #[test]
    fn promql_rejects_non_prometheus_keys() {
        for (text, key) in [
            ("app.kubernetes.io/name=x", "app.kubernetes.io/name"),
            ("a-b=x", "a-b"),
            ("a.b", "a.b"),
            ("ok=1,9lives=x", "9lives"),
        ] {
            let err = parse_ok(text).promql_matchers().unwrap_err();
            assert!(
                err.message.contains(&format!("label key {key:?}")),
                "{text}: {err}"
            );
            assert!(err
                .to_string()
                .contains("not a valid Prometheus label name"));
        }
        let reserved = LabelSelector::unchecked(vec![req("__name__", Operator::Equals, &["up"])]);
        assert!(reserved.promql_matchers().is_err());
    }

    #[test]
    fn promql_rejects_malformed_requirements() {
        for r in [
            req("a", Operator::In, &[]),
            req("a", Operator::NotIn, &[]),
            req("a", Operator::Equals, &[]),
            req("a", Operator::NotEquals, &["x", "y"]),
            req("a", Operator::Exists, &["x"]),
        ] {
            let sel = LabelSelector::unchecked(vec![r.clone()]);
            assert!(sel.promql_matchers().is_err(), "{r:?}");
        }
    }

    #[test]
    fn promql_escapes_hostile_values() {
        let sel = LabelSelector::unchecked(vec![
            req("a", Operator::Equals, &["x\"}or vector(1)#"]),
            req("b", Operator::In, &["a|b", ".*", "c\\", ")"]),
            req("c", Operator::NotEquals, &["line\nbreak\u{0}"]),
        ]);
        assert_eq!(
            sel.promql_matchers().unwrap(),
            [
                r#"a="x\"}or vector(1)#""#,
                r#"b=~"a\\|b|\\.\\*|c\\\\|\\)""#,
                r#"c!="line\nbreak\u0000""#,
            ]
        );
    }

    /// Splits `key<op>"..."` into its parts; `None` if it is not of that shape.
    fn split_matcher(m: &str) -> Option<(&str, &str, &str)> {
        let key_end = m
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(m.len());
        let (key, rest) = m.split_at(key_end);
        for op in ["=~", "!~", "!=", "="] {
            if let Some(lit) = rest.strip_prefix(op) {
                return Some((key, op, lit));
            }
        }
        None
    }

    fn hex_char(digits: &mut std::str::Chars<'_>, n: usize) -> Result<char, String> {
        let s: String = digits.take(n).collect();
        if s.len() != n {
            return Err(format!("short escape {s:?}"));
        }
        let v = u32::from_str_radix(&s, 16).map_err(|e| e.to_string())?;
        char::from_u32(v).ok_or_else(|| format!("bad code point {v:x}"))
    }

    /// Decodes a PromQL double-quoted string literal (Go escape rules, as the PromQL lexer
    /// and `strconv.Unquote` apply them). Fails on a raw newline, an unknown escape, or an
    /// unescaped `"` anywhere but the final position.
    fn decode_promql_string(lit: &str) -> Result<String, String> {
        let body = lit.strip_prefix('"').ok_or("missing opening quote")?;
        let mut out = String::new();
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    return if chars.as_str().is_empty() {
                        Ok(out)
                    } else {
                        Err(format!("unescaped quote before {:?}", chars.as_str()))
                    };
                }
                '\n' => return Err("raw newline".into()),
                '\\' => {
                    let e = chars.next().ok_or("dangling backslash")?;
                    out.push(match e {
                        '"' => '"',
                        '\\' => '\\',
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        'a' => '\u{7}',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'v' => '\u{b}',
                        'x' => hex_char(&mut chars, 2)?,
                        'u' => hex_char(&mut chars, 4)?,
                        'U' => hex_char(&mut chars, 8)?,
                        other => return Err(format!("unknown escape \\{other}")),
                    });
                }
                c => out.push(c),
            }
        }
        Err("missing closing quote".into())
    }

    /// Decodes an RE2 pattern that must be an alternation of literals: `\` + ASCII
    /// punctuation is that character, `|` separates, any other metacharacter or escape
    /// means the pattern is not a pure literal and is an error.
    fn decode_re2_alternation(re: &str) -> Result<Vec<String>, String> {
        let mut parts = vec![String::new()];
        let mut chars = re.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e) if e.is_ascii_punctuation() => parts.last_mut().unwrap().push(e),
                    other => return Err(format!("non-literal escape \\{other:?}")),
                },
                '|' => parts.push(String::new()),
                '.' | '+' | '*' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '^' | '$' => {
                    return Err(format!("unescaped metacharacter {c:?}"))
                }
                c => parts.last_mut().unwrap().push(c),
            }
        }
        Ok(parts)
    }

    /// Index of the first `"` not preceded by an escaping backslash, after the opening one.
    fn first_unescaped_quote(lit: &str) -> Option<usize> {
        let mut escaped = false;
        for (i, c) in lit.char_indices().skip(1) {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => return Some(i),
                _ => {}
            }
        }
        None
    }

    fn hostile_value() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("\"".to_string()),
            Just("\\".to_string()),
            Just("\\\"".to_string()),
            Just("|".to_string()),
            Just(".*".to_string()),
            Just(")".to_string()),
            Just("(".to_string()),
            Just("\n".to_string()),
            Just("\r".to_string()),
            Just("\"}".to_string()),
            Just("${^[]?+}".to_string()),
            Just("\u{0}".to_string()),
            Just("\u{85}".to_string()),
            Just("\u{2028}".to_string()),
            Just("\\u0022".to_string()),
            "[a-z]{1,3}",
            any::<char>().prop_map(String::from),
        ];
        prop_oneof![
            prop::collection::vec(piece, 0..10).prop_map(|v| v.concat()),
            any::<String>(),
        ]
    }

    fn check_matcher(r: &Requirement, m: &str) -> Result<(), TestCaseError> {
        let (key, op, lit) =
            split_matcher(m).ok_or_else(|| TestCaseError::fail(format!("shape: {m:?}")))?;
        prop_assert_eq!(key, r.key.as_str());
        prop_assert_eq!(first_unescaped_quote(lit), Some(lit.len() - 1), "{:?}", m);
        prop_assert!(!m.contains('\n'), "raw newline in {:?}", m);
        let decoded = decode_promql_string(lit).map_err(TestCaseError::fail)?;
        match r.operator {
            Operator::Equals | Operator::NotEquals => {
                let want = if r.operator == Operator::Equals {
                    "="
                } else {
                    "!="
                };
                prop_assert_eq!(op, want);
                prop_assert_eq!(&decoded, &r.values[0]);
            }
            Operator::In | Operator::NotIn => {
                let want = if r.operator == Operator::In {
                    "=~"
                } else {
                    "!~"
                };
                prop_assert_eq!(op, want);
                let parts = decode_re2_alternation(&decoded).map_err(TestCaseError::fail)?;
                prop_assert_eq!(&parts, &r.values);
            }
            Operator::Exists => {
                prop_assert_eq!(op, "!=");
                prop_assert_eq!(decoded, "");
            }
            Operator::DoesNotExist => {
                prop_assert_eq!(op, "=");
                prop_assert_eq!(decoded, "");
            }
        }
        Ok(())
    }

    // ----- generators for valid selectors -------------------------------------------

    fn valid_name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?",
            Just("in".to_string()),
            Just("notin".to_string()),
        ]
    }

    fn valid_key() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => valid_name(),
            1 => (
                "[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?){0,3}",
                valid_name()
            )
                .prop_map(|(p, n)| format!("{p}/{n}")),
        ]
    }

    fn valid_value() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), valid_name(),]
    }

    fn requirement_from(
        key: impl Strategy<Value = String>,
        value: impl Strategy<Value = String>,
    ) -> impl Strategy<Value = Requirement> {
        let ops = prop_oneof![
            Just(Operator::Equals),
            Just(Operator::NotEquals),
            Just(Operator::In),
            Just(Operator::NotIn),
            Just(Operator::Exists),
            Just(Operator::DoesNotExist),
        ];
        (key, ops, prop::collection::vec(value, 1..4)).prop_map(|(key, operator, values)| {
            let values = match operator {
                Operator::Equals | Operator::NotEquals => vec![values[0].clone()],
                Operator::In | Operator::NotIn => values,
                Operator::Exists | Operator::DoesNotExist => vec![],
            };
            Requirement::validated(&key, operator, values).expect("generator yields valid")
        })
    }

    fn valid_selector() -> impl Strategy<Value = Vec<Requirement>> {
        prop::collection::vec(requirement_from(valid_key(), valid_value()), 0..6)
    }

    /// Renders requirements in the given order with arbitrary k8s-legal noise: whitespace
    /// between tokens, `==` for `=`, shuffled and duplicated list values.
    fn noisy_text(reqs: &[Requirement], noise: &[u8]) -> String {
        let mut n = noise.iter().cycle().copied();
        let mut ws = || match n.next().unwrap_or(0) % 6 {
            0 => "",
            1 => " ",
            2 => "  ",
            3 => "\t",
            4 => "\n",
            _ => "\r\n",
        };
        let mut out = String::new();
        for (i, r) in reqs.iter().enumerate() {
            if i > 0 {
                out.push_str(ws());
                out.push(',');
            }
            out.push_str(ws());
            let k = &r.key;
            match r.operator {
                Operator::Equals => {
                    let eq = if ws().is_empty() { "==" } else { "=" };
                    out += &format!("{k}{}{eq}{}{}", ws(), ws(), r.values[0]);
                }
                Operator::NotEquals => out += &format!("{k}{}!={}{}", ws(), ws(), r.values[0]),
                Operator::In | Operator::NotIn => {
                    let kw = if r.operator == Operator::In {
                        "in"
                    } else {
                        "notin"
                    };
                    let mut vals: Vec<&str> = r.values.iter().map(String::as_str).collect();
                    vals.reverse();
                    if let Some(first) = vals.first().copied() {
                        vals.push(first);
                    }
                    out += &format!("{k} {kw}{}({}", ws(), ws());
                    for (j, v) in vals.iter().enumerate() {
                        if j > 0 {
                            out += &format!("{},{}", ws(), ws());
                        }
                        out.push_str(v);
                    }
                    out += &format!("{})", ws());
                }
                Operator::Exists => out.push_str(k),
                Operator::DoesNotExist => out += &format!("!{}{k}", ws()),
            }
        }
        out.push_str(ws());
        out
    }

    /// Reference semantics written from the k8s docs as set logic over label pairs,
    /// independently of `Requirement::matches`.
    fn reference_matches(reqs: &[Requirement], pairs: &[(String, String)]) -> bool {
        reqs.iter().all(|r| {
            let has_key = pairs.iter().any(|(k, _)| *k == r.key);
            let has_listed = pairs
                .iter()
                .any(|(k, v)| *k == r.key && r.values.contains(v));
            match r.operator {
                Operator::Exists => has_key,
                Operator::DoesNotExist => !has_key,
                Operator::Equals | Operator::In => has_listed,
                Operator::NotEquals | Operator::NotIn => !has_listed,
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn display_parse_round_trip(reqs in valid_selector()) {
            let sel = LabelSelector::from_requirements(reqs).unwrap();
            let text = sel.to_string();
            let back = LabelSelector::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back, &sel, "{}", text);
            prop_assert_eq!(back.to_string(), text);
        }

        #[test]
        fn noisy_text_parses_to_same_selector(
            reqs in valid_selector(),
            noise in prop::collection::vec(any::<u8>(), 1..32),
        ) {
            let text = noisy_text(&reqs, &noise);
            let parsed = LabelSelector::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(parsed, LabelSelector::from_requirements(reqs).unwrap(), "{:?}", text);
        }

        #[test]
        fn parse_never_panics(text in any::<String>()) {
            let _ = LabelSelector::parse(&text);
        }

        #[test]
        fn parse_never_panics_on_selector_alphabet(text in "[a-c!=(),<> \t\n/._-]{0,40}|[a-z=!(), ]{0,40}") {
            // Whatever parses must print canonically and re-parse to the same thing.
            if let Ok(sel) = LabelSelector::parse(&text) {
                let canonical = sel.to_string();
                prop_assert_eq!(LabelSelector::parse(&canonical).unwrap(), sel);
            }
        }

        #[test]
        fn matching_agrees_with_reference(
            reqs in prop::collection::vec(requirement_from("[abc]", "|x|y|z"), 0..4),
            pairs in prop::collection::btree_map("[abcd]", "|x|y|z", 0..4),
        ) {
            let sel = LabelSelector::from_requirements(reqs).unwrap();
            // Also goes through the parser, so the text form is covered too.
            let sel = LabelSelector::parse(&sel.to_string()).unwrap();
            let vec: Vec<(String, String)> = pairs.clone().into_iter().collect();
            let hash: HashMap<String, String> = pairs.clone().into_iter().collect();
            let want = reference_matches(sel.requirements(), &vec);
            prop_assert_eq!(sel.matches(&pairs), want, "{} on {:?}", sel, pairs);
            prop_assert_eq!(sel.matches(&hash), want);
            prop_assert_eq!(sel.matches(&vec), want);
            prop_assert_eq!(sel.matches(vec.as_slice()), want);
        }

        #[test]
        fn promql_escaping_round_trips(
            key in "[a-zA-Z][a-zA-Z0-9_]{0,10}",
            op in 0..6usize,
            values in prop::collection::vec(hostile_value(), 1..5),
        ) {
            let operator = [
                Operator::Equals, Operator::NotEquals, Operator::In,
                Operator::NotIn, Operator::Exists, Operator::DoesNotExist,
            ][op];
            let values = match operator {
                Operator::Equals | Operator::NotEquals => values[..1].to_vec(),
                Operator::In | Operator::NotIn => values,
                Operator::Exists | Operator::DoesNotExist => vec![],
            };
            // Built directly: these values could never come out of the parser.
            let r = Requirement { key, operator, values };
            let sel = LabelSelector::unchecked(vec![r.clone()]);
            let matchers = sel.promql_matchers().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(matchers.len(), 1);
            check_matcher(&r, &matchers[0])?;
        }

        #[test]
        fn promql_for_parsed_selectors(reqs in prop::collection::vec(
            requirement_from("[a-z]([a-z0-9_]{0,7}[a-z0-9])?", valid_value()), 0..5))
        {
            let sel = LabelSelector::from_requirements(reqs).unwrap();
            let matchers = sel.promql_matchers().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(matchers.len(), sel.requirements().len());
            for (r, m) in sel.requirements().iter().zip(&matchers) {
                check_matcher(r, m)?;
            }
        }
    }

    #[test]
    fn decoders_reject_unsafe_renderings() {
        // Guards the guard: the test decoders must catch what a broken escaper would emit.
        assert!(decode_promql_string(r#""a"b""#).is_err());
        assert!(decode_promql_string("\"a\nb\"").is_err());
        assert!(decode_promql_string(r#""a\qb""#).is_err());
        assert!(decode_promql_string(r#""ab"#).is_err());
        assert_eq!(decode_promql_string(r#""a\"b\u00e9""#).unwrap(), "a\"bé");
        assert!(decode_re2_alternation("a.b").is_err());
        assert!(decode_re2_alternation(r"a\d").is_err());
        assert_eq!(decode_re2_alternation(r"a\|b|c").unwrap(), ["a|b", "c"]);
        assert_eq!(first_unescaped_quote(r#""a\\"b""#), Some(4));
    }

    #[test]
    fn selector_objects_render_once_canonically() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8s;
        let obj: K8s = serde_json::from_value(serde_json::json!({
            "matchLabels": {"z": "1", "tier": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a", "b"]},
                {"key": "gone", "operator": "DoesNotExist"},
                {"key": "app.kubernetes.io/name", "operator": "Exists"}
            ]
        }))
        .unwrap();
        let text = label_selector_to_string(Some(&obj)).unwrap();
        // By key; on one key `=` before `in`; values sorted and deduplicated.
        assert_eq!(
            text,
            "app.kubernetes.io/name,!gone,tier=web,tier in (a,b),z=1"
        );
        // The text parses back to the same selector: API and renderer agree.
        assert_eq!(LabelSelector::parse(&text).unwrap().to_string(), text);
        assert_eq!(label_selector_to_string(None).unwrap(), "");
        assert_eq!(label_selector_to_string(Some(&K8s::default())).unwrap(), "");
        let bad: K8s = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]
        }))
        .unwrap();
        let err = label_selector_to_string(Some(&bad)).unwrap_err();
        assert!(err.message.contains("\"Like\""), "{err}");
        let empty_in: K8s = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "a", "operator": "In", "values": []}]
        }))
        .unwrap();
        assert!(label_selector_to_string(Some(&empty_in)).is_err());
    }
}
