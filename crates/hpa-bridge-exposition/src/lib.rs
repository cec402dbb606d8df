//! hpa-bridge's page parsers, a crate of their own that names no other hpa-bridge crate: the
//! Prometheus and OpenMetrics text formats here, JSON status documents in `json_page`, and the
//! producer's own timestamps in `producer_time`.
//!
//! Prometheus text (0.0.4) and OpenMetrics text exposition parsing.
//!
//! This is hand-written rather than built on `prometheus-parse` 0.2.5 because that crate
//! mishandles exactly the inputs we must get right (docs/hpa-behaviour.md §5), as checked against the
//! conformance inputs below: it drops every series whose name contains `:` (all recording
//! rules), splits label sets on `,` and `=` without honouring quotes, drops lines whose label
//! values contain `}`, never decodes `\"`, `\\` or `\n`, drops `name{} 1` and `name {..} 1`,
//! ignores OpenMetrics float-second timestamps, and silently skips or half-parses malformed
//! lines instead of reporting them. It also parses every family in full, while we only ever
//! want a handful of series out of a page of thousands. The parser below therefore extracts
//! just the metric name of each line, asks the caller whether the family is wanted and, if
//! not, jumps to the next newline with `memchr`; wanted lines get a full, strict parse whose
//! errors carry the 1-based line number, so a malformed wanted sample fails the whole scrape
//! the way it does in Prometheus.
//!
//! Decisions where the formats leave room (Prometheus's scrape parser is
//! `textparse.PromParser`):
//! - An unknown escape such as `\x` in a label value is kept verbatim, backslash included:
//!   Prometheus's lexer accepts any `\.` pair and its unescaper only rewrites `\"`, `\\` and
//!   `\n`. (client_golang's `expfmt` rejects it instead; we follow the scraper.)
//! - Values follow Go's `strconv.ParseFloat` minus hex floats and `_` (which Prometheus
//!   excludes): `NaN`, `Inf`, `+Inf`, `-Inf`, `infinity` in any case, but no sign before `NaN`,
//!   and a finite literal that overflows to infinity is an error. NaN and infinities are
//!   returned as values; deciding whether they are usable is the caller's business.
//! - Timestamps follow the page's format, which the scraper takes from the response's
//!   Content-Type ([`Format::from_content_type`]): integer milliseconds in the Prometheus text
//!   format (digits only, as Prometheus's lexer takes them, so `1.5` and `-5` are errors), and
//!   seconds, possibly fractional, in OpenMetrics, converted as Prometheus does:
//!   `int64(seconds * 1000)`, truncating toward zero. The spelling alone cannot tell them apart:
//!   `a_total 0 123` on an OpenMetrics page is 123 s, not 123 ms.
//! - Anything after the value or timestamp that starts with `#` is an OpenMetrics exemplar and
//!   is ignored. `# EOF` ends the page; later bytes are not looked at.
//! - An OpenMetrics page without `# EOF` is refused, as OpenMetrics and Prometheus's parser
//!   require: it may have been cut short at a line boundary, losing series silently. A text
//!   format page whose last line has no line feed is accepted, as Prometheus's scraper accepts
//!   it; [`ends_mid_line`] tells a scraper such a page, for bodies whose end it cannot trust.
//! - Whitespace is lenient: leading/trailing blanks, blanks between the name and `{`, around
//!   `=` and `,`, and none between `}` and the value are all accepted.
//! - A label with an empty value (`a=""`) is returned as such; Prometheus treats it as absent,
//!   and dropping it is left to the caller.
//! - Quoted (UTF-8) metric names from the newer `{"name", ...}` syntax are not supported; such
//!   a line is an error because its name cannot be extracted.

pub mod json_page;
pub mod producer_time;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use memchr::{memchr, memchr2};

/// Bounds on the work one page can cause: every scraped pod may be hostile.
///
/// They apply to the lines of wanted families, the only lines parsed in full; every other line
/// costs one `memchr` for its newline, which is linear and bounded by `scrape.maxBodyBytes`, so
/// an oversized line in a family nobody asked for does not fail the scrape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes on one sample line, checked before any label is looked at.
    pub max_line_bytes: usize,
    /// Labels on one sample line (Prometheus's `label_limit`, which has no default; ours must).
    pub max_labels_per_series: usize,
    /// Bytes of one label name (Prometheus's `label_name_length_limit`).
    pub max_label_name_bytes: usize,
    /// Bytes of one decoded label value (Prometheus's `label_value_length_limit`).
    pub max_label_value_bytes: usize,
    /// Samples of wanted families on one page (Prometheus's `sample_limit`): each becomes a
    /// tracked series with its own memory and index entries, which the other limits do not
    /// bound, since they bound a page's lines, not how many there are.
    pub max_series: usize,
    /// Values one JSON status document may hold, counted while it is read, so a page of a
    /// million keys fails at the budget instead of costing its whole parse.
    pub max_json_nodes: usize,
    /// Nesting levels of one JSON status document.
    pub max_json_depth: usize,
}

impl Limits {
    /// 64 KiB lines and 128 labels: far above what exporters emit (a Kubernetes pod carries a
    /// few dozen labels), and low enough that the worst wanted line is cheap.
    pub const DEFAULT: Limits = Limits {
        max_line_bytes: 64 * 1024,
        max_labels_per_series: 128,
        max_label_name_bytes: 1024,
        max_label_value_bytes: 16 * 1024,
        // A recommender exports one series per workload it sizes, a pod one or two: ten
        // thousand leaves room for a central controller of thousands of workloads.
        max_series: 10_000,
        // A status document is tens of values (SeaTunnel's is about twenty); a hundred thousand
        // leaves room for one listing thousands of jobs, and reads in milliseconds.
        max_json_nodes: 100_000,
        // Below serde_json's own limit of 128, which is then never what stops a read.
        max_json_depth: 64,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// The exposition format of a page; it decides the unit of timestamps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`, and anything that does not say OpenMetrics (Prometheus
    /// falls back to this parser too).
    #[default]
    PrometheusText,
    /// `application/openmetrics-text`.
    OpenMetrics,
}

impl Format {
    /// The format a response's `Content-Type` names.
    pub fn from_content_type(content_type: Option<&str>) -> Format {
        let media_type = content_type
            .and_then(|ct| ct.split(';').next())
            .map(str::trim)
            .unwrap_or("");
        if media_type.eq_ignore_ascii_case("application/openmetrics-text") {
            Format::OpenMetrics
        } else {
            Format::PrometheusText
        }
    }
}

/// How one page is parsed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    pub format: Format,
    pub limits: Limits,
    /// Set by the scraper once the scrape deadline has passed: the parse, which runs on a
    /// blocking thread that a timeout cannot stop, then gives up at the next line.
    pub cancel: Option<&'a AtomicBool>,
}

/// What kind of failure an [`ExpositionError`] is; the scraper turns it into the `reason` of
/// its error counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The page is not valid exposition text.
    Syntax,
    /// The page exceeds one of [`Limits`].
    Limit,
    /// [`Options::cancel`] was set.
    Cancelled,
}

/// One sample of a wanted family.
#[derive(Clone, Debug, PartialEq)]
pub struct ExposedSample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
    /// Set by the source when the sample is on the page but cannot be trusted: its value is
    /// kept for display, never used, and never retained.
    pub unusable: Option<Unusable>,
}

impl ExposedSample {
    /// A usable sample timed by its scrape, with `labels`: the shape most tests write.
    #[cfg(any(test, feature = "test-support"))]
    pub fn scraped(name: &str, labels: &[(&str, &str)], value: f64) -> ExposedSample {
        ExposedSample {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
            timestamp_ms: None,
            unusable: None,
        }
    }
}

/// Why a series on a page cannot be used, whatever its value. Each reads as an invalid input:
/// the rules that would lower an answer treat it as unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Unusable {
    /// The page held the series more than once (same name and labels).
    Duplicated,
    /// Its producer's timestamp lies further in the future than `scrape.maxClockSkew`: its
    /// clock, or the value, is wrong, and a time from the future would never age.
    FromTheFuture,
    /// Its metric names a `timestampSeries` that the page does not hold once with a valid
    /// Unix time, so how old the value is is unknown.
    NoProducerTime,
    /// A JSON value that is neither a number, a boolean nor a numeric string.
    NotANumber,
    /// Its producer's timestamp is older than the sample the series already holds.
    OutOfOrder,
    /// Its producer's timestamp is that of the sample the series already holds, with another
    /// value (Prometheus: "duplicate sample for timestamp").
    DuplicateTimestamp,
}

impl Unusable {
    /// Why, as an input's note and a refusal say it.
    pub const fn why(self) -> &'static str {
        match self {
            Unusable::Duplicated => "exported twice in one scrape, so its value is ambiguous",
            Unusable::FromTheFuture => "timestamped further in the future than scrape.maxClockSkew",
            Unusable::NoProducerTime => {
                "its timestampSeries is missing from the page or not a valid Unix time"
            }
            Unusable::NotANumber => "its JSON value is not a number, boolean or numeric string",
            Unusable::OutOfOrder => {
                "timestamped before the sample already held, so it is out of order"
            }
            Unusable::DuplicateTimestamp => {
                "timestamped as the sample already held but with another value, so it is a duplicate sample"
            }
        }
    }

    /// Whether the series keeps the time of the sample it held: refused as Prometheus
    /// refuses it, it reads as unknown whatever that sample's age.
    pub const fn keeps_held_time(self) -> bool {
        matches!(self, Unusable::OutOfOrder | Unusable::DuplicateTimestamp)
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ExpositionError {
    pub line: usize,
    pub message: String,
    pub kind: ErrorKind,
}

impl ExpositionError {
    fn syntax(line: usize, message: String) -> Self {
        ExpositionError {
            line,
            message,
            kind: ErrorKind::Syntax,
        }
    }
}

/// Why a wanted line was not turned into a sample.
enum LineError {
    Syntax(String),
    Limit(String),
}

impl From<String> for LineError {
    fn from(message: String) -> Self {
        LineError::Syntax(message)
    }
}

/// Parses the samples whose metric name satisfies `wanted`; other lines are skipped cheaply.
///
/// Unwanted lines are only checked for a well-formed metric name, so a malformed line in an
/// unwanted family does not fail the scrape. `wanted` must be a pure function of the name: its
/// answer is reused for consecutive lines with the same name instead of asking again, and it is
/// never called for comment or blank lines.
pub fn parse(
    body: &[u8],
    wanted: &dyn Fn(&str) -> bool,
) -> Result<Vec<ExposedSample>, ExpositionError> {
    parse_with(body, wanted, &Options::default())
}

/// [`parse`] with explicit limits and cancellation.
///
/// The work is linear in the size of `body`: unwanted lines cost a newline search, and a
/// wanted line is refused by `options.limits` before its cost can grow past them.
pub fn parse_with(
    body: &[u8],
    wanted: &dyn Fn(&str) -> bool,
    options: &Options<'_>,
) -> Result<Vec<ExposedSample>, ExpositionError> {
    let limits = &options.limits;
    let mut out = Vec::new();
    let mut pos = 0;
    let mut line_no = 0;
    // Pages group a family's series on consecutive lines, so comparing against the previous
    // name (a short memcmp) usually replaces both the byte-by-byte name scan and the call into
    // `wanted`, which is typically a hash lookup. Stored as a range into `body`.
    let mut last: Option<(usize, usize, bool)> = None;
    let mut seen_eof = false;

    while pos < body.len() {
        line_no += 1;
        if options.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(ExpositionError {
                line: line_no,
                message: "parsing cancelled: the scrape deadline passed".to_owned(),
                kind: ErrorKind::Cancelled,
            });
        }
        let line_start = pos;
        let line_end = match memchr(b'\n', &body[pos..]) {
            Some(i) => {
                pos += i + 1;
                line_start + i
            }
            None => {
                pos = body.len();
                body.len()
            }
        };
        let mut line = &body[line_start..line_end];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }

        let start = skip_ws(line, 0);
        match line.get(start) {
            None => continue,
            Some(b'#') => {
                if is_eof_marker(&line[start..]) {
                    seen_eof = true;
                    break;
                }
                continue;
            }
            Some(_) => {}
        }

        let rest = &line[start..];
        let cached = last.and_then(|(s, e, w)| {
            let prev = &body[s..e];
            (rest.starts_with(prev)
                && matches!(rest.get(prev.len()), None | Some(b'{' | b' ' | b'\t')))
            .then_some((prev.len(), w))
        });
        let (name_len, is_wanted) = match cached {
            Some(hit) => hit,
            None => {
                let name = extract_name(rest)
                    .map_err(|message| ExpositionError::syntax(line_no, message))?;
                let w = wanted(name);
                let abs = line_start + start;
                last = Some((abs, abs + name.len(), w));
                (name.len(), w)
            }
        };
        if !is_wanted {
            continue;
        }
        if line.len() > limits.max_line_bytes {
            return Err(ExpositionError {
                line: line_no,
                message: format!(
                    "line is {} bytes, more than scrape.maxLineBytes ({})",
                    line.len(),
                    limits.max_line_bytes
                ),
                kind: ErrorKind::Limit,
            });
        }
        let sample = parse_sample(line, start, start + name_len, options.format, limits).map_err(
            |e| match e {
                LineError::Syntax(message) => ExpositionError::syntax(line_no, message),
                LineError::Limit(message) => ExpositionError {
                    line: line_no,
                    message,
                    kind: ErrorKind::Limit,
                },
            },
        )?;
        if out.len() >= limits.max_series {
            return Err(ExpositionError {
                line: line_no,
                message: format!(
                    "the page holds more than scrape.maxSeriesPerPage ({}) samples of wanted series",
                    limits.max_series
                ),
                kind: ErrorKind::Limit,
            });
        }
        out.push(sample);
    }
    // OpenMetrics ends every exposition with `# EOF`; without it the page may have been cut
    // at a line boundary, which loses series silently.
    if options.format == Format::OpenMetrics && !seen_eof {
        return Err(ExpositionError::syntax(
            line_no.max(1),
            "the page ends without the `# EOF` line OpenMetrics requires, so it may have been cut short"
                .to_owned(),
        ));
    }
    Ok(out)
}

/// Whether the page's last non-blank line has no line feed after it, read as [`parse`] reads
/// lines: a `\r` before the line feed is not part of the line, and nothing after an `# EOF`
/// line counts. The text format requires the line feed, but Prometheus's scrape parser appends
/// it and accepts the page, and so does [`parse`]; a scraper that cannot otherwise tell a whole
/// body from a cut one asks this.
pub fn ends_mid_line(body: &[u8]) -> bool {
    let tail = match memchr::memrchr(b'\n', body) {
        Some(i) => &body[i + 1..],
        None => body,
    };
    let tail = tail.strip_suffix(b"\r").unwrap_or(tail);
    if skip_ws(tail, 0) == tail.len() {
        return false;
    }
    // Rare (a cut, or an exporter that omits the last line feed): look for an `# EOF` line
    // before it, after which nothing counts.
    !memchr::memmem::find_iter(body, b"# EOF").any(|at| {
        let line_start = memchr::memrchr(b'\n', &body[..at]).map_or(0, |i| i + 1);
        let line_end = memchr(b'\n', &body[at..]).map_or(body.len(), |i| at + i);
        let line = &body[line_start..line_end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        is_eof_marker(&line[skip_ws(line, 0)..])
    })
}

/// Parses every sample on the page: the generic-parser baseline, and handy in tests.
pub fn parse_all(body: &[u8]) -> Result<Vec<ExposedSample>, ExpositionError> {
    parse(body, &|_| true)
}

/// Returns the metric name at the start of a sample line (leading blanks allowed), or `None`
/// for comments, blank lines and lines whose name is malformed.
pub fn sample_name(line: &[u8]) -> Option<&str> {
    let start = skip_ws(line, 0);
    match line.get(start) {
        None | Some(b'#') => None,
        Some(_) => extract_name(&line[start..]).ok(),
    }
}

fn is_eof_marker(comment: &[u8]) -> bool {
    comment
        .strip_prefix(b"# EOF")
        .is_some_and(|rest| rest.iter().all(|&c| c == b' ' || c == b'\t'))
}

fn skip_ws(b: &[u8], mut p: usize) -> usize {
    while p < b.len() && (b[p] == b' ' || b[p] == b'\t') {
        p += 1;
    }
    p
}

fn token_end(b: &[u8], mut p: usize) -> usize {
    while p < b.len() && b[p] != b' ' && b[p] != b'\t' {
        p += 1;
    }
    p
}

fn is_metric_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_metric_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

fn is_label_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_label_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Human-readable rendering of the byte at `p` for error messages.
fn describe_bytes(b: &[u8], p: usize) -> String {
    match b.get(p) {
        None => "end of line".to_owned(),
        Some(&c) if c.is_ascii() => format!("{:?}", c as char),
        Some(&c) => format!("byte 0x{c:02x}"),
    }
}

fn describe(line: &str, p: usize) -> String {
    match line.get(p..).and_then(|s| s.chars().next()) {
        Some(c) => format!("{c:?}"),
        None => "end of line".to_owned(),
    }
}

/// `rest` starts at the first non-blank byte of a non-comment line.
fn extract_name(rest: &[u8]) -> Result<&str, String> {
    match rest.first() {
        Some(&c) if is_metric_name_start(c) => {}
        _ => {
            return Err(format!(
                "expected a metric name matching [a-zA-Z_:][a-zA-Z0-9_:]*, found {}",
                describe_bytes(rest, 0)
            ))
        }
    }
    let mut end = 1;
    while end < rest.len() && is_metric_name_char(rest[end]) {
        end += 1;
    }
    // Only ASCII has been accepted so far, so this cannot fail; mapping the error keeps the
    // parser free of panics all the same.
    let name = std::str::from_utf8(&rest[..end]).map_err(|e| e.to_string())?;
    match rest.get(end) {
        None | Some(b'{' | b' ' | b'\t') => Ok(name),
        Some(_) => Err(format!(
            "invalid character {} in metric name {name:?}",
            describe_bytes(rest, end)
        )),
    }
}

fn parse_sample(
    line: &[u8],
    name_start: usize,
    name_end: usize,
    format: Format,
    limits: &Limits,
) -> Result<ExposedSample, LineError> {
    let line = std::str::from_utf8(line).map_err(|e| {
        format!(
            "sample line is not valid UTF-8 (invalid byte at column {})",
            e.valid_up_to() + 1
        )
    })?;
    let b = line.as_bytes();
    let name = &line[name_start..name_end];

    let mut p = skip_ws(b, name_end);
    let mut labels = Vec::new();
    if b.get(p) == Some(&b'{') {
        p = parse_labels(line, p + 1, name, limits, &mut labels)?;
        p = skip_ws(b, p);
    }

    let value_end = token_end(b, p);
    if value_end == p {
        return Err(format!("missing value for {name:?}").into());
    }
    let value_text = &line[p..value_end];
    let value = parse_go_float(value_text)
        .map_err(|why| format!("invalid value {value_text:?} for {name:?}: {why}"))?;

    p = skip_ws(b, value_end);
    let mut timestamp_ms = None;
    if p < b.len() && b[p] != b'#' {
        let ts_end = token_end(b, p);
        let ts_text = &line[p..ts_end];
        timestamp_ms = Some(
            parse_timestamp(ts_text, format)
                .map_err(|why| format!("invalid timestamp {ts_text:?} for {name:?}: {why}"))?,
        );
        p = skip_ws(b, ts_end);
        if p < b.len() && b[p] != b'#' {
            return Err(format!(
                "unexpected {:?} after the timestamp of {name:?}",
                &line[p..]
            )
            .into());
        }
    }
    // Whatever remains starts with `#`: an OpenMetrics exemplar, which we have no use for.

    Ok(ExposedSample {
        unusable: None,
        name: name.to_owned(),
        labels,
        value,
        timestamp_ms,
    })
}

/// Parses the label set after its `{`; returns the position after the closing `}`.
fn parse_labels(
    line: &str,
    mut p: usize,
    metric: &str,
    limits: &Limits,
    labels: &mut Vec<(String, String)>,
) -> Result<usize, LineError> {
    let b = line.as_bytes();
    let mut names = LabelNames::default();
    loop {
        p = skip_ws(b, p);
        match b.get(p) {
            None => return Err(format!("label set of {metric:?} is not terminated").into()),
            Some(b'}') => return Ok(p + 1),
            Some(&c) if is_label_name_start(c) => {}
            Some(_) => {
                return Err(LineError::Syntax(format!(
                    "expected a label name matching [a-zA-Z_][a-zA-Z0-9_]* or '}}' in the labels of {metric:?}, found {}",
                    describe(line, p)
                )))
            }
        }
        let name_start = p;
        p += 1;
        while p < b.len() && is_label_name_char(b[p]) {
            p += 1;
        }
        let label = &line[name_start..p];
        if label.len() > limits.max_label_name_bytes {
            return Err(LineError::Limit(format!(
                "a label name of {metric:?} is {} bytes, more than scrape.maxLabelNameBytes ({})",
                label.len(),
                limits.max_label_name_bytes
            )));
        }
        if labels.len() >= limits.max_labels_per_series {
            return Err(LineError::Limit(format!(
                "{metric:?} has more than scrape.maxLabelsPerSeries ({}) labels",
                limits.max_labels_per_series
            )));
        }

        p = skip_ws(b, p);
        if b.get(p) != Some(&b'=') {
            return Err(LineError::Syntax(format!(
                "expected '=' after label name {label:?}, found {}",
                describe(line, p)
            )));
        }
        p = skip_ws(b, p + 1);
        if b.get(p) != Some(&b'"') {
            return Err(LineError::Syntax(format!(
                "expected '\"' to open the value of label {label:?}, found {}",
                describe(line, p)
            )));
        }
        let (value, after) = parse_label_value(line, p + 1)
            .ok_or_else(|| format!("label value for {label:?} is not terminated"))?;
        if value.len() > limits.max_label_value_bytes {
            return Err(LineError::Limit(format!(
                "value of label {label:?} is {} bytes, more than scrape.maxLabelValueBytes ({})",
                value.len(),
                limits.max_label_value_bytes
            )));
        }
        if !names.insert(label) {
            return Err(format!("duplicate label {label:?}").into());
        }
        labels.push((label.to_owned(), value));

        p = skip_ws(b, after);
        match b.get(p) {
            Some(b',') => p += 1,
            Some(b'}') => return Ok(p + 1),
            _ => {
                return Err(LineError::Syntax(format!(
                    "expected ',' or '}}' after the value of label {label:?}, found {}",
                    describe(line, p)
                )))
            }
        }
    }
}

/// The label names seen so far on one line, for the duplicate check. A plain scan while the
/// set is small (most lines), a hash set beyond that: one line with N labels costs O(N), not
/// the O(N²) of scanning every earlier name for every label.
#[derive(Default)]
struct LabelNames<'a> {
    seen: Vec<&'a str>,
    large: Option<HashSet<&'a str>>,
}

/// Below this many labels a scan of the earlier names beats hashing.
const LABEL_SCAN_MAX: usize = 16;

impl<'a> LabelNames<'a> {
    /// Records `name`; false if it was already present.
    fn insert(&mut self, name: &'a str) -> bool {
        if let Some(set) = &mut self.large {
            count_label_work(1);
            return set.insert(name);
        }
        count_label_work(self.seen.len() as u64);
        if self.seen.contains(&name) {
            return false;
        }
        self.seen.push(name);
        if self.seen.len() > LABEL_SCAN_MAX {
            self.large = Some(self.seen.drain(..).collect());
        }
        true
    }
}

#[cfg(test)]
thread_local! {
    /// Name comparisons and hash probes of the duplicate-label check, for the linearity test.
    static LABEL_WORK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
fn count_label_work(n: u64) {
    LABEL_WORK.with(|w| w.set(w.get() + n));
}

#[cfg(not(test))]
#[inline(always)]
fn count_label_work(_: u64) {}

/// Decodes a quoted label value starting just after its opening quote. Returns the value and
/// the position after the closing quote, or `None` if the line ends first.
fn parse_label_value(line: &str, start: usize) -> Option<(String, usize)> {
    let b = line.as_bytes();
    let mut value = String::new();
    // Every index used to slice `line` sits on an ASCII `"` or `\` or just after one, so the
    // slices always fall on char boundaries.
    let mut copied = start;
    let mut p = start;
    loop {
        let k = p + memchr2(b'"', b'\\', b.get(p..)?)?;
        value.push_str(&line[copied..k]);
        if b[k] == b'"' {
            return Some((value, k + 1));
        }
        match b.get(k + 1)? {
            b'"' => value.push('"'),
            b'\\' => value.push('\\'),
            b'n' => value.push('\n'),
            _ => {
                // Unknown escape: keep the backslash and let the next char be read normally.
                value.push('\\');
                copied = k + 1;
                p = k + 1;
                continue;
            }
        }
        copied = k + 2;
        p = k + 2;
    }
}

/// Go's `strconv.ParseFloat(s, 64)` as Prometheus uses it, on top of Rust's parser, which
/// accepts the same decimal grammar plus a sign before NaN and silently overflows to infinity.
fn parse_go_float(s: &str) -> Result<f64, &'static str> {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    if unsigned.len() != s.len() && unsigned.eq_ignore_ascii_case("nan") {
        return Err("NaN cannot carry a sign");
    }
    let v: f64 = s.parse().map_err(|_| "not a number")?;
    if v.is_infinite() && !unsigned.starts_with(['i', 'I']) {
        return Err("out of range for a 64-bit float");
    }
    Ok(v)
}

fn parse_timestamp(s: &str, format: Format) -> Result<i64, &'static str> {
    match format {
        Format::PrometheusText => {
            if !s.bytes().all(|c| c.is_ascii_digit()) {
                return Err("expected integer milliseconds (Prometheus text format)");
            }
            s.parse::<i64>().map_err(|_| "out of range")
        }
        Format::OpenMetrics => {
            let secs = parse_go_float(s)?;
            if !secs.is_finite() {
                return Err("expected seconds (OpenMetrics)");
            }
            let ms = (secs * 1000.0).trunc();
            // The bounds are exactly representable and keep the cast lossless instead of
            // saturating.
            if !(-9_223_372_036_854_774_784.0..=9_223_372_036_854_774_784.0).contains(&ms) {
                return Err("out of range");
            }
            Ok(ms as i64)
        }
    }
}

#[cfg(test)]
mod tests;
