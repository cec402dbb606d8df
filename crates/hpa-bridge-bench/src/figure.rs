//! One measured figure of the bench (a row of BENCHMARKS.md's table) and the goal on its ratio
//! to the same run's baseline.

use serde::Serialize;

#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", tag = "op", content = "value")]
pub enum Goal {
    AtLeast(f64),
    AtMost(f64),
    Below(f64),
}

impl Goal {
    pub fn met(self, ratio: f64) -> bool {
        match self {
            Goal::AtLeast(g) => ratio >= g,
            Goal::AtMost(g) => ratio <= g,
            Goal::Below(g) => ratio < g,
        }
    }

    pub(super) fn text(self) -> String {
        match self {
            Goal::AtLeast(g) => format!("≥ {g}"),
            Goal::AtMost(g) => format!("≤ {g}"),
            Goal::Below(g) => format!("< {g}"),
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figure {
    pub section: &'static str,
    pub name: String,
    pub unit: &'static str,
    /// The limit or baseline measured (or stated) alongside.
    pub baseline: Option<f64>,
    pub adapter: Option<f64>,
    /// adapter / baseline.
    pub ratio: Option<f64>,
    /// A goal on the ratio.
    pub goal: Option<Goal>,
    pub met: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Figure {
    pub(crate) fn new(section: &'static str, name: impl Into<String>, unit: &'static str) -> Self {
        Figure {
            section,
            name: name.into(),
            unit,
            baseline: None,
            adapter: None,
            ratio: None,
            goal: None,
            met: None,
            note: None,
        }
    }

    pub(crate) fn compare(mut self, baseline: f64, adapter: f64, goal: Option<Goal>) -> Self {
        let ratio = adapter / baseline;
        self.baseline = Some(baseline);
        self.adapter = Some(adapter);
        self.ratio = Some(ratio);
        self.goal = goal;
        self.met = goal.map(|g| g.met(ratio));
        self
    }

    pub(crate) fn value(mut self, adapter: f64) -> Self {
        self.adapter = Some(adapter);
        self
    }
}
