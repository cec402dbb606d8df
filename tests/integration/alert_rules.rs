//! The alert rules of manifests/monitoring, checked by the real rule engine: `promtool check
//! rules` on rules.yaml, `promtool test rules` on rules.test.yaml (every alert fires in one case
//! and stays quiet in another), the PrometheusRule carrying exactly the same groups, every alert
//! with a summary, a description naming the workload or instance, and a runbook section.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn monitoring() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests/monitoring")
}

fn yaml(name: &str) -> Value {
    let text = std::fs::read_to_string(monitoring().join(name)).unwrap();
    yaml_serde::from_str(&text).unwrap()
}

fn promtool(args: &[&str]) -> String {
    let promtool = common::peers::promtool();
    let out = Command::new(&promtool)
        .args(args)
        .current_dir(monitoring())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", promtool.display()));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{report}");
    report
}

fn alerts(rules: &Value) -> Vec<&Value> {
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter(|r| r.get("alert").is_some())
        .collect()
}

#[test]
fn the_rules_pass_promtool_check() {
    let report = promtool(&["check", "rules", "rules.yaml"]);
    assert!(report.contains("SUCCESS: 6 rules found"), "{report}");
}

#[test]
fn every_alert_fires_and_stays_quiet_under_promtool_test() {
    let report = promtool(&["test", "rules", "rules.test.yaml"]);
    assert!(report.contains("SUCCESS"), "{report}");
    // Each alert has a firing case (exp_alerts non-empty) and a quiet one (exp_alerts empty).
    let tests = yaml("rules.test.yaml");
    for alert in alerts(&yaml("rules.yaml")) {
        let name = alert["alert"].as_str().unwrap();
        let cases: Vec<&Value> = tests["tests"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
            .filter(|c| c["alertname"] == name)
            .collect();
        let firing = cases
            .iter()
            .any(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()));
        let quiet = cases
            .iter()
            .any(|c| c["exp_alerts"].as_array().is_some_and(|a| a.is_empty()));
        assert!(firing && quiet, "{name}: firing {firing}, quiet {quiet}");
    }
}

#[test]
fn the_prometheus_rule_holds_the_same_groups_and_every_alert_is_documented() {
    let rules = yaml("rules.yaml");
    let operator = yaml("prometheusrule.yaml");
    assert_eq!(operator["kind"], "PrometheusRule");
    assert_eq!(operator["spec"]["groups"], rules["groups"]);
    let monitor = yaml("servicemonitor.yaml");
    assert_eq!(monitor["kind"], "ServiceMonitor");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true);

    let runbook =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/runbook.md"))
            .unwrap();
    let names: Vec<&str> = alerts(&rules)
        .iter()
        .map(|a| a["alert"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "HpaBridgeWorkloadFrozen",
            "HpaBridgeFloorHoldingScaleIn",
            "HpaBridgeScrapeTargetsFailing",
            "HpaBridgeNotReady",
            "HpaBridgePrometheusSourceDown",
            "HpaBridgeHpaNotAsPredicted"
        ]
    );
    for alert in alerts(&rules) {
        let name = alert["alert"].as_str().unwrap();
        let a = &alert["annotations"];
        assert!(
            a["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{name}"
        );
        let description = a["description"].as_str().unwrap_or_default();
        let names_it = [
            "$labels.workload",
            "$labels.target",
            "$labels.instance",
            "$labels.hpa",
        ]
        .iter()
        .any(|l| description.contains(l));
        assert!(
            names_it,
            "{name}: the description must name what it is about"
        );
        let url = a["runbook_url"].as_str().unwrap_or_default();
        assert_eq!(url, format!("docs/runbook.md#{}", name.to_lowercase()));
        assert!(
            runbook.contains(&format!("\n## {name}\n")),
            "{name} has no section in docs/runbook.md"
        );
    }
}
