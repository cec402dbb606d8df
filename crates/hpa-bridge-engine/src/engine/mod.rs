//! The engine: configuration, the active evidence source and the cluster's facts, turned into
//! answers by `policy`. `serve`, `simulate` and `bench` assemble it the same way, through
//! `EngineBuilder`; only the clock and what drives the scrape rounds differ.

mod adapter;
mod builder;
mod evaluation;
mod explainer;
#[cfg(test)]
mod fixtures;
pub mod history;
mod metric_query;
mod object_scope;
mod object_selectors;
mod provider;
mod query_key;
mod reusing;
mod static_targets;
mod status;
#[cfg(test)]
mod tests;

pub use adapter::Adapter;
pub use builder::{Assembly, EngineBuilder, DEFAULT_SCRAPE_CONCURRENCY};
pub use explainer::{Explainer, HistoryView, StatusSection};
pub use metric_query::{MetricQuery, Served};
pub use object_scope::{ObjectKind, ObjectRef};
pub use provider::{Answered, Engine, MetricsProvider, QueryError, Version};
pub use reusing::{Reusing, REUSE_MS as ANSWER_REUSE_MS};
pub use static_targets::{static_store, static_target_id, static_targets};
pub use status::{StatusQuery, StatusQueryError, DEFAULT_STATUS_LIMIT, MAX_STATUS_LIMIT};
