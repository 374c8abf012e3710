//! `cargo fusion bundle`: a connector's release binary with what was shipped written down.
//!
//! In order:
//! 1. the lockfile: `fusion.lock` next to the package's `Cargo.toml` must be consistent (its
//!    digests match its content), and the package's lock test (`tests/lock.rs`, when there is
//!    one) must pass: the code serves the reviewed surface;
//! 2. the content hash: SHA-256 over the package's files (sorted by their path relative to the
//!    package, `/`-separated; `target/` and hidden directories left out) and the workspace's
//!    `Cargo.lock`, each as `path NUL length NUL bytes`: no timestamps, no absolute paths, so
//!    the same sources give the same hash on any machine;
//! 3. the build, with `FUSION_BUNDLE_HASH` (the content hash) and `FUSION_BUNDLE_LOCK` (the
//!    lockfile's surface digest) in the environment, which the connector reads with
//!    `option_env!` (a generated `main.rs` prints them with `--version`), and the `bundle`
//!    profile unless `--profile` names another: release, `strip`, fat LTO, one codegen unit;
//!    panics still unwind, because the runtime answers a panicking call with an error where
//!    `panic = "abort"` would end the process and every session in it;
//! 4. the size budget: `--max-size`, else `[package.metadata.fusion] max-size` in the
//!    package's `Cargo.toml`; over it, the command fails with the measured size.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Args;
use sha2::{Digest as _, Sha256};

use crate::{Failure, lock};

/// Build a connector's release binary: lockfile verified, content hash embedded, size checked.
#[derive(Debug, Args)]
pub(crate) struct BundleCommand {
    /// The connector's package: its directory or its `Cargo.toml` (default: the current
    /// directory).
    #[arg(long, value_name = "PATH", default_value = ".")]
    manifest_path: PathBuf,
    /// The binary to build (default: the package's only binary, or the one named like it).
    #[arg(long, value_name = "NAME")]
    bin: Option<String>,
    /// The size budget of the binary (`8MB`, `500KB`, `16MiB`, or bytes); overrides
    /// `[package.metadata.fusion] max-size`.
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
    /// Build with this Cargo profile instead of the built-in `bundle` profile.
    #[arg(long, value_name = "PROFILE")]
    profile: Option<String>,
    /// Skip running the package's lock test (the file's own consistency is still checked).
    #[arg(long)]
    skip_lock_test: bool,
    /// Only compute and print the content hash; build nothing.
    #[arg(long)]
    hash_only: bool,
}

/// What `cargo metadata` says about the package.
struct Package {
    name: String,
    dir: PathBuf,
    manifest: PathBuf,
    workspace_root: PathBuf,
    target_dir: PathBuf,
    binaries: Vec<String>,
    has_lock_test: bool,
    max_size: Option<String>,
}

pub(crate) fn run(command: BundleCommand) -> Result<ExitCode, Failure> {
    let package = package(&command.manifest_path)?;
    let lock_path = package.dir.join("fusion.lock");
    let lock_text = lock::read_text(&lock_path)?;
    let lockfile = lock::parse(&lock_path, &lock_text)?;
    let (mismatches, canonical) = lock::consistency(&lockfile, &lock_text);
    if !mismatches.is_empty() || !canonical {
        return Err(Failure(format!(
            "{}: inconsistent ({}): run `cargo fusion lock verify` on it, then write it again with `FUSION_LOCK=update cargo test`",
            lock_path.display(),
            if mismatches.is_empty() {
                "not written as Fusion writes it".to_owned()
            } else {
                mismatches.join("; ")
            }
        )));
    }
    let lock_digest = lockfile.digests.surface.clone();
    let hash = content_hash(&package.dir, &package.workspace_root.join("Cargo.lock"))?;
    if command.hash_only {
        println!("{hash}");
        return Ok(ExitCode::SUCCESS);
    }
    let budget = match command.max_size.as_deref().or(package.max_size.as_deref()) {
        Some(text) => Some(parse_size(text).ok_or_else(|| {
            Failure(format!(
                "`{text}` is not a size: write it as 8MB, 500KB, 16MiB or bytes"
            ))
        })?),
        None => None,
    };
    let bin = match &command.bin {
        Some(bin) if package.binaries.contains(bin) => bin.clone(),
        Some(bin) => {
            return Err(Failure(format!(
                "{} has no binary `{bin}` (it has: {})",
                package.name,
                package.binaries.join(", ")
            )));
        }
        None if package.binaries.len() == 1 => package.binaries[0].clone(),
        None if package.binaries.contains(&package.name) => package.name.clone(),
        None => {
            return Err(Failure(format!(
                "{} has {} binaries: choose one with --bin",
                package.name,
                package.binaries.len()
            )));
        }
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    if package.has_lock_test && !command.skip_lock_test {
        eprintln!(
            "bundle: checking the served surface against fusion.lock (cargo test --test lock)"
        );
        let status = Command::new(&cargo)
            .args(["test", "--test", "lock", "--manifest-path"])
            .arg(&package.manifest)
            .env_remove("FUSION_LOCK")
            .status()
            .map_err(|error| Failure(format!("cannot run cargo: {error}")))?;
        if !status.success() {
            return Err(Failure(
                "the lock test failed: the code does not serve the surface in fusion.lock".into(),
            ));
        }
    }
    let mut build = Command::new(&cargo);
    build
        .arg("build")
        .arg("--manifest-path")
        .arg(&package.manifest)
        .args(["--bin", &bin]);
    let profile = match &command.profile {
        Some(profile) => profile.clone(),
        None => {
            for setting in [
                "profile.bundle.inherits=\"release\"",
                "profile.bundle.strip=true",
                "profile.bundle.lto=true",
                "profile.bundle.codegen-units=1",
            ] {
                build.args(["--config", setting]);
            }
            "bundle".to_owned()
        }
    };
    build.args(["--profile", &profile]);
    build
        .env("FUSION_BUNDLE_HASH", &hash)
        .env("FUSION_BUNDLE_LOCK", &lock_digest);
    eprintln!("bundle: building {bin} with profile {profile}");
    let status = build
        .status()
        .map_err(|error| Failure(format!("cannot run cargo: {error}")))?;
    if !status.success() {
        return Err(Failure(format!("the build of {bin} failed")));
    }
    let out_dir = match profile.as_str() {
        "dev" | "test" => "debug",
        "release" | "bench" => "release",
        other => other,
    };
    let binary = package
        .target_dir
        .join(out_dir)
        .join(format!("{bin}{}", std::env::consts::EXE_SUFFIX));
    let size = std::fs::metadata(&binary)
        .map_err(|error| Failure(format!("{}: {error}", binary.display())))?
        .len();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "binary {}", binary.display());
    let _ = writeln!(stdout, "hash {hash}");
    let _ = writeln!(stdout, "lock {lock_digest}");
    let _ = writeln!(stdout, "size {size} bytes ({})", human(size));
    if let Some(budget) = budget {
        if size > budget {
            eprintln!(
                "error: {bin} is {} ({size} bytes), over its budget of {} ({budget} bytes) by {} bytes",
                human(size),
                human(budget),
                size - budget
            );
            return Ok(ExitCode::from(1));
        }
        let _ = writeln!(stdout, "budget {budget} bytes ({}): within", human(budget));
    }
    Ok(ExitCode::SUCCESS)
}

fn package(path: &Path) -> Result<Package, Failure> {
    let manifest = if path.is_dir() {
        path.join("Cargo.toml")
    } else {
        path.to_owned()
    };
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .map_err(|error| Failure(format!("cannot run cargo metadata: {error}")))?;
    if !output.status.success() {
        return Err(Failure(format!(
            "cargo metadata failed for {}: {}",
            manifest.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| Failure(format!("cargo metadata: {error}")))?;
    let manifest = std::fs::canonicalize(&manifest)
        .map_err(|error| Failure(format!("{}: {error}", manifest.display())))?;
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let package = packages
        .iter()
        .find(|package| {
            package["manifest_path"].as_str().map(PathBuf::from).as_deref() == Some(manifest.as_path())
        })
        .ok_or_else(|| {
            Failure(format!("{} is a workspace, not a package: point --manifest-path at the connector's package", manifest.display()))
        })?;
    let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_owned();
    let targets = package["targets"].as_array().cloned().unwrap_or_default();
    let has_kind = |target: &serde_json::Value, kind: &str| {
        target["kind"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == kind))
    };
    Ok(Package {
        name: text(&package["name"]),
        dir: manifest.parent().expect("a file has a parent").to_owned(),
        manifest: manifest.clone(),
        workspace_root: PathBuf::from(text(&metadata["workspace_root"])),
        target_dir: PathBuf::from(text(&metadata["target_directory"])),
        binaries: targets
            .iter()
            .filter(|target| has_kind(target, "bin"))
            .map(|target| text(&target["name"]))
            .collect(),
        has_lock_test: targets
            .iter()
            .any(|target| has_kind(target, "test") && target["name"] == "lock"),
        max_size: package["metadata"]["fusion"]["max-size"]
            .as_str()
            .map(str::to_owned),
    })
}

/// The content hash of the package at `dir` and the lockfile `cargo_lock`: `sha256:` and 64
/// hex digits.
pub(crate) fn content_hash(dir: &Path, cargo_lock: &Path) -> Result<String, Failure> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let mut hasher = Sha256::new();
    let mut add = |name: &str, bytes: &[u8]| {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(bytes.len().to_string().as_bytes());
        hasher.update([0]);
        hasher.update(bytes);
    };
    for (name, path) in &files {
        let bytes =
            std::fs::read(path).map_err(|error| Failure(format!("{}: {error}", path.display())))?;
        add(name, &bytes);
    }
    // Cargo.lock pins every registry dependency; a package inside a workspace has none of its own.
    let lock = std::fs::read(cargo_lock).map_err(|error| {
        Failure(format!(
            "{}: {error} (build the package once to write it)",
            cargo_lock.display()
        ))
    })?;
    add("\0Cargo.lock", &lock);
    let digest = hasher.finalize();
    Ok(format!(
        "sha256:{}",
        digest
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>()
    ))
}

/// Every file under `dir`, as (path relative to `root` with `/`, path), without `target/`,
/// hidden entries or the package's own `Cargo.lock` (added once, by [`content_hash`]).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) -> Result<(), Failure> {
    let entries =
        std::fs::read_dir(dir).map_err(|error| Failure(format!("{}: {error}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(|error| Failure(format!("{}: {error}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|error| Failure(format!("{}: {error}", path.display())))?;
        if name.starts_with('.') || (kind.is_dir() && name == "target") {
            continue;
        }
        if kind.is_dir() {
            collect(root, &path, files)?;
        } else if kind.is_file() {
            let relative = path.strip_prefix(root).expect("under the root");
            let relative: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            let relative = relative.join("/");
            if relative != "Cargo.lock" {
                files.push((relative, path));
            }
        }
    }
    Ok(())
}

/// `8MB` (10^6), `16MiB` (2^20), `500KB`, `1GB`, or a number of bytes.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let unit = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    (number >= 0.0).then(|| (number * unit).round() as u64)
}

/// A size in MB with one decimal (`14.2 MB`).
fn human(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("8MB"), Some(8_000_000));
        assert_eq!(parse_size("16MiB"), Some(16 * 1024 * 1024));
        assert_eq!(parse_size("500 KB"), Some(500_000));
        assert_eq!(parse_size("1.5MB"), Some(1_500_000));
        assert_eq!(parse_size("1234"), Some(1234));
        assert_eq!(parse_size("8 parsecs"), None);
        assert_eq!(parse_size("MB"), None);
    }

    #[test]
    fn the_hash_depends_on_content_and_names_not_on_times_or_places() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        for dir in [first.path(), second.path()] {
            std::fs::create_dir_all(dir.join("src")).unwrap();
            std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
            std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
            std::fs::write(dir.join("Cargo.lock"), "version = 4\n").unwrap();
            // Build output and hidden files are not sources.
            std::fs::create_dir_all(dir.join("target/debug")).unwrap();
        }
        std::fs::write(second.path().join("target/debug/x"), "binary").unwrap();
        std::fs::write(second.path().join(".env"), "SECRET=1").unwrap();
        let hash = |dir: &Path| content_hash(dir, &dir.join("Cargo.lock")).unwrap();
        assert_eq!(hash(first.path()), hash(second.path()));
        assert!(hash(first.path()).starts_with("sha256:"));
        std::fs::write(second.path().join("src/main.rs"), "fn main() { }\n").unwrap();
        assert_ne!(hash(first.path()), hash(second.path()));
        // A renamed file is another package, even with the same bytes.
        std::fs::write(second.path().join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::rename(
            second.path().join("src/main.rs"),
            second.path().join("src/app.rs"),
        )
        .unwrap();
        assert_ne!(hash(first.path()), hash(second.path()));
    }
}
