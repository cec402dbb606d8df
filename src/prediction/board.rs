//! The predictions the watch made, read by `/status` (`hpas`), the status page and the
//! self-metrics. One writer (the watch), many readers.

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde_json::{json, Value};

use super::check::{Pending, PredictionCheck};
use crate::explain::Explanation;
use hpa_bridge_rules::clock::Millis;

/// One HPA's newest explanation and how its predictions fared.
#[derive(Clone, Debug)]
pub struct HpaPrediction {
    pub namespace: String,
    pub name: String,
    /// The next sync explained, or why it could not be.
    pub explanation: Result<Explanation, String>,
    /// Shadow mode: the metric, and what the HPA would do if it also read it.
    pub shadow: Option<(String, Result<Explanation, String>)>,
    pub check: PredictionCheck,
    /// The prediction waiting for its sync.
    pub pending: Option<Pending>,
    /// When the watch explains this HPA again.
    pub next_run_ms: Millis,
}

impl HpaPrediction {
    pub fn new(namespace: &str, name: &str) -> Self {
        HpaPrediction {
            namespace: namespace.into(),
            name: name.into(),
            explanation: Err("not explained yet".into()),
            shadow: None,
            check: PredictionCheck::default(),
            pending: None,
            next_run_ms: Millis::MIN,
        }
    }

    /// The document `/status` lists under `hpas`: `explain hpa -o json`'s, with `shadow`
    /// and `prediction` (docs/explain.md).
    pub fn to_json(&self) -> Value {
        let mut doc = match &self.explanation {
            Ok(e) => serde_json::to_value(e).unwrap_or(Value::Null),
            Err(why) => json!({"hpa": format!("{}/{}", self.namespace, self.name), "error": why}),
        };
        if let Some(obj) = doc.as_object_mut() {
            if let Some((metric, shadow)) = &self.shadow {
                let shadow = match shadow {
                    Ok(e) => json!({"metric": metric, "explanation": e}),
                    Err(why) => json!({"metric": metric, "error": why}),
                };
                obj.insert("shadow".into(), shadow);
            }
            obj.insert(
                "prediction".into(),
                serde_json::to_value(&self.check).unwrap_or(Value::Null),
            );
        }
        doc
    }
}

/// Every predicted HPA, by namespace and name.
#[derive(Debug, Default)]
pub struct Predictions {
    entries: RwLock<BTreeMap<(String, String), HpaPrediction>>,
}

impl Predictions {
    /// Every HPA's document, by namespace and name; `namespace` filters.
    pub fn document(&self, namespace: Option<&str>) -> Value {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        Value::Array(
            entries
                .values()
                .filter(|p| namespace.is_none_or(|ns| ns == p.namespace))
                .map(HpaPrediction::to_json)
                .collect(),
        )
    }

    /// A copy of every entry, for the page.
    pub fn entries(&self) -> Vec<HpaPrediction> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.entries.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// When the watch next explains an HPA (the earliest over all), without copying entries.
    pub fn next_run_ms(&self) -> Option<Millis> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.values().map(|p| p.next_run_ms).min()
    }

    /// Whether the watch explains `namespace/name` at `now_ms` (a new HPA is due at once).
    pub fn due(&self, namespace: &str, name: &str, now_ms: Millis) -> bool {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries
            .get(&(namespace.into(), name.into()))
            .is_none_or(|p| p.next_run_ms <= now_ms)
    }

    /// The entry of one HPA, for the watch to read.
    pub fn get(&self, namespace: &str, name: &str) -> Option<HpaPrediction> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(&(namespace.into(), name.into())).cloned()
    }

    /// Keep `p` as its HPA's entry.
    pub fn put(&self, p: HpaPrediction) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        entries.insert((p.namespace.clone(), p.name.clone()), p);
    }

    /// Drop the entries `keep` refuses; the dropped ones' namespaces and names.
    pub fn retain(&self, keep: impl Fn(&str, &str) -> bool) -> Vec<(String, String)> {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<(String, String)> = entries
            .keys()
            .filter(|(ns, name)| !keep(ns, name))
            .cloned()
            .collect();
        for k in &gone {
            entries.remove(k);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_board_says_which_hpa_is_due_and_when_the_next_one_is() {
        let board = Predictions::default();
        assert_eq!(board.next_run_ms(), None);
        assert!(board.due("games", "lobby", 0), "a new HPA is due at once");
        for (name, at) in [("lobby", 5_000), ("arena", 2_000)] {
            let mut p = HpaPrediction::new("games", name);
            p.next_run_ms = at;
            board.put(p);
        }
        assert_eq!(board.next_run_ms(), Some(2_000));
        assert!(!board.due("games", "lobby", 4_999));
        assert!(board.due("games", "lobby", 5_000));
        assert_eq!(board.document(Some("shop")), Value::Array(Vec::new()));
        let doc = board.document(Some("games"));
        assert_eq!(doc[0]["hpa"], "games/arena", "{doc}");
        assert_eq!(doc[0]["error"], "not explained yet", "{doc}");
        assert_eq!(doc[0]["prediction"]["hits"], 0, "{doc}");
        let gone = board.retain(|_, name| name == "lobby");
        assert_eq!(gone, vec![("games".to_string(), "arena".to_string())]);
        assert_eq!(board.len(), 1);
    }
}
