//! Answer history: for every scope an HPA has asked about, the recent answers it was served,
//! in a bounded ring. Pure: time is passed in, nothing here reads a clock or does I/O. Times
//! are the wall clock's: they are shown, and the retention is how far back a reader of them
//! looks; the capacity bounds a ring whatever the clock does.
//!
//! Two bounds keep it finite whatever the cluster or the exporters do: each scope keeps at most
//! `capacity` entries (the retention at the HPA's 15 s cadence, docs/hpa-behaviour.md §1.7.5),
//! and at most `max_scopes` scopes are tracked; a new scope beyond the cap evicts the scope
//! that was asked about least recently, and `dropped_scopes` counts the evictions.

use std::borrow::Cow;
use std::collections::VecDeque;

use lru::LruCache;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use super::object_scope::ObjectKind;
use hpa_bridge_rules::clock::{rfc3339_ms, Millis};
use hpa_bridge_rules::config::MetricKind;
use hpa_bridge_rules::evidence::{ProducerReason, SeriesId};
pub use hpa_bridge_rules::policy::InputCounts;
use hpa_bridge_rules::policy::{Answer, Outcome, RawValue, RefusalKind};

/// The HPA controller's default sync period (docs/hpa-behaviour.md §1.7.5): the cadence at
/// which one HPA asks, which turns a retention into a ring length.
pub const HPA_CADENCE_MS: Millis = 15_000;

/// A scope that only ever matched nothing, and that nobody asked about for this long, is left
/// off the page and the per-scope gauges: an HPA asks every 15 s, so it is a selector curled
/// by hand (or mistyped), not a workload. Kept in memory until the scope cap drops it.
pub const ABANDONED_NO_MATCH_MS: Millis = 120_000;

/// A refusal reason longer than this is cut (on a character boundary) before it is kept, so
/// one exporter's long label values cannot make an entry large.
pub const MAX_REASON_BYTES: usize = 512;

/// What was asked: the metric, the namespace, and the scope within it. The scope is the
/// selector text for an External metric, or an object reference such as
/// `StatefulSet/lobby` for an Object metric (`metric_query::history_scope`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct HistoryKey {
    pub metric: String,
    pub namespace: String,
    pub scope: String,
}

/// A history key as its three parts: every answer served looks its scope up, and an owned
/// key (three strings) is built only for a scope seen for the first time.
pub trait KeyParts {
    fn parts(&self) -> (&str, &str, &str);
}

impl KeyParts for HistoryKey {
    fn parts(&self) -> (&str, &str, &str) {
        (&self.metric, &self.namespace, &self.scope)
    }
}

impl KeyParts for (&str, &str, &str) {
    fn parts(&self) -> (&str, &str, &str) {
        *self
    }
}

/// A scope's parts as one text, each after its length, so that no two keys join alike whatever
/// their parts hold: the text the history finds a scope by.
fn join_key(into: &mut String, (metric, namespace, scope): (&str, &str, &str)) {
    into.clear();
    for part in [metric, namespace, scope] {
        let _ = write!(into, "{}:", part.len());
        into.push_str(part);
    }
}

impl HistoryKey {
    /// The workload the scope names, for labels and the status page: the value of
    /// `hpa_target_name` in a selector, the name of an object reference, else the scope text.
    pub fn workload(&self) -> &str {
        // An Object scope starts with its object, `StatefulSet/lobby` (metric_query.rs).
        let head = self.scope.split(' ').next().unwrap_or_default();
        if let Some((kind, name)) = head.split_once('/') {
            if ObjectKind::ALL.iter().any(|k| k.kind() == kind) {
                return name;
            }
        }
        if let Some(rest) = self
            .scope
            .split(',')
            .find_map(|r| r.trim().strip_prefix("hpa_target_name="))
        {
            return rest;
        }
        &self.scope
    }
}

/// The reply an HPA got: the served value, or the refusal and its reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Reply {
    Value {
        value: u64,
    },
    Refused {
        kind: RefusalKind,
        /// The reason given when this run of refusals of this kind began (shared between the
        /// run's entries).
        reason: Arc<str>,
    },
}

/// One answer served to an HPA.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub at_ms: Millis,
    pub served: Reply,
    /// The recommendation behind a target (or the value of a recommendation metric).
    pub recommendation: Option<u64>,
    /// The stateful floor behind a target (or the value of a floor metric); for an incomplete
    /// floor, the known lower bound.
    pub floor: Option<u64>,
    pub inputs: InputCounts,
    /// `spec.replicas` of the scope's workload from the Kubernetes watch when the answer was
    /// served: what the HPA had applied so far. Absent when unknown (no Kubernetes, or no
    /// single workload behind the answer), never guessed. Kubernetes keeps it as an int32.
    pub spec_replicas: Option<u32>,
}

/// When it was served is `at` (RFC 3339, to the millisecond), and again `atMs`: deprecated, and
/// kept for one release (CHANGELOG.md).
/// `specReplicas` is left out when unknown.
impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let at = rfc3339_ms(self.at_ms);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("at", &at)?;
        m.serialize_entry("atMs", &at)?;
        m.serialize_entry("served", &self.served)?;
        m.serialize_entry("recommendation", &self.recommendation)?;
        m.serialize_entry("floor", &self.floor)?;
        m.serialize_entry("inputs", &self.inputs)?;
        if let Some(r) = self.spec_replicas {
            m.serialize_entry("specReplicas", &r)?;
        }
        m.end()
    }
}

impl Entry {
    /// The entry for `answer`, served at `at_ms`; `previous` lends its reason when unchanged.
    pub fn from_answer(answer: &Answer, at_ms: Millis, previous: Option<&Entry>) -> Entry {
        let served = match &answer.outcome {
            Outcome::Value { value, .. } => Reply::Value { value: *value },
            Outcome::Refused { kind, .. } => {
                // One reason per run of refusals of one kind: the reason given when the run
                // began. A reason that changes every time (an age in seconds) then costs one
                // string per run, not one per entry.
                let reason = match previous.map(|p| &p.served) {
                    Some(Reply::Refused { kind: k, reason: r }) if k == kind => r.clone(),
                    _ => Arc::from(truncate(&answer.reason, MAX_REASON_BYTES)),
                };
                Reply::Refused {
                    kind: *kind,
                    reason,
                }
            }
        };
        let (recommendation, floor) = parts_of(answer);
        Entry {
            at_ms,
            served,
            recommendation,
            floor,
            inputs: InputCounts::of(answer),
            spec_replicas: None,
        }
    }

    pub fn value(&self) -> Option<u64> {
        match &self.served {
            Reply::Value { value } => Some(*value),
            Reply::Refused { .. } => None,
        }
    }

    pub fn is_refusal(&self) -> bool {
        matches!(self.served, Reply::Refused { .. })
    }

    /// The stateful floor, not the recommendation, sets the served target: the value is above
    /// the recommendation (the floor, or the current replicas held while the floor is
    /// incomplete).
    pub fn floor_holds(&self) -> bool {
        match (self.value(), self.recommendation) {
            (Some(v), Some(r)) => v > r && self.floor.is_some(),
            _ => false,
        }
    }
}

/// The value behind an answer's recommendation and floor, by the kind of metric.
fn parts_of(answer: &Answer) -> (Option<u64>, Option<u64>) {
    let bound = |a: &Answer| match a.outcome {
        Outcome::Value { value, .. } => Some(value),
        Outcome::Refused {
            known_lower_bound, ..
        } => known_lower_bound,
    };
    match answer.kind {
        k if k == MetricKind::Target.as_str() => {
            let rec = answer.parts.first().and_then(|p| p.value());
            let floor = answer.parts.get(1).and_then(bound);
            (rec, floor)
        }
        k if k == MetricKind::StatefulFloor.as_str() => (None, bound(answer)),
        _ => (answer.value(), None),
    }
}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Inputs of the newest answer kept per scope, for the status page; the rest are counted. As
/// many as a served answer notes (input_notes.rs), so the first ones are always there.
pub const MAX_INPUTS_KEPT: usize = hpa_bridge_rules::policy::NOTES_KEPT_WHEN_SERVING;

/// One input of the newest answer, as text, each field cut at `MAX_REASON_BYTES`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputSummary {
    pub target: String,
    /// `series{label="value",...}` as exported (label values unescaped).
    pub series: String,
    pub value: String,
    pub status: String,
}

/// One input of the newest answer as a ring keeps it: the series' own identity, not a place
/// in the scope's shared list of identities (evidence/series_id.rs). A ring then holds the few
/// series it shows, and a scope's list, as large as the scope, is freed once the store and the
/// answers are done with it, however many scopes the history tracks.
#[derive(Clone, Debug)]
struct KeptInput {
    id: SeriesId,
    value: RawValue,
    status: Cow<'static, str>,
}

/// Keep the first `MAX_INPUTS_KEPT` inputs of `answer` and of the answers it was built from in
/// `out` from position `*kept` on, and count them all in `total`. The notes are written out
/// only when the history is viewed: this runs for every answer served. A kept input of the
/// same series keeps its identity (equal handles compare by address), so a steady scope takes
/// no new references.
fn first_inputs(answer: &Answer, out: &mut Vec<KeptInput>, kept: &mut usize, total: &mut usize) {
    *total += answer.inputs.len() + answer.omitted_inputs.total();
    let room = MAX_INPUTS_KEPT.saturating_sub(*kept);
    for note in answer.inputs.iter().take(room) {
        match out.get_mut(*kept) {
            Some(k) if k.id == *note.id => {
                k.value = note.value;
                k.status.clone_from(&note.status);
            }
            slot => {
                let input = KeptInput {
                    id: (*note.id).clone(),
                    value: note.value,
                    status: note.status.clone(),
                };
                match slot {
                    Some(k) => *k = input,
                    None => out.push(input),
                }
            }
        }
        *kept += 1;
    }
    for part in &answer.parts {
        first_inputs(part, out, kept, total);
    }
}

/// What the producers behind `answer` and the answers it was built from said, each producer
/// once and at most `MAX_INPUTS_KEPT` of them, as the inputs are kept.
fn producer_reasons(answer: &Answer, out: &mut Vec<ProducerReason>) {
    for r in &answer.producer_reasons {
        if out.len() < MAX_INPUTS_KEPT && !out.iter().any(|o| o.target == r.target) {
            out.push(r.clone());
        }
    }
    for part in &answer.parts {
        producer_reasons(part, out);
    }
}

impl InputSummary {
    fn of(input: &KeptInput) -> InputSummary {
        let mut series = String::with_capacity(128);
        series.push_str(&input.id.series);
        series.push('{');
        for (i, (k, v)) in input.id.labels.iter().enumerate() {
            if i > 0 {
                series.push(',');
            }
            let _ = write!(series, "{k}=\"{v}\"");
        }
        series.push('}');
        let cut = truncate(&series, MAX_REASON_BYTES).len();
        series.truncate(cut);
        InputSummary {
            target: truncate(&input.id.target.0, MAX_REASON_BYTES).to_string(),
            series,
            value: {
                let mut value = input.value.to_string();
                value.truncate(truncate(&value, 64).len());
                value
            },
            status: truncate(&input.status, MAX_REASON_BYTES).to_string(),
        }
    }
}

/// The newest state of one scope, for the self-metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopeState {
    pub key: HistoryKey,
    pub refusing: bool,
    /// When the current run of refusals began (0 when not refusing).
    pub refusing_since_ms: Option<Millis>,
    pub floor_holds: bool,
    pub last_at_ms: Millis,
}

#[derive(Debug)]
struct Ring {
    entries: VecDeque<Entry>,
    /// The first refusal of the current run; kept apart from the ring so a refusal longer than
    /// the retention still reports when it began.
    refusing_since_ms: Option<Millis>,
    last_at_ms: Millis,
    /// The full reason of the newest answer, value or refusal (cut at `MAX_REASON_BYTES`).
    last_reason: String,
    /// The first inputs of the newest answer, and how many it had.
    last_inputs: Vec<KeptInput>,
    last_inputs_total: usize,
    /// What the producers behind the newest answer said of their values.
    last_producer_reasons: Vec<ProducerReason>,
}

impl Ring {
    /// Every answer kept was "no series match", and the last is older than
    /// `ABANDONED_NO_MATCH_MS`.
    fn abandoned_no_match(&self, now: Millis) -> bool {
        now.saturating_sub(self.last_at_ms) > ABANDONED_NO_MATCH_MS
            && self.entries.iter().all(|e| {
                matches!(
                    e.served,
                    Reply::Refused {
                        kind: RefusalKind::NoMatch,
                        ..
                    }
                )
            })
    }

    /// Keep `answer`, served at `now` while the workload's `spec.replicas` was
    /// `spec_replicas`, within `limits`.
    fn record(&mut self, answer: &Answer, spec_replicas: Option<u64>, now: Millis, limits: Limits) {
        self.last_reason.clear();
        self.last_reason
            .push_str(truncate(&answer.reason, MAX_REASON_BYTES));
        self.last_inputs_total = 0;
        let mut kept = 0;
        first_inputs(
            answer,
            &mut self.last_inputs,
            &mut kept,
            &mut self.last_inputs_total,
        );
        self.last_inputs.truncate(kept);
        self.last_producer_reasons.clear();
        producer_reasons(answer, &mut self.last_producer_reasons);
        let mut entry = Entry::from_answer(answer, now, self.entries.back());
        // Out of an int32's range is not a Kubernetes value: unknown rather than cut.
        entry.spec_replicas = spec_replicas.and_then(|r| u32::try_from(r).ok());
        self.refusing_since_ms = if entry.is_refusal() {
            Some(self.refusing_since_ms.unwrap_or(now))
        } else {
            None
        };
        self.last_at_ms = self.last_at_ms.max(now);
        while self.entries.len() >= limits.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
        let horizon = now.saturating_sub(limits.retention_ms);
        while self.entries.front().is_some_and(|e| e.at_ms < horizon) {
            self.entries.pop_front();
        }
    }
}

/// The bounds of the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Entries older than this are dropped.
    pub retention_ms: Millis,
    /// Entries per scope.
    pub capacity: usize,
    pub max_scopes: usize,
}

impl Limits {
    /// The ring length for `retention` at the HPA's cadence.
    pub fn for_retention(retention_ms: Millis, max_scopes: usize) -> Limits {
        let capacity = (retention_ms / HPA_CADENCE_MS).max(1) as usize;
        Limits {
            retention_ms,
            capacity,
            max_scopes: max_scopes.max(1),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::for_retention(3_600_000, 1000)
    }
}

/// The history of every tracked scope.
#[derive(Debug)]
pub struct History {
    limits: Limits,
    /// By the scope's joined key (`join_key`), so that an answer finds its scope with text
    /// built in `lookup` rather than an owned key. Keys come from authorised requests and the
    /// config, so a seeded fast hash will do (Cargo.toml, `foldhash`); bounded by
    /// `limits.max_scopes`, in the order the scopes were last asked about.
    scopes: LruCache<Box<str>, (HistoryKey, Ring), foldhash::fast::RandomState>,
    /// Where a lookup's joined key is built, kept for its capacity.
    lookup: String,
    dropped_scopes: u64,
}

impl History {
    pub fn new(limits: Limits) -> History {
        // The bound is kept by `record`, which counts what it evicts.
        History {
            limits,
            scopes: LruCache::unbounded_with_hasher(Default::default()),
            lookup: String::new(),
            dropped_scopes: 0,
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Record `answer`, served for `key` at `now` while the scope's workload had
    /// `spec_replicas` (`None` when unknown). Returns the scope evicted to make room, if any.
    pub fn record(
        &mut self,
        key: &impl KeyParts,
        answer: &Answer,
        spec_replicas: Option<u64>,
        now: Millis,
    ) -> Option<HistoryKey> {
        let parts = key.parts();
        let limits = self.limits;
        join_key(&mut self.lookup, parts);
        // One lookup for a known scope, the case of every answer but a scope's first.
        if let Some((_, ring)) = self.scopes.get_mut(self.lookup.as_str()) {
            ring.record(answer, spec_replicas, now, limits);
            return None;
        }
        let mut evicted = None;
        if self.scopes.len() >= limits.max_scopes {
            if let Some((_, (oldest, _))) = self.scopes.pop_lru() {
                self.dropped_scopes += 1;
                evicted = Some(oldest);
            }
        }
        let mut ring = Ring {
            entries: VecDeque::new(),
            refusing_since_ms: None,
            last_at_ms: now,
            last_reason: String::new(),
            last_inputs: Vec::new(),
            last_inputs_total: 0,
            last_producer_reasons: Vec::new(),
        };
        ring.record(answer, spec_replicas, now, limits);
        let (metric, namespace, scope) = parts;
        let key = HistoryKey {
            metric: metric.to_string(),
            namespace: namespace.to_string(),
            scope: scope.to_string(),
        };
        self.scopes.push(self.lookup.as_str().into(), (key, ring));
        evicted
    }

    /// Scopes evicted by the scope cap since the start.
    pub fn dropped_scopes(&self) -> u64 {
        self.dropped_scopes
    }

    pub fn len(&self) -> usize {
        self.scopes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scopes.is_empty()
    }

    /// The entries of every scope that passes `filter`, oldest first, without those older than
    /// the retention at `now`.
    pub fn snapshot(&self, filter: &Filter, now: Millis) -> Vec<ScopeHistory> {
        let horizon = now.saturating_sub(self.limits.retention_ms);
        let mut scopes: Vec<ScopeHistory> = self
            .scopes
            .iter()
            .map(|(_, kr)| kr)
            .filter(|(k, r)| filter.matches(k) && !r.abandoned_no_match(now))
            .map(|(k, r)| ScopeHistory {
                key: k.clone(),
                entries: r
                    .entries
                    .iter()
                    .filter(|e| e.at_ms >= horizon)
                    .cloned()
                    .collect(),
                last_reason: r.last_reason.clone(),
                last_inputs: r.last_inputs.iter().map(InputSummary::of).collect(),
                last_inputs_total: r.last_inputs_total,
                last_producer_reasons: r.last_producer_reasons.clone(),
            })
            .collect();
        // In key order, as a reader expects (the map has none).
        scopes.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        scopes
    }

    /// The newest state of every scope but the abandoned ones that only matched nothing.
    pub fn states(&self, now: Millis) -> Vec<ScopeState> {
        let mut states: Vec<ScopeState> = self
            .scopes
            .iter()
            .filter(|(_, (_, r))| !r.abandoned_no_match(now))
            .filter_map(|(_, (k, r))| {
                let newest = r.entries.back()?;
                Some(ScopeState {
                    key: k.clone(),
                    refusing: newest.is_refusal(),
                    refusing_since_ms: r.refusing_since_ms,
                    floor_holds: newest.floor_holds(),
                    last_at_ms: r.last_at_ms,
                })
            })
            .collect();
        states.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        states
    }
}

/// One scope's history, as read out.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopeHistory {
    pub key: HistoryKey,
    /// Oldest first.
    pub entries: Vec<Entry>,
    /// The full reason of the newest answer.
    pub last_reason: String,
    /// The first `MAX_INPUTS_KEPT` inputs of the newest answer, and how many it had.
    pub last_inputs: Vec<InputSummary>,
    pub last_inputs_total: usize,
    /// What the producers behind the newest answer said (a JSON source's `reason`), each cut
    /// when its page was read.
    pub last_producer_reasons: Vec<ProducerReason>,
}

/// Which scopes `/status/history` returns: all, or those of one namespace and/or metric.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub namespace: Option<String>,
    pub metric: Option<String>,
}

impl Filter {
    pub fn matches(&self, key: &HistoryKey) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == key.namespace)
            && self
                .metric
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(&key.metric))
    }
}

/// The bytes one entry takes in a full ring, not counting a reason string that changes every
/// time (reasons are shared between consecutive equal refusals).
pub const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

#[cfg(test)]
mod tests;
