//! What the integration tests and the bench share: one certificate authority, one HTTP exporter
//! and the loopback Kubernetes API kept for faults the real API server cannot produce. A
//! dev-dependency of the server package and a dependency of the bench only; nothing the
//! product ships links it.

pub mod authority;
pub mod exporter;
pub mod kube_api;
