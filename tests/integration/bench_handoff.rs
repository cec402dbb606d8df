//! `hpa-bridge bench` hands over to the `hpa-bridge-bench` binary beside it (the bench is a
//! package of its own, so the server links none of its code). The bench itself is tested by its
//! package (crates/hpa-bridge-bench/tests/smoke.rs); here only the hand-over: the arguments
//! arrive unchanged, and a missing bench binary is named with its build step.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The server binary hard-linked (or copied) alone into a fresh directory on the target's
/// filesystem.
fn server_alone() -> (tempfile::TempDir, PathBuf) {
    let server = Path::new(env!("CARGO_BIN_EXE_hpa-bridge"));
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let alone = dir.path().join(server.file_name().unwrap());
    if std::fs::hard_link(server, &alone).is_err() {
        std::fs::copy(server, &alone).unwrap();
    }
    (dir, alone)
}

/// `hpa-bridge -v bench --quick --out DIR` replaces itself with the `hpa-bridge-bench` beside it,
/// handing over the verbosity, the log format and every argument after `bench` unchanged. The
/// executable beside it here is a shell script that records its arguments, since what is tested
/// is the server binary's hand-over, not the bench.
#[cfg(unix)]
#[test]
fn bench_hands_its_arguments_to_the_bench_binary_beside_it() {
    use std::os::unix::fs::PermissionsExt;

    let (dir, alone) = server_alone();
    let recorded = dir.path().join("arguments");
    let bench = dir.path().join("hpa-bridge-bench");
    std::fs::write(
        &bench,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\nexit 7\n",
            recorded.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&bench, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Another test thread forking while the script was open for writing can hold it open
    // briefly, and exec then fails with ETXTBSY; that race is the harness's, so it is retried.
    let mut attempts = 0;
    let (run, stderr) = loop {
        let run = Command::new(&alone)
            .args([
                "-v",
                "bench",
                "--quick",
                "--only",
                "serve,live",
                "--out",
                "/x y",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        attempts += 1;
        if !stderr.contains("Text file busy") || attempts == 20 {
            break (run, stderr);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // The exit status is the bench's own: the server process was replaced, not waiting on it.
    assert_eq!(run.status.code(), Some(7), "{stderr}");
    let arguments = std::fs::read_to_string(&recorded).unwrap();
    assert_eq!(
        arguments.lines().collect::<Vec<_>>(),
        [
            "-v",
            "--log-format",
            "text",
            "--quick",
            "--only",
            "serve,live",
            "--out",
            "/x y"
        ],
        "{stderr}"
    );
}

/// Without `hpa-bridge-bench` beside it, `hpa-bridge bench` fails and says how to build it.
#[test]
fn bench_without_the_bench_binary_says_how_to_build_it() {
    let (dir, alone) = server_alone();
    let run = Command::new(&alone)
        .args(["bench", "--quick", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cargo build --release --bin hpa-bridge-bench"),
        "{stderr}"
    );
    assert!(!dir.path().join("benchmarks.json").exists());
}
