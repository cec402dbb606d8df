//! A newcomer's first hour, run as the docs write it: README's local demo (the adapter with
//! examples/local.yaml, then every command of "In a second terminal", kubectl included), the
//! status page at the demo's retention in Chromium, `check -f` on the repo's own manifests and
//! examples, `--help` at 80 columns, the scenario format's example, and the self-metrics
//! reference against what `/metrics` exports.
//!
//! And the rule that keeps the docs honest: every shell command in README.md, docs/ and the
//! chart's README is either run here (or by the suite named beside it) or sits in a block marked
//! `# needs a cluster` or `# not run by the tests: <why>`. A documented command that fails, or
//! an unmarked one nobody runs, fails this suite.
//!
//! Ports: the docs name fixed ones (6443, 9100, 9101); here they are replaced by ports the
//! kernel picks, so the suite runs beside the others.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::kube_objects::{docs, one};
use crate::common::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// The ```sh blocks of a markdown text, each as its lines.
fn sh_blocks(text: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut current {
            None if trimmed.starts_with("```sh") => current = Some(Vec::new()),
            Some(b) if trimmed.starts_with("```") => {
                blocks.push(std::mem::take(b));
                current = None;
            }
            Some(b) => b.push(trimmed.to_string()),
            None => {}
        }
    }
    blocks
}

/// A block's commands: comment lines dropped, `\` continuations joined, a trailing
/// `# comment` cut.
fn commands(block: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in block {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let code = match line.find(" #") {
            Some(i) => line[..i].trim_end(),
            None => line.as_str(),
        };
        if let Some(head) = code.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(code);
        out.push(std::mem::take(&mut pending).trim().to_string());
    }
    out
}

const CLUSTER_MARK: &str = "needs a cluster";
const NOT_RUN_MARK: &str = "not run by the tests:";

fn marked(block: &[String]) -> bool {
    block
        .iter()
        .any(|l| l.starts_with('#') && (l.contains(CLUSTER_MARK) || l.contains(NOT_RUN_MARK)))
}

/// The documents whose commands a reader copies.
const DOCUMENTS: &[&str] = &["README.md", "charts/hpa-bridge/README.md"];

fn documents() -> Vec<(String, String)> {
    let mut docs: Vec<(String, String)> =
        DOCUMENTS.iter().map(|d| (d.to_string(), read(d))).collect();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    for p in pages {
        let rel = p.strip_prefix(repo()).unwrap().display().to_string();
        docs.push((rel, std::fs::read_to_string(&p).unwrap()));
    }
    docs
}

/// How this suite (or the suite named) runs a documented command that needs no cluster.
fn how_run(command: &str) -> Option<&'static str> {
    let c = command;
    if c == "scripts/test" || c.starts_with("scripts/test ") {
        return Some("scripts/test is the command that runs this suite");
    }
    if c.starts_with("cargo run --release -- serve --config examples/local.yaml")
        || c.starts_with("curl ")
        || c.starts_with(
            "kubectl get --raw '/apis/external.metrics.k8s.io/v1beta1/namespaces/default/",
        )
    {
        return Some("the_readme_demo_runs_as_written");
    }
    if c.starts_with("cargo run --release -- demo-exporter") {
        return Some("the_demo_exporter_runs_on_its_own");
    }
    if c.starts_with("cargo run --release -- check -f")
        || c.starts_with("cargo run --release -- simulate ")
        || c.starts_with("cargo run --release -- config ")
        || c.starts_with("hpa-bridge check -f")
    {
        return Some("every_local_tool_command_runs_as_documented");
    }
    None
}

/// Every shell command in the docs is run by a test, or its block says it needs a cluster or
/// why it is not run.
#[test]
fn every_documented_command_is_run_or_marked() {
    let mut unaccounted = Vec::new();
    let mut counted = 0;
    for (doc, text) in documents() {
        for block in sh_blocks(&text) {
            if marked(&block) {
                continue;
            }
            for c in commands(&block) {
                counted += 1;
                if how_run(&c).is_none() {
                    unaccounted.push(format!("{doc}: {c}"));
                }
            }
        }
    }
    assert!(counted >= 8, "only {counted} unmarked commands found");
    assert!(
        unaccounted.is_empty(),
        "documented commands that no test runs: run them in tests/integration/newcomer.rs, or \
         mark their block `# {CLUSTER_MARK}` or `# {NOT_RUN_MARK} <why>`:\n  {}",
        unaccounted.join("\n  ")
    );
}

/// The documented tool commands (`check -f`, `simulate`, `config`), run with the built binary
/// from the repository root: none may fail for its input (exit 2), and `check` on the repo's
/// own manifests and examples finds no error.
#[test]
fn every_local_tool_command_runs_as_documented() {
    let mut ran = Vec::new();
    let out_dir = tempfile::tempdir().unwrap();
    for (doc, text) in documents() {
        for block in sh_blocks(&text) {
            if marked(&block) {
                continue;
            }
            for c in commands(&block) {
                if how_run(&c) != Some("every_local_tool_command_runs_as_documented") {
                    continue;
                }
                let rest = c
                    .strip_prefix("cargo run --release -- ")
                    .or_else(|| c.strip_prefix("hpa-bridge "))
                    .unwrap();
                // A file a command writes goes to a temporary directory.
                let args: Vec<String> = rest
                    .split_whitespace()
                    .map(|a| match a {
                        _ if a.ends_with(".svg") && !a.contains('/') => {
                            out_dir.path().join(a).display().to_string()
                        }
                        _ => a.to_string(),
                    })
                    .collect();
                let out = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
                    .args(&args)
                    .current_dir(repo())
                    .env("COLUMNS", "80")
                    .output()
                    .unwrap();
                let code = out.status.code();
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(
                    code,
                    Some(0),
                    "{doc}: `{c}` exited {code:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
                );
                assert!(!stdout.trim().is_empty(), "{doc}: `{c}` printed nothing");
                ran.push(c);
            }
        }
    }
    for want in ["check -f", "simulate ", "config schema"] {
        assert!(
            ran.iter().any(|c| c.contains(want)),
            "no documented `{want}` command was run: {ran:?}"
        );
    }
    // The repo's own manifests and examples, as a GitOps folder would be checked.
    for dir in ["manifests", "examples"] {
        let out = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
            .args(["check", "-f", dir])
            .current_dir(repo())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "check -f {dir}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `--help` of every command reads at 80 columns: no line is wider.
#[test]
fn help_fits_80_columns() {
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["check", "--help"],
        &["simulate", "--help"],
        &["demo-exporter", "--help"],
        &["config", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
            .args(args)
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 80).collect();
        assert!(
            wide.is_empty(),
            "{args:?}: lines over 80 columns:\n{}",
            wide.join("\n")
        );
        assert!(text.lines().count() > 3, "{args:?}: {text}");
    }
}

/// The scenario format's example in docs/simulate.md runs and passes; an invalid scenario
/// exits 2, a scenario that runs and fails exits 1.
#[test]
fn the_scenario_example_runs_and_simulate_exit_codes_differ() {
    let page = read("docs/simulate.md");
    let yaml = yaml_block_after(&page, "## The scenario format");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("example.yaml");
    std::fs::write(&path, yaml).unwrap();
    let run = |p: &Path| {
        Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
            .args(["simulate", "--quiet"])
            .arg(p)
            .output()
            .unwrap()
    };
    let out = run(&path);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, yaml.replace("duration: 22m", "duration: 22 minutes")).unwrap();
    let out = run(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.matches("error:").count(),
        1,
        "printed once: {stderr}"
    );
    let missing = run(&dir.path().join("missing.yaml"));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.matches("No such file").count(),
        1,
        "the cause is named once: {stderr}"
    );
    let unsafe_dir = repo().join("tests/faults/unsafe");
    let mut failing: Vec<PathBuf> = std::fs::read_dir(&unsafe_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    failing.sort();
    let out = run(&failing[0]);
    assert_eq!(out.status.code(), Some(1), "{}", failing[0].display());
}

/// The demo's exporter, started on its own as README says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_exporter_runs_on_its_own() {
    let readme = read("README.md");
    let command = sh_blocks(&readme)
        .iter()
        .flat_map(|b| commands(b))
        .chain(
            readme
                .lines()
                .filter_map(|l| l.split('`').find(|c| c.contains("-- demo-exporter")))
                .map(String::from),
        )
        .find(|c| c.contains("-- demo-exporter"))
        .expect("README names the demo exporter's command");
    let port = free_port();
    let args: Vec<String> = command
        .strip_prefix("cargo run --release -- ")
        .unwrap()
        .replace("127.0.0.1:9101", &format!("127.0.0.1:{port}"))
        .split_whitespace()
        .map(String::from)
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(&args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        if let Ok(tcp) = tokio::net::TcpStream::connect(addr).await {
            drop(tcp);
            break plain_http_get(addr, "/controller/leader").await;
        }
        assert!(
            Instant::now() < deadline,
            "the demo exporter did not listen"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(body.0, 200);
    assert!(body.1.contains("hpa_expect_replicas"), "{}", body.1);
}

/// examples/local.yaml with its exporter moved to `port`.
fn demo_config(port: u16) -> String {
    let text = read("examples/local.yaml");
    assert!(text.contains("127.0.0.1:9101"));
    text.replace("127.0.0.1:9101", &format!("127.0.0.1:{port}"))
}

struct Demo {
    child: std::process::Child,
    api: u16,
    metrics: u16,
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve --config examples/local.yaml` on free ports, self-signed as in the README.
fn start_demo() -> Demo {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("local.yaml");
    std::fs::write(&config, demo_config(free_port())).unwrap();
    let (api, metrics) = (free_port(), free_port());
    let log = dir.path().join("serve.log");
    let child = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--secure-port", &api.to_string()])
        .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Demo {
        child,
        api,
        metrics,
        _dir: dir,
        log,
    }
}

/// Run a README command with the demo's ports, through the shell as a reader would.
fn shell(command: &str, demo: &Demo) -> (bool, String, String) {
    let command = command
        .replace("127.0.0.1:6443", &format!("127.0.0.1:{}", demo.api))
        .replace("127.0.0.1:9100", &format!("127.0.0.1:{}", demo.metrics));
    let kubectl = peers::kubectl();
    let path = format!(
        "{}:{}",
        kubectl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .args(["-c", &command])
        .env("PATH", path)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// README's local demo, as written: the adapter, then every command of its second terminal
/// (the target through curl and kubectl, /status, the history, /metrics) succeeds and says what
/// README says it does; the status page's timeline spans the demo's retention, and Chromium
/// renders it. Every family /metrics exports has HELP text and is in docs/metrics.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_demo_runs_as_written() {
    let chromium_ok = peers::chromium();
    let demo = start_demo();
    let readme = read("README.md");
    let second_terminal = readme
        .split("In a second terminal:")
        .nth(1)
        .expect("README's demo has a second terminal");
    let block = sh_blocks(second_terminal).remove(0);
    let steps = commands(&block);
    assert!(steps.len() >= 5, "{steps:?}");
    // Ready once the first scrape round is in; then the target must be served.
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        let (ok, out, err) = shell(&steps[0], &demo);
        if ok && out.contains("\"value\"") {
            break out;
        }
        assert!(
            Instant::now() < deadline,
            "`{}` never answered a value: {out} {err}\nlog:\n{}",
            steps[0],
            std::fs::read_to_string(&demo.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["items"].as_array().map(Vec::len), Some(1), "{v}");
    let mut metrics_page = String::new();
    let mut status = serde_json::Value::Null;
    for step in &steps {
        let (ok, out, err) = shell(step, &demo);
        assert!(ok, "`{step}` failed: {err}\n{out}");
        assert!(!out.trim().is_empty(), "`{step}` printed nothing");
        if step.contains("/metrics") {
            metrics_page = out;
        } else if step.contains("/status") || step.contains("--raw") {
            let json = serde_json::from_str::<serde_json::Value>(&out)
                .unwrap_or_else(|e| panic!("`{step}` printed no JSON ({e}): {out}"));
            if step.ends_with("/status") {
                status = json;
            }
        }
    }
    // Each reason names a series once, by its first name, not with the configured aliases.
    let reasons: Vec<&str> = status["workloads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["answer"]["parts"].as_array())
        .flatten()
        .filter_map(|p| p["reason"].as_str())
        .collect();
    assert_eq!(reasons.len(), 2, "{status}");
    assert!(
        reasons[0].contains(" series of hpa_expect_replicas ")
            && reasons[1].contains(" index of hpa_stateful_index ")
            && reasons.iter().all(|r| !r.contains("_count")),
        "{reasons:?}"
    );
    // The log warns about nothing in the demo's own config, and has no colour codes (not a
    // terminal).
    let log = std::fs::read_to_string(&demo.log).unwrap();
    assert!(!log.contains('\u{1b}'), "colour codes in a file:\n{log}");
    assert!(!log.contains("scrape.static["), "{log}");

    // /metrics: HELP on every family, each named in the reference.
    assert!(!metrics_page.is_empty(), "README's demo reads /metrics");
    let families: Vec<&str> = metrics_page
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(families.len() >= 20, "{families:?}");
    // The demo predicts no HPA (no Kubernetes discovery): those families are left out.
    assert!(!metrics_page.contains("hpa_bridge_hpa"), "{metrics_page}");
    for f in &families {
        assert!(
            metrics_page.contains(&format!("# HELP {f} ")),
            "{f} has no HELP text"
        );
    }
    // As curl gets it (no Accept header: the text format), `promtool check metrics` has
    // nothing to say.
    let (code, said) = peers::promtool_check_metrics(&metrics_page);
    assert!(
        code == Some(0) && said.trim().is_empty(),
        "promtool check metrics on the demo's /metrics: {said}"
    );
    let reference = read("docs/metrics.md");
    for f in &families {
        let base = f.trim_end_matches("_total");
        assert!(
            reference.contains(&format!("`{base}")),
            "docs/metrics.md does not name {f}"
        );
    }

    // The status page at the demo's retention: the time axis spans examples/local.yaml's
    // history.retention, so the demo's two-minute wave fills a readable part of it.
    let retention_ms = hpa_bridge_rules::config::Config::from_yaml(&read("examples/local.yaml"))
        .unwrap()
        .history
        .retention
        .0
        .as_millis() as i64;
    assert!(
        retention_ms <= 10 * 60_000,
        "the demo keeps {retention_ms} ms"
    );
    let want: Vec<String> = hpa_bridge_server::api::status_page::axis_ticks(retention_ms)
        .into_iter()
        .map(|t| t.label)
        .collect();
    let url = format!("http://127.0.0.1:{}/", demo.metrics);
    let dom = crate::status_page::dump_dom(&url).await;
    let ticks: Vec<&str> = dom
        .split("<text class=\"tick\"")
        .skip(1)
        .filter_map(|t| t.split_once('>')?.1.split_once("</text>"))
        .map(|(label, _)| label)
        .collect();
    assert_eq!(ticks, want, "time axis:\n{dom}");
    assert!(dom.contains("data-workload=\"lobby\""), "{dom}");
    assert!(dom.contains("<path class=\"served\""), "{dom}");
    let shot_dir = tempfile::tempdir().unwrap();
    crate::status_page::screenshot(&url, &shot_dir.path().join("demo.png")).await;
    let _ = chromium_ok;
}

/// The first yaml block of `page` after `heading`.
fn yaml_block_after<'a>(page: &'a str, heading: &str) -> &'a str {
    page.split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("no {heading:?}"))
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .unwrap_or_else(|| panic!("no yaml block after {heading:?}"))
}

/// The HPA README shows is the shipped example's, field for field.
#[test]
fn the_readme_hpa_is_the_shipped_example() {
    let readme = read("README.md");
    let shown = yaml_block_after(&readme, "## The HPA to write");
    let shown: serde_json::Value = yaml_serde::from_str(shown).unwrap();
    let example = docs(&read("manifests/examples/statefulset-hpa.yaml"));
    let example = one(&example, "HorizontalPodAutoscaler");
    assert_eq!(shown["spec"], example["spec"]);
    assert_eq!(shown["metadata"]["name"], example["metadata"]["name"]);
}
