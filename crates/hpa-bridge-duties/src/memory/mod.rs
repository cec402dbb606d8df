//! The memory a restart must not forget (docs/unknown-input.md, "A restart does not forget"):
//! which targets carried which series and their last valid values, kept in a ConfigMap by the
//! one replica holding the memory Lease, and read by every replica at its start.
//!
//! Why a ConfigMap written by one replica rather than a peer's answer: the restart that matters
//! most is the only replica's (an eviction, a node drain, a rollout of a one-replica install),
//! and then no peer is left to ask. The writes are bounded: at most one per
//! `--memory-write-interval`, only when what is remembered changed, and never larger than
//! `MAX_BYTES`.

mod config_map;
mod keeper;

pub use config_map::{MemoryError, MemoryObject, MAX_BYTES};

/// The ConfigMap's and the Lease's name when the flags name none.
pub const DEFAULT_MEMORY_NAME: &str = "hpa-bridge-memory";
pub use keeper::{MemoryKeeper, MemoryTimings};
