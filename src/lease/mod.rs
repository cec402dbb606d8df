//! One writer per duty: leader election on a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` decides it. The deletion-cost writer and the memory writer each hold one.

mod election;
mod leadership;

pub use election::{Election, LeaseRecord, Step};
pub use leadership::{identity, Duty, Leadership, LeaseName, LeaseTimings, DEFAULT_LEASE_NAME};
