//! Fault scripts: every `tests/faults/*.yaml` runs through the real `hpa-bridge simulate`
//! binary (real adapter, real loopback exporters, real HTTPS, simulated clock) and must pass
//! every invariant and every expectation it states. The scenarios in `tests/faults/unsafe/`
//! are deliberately unsafe HPA setups: the invariant checker must fail them, which proves it
//! can fail at all.

use std::path::{Path, PathBuf};
use std::process::Command;

fn faults_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/faults")
}

struct Run {
    success: bool,
    /// The exit code; `None` when a signal ended the process.
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The run completed and passed: a crashed or failed run prints a partial table that can
    /// still lack (or contain) any given line, so the text alone proves nothing.
    fn assert_passed(&self, what: &str) {
        assert!(
            self.success,
            "simulate {what} exited with {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
    }

    /// The run completed and reported a failure (exit code 1), rather than crashing (a panic
    /// exits 101, a signal has no code).
    fn assert_failed(&self, what: &str) {
        self.assert_code(1, what, "a reported failure");
    }

    /// An invalid scenario exits 2, apart from a scenario that ran and failed (1).
    fn assert_invalid(&self, what: &str) {
        self.assert_code(2, what, "an invalid scenario");
    }

    fn assert_code(&self, code: i32, what: &str, expected: &str) {
        assert_eq!(
            self.code,
            Some(code),
            "simulate {what}: expected {expected}\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
    }
}

fn simulate(file: &Path, plot: Option<&Path>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"));
    cmd.arg("simulate").arg(file);
    if let Some(p) = plot {
        cmd.arg("--plot").arg(p);
    }
    let out = cmd.output().expect("run hpa-bridge simulate");
    Run {
        success: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs one safe scenario and checks its outcome lines: one `expect ...: ok` line per entry of
/// the file's `expect:` block, every invariant ok, `RESULT: PASS`, a table row per sync and a
/// plot.
fn passes(name: &str) {
    let file = faults_dir().join(name);
    let scenario: yaml_serde::Value =
        yaml_serde::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let expectations = scenario["expect"].as_sequence().map(Vec::len).unwrap_or(0);
    assert!(expectations > 0, "{name} states no expected outcome");
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("plot.svg");
    let run = simulate(&file, Some(&plot));
    run.assert_passed(name);
    let context = format!("{name}\nstdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("RESULT: PASS"), "{context}");
    let ok_lines = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("expect ") && l.contains(": ok ("))
        .count();
    assert_eq!(ok_lines, expectations, "{context}");
    for inv in [
        "below-floor",
        "decrease-on-unknown",
        "inflation",
        "convergence",
    ] {
        assert!(
            run.stdout.contains(&format!("invariant {inv}: ok")),
            "{inv} in {context}"
        );
    }
    // One table row per 15 s sync, each with the adapter's answer over HTTPS.
    let syncs = run
        .stdout
        .lines()
        .find_map(|l| {
            l.split_once(": ")?
                .1
                .split(" syncs")
                .next()?
                .parse::<usize>()
                .ok()
        })
        .expect("summary line");
    assert!(syncs > 0, "{context}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
}

macro_rules! fault_scripts {
    ($($test:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $test() {
                passes($file);
            }
        )*

        /// Every script in the directory has a test above, so none is silently skipped.
        #[test]
        fn every_fault_script_is_run() {
            let mut listed = vec![$($file),*];
            listed.sort();
            let mut found: Vec<String> = std::fs::read_dir(faults_dir())
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yaml"))
                .collect();
            found.sort();
            assert_eq!(found, listed);
        }
    };
}

fault_scripts! {
    stale_controller => "01-stale-controller.yaml",
    all_exporters_unreachable => "02-all-unreachable.yaml",
    stateful_pod_unreachable_with_highest_index => "03-stateful-pod-unreachable.yaml",
    former_controller_exports_old_high_value => "04-former-controller.yaml",
    adapter_restarts_during_scale_in => "05-adapter-restart.yaml",
    garbage_nan_negative_huge_values => "06-garbage-values.yaml",
    slow_exporters_beyond_timeout => "07-slow-exporters.yaml",
    flapping_every_20s => "08-flapping.yaml",
    plus_one_held_at_tolerance_0_1 => "09a-tolerance-held.yaml",
    plus_one_reached_at_tolerance_0 => "09b-tolerance-zero.yaml",
    scale_out_while_floor_incomplete => "10-scale-out-incomplete-floor.yaml",
    threshold_ramp_up_and_down_without_flapping => "11-threshold-ramp.yaml",
    threshold_holds_scale_in_while_a_pod_is_unscraped => "12-threshold-pod-down.yaml",
    object_metric_holds_through_a_stale_controller_and_ignores_a_namesake => "13-object-stale-controller.yaml",
    failover_with_epoch_fencing_follows_the_new_master => "14a-failover-epoch-fenced.yaml",
    failover_without_epoch_fencing_is_pinned_by_the_old_master => "14b-failover-max-pinned.yaml",
    scale_to_zero_and_back_with_the_recommender_outside => "15a-zero-outside-recommender.yaml",
    recommender_inside_with_min_one_scales_back_up => "15b-one-recommender-inside.yaml",
    deployment_with_deletion_cost_loses_only_idle_pods => "16a-deployment-deletion-cost.yaml",
    deployment_holds_while_a_holding_pod_is_not_ready => "16b-deployment-holder-not-ready.yaml",
    deployment_holds_during_a_rollout => "16c-deployment-rollout.yaml",
    stuck_loop_behind_a_live_endpoint_goes_stale_by_producer_time => "17-stuck-loop-producer-time.yaml",
}

/// A copy of a scenario with another `seed`, in `dir`.
fn with_seed(file: &Path, seed: u64, dir: &Path) -> PathBuf {
    let mut scenario: yaml_serde::Value =
        yaml_serde::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    scenario["seed"] = yaml_serde::Value::from(seed);
    let copy = dir.join(format!("seed-{seed}.yaml"));
    std::fs::write(&copy, yaml_serde::to_string(&scenario).unwrap()).unwrap();
    copy
}

const SEEDS: std::ops::Range<u64> = 0..16;

#[test]
fn deployment_scale_in_without_deletion_cost_deletes_a_holding_pod() {
    // docs/hpa-behaviour.md §9.1: six Ready pods created together are not told apart, so the
    // listing order picks the two that go. The scenario's own seed deletes a holding pod; over
    // several seeds some runs keep all three and some do not.
    fails_with("deployment-without-deletion-cost.yaml", "holder-deleted");
    let file = faults_dir().join("unsafe/deployment-without-deletion-cost.yaml");
    let dir = tempfile::tempdir().unwrap();
    let (mut failed, mut kept) = (0, 0);
    for seed in SEEDS {
        let run = simulate(&with_seed(&file, seed, dir.path()), None);
        assert!(
            run.stdout
                .contains("replicas: initial 6 min 4 max 6 final 4"),
            "seed {seed}: {}",
            run.stdout
        );
        if run.code == Some(1) {
            run.assert_failed("deployment-without-deletion-cost.yaml");
            assert!(
                run.stdout.contains("invariant holder-deleted: VIOLATED"),
                "seed {seed}: {}",
                run.stdout
            );
            failed += 1;
        } else {
            run.assert_passed("deployment-without-deletion-cost.yaml");
            kept += 1;
        }
    }
    // Two of six go: all three holding pods stay in one draw of five.
    assert!(
        failed > 0 && kept > 0,
        "{failed} seeds deleted a holding pod, {kept} did not"
    );
}

#[test]
fn deployment_scenarios_keep_every_holding_pod_whatever_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    for (name, summary) in [
        (
            "16a-deployment-deletion-cost.yaml",
            "replicas: initial 6 min 4 max 6 final 4",
        ),
        (
            "16b-deployment-holder-not-ready.yaml",
            "replicas: initial 6 min 6 max 6 final 6",
        ),
        (
            "16c-deployment-rollout.yaml",
            "replicas: initial 6 min 6 max 6 final 6",
        ),
    ] {
        for seed in SEEDS {
            let run = simulate(&with_seed(&faults_dir().join(name), seed, dir.path()), None);
            run.assert_passed(name);
            let context = format!("{name} seed {seed}: {}", run.stdout);
            assert!(run.stdout.contains(summary), "{context}");
            assert!(
                run.stdout.contains("invariant holder-deleted: ok"),
                "{context}"
            );
            // Every pod deleted was idle: two by the scale-in in 16a, three by the rollout in
            // 16c, none in 16b.
            let deleted: Vec<&str> = run
                .stdout
                .lines()
                .filter(|l| l.contains(" deleted lobby-"))
                .collect();
            assert!(deleted.iter().all(|l| l.contains(": idle")), "{context}");
            let expected = match name {
                "16a-deployment-deletion-cost.yaml" => 2,
                "16c-deployment-rollout.yaml" => 3,
                _ => 0,
            };
            assert_eq!(deleted.len(), expected, "{context}");
        }
    }
}

#[test]
fn a_recommender_inside_a_workload_at_zero_is_a_deadlock() {
    // docs/hpa-behaviour.md §7.3: at 0 replicas nothing runs a recommender inside the
    // workload, so the demand for 6 at 10m is never served and lobby stays at 0.
    fails_with("zero-recommender-inside.yaml", "scale-from-zero");
    let run = simulate(
        &faults_dir().join("unsafe/zero-recommender-inside.yaml"),
        None,
    );
    assert!(
        run.stdout
            .contains("replicas: initial 3 min 0 max 3 final 0"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("no recommender runs"), "{}", run.stdout);
    // The fixes: the same timeline with the recommender outside (0 and back), or with
    // minReplicas 1 (never below 1).
    let outside = simulate(
        &faults_dir().join("15a-zero-outside-recommender.yaml"),
        None,
    );
    outside.assert_passed("15a-zero-outside-recommender.yaml");
    assert!(
        outside
            .stdout
            .contains("replicas: initial 3 min 0 max 6 final 6")
            && outside.stdout.contains("invariant scale-from-zero: ok"),
        "{}",
        outside.stdout
    );
    let min_one = simulate(&faults_dir().join("15b-one-recommender-inside.yaml"), None);
    min_one.assert_passed("15b-one-recommender-inside.yaml");
    assert!(
        min_one
            .stdout
            .contains("replicas: initial 3 min 1 max 6 final 6"),
        "{}",
        min_one.stdout
    );
}

#[test]
fn failover_scenarios_differ_only_in_epoch_fencing() {
    // The same exporters: the old master stuck at 9 under epoch 3, the new one at 4 under
    // epoch 4. Fenced by master_epoch the workload follows the new master; by max alone it is
    // pinned at 9 for as long as the old master is scraped.
    let fenced = simulate(&faults_dir().join("14a-failover-epoch-fenced.yaml"), None);
    let pinned = simulate(&faults_dir().join("14b-failover-max-pinned.yaml"), None);
    fenced.assert_passed("14a-failover-epoch-fenced.yaml");
    pinned.assert_passed("14b-failover-max-pinned.yaml");
    assert!(
        fenced
            .stdout
            .contains("replicas: initial 9 min 4 max 9 final 4"),
        "{}",
        fenced.stdout
    );
    assert!(
        pinned
            .stdout
            .contains("replicas: initial 9 min 9 max 9 final 9"),
        "{}",
        pinned.stdout
    );
}

#[test]
fn a_stuck_loop_is_refused_only_with_producer_time() {
    // The same exporter: the loop stuck on 3 at 2m10s while every scrape succeeds. Aged by its
    // evaluation time the recommendation is refused from 2m40s and the workload holds 8 until
    // the loop runs again; aged by the scrape it is served and the workload scales in on it.
    let name = "17-stuck-loop-producer-time.yaml";
    let aged = simulate(&faults_dir().join(name), None);
    aged.assert_passed(name);
    assert!(
        aged.stdout
            .contains("replicas: initial 8 min 3 max 8 final 3"),
        "{}",
        aged.stdout
    );
    // Refused as stale at every sync from 2m45s (the first after 2m10s + staleAfter 30s) to
    // 5m45s, while every scrape of the page succeeds.
    let refused: Vec<&str> = aged
        .stdout
        .lines()
        .filter(|l| l.contains("| 503 is stale"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(refused.len(), 13, "{}", aged.stdout);
    assert_eq!(
        (refused[0], refused[12]),
        ("2m45s", "5m45s"),
        "{}",
        aged.stdout
    );
    fails_with(
        "stuck-loop-without-producer-time.yaml",
        "decrease-on-unknown",
    );
    let served = simulate(
        &faults_dir().join("unsafe/stuck-loop-without-producer-time.yaml"),
        None,
    );
    assert!(
        served
            .stdout
            .contains("replicas: initial 8 min 3 max 8 final 3")
            && !served.stdout.contains("503")
            && served
                .stdout
                .contains("VIOLATION decrease-on-unknown at 3m45s"),
        "{}",
        served.stdout
    );
}

#[test]
fn object_scenario_asks_the_custom_metrics_api_and_holds_on_unknown_input() {
    // The HPA's GETs go to custom.metrics.k8s.io (docs/hpa-behaviour.md §6.2): the namesake
    // Deployment's 12 never reaches the StatefulSet, and the stale controller's 3 is not
    // followed until it is seen again.
    let name = "13-object-stale-controller.yaml";
    let run = simulate(&faults_dir().join(name), None);
    run.assert_passed(name);
    assert!(
        run.stdout
            .contains("replicas: initial 8 min 3 max 8 final 3"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_loose_external_selector_mixing_a_namesake_is_caught() {
    // The External twin of 13-object-stale-controller: hpa_target_name=lobby also takes the
    // Deployment lobby's 12 (the selector-typo case, docs/hpa-behaviour.md §6.5).
    fails_with("typo-external.yaml", "inflation");
}

#[test]
fn threshold_scenarios_run_the_threshold_invariants() {
    // The load-driven scenarios also check flapping, plateau stability and refusals on healthy
    // input; the recommendation scenarios do not print them.
    for name in ["11-threshold-ramp.yaml", "12-threshold-pod-down.yaml"] {
        let run = simulate(&faults_dir().join(name), None);
        run.assert_passed(name);
        for inv in ["flap", "plateau", "refusal"] {
            assert!(
                run.stdout.contains(&format!("invariant {inv}: ok")),
                "{inv} in {name}: {}",
                run.stdout
            );
        }
        assert!(
            run.stdout.contains("1 reversal(s) of direction"),
            "{}",
            run.stdout
        );
    }
    let recommendation = simulate(&faults_dir().join("01-stale-controller.yaml"), None);
    recommendation.assert_passed("01-stale-controller.yaml");
    // A passing run prints its invariant lines; the recommendation scenario's lack this one.
    assert!(
        recommendation.stdout.contains("invariant convergence: ok"),
        "{}",
        recommendation.stdout
    );
    assert!(!recommendation.stdout.contains("invariant flap"));
}

#[test]
fn tolerance_scenarios_differ_only_in_the_outcome() {
    // 09a and 09b feed the same +1 recommendation; the held one never leaves 10, the other
    // reaches 11 (docs/hpa-behaviour.md §1.5).
    let held = simulate(&faults_dir().join("09a-tolerance-held.yaml"), None);
    let zero = simulate(&faults_dir().join("09b-tolerance-zero.yaml"), None);
    held.assert_passed("09a-tolerance-held.yaml");
    zero.assert_passed("09b-tolerance-zero.yaml");
    assert!(
        held.stdout.contains("held within tolerance"),
        "{}",
        held.stdout
    );
    assert!(held
        .stdout
        .contains("replicas: initial 10 min 10 max 10 final 10"));
    assert!(zero
        .stdout
        .contains("replicas: initial 10 min 10 max 11 final 11"));
}

fn fails_with(name: &str, invariant: &str) {
    let run = simulate(&faults_dir().join("unsafe").join(name), None);
    run.assert_failed(name);
    let context = format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("RESULT: FAIL"), "{context}");
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with(&format!("VIOLATION {invariant} at "))),
        "{context}"
    );
    assert!(
        run.stdout
            .contains(&format!("invariant {invariant}: VIOLATED")),
        "{context}"
    );
}

#[test]
fn value_target_inflation_is_caught() {
    // The Value formula multiplies the absolute count by the ready pods (docs/hpa-behaviour.md §1.3).
    fails_with("value-target.yaml", "inflation");
}

#[test]
fn hpa_without_the_floor_is_caught_scaling_below_it() {
    fails_with("floorless-hpa.yaml", "below-floor");
}

#[test]
fn a_bad_scenario_is_a_precise_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "name: x\nduration: 1m\nworkload: {name: lobby, initialReplicas: 2}\n\
         hpa: {maxReplicas: 4, metrics: [{type: External, external: {metric: {name: hpa_target_replicas}, target: {type: AverageValue, averageValue: '1'}}}]}\n\
         faults: [{target: lobby-x, from: 0s, to: 1m, mode: down}]\n",
    )
    .unwrap();
    let run = simulate(&file, None);
    run.assert_invalid("bad.yaml");
    assert!(run.stderr.contains("faults[0].target"), "{}", run.stderr);
}
