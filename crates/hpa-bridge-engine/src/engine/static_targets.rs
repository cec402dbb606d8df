//! The config's `scrape.static` targets, as the store holds them: an id that never shows a
//! secret, the page format, and the store they start in.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use hpa_bridge_rules::clock::Millis;
use hpa_bridge_rules::config::{Config, ScrapeCredentials};
use hpa_bridge_rules::evidence::TargetId;
use hpa_bridge_store::store::{PageFormat, ScrapeTarget, Store, StoreWriter};

/// The identity of a `scrape.static` target: its URL as it may be shown.
pub fn static_target_id(url: &str) -> TargetId {
    TargetId(hpa_bridge_rules::redaction::redact_url(url).as_ref().into())
}

/// A scrape store holding the config's `scrape.static` targets, by its write half.
pub fn static_store(config: &Config) -> StoreWriter {
    let store = StoreWriter::new(store_for(config));
    store.set_targets(static_targets(config));
    store
}

/// An empty scrape store that applies the config's `scrape.maxClockSkew`.
fn store_for(config: &Config) -> Store {
    Store::with_max_clock_skew(config.scrape.max_clock_skew.0.as_millis() as Millis)
        .with_stale_after(config.scrape.stale_after().as_millis() as Millis)
}

/// The credentials of each `scrape.static` target that has them, by the target's id.
pub fn static_credentials(config: &Config) -> HashMap<TargetId, ScrapeCredentials> {
    static_targets(config)
        .into_iter()
        .zip(&config.scrape.static_targets)
        .enumerate()
        .filter_map(|(i, (target, t))| Some((target.id, t.credentials(i)?)))
        .collect()
}

/// The `scrape.static` targets, which carry no workload.
pub fn static_targets(config: &Config) -> Vec<ScrapeTarget> {
    let mut taken = HashSet::new();
    config
        .scrape
        .static_targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            // The id is shown in /status, metric labels and logs, so it never holds a password
            // or a query value. `Config` refuses two entries for one URL, but URLs differing in
            // a query value are shown alike; an id taken by an earlier entry names its entry,
            // so that neither target replaces the other in the store.
            let mut id = static_target_id(&t.url);
            if !taken.insert(id.clone()) {
                id = TargetId(format!("{id} (scrape.static[{i}])").into());
                taken.insert(id.clone());
            }
            let format = match &t.json {
                // `Config` compiled every block when it was loaded.
                Some(json) => match json.compile(&format!("scrape.static[{i}].json")) {
                    Ok(x) => PageFormat::Json(Arc::new(x)),
                    Err(e) => PageFormat::UnusableJsonConfig(e.to_string().into()),
                },
                None => PageFormat::Exposition,
            };
            ScrapeTarget {
                format,
                id,
                url: t.url.clone(),
                labels: t.labels.clone(),
                workload: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probe URLs that differ only in a query value are shown alike, and each is still its
    /// own target: none replaces another in the store, and no id shows a value.
    #[test]
    fn static_targets_differing_in_a_query_value_keep_apart_ids() {
        let config = Config::from_yaml(
                "scrape: {static: [{url: 'http://bb/probe?target=a'}, {url: 'http://bb/probe?target=b'}, {url: 'http://bb/probe?target=c'}]}",
            )
            .unwrap();
        let ids: Vec<String> = static_targets(&config)
            .iter()
            .map(|t| t.id.to_string())
            .collect();
        assert_eq!(
            ids,
            [
                "http://bb/probe?target=xxxxx",
                "http://bb/probe?target=xxxxx (scrape.static[1])",
                "http://bb/probe?target=xxxxx (scrape.static[2])",
            ]
        );
    }
}
