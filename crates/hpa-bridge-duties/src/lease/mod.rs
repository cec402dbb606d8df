//! One writer per duty: leader election on a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` decides it. The deletion-cost writer and the memory writer each hold one.

mod election;
mod leadership;

/// The field manager of every write hpa-bridge makes (the Leases, the deletion-cost patches,
/// the memory ConfigMap), so `managedFields` names who owns what was written.
pub const FIELD_MANAGER: &str = "hpa-bridge";

pub use election::{Election, LeaseRecord, Step};
pub use leadership::{identity, Duty, Leadership, LeaseName, LeaseTimings, DEFAULT_LEASE_NAME};
