//! `cargo fusion new NAME`: a connector crate that builds, passes its tests and runs over
//! stdio and Streamable HTTP, started from nothing (an in-memory example), from an OpenAPI
//! document (`--openapi SPEC`, through `fusion-openapi`) or from a database's schema
//! (`--from-postgres URL`, `--from-sqlite PATH`, see [`crate::db`]).
//!
//! Every kind gets the same `src/main.rs` (stdio by default, `--http ADDR`, `--version` with
//! the bundle's stamp, see [`crate::bundle`]) and a `tests/lock.rs` that writes and checks its
//! `fusion.lock`. Unless `--no-lock` is given, the command then runs
//! `FUSION_LOCK=update cargo test --test lock` in the new crate so that it starts with its
//! reviewed surface.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Args;

use crate::Failure;
use crate::db;

/// Create a connector crate.
#[derive(Debug, Args)]
pub(crate) struct NewCommand {
    /// The crate's name (letters, digits, `-`, `_`); also the prefix of its tools, except with
    /// `--openapi`, whose tools take theirs from the document's title (the generated README
    /// names it; `cargo fusion openapi --overlay` with `namespace:` sets another).
    name: String,
    /// Where to write it (default: `./NAME`). It must not exist yet, or be empty.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Generate from an OpenAPI 3.0/3.1 document: one HTTP proxy tool per operation.
    #[arg(long, value_name = "SPEC", group = "source")]
    openapi: Option<PathBuf>,
    /// Generate from a PostgreSQL database's schema (`postgres://user@host:port/db`); the
    /// connector serves that database.
    #[arg(long, value_name = "URL", group = "source")]
    from_postgres: Option<String>,
    /// Generate from a SQLite database's schema; the connector serves that file.
    #[arg(long, value_name = "PATH", group = "source")]
    from_sqlite: Option<PathBuf>,
    /// With a database: only these tables (comma-separated; default: every table).
    #[arg(long, value_delimiter = ',', value_name = "TABLE,...")]
    tables: Vec<String>,
    /// With a database: the column naming the tenant that owns a row (default: `tenant_id`,
    /// `org_id` or `account_id`, whichever a table has).
    #[arg(long, value_name = "COLUMN")]
    tenant_column: Option<String>,
    /// Depend on the `fusion` crate at this path (a checkout of Fusion's workspace or of its
    /// `fusion` crate) instead of the published version.
    #[arg(long, value_name = "PATH")]
    fusion_path: Option<PathBuf>,
    /// Do not write an empty `[workspace]` table: the crate is a member of an enclosing
    /// workspace.
    #[arg(long)]
    member: bool,
    /// Do not build the crate to write its `fusion.lock` (run
    /// `FUSION_LOCK=update cargo test --test lock` in it later).
    #[arg(long)]
    no_lock: bool,
}

/// A crate to write: relative paths and their contents.
#[derive(Debug, Default)]
pub(crate) struct Files(pub(crate) Vec<(PathBuf, String)>);

impl Files {
    pub(crate) fn add(&mut self, path: &str, contents: impl Into<String>) {
        self.0.push((PathBuf::from(path), contents.into()));
    }
}

/// What every generated crate's text is filled in with.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    /// The package name, such as `acme-notes`.
    pub(crate) name: String,
    /// Its Rust identifier and tool prefix, such as `acme_notes`.
    pub(crate) ident: String,
}

impl Names {
    fn new(name: &str) -> Result<Names, Failure> {
        let valid = !name.is_empty()
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !valid {
            return Err(Failure(format!(
                "`{name}` is not a usable connector name: use lowercase letters, digits, `-` and `_`, starting with a letter"
            )));
        }
        Ok(Names {
            name: name.to_owned(),
            ident: name.replace('-', "_"),
        })
    }

    /// `text` with `__NAME__` and `__IDENT__` filled in.
    pub(crate) fn fill(&self, text: &str) -> String {
        text.replace("__NAME__", &self.name)
            .replace("__IDENT__", &self.ident)
    }
}

/// The `fusion` dependency line's value.
pub(crate) fn fusion_dependency(fusion_path: Option<&Path>) -> Result<String, Failure> {
    // Serving over stdio and HTTP; no upstream HTTP client (it is most of a small binary).
    let features = r#"default-features = false, features = ["stdio", "http"]"#;
    match fusion_path {
        None => Ok(format!(
            r#"{{ version = "{}", {features} }}"#,
            env!("CARGO_PKG_VERSION")
        )),
        Some(path) => {
            let path = std::fs::canonicalize(path)
                .map_err(|error| Failure(format!("--fusion-path {}: {error}", path.display())))?;
            let path = if path.join("fusion").join("Cargo.toml").exists() {
                path.join("fusion")
            } else {
                path
            };
            Ok(format!(
                r#"{{ path = {:?}, {features} }}"#,
                path.display().to_string()
            ))
        }
    }
}

/// A generated crate's `Cargo.toml`: `fusion`, tokio and `extra` (the store's crates).
pub(crate) fn cargo_toml(
    names: &Names,
    description: &str,
    fusion: &str,
    extra: &str,
    member: bool,
) -> String {
    let workspace = if member { "" } else { "\n[workspace]\n" };
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false
description = "{description}"

[dependencies]
fusion = {fusion}
tokio = {{ version = "1", features = ["rt-multi-thread", "macros", "net"] }}
{extra}
[dev-dependencies]
serde_json = "1"

[package.metadata.fusion]
# `cargo fusion bundle` fails when its binary is larger than this.
max-size = "16MB"
{workspace}"#,
        name = names.name,
    )
}

pub(crate) fn run(command: NewCommand) -> Result<ExitCode, Failure> {
    let names = Names::new(&command.name)?;
    let dir = command
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&names.name));
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map_err(|error| Failure(format!("{}: {error}", dir.display())))?
            .next()
            .is_some()
    {
        return Err(Failure(format!(
            "{} already exists and is not empty: choose another --dir",
            dir.display()
        )));
    }
    let fusion = fusion_dependency(command.fusion_path.as_deref())?;
    let mut files = Files::default();
    let main = names.fill(include_str!("templates/main.rs"));
    if let Some(spec) = &command.openapi {
        files = openapi(spec, &names, &command)?;
        // The document's crate has its own main.rs, configured from its own variables.
    } else if command.from_postgres.is_some() || command.from_sqlite.is_some() {
        let source = match (&command.from_postgres, &command.from_sqlite) {
            (Some(url), _) => db::Source::Postgres(url.clone()),
            (None, Some(path)) => db::Source::Sqlite(path.clone()),
            (None, None) => unreachable!("one of them is given"),
        };
        let schema = db::read(&source)?;
        let options = db::Options {
            tables: command.tables.clone(),
            tenant_column: command.tenant_column.clone(),
        };
        let generated = db::emit::emit(&schema, &source, &names, &options)?;
        eprint!("{}", generated.report);
        files.add(
            "Cargo.toml",
            cargo_toml(
                &names,
                &generated.description,
                &fusion,
                generated.dependencies,
                command.member,
            ),
        );
        files.0.extend(generated.files.0);
        files.add(
            "src/main.rs",
            main.replace("__ENV_USAGE__", generated.env_usage),
        );
    } else {
        files.add(
            "Cargo.toml",
            cargo_toml(
                &names,
                "An MCP connector built with Fusion",
                &fusion,
                "",
                command.member,
            ),
        );
        files.add(
            "src/lib.rs",
            names.fill(include_str!("templates/vanilla_lib.rs")),
        );
        files.add("src/main.rs", main.replace("__ENV_USAGE__", ""));
        files.add(
            "tests/connector.rs",
            names.fill(include_str!("templates/vanilla_test.rs")),
        );
    }
    if command.openapi.is_none() && command.from_postgres.is_none() && command.from_sqlite.is_none()
    {
        files.add(
            "tests/lock.rs",
            names.fill(include_str!("templates/lock_test.rs")),
        );
    }
    write(&dir, &files)?;
    eprintln!("wrote {} to {}", names.name, dir.display());
    if !command.no_lock {
        write_lockfile(&dir)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--openapi SPEC`: the crate `fusion-openapi` generates, as it generates it.
fn openapi(spec: &Path, names: &Names, command: &NewCommand) -> Result<Files, Failure> {
    let text = std::fs::read_to_string(spec)
        .map_err(|error| Failure(format!("cannot read {}: {error}", spec.display())))?;
    let mut options = fusion_openapi::Options {
        name: Some(names.name.clone()),
        standalone: !command.member,
        ..fusion_openapi::Options::default()
    };
    if let Some(path) = &command.fusion_path {
        let path = std::fs::canonicalize(path)
            .map_err(|error| Failure(format!("--fusion-path {}: {error}", path.display())))?;
        options.fusion = fusion_openapi::FusionDependency::Path(path);
    }
    let generated = fusion_openapi::generate(&text, &options)
        .map_err(|error| Failure(format!("{}: {error}", spec.display())))?;
    eprint!("{}", generated.report);
    let mut files = Files(generated.files);
    let lib = names.ident.clone();
    // The lock test needs a server: the document's, over an upstream that is never called.
    files.add(
        "tests/lock.rs",
        format!(
            "//! The reviewed surface: `FUSION_LOCK=update cargo test --test lock` writes `fusion.lock`.\n\n\
             #[test]\nfn the_surface_is_the_reviewed_one() {{\n    \
             let upstream = fusion::HttpUpstream::builder(\"http://127.0.0.1:9\").build().expect(\"an upstream\");\n    \
             let server = {lib}::server(upstream).expect(\"the server builds\");\n    \
             fusion::lock::check(&server, \"fusion.lock\");\n}}\n"
        ),
    );
    Ok(files)
}

/// Writes `files` under `dir`, then formats the Rust sources when rustfmt is installed.
fn write(dir: &Path, files: &Files) -> Result<(), Failure> {
    for (path, contents) in &files.0 {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| Failure(format!("cannot create {}: {error}", parent.display())))?;
        }
        std::fs::write(&path, contents)
            .map_err(|error| Failure(format!("cannot write {}: {error}", path.display())))?;
    }
    let sources: Vec<PathBuf> = files
        .0
        .iter()
        .filter(|(path, _)| path.extension().is_some_and(|ext| ext == "rs"))
        .map(|(path, _)| dir.join(path))
        .collect();
    // Unformatted sources are valid too: a missing rustfmt is not an error.
    let _ = Command::new("rustfmt")
        .args(["--edition", "2024"])
        .args(&sources)
        .status();
    Ok(())
}

/// Builds the crate's lock test once in update mode, so that it starts with its `fusion.lock`.
fn write_lockfile(dir: &Path) -> Result<(), Failure> {
    eprintln!("writing fusion.lock: FUSION_LOCK=update cargo test --test lock");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["test", "--test", "lock"])
        .env("FUSION_LOCK", "update")
        .current_dir(dir)
        .status()
        .map_err(|error| Failure(format!("cannot run cargo: {error}")))?;
    if !status.success() {
        return Err(Failure(format!(
            "the new crate's lock test failed in {}: see the output above",
            dir.display()
        )));
    }
    Ok(())
}
