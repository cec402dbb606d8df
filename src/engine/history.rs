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

use foldhash::{HashMap, HashMapExt};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::Serialize;

use crate::clock::{rfc3339, Millis};
use crate::config::MetricKind;
pub use crate::policy::InputCounts;
use crate::policy::{Answer, Outcome, RawValue, RefusalKind};
use crate::store::SeriesId;

/// The HPA controller's default sync period (docs/hpa-behaviour.md §1.7.5): the cadence at
/// which one HPA asks, which turns a retention into a ring length.
pub const HPA_CADENCE_MS: Millis = 15_000;

/// A refusal reason longer than this is cut (on a character boundary) before it is kept, so
/// one exporter's long label values cannot make an entry large.
pub const MAX_REASON_BYTES: usize = 512;

/// What was asked: the metric, the namespace, and the scope within it. The scope is the
/// selector text for an External metric, or an object reference such as
/// `statefulsets.apps/lobby` for an Object metric.
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

impl<'a> std::borrow::Borrow<dyn KeyParts + 'a> for HistoryKey {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

// The map hashes and compares an owned key and borrowed parts alike: by their parts.
impl Hash for HistoryKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.parts().hash(h)
    }
}

impl Hash for dyn KeyParts + '_ {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.parts().hash(h)
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

impl HistoryKey {
    /// The workload the scope names, for labels and the status page: the value of
    /// `hpa_target_name` in a selector, the name of an object reference, else the scope text.
    pub fn workload(&self) -> &str {
        if let Some(rest) = self
            .scope
            .split(',')
            .find_map(|r| r.trim().strip_prefix("hpa_target_name="))
        {
            return rest;
        }
        if !self.scope.contains('=') {
            if let Some((_, name)) = self.scope.rsplit_once('/') {
                return name;
            }
        }
        &self.scope
    }
}

/// The served value, or the refusal and its reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Served {
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    #[serde(serialize_with = "as_rfc3339")]
    pub at_ms: Millis,
    pub served: Served,
    /// The recommendation behind a target (or the value of a recommendation metric).
    pub recommendation: Option<u64>,
    /// The stateful floor behind a target (or the value of a floor metric); for an incomplete
    /// floor, the known lower bound.
    pub floor: Option<u64>,
    pub inputs: InputCounts,
    /// `spec.replicas` of the scope's workload from the Kubernetes watch when the answer was
    /// served: what the HPA had applied so far. Absent when unknown (no Kubernetes, or no
    /// single workload behind the answer), never guessed. Kubernetes keeps it as an int32.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_replicas: Option<u32>,
}

fn as_rfc3339<S: serde::Serializer>(ms: &Millis, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*ms))
}

impl Entry {
    /// The entry for `answer`, served at `at_ms`; `previous` lends its reason when unchanged.
    pub fn from_answer(answer: &Answer, at_ms: Millis, previous: Option<&Entry>) -> Entry {
        let served = match &answer.outcome {
            Outcome::Value { value, .. } => Served::Value { value: *value },
            Outcome::Refused { kind, .. } => {
                // One reason per run of refusals of one kind: the reason given when the run
                // began. A reason that changes every time (an age in seconds) then costs one
                // string per run, not one per entry.
                let reason = match previous.map(|p| &p.served) {
                    Some(Served::Refused { kind: k, reason: r }) if k == kind => r.clone(),
                    _ => Arc::from(truncate(&answer.reason, MAX_REASON_BYTES)),
                };
                Served::Refused {
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
            Served::Value { value } => Some(*value),
            Served::Refused { .. } => None,
        }
    }

    pub fn is_refusal(&self) -> bool {
        matches!(self.served, Served::Refused { .. })
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
pub const MAX_INPUTS_KEPT: usize = crate::policy::NOTES_KEPT_WHEN_SERVING;

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
/// in the scope's shared list of identities (store/series_id.rs). A ring then holds the few
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
}

impl Ring {
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
    /// Keys come from authorised requests and the config, so a seeded fast hash will do
    /// (Cargo.toml, `foldhash`); the map is bounded by `limits`.
    scopes: HashMap<HistoryKey, Ring>,
    dropped_scopes: u64,
}

impl History {
    pub fn new(limits: Limits) -> History {
        History {
            limits,
            scopes: HashMap::new(),
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
        // One lookup for a known scope, the case of every answer but a scope's first.
        if let Some(ring) = self.scopes.get_mut(&parts as &dyn KeyParts) {
            ring.record(answer, spec_replicas, now, limits);
            return None;
        }
        let mut evicted = None;
        if self.scopes.len() >= limits.max_scopes {
            // Ties go to the smallest key, so which scope goes does not depend on the map's
            // order.
            if let Some(oldest) = self
                .scopes
                .iter()
                .min_by_key(|(k, r)| (r.last_at_ms, *k))
                .map(|(k, _)| k.clone())
            {
                self.scopes.remove(&oldest);
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
        };
        ring.record(answer, spec_replicas, now, limits);
        let (metric, namespace, scope) = parts;
        let key = HistoryKey {
            metric: metric.to_string(),
            namespace: namespace.to_string(),
            scope: scope.to_string(),
        };
        self.scopes.insert(key, ring);
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
            .filter(|(k, _)| filter.matches(k))
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
            })
            .collect();
        // In key order, as a reader expects (the map has none).
        scopes.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        scopes
    }

    /// The newest state of every scope.
    pub fn states(&self) -> Vec<ScopeState> {
        let mut states: Vec<ScopeState> = self
            .scopes
            .iter()
            .filter_map(|(k, r)| {
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
mod tests {
    use super::*;
    use crate::policy::InputNote;

    fn key(ns: &str, scope: &str) -> HistoryKey {
        HistoryKey {
            metric: "hpa_target_replicas".into(),
            namespace: ns.into(),
            scope: scope.into(),
        }
    }

    fn value(v: u64) -> Answer {
        Answer::valued("m", MetricKind::Recommendation, v, 0, "r", "why".into())
    }

    fn refusal(reason: &str) -> Answer {
        Answer::refused(
            "m",
            MetricKind::Recommendation,
            RefusalKind::Stale,
            None,
            "r",
            reason.into(),
        )
    }

    fn note(status: &str) -> InputNote {
        InputNote {
            id: crate::store::SeriesRef::new(
                crate::store::TargetId("t".into()),
                "s".into(),
                Default::default(),
            ),
            value: crate::policy::RawValue(1.0),
            age_seconds: 0.0,
            status: status.to_string().into(),
            used: true,
        }
    }

    fn target(rec: u64, floor: Answer) -> Answer {
        crate::policy::target("t", value(rec), Some(floor), Err("unknown"))
    }

    fn floor(v: u64) -> Answer {
        Answer::valued("f", MetricKind::StatefulFloor, v, 0, "r", "why".into())
    }

    #[test]
    fn default_is_one_hour_at_the_hpa_cadence() {
        let l = Limits::default();
        assert_eq!(l.capacity, 240);
        assert_eq!(l.max_scopes, 1000);
        assert_eq!(Limits::for_retention(1000, 0).capacity, 1);
        assert_eq!(Limits::for_retention(1000, 0).max_scopes, 1);
    }

    #[test]
    fn a_ring_keeps_at_most_capacity_entries_oldest_first() {
        let mut h = History::new(Limits::for_retention(60_000, 10)); // 4 entries
        for i in 0..10i64 {
            h.record(&key("a", "x=1"), &value(i as u64), None, i * 15_000);
        }
        let snap = h.snapshot(&Filter::default(), 9 * 15_000);
        let values: Vec<_> = snap[0].entries.iter().filter_map(Entry::value).collect();
        assert_eq!(values, [6, 7, 8, 9]);
    }

    #[test]
    fn entries_older_than_the_retention_go_even_when_asked_rarely() {
        let mut h = History::new(Limits::for_retention(60_000, 10));
        h.record(&key("a", "x=1"), &value(1), None, 0);
        h.record(&key("a", "x=1"), &value(2), None, 10_000);
        h.record(&key("a", "x=1"), &value(3), None, 200_000);
        let snap = h.snapshot(&Filter::default(), 200_000);
        assert_eq!(snap[0].entries.len(), 1);
        // A snapshot much later shows nothing, without a record to prune.
        assert!(h.snapshot(&Filter::default(), 900_000)[0]
            .entries
            .is_empty());
    }

    #[test]
    fn the_scope_cap_evicts_the_least_recently_asked_scope_and_counts_it() {
        let mut h = History::new(Limits::for_retention(60_000, 2));
        assert_eq!(h.record(&key("a", "x=1"), &value(1), None, 0), None);
        assert_eq!(h.record(&key("b", "x=1"), &value(1), None, 1), None);
        // `a` is asked again, so `b` is now the oldest.
        h.record(&key("a", "x=1"), &value(1), None, 2);
        assert_eq!(
            h.record(&key("c", "x=1"), &value(1), None, 3),
            Some(key("b", "x=1"))
        );
        assert_eq!(h.len(), 2);
        assert_eq!(h.dropped_scopes(), 1);
        // Thousands of scopes never grow it past the cap.
        for i in 0..5000 {
            h.record(&key("n", &format!("x={i}")), &value(1), None, 10 + i);
        }
        assert_eq!(h.len(), 2);
        assert_eq!(h.dropped_scopes(), 5001);
    }

    #[test]
    fn refusal_runs_report_their_start_and_end_on_a_value() {
        let mut h = History::new(Limits::default());
        let k = key("a", "x=1");
        h.record(&k, &value(3), None, 0);
        h.record(&k, &refusal("stale"), None, 15_000);
        h.record(&k, &refusal("stale again"), None, 30_000);
        let s = &h.states()[0];
        assert!(s.refusing);
        assert_eq!(s.refusing_since_ms, Some(15_000));
        h.record(&k, &value(3), None, 45_000);
        let s = &h.states()[0];
        assert!(!s.refusing);
        assert_eq!(s.refusing_since_ms, None);
    }

    #[test]
    fn a_refusal_longer_than_the_ring_keeps_its_start() {
        let mut h = History::new(Limits::for_retention(30_000, 1));
        for i in 0..20 {
            h.record(&key("a", "x=1"), &refusal("r"), None, i * 15_000);
        }
        assert_eq!(h.states()[0].refusing_since_ms, Some(0));
    }

    #[test]
    fn a_run_of_refusals_shares_its_first_reason_and_long_ones_are_cut() {
        let mut h = History::new(Limits::default());
        h.record(&key("a", "x=1"), &refusal("stale: 31s old"), None, 0);
        h.record(&key("a", "x=1"), &refusal("stale: 46s old"), None, 15_000);
        let snap = h.snapshot(&Filter::default(), 15_000);
        // The newest full reason is kept for the scope.
        assert_eq!(snap[0].last_reason, "stale: 46s old");
        let reasons: Vec<&Arc<str>> = snap[0]
            .entries
            .iter()
            .map(|e| match &e.served {
                Served::Refused { reason, .. } => reason,
                Served::Value { .. } => panic!("value"),
            })
            .collect();
        assert!(Arc::ptr_eq(reasons[0], reasons[1]));
        assert_eq!(&**reasons[0], "stale: 31s old");
        let long = "é".repeat(MAX_REASON_BYTES);
        let e = Entry::from_answer(&refusal(&long), 0, None);
        let Served::Refused { reason, .. } = e.served else {
            panic!("refusal")
        };
        assert!(reason.len() <= MAX_REASON_BYTES && reason.len() >= MAX_REASON_BYTES - 1);
    }

    #[test]
    fn a_target_entry_carries_its_recommendation_floor_and_input_counts() {
        let mut rec = value(2);
        rec.inputs = vec![note("fresh"), note("stale: 40s old")];
        let mut f = floor(5);
        f.inputs = vec![
            note("retained 5 from 30s ago"),
            note("unknown: x"),
            note("invalid: NaN"),
        ];
        let t = crate::policy::target("t", rec, Some(f), Err("unknown"));
        let e = Entry::from_answer(&t, 7, None);
        let mut h = History::new(Limits::default());
        h.record(&key("a", "x=1"), &t, None, 7);
        let snap = &h.snapshot(&Filter::default(), 7)[0];
        assert_eq!(snap.last_inputs_total, 5);
        assert_eq!(snap.last_inputs.len(), 5);
        assert_eq!(snap.last_inputs[0].series, "s{}");
        assert_eq!(snap.last_inputs[2].status, "retained 5 from 30s ago");
        assert_eq!(e.value(), Some(5));
        assert_eq!(e.recommendation, Some(2));
        assert_eq!(e.floor, Some(5));
        assert!(e.floor_holds());
        assert_eq!(
            e.inputs,
            InputCounts {
                fresh: 1,
                stale: 1,
                retained: 1,
                unknown: 2
            }
        );
        // The recommendation setting the target: the floor does not hold.
        assert!(!Entry::from_answer(&target(9, floor(5)), 0, None).floor_holds());
        // A floor metric on its own: the floor, no recommendation, nothing held.
        let alone = Entry::from_answer(&floor(4), 0, None);
        assert_eq!((alone.recommendation, alone.floor), (None, Some(4)));
        assert!(!alone.floor_holds());
    }

    #[test]
    fn an_entry_keeps_the_spec_replicas_it_was_served_under_and_none_when_unknown() {
        let mut h = History::new(Limits::for_retention(60_000, 10)); // 4 entries
        let k = key("a", "x=1");
        for (i, r) in [None, Some(3), Some(u64::MAX), Some(4), Some(5)]
            .into_iter()
            .enumerate()
        {
            h.record(&k, &value(2), r, i as Millis * 15_000);
        }
        let snap = h.snapshot(&Filter::default(), 60_000);
        let kept: Vec<_> = snap[0].entries.iter().map(|e| e.spec_replicas).collect();
        // The ring stays at its capacity; a value Kubernetes cannot hold is unknown, not cut.
        assert_eq!(kept, [Some(3), None, Some(4), Some(5)]);
        let json = serde_json::to_value(&snap[0].entries).unwrap();
        assert_eq!(json[0]["specReplicas"], 3);
        assert!(json[1].get("specReplicas").is_none(), "{json}");
    }

    #[test]
    fn an_incomplete_floor_reports_its_known_lower_bound() {
        let f = Answer::refused(
            "f",
            MetricKind::StatefulFloor,
            RefusalKind::IncompleteFloor,
            Some(3),
            "r",
            "pod x unknown".into(),
        );
        let t = crate::policy::target("t", value(1), Some(f), Ok(4));
        let e = Entry::from_answer(&t, 0, None);
        assert_eq!(
            (e.value(), e.recommendation, e.floor),
            (Some(4), Some(1), Some(3))
        );
        assert!(e.floor_holds());
    }

    #[test]
    fn filters_match_namespace_and_metric() {
        let k = key("games", "hpa_target_name=lobby");
        assert!(Filter::default().matches(&k));
        let ns = |n: &str| Filter {
            namespace: Some(n.into()),
            metric: None,
        };
        assert!(ns("games").matches(&k));
        assert!(!ns("other").matches(&k));
        let m = Filter {
            namespace: None,
            metric: Some("HPA_TARGET_REPLICAS".into()),
        };
        assert!(m.matches(&k));
    }

    #[test]
    fn the_workload_comes_from_the_selector_or_the_object() {
        assert_eq!(key("a", "hpa_target_name=lobby").workload(), "lobby");
        assert_eq!(key("a", "app=x,hpa_target_name=lobby").workload(), "lobby");
        assert_eq!(key("a", "statefulsets.apps/lobby").workload(), "lobby");
        assert_eq!(key("a", "app=x").workload(), "app=x");
        assert_eq!(key("a", "").workload(), "");
    }

    /// A ring keeps the identities of the inputs it shows, not the scope's list they came
    /// from: once the store has dropped a scope's series and its kept resolution, nothing
    /// holds the list, and `/status/history` reads the same as when the ring held the notes.
    #[tokio::test]
    async fn a_ring_keeps_only_the_inputs_it_shows_not_the_scope_list() {
        use crate::selector::LabelSelector;

        let adapter = crate::engine::fixtures::default_adapter();
        let store = adapter.scrape_store();
        let targets = crate::engine::fixtures::lobby_pods(12);
        store.set_targets(targets.clone());
        // Three recommenders, so both parts note inputs the ring keeps.
        crate::engine::fixtures::scrape_lobby(&store, &targets, 3, |i| (i % 3) as f64);
        let selector = LabelSelector::parse("hpa_target_name=lobby").unwrap();
        let served = adapter
            .answer("hpa_target_replicas", "games", &selector)
            .await
            .unwrap();
        let lists: Vec<_> = served
            .parts
            .iter()
            .filter_map(|p| p.inputs.first())
            .map(|n| n.id.list())
            .collect();
        assert_eq!(lists.len(), 2, "{served:?}");
        drop(served);
        let json = || serde_json::to_string(&adapter.history(&Filter::default())).unwrap();
        let before = json();
        assert_eq!(before, HISTORY_JSON);
        // The pods go, and answers over the same store scopes (under other metrics, so the
        // ring above is not rewritten) replace the kept resolutions.
        store.set_targets(Vec::new());
        for metric in ["hpa_expect_replicas", "hpa_stateful_floor"] {
            adapter.answer(metric, "games", &selector).await.unwrap();
        }
        for list in &lists {
            assert!(
                list.upgrade().is_none(),
                "a ring keeps the scope's list alive"
            );
        }
        let after: serde_json::Value = serde_json::from_str(&json()).unwrap();
        let target = after["scopes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["metric"] == "hpa_target_replicas")
            .unwrap();
        let before: serde_json::Value = serde_json::from_str(&before).unwrap();
        assert_eq!(*target, before["scopes"][0]);
    }

    /// `/status/history` for the answer above, as written while rings held the notes.
    const HISTORY_JSON: &str = r#"{"capacity":240,"maxScopes":1000,"tracked":1,"droppedScopes":0,"scopes":[{"entries":[{"atMs":"1970-01-01T00:16:40Z","floor":2,"inputs":{"fresh":15,"retained":0,"stale":0,"unknown":0},"recommendation":2,"served":{"state":"value","value":2}}],"inputs":[{"series":"hpa_expect_replicas{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-00","value":"2"},{"series":"hpa_expect_replicas{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-01","value":"2"},{"series":"hpa_expect_replicas{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-02","value":"2"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-00","value":"0"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-01","value":"1"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-02","value":"2"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-03","value":"0"},{"series":"hpa_stateful_index{hpa_target_api_version=\"apps/v1\",hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",namespace=\"games\"}","status":"fresh","target":"games/lobby-04","value":"1"}],"inputsTotal":15,"metric":"hpa_target_replicas","namespace":"games","reason":"max(recommendation hpa_expect_replicas = 2, floor hpa_stateful_floor = 2) = 2 (recommendation)","scope":"hpa_target_name=lobby","workload":"lobby"}]}"#;

    #[test]
    fn memory_per_tracked_scope_is_bounded() {
        // A full default ring: 240 entries of fixed size plus the key and the deque header.
        let per_scope = ENTRY_BYTES * Limits::default().capacity;
        const { assert!(ENTRY_BYTES <= 96) };
        assert!(per_scope <= 24 * 1024, "{per_scope}");
    }
}
