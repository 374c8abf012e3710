//! `cargo fusion`: tools for Fusion connectors: review their lockfiles, create them, ship them.
//!
//! Run it as `cargo fusion …` once installed (`cargo install --path fusion-cli`), or as
//! `cargo run -p fusion-cli -- …` in this workspace.
//!
//! - `lock` reads capability lockfiles (`fusion.lock`): `diff`, `show`, `verify` (see
//!   [`lock`]).
//! - `openapi` writes a connector crate from an OpenAPI 3.0/3.1 document (see [`openapi`]).
//! - `new` writes a connector crate that builds and runs: vanilla, from an OpenAPI document or
//!   from a database's schema (see [`new`] and [`db`]).
//! - `bundle` builds a connector's release binary with its lockfile verified, a reproducible
//!   content hash embedded and a size budget (see [`bundle`]); unlike the others, it builds.
//! - `tokens` measures what MCP servers cost an agent in tokens (see [`tokens`]).
//!
//! Each top-level subcommand is a module with its own `Subcommand` enum and `run` function;
//! adding one is a variant of [`Command`] and an arm in [`run`].
//!
//! Exit codes: 0 when all is well; 1 when the command found what it checks for (a change of
//! the `--fail-on` class, an inconsistent lockfile); 2 when a file cannot be read or the
//! command line is wrong.

mod bundle;
mod db;
mod lock;
mod new;
mod openapi;
mod tokens;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Tools for Fusion MCP connectors.
#[derive(Debug, Parser)]
#[command(name = "cargo fusion", bin_name = "cargo fusion", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The top-level subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Capability lockfiles: the surface of a connector as agents see it.
    #[command(subcommand)]
    Lock(lock::LockCommand),
    /// Generate a connector crate from an OpenAPI 3.0/3.1 document.
    Openapi(openapi::OpenapiCommand),
    /// Create a connector crate: an in-memory example, or generated from an OpenAPI document
    /// or a database's schema.
    New(new::NewCommand),
    /// Build a connector's release binary: lockfile verified, content hash embedded, size
    /// budget checked.
    Bundle(bundle::BundleCommand),
    /// What MCP servers cost an agent in tokens: their tool listing, each definition and the
    /// answers of given calls, counted with the o200k tokenizer.
    Tokens(tokens::TokensCommand),
}

/// Why a command could not do its work (exit code 2).
#[derive(Debug)]
struct Failure(String);

fn main() -> ExitCode {
    let cli = Cli::parse_from(arguments(std::env::args_os()));
    match run(cli.command) {
        Ok(code) => code,
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Runs a top-level subcommand.
fn run(command: Command) -> Result<ExitCode, Failure> {
    match command {
        Command::Lock(command) => lock::run(command),
        Command::Openapi(command) => openapi::run(command),
        Command::New(command) => new::run(command),
        Command::Bundle(command) => bundle::run(command),
        Command::Tokens(command) => tokens::run(command),
    }
}

/// The arguments without the `fusion` that cargo passes first when it runs `cargo fusion …`
/// as `cargo-fusion fusion …`.
fn arguments(arguments: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut arguments: Vec<OsString> = arguments.into_iter().collect();
    if arguments.get(1).is_some_and(|first| first == "fusion") {
        arguments.remove(1);
    }
    arguments
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_cargo_adds_is_dropped() {
        let from = |line: &[&str]| -> Vec<OsString> { arguments(line.iter().map(OsString::from)) };
        assert_eq!(
            from(&["cargo-fusion", "fusion", "lock", "show", "f"]),
            from(&["cargo-fusion", "lock", "show", "f"])
        );
        // Only in first place.
        assert_eq!(from(&["cargo-fusion", "lock", "show", "fusion"]).len(), 4);
    }

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }
}
