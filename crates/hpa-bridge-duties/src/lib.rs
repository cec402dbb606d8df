//! hpa-bridge's cluster duties: what one replica at a time writes to the cluster beside serving,
//! each elected by a Lease of its own (`lease`): the pods' deletion costs (`deletion_cost`) and
//! the memory a restarted adapter reads back (`memory`). They read the store and discovery and
//! never the engine or the API.

pub mod deletion_cost;
pub mod lease;
pub mod memory;
