//! The memory as a ConfigMap: one key holding its JSON, read and written with the
//! resourceVersion of the object read, so that of two writers one is refused.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::Client;

use crate::lease::FIELD_MANAGER;
use hpa_bridge_store::store::Memory;

/// The key of the ConfigMap that holds the memory.
const KEY: &str = "memory.json";

/// What a ConfigMap may hold is 1 MiB in all; the memory keeps well below it, so its
/// metadata always fits. A larger memory loses its last targets (by identity order), which
/// then count as never scraped after a restart: no worse than having no memory.
pub const MAX_BYTES: usize = 768 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("reading or writing ConfigMap {0}: {1}")]
    Api(String, #[source] kube::Error),
    #[error("ConfigMap {0} key {KEY} is not a memory hpa-bridge wrote: {1}")]
    Malformed(String, #[source] serde_json::Error),
}

impl MemoryError {
    /// The failure's kind, for the write counter.
    pub fn kind(&self) -> &'static str {
        match self {
            MemoryError::Api(_, kube::Error::Api(s)) if s.code == 409 => "conflict",
            MemoryError::Api(_, kube::Error::Api(s)) if s.code == 403 => "forbidden",
            MemoryError::Api(..) => "error",
            MemoryError::Malformed(..) => "malformed",
        }
    }
}

/// The ConfigMap `namespace/name`.
pub struct MemoryObject {
    api: Api<ConfigMap>,
    namespace: String,
    name: String,
}

impl MemoryObject {
    pub fn new(client: Client, namespace: &str, name: &str) -> MemoryObject {
        MemoryObject {
            api: Api::namespaced(client, namespace),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    pub fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The memory written last, or none when no replica has written one.
    pub async fn read(&self) -> Result<Option<Memory>, MemoryError> {
        let Some(cm) = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| MemoryError::Api(self.describe(), e))?
        else {
            return Ok(None);
        };
        let Some(json) = cm.data.as_ref().and_then(|d| d.get(KEY)) else {
            return Ok(None);
        };
        serde_json::from_str(json)
            .map(Some)
            .map_err(|e| MemoryError::Malformed(self.describe(), e))
    }

    /// Replace the memory with `memory` (cut to `MAX_BYTES`). Returns the bytes written and how
    /// many targets were left out to fit.
    pub async fn write(&self, memory: &Memory) -> Result<(usize, usize), MemoryError> {
        let (json, left_out) = fitting(memory);
        let bytes = json.len();
        let data = BTreeMap::from([(KEY.to_string(), json)]);
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let err = |e| MemoryError::Api(self.describe(), e);
        match self.api.get_opt(&self.name).await.map_err(err)? {
            Some(mut cm) => {
                cm.data = Some(data);
                cm.binary_data = None;
                self.api.replace(&self.name, &pp, &cm).await.map_err(err)?;
            }
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        labels: Some(BTreeMap::from([
                            ("app.kubernetes.io/name".into(), "hpa-bridge".into()),
                            ("app.kubernetes.io/component".into(), "memory".into()),
                        ])),
                        ..ObjectMeta::default()
                    },
                    data: Some(data),
                    ..ConfigMap::default()
                };
                self.api.create(&pp, &cm).await.map_err(err)?;
            }
        }
        Ok((bytes, left_out))
    }
}

/// The memory's JSON within `MAX_BYTES`, and how many targets were left out.
fn fitting(memory: &Memory) -> (String, usize) {
    let mut json = serde_json::to_string(memory).unwrap_or_default();
    if json.len() <= MAX_BYTES {
        return (json, 0);
    }
    // Each target's share of the text, to cut where the sum first passes the bound.
    let mut cut = memory.clone();
    let mut used = 64usize;
    let mut keep = 0;
    for t in &memory.targets {
        used += serde_json::to_string(t).map_or(0, |s| s.len() + 1);
        if used > MAX_BYTES {
            break;
        }
        keep += 1;
    }
    cut.targets.truncate(keep);
    json = serde_json::to_string(&cut).unwrap_or_default();
    (json, memory.targets.len() - keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_bridge_store::store::{RememberedSeries, RememberedTarget};

    #[test]
    fn a_memory_too_large_for_a_config_map_loses_its_last_targets_and_fits() {
        let target = |i: usize| RememberedTarget {
            id: format!("games/lobby-{i}"),
            fingerprint: format!("{i:032x}"),
            series: vec![RememberedSeries {
                name: "hpa_stateful_index".into(),
                labels: BTreeMap::from([("pad".to_string(), "x".repeat(400))]),
                value: i as u64,
                at: 1,
            }],
        };
        let small = Memory {
            written_at: 1,
            targets: (0..10).map(target).collect(),
        };
        let (json, left_out) = fitting(&small);
        assert_eq!(left_out, 0);
        assert_eq!(serde_json::from_str::<Memory>(&json).unwrap(), small);
        let large = Memory {
            written_at: 1,
            targets: (0..3000).map(target).collect(),
        };
        let (json, left_out) = fitting(&large);
        assert!(json.len() <= MAX_BYTES, "{}", json.len());
        let read: Memory = serde_json::from_str(&json).unwrap();
        assert_eq!(read.targets.len() + left_out, 3000);
        assert!(left_out > 0 && read.targets[..] == large.targets[..read.targets.len()]);
    }
}
