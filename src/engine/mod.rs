//! The engine: configuration, the active evidence source and the cluster's facts, turned into
//! answers by `policy`. `serve`, `simulate` and `bench` assemble it the same way, through
//! `EngineBuilder`; only the clock and what drives the scrape rounds differ.

mod adapter;
mod builder;
mod object_scope;

pub use adapter::{static_target_id, static_targets, Adapter, QueryError};
pub use builder::{Engine, EngineBuilder};
pub use object_scope::{ObjectKind, ObjectRef};
