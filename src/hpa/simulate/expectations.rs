//! What a scenario expects of the run (replicas windows, reaching a count) and how each
//! expectation reads.

use super::*;

/// An expected outcome, written as a one-key map (`- finalReplicas: 3`). Any failed
/// expectation fails the run.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "ExpectationSpec")]
pub enum Expectation {
    /// `spec.replicas` after the last sync.
    FinalReplicas(i32),
    /// Replicas after every sync are at least this.
    NeverBelow(i32),
    /// Replicas after every sync are at most this.
    NeverAbove(i32),
    /// Replicas after every sync in [from, to] stay within [min, max].
    Replicas(ReplicasWindow),
    /// Some sync at or before `by` leaves exactly `replicas`.
    Reaches(Reaches),
    /// Every completed convergence took at most this long.
    MaxConvergenceLag(HumanDuration),
    /// Replicas change direction (up then down, or down then up) at most this many times.
    MaxReversals(u32),
    /// Replicas never fall between consecutive syncs in [from, to].
    NoDecrease(ReplicasWindow),
    /// With a `load:` block and a threshold metric: at every sync the replicas cover the clean
    /// load of at most this long ago at `upPerReplica` (see [`Runner::overload_lag`]).
    MaxOverloadLag(HumanDuration),
}

/// The YAML form of [`Expectation`]: yaml_serde reads externally tagged enums only from YAML
/// tags, so the one-key map is read as a struct with exactly one field set.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ExpectationSpec {
    #[serde(default)]
    pub(super) final_replicas: Option<i32>,
    #[serde(default)]
    pub(super) never_below: Option<i32>,
    #[serde(default)]
    pub(super) never_above: Option<i32>,
    #[serde(default)]
    pub(super) replicas: Option<ReplicasWindow>,
    #[serde(default)]
    pub(super) reaches: Option<Reaches>,
    #[serde(default)]
    pub(super) max_convergence_lag: Option<HumanDuration>,
    #[serde(default)]
    pub(super) max_reversals: Option<u32>,
    #[serde(default)]
    pub(super) no_decrease: Option<ReplicasWindow>,
    #[serde(default)]
    pub(super) max_overload_lag: Option<HumanDuration>,
}

impl TryFrom<ExpectationSpec> for Expectation {
    type Error = String;

    fn try_from(e: ExpectationSpec) -> Result<Self, String> {
        let mut found = Vec::new();
        found.extend(e.final_replicas.map(Expectation::FinalReplicas));
        found.extend(e.never_below.map(Expectation::NeverBelow));
        found.extend(e.never_above.map(Expectation::NeverAbove));
        found.extend(e.replicas.map(Expectation::Replicas));
        found.extend(e.reaches.map(Expectation::Reaches));
        found.extend(e.max_convergence_lag.map(Expectation::MaxConvergenceLag));
        found.extend(e.max_reversals.map(Expectation::MaxReversals));
        found.extend(e.no_decrease.map(Expectation::NoDecrease));
        found.extend(e.max_overload_lag.map(Expectation::MaxOverloadLag));
        match found.len() {
            1 => Ok(found.remove(0)),
            n => Err(format!(
                "each expectation is a map with exactly one key (finalReplicas, neverBelow, neverAbove, replicas, reaches, maxConvergenceLag, maxReversals, noDecrease, maxOverloadLag); found {n}"
            )),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplicasWindow {
    #[serde(default)]
    pub from: Option<HumanDuration>,
    #[serde(default)]
    pub to: Option<HumanDuration>,
    #[serde(default)]
    pub min: Option<i32>,
    #[serde(default)]
    pub max: Option<i32>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Reaches {
    pub replicas: i32,
    pub by: HumanDuration,
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expectation::FinalReplicas(n) => write!(f, "finalReplicas {n}"),
            Expectation::NeverBelow(n) => write!(f, "neverBelow {n}"),
            Expectation::NeverAbove(n) => write!(f, "neverAbove {n}"),
            Expectation::Replicas(w) => {
                write!(f, "replicas")?;
                if let Some(m) = w.min {
                    write!(f, " >= {m}")?;
                }
                if let Some(m) = w.max {
                    write!(f, " <= {m}")?;
                }
                write!(
                    f,
                    " from {} to {}",
                    w.from
                        .map(|d| fmt_t(ms(d)))
                        .unwrap_or_else(|| "start".into()),
                    w.to.map(|d| fmt_t(ms(d))).unwrap_or_else(|| "end".into())
                )
            }
            Expectation::Reaches(r) => write!(f, "reaches {} by {}", r.replicas, fmt_t(ms(r.by))),
            Expectation::MaxConvergenceLag(d) => write!(f, "maxConvergenceLag {}", fmt_t(ms(*d))),
            Expectation::MaxReversals(n) => write!(f, "maxReversals {n}"),
            Expectation::NoDecrease(w) => write!(
                f,
                "noDecrease from {} to {}",
                w.from
                    .map(|d| fmt_t(ms(d)))
                    .unwrap_or_else(|| "start".into()),
                w.to.map(|d| fmt_t(ms(d))).unwrap_or_else(|| "end".into())
            ),
            Expectation::MaxOverloadLag(d) => write!(f, "maxOverloadLag {}", fmt_t(ms(*d))),
        }
    }
}
