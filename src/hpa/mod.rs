//! The HPA controller as an executable model, and the tools built on it.

pub mod model;
pub mod plot;
pub mod quantity;
pub mod simulate;
