//! `fusion-openapi SPEC --out DIR [--name NAME] [--fusion-path PATH]`: writes a connector crate
//! generated from an OpenAPI document (the same arguments as `cargo fusion openapi`).

use std::path::PathBuf;
use std::process::ExitCode;

use fusion_openapi::{FusionDependency, Options, generate};

const USAGE: &str = "usage: fusion-openapi SPEC --out DIR [--name NAME] [--fusion-path PATH]";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("fusion-openapi: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut spec = None;
    let mut out = None;
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--name" => options.name = Some(value("--name")?),
            "--fusion-path" => {
                options.fusion = FusionDependency::Path(PathBuf::from(value("--fusion-path")?));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            flag if flag.starts_with("--") => {
                return Err(format!("unknown flag `{flag}`\n{USAGE}"));
            }
            path if spec.is_none() => spec = Some(PathBuf::from(path)),
            extra => return Err(format!("unexpected argument `{extra}`\n{USAGE}")),
        }
    }
    let spec = spec.ok_or(format!("no SPEC given\n{USAGE}"))?;
    let out = out.ok_or(format!("no --out DIR given\n{USAGE}"))?;
    let text = std::fs::read_to_string(&spec)
        .map_err(|error| format!("cannot read {}: {error}", spec.display()))?;
    let generated = generate(&text, &options).map_err(|error| error.to_string())?;
    let formatted = generated
        .write_to(&out)
        .map_err(|error| format!("cannot write {}: {error}", out.display()))?;
    eprint!("{}", generated.report);
    if !formatted {
        eprintln!("note: rustfmt did not run: format the crate with `cargo fmt`");
    }
    eprintln!("wrote {} to {}", generated.name, out.display());
    Ok(())
}
