//! OpenAPI 3.0 and 3.1 documents (JSON or YAML, local `$ref`s) to Fusion connectors (SPEC L3).
//!
//! [`generate`] reads a document and returns the files of a Rust crate: a `#[model(upstream)]`
//! per schema the operations need, a presenter per model, an HTTP proxy tool per operation,
//! a `lib.rs` with `server(upstream)`, a `main.rs` that serves it over stdio or Streamable
//! HTTP, and a `Cargo.toml` depending on `fusion`. What it cannot express is reported with the
//! operation it skips, never a crash.
//!
//! [`run`] is the whole `cargo fusion openapi SPEC --out DIR [--name NAME] [--fusion-path PATH]`
//! command in one call (read, generate, write, format); [`generate`] only builds the files in
//! memory.
//!
//! ```
//! let spec = r#"{"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
//!   "paths": {"/pets/{id}": {"get": {"operationId": "getPet",
//!     "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
//!     "responses": {"200": {"description": "ok", "content": {"application/json": {"schema":
//!       {"type": "object", "properties": {"id": {"type": "string"}, "password": {"type": "string"}}}}}}}}}}}"#;
//! let generated = fusion_openapi::generate(spec, &fusion_openapi::Options::default()).unwrap();
//! let lib = generated.file("src/lib.rs").unwrap();
//! assert!(lib.contains(r#"http = "GET /pets/{id}""#));
//! assert!(lib.contains("#[hidden]"));
//! assert_eq!(generated.report.tools, 1);
//! ```

mod emit;
mod names;
mod overlay;
mod schema;

use std::fmt;
use std::path::{Path, PathBuf};

pub use overlay::{Overlay, Selector};
pub use schema::Report;

/// Where the generated crate takes `fusion` from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FusionDependency {
    /// A published version (`"0.1"`).
    Version(String),
    /// A local checkout of Fusion's `fusion` crate (the directory holding its `Cargo.toml`,
    /// or the workspace root holding `fusion/`).
    Path(PathBuf),
}

/// What `cargo fusion openapi SPEC --out DIR [--name NAME] [--fusion-path PATH]` passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The crate's name; by default from the document's title (`petstore-connector`).
    pub name: Option<String>,
    /// Where `fusion` comes from.
    pub fusion: FusionDependency,
    /// Write an empty `[workspace]` table, so that the crate builds on its own even inside
    /// another workspace's directory (on by default; off for a member of a workspace).
    pub standalone: bool,
    /// Which operations become tools, under which names, and what is guarded (see
    /// [`Overlay`]).
    pub overlay: Overlay,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: None,
            fusion: FusionDependency::Version(env!("CARGO_PKG_VERSION").to_owned()),
            standalone: true,
            overlay: Overlay::default(),
        }
    }
}

/// A generated crate: its files, relative to the crate's directory, and what was left out.
#[derive(Debug, Clone)]
pub struct GeneratedCrate {
    /// The crate's name.
    pub name: String,
    /// `(relative path, contents)`.
    pub files: Vec<(PathBuf, String)>,
    /// Operations generated and skipped, and notes.
    pub report: Report,
}

impl GeneratedCrate {
    /// The contents of the file at `path` (`src/lib.rs`).
    pub fn file(&self, path: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|(file, _)| file == Path::new(path))
            .map(|(_, contents)| contents.as_str())
    }

    /// Writes the files under `dir` (created if needed), then formats the Rust sources with
    /// `rustfmt` when it is installed (returns whether it ran).
    pub fn write_to(&self, dir: &Path) -> std::io::Result<bool> {
        for (path, contents) in &self.files {
            let path = dir.join(path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, contents)?;
        }
        let sources: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|(path, _)| path.extension().is_some_and(|ext| ext == "rs"))
            .map(|(path, _)| dir.join(path))
            .collect();
        let formatted = std::process::Command::new("rustfmt")
            .arg("--edition")
            .arg("2024")
            .args(&sources)
            .status()
            .is_ok_and(|status| status.success());
        Ok(formatted)
    }
}

/// Why a document could not be turned into a crate at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Error(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// What [`run`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The crate's name.
    pub name: String,
    /// The directory it was written to.
    pub dir: PathBuf,
    /// Operations generated and skipped, and notes.
    pub report: Report,
    /// Whether `rustfmt` formatted the sources (when it is not installed, they are valid but
    /// unformatted).
    pub formatted: bool,
}

impl fmt::Display for Written {
    /// The report, then where the crate went: what the command prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.report)?;
        if !self.formatted {
            writeln!(
                f,
                "note: rustfmt did not run: format the crate with `cargo fmt`"
            )?;
        }
        write!(f, "wrote {} to {}", self.name, self.dir.display())
    }
}

/// `cargo fusion openapi SPEC --out DIR [--name NAME] [--fusion-path PATH]` in one call: reads
/// the document at `spec`, generates the crate (named `name`, or after the document's title;
/// depending on the `fusion` at `fusion_path`, or on the published version), writes it into
/// `out` (created if needed; the generated files are overwritten, nothing else is touched) and
/// formats it. What was skipped is in the returned report; an error means nothing usable could
/// be generated (unreadable file, not OpenAPI 3.0/3.1) or written.
///
/// ```no_run
/// let written = fusion_openapi::run(
///     std::path::Path::new("petstore.yaml"),
///     std::path::Path::new("petstore-connector"),
///     None,
///     None,
/// )?;
/// eprintln!("{written}");
/// # Ok::<(), fusion_openapi::Error>(())
/// ```
pub fn run(
    spec: &Path,
    out: &Path,
    name: Option<&str>,
    fusion_path: Option<&Path>,
) -> Result<Written, Error> {
    run_with_overlay(spec, out, name, fusion_path, None)
}

/// [`run`] with an overlay file (`--overlay FILE`, JSON or YAML, see [`Overlay`]): which
/// operations become tools, their names, guarded and hidden fields, description budgets and
/// rules.
pub fn run_with_overlay(
    spec: &Path,
    out: &Path,
    name: Option<&str>,
    fusion_path: Option<&Path>,
    overlay: Option<&Path>,
) -> Result<Written, Error> {
    let text = std::fs::read_to_string(spec)
        .map_err(|error| Error::new(format!("cannot read {}: {error}", spec.display())))?;
    let overlay = match overlay {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|error| Error::new(format!("cannot read {}: {error}", path.display())))?;
            Overlay::parse(&text)
                .map_err(|error| Error::new(format!("{}: {error}", path.display())))?
        }
        None => Overlay::default(),
    };
    let mut options = Options {
        name: name.map(str::to_owned),
        overlay,
        ..Options::default()
    };
    if let Some(path) = fusion_path {
        // Written into the generated manifest, which lives elsewhere: a path relative to here
        // would point nowhere from there.
        let path = std::fs::canonicalize(path)
            .map_err(|error| Error::new(format!("--fusion-path {}: {error}", path.display())))?;
        options.fusion = FusionDependency::Path(path);
    }
    let generated = generate(&text, &options)?;
    let formatted = generated
        .write_to(out)
        .map_err(|error| Error::new(format!("cannot write {}: {error}", out.display())))?;
    Ok(Written {
        name: generated.name,
        dir: out.to_owned(),
        report: generated.report,
        formatted,
    })
}

/// Reads an OpenAPI 3.0 or 3.1 document (JSON or YAML) and generates a connector crate.
pub fn generate(spec_text: &str, options: &Options) -> Result<GeneratedCrate, Error> {
    let document: serde_json::Value = match serde_json::from_str(spec_text) {
        Ok(value) => value,
        Err(json_error) => serde_yaml_ng::from_str(spec_text).map_err(|yaml_error| {
            Error::new(format!(
                "the document is neither JSON ({json_error}) nor YAML ({yaml_error})"
            ))
        })?,
    };
    let version = document
        .get("openapi")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            Error::new(if document.get("swagger").is_some() {
                "this is a Swagger 2.0 document: convert it to OpenAPI 3 first".to_owned()
            } else {
                "the document has no `openapi` version: it is not an OpenAPI 3 document".to_owned()
            })
        })?;
    if !version.starts_with("3.0") && !version.starts_with("3.1") {
        return Err(Error::new(format!(
            "OpenAPI {version} is not supported (3.0 and 3.1 are)"
        )));
    }
    let api = schema::Api::read(&document, &options.overlay)?;
    Ok(emit::emit(&api, options))
}
