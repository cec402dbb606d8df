//! What a finding is: its severity, the rule it belongs to, the object and field it names.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One kind of finding: a stable code, a title, and its section in docs/check.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub code: &'static str,
    pub title: &'static str,
}

impl Rule {
    /// The GitHub anchor of the section `## HBnnn: Title` in docs/check.md.
    pub fn docs(&self) -> String {
        let mut anchor = self.code.to_ascii_lowercase();
        for word in self.title.split_whitespace() {
            anchor.push('-');
            anchor.extend(
                word.chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    .map(|c| c.to_ascii_lowercase()),
            );
        }
        format!("docs/check.md#{anchor}")
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ObjectRef {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub severity: Severity,
    pub title: &'static str,
    pub object: ObjectRef,
    pub field: String,
    /// What was found, with the figures.
    pub message: String,
    /// Why it matters.
    pub why: String,
    pub fix: String,
    pub docs: String,
    /// Where the object came from (`file (document N)`), for manifests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_follow_github_rules() {
        assert_eq!(
            rules::VALUE_PATH.docs(),
            "docs/check.md#hb001-absolute-metric-through-the-value-path"
        );
        assert_eq!(
            rules::SCALE_DOWN_WINDOW.docs(),
            "docs/check.md#hb010-scale-down-window-shorter-than-the-recommenders"
        );
    }

    #[test]
    fn docs_have_a_section_per_rule() {
        let docs = include_str!("../../docs/check.md");
        for r in rules::ALL {
            let heading = format!("## {}: {}", r.code, r.title);
            assert!(docs.contains(&heading), "docs/check.md lacks {heading:?}");
        }
    }
}
