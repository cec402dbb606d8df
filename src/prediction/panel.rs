//! The status page's panel per HPA (docs/explain.md, "In the adapter"): what the HPA will do
//! next and why, each metric's proposal, when a held scale-in unblocks, how the adapter's
//! predictions of it fared, and in shadow mode what it would do beside what it does.

use std::fmt::Write as _;

use super::board::{HpaPrediction, Predictions};
use crate::explain::Explanation;
use hpa_bridge_server::api::status_page::escape;

/// The "HPAs" section of the status page, as the page shows it now.
pub fn html(predictions: &Predictions) -> String {
    let mut out = String::new();
    render(&mut out, &predictions.entries());
    out
}

/// The "HPAs" section: one row per predicted HPA.
pub fn render(out: &mut String, hpas: &[HpaPrediction]) {
    out.push_str("<h2>HPAs</h2>");
    if hpas.is_empty() {
        out.push_str(
            "<p class=\"dim\">No HPA reads hpa-bridge's metrics or is annotated \
             hpa-bridge.io/shadow-metric.</p>",
        );
        return;
    }
    out.push_str(
        "<table id=\"hpas\"><tr><th>HPA</th><th>target</th><th>next</th><th>why</th>\
         <th>metrics</th><th>predictions</th></tr>",
    );
    for p in hpas {
        let _ = write!(
            out,
            "<tr class=\"hpa\" data-namespace=\"{}\" data-hpa=\"{}\"><td>{}/{}</td>",
            escape(&p.namespace),
            escape(&p.name),
            escape(&p.namespace),
            escape(&p.name),
        );
        match &p.explanation {
            Ok(e) => explained(out, e),
            Err(why) => {
                let _ = write!(
                    out,
                    "<td></td><td></td><td class=\"refused\">not explained: {}</td><td></td>",
                    escape(why)
                );
            }
        }
        let c = &p.check;
        let _ = write!(
            out,
            "<td class=\"check\">{} hit, {} missed{}</td></tr>",
            c.hits,
            c.misses,
            match (c.predicted, c.actual) {
                (Some(want), Some(got)) if c.misses_in_a_row > 0 => format!(
                    "<br><span class=\"refused\">{} in a row: predicted {want}, the HPA set {got}</span>",
                    c.misses_in_a_row
                ),
                _ => String::new(),
            }
        );
        if let Some((metric, shadow)) = &p.shadow {
            let _ = write!(
                out,
                "<tr class=\"shadow\"><td class=\"dim\">shadow: with {}</td>",
                escape(metric)
            );
            match shadow {
                Ok(e) => explained(out, e),
                Err(why) => {
                    let _ = write!(
                        out,
                        "<td></td><td></td><td class=\"refused\">{}</td><td></td>",
                        escape(why)
                    );
                }
            }
            out.push_str("<td class=\"dim\">nothing served, nothing changed</td></tr>");
        }
    }
    out.push_str("</table>");
}

/// The target, next, why and metrics cells of one explanation.
fn explained(out: &mut String, e: &Explanation) {
    let t = &e.scale_target;
    let _ = write!(
        out,
        "<td>{} {}<br><span class=\"dim\">spec {} · status {}</span></td>\
         <td class=\"next\"><b>{}</b><br><span class=\"dim\">at {}</span></td><td class=\"why\">{}",
        escape(&t.kind),
        escape(&t.name),
        t.spec_replicas,
        t.status_replicas,
        e.next.desired_replicas,
        escape(&e.next.at),
        escape(&e.next.why),
    );
    if let Some(until) = &e.stabilization.blocks_until {
        let _ = write!(
            out,
            "<br><span class=\"unblocks\">scale-in unblocks at {}</span>",
            escape(until)
        );
    }
    for n in &e.notes {
        let _ = write!(out, "<br><span class=\"dim\">{}</span>", escape(n));
    }
    out.push_str("</td><td><ul class=\"proposals\">");
    for m in &e.metrics {
        let proposal = match (m.valid, m.proposed_replicas) {
            (true, Some(r)) => format!("&#8594; {r}"),
            _ => "<span class=\"refused\">invalid</span>".into(),
        };
        let _ = write!(
            out,
            "<li><code>{}</code> {} {} (target {}) {}{}</li>",
            escape(&m.name),
            escape(&m.metric_type),
            escape(m.value.as_deref().unwrap_or("?")),
            escape(&m.target),
            proposal,
            if e.winner.as_deref() == Some(m.name.as_str()) {
                " <b>decides</b>"
            } else {
                ""
            },
        );
        if !m.valid {
            let _ = write!(out, "<br><span class=\"dim\">{}</span>", escape(&m.reason));
        }
    }
    out.push_str("</ul></td>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::explain;
    use crate::prediction::shadow::shadowed;
    use crate::prediction::shadow::tests::{answer, cpu_hpa, observation};
    use crate::prediction::{Pending, PredictionCheck};

    /// A shadowed CPU HPA: its next move, each metric's proposal, what it would do with the
    /// metric, and a miss in a row; text from outside is escaped.
    #[test]
    fn the_panel_shows_the_next_move_the_proposals_the_shadow_and_the_misses() {
        let obs = observation(cpu_hpa(Some("hpa_target_replicas")));
        let mut p = HpaPrediction::new("games", "lobby<script>");
        p.explanation = Ok(explain(&obs).unwrap());
        let shadow = shadowed(&obs, "hpa_target_replicas", answer(Some(5))).unwrap();
        p.shadow = Some(("hpa_target_replicas".into(), Ok(explain(&shadow).unwrap())));
        let mut check = PredictionCheck::default();
        check.record(
            Pending {
                desired: 3,
                due_ms: 0,
                period_ms: 15_000,
            },
            2,
            10_000,
        );
        p.check = check;
        let mut html = String::new();
        render(&mut html, &[p]);
        assert!(html.contains("data-hpa=\"lobby&lt;script&gt;\""), "{html}");
        assert!(html.contains("<td class=\"next\"><b>2</b>"), "{html}");
        assert!(html.contains("<code>cpu</code>"), "{html}");
        assert!(
            html.contains(
                "<tr class=\"shadow\"><td class=\"dim\">shadow: with hpa_target_replicas</td>"
            ),
            "{html}"
        );
        assert!(html.contains("<td class=\"next\"><b>4</b>"), "{html}");
        assert!(html.contains("<code>hpa_target_replicas</code> Object 5 (target AverageValue 1) &#8594; 5 <b>decides</b>"), "{html}");
        assert!(html.contains("0 hit, 1 missed"), "{html}");
        assert!(
            html.contains("1 in a row: predicted 3, the HPA set 2"),
            "{html}"
        );
        assert!(!html.contains("<script>"), "{html}");

        let mut empty = String::new();
        render(&mut empty, &[]);
        assert!(empty.contains("No HPA reads"), "{empty}");
    }
}
