//! The engine: configuration, the active evidence source and the cluster's facts, turned into
//! answers by `policy`. `serve`, `simulate` and `bench` assemble it the same way, through
//! `EngineBuilder`; only the clock and what drives the scrape rounds differ.

mod adapter;
mod builder;
#[cfg(test)]
mod fixtures;
pub mod history;
mod object_scope;
mod query_key;
#[cfg(test)]
mod sample_age_tests;
mod status;

pub use adapter::{
    static_target_id, static_targets, Adapter, HistoryView, QueryError, Reusable, Version,
};
pub use builder::{Engine, EngineBuilder, DEFAULT_SCRAPE_CONCURRENCY};
pub use object_scope::{ObjectKind, ObjectRef};
pub use status::{StatusQuery, StatusQueryError, DEFAULT_STATUS_LIMIT, MAX_STATUS_LIMIT};
