//! A hand-written SVG of a simulation: replicas, the true recommendation and floor over time,
//! fault periods shaded, adapter restarts and violations marked.
//!
//! No plotting crate: the picture is a few paths and rectangles, and plain SVG keeps the output
//! diffable and viewable anywhere (GitHub renders it inline).

use std::fmt::Write as _;

use super::simulate::{fmt_t, Report};
use hpa_bridge_rules::clock::Millis;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 70.0;
const BOTTOM: f64 = 96.0;

const REPLICAS: &str = "#1f5fbf";
const RECOMMENDATION: &str = "#2e9e44";
const FLOOR: &str = "#c0392b";
const FAULT: &str = "#f5a623";
const UNKNOWN: &str = "#7f7f7f";
const BAND: &str = "#8e44ad";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A step path through `(t, value)` points; `None` values break the line.
fn step_path(
    points: &[(Millis, Option<f64>)],
    x: &dyn Fn(Millis) -> f64,
    y: &dyn Fn(f64) -> f64,
    end: Millis,
) -> String {
    let mut d = String::new();
    let mut prev: Option<f64> = None;
    for (i, (t, v)) in points.iter().enumerate() {
        match (prev, v) {
            (Some(p), Some(v)) => {
                let _ = write!(d, " H{:.1}", x(*t));
                if (p - v).abs() > f64::EPSILON {
                    let _ = write!(d, " V{:.1}", y(*v));
                }
            }
            (None, Some(v)) => {
                let _ = write!(d, " M{:.1},{:.1}", x(*t), y(*v));
            }
            (Some(_), None) => {
                let _ = write!(d, " H{:.1}", x(*t));
            }
            (None, None) => {}
        }
        prev = *v;
        if i + 1 == points.len() && v.is_some() {
            let _ = write!(d, " H{:.1}", x(end));
        }
    }
    d.trim().to_string()
}

/// Tick spacing for `span` that gives roughly `target` ticks.
fn nice_step(span: f64, target: f64, choices: &[f64]) -> f64 {
    let raw = span / target;
    choices
        .iter()
        .copied()
        .find(|c| *c >= raw)
        .unwrap_or(*choices.last().unwrap_or(&1.0))
}

/// The SVG document for one run.
pub fn render(report: &Report) -> String {
    let f = Frame::of(report);
    let (x, y) = (|t: Millis| f.x(t), |v: f64| f.y(v));
    let has_band = report.rows.iter().any(|r| r.band.is_some());
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    title(&mut s, report);
    fault_periods(&mut s, report, &x, f.plot_h, f.end);
    axes(&mut s, &f, &x, &y);
    unknown_strip(&mut s, report, &x, f.plot_h);
    restarts(&mut s, report, &x, f.plot_h);
    threshold_band(&mut s, report, &x, &y, f.end, has_band);
    truth_and_replicas(&mut s, report, &x, &y, f.end);
    violations(&mut s, report, &x, &y);
    legend(&mut s, report, has_band);
    s.push_str("</svg>\n");
    s
}

/// The plot area's size and scales: time from 0 to `end`, replicas from 0 to `y_max`.
struct Frame {
    end: Millis,
    plot_w: f64,
    plot_h: f64,
    y_max: f64,
}

impl Frame {
    fn of(report: &Report) -> Frame {
        let y_max = report
            .rows
            .iter()
            .flat_map(|r| {
                [
                    Some(i64::from(r.replicas)),
                    r.truth_recommendation,
                    Some(r.truth_floor),
                    r.truth_target,
                    r.band.map(|b| b.1),
                    r.served.map(|v| v.ceil() as i64),
                ]
            })
            .flatten()
            .chain(std::iter::once(i64::from(report.initial_replicas)))
            .max()
            .unwrap_or(1)
            .max(1) as f64
            + 1.0;
        Frame {
            end: report.duration.max(1),
            plot_w: WIDTH - LEFT - RIGHT,
            plot_h: HEIGHT - TOP - BOTTOM,
            y_max,
        }
    }

    fn x(&self, t: Millis) -> f64 {
        LEFT + self.plot_w * (t as f64 / self.end as f64)
    }

    fn y(&self, v: f64) -> f64 {
        TOP + self.plot_h * (1.0 - v / self.y_max)
    }
}

type Scale<'a, T> = &'a dyn Fn(T) -> f64;

/// The scenario's name and its description, wrapped onto at most two lines.
fn title(s: &mut String, report: &Report) {
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">hpa-bridge simulate: {}</text>"#,
        escape(&report.name)
    );
    // The description, wrapped onto at most two lines.
    let mut lines: Vec<String> = vec![String::new()];
    for word in report.description.split_whitespace() {
        let line = lines.last_mut().expect("one line");
        if !line.is_empty() && line.len() + word.len() + 1 > 135 {
            if lines.len() == 2 {
                lines[1].push('…');
                break;
            }
            lines.push(String::new());
        }
        let line = lines.last_mut().expect("one line");
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    for (i, line) in lines.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{LEFT}" y="{}" fill="#444">{}</text>"##,
            38 + 15 * i,
            escape(line)
        );
    }
}

/// Fault periods, shaded behind everything.
fn fault_periods(s: &mut String, report: &Report, x: Scale<Millis>, plot_h: f64, end: Millis) {
    for (i, f) in report.faults.iter().enumerate() {
        let (x0, x1) = (x(f.from.min(end)), x(f.to.min(end)));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{TOP}" width="{:.1}" height="{plot_h}" fill="{FAULT}" fill-opacity="0.18"><title>{}</title></rect>"#,
            (x1 - x0).max(1.0),
            escape(&f.label)
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#a0620a" font-size="11">{}</text>"##,
            x0 + 3.0,
            TOP + 12.0 + 12.0 * (i % 3) as f64,
            escape(&f.label)
        );
    }
}

/// Axes, grid and ticks.
fn axes(s: &mut String, f: &Frame, x: Scale<Millis>, y: Scale<f64>) {
    let (plot_w, plot_h, y_max, end) = (f.plot_w, f.plot_h, f.y_max, f.end);
    let y_step = nice_step(
        y_max,
        8.0,
        &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0],
    );
    let mut v = 0.0;
    while v <= y_max {
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            yy + 4.0
        );
        v += y_step;
    }
    let t_step = nice_step(
        end as f64,
        10.0,
        &[15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3],
    ) as Millis;
    let mut t = 0;
    while t <= end {
        let xx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{:.1}" stroke="#f0f0f0"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 16.0,
            fmt_t(t)
        );
        t += t_step;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="14" y="{:.1}" transform="rotate(-90 14 {:.1})" text-anchor="middle">replicas</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
}

/// Syncs whose scale-in inputs were unknown: a strip under the axis.
fn unknown_strip(s: &mut String, report: &Report, x: Scale<Millis>, plot_h: f64) {
    let strip_y = TOP + plot_h + 24.0;
    let sync_ms = hpa_bridge_hpa_model::SYNC_PERIOD.as_millis() as Millis;
    for r in report.rows.iter().filter(|r| !r.unknown.is_empty()) {
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{strip_y:.1}" width="{:.1}" height="6" fill="{UNKNOWN}"><title>{}: {}</title></rect>"#,
            x(r.t - sync_ms),
            (x(r.t) - x(r.t - sync_ms)).max(1.0),
            fmt_t(r.t),
            escape(&r.unknown.join("; "))
        );
    }
}

/// The adapter's restarts.
fn restarts(s: &mut String, report: &Report, x: Scale<Millis>, plot_h: f64) {
    for r in &report.restarts {
        let xx = x(*r);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{:.1}" stroke="#6a1b9a" stroke-dasharray="5,3" stroke-width="1.5"/><text x="{:.1}" y="{:.1}" fill="#6a1b9a" font-size="11">adapter restart</text>"##,
            TOP + plot_h,
            xx + 3.0,
            TOP + plot_h - 6.0
        );
    }
}

/// A threshold metric: the band [ceil(V/upPerReplica), ceil(V/downPerReplica)] of the load
/// the pods exported, shaded, and the value the adapter served.
fn threshold_band(
    s: &mut String,
    report: &Report,
    x: Scale<Millis>,
    y: Scale<f64>,
    end: Millis,
    has_band: bool,
) {
    if has_band {
        for (i, r) in report.rows.iter().enumerate() {
            let Some((lo, hi)) = r.band else { continue };
            let x0 = x(if i == 0 { 0 } else { report.rows[i - 1].t });
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{BAND}" fill-opacity="0.15"/>"#,
                y(hi as f64),
                (x(r.t) - x0).max(0.5),
                (y(lo as f64) - y(hi as f64)).max(0.5)
            );
        }
        let served: Vec<(Millis, Option<f64>)> =
            report.rows.iter().map(|r| (r.t, r.served)).collect();
        let _ = writeln!(
            s,
            r#"<path d="{}" fill="none" stroke="{BAND}" stroke-width="1.5" stroke-dasharray="4,2"/>"#,
            step_path(&served, &x, &y, end)
        );
    }
}

/// Lines: floor, recommendation, then replicas on top.
fn truth_and_replicas(
    s: &mut String,
    report: &Report,
    x: Scale<Millis>,
    y: Scale<f64>,
    end: Millis,
) {
    let floor: Vec<(Millis, Option<f64>)> = report
        .rows
        .iter()
        .map(|r| (r.t, Some(r.truth_floor as f64)))
        .collect();
    let rec: Vec<(Millis, Option<f64>)> = report
        .rows
        .iter()
        .map(|r| (r.t, r.truth_recommendation.map(|v| v as f64)))
        .collect();
    let mut replicas: Vec<(Millis, Option<f64>)> =
        vec![(0, Some(f64::from(report.initial_replicas)))];
    replicas.extend(
        report
            .rows
            .iter()
            .map(|r| (r.t, Some(f64::from(r.replicas)))),
    );
    let _ = writeln!(
        s,
        r#"<path d="{}" fill="none" stroke="{FLOOR}" stroke-width="2" stroke-dasharray="2,3"/>"#,
        step_path(&floor, &x, &y, end)
    );
    let _ = writeln!(
        s,
        r#"<path d="{}" fill="none" stroke="{RECOMMENDATION}" stroke-width="2" stroke-dasharray="7,4"/>"#,
        step_path(&rec, &x, &y, end)
    );
    let _ = writeln!(
        s,
        r#"<path d="{}" fill="none" stroke="{REPLICAS}" stroke-width="2.5"/>"#,
        step_path(&replicas, &x, &y, end)
    );
}

/// Each invariant violation, a cross on the replicas line.
fn violations(s: &mut String, report: &Report, x: Scale<Millis>, y: Scale<f64>) {
    for v in &report.violations {
        let (xx, row) = (x(v.t), report.rows.iter().find(|r| r.t == v.t));
        let yy = y(row.map(|r| f64::from(r.replicas)).unwrap_or(0.0));
        let _ = writeln!(
            s,
            r#"<g stroke="{FLOOR}" stroke-width="2.5"><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/><title>{} at {}: {}</title></g>"#,
            xx - 5.0,
            yy - 5.0,
            xx + 5.0,
            yy + 5.0,
            xx - 5.0,
            yy + 5.0,
            xx + 5.0,
            yy - 5.0,
            v.invariant,
            fmt_t(v.t),
            escape(&v.message)
        );
    }
}

/// The legend and the verdict.
fn legend(s: &mut String, report: &Report, has_band: bool) {
    let ly = HEIGHT - 30.0;
    let mut items: Vec<(&str, &str, &str)> = vec![
        (REPLICAS, "", "HPA replicas"),
        (RECOMMENDATION, "7,4", "recommendation (truth)"),
        (FLOOR, "2,3", "stateful floor (truth)"),
        (FAULT, "", "fault"),
        (UNKNOWN, "", "scale-in input unknown (strip)"),
    ];
    if has_band {
        // The recommendation line is empty for a load-driven scenario.
        items[1] = (BAND, "4,2", "served value");
        items.insert(2, (BAND, "band", "threshold band (truth)"));
    }
    let mut lx = LEFT;
    for (color, dash, label) in items {
        if color == FAULT || color == UNKNOWN || dash == "band" {
            let opacity = if color == FAULT {
                0.35
            } else if dash == "band" {
                0.3
            } else {
                1.0
            };
            let _ = writeln!(
                s,
                r#"<rect x="{lx:.1}" y="{:.1}" width="22" height="10" fill="{color}" fill-opacity="{opacity}"/>"#,
                ly - 9.0
            );
        } else {
            let _ = writeln!(
                s,
                r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2.5" stroke-dasharray="{dash}"/>"#,
                ly - 4.0,
                lx + 22.0,
                ly - 4.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{ly:.1}">{}</text>"#,
            lx + 27.0,
            escape(label)
        );
        lx += 27.0 + 6.3 * label.len() as f64 + 16.0;
    }
    let verdict = if report.passed() {
        "all invariants held".to_string()
    } else {
        format!("{} invariant violation(s)", report.violations.len())
    };
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{} syncs, {verdict}</text>"##,
        WIDTH - RIGHT,
        HEIGHT - 10.0,
        report.rows.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_path_breaks_on_unknown_values() {
        let x = |t: Millis| t as f64;
        let y = |v: f64| v;
        let d = step_path(
            &[(0, Some(1.0)), (10, Some(2.0)), (20, None), (30, Some(2.0))],
            &x,
            &y,
            40,
        );
        assert_eq!(d, "M0.0,1.0 H10.0 V2.0 H20.0 M30.0,2.0 H40.0");
    }
}
