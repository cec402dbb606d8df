//! `explain -o text`: the explanation as a short table a person reads in five seconds, the
//! "why" sentence first.

use std::fmt::Write as _;

use super::explanation::Explanation;

/// The lines the adapter's own prediction adds (its `/status` `hpas` entry): shadow mode's
/// "would", and how the adapter's predictions of this HPA fared.
pub fn render_adapter_view(view: &serde_json::Value) -> String {
    let mut out = String::new();
    let shadow = &view["shadow"];
    if let Some(metric) = shadow["metric"].as_str() {
        match shadow["explanation"]["next"].as_object() {
            Some(next) => {
                let _ = writeln!(
                    out,
                    "\nShadow mode, as if it also read {metric} (nothing is served to it): {}",
                    next.get("why").and_then(|w| w.as_str()).unwrap_or_default()
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "\nShadow mode with {metric}: {}",
                    shadow["error"].as_str().unwrap_or("not explained")
                );
            }
        }
    }
    let p = &view["prediction"];
    if let (Some(hits), Some(misses)) = (p["hits"].as_u64(), p["misses"].as_u64()) {
        let _ = writeln!(
            out,
            "The adapter's predictions of this HPA: {hits} hit, {misses} missed ({} in a row).",
            p["missesInARow"].as_u64().unwrap_or(0)
        );
    }
    out
}

/// The text form of an explanation.
pub fn render(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", e.next.why);
    let _ = writeln!(
        out,
        "\nHPA {}  ->  {}/{}  (spec.replicas {}, status.replicas {})",
        e.hpa,
        e.scale_target.kind,
        e.scale_target.name,
        e.scale_target.spec_replicas,
        e.scale_target.status_replicas
    );
    let rows: Vec<[String; 6]> = e
        .metrics
        .iter()
        .map(|m| {
            [
                format!(
                    "{}{}",
                    m.name,
                    if Some(&m.name) == e.winner.as_ref() {
                        " *"
                    } else {
                        ""
                    }
                ),
                m.metric_type.clone(),
                m.value.clone().unwrap_or_else(|| "-".into()),
                m.target.clone(),
                m.proposed_replicas
                    .map(|p| format!("{p}{}", if m.exact { "" } else { "~" }))
                    .unwrap_or_else(|| "invalid".into()),
                format!("{}: {}", m.source, m.reason),
            ]
        })
        .collect();
    let header = ["METRIC", "TYPE", "VALUE", "TARGET", "PROPOSES", "WHY"];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()).take(5) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i < 5 {
                let _ = write!(l, "{c:<w$}  ", w = widths[i]);
            } else {
                l.push_str(c);
            }
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(out, "\n{}", line(header));
    for r in &rows {
        let _ = writeln!(
            out,
            "{}",
            line([
                r[0].as_str(),
                r[1].as_str(),
                r[2].as_str(),
                r[3].as_str(),
                r[4].as_str(),
                r[5].as_str(),
            ])
        );
    }
    let opt = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "\nproposed {}  ->  stabilized {}  ->  rate {}  ->  [min {}, max {}]{}  ->  next {} (by {})",
        opt(e.proposed),
        opt(e.before_clamp),
        if e.rate_limit.applied { "limited" } else { "ok" },
        e.clamp.min,
        e.clamp.max,
        if e.clamp.applied { " clamped" } else { "" },
        e.next.desired_replicas,
        e.next.at
    );
    let recs: Vec<String> = e
        .stabilization
        .recommendations
        .iter()
        .map(|r| format!("{} at {}", r.replicas, r.at))
        .collect();
    let _ = writeln!(
        out,
        "stabilization window {} s: {}{}",
        e.stabilization.window_seconds,
        if recs.is_empty() {
            "-".into()
        } else {
            recs.join(", ")
        },
        e.stabilization
            .blocks_until
            .as_ref()
            .map(|t| format!("; holds the scale-in until {t}"))
            .unwrap_or_default()
    );
    if let Some(p) = &e.rate_limit.policy {
        let _ = writeln!(
            out,
            "rate policy: {p}{}",
            if e.rate_limit.applied {
                " (limits this sync)"
            } else {
                ""
            }
        );
    }
    for n in &e.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for u in &e.unseen {
        let _ = writeln!(out, "could not see: {u}");
    }
    out
}
