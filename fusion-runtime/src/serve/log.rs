//! The log set-up of a connector's `main` (feature `stderr-log`).

use tracing_subscriber::filter::Targets;

/// What is logged when `RUST_LOG` is unset, empty or not understood.
const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// Sends `tracing` logs to standard error, in color when it is a terminal, filtered by
/// `RUST_LOG` (default `info,rmcp=warn`). Standard output belongs to the protocol when serving
/// over stdio, so logs never go there. Does nothing when a global subscriber is already set.
///
/// `RUST_LOG` holds comma-separated `LEVEL`, `TARGET` or `TARGET=LEVEL` directives (targets
/// match by prefix: `info,billing=debug,rmcp=warn`). Span and field directives (`[span]`,
/// `{field=value}`) are not supported: they need `EnvFilter`'s regex engine, a quarter of a
/// megabyte of every connector's binary. A filter that cannot be read is reported on stderr,
/// and the default applies.
pub fn log_to_stderr() {
    use std::io::IsTerminal as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let (filter, refused) = filter_from(std::env::var("RUST_LOG").ok().as_deref());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = tracing_subscriber::registry()
        .with(fmt)
        .with(filter)
        .try_init()
        .is_ok();
    if let (true, Some((value, error))) = (installed, refused) {
        tracing::warn!(
            "RUST_LOG={value:?} is not a filter this server reads ({error}); logging {DEFAULT_FILTER}"
        );
    }
}

/// The filter `RUST_LOG` asks for, or the default with the value and why it was refused.
fn filter_from(variable: Option<&str>) -> (Targets, Option<(String, String)>) {
    let default = || DEFAULT_FILTER.parse().expect("the default filter parses");
    match variable.map(str::trim) {
        None | Some("") => (default(), None),
        Some(value) => match value.parse::<Targets>() {
            Ok(filter) => (filter, None),
            Err(error) => (default(), Some((value.to_owned(), error.to_string()))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn unset_or_empty_logs_info_and_rmcp_warnings() {
        for variable in [None, Some(""), Some("  ")] {
            let (filter, refused) = filter_from(variable);
            assert!(refused.is_none());
            assert!(filter.would_enable("billing", &Level::INFO));
            assert!(!filter.would_enable("billing", &Level::DEBUG));
            assert!(!filter.would_enable("rmcp::service", &Level::INFO));
            assert!(filter.would_enable("rmcp::service", &Level::WARN));
        }
    }

    #[test]
    fn levels_and_targets_are_read_with_prefix_matching() {
        let (filter, refused) = filter_from(Some("warn,billing=debug,fusion_runtime::serve=trace"));
        assert!(refused.is_none());
        assert!(filter.would_enable("billing::store", &Level::DEBUG));
        assert!(!filter.would_enable("billing::store", &Level::TRACE));
        assert!(filter.would_enable("fusion_runtime::serve::stdio", &Level::TRACE));
        assert!(!filter.would_enable("fusion_runtime::pipeline", &Level::INFO));
        assert!(filter.would_enable("fusion_runtime::pipeline", &Level::WARN));
        let (off, _) = filter_from(Some("off"));
        assert!(!off.would_enable("billing", &Level::ERROR));
    }

    #[test]
    fn a_filter_that_cannot_be_read_falls_back_to_the_default_and_says_why() {
        let (filter, refused) = filter_from(Some("billing=loud"));
        let (value, error) = refused.expect("refused");
        assert_eq!(value, "billing=loud");
        assert!(!error.is_empty());
        assert!(filter.would_enable("billing", &Level::INFO));
        assert!(!filter.would_enable("billing", &Level::DEBUG));
    }
}
