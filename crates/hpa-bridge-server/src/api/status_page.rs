//! The status page at `/` on the metrics port, for a person: one row per workload with the
//! target served and why, a timeline of the served target, the recommendation, the floor and
//! the workload's `spec.replicas` (what the HPA applied) with refusal periods shaded (the
//! reason on hover) over a time axis relative to now, and the scrape targets' health.
//!
//! Pure: data in, HTML out. Server-rendered HTML and inline SVG, with no scripts, fonts or
//! stylesheets from anywhere (clusters often block egress), readable with JavaScript off, and
//! every value that came from a request, a label or an exporter escaped.

use std::fmt::Write;

use hpa_bridge_engine::engine::history::{Entry, Reply, ScopeHistory, HPA_CADENCE_MS};
use hpa_bridge_rules::clock::{rfc3339, Millis};

/// How often the page reloads itself (a `<meta http-equiv="refresh">`, no script).
pub const REFRESH_SECONDS: u32 = 15;

/// One scrape target's health, as the page shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetRow {
    pub id: String,
    pub healthy: bool,
    pub last_error: Option<String>,
    pub last_success_age_seconds: Option<f64>,
    pub consecutive_failures: u32,
}

/// Everything the page shows.
#[derive(Clone, Debug)]
pub struct Page<'a> {
    pub now_ms: Millis,
    pub retention_ms: Millis,
    pub ready: bool,
    pub scopes: &'a [ScopeHistory],
    pub tracked: usize,
    pub max_scopes: usize,
    pub dropped_scopes: u64,
    /// `None` when the active source has no scrape targets (the Prometheus source).
    pub targets: Option<&'a [TargetRow]>,
    /// The HPAs' panel (src/prediction/panel.rs), rendered; `None` when the adapter predicts
    /// no HPA (no Kubernetes discovery, or `--no-hpa-predictions`).
    pub hpas: Option<&'a str>,
}

/// `text` safe in HTML text and in a double- or single-quoted attribute, and shown as it is:
/// a control character (ESC, CR, ...) or a bidirectional control is written out as `\u{..}`.
/// Text from outside (a producer's reason, a label value) could otherwise move the cursor of a
/// terminal it is copied to, or reorder what a person reads (U+202E shows `1 ,8` for `8, 1`).
/// A character reference would not do: the browser decodes it back into the character.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if is_hidden_control(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// C0 and C1 controls and DEL; the Unicode bidirectional controls (UAX #9: the embeddings,
/// overrides and isolates, and the implicit marks); and the line and paragraph separators.
fn is_hidden_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// The text the HPA's Status error carries for a refusal, or the value and its reason.
pub fn row_text(h: &ScopeHistory) -> String {
    match h.entries.last().map(|e| &e.served) {
        Some(Reply::Refused { kind, .. }) => format!(
            "{} {}: {}",
            h.key.metric,
            super::wire::refusal_verb(*kind),
            h.last_reason
        ),
        Some(Reply::Value { value }) => format!("{value}: {}", h.last_reason),
        None => "no answer in the retained window".into(),
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin-bottom:2em}\
td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}\
.refused{color:#a40000;font-weight:600}.ok{color:#146c2e}\
.why{max-width:34em;overflow-wrap:break-word}code{overflow-wrap:anywhere;font-size:12px}\
svg{background:#fafafa;border:1px solid #ddd}.legend span{margin-right:1em}\
.dim{color:#777}";

/// Render the page.
pub fn render(page: &Page) -> String {
    let mut out = String::with_capacity(4096 + page.scopes.len() * 2048);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>hpa-bridge status</title><style>{STYLE}</style></head><body>\
         <h1>hpa-bridge</h1><p>{} &middot; {} &middot; {} of at most {} scopes tracked{} \
         &middot; refreshes every {REFRESH_SECONDS}s &middot; \
         <a href=\"/status\">/status</a> <a href=\"/status/history\">/status/history</a> \
         <a href=\"/metrics\">/metrics</a></p>",
        escape(&rfc3339(page.now_ms)),
        if page.ready {
            "ready"
        } else {
            "<span class=\"refused\">not ready</span>"
        },
        page.tracked,
        page.max_scopes,
        if page.dropped_scopes > 0 {
            format!(" ({} dropped by history.maxScopes)", page.dropped_scopes)
        } else {
            String::new()
        },
    );
    if let Some(hpas) = page.hpas {
        out.push_str(hpas);
    }
    out.push_str(
        "<h2>Workloads</h2><p class=\"legend\"><span style=\"color:#1f5fbf\">&#9473; served target</span>\
         <span style=\"color:#2e8b57\">&#9476; recommendation</span>\
         <span style=\"color:#b8860b\">&#9478; floor</span>\
         <span style=\"color:#8e44ad\">&#9472; spec.replicas (applied by the HPA)</span>\
         <span style=\"background:#f4c7c3\">&#160;refused&#160;</span> (hover a band for its reason)</p>",
    );
    if page.scopes.is_empty() {
        out.push_str("<p class=\"dim\">No HPA has asked yet.</p>");
    } else {
        out.push_str(
            "<table id=\"workloads\"><tr><th>namespace</th><th>workload (scope)</th><th>metric</th>\
             <th>target</th><th>timeline</th><th>why</th></tr>",
        );
        for h in page.scopes {
            row(&mut out, h, page);
        }
        out.push_str("</table>");
    }
    out.push_str("<h2>Scrape targets</h2>");
    match page.targets {
        None => out.push_str("<p class=\"dim\">The active source has no scrape targets.</p>"),
        Some([]) => out.push_str("<p class=\"dim\">No scrape targets.</p>"),
        Some(targets) => {
            out.push_str(
                "<table id=\"targets\"><tr><th>target</th><th>health</th><th>last success</th>\
                 <th>failures in a row</th><th>last error</th></tr>",
            );
            for t in targets {
                let _ = write!(
                    out,
                    "<tr class=\"target\"><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape(&t.id),
                    if t.healthy { "ok" } else { "refused" },
                    if t.healthy { "up" } else { "down" },
                    t.last_success_age_seconds
                        .map(|a| format!("{a:.0}s ago"))
                        .unwrap_or_else(|| "never".into()),
                    t.consecutive_failures,
                    escape(t.last_error.as_deref().unwrap_or("")),
                );
            }
            out.push_str("</table>");
        }
    }
    out.push_str("</body></html>\n");
    out
}

fn row(out: &mut String, h: &ScopeHistory, page: &Page) {
    let newest = h.entries.last();
    let refused = newest.is_some_and(Entry::is_refusal);
    let target = match newest.map(|e| &e.served) {
        Some(Reply::Value { value }) => value.to_string(),
        Some(Reply::Refused { .. }) => "refused".into(),
        None => "&#8212;".into(),
    };
    let _ = write!(
        out,
        "<tr class=\"workload{}\" data-namespace=\"{}\" data-workload=\"{}\" data-metric=\"{}\">\
         <td>{}</td><td>{}<br><code>{}</code></td><td>{}</td><td class=\"{}\">{}</td><td>",
        if refused { " refusing" } else { "" },
        escape(&h.key.namespace),
        escape(h.key.workload()),
        escape(&h.key.metric),
        escape(&h.key.namespace),
        escape(h.key.workload()),
        escape(&h.key.scope),
        escape(&h.key.metric),
        if refused { "refused" } else { "ok" },
        target,
    );
    timeline(out, &h.entries, page.now_ms, page.retention_ms);
    let _ = write!(
        out,
        "</td><td class=\"why\">{}{}{}",
        escape(&row_text(h)),
        producers(h),
        inputs(h)
    );
    out.push_str("</td></tr>");
}

/// One step line of the timeline and the value it draws.
struct Line {
    class: &'static str,
    colour: &'static str,
    /// `stroke-dasharray`, empty for a solid line.
    dash: &'static str,
    width: &'static str,
    value: fn(&Entry) -> Option<u64>,
}

/// Drawn in this order, so the served target is on top.
const LINES: [Line; 4] = [
    Line {
        class: "floor",
        colour: "#b8860b",
        dash: "2,3",
        width: "1",
        value: |e| e.floor,
    },
    Line {
        class: "recommendation",
        colour: "#2e8b57",
        dash: "6,3",
        width: "1",
        value: |e| e.recommendation,
    },
    Line {
        class: "spec-replicas",
        colour: "#8e44ad",
        dash: "",
        width: "3",
        value: |e| e.spec_replicas.map(u64::from),
    },
    Line {
        class: "served",
        colour: "#1f5fbf",
        dash: "",
        width: "2",
        value: Entry::value,
    },
];

/// Round steps for the time axis, shortest first.
const AXIS_STEPS_MS: [Millis; 18] = [
    1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
    1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
];

/// At most this many steps across the window, so the labels stay apart at the timeline's
/// width.
const MAX_AXIS_STEPS: Millis = 6;

/// One labelled tick of the time axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tick {
    /// How long before now.
    pub before_ms: Millis,
    /// `now`, or the time before now in the step's unit (`−30m`).
    pub label: String,
}

/// The ticks of a window of `retention_ms` ending now, oldest first: the shortest round step
/// that puts at most `MAX_AXIS_STEPS` steps across the window (whole days past the longest),
/// from now back to the window's start.
pub fn axis_ticks(retention_ms: Millis) -> Vec<Tick> {
    const DAY: Millis = 86_400_000;
    let retention_ms = retention_ms.max(0);
    let step = AXIS_STEPS_MS
        .iter()
        .copied()
        .find(|s| retention_ms / s <= MAX_AXIS_STEPS)
        .unwrap_or_else(|| {
            let days = MAX_AXIS_STEPS * DAY;
            retention_ms.saturating_add(days - 1) / days * DAY
        });
    let (unit, suffix) = [(DAY, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")]
        .into_iter()
        .find(|(u, _)| step % u == 0)
        .unwrap_or((1_000, "s"));
    (0..=retention_ms / step)
        .rev()
        .map(|k| Tick {
            before_ms: k * step,
            label: if k == 0 {
                "now".into()
            } else {
                format!("\u{2212}{}{suffix}", k * step / unit)
            },
        })
        .collect()
}

/// What the producers behind the newest answer said of their values, beside it.
fn producers(h: &ScopeHistory) -> String {
    let mut out = String::new();
    for r in &h.last_producer_reasons {
        let _ = write!(
            out,
            "<div class=\"producer\">producer {} says <q>{}</q></div>",
            escape(&r.target.0),
            escape(&r.reason)
        );
    }
    out
}

/// The newest answer's inputs, folded (`<details>` opens without JavaScript).
fn inputs(h: &ScopeHistory) -> String {
    if h.last_inputs.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<details><summary>{} input{}</summary><ul class=\"inputs\">",
        h.last_inputs_total,
        if h.last_inputs_total == 1 { "" } else { "s" }
    );
    for i in &h.last_inputs {
        let _ = write!(
            out,
            "<li><code>{}</code> = {} from {}: {}</li>",
            escape(&i.series),
            escape(&i.value),
            escape(&i.target),
            escape(&i.status),
        );
    }
    if h.last_inputs_total > h.last_inputs.len() {
        let _ = write!(
            out,
            "<li>and {} more</li>",
            h.last_inputs_total - h.last_inputs.len()
        );
    }
    out.push_str("</ul></details>");
    out
}

const WIDTH: f64 = 480.0;
const HEIGHT: f64 = 104.0;
/// The band below the plot that holds the time axis' labels.
const AXIS: f64 = 14.0;
/// The plot's bottom edge.
const PLOT: f64 = HEIGHT - AXIS;
const PAD: f64 = 4.0;

/// The timeline of one scope over the retention window ending now.
fn timeline(out: &mut String, entries: &[Entry], now: Millis, retention_ms: Millis) {
    let start = now.saturating_sub(retention_ms);
    let span = retention_ms.max(1) as f64;
    let x =
        |t: Millis| PAD + (t.saturating_sub(start) as f64 / span).min(1.0) * (WIDTH - 2.0 * PAD);
    let top = entries
        .iter()
        .flat_map(|e| LINES.iter().map(|l| (l.value)(e)))
        .flatten()
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let y = |v: u64| PLOT - PAD - (v as f64 / top) * (PLOT - 2.0 * PAD - 12.0);
    let _ = write!(
        out,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\"><title>answers over the last {}</title>\
         <text x=\"{PAD}\" y=\"11\" font-size=\"10\" fill=\"#777\">max {top}</text>",
        hpa_bridge_rules::config::HumanDuration(std::time::Duration::from_millis(retention_ms.max(0) as u64)),
    );
    axis(out, now, retention_ms, &x);
    // Where each entry's period ends: the next entry, or one HPA sync after it for the newest.
    let end_of = |i: usize| -> Millis {
        entries
            .get(i + 1)
            .map(|n| n.at_ms)
            .unwrap_or_else(|| (entries[i].at_ms + HPA_CADENCE_MS).min(now.max(entries[i].at_ms)))
    };
    // Refusal bands: one per run of consecutive refusals, with the run's first reason.
    let mut i = 0;
    while i < entries.len() {
        if let Reply::Refused { kind, reason } = &entries[i].served {
            let begin = entries[i].at_ms;
            let mut j = i;
            while entries
                .get(j + 1)
                .is_some_and(|n| matches!(&n.served, Reply::Refused { kind: k, .. } if k == kind))
            {
                j += 1;
            }
            let (x0, x1) = (x(begin), x(end_of(j)).max(x(begin) + 1.0));
            let _ = write!(
                out,
                "<rect class=\"refusal\" data-kind=\"{kind:?}\" x=\"{x0:.1}\" y=\"0\" width=\"{:.1}\" height=\"{PLOT}\" fill=\"#f4c7c3\">\
                 <title>{} to {}: refused ({kind:?}): {}</title></rect>",
                x1 - x0,
                escape(&rfc3339(begin)),
                escape(&rfc3339(end_of(j))),
                escape(reason),
            );
            i = j + 1;
        } else {
            i += 1;
        }
    }
    for line in &LINES {
        let path = step_path(entries, line.value, &x, &y, &end_of);
        if path.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<path class=\"{}\" d=\"{path}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}/>",
            line.class,
            line.colour,
            line.width,
            if line.dash.is_empty() {
                String::new()
            } else {
                format!(" stroke-dasharray=\"{}\"", line.dash)
            },
        );
    }
    out.push_str("</svg>");
}

/// The time axis: a faint line across the plot at each tick and its label below it.
fn axis(out: &mut String, now: Millis, retention_ms: Millis, x: &impl Fn(Millis) -> f64) {
    let ticks = axis_ticks(retention_ms);
    let mut lines = String::new();
    for t in &ticks {
        let _ = write!(lines, "M{:.0},0V{}", x(now - t.before_ms), PLOT + 3.0);
    }
    let _ = write!(
        out,
        "<g class=\"axis\" font-size=\"9\" fill=\"#777\"><path d=\"{lines}\" stroke=\"#e2e2e2\"/>"
    );
    for t in &ticks {
        let at = x(now - t.before_ms);
        let anchor = if at < 20.0 {
            "start"
        } else if at > WIDTH - 20.0 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            out,
            "<text class=\"tick\" x=\"{at:.0}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            HEIGHT - 3.0,
            escape(&t.label),
        );
    }
    out.push_str("</g>");
}

/// One step line's SVG path over `entries`: a run of one value is one horizontal segment, a
/// change a vertical step, and an entry without a value (a refusal, an unknown input) a gap,
/// so nothing is drawn where the value is not known. Whole pixels keep the page for many
/// scopes small.
fn step_path(
    entries: &[Entry],
    value: fn(&Entry) -> Option<u64>,
    x: &impl Fn(Millis) -> f64,
    y: &impl Fn(u64) -> f64,
    end_of: &impl Fn(usize) -> Millis,
) -> String {
    let mut path = String::new();
    // The pen's (y, end x) while drawing.
    let mut pen: Option<(i64, i64)> = None;
    for (i, e) in entries.iter().enumerate() {
        match value(e) {
            Some(v) => {
                let (x0, x1, yv) = (
                    x(e.at_ms).round() as i64,
                    x(end_of(i)).round() as i64,
                    y(v).round() as i64,
                );
                match pen {
                    Some((py, _)) if py == yv => {}
                    Some((_, end)) => {
                        let _ = write!(path, "H{end}V{yv}");
                    }
                    None => {
                        let _ = write!(path, "M{x0},{yv}");
                    }
                }
                pen = Some((yv, x1));
            }
            None => {
                if let Some((_, end)) = pen.take() {
                    let _ = write!(path, "H{end}");
                }
            }
        }
    }
    if let Some((_, end)) = pen {
        let _ = write!(path, "H{end}");
    }
    path
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use hpa_bridge_engine::engine::history::{HistoryKey, InputCounts};
    use hpa_bridge_rules::policy::RefusalKind;

    fn entry(at_ms: Millis, served: Reply, rec: Option<u64>, floor: Option<u64>) -> Entry {
        Entry {
            at_ms,
            served,
            recommendation: rec,
            floor,
            inputs: InputCounts::default(),
            spec_replicas: None,
        }
    }

    fn refused(reason: &str) -> Reply {
        Reply::Refused {
            kind: RefusalKind::Stale,
            reason: Arc::from(reason),
        }
    }

    fn scope(workload: &str, entries: Vec<Entry>, last_reason: &str) -> ScopeHistory {
        ScopeHistory {
            key: HistoryKey {
                metric: "hpa_target_replicas".into(),
                namespace: "games".into(),
                scope: format!("hpa_target_name={workload}"),
            },
            entries,
            last_reason: last_reason.into(),
            last_inputs: Vec::new(),
            last_inputs_total: 0,
            last_producer_reasons: Vec::new(),
        }
    }

    fn page<'a>(scopes: &'a [ScopeHistory], targets: Option<&'a [TargetRow]>) -> String {
        render(&Page {
            now_ms: 3_600_000,
            retention_ms: 3_600_000,
            ready: true,
            scopes,
            tracked: scopes.len(),
            max_scopes: 1000,
            dropped_scopes: 0,
            targets,
            hpas: None,
        })
    }

    #[test]
    fn escape_writes_out_controls_and_bidirectional_overrides() {
        let reason = "ok\u{1b}[2J\rdone \u{202e}8 ,1\u{202c} \u{2066}x\u{2069}\u{200f}\u{85}\u{7f}\u{2028}\t\n";
        let shown = escape(reason);
        assert_eq!(
            shown,
            "ok\\u{001b}[2J\\u{000d}done \\u{202e}8 ,1\\u{202c} \\u{2066}x\\u{2069}\\u{200f}\\u{0085}\\u{007f}\\u{2028}\\u{0009}\\u{000a}"
        );
        assert!(!shown.chars().any(is_hidden_control), "{shown:?}");
        // Other text, any script, stays as it is.
        assert_eq!(escape("Größe 5 — ٣ 工作"), "Größe 5 — ٣ 工作");
    }

    #[test]
    fn escape_covers_text_and_attributes() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn every_value_from_outside_is_escaped() {
        let evil = "<script>alert(1)</script>";
        let mut s = scope(
            evil,
            vec![entry(3_000_000, refused(evil), Some(1), None)],
            evil,
        );
        s.key.namespace = format!("ns\"{evil}");
        s.last_inputs = vec![hpa_bridge_engine::engine::history::InputSummary {
            target: evil.into(),
            series: format!("x{{note=\"{evil}\"}}"),
            value: evil.into(),
            status: evil.into(),
        }];
        s.last_inputs_total = 9;
        s.last_producer_reasons = vec![hpa_bridge_rules::evidence::ProducerReason {
            target: hpa_bridge_rules::evidence::TargetId(evil.into()),
            reason: evil.into(),
        }];
        s.key.metric = format!("m'{evil}");
        let targets = [TargetRow {
            id: format!("http://x/{evil}"),
            healthy: false,
            last_error: Some(evil.into()),
            last_success_age_seconds: None,
            consecutive_failures: 3,
        }];
        let html = page(std::slice::from_ref(&s), Some(&targets));
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("\"ns\""), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("<summary>9 inputs</summary>"), "{html}");
        assert!(html.contains("<li>and 8 more</li>"), "{html}");
        assert!(
            html.contains("says <q>&lt;script&gt;alert(1)&lt;/script&gt;</q>"),
            "{html}"
        );
        // No external resource of any kind, and no script.
        for banned in [
            "src=",
            "<link",
            "@import",
            "url(",
            "http://fonts",
            "https://",
        ] {
            assert!(!html.contains(banned), "{banned} in {html}");
        }
    }

    #[test]
    fn a_row_shows_the_target_and_the_status_error_text_and_refusal_bands() {
        let s = scope(
            "lobby",
            vec![
                entry(3_000_000, Reply::Value { value: 4 }, Some(2), Some(4)),
                entry(3_015_000, refused("lobby-1 is stale"), None, Some(4)),
                entry(3_030_000, refused("lobby-1 is stale"), None, Some(4)),
                entry(3_045_000, Reply::Value { value: 5 }, Some(5), Some(4)),
                entry(3_060_000, refused("gone again"), None, None),
            ],
            "no series of x match y",
        );
        let html = page(std::slice::from_ref(&s), None);
        assert!(html.contains("class=\"workload refusing\""), "{html}");
        assert!(html.contains("hpa_target_replicas is stale: no series of x match y"));
        assert_eq!(html.matches("<rect class=\"refusal\"").count(), 2, "{html}");
        assert!(html.contains("refused (Stale): lobby-1 is stale</title>"));
        assert!(html.contains("<path class=\"served\""));
        assert!(html.contains("<path class=\"recommendation\""));
        assert!(html.contains("<path class=\"floor\""));
        assert!(html.contains("<meta http-equiv=\"refresh\" content=\"15\">"));
        assert!(html.contains("The active source has no scrape targets"));
        let ok = scope(
            "shop",
            vec![entry(3_000_000, Reply::Value { value: 3 }, Some(3), None)],
            "max of 1 fresh series",
        );
        let html = page(std::slice::from_ref(&ok), Some(&[]));
        assert!(html.contains("3: max of 1 fresh series"));
        assert!(!html.contains("<rect class=\"refusal\""));
    }

    #[test]
    fn a_run_of_one_value_is_one_segment_and_a_change_one_step() {
        let mut entries: Vec<Entry> = (0..200)
            .map(|i| entry(3_000_000 + i * 3_000, Reply::Value { value: 3 }, None, None))
            .collect();
        entries.push(entry(3_600_000, Reply::Value { value: 6 }, None, None));
        let mut out = String::new();
        timeline(&mut out, &entries, 3_600_000, 3_600_000);
        let d = out
            .split("<path class=\"served\" d=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap();
        assert_eq!(d.matches('M').count(), 1, "{d}");
        assert_eq!(d.matches('V').count(), 1, "{d}");
        assert_eq!(d.matches('H').count(), 2, "{d}");
    }

    fn labels(retention_ms: Millis) -> Vec<(Millis, String)> {
        axis_ticks(retention_ms)
            .into_iter()
            .map(|t| (t.before_ms, t.label))
            .collect()
    }

    #[test]
    fn the_axis_takes_the_shortest_round_step_that_fits_the_window() {
        let m = |n: Millis| n * 60_000;
        assert_eq!(
            labels(m(60)),
            [
                (m(60), "\u{2212}60m".to_string()),
                (m(50), "\u{2212}50m".into()),
                (m(40), "\u{2212}40m".into()),
                (m(30), "\u{2212}30m".into()),
                (m(20), "\u{2212}20m".into()),
                (m(10), "\u{2212}10m".into()),
                (0, "now".into()),
            ]
        );
        // A window that is not a whole number of steps: the oldest tick is inside it.
        assert_eq!(
            labels(45_000),
            [
                (40_000, "\u{2212}40s".to_string()),
                (30_000, "\u{2212}30s".into()),
                (20_000, "\u{2212}20s".into()),
                (10_000, "\u{2212}10s".into()),
                (0, "now".into()),
            ]
        );
        let steps = |r: Millis| {
            let t = axis_ticks(r);
            (
                t.len(),
                t[t.len() - 2].before_ms,
                t[t.len() - 2].label.clone(),
            )
        };
        assert_eq!(steps(m(90)), (7, m(15), "\u{2212}15m".into()));
        assert_eq!(steps(m(24 * 60)), (5, m(360), "\u{2212}6h".into()));
        // Past the longest round step: whole days.
        assert_eq!(
            steps(m(30 * 24 * 60)),
            (7, m(5 * 24 * 60), "\u{2212}5d".into())
        );
        // A window too short for a step, or none: only now.
        assert_eq!(labels(500), [(0, "now".to_string())]);
        assert_eq!(labels(-5), [(0, "now".to_string())]);
        for r in [1, 999, 45_000, m(60), m(7 * 24 * 60), m(365 * 24 * 60)] {
            let t = axis_ticks(r);
            assert!(t.len() <= MAX_AXIS_STEPS as usize + 1, "{r}: {t:?}");
            assert!(
                t.iter().all(|t| (0..=r).contains(&t.before_ms)),
                "{r}: {t:?}"
            );
        }
    }

    #[test]
    fn the_timeline_draws_its_axis_ticks() {
        let mut out = String::new();
        timeline(&mut out, &[], 3_600_000, 3_600_000);
        assert_eq!(out.matches("<text class=\"tick\"").count(), 7, "{out}");
        assert!(
            out.contains("text-anchor=\"start\">\u{2212}60m</text>"),
            "{out}"
        );
        assert!(
            out.contains("x=\"240\" y=\"101\" text-anchor=\"middle\">\u{2212}30m</text>"),
            "{out}"
        );
        assert!(
            out.contains("x=\"476\" y=\"101\" text-anchor=\"end\">now</text>"),
            "{out}"
        );
    }

    #[test]
    fn spec_replicas_is_a_step_line_with_gaps_where_unknown() {
        let replicas = [None, Some(3), Some(3), Some(5), None, Some(4)];
        let entries: Vec<Entry> = replicas
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut e = entry(i as Millis * 100, Reply::Value { value: 5 }, None, None);
                e.spec_replicas = *r;
                e
            })
            .collect();
        // One pixel per time unit and per replica, so the points read as the values.
        let path = step_path(
            &entries,
            |e| e.spec_replicas.map(u64::from),
            &|t| t as f64 / 100.0,
            &|v| 10.0 - v as f64,
            &|i| i as Millis * 100 + 100,
        );
        // Unknown at 0 and 4: nothing drawn there; 3 from 1 to 3, 5 from 3 to 4, 4 from 5 to 6.
        assert_eq!(path, "M1,7H3V5H4M5,6H6");
        // Unknown everywhere: no line at all, and the page draws none.
        let none: Vec<Entry> = entries
            .iter()
            .cloned()
            .map(|mut e| {
                e.spec_replicas = None;
                e
            })
            .collect();
        let mut out = String::new();
        timeline(&mut out, &none, 3_600_000, 3_600_000);
        assert!(!out.contains("spec-replicas"), "{out}");
        let mut out = String::new();
        timeline(&mut out, &entries, 3_600_000, 3_600_000);
        assert_eq!(
            out.matches("<path class=\"spec-replicas\"").count(),
            1,
            "{out}"
        );
        assert!(page(&[], None).contains("spec.replicas (applied by the HPA)"));
    }

    #[test]
    fn an_empty_history_renders() {
        let html = page(&[], None);
        assert!(html.contains("No HPA has asked yet"));
        assert!(html.ends_with("</html>\n"));
    }
}
