//! `kind: threshold`: a replica count from a raw load total, with hysteresis that cannot flap.
//!
//! Pure: the load, the current replica count, the evaluation history and `now` are parameters.
//!
//! # The rule
//!
//! With `V` the load total, `T_up = upPerReplica`, `T_down = downPerReplica` (`T_down ≤ T_up`)
//! and `c` the current replica count:
//!
//! ```text
//! up   = ceil(V / T_up)      the fewest replicas that each carry at most T_up
//! down = ceil(V / T_down)    the fewest replicas that each carry at most T_down   (down ≥ up)
//! answer = up    if up > c
//!          down  if down < c
//!          c     otherwise   (up ≤ c ≤ down: the stable band)
//! ```
//!
//! For a positive integer `V` and integer `T`, `ceil(V/T) = (V−1)/T + 1`, the form the libapp
//! controller uses (docs/hpa-behaviour.md §4.2). Here `ceil(V/T)` is computed as the smallest `n` with
//! `n × T ≥ V` in floating point, so fractional loads work and the properties below hold exactly
//! for the numbers the code really compares, not only in exact arithmetic.
//!
//! # Why it cannot flap, get stuck, or walk down in steps
//!
//! `up` and `down` depend on `V` only, never on `c`, and `down ≥ up` because the same `V` is
//! divided by a smaller per-replica load. So:
//! - **Fixed point.** Answering `up` and then seeing `c = up` gives `up > c` false and
//!   `down < c` false (`down ≥ up = c`): the answer stays `up`. Answering `down` and then seeing
//!   `c = down` gives `up > down` false and `down < down` false: it stays `down`. The HPA
//!   reaches the target in one step and stays there while the load is unchanged.
//! - **No stuck state.** If `V > c × T_up` then `c` replicas cannot carry the load at `T_up`,
//!   so `up > c` and the answer rises.
//! - **One-step scale-down.** A drop in load goes straight to `ceil(V/T_down)`.
//!
//! Cadence's matching scaler (docs/hpa-behaviour.md §4.2) uses one per-partition figure `R` plus a
//! factor: up to `ceil(qps/R)`, and down only when `qps < R × (P−1) × factor`. The reference
//! records that design's flaw: one threshold pair can force multi-step downscales, or leave a
//! state that is always under load yet never changes. Both come from the up trigger, the down
//! trigger and the down step being separate formulas rather than one function of the load: a
//! down condition written against `P−1` that then steps by one partition walks a large drop
//! down one sustained window at a time, and a pair of bands not derived from each other can,
//! for some `P`, leave no branch that fires although each partition is above its capacity.
//! Here both bands are the same function, `ceil(V/T)`, at two values of `T`, which keeps them
//! consistent for every `c` by construction (the property tests check the three guarantees
//! above over arbitrary `V`, `T` and `c`). With `T_down = factor × R` the down condition
//! `down < c` is `V ≤ (c−1) × T_down`, Cadence's own trigger (with `≤` for `<`), but the answer
//! is the fixed point `ceil(V/T_down)` rather than `c−1`.
//!
//! # Sustain
//!
//! `sustain: {up: 1m, down: 2m, fraction: 0.5}` makes a direction wait until its condition held
//! in at least `fraction` of the evaluations inside its window, not on consecutive ones: a
//! single dip does not restart a sustained overload. In quantile form, the sustained raise is
//! the k-th largest `up` in the up window and the sustained lower the k-th smallest `down` in the
//! down window, with `k = ceil(fraction × n)`: "at least `fraction` of evaluations wanted at
//! least (at most) this many". A direction whose window is not yet covered by history (after a
//! restart, or after a gap longer than the window) does not move. A sustained lower is never
//! below this evaluation's `up` nor the sustained raise, so it cannot set up the next raise; for
//! a fixed history the answer is still a fixed point (property-tested). `maxStep` only shortens
//! a step, never reverses one, and `min`/`max` clamp last.

use std::fmt::Write as _;

use serde::Serialize;

use super::answer::{Answer, RefusalKind};
use super::input_notes::InputNotes;
use super::observation::{fmt_limit, fmt_value, read, QueryContext, Reading, StaleText};
use super::valid_when::CurrentReplicas;
use crate::clock::Millis;
use crate::config::MetricKind;
use crate::evidence::{Evidence, MAX_REPLICA_VALUE};

/// `ceil(load / per_replica)`: the smallest `n` with `n × per_replica ≥ load`, evaluated in
/// floating point so that the comparisons the rule relies on hold exactly. `None` when the
/// answer would be implausibly large (a unit error, not a workload) or the input is not a
/// finite non-negative number.
pub fn replicas_for(load: f64, per_replica: f64) -> Option<u64> {
    if !(load.is_finite() && load >= 0.0 && per_replica.is_finite() && per_replica > 0.0) {
        return None;
    }
    if load == 0.0 {
        return Some(0);
    }
    let estimate = (load / per_replica).ceil();
    if estimate.is_nan() || estimate > MAX_REPLICA_VALUE {
        return None;
    }
    // The quotient is rounded, so nudge `n` until it is the least one whose product covers the
    // load. At these magnitudes the estimate is off by at most one either way.
    let mut n = estimate;
    while n > 0.0 && (n - 1.0) * per_replica >= load {
        n -= 1.0;
    }
    while n * per_replica < load {
        n += 1.0;
    }
    Some(n as u64)
}

/// Which way the rule went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Branch {
    Up,
    Down,
    Hold,
}

/// The core rule, for `up ≤ down` (see the module documentation).
pub fn hysteresis(up: u64, down: u64, current: u64) -> (u64, Branch) {
    if up > current {
        (up, Branch::Up)
    } else if down < current {
        (down, Branch::Down)
    } else {
        (current, Branch::Hold)
    }
}

/// One recorded evaluation: when, and the load total it saw. Times here are on the monotonic
/// clock (`Now::mono`): windows are durations, and a step of the wall clock must not cover one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    pub at_ms: Millis,
    pub load: f64,
}

/// The evaluations the sustain windows look at.
#[derive(Clone, Copy, Debug)]
pub struct History<'a> {
    /// When this unbroken run of evaluations began: a window is covered once it lies after this.
    pub since_ms: Millis,
    /// Oldest first, including the evaluation being decided.
    pub evaluations: &'a [Evaluation],
}

/// The bounded evaluation history of one (metric, namespace, selector), kept by the adapter.
#[derive(Clone, Debug, Default)]
pub struct EvaluationLog {
    since_ms: Option<Millis>,
    last_data_ms: Option<Millis>,
    evaluations: Vec<Evaluation>,
}

impl EvaluationLog {
    /// Far more than any sane window holds at one evaluation per scrape; the cap only stops a
    /// flood of distinct samples from growing memory.
    pub const MAX_EVALUATIONS: usize = 2048;

    /// Record an evaluation of the load seen at `data_ms`. Repeated queries over the same data
    /// (several HPAs, `/status`) are one evaluation, so the fraction counts data, not callers.
    /// A gap longer than `retain_ms` breaks the run: the windows must fill again.
    pub fn record(&mut self, now: Millis, data_ms: Millis, load: f64, retain_ms: Millis) {
        if self
            .evaluations
            .last()
            .is_some_and(|e| now - e.at_ms > retain_ms)
        {
            self.evaluations.clear();
            self.since_ms = None;
            self.last_data_ms = None;
        }
        self.evaluations.retain(|e| now - e.at_ms <= retain_ms);
        if self.last_data_ms == Some(data_ms) && !self.evaluations.is_empty() {
            return;
        }
        self.since_ms.get_or_insert(now);
        self.last_data_ms = Some(data_ms);
        self.evaluations.push(Evaluation { at_ms: now, load });
        if self.evaluations.len() > Self::MAX_EVALUATIONS {
            let excess = self.evaluations.len() - Self::MAX_EVALUATIONS;
            self.evaluations.drain(..excess);
        }
    }

    pub fn history(&self, now: Millis) -> History<'_> {
        History {
            since_ms: self.since_ms.unwrap_or(now),
            evaluations: &self.evaluations,
        }
    }

    pub fn last_at(&self) -> Option<Millis> {
        self.evaluations.last().map(|e| e.at_ms)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SustainRule {
    pub up_ms: Option<Millis>,
    pub down_ms: Option<Millis>,
    pub fraction: f64,
}

/// A threshold metric's configuration, in the units the rule uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThresholdRule {
    pub up_per_replica: f64,
    pub down_per_replica: f64,
    pub sustain: Option<SustainRule>,
    pub max_step: Option<u64>,
    pub min: u64,
    pub max: Option<u64>,
}

/// Without a configured `min` the answer never drops below 1. The load is measured by the
/// workload's own pods: at zero replicas nothing exports it, the total becomes unknown, and
/// nothing would ever scale the workload up again. Serving 0 also only means something to an
/// HPA with the alpha `HPAScaleToZero` gate (docs/hpa-behaviour.md §1.7), so `min: 0` is an explicit
/// opt-in. The HPA's `minReplicas` bounds the result as well.
pub const DEFAULT_MIN: u64 = 1;

impl ThresholdRule {
    /// How long the history must reach back for the longest window.
    pub fn retain_ms(&self) -> Millis {
        self.sustain
            .map(|s| s.up_ms.unwrap_or(0).max(s.down_ms.unwrap_or(0)))
            .unwrap_or(0)
    }

    /// Needs a history at all.
    pub fn sustained(&self) -> bool {
        self.retain_ms() > 0
    }

    /// Decide for load `load` (the total, including this evaluation in `history` when
    /// sustained) and current count `current`.
    pub fn decide(
        &self,
        load: f64,
        current: u64,
        history: Option<&History<'_>>,
        now: Millis,
    ) -> Result<Decision, String> {
        let per = |t: f64| {
            replicas_for(load, t).ok_or_else(|| {
                format!(
                    "load {} over {} per replica is not a plausible replica count",
                    fmt_value(load),
                    fmt_value(t)
                )
            })
        };
        let up = per(self.up_per_replica)?;
        let down = per(self.down_per_replica)?;
        let mut notes = Vec::new();
        let (raise_to, lower_to) = match (self.sustain, history) {
            (Some(s), Some(h)) => {
                let t_up = self.up_per_replica;
                let t_down = self.down_per_replica;
                let raise = match s.up_ms {
                    None => Some(up),
                    Some(w) => sustained(
                        h,
                        now,
                        w,
                        s.fraction,
                        Direction::Up,
                        |l| replicas_for(l, t_up),
                        &mut notes,
                    ),
                };
                let lower = match s.down_ms {
                    None => Some(down),
                    Some(w) => sustained(
                        h,
                        now,
                        w,
                        s.fraction,
                        Direction::Down,
                        |l| replicas_for(l, t_down),
                        &mut notes,
                    ),
                };
                (raise, lower)
            }
            _ => (Some(up), Some(down)),
        };
        // Never lower below what this evaluation's load needs at T_up, nor below a sustained
        // raise: either would make the next evaluation want to go straight back up.
        let keep = up.max(raise_to.unwrap_or(0));
        let (raw, branch) = match (raise_to, lower_to) {
            (Some(u), _) if u > current => (u, Branch::Up),
            (_, Some(d)) if d.max(keep) < current => (d.max(keep), Branch::Down),
            _ => (current, Branch::Hold),
        };
        let mut value = raw;
        if let Some(step) = self.max_step {
            let limited = match branch {
                Branch::Up => raw.min(current.saturating_add(step)),
                Branch::Down => raw.max(current.saturating_sub(step)),
                Branch::Hold => raw,
            };
            if limited != raw {
                notes.push(format!("maxStep {step} limits {raw} to {limited}"));
                value = limited;
            }
        }
        let max = self.max.unwrap_or(u64::MAX).max(self.min);
        let bounded = value.clamp(self.min, max);
        if bounded != value {
            notes.push(if bounded > value {
                format!("min {} raises {value} to {bounded}", self.min)
            } else {
                format!("max {max} lowers {value} to {bounded}")
            });
        }
        Ok(Decision {
            value: bounded,
            raw,
            branch,
            up,
            down,
            raise_to,
            lower_to,
            notes,
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Up,
    Down,
}

/// The value held in at least `fraction` of the evaluations in the window, or `None` while the
/// window is not covered by history.
fn sustained(
    h: &History<'_>,
    now: Millis,
    window_ms: Millis,
    fraction: f64,
    direction: Direction,
    wanted: impl Fn(f64) -> Option<u64>,
    notes: &mut Vec<String>,
) -> Option<u64> {
    let name = match direction {
        Direction::Up => "up",
        Direction::Down => "down",
    };
    if now - h.since_ms < window_ms {
        notes.push(format!(
            "sustain.{name} {} not yet covered ({} of history): {name} blocked",
            fmt_limit(window_ms),
            fmt_limit(now - h.since_ms)
        ));
        return None;
    }
    let mut values: Vec<u64> = h
        .evaluations
        .iter()
        .filter(|e| e.at_ms <= now && now - e.at_ms < window_ms)
        .filter_map(|e| wanted(e.load))
        .collect();
    if values.is_empty() {
        notes.push(format!(
            "sustain.{name}: no evaluations in the last {}",
            fmt_limit(window_ms)
        ));
        return None;
    }
    let n = values.len();
    let k = ((fraction * n as f64).ceil() as usize).clamp(1, n);
    match direction {
        Direction::Up => values.sort_unstable_by(|a, b| b.cmp(a)),
        Direction::Down => values.sort_unstable(),
    }
    let v = values[k - 1];
    notes.push(format!(
        "sustain.{name} over {}: {k} of {n} evaluations want {} {v}",
        fmt_limit(window_ms),
        match direction {
            Direction::Up => "at least",
            Direction::Down => "at most",
        }
    ));
    Some(v)
}

/// The outcome of the rule and how it got there.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub value: u64,
    /// The rule's answer before maxStep and the min/max bounds.
    pub raw: u64,
    pub branch: Branch,
    /// `ceil(V/T_up)` and `ceil(V/T_down)` for this evaluation.
    pub up: u64,
    pub down: u64,
    /// After sustain: the raise and lower candidates (`None` while a window is filling).
    pub raise_to: Option<u64>,
    pub lower_to: Option<u64>,
    /// Sustain, maxStep and bound notes, for the explanation.
    pub notes: Vec<String>,
}

/// A load total is unknown when any series of it is.
#[derive(Clone, Debug, PartialEq)]
pub enum LoadState {
    Known(f64),
    /// Some series are stale, invalid or not scraped yet: the total is at least `lower`.
    Partial {
        lower: f64,
        why: Vec<String>,
    },
    /// No fresh valid series at all.
    Unknown {
        refusal: RefusalKind,
        reason: String,
    },
}

#[derive(Clone, Debug)]
pub struct LoadTotal {
    pub state: LoadState,
    pub inputs: InputNotes,
    /// Newest sample time among the summed series.
    pub newest_ms: Millis,
    pub fresh_series: usize,
    /// Distinct targets with a fresh sample: the stand-in for the current replica count when
    /// neither Kubernetes nor `currentSeries` says it.
    pub live_targets: usize,
}

fn load_invalid_reason(v: f64) -> Option<&'static str> {
    if v.is_nan() {
        Some("NaN")
    } else if v.is_infinite() {
        Some("infinite")
    } else if v < 0.0 {
        Some("negative")
    } else {
        None
    }
}

/// The load total: the sum of the fresh, valid series in scope. Summing is right here, unlike
/// for recommendations (docs/hpa-behaviour.md §4.1), because each pod reports its own share of the load.
/// Pair totals with per-replica thresholds (§4.2): a per-pod average must not be summed.
pub fn load_total(q: &QueryContext<'_>, ev: &Evidence) -> LoadTotal {
    let mut sum = 0.0;
    let mut fresh = 0usize;
    let mut newest = Millis::MIN;
    let mut live: Vec<&str> = Vec::new();
    let mut why = Vec::new();
    let mut stale = 0usize;
    let mut invalid = 0usize;
    let mut inputs = InputNotes::default();
    for o in &ev.observations {
        let status = match read(q, o, load_invalid_reason) {
            Reading::Gone => continue,
            Reading::Stale { .. } => {
                stale += 1;
                why.push(format!(
                    "{} from {} is {}",
                    o.id.series,
                    o.id.target,
                    StaleText(q, o)
                ));
                "stale".to_string()
            }
            Reading::Invalid(reason) => {
                invalid += 1;
                why.push(format!(
                    "{} from {} is {} ({reason})",
                    o.id.series,
                    o.id.target,
                    fmt_value(o.value)
                ));
                format!("invalid: {reason}")
            }
            Reading::Fresh(value) => {
                sum += value;
                fresh += 1;
                newest = newest.max(o.observed_at_ms);
                if !live.contains(&&*o.id.target.0) {
                    live.push(&o.id.target.0);
                }
                "fresh".to_string()
            }
        };
        let used = status == "fresh";
        inputs.push(q, o, status, used);
    }
    for t in &ev.unknown_targets {
        why.push(format!(
            "{} has never been scraped successfully{}",
            t.target,
            t.last_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
    }
    let state = if fresh > 0 {
        if why.is_empty() {
            LoadState::Known(sum)
        } else {
            LoadState::Partial { lower: sum, why }
        }
    } else {
        let present = stale + invalid;
        let (refusal, reason) = if present == 0 && ev.unknown_targets.is_empty() {
            (
                RefusalKind::NoMatch,
                format!("no series of {} match {}", q.searched_names(), q.scope),
            )
        } else if present == 0 {
            (
                RefusalKind::Partial,
                format!(
                    "no series of {} match {} yet: {}",
                    q.searched_names(),
                    q.scope,
                    why.join("; ")
                ),
            )
        } else if stale > 0 {
            (
                RefusalKind::Stale,
                format!(
                    "no fresh series of {} match {}: {}",
                    q.series_names(),
                    q.scope,
                    why.join("; ")
                ),
            )
        } else {
            (
                RefusalKind::Invalid,
                format!(
                    "every series of {} matching {} is invalid: {}",
                    q.series_names(),
                    q.scope,
                    why.join("; ")
                ),
            )
        };
        LoadState::Unknown { refusal, reason }
    };
    LoadTotal {
        state,
        inputs,
        newest_ms: if newest == Millis::MIN {
            q.now.wall
        } else {
            newest
        },
        fresh_series: fresh,
        live_targets: live.len(),
    }
}

/// The current count from the live targets: each pod exports its own load series, so the
/// targets with a fresh sample are the running replicas.
pub fn current_from_live_targets(load: &LoadTotal) -> Result<CurrentReplicas, String> {
    if load.live_targets == 0 {
        Err("no target in scope has a fresh sample".into())
    } else {
        Ok(CurrentReplicas {
            value: load.live_targets as u64,
            source: "live targets in scope (no Kubernetes discovery or currentSeries)".into(),
        })
    }
}

const RULE: &str =
    "threshold: ceil(V/upPerReplica) if above current, ceil(V/downPerReplica) if below, else hold";

/// The served answer for a threshold metric.
pub fn threshold(
    q: &QueryContext<'_>,
    rule: &ThresholdRule,
    load: LoadTotal,
    current: Result<CurrentReplicas, String>,
    current_inputs: InputNotes,
    history: Option<&History<'_>>,
) -> Answer {
    let kind = MetricKind::Threshold;
    let thresholds = format!(
        "upPerReplica {}, downPerReplica {}",
        fmt_value(rule.up_per_replica),
        fmt_value(rule.down_per_replica)
    );
    let mut inputs = load.inputs;
    inputs.append(current_inputs);
    let mut answer = match (&load.state, current) {
        (LoadState::Unknown { refusal, reason }, _) => {
            Answer::refused(q.metric, kind, *refusal, None, RULE, reason.clone())
        }
        (_, Err(why)) => Answer::refused(
            q.metric,
            kind,
            RefusalKind::Partial,
            None,
            RULE,
            format!(
                "the current replica count is unknown ({why}): the stable band has no reference"
            ),
        ),
        (LoadState::Known(v), Ok(c)) => match rule.decide(*v, c.value, history, q.now.mono) {
            Err(why) => Answer::refused(q.metric, kind, RefusalKind::Invalid, None, RULE, why),
            Ok(d) => {
                let reason = explain(q, rule, &thresholds, *v, &c, &d, load.fresh_series);
                Answer::valued(q.metric, kind, d.value, load.newest_ms, RULE, reason)
            }
        },
        (LoadState::Partial { lower, why }, Ok(c)) => {
            // The total is at least `lower`: raising on it is safe, lowering is not.
            let raise_allowed = rule.sustain.is_none_or(|s| s.up_ms.is_none());
            match rule.decide(*lower, c.value, None, q.now.mono) {
                Err(e) => Answer::refused(q.metric, kind, RefusalKind::Invalid, None, RULE, e),
                Ok(d) => {
                    let (value, verdict, effect) = if d.branch == Branch::Up && raise_allowed {
                        (
                            d.value,
                            "scale up",
                            format!(
                                "the known part alone needs up = ceil({}/{}) = {} > current {}: scale up to {}",
                                fmt_value(*lower),
                                fmt_value(rule.up_per_replica),
                                d.up,
                                c.value,
                                d.value
                            ),
                        )
                    } else {
                        let held = c
                            .value
                            .clamp(rule.min, rule.max.unwrap_or(u64::MAX).max(rule.min));
                        (
                            held,
                            "hold",
                            format!("holding at current {} (scale-in blocked)", c.value),
                        )
                    };
                    Answer::valued(
                        q.metric,
                        kind,
                        value,
                        load.newest_ms,
                        RULE,
                        format!(
                            "{verdict}: the load total of {} for {} is unknown ({}); the known part is {}, current {} from {}; {effect}",
                            q.series_names(),
                            q.scope,
                            why.join("; "),
                            fmt_value(*lower),
                            c.value,
                            c.source
                        ),
                    )
                }
            }
        }
    };
    inputs.into_answer(&mut answer);
    answer
}

fn explain(
    q: &QueryContext<'_>,
    rule: &ThresholdRule,
    thresholds: &str,
    v: f64,
    c: &CurrentReplicas,
    d: &Decision,
    fresh: usize,
) -> String {
    let verdict = match d.branch {
        Branch::Up => format!("scale up: {} > current {}", d.raw, c.value),
        Branch::Down => format!("scale down: {} < current {}", d.raw, c.value),
        Branch::Hold => format!(
            "hold: up {} <= current {} <= down {} (stable band{})",
            d.raise_to.map_or("-".to_string(), |u| u.to_string()),
            c.value,
            d.lower_to.map_or("-".to_string(), |l| l.to_string()),
            if d.raise_to == Some(d.up) && d.lower_to == Some(d.down) {
                ""
            } else {
                ", after sustain"
            }
        ),
    };
    let mut s = format!(
        "{verdict}; V = {} (sum of {fresh} fresh series of {} matching {}); current {} from {}; {thresholds}: up = ceil(V/{}) = {}, down = ceil(V/{}) = {}",
        fmt_value(v),
        q.series_names(),
        q.scope,
        c.value,
        c.source,
        fmt_value(rule.up_per_replica),
        d.up,
        fmt_value(rule.down_per_replica),
        d.down
    );
    for n in &d.notes {
        let _ = write!(s, "; {n}");
    }
    let _ = write!(s, "; answer {}", d.value);
    s
}

#[cfg(test)]
mod tests;
