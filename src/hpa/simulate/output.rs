//! The report as text: the sync table, violations, convergence and expectations.

use super::*;

impl Report {
    /// The per-sync table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let answer_width = self
            .rows
            .iter()
            .map(|r| r.answers.join(" | ").chars().count())
            .max()
            .unwrap_or(10)
            .max(self.metric_names.join(" | ").len());
        let _ = writeln!(
            out,
            "{:>7} {:>4} {:>6} {:>5} | {:>4} {:>5} {:>6} | {:<aw$} | {:>8} | {:>9} | {:<34} | unknown inputs",
            "time",
            "spec",
            "status",
            "ready",
            "rec",
            "floor",
            "target",
            self.metric_names.join(" | "),
            "proposal",
            "replicas",
            "decision",
            aw = answer_width
        );
        for r in &self.rows {
            let arrow = if r.replicas != r.spec_replicas {
                format!("{:>3} -> {:<2}", r.spec_replicas, r.replicas)
            } else {
                format!("{:>3}      ", r.replicas)
            };
            let _ = writeln!(
                out,
                "{:>7} {:>4} {:>6} {:>5} | {:>4} {:>5} {:>6} | {:<aw$} | {:>8} | {:>9} | {:<34} | {}",
                fmt_t(r.t),
                r.spec_replicas,
                r.status_replicas,
                r.ready_pods,
                r.truth_recommendation
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "-".into()),
                r.truth_floor,
                r.truth_target
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "-".into()),
                r.answers.join(" | "),
                opt(r.proposal),
                arrow,
                r.decision,
                if r.unknown.is_empty() {
                    "-".to_string()
                } else {
                    r.unknown.join("; ")
                },
                aw = answer_width
            );
        }
        out
    }

    /// The outcome lines: summary, convergence, invariants, expectations, result.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let min = self.rows.iter().map(|r| r.replicas).min();
        let max = self.rows.iter().map(|r| r.replicas).max();
        let _ = writeln!(
            out,
            "scenario {}: {} syncs over {}, {} scrape rounds, {} HTTPS requests to the adapter",
            self.name,
            self.rows.len(),
            fmt_t(self.duration),
            self.scrape_rounds,
            self.https_requests
        );
        let _ = writeln!(
            out,
            "replicas: initial {} min {} max {} final {}",
            self.initial_replicas,
            opt(min),
            opt(max),
            opt(self.rows.last().map(|r| r.replicas))
        );
        for f in &self.faults {
            let _ = writeln!(out, "fault {}..{}: {}", fmt_t(f.from), fmt_t(f.to), f.label);
        }
        for r in &self.restarts {
            let _ = writeln!(out, "adapter restart at {}", fmt_t(*r));
        }
        for c in &self.convergences {
            if matches!(c.result, ConvergenceResult::Interrupted { .. }) {
                continue;
            }
            let what = match &c.result {
                ConvergenceResult::Reached { lag } => format!("reached, lag {}", fmt_t(*lag)),
                ConvergenceResult::HeldWithinTolerance => "held within tolerance".into(),
                ConvergenceResult::Interrupted { after } => {
                    format!("interrupted after {}", fmt_t(*after))
                }
                ConvergenceResult::Unfinished => "unfinished at end".into(),
                ConvergenceResult::Missed { budget } => format!("MISSED budget {}", fmt_t(*budget)),
            };
            let _ = writeln!(
                out,
                "convergence from {} at {} to target {}: {}{}",
                c.from,
                fmt_t(c.start),
                c.target,
                what,
                c.budget
                    .map(|b| format!(" (budget {})", fmt_t(b)))
                    .unwrap_or_default()
            );
        }
        for n in self.threshold_notes.iter().chain(&self.pod_notes) {
            let _ = writeln!(out, "{n}");
        }
        let mut invariants = vec![
            "below-floor",
            "decrease-on-unknown",
            "inflation",
            "convergence",
        ];
        if self.threshold_checked {
            invariants.extend(["flap", "plateau", "refusal"]);
        }
        if self.zero_checked {
            invariants.push("scale-from-zero");
        }
        if self.deployment_checked {
            invariants.push("holder-deleted");
        }
        for inv in invariants {
            let n = self
                .violations
                .iter()
                .filter(|v| v.invariant == inv)
                .count();
            let _ = writeln!(
                out,
                "invariant {inv}: {}",
                if n == 0 {
                    "ok".to_string()
                } else {
                    format!("VIOLATED {n} time(s)")
                }
            );
        }
        for v in &self.violations {
            let _ = writeln!(
                out,
                "VIOLATION {} at {}: {}",
                v.invariant,
                fmt_t(v.t),
                v.message
            );
        }
        for e in &self.expectations {
            let _ = writeln!(
                out,
                "expect {}: {} ({})",
                e.expectation,
                if e.ok { "ok" } else { "FAILED" },
                e.measured
            );
        }
        let _ = writeln!(
            out,
            "RESULT: {}",
            if self.passed() { "PASS" } else { "FAIL" }
        );
        out
    }
}
