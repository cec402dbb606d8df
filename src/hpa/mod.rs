//! The tools built on the HPA model (crates/hpa-bridge-hpa-model): the simulator and its plot.

pub mod plot;
pub mod simulate;
