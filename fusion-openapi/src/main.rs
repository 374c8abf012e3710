//! `fusion-openapi SPEC --out DIR [--name NAME] [--fusion-path PATH]`: writes a connector crate
//! generated from an OpenAPI document (the same arguments as `cargo fusion openapi`).

use std::path::PathBuf;
use std::process::ExitCode;

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
    let mut spec: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    let mut name: Option<String> = None;
    let mut fusion_path: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--name" => name = Some(value("--name")?),
            "--fusion-path" => fusion_path = Some(PathBuf::from(value("--fusion-path")?)),
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
    let written = fusion_openapi::run(&spec, &out, name.as_deref(), fusion_path.as_deref())
        .map_err(|error| error.to_string())?;
    eprintln!("{written}");
    Ok(())
}
