//! Keeping `controller.kubernetes.io/pod-deletion-cost` equal to each pod's stateful index on
//! the Deployments that ask for it, so that their ReplicaSet removes idle pods first
//! (docs/deletion-cost.md). Off unless `serve --write-deletion-cost` is given.

mod cost_patch;
mod writer;

pub use cost_patch::{cost_patches, CostPatch};
pub use writer::{DeletionCostWriter, FIELD_MANAGER};
