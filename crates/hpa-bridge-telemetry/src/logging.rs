//! Logging: one structured line per event to stderr, text or JSON.

/// One line per event, to stderr; `RUST_LOG` overrides `-v`.
pub fn init_logging(verbosity: u8, json: bool) {
    let default = match verbosity {
        0 => "info",
        1 => "debug,hyper=info,rustls=info,kube=info,tower=info",
        _ => "trace",
    };
    init_logging_with_default(default, json);
}

/// Logging with `default` as the filter unless RUST_LOG is set.
pub fn init_logging_with_default(default: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR"),
        ))
        .with_target(false);
    if json {
        let _ = builder.json().flatten_event(true).try_init();
    } else {
        let _ = builder.try_init();
    }
}

/// Colour codes only for a person at a terminal: never into a file, a pipe or a log collector,
/// and never when `NO_COLOR` is set to anything (no-color.org).
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(!colour(false, None));
        assert!(!colour(true, Some("1".into())));
        assert!(colour(true, Some("".into())));
    }
}
