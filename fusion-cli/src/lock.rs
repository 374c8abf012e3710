//! `cargo fusion lock`: reads capability lockfiles (`fusion.lock`), never builds a crate, so
//! that CI can compare the base branch's lockfile with a pull request's.
//!
//! Exit codes: 1 when `diff` finds a change of the `--fail-on` class or worse, or `verify`
//! finds an inconsistent file; 2 when a file cannot be read.

mod show;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use fusion_lock::{Class, Lockfile, diff};

use crate::Failure;

/// `cargo fusion lock …`.
#[derive(Debug, Subcommand)]
pub(crate) enum LockCommand {
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
pub(crate) enum ClassArg {
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

/// How `lock diff` prints the changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// One line per change.
    Text,
    /// `{"changes": [...], "counts": {...}}`, for tools.
    Json,
    /// A table, for a pull request's comment.
    Markdown,
}

/// Runs `cargo fusion lock …`.
pub(crate) fn run(command: LockCommand) -> Result<ExitCode, Failure> {
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
            let (mismatches, canonical) = consistency(&lockfile, &text);
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

/// Whether `lockfile`, read from `text`, is consistent: its digests match its content, and it
/// is written as Fusion writes it.
pub(crate) fn consistency(lockfile: &Lockfile, text: &str) -> (Vec<String>, bool) {
    let mismatches = lockfile.verify().iter().map(ToString::to_string).collect();
    let canonical = lockfile.surface.to_lockfile() == text.replace("\r\n", "\n");
    (mismatches, canonical)
}

pub(crate) fn read_text(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|error| Failure(format!("cannot read {}: {error}", path.display())))
}

pub(crate) fn parse(path: &Path, text: &str) -> Result<Lockfile, Failure> {
    Lockfile::parse(text).map_err(|error| Failure(format!("{}: {error}", path.display())))
}

fn read(path: &Path) -> Result<Lockfile, Failure> {
    parse(path, &read_text(path)?)
}
