//! The log set-up of a connector's `main` (feature `stderr-log`).

/// Sends `tracing` logs to standard error, in color when it is a terminal, filtered by
/// `RUST_LOG` (default `info,rmcp=warn`). Standard output belongs to the protocol when serving
/// over stdio, so logs never go there. Does nothing when a global subscriber is already set.
pub fn log_to_stderr() {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .try_init();
}
