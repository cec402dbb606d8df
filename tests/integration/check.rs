//! `hpa-bridge check`: the real binary on manifest fixtures (tests/fixtures/check/).
//! `check --cluster` runs against the real control plane in check_cluster.rs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/check")
        .join(name)
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }

    fn codes(&self) -> BTreeSet<String> {
        self.json()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_string())
            .collect()
    }

    fn findings(&self, code: &str) -> Vec<Value> {
        self.json()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == code)
            .cloned()
            .collect()
    }
}

fn check(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .arg("check")
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run hpa-bridge check");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn check_file(name: &str, extra: &[&str]) -> Run {
    let path = fixture(name);
    let mut args = vec!["-o", "json", "-f", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    check(&args)
}

fn set(codes: &[&str]) -> BTreeSet<String> {
    codes.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_correct_hpa_has_no_findings() {
    let r = check_file("good.yaml", &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
    assert_eq!(r.json()["summary"]["hpasChecked"], 1);
    // The table says so too.
    let t = check(&["-f", fixture("good.yaml").to_str().unwrap()]);
    assert_eq!(t.code, 0);
    assert!(
        t.stdout.starts_with("no findings (1 HPA checked)"),
        "{}",
        t.stdout
    );
}

#[test]
fn each_fixture_gives_exactly_its_findings() {
    let cases: &[(&str, &[&str], &[&str], i32)] = &[
        ("value-path.yaml", &[], &["HB001", "HB003"], 1),
        ("average-value.yaml", &[], &["HB002"], 1),
        ("type-mismatch.yaml", &[], &["HB003"], 0),
        ("names.yaml", &[], &["HB004", "HB005"], 1),
        ("selector.yaml", &[], &["HB006"], 0),
        ("tolerance.yaml", &[], &["HB008"], 0),
        ("tolerance-set.yaml", &[], &[], 0),
        (
            "tolerance-set.yaml",
            &["--kube-version", "1.32"],
            &["HB008", "HB009"],
            0,
        ),
        ("windows.yaml", &[], &["HB010", "HB011"], 0),
        (
            "windows.yaml",
            &["--max-scale-up-time", "15m"],
            &["HB010"],
            0,
        ),
        (
            "windows.yaml",
            &["--recommender-window", "30s", "--max-scale-up-time", "15m"],
            &[],
            0,
        ),
        // minReplicas 0: allowed by default from 1.37, the default version; whether the
        // recommendation comes from the workload's own pods cannot be told (HB023, warning);
        // the External target with a floor answers 404 at 0 replicas (HB024).
        ("min-zero.yaml", &[], &["HB023", "HB024"], 1),
        (
            "min-zero.yaml",
            &["--kube-version", "1.36"],
            &["HB012", "HB023", "HB024"],
            1,
        ),
        (
            "min-zero.yaml",
            &["--kube-version", "1.36", "--scale-to-zero"],
            &["HB023", "HB024"],
            1,
        ),
        // The same as an Object metric of the workload: it serves the recommendation at 0.
        ("min-zero-object.yaml", &[], &["HB023"], 0),
        ("two-hpas.yaml", &[], &["HB020"], 1),
        ("keda.yaml", &[], &["HB021"], 1),
        ("gitops-replicas.yaml", &[], &["HB022"], 0),
        ("zero-recommender.yaml", &[], &["HB023"], 0),
        ("deployment-floor.yaml", &[], &["HB013"], 0),
        ("deployment-floor-opted-in.yaml", &[], &[], 0),
        ("ordinals.yaml", &[], &["HB014"], 1),
        ("no-floor.yaml", &[], &["HB015"], 0),
        ("apiservice.yaml", &[], &["HB016", "HB017"], 1),
        (
            "apiservice.yaml",
            &["--adapter-service", "keda/keda-operator-metrics-apiserver"],
            &["HB017"],
            1,
        ),
    ];
    for (file, extra, want, code) in cases {
        let r = check_file(file, extra);
        assert_eq!(
            r.codes(),
            set(want),
            "{file} {extra:?}: {}\n{}",
            r.stdout,
            r.stderr
        );
        assert_eq!(r.code, *code, "{file} {extra:?} exit code: {}", r.stdout);
    }
}

/// HB013's fix names the opt-in annotation and the flag.
#[test]
fn a_floor_on_a_deployment_points_at_deletion_cost() {
    let r = check_file("deployment-floor.yaml", &[]);
    let fix = r.findings("HB013")[0]["fix"].as_str().unwrap().to_string();
    for part in [
        "hpa-bridge.io/deletion-cost",
        "stateful-index",
        "--write-deletion-cost",
    ] {
        assert!(fix.contains(part), "{part:?} not in {fix}");
    }
}

#[test]
fn findings_name_the_object_and_field_and_link_the_docs() {
    let r = check_file("value-path.yaml", &[]);
    let f = &r.findings("HB001")[0];
    assert_eq!(f["severity"], "error");
    assert_eq!(f["object"]["kind"], "HorizontalPodAutoscaler");
    assert_eq!(f["object"]["namespace"], "games");
    assert_eq!(f["object"]["name"], "lobby");
    assert_eq!(f["field"], "spec.metrics[0].external.target.value");
    assert_eq!(
        f["docs"],
        "docs/check.md#hb001-absolute-metric-through-the-value-path"
    );
    assert!(f["source"]
        .as_str()
        .unwrap()
        .ends_with("value-path.yaml (document 1)"));
    assert!(!f["why"].as_str().unwrap().is_empty() && !f["fix"].as_str().unwrap().is_empty());
    assert_eq!(
        r.findings("HB003")[0]["field"],
        "spec.metrics[0].external.target.type"
    );

    // Every docs link in every fixture's findings points at a heading that exists.
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/check.md"))
        .unwrap();
    let dir = fixture("");
    let r = check(&["-o", "json", "-f", dir.to_str().unwrap()]);
    // The directory also holds invalid.yaml: unusable input wins, with a precise message.
    assert_eq!(r.code, 2, "{}", r.stdout);
    for name in [
        "value-path.yaml",
        "names.yaml",
        "selector.yaml",
        "windows.yaml",
        "ordinals.yaml",
        "apiservice.yaml",
        "deployment-floor.yaml",
        "no-floor.yaml",
        "min-zero.yaml",
        "tolerance.yaml",
        "average-value.yaml",
    ] {
        for f in check_file(name, &["--kube-version", "1.32"]).json()["findings"]
            .as_array()
            .unwrap()
        {
            let anchor = f["docs"].as_str().unwrap().split('#').nth(1).unwrap();
            let heading = format!(
                "## {}: {}",
                f["code"].as_str().unwrap(),
                f["title"].as_str().unwrap()
            );
            assert!(docs.contains(&heading), "{heading} missing for #{anchor}");
        }
    }
}

#[test]
fn tolerance_reports_the_exact_replica_counts_per_version() {
    // From 1.33 the band is inclusive: at 10 replicas, 11 (ratio 1.1) is inside.
    let new = check_file("tolerance.yaml", &[]);
    let m = new.findings("HB008")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("above the current count is ignored from 10 replicas"),
        "{m}"
    );
    assert!(m.contains("below is ignored from 10 replicas"), "{m}");
    assert!(
        m.contains("at maxReplicas 50, recommendations up to 5 replica(s) lower"),
        "{m}"
    );
    // Before 1.33, |1 - 1.1| is 0.10000000000000009 > 0.1: steps up are acted on at 10.
    let old = check_file("tolerance.yaml", &["--kube-version", "1.32"]);
    let m = old.findings("HB008")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("above the current count is ignored from 11 replicas"),
        "{m}"
    );
    assert!(m.contains("below is ignored from 10 replicas"), "{m}");
    // A tighter cluster tolerance moves the threshold: 1/r <= 0.05 from 20 replicas.
    let tight = check_file("tolerance.yaml", &["--cluster-tolerance", "0.05"]);
    let m = tight.findings("HB008")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(m.contains("ignored from 20 replicas"), "{m}");
    // A dropped per-HPA tolerance falls back to the cluster default.
    let dropped = check_file("tolerance-set.yaml", &["--kube-version", "1.32"]);
    assert_eq!(dropped.findings("HB009").len(), 2);
    let fields: BTreeSet<String> = dropped
        .findings("HB009")
        .iter()
        .map(|f| f["field"].as_str().unwrap().to_string())
        .collect();
    assert!(fields.contains("spec.behavior.scaleUp.tolerance"));
    assert!(fields.contains("spec.behavior.scaleDown.tolerance"));
}

#[test]
fn ordinals_offset_is_fine_with_kubernetes_discovery() {
    let r = check_file("ordinals.yaml", &[]);
    let f = &r.findings("HB014")[0];
    assert_eq!(f["object"]["kind"], "StatefulSet");
    assert_eq!(f["field"], "spec.ordinals.start");
    // Two HPAs on the same StatefulSet: the workload's finding is reported once.
    let both = check(&[
        "-o",
        "json",
        "-f",
        fixture("ordinals.yaml").to_str().unwrap(),
        fixture("tolerance.yaml").to_str().unwrap(),
    ]);
    assert_eq!(both.findings("HB014").len(), 1, "{}", both.stdout);
    let config = fixture("discovery-config.yaml");
    let r = check_file("ordinals.yaml", &["--config", config.to_str().unwrap()]);
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
    assert_eq!(r.code, 0);
}

#[test]
fn scale_up_finding_states_the_simulated_time() {
    let r = check_file("windows.yaml", &[]);
    let m = r.findings("HB011")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    // Pods 1 per 120 s from 2 to 9: seven additions at 0, 120, ..., 720 s.
    assert!(m.contains("from 2 to maxReplicas 9 takes 720s"), "{m}");
    let w = &r.findings("HB010")[0];
    assert_eq!(
        w["field"],
        "spec.behavior.scaleDown.stabilizationWindowSeconds"
    );
}

#[test]
fn lists_json_and_stdin_are_read() {
    let dir = tempfile::tempdir().unwrap();
    // kubectl get hpa -o json: a typed List whose items omit kind and apiVersion.
    let good: Vec<Value> =
        yaml_serde::Deserializer::from_str(&std::fs::read_to_string(fixture("good.yaml")).unwrap())
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
    let mut hpa = good[1].clone();
    hpa.as_object_mut().unwrap().remove("kind");
    hpa.as_object_mut().unwrap().remove("apiVersion");
    let mut bad = hpa.clone();
    bad["spec"]["metrics"][0]["external"]["target"] =
        serde_json::json!({"type": "Value", "value": "1"});
    bad["metadata"]["name"] = "arena".into();
    // Its own workload: a second HPA on lobby would be HB020.
    bad["spec"]["scaleTargetRef"]["name"] = "arena".into();
    for m in bad["spec"]["metrics"].as_array_mut().unwrap() {
        m["external"]["metric"]["selector"]["matchLabels"]["hpa_target_name"] = "arena".into();
    }
    let list = serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscalerList",
        "metadata": {}, "items": [hpa, bad]
    });
    let path = dir.path().join("hpas.json");
    std::fs::write(&path, list.to_string()).unwrap();
    let sts = dir.path().join("sts.yaml");
    std::fs::write(&sts, yaml_serde::to_string(&good[0]).unwrap()).unwrap();
    let r = check(&[
        "-o",
        "json",
        "-f",
        path.to_str().unwrap(),
        sts.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.codes(), set(&["HB001"]));
    let f = &r.findings("HB001")[0];
    assert_eq!(f["object"]["name"], "arena");
    assert!(f["source"]
        .as_str()
        .unwrap()
        .ends_with("(document 1, items[1])"));

    // The same objects through stdin, as a kind: List.
    let v1list =
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [good[0], good[1]]});
    let mut child = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["check", "-o", "json", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(v1list.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["hpasChecked"], 1);
    assert_eq!(v["findings"].as_array().unwrap().len(), 0);
}

#[test]
fn unusable_input_exits_2_naming_file_and_document() {
    let r = check_file("invalid.yaml", &[]);
    assert_eq!(r.code, 2);
    assert!(r.stdout.is_empty());
    assert!(
        r.stderr
            .contains("invalid.yaml: document 2: invalid YAML/JSON"),
        "{}",
        r.stderr
    );
    let r = check_file("no-such-file.yaml", &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no-such-file.yaml"), "{}", r.stderr);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.yaml");
    std::fs::write(
        &p,
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {maxReplicas: many, scaleTargetRef: {kind: StatefulSet, name: h}}\n",
    )
    .unwrap();
    let r = check(&["-f", p.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("h.yaml: document 1: HorizontalPodAutoscaler \"h\""),
        "{}",
        r.stderr
    );
    // Neither -f nor --cluster is a usage error.
    assert_eq!(check(&[]).code, 2);
    let bad = check(&[
        "--kube-version",
        "latest",
        "-f",
        fixture("good.yaml").to_str().unwrap(),
    ]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--kube-version"), "{}", bad.stderr);
}

/// Object metrics (docs/hpa-behaviour.md §6): a Value target and averageValue other than 1 are
/// flagged as on External metrics; and the selector-typo scenario warns on the External HPA
/// whose selector leaves the kind open, never on the Object one.
#[test]
fn object_metrics_and_the_selector_typo_scenario() {
    for (file, want, code) in [
        ("object-value.yaml", &["HB001", "HB002"][..], 1),
        ("object-good.yaml", &[][..], 0),
        // The two HPAs side by side also scale one StatefulSet (HB020); a cluster would hold
        // only one of them.
        ("selector-typo.yaml", &["HB006", "HB020"][..], 1),
    ] {
        let r = check_file(file, &[]);
        assert_eq!(r.codes(), set(want), "{file}: {}\n{}", r.stdout, r.stderr);
        assert_eq!(r.code, code, "{file} exit code: {}", r.stdout);
    }
    let r = check_file("selector-typo.yaml", &[]);
    let found = r.findings("HB006");
    assert_eq!(found.len(), 1, "{}", r.stdout);
    let text = found[0].to_string();
    assert!(
        text.contains("\"lobby\"") && !text.contains("lobby-object"),
        "{text}"
    );
    assert!(text.contains("Deployment games/lobby"), "{text}");
    assert!(text.contains("Object metric"), "{text}");
    let r = check_file("object-value.yaml", &[]);
    let value = r.findings("HB001");
    assert!(
        value[0]
            .to_string()
            .contains("spec.metrics[0].object.target.type"),
        "{}",
        r.stdout
    );
}

/// Writes `text` to `dir/name`.
fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `check -o json --config CONFIG -f FILE`.
fn check_with_config(config: &Path, file: &Path) -> Run {
    check(&[
        "-o",
        "json",
        "--config",
        config.to_str().unwrap(),
        "-f",
        file.to_str().unwrap(),
    ])
}

/// docs/check.md HB020–HB022: one writer per workload.
#[test]
fn one_writer_per_workload() {
    // Two HPAs on games/lobby: each names the other; staging's lobby is another workload.
    let r = check_file("two-hpas.yaml", &[]);
    let two = r.findings("HB020");
    let names: BTreeSet<String> = two
        .iter()
        .map(|f| {
            assert_eq!(f["object"]["namespace"], "games", "{f}");
            assert_eq!(f["field"], "spec.scaleTargetRef");
            assert_eq!(f["severity"], "error");
            f["object"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(names, set(&["lobby", "lobby-cpu"]), "{}", r.stdout);
    assert!(two[0]["message"]
        .as_str()
        .unwrap()
        .contains("StatefulSet games/lobby is also scaled by HorizontalPodAutoscaler lobby-cpu"));
    assert!(two[0]["why"]
        .as_str()
        .unwrap()
        .contains("AmbiguousSelector"));
    // The examples hold two versions of one HPA, games/lobby (External and Object metrics):
    // documents with one name are one object, not two HPAs; and the StatefulSet leaves
    // spec.replicas to the HPA.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/examples");
    let r = check(&["-o", "json", "-f", examples.to_str().unwrap()]);
    assert_eq!((r.code, r.codes()), (0, set(&[])), "{}", r.stdout);

    // KEDA: the ScaledObject's own HPA is neither a second HPA nor checked as the user's
    // (its s0-prometheus metric is KEDA's to serve).
    let r = check_file("keda.yaml", &[]);
    let keda = r.findings("HB021");
    assert_eq!(keda.len(), 1, "{}", r.stdout);
    assert_eq!(keda[0]["object"]["name"], "worker");
    let m = keda[0]["message"].as_str().unwrap();
    assert!(
        m.contains("ScaledObject jobs/worker") && m.contains("its HPA keda-hpa-worker"),
        "{m}"
    );
    assert!(!r.stdout.contains("\"keda-hpa-worker\""), "{}", r.stdout);
    assert_eq!(r.json()["summary"]["hpasChecked"], 1, "{}", r.stdout);

    // A GitOps tree fixing spec.replicas beside the HPA: a warning on the workload's field.
    let r = check_file("gitops-replicas.yaml", &[]);
    let fixed = r.findings("HB022");
    assert_eq!(fixed.len(), 1, "{}", r.stdout);
    assert_eq!(fixed[0]["severity"], "warning");
    assert_eq!(fixed[0]["object"]["kind"], "StatefulSet");
    assert_eq!(fixed[0]["field"], "spec.replicas");
    let m = fixed[0]["message"].as_str().unwrap();
    assert!(m.contains("the manifest sets spec.replicas: 3"), "{m}");
    assert!(fixed[0]["source"]
        .as_str()
        .unwrap()
        .ends_with("gitops-replicas.yaml (document 1)"));

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| write_file(dir.path(), name, text);
    // An HPA handed over to KEDA (transfer-hpa-ownership, the HPA's name in the ScaledObject)
    // is KEDA's own: no conflict.
    let keda = std::fs::read_to_string(fixture("keda.yaml")).unwrap();
    let transferred = keda.replacen(
        "spec:\n  scaleTargetRef: {name: worker}",
        "spec:\n  advanced: {horizontalPodAutoscalerConfig: {name: worker}}\n  scaleTargetRef: {name: worker}",
        1,
    );
    assert_ne!(transferred, keda);
    let p = write("transferred.yaml", &transferred);
    let r = check(&["-o", "json", "-f", p.to_str().unwrap()]);
    assert!(!r.codes().contains("HB021"), "{}", r.stdout);
    // Bad input is named precisely.
    for (name, text, message) in [
        (
            "so.yaml",
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: w}\nspec: {scaleTargetRef: {kind: Deployment}}\n",
            "so.yaml: document 1: ScaledObject \"w\": spec.scaleTargetRef.name is required",
        ),
        (
            "sts.yaml",
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {replicas: three}\n",
            "sts.yaml: document 1: StatefulSet \"s\": spec.replicas must be an integer, found \"three\"",
        ),
    ] {
        let r = check(&["-f", write(name, text).to_str().unwrap()]);
        assert_eq!(r.code, 2, "{name}");
        assert!(r.stderr.contains(message), "{}", r.stderr);
    }
}

/// docs/check.md HB012 and HB023: minReplicas 0 by Kubernetes version, and a recommender that
/// runs inside a workload that scales to zero.
#[test]
fn scale_to_zero_follows_the_version_and_flags_an_inside_recommender() {
    let config = fixture("zero-config.yaml");
    let r = check_file(
        "zero-recommender.yaml",
        &["--config", config.to_str().unwrap()],
    );
    assert_eq!(r.codes(), set(&["HB023"]), "{}", r.stdout);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let f = &r.findings("HB023")[0];
    assert_eq!(f["severity"], "error");
    assert_eq!(f["field"], "spec.minReplicas");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("podSelector \"hpa-bridge.io/scrape=true\"")
            && m.contains("StatefulSet games/lobby"),
        "{m}"
    );
    // Without discovery the check cannot tell: a warning that says so.
    let r = check_file("zero-recommender.yaml", &[]);
    let f = &r.findings("HB023")[0];
    assert_eq!(f["severity"], "warning");
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("no Kubernetes discovery"));

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| write_file(dir.path(), name, text);
    // Discovery that does not scrape lobby's pods: the recommendation comes from elsewhere.
    let other = write(
        "other.yaml",
        "scrape:\n  kubernetes:\n    podSelector: app=recommender\n",
    );
    let r = check_file(
        "zero-recommender.yaml",
        &["--config", other.to_str().unwrap()],
    );
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
    // The HPA says the recommender runs outside the workload.
    let text = std::fs::read_to_string(fixture("zero-recommender.yaml")).unwrap();
    let annotate = |value: &str| {
        text.replacen(
            "metadata: {name: lobby, namespace: games}\nspec:\n  scaleTargetRef",
            &format!("metadata:\n  name: lobby\n  namespace: games\n  annotations: {{hpa-bridge.io/recommender: {value}}}\nspec:\n  scaleTargetRef"),
            1,
        )
    };
    let outside = write("outside.yaml", &annotate("outside-workload"));
    let r = check_with_config(&config, &outside);
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
    let typo = write("typo.yaml", &annotate("outside"));
    let r = check_with_config(&config, &typo);
    let m = r.findings("HB023")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("is not \"outside-workload\", so it is ignored"),
        "{m}"
    );
    // minReplicas 1 needs no recommender at 0.
    let one = write(
        "one.yaml",
        &text.replace("minReplicas: 0", "minReplicas: 1"),
    );
    let r = check_with_config(&config, &one);
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
}

/// A GitOps folder holds more than Kubernetes objects: a Helm values file, a promtool rules
/// test. `check -f DIR` walks it, notes each document it skips, and still reports the HB002
/// of the HPA in a subfolder.
#[test]
fn a_folder_of_mixed_yaml_is_checked_and_each_skip_noted() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        repo.join("manifests/monitoring/rules.test.yaml"),
        dir.path().join("rules.test.yaml"),
    )
    .unwrap();
    std::fs::write(dir.path().join("values.yaml"), "image: {repository: x}\n").unwrap();
    let apps = dir.path().join("apps");
    std::fs::create_dir(&apps).unwrap();
    std::fs::copy(fixture("average-value.yaml"), apps.join("hpa.yaml")).unwrap();
    let r = check(&["-o", "json", "-f", dir.path().to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.codes().contains("HB002"), "{}", r.stdout);
    let skipped: Vec<String> = r.json()["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert!(
        skipped.iter().any(|s| s.contains("rules.test.yaml"))
            && skipped.iter().any(|s| s.contains("values.yaml")),
        "{skipped:?}"
    );
    let table = check(&["-f", dir.path().to_str().unwrap()]);
    assert!(
        table.stdout.contains("skipped ") && table.stdout.contains("HB002"),
        "{}",
        table.stdout
    );
    // The repo's own manifests, examples included, are checked whole.
    let own = check(&["-f", repo.join("manifests").to_str().unwrap()]);
    assert_ne!(own.code, 2, "{}\n{}", own.stdout, own.stderr);
}
