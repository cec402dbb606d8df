//! The run's results: one row per HPA sync, violations, convergence episodes, expectations.

use super::*;

/// One row of the table: one HPA sync.
#[derive(Clone, Debug)]
pub struct SyncRow {
    pub t: Millis,
    pub spec_replicas: i32,
    pub status_replicas: i32,
    pub ready_pods: i32,
    /// Max over live controllers' valid values (ground truth).
    pub truth_recommendation: Option<i64>,
    /// Highest index held by an existing pod (ground truth).
    pub truth_floor: i64,
    /// `max(recommendation, floor)` clamped to [min, max].
    pub truth_target: Option<i64>,
    /// Inputs needed for scale-in that the adapter could not know (ground truth), and refused
    /// answers.
    pub unknown: Vec<String>,
    /// Per HPA metric: the summed value or the error, as the HPA got it.
    pub answers: Vec<String>,
    pub proposal: Option<i32>,
    pub replicas: i32,
    pub decision: String,
    /// With `load:`: the total the pods last exported (ground truth).
    pub load: Option<f64>,
    /// With a threshold metric: `[ceil(V/upPerReplica), ceil(V/downPerReplica)]` of that total.
    pub band: Option<(i64, i64)>,
    /// The first metric's value as the HPA got it.
    pub served: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct Violation {
    pub invariant: &'static str,
    pub t: Millis,
    pub message: String,
}

#[derive(Clone, Debug)]
pub enum ConvergenceResult {
    Reached {
        lag: Millis,
    },
    /// Replicas stayed put because the target is inside the HPA's tolerance band.
    HeldWithinTolerance,
    /// Inputs went unhealthy or the target changed before the replicas got there.
    Interrupted {
        after: Millis,
    },
    /// Still on the way when the scenario ended, within its budget.
    Unfinished,
    /// The budget passed with healthy inputs and an unchanged target.
    Missed {
        budget: Millis,
    },
}

#[derive(Clone, Debug)]
pub struct Convergence {
    pub start: Millis,
    pub from: i32,
    pub target: i64,
    pub budget: Option<Millis>,
    pub result: ConvergenceResult,
}

#[derive(Clone, Debug)]
pub struct ExpectationResult {
    pub expectation: String,
    pub ok: bool,
    pub measured: String,
}

/// A fault period for the plot and the summary.
#[derive(Clone, Debug)]
pub struct FaultPeriod {
    pub from: Millis,
    pub to: Millis,
    pub label: String,
}

#[derive(Clone, Debug)]
pub struct Report {
    pub name: String,
    pub description: String,
    pub duration: Millis,
    pub metric_names: Vec<String>,
    pub initial_replicas: i32,
    pub rows: Vec<SyncRow>,
    pub violations: Vec<Violation>,
    pub convergences: Vec<Convergence>,
    pub expectations: Vec<ExpectationResult>,
    pub faults: Vec<FaultPeriod>,
    pub restarts: Vec<Millis>,
    pub scrape_rounds: u64,
    pub https_requests: u64,
    /// Lines about a threshold load scenario: reversals, overload lag, plateaus.
    pub threshold_notes: Vec<String>,
    /// Whether the threshold invariants were checked (a `load:` block with a threshold metric).
    pub threshold_checked: bool,
    /// Whether the scale-from-zero invariant was checked (`minReplicas: 0`).
    pub zero_checked: bool,
    /// Whether pods were deleted by a ReplicaSet's choice (a Deployment): the holder-deleted
    /// invariant.
    pub deployment_checked: bool,
    /// Every pod a Deployment's ReplicaSet deleted, and why.
    pub pod_notes: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.expectations.iter().all(|e| e.ok)
    }
}

pub(super) fn opt(v: Option<i32>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

pub(super) fn decision_text(d: &Decision) -> String {
    match d {
        Decision::ScalingDisabled => "ScalingDisabled".into(),
        Decision::AboveMaxReplicas => "AboveMaxReplicas".into(),
        Decision::BelowMinReplicas => "BelowMinReplicas".into(),
        Decision::SelectorRefused { reason } => reason.to_string(),
        Decision::AllMetricsInvalid { invalid } => format!("AllMetricsInvalid({invalid})"),
        Decision::ScaleDownBlockedByInvalidMetric { invalid, proposed } => {
            format!("ScaleDownBlocked(invalid={invalid},proposed={proposed})")
        }
        Decision::Normalized {
            invalid,
            stabilization,
            limit,
        } => {
            let mut s = format!("{stabilization:?}/{}", limit.reason());
            if *invalid > 0 {
                let _ = write!(s, " invalid={invalid}");
            }
            s
        }
    }
}

/// `503 is stale` from `503: hpa_target_replicas is stale: ...`.
pub(super) fn short_error(e: &str) -> String {
    // The HPA's wrapping of a failed GET (docs/hpa-behaviour.md §6.2) says nothing the table
    // needs: show the adapter's status behind it.
    if let Some((_, inner)) = e
        .strip_prefix("unable to fetch metrics from ")
        .and_then(|r| r.split_once(" API: "))
    {
        return short_error(inner);
    }
    if let Some((code, rest)) = e.split_once(": ") {
        if code.len() == 3 && code.chars().all(|c| c.is_ascii_digit()) {
            let head = rest.split(':').next().unwrap_or(rest);
            let verb = head.split_once(' ').map(|(_, v)| v).unwrap_or(head);
            return format!("{code} {verb}");
        }
    }
    let mut s: String = e.chars().take(40).collect();
    if e.chars().count() > 40 {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_errors() {
        assert_eq!(
            short_error("503: hpa_target_replicas is stale: the newest is 40s old"),
            "503 is stale"
        );
        assert_eq!(
            short_error("unable to fetch metrics from custom metrics API: 503: hpa_target_replicas is stale: x"),
            "503 is stale"
        );
    }
}
