//! What a restart must not forget: which targets carried which series, and their last valid
//! values (docs/unknown-input.md, "A restart does not forget").
//!
//! A fresh process knows nothing of its targets, so a target unreachable since its start could
//! only be ruled in or out by guessing. The memory is taken from a running store and given to a
//! fresh one, which reads each remembered target as if it had kept its last page and failed
//! every scrape since: exactly what the process before the restart would have read. The first
//! real page replaces it, as any page does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ingest::Page;
use super::{Inner, ScrapeTarget, Store};
use hpa_bridge_exposition::ExposedSample;
use hpa_bridge_rules::clock::{rfc3339, Millis, Now};
use hpa_bridge_rules::redaction::redact_url;

/// The series each target carried, as one process knew them at `written_at`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// Wall clock of the process that took it, in ms.
    pub written_at: Millis,
    pub targets: Vec<RememberedTarget>,
}

/// One target as remembered: which it is, and what it carried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RememberedTarget {
    /// The target's identity as shown (a static target's URL redacted), for a person.
    pub id: String,
    /// A digest of the target's identity, URL, labels and workload, by which it is found again:
    /// a pod recreated under the same name elsewhere is another target, and a URL is never
    /// written out (it may carry a token).
    pub fingerprint: String,
    pub series: Vec<RememberedSeries>,
}

/// A series and its last valid value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RememberedSeries {
    pub name: String,
    /// Every label of the series, its target's included.
    pub labels: BTreeMap<String, String>,
    pub value: u64,
    /// When that value was measured (wall clock, ms).
    pub at: Millis,
}

impl Memory {
    pub fn series_count(&self) -> usize {
        self.targets.iter().map(|t| t.series.len()).sum()
    }

    /// Whether `other` remembers the same targets with the same series and values, whenever
    /// each value was measured. A writer that skips a write for that keeps older times, which
    /// read as stale sooner after a restart: the remembered value then refuses a lower answer
    /// rather than count in it (docs/unknown-input.md).
    pub fn same_values(&self, other: &Memory) -> bool {
        self.targets.len() == other.targets.len()
            && self.targets.iter().zip(&other.targets).all(|(a, b)| {
                a.fingerprint == b.fingerprint
                    && a.series.len() == b.series.len()
                    && a.series.iter().zip(&b.series).all(|(x, y)| {
                        x.name == y.name && x.labels == y.labels && x.value == y.value
                    })
            })
    }

    /// This memory and, after its own, each target of `pending` it does not hold: a target
    /// still to be read from the memory this process was given is passed on, not forgotten.
    pub fn and_pending(mut self, pending: &Memory) -> Memory {
        let held: std::collections::HashSet<String> =
            self.targets.iter().map(|t| t.fingerprint.clone()).collect();
        self.targets.extend(
            pending
                .targets
                .iter()
                .filter(|t| !held.contains(&t.fingerprint))
                .cloned(),
        );
        self
    }
}

/// The identity a remembered target must still have to be read from memory.
pub fn fingerprint(target: &ScrapeTarget) -> String {
    let mut h = Sha256::new();
    let mut field = |s: &str| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    field(&target.id.0);
    field(&target.url);
    for (k, v) in &target.labels {
        field(k);
        field(v);
    }
    if let Some(w) = &target.workload {
        field(w.kind.as_str());
        field(&w.namespace);
        field(&w.name);
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Store {
    /// What this store would have a successor remember: every target that has had a page
    /// (or was itself read from memory), with each series that has a valid value.
    pub fn memory(&self, written_at: Millis) -> Memory {
        let inner = self.locked();
        let targets = inner
            .targets
            .values()
            .filter(|rec| rec.health.ever_succeeded())
            .filter_map(|rec| {
                let mut series: Vec<RememberedSeries> = rec
                    .series
                    .values()
                    .flat_map(|by_labels| by_labels.values())
                    .filter_map(|slot| inner.slots.get(*slot))
                    .filter_map(|s| {
                        let (value, at) = s.last_valid?;
                        Some(RememberedSeries {
                            name: s.name.to_string(),
                            labels: (*s.labels).clone(),
                            value,
                            at,
                        })
                    })
                    .collect();
                if series.is_empty() {
                    return None;
                }
                series.sort_by(|a, b| (&a.name, &a.labels).cmp(&(&b.name, &b.labels)));
                Some(RememberedTarget {
                    id: redact_url(&rec.target.id.0).into_owned(),
                    fingerprint: fingerprint(&rec.target),
                    series,
                })
            })
            .collect();
        Memory {
            written_at,
            targets,
        }
    }

    /// Give this store the memory a predecessor wrote. Each remembered target that is in the
    /// set, never scraped by this process and still the target it was is read at once as having
    /// had its remembered series on a page at the memory's time and failed every scrape since;
    /// the others are read the same way when a target set brings them, under the same lock, so
    /// no answer ever sees such a target without its memory. Returns how many were read now.
    pub(crate) fn remember(&self, memory: Memory) -> usize {
        let mut guard = self.write();
        let mut pending = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        *pending = Some(memory);
        self.read_memory_in(&mut guard, &mut pending)
    }

    /// Stop reading targets from the memory (those still to come are taken as new), and say
    /// how many it still held.
    pub(crate) fn forget_memory(&self) -> usize {
        let mut pending = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        pending.take().map_or(0, |m| m.targets.len())
    }

    /// What of the memory is still to be read: a writer passes it on.
    pub fn pending_memory(&self) -> Option<Memory> {
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many targets have been read from memory since this store began.
    pub fn targets_read_from_memory(&self) -> usize {
        self.memory_read.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Read what can be read of `pending` into `inner`.
    pub(super) fn read_memory_in(&self, inner: &mut Inner, pending: &mut Option<Memory>) -> usize {
        let Some(memory) = pending.as_mut().filter(|m| !m.targets.is_empty()) else {
            return 0;
        };
        let written_at = memory.written_at;
        let before = memory.targets.len();
        // Few targets are unscraped in a steady set, so they are the ones fingerprinted.
        let unscraped: BTreeMap<String, std::sync::Arc<ScrapeTarget>> = inner
            .unscraped
            .iter()
            .filter_map(|id| inner.targets.get(id))
            .map(|rec| (fingerprint(&rec.target), rec.target.clone()))
            .collect();
        if unscraped.is_empty() {
            return 0;
        }
        memory.targets.retain(|r| {
            let Some(target) = unscraped.get(&r.fingerprint) else {
                return true;
            };
            let samples = r
                .series
                .iter()
                .map(|s| ExposedSample {
                    name: s.name.clone(),
                    labels: s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    value: s.value as f64,
                    timestamp_ms: Some(s.at),
                    unusable: None,
                })
                .collect::<Vec<_>>();
            // Every sample carries its own time, so the page's monotonic time is never read.
            let page_at = Now {
                wall: written_at,
                mono: 0,
            };
            self.record_success_in(inner, target, page_at, 0, Page::from(samples));
            self.record_failure_in(
                inner,
                target,
                written_at,
                0,
                format!(
                    "not scraped since this process started; held at its series as remembered at {}",
                    rfc3339(written_at)
                ),
            );
            false
        });
        let read = before - memory.targets.len();
        self.memory_read
            .fetch_add(read, std::sync::atomic::Ordering::Relaxed);
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_bridge_rules::evidence::Scope;
    use hpa_bridge_rules::selector::LabelSelector;

    fn target(url: &str) -> ScrapeTarget {
        ScrapeTarget {
            format: Default::default(),
            id: hpa_bridge_rules::evidence::TargetId(url.into()),
            url: url.into(),
            labels: [("namespace".to_string(), "default".to_string())].into(),
            workload: None,
        }
    }

    /// Target, last valid value and time, failing.
    type Seen = (String, Option<(u64, Millis)>, bool);

    fn idx(store: &Store) -> Vec<Seen> {
        let series = ["idx".to_string()];
        let sel = LabelSelector::everything();
        let scope = Scope {
            series: &series,
            namespace_label: "namespace",
            namespace: "default",
            selector: &sel,
        };
        let ev = store.read(&scope, hpa_bridge_rules::evidence::Read::Listed);
        ev.observations
            .iter()
            .map(|o| (o.id.target.0.to_string(), o.last_valid, o.target_failing))
            .collect()
    }

    #[test]
    fn a_fresh_store_reads_a_remembered_target_as_failing_since_with_its_last_values() {
        let (a, b, never) = (
            target("http://a/m"),
            target("http://b/m"),
            target("http://c/m"),
        );
        let old = Store::new();
        old.set_targets(vec![a.clone(), b.clone(), never.clone()]);
        let sample = |v: f64| ExposedSample::scraped("idx", &[], v);
        old.record_success(&a, 1000, 1, vec![sample(3.0)]);
        old.record_success(&a, 2000, 1, vec![sample(f64::NAN)]);
        old.record_success(&b, 1500, 1, vec![sample(5.0)]);
        old.record_failure(&never, 1500, 1, "refused".into());
        let memory = old.memory(2500);
        // The NaN is not a value to hold; the target never scraped carried nothing known.
        assert_eq!(memory.series_count(), 2);
        assert_eq!(memory.targets[0].series[0].value, 3);
        assert_eq!(memory.targets[0].series[0].at, 1000);
        let json = serde_json::to_string(&memory).unwrap();
        assert_eq!(serde_json::from_str::<Memory>(&json).unwrap(), memory);

        // b comes back elsewhere (another URL under the same id), and a is scraped before
        // the memory is read: neither is read from it.
        let fresh = Store::new();
        let b_moved = ScrapeTarget {
            url: "http://b2/m".into(),
            ..b.clone()
        };
        fresh.set_targets(vec![a.clone(), b_moved, never.clone()]);
        fresh.record_success(&a, 3000, 1, vec![sample(1.0)]);
        assert_eq!(fresh.remember(memory), 0);
        assert_eq!(
            fresh.pending_memory().unwrap().targets.len(),
            2,
            "kept for a later target set"
        );
        assert_eq!(
            idx(&fresh),
            vec![("http://a/m".into(), Some((1, 3000)), false)]
        );

        // b as it was joins the set: read from memory, failing, holding 5 from 1500.
        fresh.set_targets(vec![a.clone(), b.clone(), never]);
        assert_eq!(fresh.targets_read_from_memory(), 1);
        let read = idx(&fresh);
        assert!(
            read.contains(&("http://b/m".into(), Some((5, 1500)), true)),
            "{read:?}"
        );
        let health = fresh
            .target_health()
            .into_iter()
            .find(|(t, _)| t.id == b.id)
            .unwrap()
            .1;
        assert!(
            health.last_error.as_deref().unwrap().contains("remembered"),
            "{health:?}"
        );
        // What it would pass on holds b as remembered, so a second restart keeps it too.
        let again = fresh.memory(4500);
        assert!(again
            .targets
            .iter()
            .any(|t| t.id == "http://b/m" && t.series[0].value == 5));
    }
}
