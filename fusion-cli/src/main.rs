//! `cargo fusion`: reads the capability lockfiles of Fusion connectors (`fusion.lock`).
//!
//! Run it as `cargo fusion lock …` once installed (`cargo install --path fusion-cli`), or as
//! `cargo run -p fusion-cli -- lock …` in this workspace. It reads lockfiles only and never
//! builds a crate, so CI can compare the base branch's lockfile with a pull request's.
//!
//! Exit codes: 0 when all is well; 1 when `lock diff` finds a change of the `--fail-on` class
//! or worse, or `lock verify` finds an inconsistent file; 2 when a file cannot be read or the
//! command line is wrong.

mod show;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use fusion_lock::{Class, Lockfile, diff};

/// Reviews the capability lockfiles (`fusion.lock`) of Fusion MCP connectors.
#[derive(Debug, Parser)]
#[command(name = "cargo fusion", bin_name = "cargo fusion", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Capability lockfiles: the surface of a connector as agents see it.
    #[command(subcommand)]
    Lock(LockCommand),
}

#[derive(Debug, Subcommand)]
enum LockCommand {
    /// Lists every change from OLD to NEW with its class (breaking, risky, safe, cosmetic) and
    /// a reason.
    Diff {
        /// The reviewed lockfile (the base branch's, say).
        old: PathBuf,
        /// The lockfile to compare with it.
        new: PathBuf,
        /// Exit with 1 when a change is of this class or more serious.
        #[arg(long, value_enum, value_name = "CLASS")]
        fail_on: Option<ClassArg>,
        /// How to print the changes.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Prints the surface a lockfile describes, one action per row.
    Show {
        /// The lockfile.
        file: PathBuf,
    },
    /// Checks that every digest matches its entry and that the file is written as Fusion
    /// writes it.
    Verify {
        /// The lockfile.
        file: PathBuf,
    },
}

/// A class of change, as the command line names it.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum ClassArg {
    Breaking,
    Risky,
    Safe,
    Cosmetic,
}

impl From<ClassArg> for Class {
    fn from(class: ClassArg) -> Self {
        match class {
            ClassArg::Breaking => Class::Breaking,
            ClassArg::Risky => Class::Risky,
            ClassArg::Safe => Class::Safe,
            ClassArg::Cosmetic => Class::Cosmetic,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// One line per change.
    Text,
    /// `{"changes": [...], "counts": {...}}`, for tools.
    Json,
    /// A table, for a pull request's comment.
    Markdown,
}

/// Why a command could not do its work (exit code 2).
#[derive(Debug)]
struct Failure(String);

fn main() -> ExitCode {
    let cli = Cli::parse_from(arguments(std::env::args_os()));
    match run(cli) {
        Ok(code) => code,
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
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

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    let Command::Lock(command) = cli.command;
    match command {
        LockCommand::Diff {
            old,
            new,
            fail_on,
            format,
        } => {
            let (old_file, new_file) = (read(&old)?, read(&new)?);
            for (path, file) in [(&old, &old_file), (&new, &new_file)] {
                if !file.verify().is_empty() {
                    eprintln!(
                        "warning: {}: its digests do not match its content (edited by hand?); compared as it is",
                        path.display()
                    );
                }
            }
            let changes = diff(&old_file.surface, &new_file.surface);
            let fail_on = fail_on.map(Class::from);
            let fails = fail_on.is_some_and(|class| changes.fails(class));
            match format {
                Format::Text => print!("{}", changes.to_text()),
                Format::Markdown => print!("{}", changes.to_markdown()),
                Format::Json => {
                    let mut json = changes.to_json();
                    json["old"] = surface_facts(&old, &old_file);
                    json["new"] = surface_facts(&new, &new_file);
                    if let Some(class) = fail_on {
                        json["fail_on"] = class.as_str().into();
                        json["fails"] = fails.into();
                    }
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&json).unwrap_or_default()
                    );
                }
            }
            if let (true, Some(class)) = (fails, fail_on) {
                if format == Format::Text {
                    eprintln!("failing: a change is {class} or more serious");
                }
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        LockCommand::Show { file } => {
            let lockfile = read(&file)?;
            print!("{}", show::table(&lockfile.surface));
            Ok(ExitCode::SUCCESS)
        }
        LockCommand::Verify { file } => {
            let text = read_text(&file)?;
            let lockfile = parse(&file, &text)?;
            let mismatches = lockfile.verify();
            let canonical = lockfile.surface.to_lockfile() == text.replace("\r\n", "\n");
            let path = file.display();
            if mismatches.is_empty() && canonical {
                println!(
                    "{path}: consistent: {} action digests, the server's and the surface's ({})",
                    lockfile.digests.actions.len(),
                    lockfile.digests.surface
                );
                return Ok(ExitCode::SUCCESS);
            }
            if !mismatches.is_empty() {
                println!(
                    "{path}: {} digest{} do not match the file's content:",
                    mismatches.len(),
                    if mismatches.len() == 1 { "" } else { "s" }
                );
                for mismatch in &mismatches {
                    println!("  {mismatch}");
                }
            }
            if !canonical {
                println!(
                    "{path}: not written as Fusion writes it (keys sorted, one member per line)"
                );
            }
            println!("Write it again from the code with `FUSION_LOCK=update cargo test`.");
            Ok(ExitCode::from(1))
        }
    }
}

fn surface_facts(path: &Path, file: &Lockfile) -> serde_json::Value {
    serde_json::json!({
        "path": path.display().to_string(),
        "server": file.surface.server.name,
        "version": file.surface.server.version,
        "digest": file.surface.digest(),
    })
}

fn read_text(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|error| Failure(format!("cannot read {}: {error}", path.display())))
}

fn parse(path: &Path, text: &str) -> Result<Lockfile, Failure> {
    Lockfile::parse(text).map_err(|error| Failure(format!("{}: {error}", path.display())))
}

fn read(path: &Path) -> Result<Lockfile, Failure> {
    parse(path, &read_text(path)?)
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
