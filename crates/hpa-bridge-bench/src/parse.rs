//! The scrape parser's skip path against the practical limit: finding every newline.
use serde::Serialize;

use super::throughput::throughputs;
use super::{pages, BenchError, Plan};
use hpa_bridge_exposition as exposition;
use hpa_bridge_rules::config::Config;

/// Series per page, as the issue states (~5,000 of which ~10 are wanted).
pub const SERIES: usize = 5000;

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParsePage {
    pub bytes: usize,
    pub series: usize,
    pub wanted_series: usize,
    /// Finding every newline with `memchr` (the faster of `memchr_iter().count()` and one
    /// `memchr` call per line): no parser can skip lines faster than it finds them.
    pub newline_scan_mb_s: f64,
    /// `exposition::parse` with the adapter's wanted set, as the scraper calls it.
    pub adapter_mb_s: f64,
    /// `exposition::parse_all`: every line parsed in full.
    pub parse_all_mb_s: f64,
    pub ratio_to_limit: f64,
    pub speedup_over_parse_all: f64,
}

/// A page of nothing but the worst lines the limits admit (issue: quadratic label parsing).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdversarialPage {
    pub bytes: usize,
    pub lines: usize,
    pub labels_per_line: usize,
    pub line_bytes_limit: usize,
    pub newline_scan_mb_s: f64,
    pub adapter_mb_s: f64,
    pub ratio_to_limit: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParseResult {
    pub pages: Vec<ParsePage>,
    pub adversarial: Vec<AdversarialPage>,
    /// The JSON source's parse: a status document, then a deeply nested and a very wide one.
    pub json: Vec<super::json_parse::JsonDocument>,
}

/// The faster of two ways to find every newline of `page`: no parser skips lines faster.
fn newline_scans(page: &[u8]) -> [Box<dyn Fn() -> usize + '_>; 2] {
    let counted = move || memchr::memchr_iter(b'\n', page).count();
    let stepped = move || {
        let (mut lines, mut pos) = (0, 0);
        while let Some(i) = memchr::memchr(b'\n', &page[pos..]) {
            lines += 1;
            pos += i + 1;
        }
        lines
    };
    [Box::new(counted), Box::new(stepped)]
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
        let [counted, stepped] = newline_scans(&page);
        let adapter = || {
            exposition::parse(&page, &|n| wanted.contains(n))
                .map(|v| v.len())
                .unwrap_or(0)
        };
        let full = || exposition::parse_all(&page).map(|v| v.len()).unwrap_or(0);
        let [counted, stepped, adapter, parse_all] = throughputs(
            page.len(),
            plan.parse_min_time,
            [&*counted, &*stepped, &adapter, &full],
        );
        let newline = counted.max(stepped);
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
    let adversarial = plan
        .parse_sizes
        .iter()
        .map(|&size| adversarial(plan, size))
        .collect::<Result<_, _>>()?;
    Ok(ParseResult {
        pages: pages_out,
        adversarial,
        json: super::json_parse::run(plan)?,
    })
}

/// Throughput on a page of only maximal lines, with the adapter's default limits and the
/// parser's entry point the scraper uses (`parse_with`, limits and cancellation on).
fn adversarial(plan: &Plan, size: usize) -> Result<AdversarialPage, BenchError> {
    let limits = exposition::Limits::DEFAULT;
    let (page, lines) =
        pages::adversarial_page(size, limits.max_labels_per_series, limits.max_line_bytes);
    let config = Config::from_yaml("").map_err(|e| BenchError::part("parse", e))?;
    let wanted = config.wanted_series();
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let options = exposition::Options {
        format: exposition::Format::default(),
        limits,
        cancel: Some(&cancel),
    };
    let parse = || {
        exposition::parse_with(&page, &|n| wanted.contains(n), &options)
            .map(|v| v.len())
            .unwrap_or(0)
    };
    // Every line must be admitted and parsed, or the figure would measure a refusal.
    if parse() != lines {
        let e = exposition::parse_with(&page, &|n| wanted.contains(n), &options).err();
        return Err(BenchError::part(
            "parse",
            format!("the adversarial page was not parsed in full ({lines} lines): {e:?}"),
        ));
    }
    let [counted, stepped] = newline_scans(&page);
    let [counted, stepped, adapter] = throughputs(
        page.len(),
        plan.parse_min_time,
        [&*counted, &*stepped, &parse],
    );
    let newline = counted.max(stepped);
    Ok(AdversarialPage {
        bytes: page.len(),
        lines,
        labels_per_line: limits.max_labels_per_series,
        line_bytes_limit: limits.max_line_bytes,
        newline_scan_mb_s: newline,
        adapter_mb_s: adapter,
        ratio_to_limit: adapter / newline,
    })
}
