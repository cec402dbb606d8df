#![no_main]

use hpa_bridge_exposition::{parse, ExposedSample};
use libfuzzer_sys::fuzz_target;

fn few(name: &str) -> bool {
    matches!(
        name,
        "a" | "http_requests_total" | "job:queue_depth:sum" | "lat_bucket"
    )
}

// `ExposedSample`'s derived equality treats NaN as unequal to itself.
fn same(a: &ExposedSample, b: &ExposedSample) -> bool {
    a.name == b.name
        && a.labels == b.labels
        && a.timestamp_ms == b.timestamp_ms
        && a.value.to_bits() == b.value.to_bits()
}

fuzz_target!(|data: &[u8]| {
    let all = parse(data, &|_| true);
    let some = parse(data, &few);
    // Filtering only skips validation of unwanted lines, so it can remove errors but never add
    // them, and it must return exactly the wanted subset of the full parse.
    if let Ok(all) = all {
        let some = some.expect("filtered parse failed where the full parse succeeded");
        let expected: Vec<&ExposedSample> = all.iter().filter(|s| few(&s.name)).collect();
        assert_eq!(some.len(), expected.len());
        assert!(some.iter().zip(expected).all(|(x, y)| same(x, y)));
    }
});
