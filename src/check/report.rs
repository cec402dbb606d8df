//! The findings of one run, as a table or JSON, and the exit code.

use super::*;

/// The result of a check.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    #[serde(rename = "hpasChecked")]
    pub hpas_checked: usize,
    /// Documents read but not checked (not Kubernetes objects), each with where and why.
    pub skipped: Vec<String>,
}

impl Report {
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// 1 when any error-level finding exists, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.count(Severity::Error) > 0 {
            1
        } else {
            0
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "findings": self.findings,
            "skipped": self.skipped,
            "summary": {
                "hpasChecked": self.hpas_checked,
                "errors": self.count(Severity::Error),
                "warnings": self.count(Severity::Warning),
                "info": self.count(Severity::Info),
            }
        })
    }

    /// The human-readable table: one header line per finding, its explanation indented below.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for s in &self.skipped {
            let _ = writeln!(out, "skipped {s}");
        }
        if self.findings.is_empty() {
            let _ = writeln!(
                out,
                "no findings ({} HPA{} checked)",
                self.hpas_checked,
                if self.hpas_checked == 1 { "" } else { "s" }
            );
            return out;
        }
        let objects: Vec<String> = self.findings.iter().map(|f| f.object.to_string()).collect();
        let ow = objects
            .iter()
            .map(|o| o.len())
            .max()
            .unwrap_or(0)
            .max("OBJECT".len());
        let _ = writeln!(
            out,
            "{:<8} {:<6} {:<ow$} FIELD",
            "SEVERITY", "CODE", "OBJECT"
        );
        for (f, object) in self.findings.iter().zip(&objects) {
            let _ = writeln!(
                out,
                "{:<8} {:<6} {:<ow$} {}",
                f.severity.as_str(),
                f.code,
                object,
                f.field
            );
            let _ = writeln!(out, "    {}: {}", f.title, f.message);
            let _ = writeln!(out, "    why: {}", f.why);
            let _ = writeln!(out, "    fix: {}", f.fix);
            if let Some(s) = &f.source {
                let _ = writeln!(out, "    in:  {s}");
            }
            let _ = writeln!(out, "    see: {}", f.docs);
        }
        let _ = writeln!(
            out,
            "{} finding{}: {} error, {} warning, {} info ({} HPA{} checked)",
            self.findings.len(),
            if self.findings.len() == 1 { "" } else { "s" },
            self.count(Severity::Error),
            self.count(Severity::Warning),
            self.count(Severity::Info),
            self.hpas_checked,
            if self.hpas_checked == 1 { "" } else { "s" }
        );
        out
    }
}

/// Group findings by code (for tests and summaries).
pub fn codes(report: &Report) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for f in &report.findings {
        *m.entry(f.code).or_default() += 1;
    }
    m
}
