//! `hpa-bridge simulate SCENARIO.yaml`: the real adapter against real loopback exporters, polled
//! over real HTTPS by the HPA model, on a simulated clock.
//!
//! What is real: the exporters (one HTTP server per pod or controller on loopback, whose pages
//! follow the scenario's timeline), the adapter (`Adapter`, `Store`, `Scraper::scrape_round`,
//! `policy`, `ApiHandler` behind `serve_api` with a self-signed certificate) and the HTTPS GETs
//! the HPA sends (docs/hpa-behaviour.md §1.2; for an Object metric the custom.metrics.k8s.io GET of
//! §6.2). What is simulated: time (a `ManualClock` the runner moves
//! from one scrape tick or HPA sync to the next), the HPA controller (`hpa_bridge_hpa_model`), and the
//! workload: a StatefulSet (pods 0..N-1 follow the HPA's decision) or a Deployment (ReplicaSets
//! that delete pods by the ReplicaSet's ranking, docs/hpa-behaviour.md §9).
//!
//! Every sync is checked against ground truth taken from the scenario, never from the adapter:
//! the floor the pods really hold, which inputs the adapter could not have known, and the
//! largest recommendation any controller really exported.
//!
//! One concern per file: `scenario` (the file format), `faults` (fault injection),
//! `expectations`, `truth` (ground truth from the scenario), `exporter` (loopback exporters),
//! `adapter_instance` (the real adapter and the HPA's HTTPS client), `deployment` (the
//! simulated Deployment), `run` (the loop),
//! `invariants` (what every sync is checked against), `report` and `output`.

mod adapter_instance;
mod deployment;
mod expectations;
mod exporter;
mod faults;
mod invariants;
mod output;
mod report;
mod run;
mod scenario;
mod truth;

use adapter_instance::*;
use deployment::*;
use exporter::*;
use invariants::*;
use truth::*;

pub use expectations::*;
pub use faults::*;
pub use report::*;
pub use run::*;
pub use scenario::*;

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use hpa_bridge_engine::engine::{Adapter, EngineBuilder, ObjectKind};
use hpa_bridge_hpa_model::quantity::Quantity;
use hpa_bridge_hpa_model::{
    ControllerConfig, Decision, DescribedObject, Hpa, HpaSpec, MetricInput, PolicyType,
    RankingGates, ResolvedRules, ScaleToZero, SelectPolicy, SyncInput, SyncOutcome, SYNC_PERIOD,
};
use hpa_bridge_rules::clock::{ManualClock, Millis};
use hpa_bridge_rules::cluster::Cluster;
use hpa_bridge_rules::config::{Config, HumanDuration};
use hpa_bridge_rules::evidence::{TargetId, MAX_REPLICA_VALUE};
use hpa_bridge_server::api::{server, ApiHandler};
use hpa_bridge_server::tls;
use hpa_bridge_sources::source::scrape::Scraper;
use hpa_bridge_store::store::{ScrapeTarget, StoreWriter, WorkloadRef};

/// An arbitrary wall-clock start for the simulated clock (2027-01-15T08:00:00Z).
const EPOCH_MS: Millis = 1_800_000_000_000;

#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("cannot read scenario {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("invalid scenario: {0}")]
    Yaml(String),
    #[error("invalid scenario: {key}: {message}")]
    Invalid { key: String, message: String },
    #[error("simulation failed: {0}")]
    Io(String),
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> SimulateError {
    SimulateError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}
