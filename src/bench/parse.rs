//! The scrape parser's skip path against the practical limit: finding every newline.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{pages, BenchError, Plan};
use crate::config::Config;
use crate::exposition;

/// Series per page, as the issue states (~5,000 of which ~10 are wanted).
pub const SERIES: usize = 5000;

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParsePage {
    pub bytes: usize,
    pub series: usize,
    pub wanted_series: usize,
    /// `memchr` over every newline: no parser can skip lines faster than it finds them.
    pub newline_scan_mb_s: f64,
    /// `exposition::parse` with the adapter's wanted set, as the scraper calls it.
    pub adapter_mb_s: f64,
    /// `exposition::parse_all`: every line parsed in full.
    pub parse_all_mb_s: f64,
    pub ratio_to_limit: f64,
    pub speedup_over_parse_all: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParseResult {
    pub pages: Vec<ParsePage>,
}

/// Runs `f` repeatedly for at least `min` and returns MB/s over `bytes` per call.
fn throughput(bytes: usize, min: Duration, mut f: impl FnMut() -> usize) -> f64 {
    // One untimed call warms caches and the allocator.
    black_box(f());
    let started = Instant::now();
    let mut calls = 0u64;
    while calls == 0 || started.elapsed() < min {
        black_box(f());
        calls += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    (bytes as f64 * calls as f64) / secs / 1e6
}

pub fn run(plan: &Plan) -> Result<ParseResult, BenchError> {
    let config = Config::from_yaml("").map_err(|e| BenchError::part("parse", e))?;
    let wanted = config.wanted_series();
    let mut pages_out = Vec::new();
    for &size in &plan.parse_sizes {
        let (page, wanted_count) = pages::parse_page(size, SERIES);
        // The measurements are only comparable if they do the same job: check it once.
        let got = exposition::parse(&page, &|n| wanted.contains(n))
            .map_err(|e| BenchError::part("parse", format!("generated page: {e}")))?;
        if got.len() != wanted_count {
            return Err(BenchError::part(
                "parse",
                format!(
                    "expected {wanted_count} wanted samples, parsed {}",
                    got.len()
                ),
            ));
        }
        let all = exposition::parse_all(&page)
            .map_err(|e| BenchError::part("parse", format!("generated page: {e}")))?;
        let min = plan.parse_min_time;
        let newline = throughput(page.len(), min, || {
            memchr::memchr_iter(b'\n', &page).count()
        });
        let adapter = throughput(page.len(), min, || {
            exposition::parse(&page, &|n| wanted.contains(n))
                .map(|v| v.len())
                .unwrap_or(0)
        });
        let parse_all = throughput(page.len(), min, || {
            exposition::parse_all(&page).map(|v| v.len()).unwrap_or(0)
        });
        pages_out.push(ParsePage {
            bytes: page.len(),
            series: all.len(),
            wanted_series: got.len(),
            newline_scan_mb_s: newline,
            adapter_mb_s: adapter,
            parse_all_mb_s: parse_all,
            ratio_to_limit: adapter / newline,
            speedup_over_parse_all: adapter / parse_all,
        });
    }
    Ok(ParseResult { pages: pages_out })
}
