//! `hpa-bridge bench`: runs the separate `hpa-bridge-bench` binary.

use clap::Args;

/// Everything after `bench`, handed to `hpa-bridge-bench` unchanged.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Flags of `hpa-bridge-bench`: --quick, --check, --out DIR, --only PARTS.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<std::ffi::OsString>,
}

/// Replace this process with `hpa-bridge-bench` from the same directory, forwarding the
/// arguments; returns only on failure. The bench is its own binary so that the server links
/// none of its code.
pub(crate) fn run(verbose: u8, log_format: &str, args: BenchArgs) -> anyhow::Error {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return anyhow::anyhow!("locating the hpa-bridge binary: {e}"),
    };
    let bench = exe.with_file_name(format!("hpa-bridge-bench{}", std::env::consts::EXE_SUFFIX));
    if !bench.is_file() {
        return anyhow::anyhow!(
            "`hpa-bridge bench` runs the separate hpa-bridge-bench binary, which is not beside {}; \
             build it with `cargo build --release --bin hpa-bridge-bench` (or run \
             `cargo run --release --bin hpa-bridge-bench -- ARGS`)",
            exe.display()
        );
    }
    let mut cmd = std::process::Command::new(&bench);
    if verbose > 0 {
        cmd.arg(format!("-{}", "v".repeat(usize::from(verbose))));
    }
    cmd.arg("--log-format").arg(log_format).args(&args.args);
    #[cfg(unix)]
    let failure = {
        use std::os::unix::process::CommandExt;
        anyhow::Error::from(cmd.exec())
    };
    #[cfg(not(unix))]
    let failure = match cmd.status() {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => anyhow::Error::from(e),
    };
    failure.context(format!("running {}", bench.display()))
}
