//! Selectors and generators for tests, here and in the crates above: a parsed selector, one
//! requirement, and proptest strategies for valid values and requirements.

use proptest::prelude::*;

use super::{LabelSelector, Operator, Requirement};

pub fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement {
        key: key.into(),
        operator,
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

/// A selector of these requirements as given, without the checks `from_requirements` makes
/// (for tests of what the layers above do with selectors no parse would produce).
pub fn unchecked(requirements: Vec<Requirement>) -> LabelSelector {
    LabelSelector::unchecked(requirements)
}

pub fn parse_ok(text: &str) -> LabelSelector {
    LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text:?} should parse: {e}"))
}

pub fn valid_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?",
        Just("in".to_string()),
        Just("notin".to_string()),
    ]
}

pub fn valid_value() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), valid_name(),]
}

pub fn requirement_from(
    key: impl Strategy<Value = String>,
    value: impl Strategy<Value = String>,
) -> impl Strategy<Value = Requirement> {
    let ops = prop_oneof![
        Just(Operator::Equals),
        Just(Operator::NotEquals),
        Just(Operator::In),
        Just(Operator::NotIn),
        Just(Operator::Exists),
        Just(Operator::DoesNotExist),
    ];
    (key, ops, prop::collection::vec(value, 1..4)).prop_map(|(key, operator, values)| {
        let values = match operator {
            Operator::Equals | Operator::NotEquals => vec![values[0].clone()],
            Operator::In | Operator::NotIn => values,
            Operator::Exists | Operator::DoesNotExist => vec![],
        };
        Requirement::validated(&key, operator, values).expect("generator yields valid")
    })
}
