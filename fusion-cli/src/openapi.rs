//! `cargo fusion openapi SPEC --out DIR [--name NAME] [--fusion-path PATH] [--overlay FILE]`: an OpenAPI 3.0/3.1
//! document (JSON or YAML) to a connector crate of upstream models, presenters and HTTP proxy
//! tools (see the `fusion-openapi` crate for what is generated and what is skipped).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::Failure;

/// Generate a connector crate from an OpenAPI 3.0/3.1 document.
#[derive(Debug, Args)]
pub(crate) struct OpenapiCommand {
    /// The OpenAPI document (JSON or YAML; local `$ref`s are followed).
    spec: PathBuf,
    /// Where to write the crate (created if needed; only the generated files are overwritten).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The crate's name (default: from the document's title).
    #[arg(long)]
    name: Option<String>,
    /// Depend on the `fusion` crate at this path instead of the published version.
    #[arg(long, value_name = "PATH")]
    fusion_path: Option<PathBuf>,
    /// An overlay (JSON or YAML): which operations become tools (include/exclude by tag, path
    /// or operationId), their names, guarded and hidden fields, description budgets, rules.
    #[arg(long, value_name = "FILE")]
    overlay: Option<PathBuf>,
}

/// Writes the crate and prints the report (what became tools, what was skipped and why) on
/// stderr, so that stdout stays empty for scripts.
pub(crate) fn run(command: OpenapiCommand) -> Result<ExitCode, Failure> {
    let written = fusion_openapi::run_with_overlay(
        &command.spec,
        &command.out,
        command.name.as_deref(),
        command.fusion_path.as_deref(),
        command.overlay.as_deref(),
    )
    .map_err(|error| Failure(format!("{}: {error}", command.spec.display())))?;
    eprintln!("{written}");
    Ok(ExitCode::SUCCESS)
}
