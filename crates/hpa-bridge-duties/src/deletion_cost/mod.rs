//! Keeping `controller.kubernetes.io/pod-deletion-cost` equal to each pod's stateful index on
//! the Deployments that ask for it, so that their ReplicaSet removes idle pods first
//! (docs/deletion-cost.md). Off unless `serve --write-deletion-cost` is given; then only the
//! replica that holds the deletion-cost Lease writes.

mod cost_patch;
mod writer;

pub use crate::lease::{
    identity, Election, Leadership, LeaseName, LeaseRecord, LeaseTimings, Step, DEFAULT_LEASE_NAME,
};
pub use cost_patch::{cost_patches, CostPatch, FIELD_MANAGER};
pub use writer::DeletionCostWriter;
