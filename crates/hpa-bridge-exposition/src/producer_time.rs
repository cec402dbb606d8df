//! `timestampSeries`: a recommendation's age counted from when its producer made it, read from
//! another series of the same page (Unix seconds), so a recommender whose loop is stuck goes
//! stale although its endpoint still answers every scrape.

use std::collections::HashMap;

use super::{ExposedSample, Unusable};

/// Give each sample whose series has a timestamp series (`rules`: series → its timestamp
/// series) the time that series holds on the page. Only the timestamp sample with the same
/// labels is used: one with other labels may time another producer's value (a former
/// leader's, another epoch's). A page holding none, several, or one that is not a Unix time
/// leaves the sample of unknown age, so it is unusable.
pub fn apply(samples: &mut [ExposedSample], rules: &HashMap<String, String>) {
    if rules.is_empty() {
        return;
    }
    let mut times: HashMap<&str, Vec<(Labels, f64)>> = HashMap::new();
    let timestamp_names: std::collections::HashSet<&str> =
        rules.values().map(String::as_str).collect();
    for s in samples.iter() {
        if timestamp_names.contains(s.name.as_str()) {
            times
                .entry(s.name.as_str())
                .or_default()
                .push((sorted(&s.labels), s.value));
        }
    }
    let mut found: Vec<(usize, Option<i64>)> = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let Some(ts_name) = rules.get(&s.name) else {
            continue;
        };
        let candidates = times
            .get(ts_name.as_str())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let labels = sorted(&s.labels);
        let mut same = candidates.iter().filter(|(l, _)| *l == labels);
        let chosen = match (same.next(), same.next()) {
            (Some((_, v)), None) => Some(*v),
            // The page holds that time twice: which one counts is unknown.
            (Some(_), Some(_)) => None,
            (None, _) => None,
        };
        found.push((i, chosen.and_then(unix_seconds_to_ms)));
    }
    for (i, at) in found {
        let s = &mut samples[i];
        match at {
            Some(ms) => s.timestamp_ms = Some(ms),
            None => s.unusable = s.unusable.or(Some(Unusable::NoProducerTime)),
        }
    }
}

/// A sample's labels, sorted and without empty values, for comparing label sets.
type Labels = Vec<(String, String)>;

fn sorted(labels: &[(String, String)]) -> Labels {
    let mut l: Labels = labels
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .cloned()
        .collect();
    l.sort();
    l
}

/// Unix seconds as milliseconds, if the value can be a time at all (0 up to year 5138).
fn unix_seconds_to_ms(v: f64) -> Option<i64> {
    (v.is_finite() && (0.0..1e11).contains(&v)).then(|| (v * 1000.0).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, labels: &[(&str, &str)], value: f64) -> ExposedSample {
        ExposedSample {
            timestamp_ms: Some(1),
            ..ExposedSample::scraped(name, labels, value)
        }
    }

    fn rules() -> HashMap<String, String> {
        HashMap::from([("rec".to_owned(), "rec_at".to_owned())])
    }

    #[test]
    fn the_timestamp_series_times_the_recommendation() {
        let mut page = vec![s("rec", &[], 4.0), s("rec_at", &[], 1_764_547_200.5)];
        apply(&mut page, &rules());
        assert_eq!(page[0].timestamp_ms, Some(1_764_547_200_500));
        assert_eq!(page[0].unusable, None);
        // The timestamp series itself is left as it is.
        assert_eq!(page[1].timestamp_ms, Some(1));
    }

    #[test]
    fn with_several_timestamps_the_one_with_the_same_labels_counts() {
        let mut page = vec![
            s("rec", &[("leader", "b")], 4.0),
            s("rec_at", &[("leader", "a")], 100.0),
            s("rec_at", &[("leader", "b")], 200.0),
            s("rec", &[("leader", "c")], 5.0),
        ];
        apply(&mut page, &rules());
        assert_eq!(page[0].timestamp_ms, Some(200_000));
        // None has its labels: a timestamp of other labels does not time it.
        assert_eq!(page[3].unusable, Some(Unusable::NoProducerTime));
        let mut page = vec![
            s("rec", &[("master_epoch", "4")], 4.0),
            s("rec_at", &[("master_epoch", "3")], 100.0),
        ];
        apply(&mut page, &rules());
        assert_eq!(page[0].unusable, Some(Unusable::NoProducerTime));
        // The time exported twice with the same labels: as unknown as none.
        let mut page = vec![
            s("rec", &[], 4.0),
            s("rec_at", &[], 1_764_547_200.0),
            s("rec_at", &[], 1000.0),
        ];
        apply(&mut page, &rules());
        assert_eq!(page[0].unusable, Some(Unusable::NoProducerTime));
    }

    #[test]
    fn a_missing_or_unreadable_time_makes_the_recommendation_unusable() {
        for ts in [
            None,
            Some(f64::NAN),
            Some(-1.0),
            Some(f64::INFINITY),
            Some(1e12),
        ] {
            let mut page = vec![s("rec", &[], 4.0)];
            page.extend(ts.map(|v| s("rec_at", &[], v)));
            apply(&mut page, &rules());
            assert_eq!(page[0].unusable, Some(Unusable::NoProducerTime), "{ts:?}");
        }
        // A series without a rule is untouched.
        let mut page = vec![s("other", &[], 4.0)];
        apply(&mut page, &rules());
        assert_eq!((page[0].timestamp_ms, page[0].unusable), (Some(1), None));
    }
}
