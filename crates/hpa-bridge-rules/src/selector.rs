//! Kubernetes label selectors: parsing, matching and canonical rendering.
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
    /// Whether this requirement holds for a series, as Prometheus matches series: a label
    /// not set reads as the empty value (Prometheus stores none with an empty value), so
    /// `k=` and `k in (,a)` select series without `k`, and `k!=` only those with it.
    pub fn matches_series<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label(&self.key).unwrap_or("");
        let listed = self.values.iter().any(|x| x == value);
        match self.operator {
            Operator::Equals | Operator::In => listed,
            Operator::NotEquals | Operator::NotIn => !listed,
            Operator::Exists => !value.is_empty(),
            Operator::DoesNotExist => value.is_empty(),
        }
    }

    /// Whether the series index settles this requirement by its listed values: `=` and `in`,
    /// unless a listed value is empty (which the series without the label satisfy).
    pub fn indexed(&self) -> bool {
        matches!(self.operator, Operator::Equals | Operator::In)
            && !self.values.iter().any(String::is_empty)
    }

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

    /// A selector the engine builds over series labels, whose values need not be valid
    /// Kubernetes label values (an api-version such as `apps/v1` has a `/`). Its text is a
    /// cache key only, never parsed back or shown as a selector.
    pub fn from_series_requirements(requirements: Vec<Requirement>) -> Self {
        Self::sorted(requirements)
    }

    /// A selector the engine builds for its own reads, whose text is `tag` instead of its
    /// requirements spelled out: its requirements may list hundreds of pod names, and its text
    /// serves only as a cache key (`Scope::key`), which a tag never reused in the process and
    /// never a canonical text (it starts with a NUL, which no label key or value holds) keeps
    /// exact.
    pub fn tagged(requirements: Vec<Requirement>, tag: u64) -> Self {
        let mut selector = Self::sorted(requirements);
        selector.text = format!("\0{tag}");
        selector
    }

    fn sorted(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
        Self::unchecked(requirements)
    }

    /// Canonical form like k8s `internalSelector.String()`: requirements sorted, joined by
    /// `,` with no spaces. Parsing it again gives an equal selector.
    pub(crate) fn unchecked(requirements: Vec<Requirement>) -> Self {
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

pub fn operator_text(op: Operator) -> &'static str {
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
// Prometheus label names

/// Prometheus label names are `[a-zA-Z_][a-zA-Z0-9_]*`; names starting with `__` are
/// reserved for Prometheus internals (`__name__` would let a selector replace the metric).
pub fn is_prometheus_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match b.first() {
        Some(f) if f.is_ascii_alphabetic() || *f == b'_' => {
            !s.starts_with("__") && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        }
        _ => false,
    }
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

#[cfg(any(test, feature = "test-support"))]
pub mod strategies;
#[cfg(test)]
mod tests;
