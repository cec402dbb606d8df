//! What the integration tests and the bench share, included by path in both (the bench is a
//! binary of this package and cannot use its dev-dependencies, so this kit uses only the
//! package's own dependencies). Each includer uses a part of it.
#![allow(dead_code)]

pub mod authority;
pub mod exporter;
pub mod kube_api;
