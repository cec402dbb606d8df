//! Kubernetes label selectors. PLACEHOLDER: the real implementation replaces this.

use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operator {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {message}")]
pub struct SelectorError {
    pub selector: String,
    pub message: String,
}

/// Anything labels can be looked up in.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelSelector {
    pub fn everything() -> Self {
        LabelSelector::default()
    }
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.trim().is_empty() {
            return Ok(Self::everything());
        }
        Err(SelectorError {
            selector: text.into(),
            message: "not implemented".into(),
        })
    }
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let _ = labels;
        self.requirements.is_empty()
    }
    pub fn equality_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    pub fn promql_matchers(&self) -> Vec<String> {
        Vec::new()
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "")
    }
}
