//! hpa-bridge's HPA model, a crate of its own over the rules crate: a pure, executable model of
//! the kube-controller-manager HPA controller's decision procedure for `External` and `Object`
//! metrics (docs/hpa-behaviour.md §1, §6), and the Kubernetes `Quantity` it reads (`quantity`).
//!
//! One [`Hpa`] holds what the controller keeps in memory for one HorizontalPodAutoscaler
//! (recommendation history, scale-up and scale-down events) plus the object's
//! `status.conditions`. [`Hpa::sync`] runs one reconcile: pre-checks, one proposal per metric,
//! the invalid-metric rules, then normalisation with or without `behavior`.
//!
//! **Time.** Every instant is a [`Duration`] since an arbitrary epoch chosen by the caller (a
//! simulated clock). The model never reads a clock. Window tests copy Go's strict
//! `Before`/`After` comparisons exactly, so with syncs exactly 15 s apart a sample exactly one
//! window old is *not* "after" the cutoff (behavior path) yet *not* "before" it either (legacy
//! path). The real controller's syncs drift a little past 15 s; a simulator that wants that
//! can add a few milliseconds per sync.
//!
//! **Current replicas.** As in Go (`currentReplicas := scale.Spec.Replicas`), pre-checks,
//! stabilisation, rate limits and the "did we rescale" test all use `spec.replicas`.
//! `status.replicas` only enters the AverageValue formula (docs/hpa-behaviour.md §1.5), and the number
//! of Ready pods only the Value formula (docs/hpa-behaviour.md §1.3).
//!
//! Facts were checked against `pkg/controller/podautoscaler/horizontal.go` and
//! `replica_calculator.go` (the `Tolerances` era, 1.33+, and its legacy predecessor).
//!
//! One concern per file: [`spec`] (the HPA spec as written, its defaults and validation),
//! [`tolerance`] (controller flags and the tolerance band), [`replicas`] (one metric's
//! proposal), [`rate_limits`] (behaviour policies and the legacy cap), [`sync_io`] (what one
//! sync reads and decides) and [`controller`] (the controller's memory and the reconcile).
//! Beside the HPA, what happens to its decision in a Deployment: [`deployment_scale`] (how
//! `spec.replicas` is split among ReplicaSets) and [`pod_deletion_rank`] (which pods a
//! ReplicaSet deletes, docs/hpa-behaviour.md §9).

use std::time::Duration;

mod controller;
mod deployment_scale;
mod go_numeric;
mod pod_deletion_rank;
mod pod_metrics;
pub mod quantity;
mod rate_limits;
mod replicas;
mod scale_event;
mod spec;
mod sync_io;
mod tolerance;
#[cfg(test)]
mod upstream_cases;

pub use controller::*;
pub use deployment_scale::*;
pub use go_numeric::{go_f64_to_i32, go_f64_to_i64};
pub use pod_deletion_rank::*;
pub use pod_metrics::*;
pub use rate_limits::legacy_scale_up_limit;
pub use scale_event::ScaleEvent;
pub use spec::*;
pub use sync_io::*;
pub use tolerance::*;

/// The newest Kubernetes minor version whose HPA controller this model follows; the default
/// of `check --kube-version` (docs/hpa-behaviour.md §7).
pub const NEWEST_KUBE_MINOR: u32 = 37;
/// The controller syncs every HPA every 15 s, one GET per metric per sync (docs/hpa-behaviour.md §1.7.5).
pub const SYNC_PERIOD: Duration = Duration::from_secs(15);
/// `--horizontal-pod-autoscaler-tolerance` default (docs/hpa-behaviour.md §1.5).
pub const DEFAULT_TOLERANCE: f64 = 0.1;
/// `--horizontal-pod-autoscaler-downscale-stabilization` default (docs/hpa-behaviour.md §1.7.3/§1.7.4).
pub const DEFAULT_DOWNSCALE_STABILIZATION: Duration = Duration::from_secs(300);
/// Legacy scale-up cap `max(2 × current, 4)` (docs/hpa-behaviour.md §1.7.3).
const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;
