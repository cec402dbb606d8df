//! hpa-bridge's server: the aggregated API (external.metrics.k8s.io and custom.metrics.k8s.io)
//! over TLS, its connection gates, the status and metrics ports, and the authentication and
//! authorization in front of them. It asks the engine for answers and renders them; nothing below
//! it can name it.

pub mod api;
pub mod auth;
pub mod tls;
