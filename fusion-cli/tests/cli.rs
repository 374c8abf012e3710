//! The `cargo-fusion` binary, run as cargo runs it and as `cargo run` does, on lockfiles in a
//! temporary directory: its output and its exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use fusion_lock::{Lockfile, Surface};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the binary with `arguments`, as `cargo fusion …` runs it (with the `fusion` cargo
/// passes first) when `as_cargo`.
fn run_as(as_cargo: bool, arguments: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cargo-fusion"));
    if as_cargo {
        command.arg("fusion");
    }
    let output = command.args(arguments).output().expect("the binary runs");
    Run {
        code: output.status.code().expect("an exit code"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

fn run(arguments: &[&str]) -> Run {
    run_as(false, arguments)
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes the example surface, edited by `edit`, as lockfile `name`.
    fn lockfile(&self, name: &str, edit: impl FnOnce(&mut Surface)) -> String {
        let mut surface = Lockfile::parse(&fusion_lock::__example_lockfile())
            .unwrap()
            .surface;
        edit(&mut surface);
        self.write(name, &surface.to_lockfile())
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }
}

fn void_invoice(surface: &mut Surface) -> &mut fusion_lock::ActionEntry {
    surface.actions.get_mut("billing.void_invoice").unwrap()
}

#[test]
fn diff_lists_classified_changes_and_fails_only_on_request() {
    let files = Files::new();
    let old = files.lockfile("old.lock", |_| {});
    let new = files.lockfile("new.lock", |surface| {
        void_invoice(surface).annotations.destructive = Some(false);
        void_invoice(surface).title = Some("Cancel invoice".into());
    });

    // Without --fail-on, a report: exit 0.
    let report = run(&["lock", "diff", &old, &new]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert_eq!(
        report.stdout,
        "2 changes: 1 breaking, 1 cosmetic\n\
         \x20 breaking  billing.void_invoice: `destructive` flipped from true to false\n\
         \x20 cosmetic  billing.void_invoice: title reworded: \"Void invoice\" → \"Cancel invoice\"\n"
    );

    let failing = run(&["lock", "diff", &old, &new, "--fail-on", "breaking"]);
    assert_eq!(failing.code, 1);
    assert!(
        failing
            .stderr
            .contains("failing: a change is breaking or more serious"),
        "{}",
        failing.stderr
    );
    // The worst change is breaking: every threshold up to it fails.
    for class in ["risky", "safe", "cosmetic"] {
        assert_eq!(
            run(&["lock", "diff", &old, &new, "--fail-on", class]).code,
            1,
            "{class}"
        );
    }

    // A cosmetic change alone passes a breaking or risky threshold.
    let retitled = files.lockfile("retitled.lock", |surface| {
        void_invoice(surface).title = None;
    });
    assert_eq!(
        run(&["lock", "diff", &old, &retitled, "--fail-on", "risky"]).code,
        0
    );
    assert_eq!(
        run(&["lock", "diff", &old, &retitled, "--fail-on", "cosmetic"]).code,
        1
    );

    let same = run(&["lock", "diff", &old, &old, "--fail-on", "cosmetic"]);
    assert_eq!((same.code, same.stdout.as_str()), (0, "no changes\n"));
}

#[test]
fn diff_speaks_json_and_markdown() {
    let files = Files::new();
    let old = files.lockfile("old.lock", |_| {});
    let new = files.lockfile("new.lock", |surface| {
        void_invoice(surface).state.invalidates.clear();
    });
    let json = run(&[
        "lock",
        "diff",
        &old,
        &new,
        "--format",
        "json",
        "--fail-on",
        "breaking",
    ]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON on stdout");
    assert_eq!(value["changes"][0]["class"], "risky");
    assert_eq!(value["changes"][0]["rule"], "invalidation-removed");
    assert_eq!(value["changes"][0]["subject"], "billing.void_invoice");
    assert_eq!(value["counts"]["risky"], 1);
    assert_eq!(value["fail_on"], "breaking");
    assert_eq!(value["fails"], false);
    assert_eq!(value["old"]["server"], "billing");
    assert_ne!(value["old"]["digest"], value["new"]["digest"]);

    let markdown = run(&["lock", "diff", &old, &new, "--format", "markdown"]);
    assert_eq!(markdown.code, 0);
    assert!(
        markdown.stdout.starts_with("**1 change: 1 risky**\n\n| class | subject | change |\n|---|---|---|\n| risky | `billing.void_invoice` | no longer invalidates `billing.*`"),
        "{}",
        markdown.stdout
    );
}

#[test]
fn it_runs_as_cargo_runs_it() {
    let files = Files::new();
    let lock = files.lockfile("fusion.lock", |_| {});
    let direct = run(&["lock", "verify", &lock]);
    let through_cargo = run_as(true, &["lock", "verify", &lock]);
    assert_eq!(direct.code, 0, "{}", direct.stderr);
    assert_eq!(through_cargo.code, 0, "{}", through_cargo.stderr);
    assert_eq!(direct.stdout, through_cargo.stdout);
    let help = run_as(true, &["--help"]);
    assert!(help.stdout.contains("cargo fusion"), "{}", help.stdout);
}

/// `cargo fusion …` itself: cargo finds `cargo-fusion` on the `PATH` and runs it.
#[test]
fn cargo_runs_it_as_a_subcommand() {
    let files = Files::new();
    let lock = files.lockfile("fusion.lock", |_| {});
    let binary = Path::new(env!("CARGO_BIN_EXE_cargo-fusion"));
    let path = std::env::join_paths(std::iter::once(binary.parent().unwrap().to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let output = Command::new(env!("CARGO"))
        .args(["fusion", "lock", "verify", &lock])
        .env("PATH", path)
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("consistent: 1 action digests"), "{stdout}");
}

#[test]
fn verify_names_what_is_inconsistent() {
    let files = Files::new();
    let text = fusion_lock::__example_lockfile();
    let good = files.write("good.lock", &text);
    let ok = run(&["lock", "verify", &good]);
    assert_eq!(ok.code, 0);
    assert!(
        ok.stdout.contains("consistent: 1 action digests"),
        "{}",
        ok.stdout
    );

    let edited = files.write(
        "edited.lock",
        &text.replace("\"Voids an invoice.\"", "\"Voids every invoice.\""),
    );
    let bad = run(&["lock", "verify", &edited]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stdout.contains("2 digests do not match"),
        "{}",
        bad.stdout
    );
    assert!(
        bad.stdout
            .contains("`billing.void_invoice`: the file states sha256:"),
        "{}",
        bad.stdout
    );
    assert!(bad.stdout.contains("FUSION_LOCK=update"), "{}", bad.stdout);

    // The same content laid out otherwise: digests fine, form not.
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let compact = files.write("compact.lock", &value.to_string());
    let reformatted = run(&["lock", "verify", &compact]);
    assert_eq!(reformatted.code, 1);
    assert!(
        reformatted
            .stdout
            .contains("not written as Fusion writes it"),
        "{}",
        reformatted.stdout
    );
}

#[test]
fn unreadable_files_and_bad_arguments_exit_with_2() {
    let files = Files::new();
    let missing = files.dir.path().join("nothing.lock");
    let missing = missing.to_str().unwrap();
    let run_missing = run(&["lock", "verify", missing]);
    assert_eq!(run_missing.code, 2);
    assert!(
        run_missing.stderr.starts_with("error: cannot read "),
        "{}",
        run_missing.stderr
    );

    let conflict = files.write("conflict.lock", "<<<<<<< HEAD\n{}\n");
    let run_conflict = run(&["lock", "show", &conflict]);
    assert_eq!(run_conflict.code, 2);
    assert!(
        run_conflict.stderr.contains("not valid JSON"),
        "{}",
        run_conflict.stderr
    );

    let lock = files.lockfile("fusion.lock", |_| {});
    assert_eq!(
        run(&["lock", "diff", &lock, &lock, "--fail-on", "severe"]).code,
        2
    );
    assert_eq!(run(&["lock", "diff", &lock]).code, 2);
    assert_eq!(run(&["lock", "explode", &lock]).code, 2);
}

#[test]
fn show_prints_the_surface_as_a_table() {
    let files = Files::new();
    let lock = files.lockfile("fusion.lock", |surface| {
        void_invoice(surface).guards.max_bytes = Some(4096);
    });
    let shown = run(&["lock", "show", &lock]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let lines: Vec<&str> = shown.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "billing 1.0.0 · flat · no access policy · no audit"
    );
    assert!(
        lines[1].starts_with("1 action, surface sha256:"),
        "{}",
        lines[1]
    );
    assert!(lines[3].starts_with("ACTION "), "{}", lines[3]);
    let row = lines[4];
    for cell in [
        "billing.void_invoice",
        "mutation",
        "billing_void_invoice",
        "destructive",
        "id*",
        "plain",
        "billing.*",
        "serialized by id, 4096 bytes",
    ] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    // Columns line up: the row's cells start where the header's do.
    let column = lines[3].find("VERB").unwrap();
    assert_eq!(&row[column..column + "mutation".len()], "mutation");
}

#[test]
fn billings_committed_lockfile_verifies() {
    let billing: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/billing/fusion.lock");
    let verified = run(&["lock", "verify", billing.to_str().unwrap()]);
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
    let shown = run(&["lock", "show", billing.to_str().unwrap()]);
    assert!(
        shown.stdout.contains("billing.void_invoice"),
        "{}",
        shown.stdout
    );
    // Its token budget: the listing's total on the first line, each tool's definition and
    // worst answer in columns.
    let first = shown.stdout.lines().next().unwrap_or_default();
    assert!(
        first.contains("tokens listed (o200k_base, risky past +10 %)"),
        "{first}"
    );
    let header = shown.stdout.lines().nth(3).unwrap_or_default();
    assert!(
        header.trim_end().ends_with("TOKENS  WORST ANSWER"),
        "{header}"
    );
    let list = shown
        .stdout
        .lines()
        .find(|line| line.starts_with("billing.list_invoices "))
        .unwrap_or_default();
    let surface = fusion_lock::Lockfile::parse(&std::fs::read_to_string(&billing).unwrap())
        .unwrap()
        .surface;
    let worst = surface.tokens.unwrap().answers["billing.list_invoices"].unwrap();
    assert!(list.trim_end().ends_with(&worst.to_string()), "{list}");
}

#[test]
fn show_lists_resources_and_prompts_and_marks_the_tools_that_ask_the_user() {
    let files = Files::new();
    let lock = files.lockfile("fusion.lock", |surface| {
        void_invoice(surface).asks_user = true;
        let resource = serde_json::json!({
            "uri": "billing://invoices/{id}", "title": null, "description": "One invoice.",
            "mime_type": "application/json", "cache": "immutable", "toolset": null,
            "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
            "egress": {"presenter": null, "presenters": {}, "limit": null, "suggests": [], "ui_kinds": []}
        });
        surface.resources.insert(
            "billing.invoice".into(),
            serde_json::from_value(resource).unwrap(),
        );
        let prompt = serde_json::json!({
            "name": "billing_dunning", "title": null, "description": "A reminder.",
            "toolset": "collections",
            "arguments": {"id": {"required": true, "description": null}, "tone": {"required": false, "description": null}},
            "presenters": {}
        });
        surface
            .prompts
            .insert("billing.dunning".into(), serde_json::from_value(prompt).unwrap());
    });
    let shown = run(&["lock", "show", &lock]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let lines: Vec<&str> = shown.stdout.lines().collect();
    assert!(
        lines[1].starts_with("1 action, 1 resource, 1 prompt, surface sha256:"),
        "{}",
        lines[1]
    );
    assert!(lines[4].contains("asks-user"), "{}", lines[4]);
    // The row under a table's header holds every cell.
    let row_under = |header: &str, cells: &[&str]| {
        let at = lines
            .iter()
            .position(|line| line.starts_with(header))
            .unwrap_or_else(|| panic!("a {header} table:\n{}", shown.stdout));
        for cell in cells {
            assert!(lines[at + 1].contains(cell), "{cell} in {}", lines[at + 1]);
        }
    };
    row_under(
        "RESOURCE",
        &[
            "billing.invoice",
            "billing://invoices/{id}",
            "application/json",
            "plain",
            "immutable",
        ],
    );
    row_under(
        "PROMPT",
        &[
            "billing.dunning",
            "billing_dunning",
            "id*, tone",
            "collections",
        ],
    );
}

/// The repository's shipped OpenAPI documents (fusion-openapi's test corpus).
fn openapi_document(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fusion-openapi/tests/corpus")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn openapi_writes_a_connector_crate_and_reports_what_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("petstore");
    let spec = openapi_document("learn-v3.0-petstore.yaml");
    let generated = run_as(
        true,
        &[
            "openapi",
            &spec,
            "--out",
            out.to_str().unwrap(),
            "--name",
            "pets",
        ],
    );
    assert_eq!(generated.code, 0, "stderr: {}", generated.stderr);
    assert!(
        generated.stdout.is_empty(),
        "stdout is for scripts: {}",
        generated.stdout
    );
    assert!(
        generated.stderr.contains("wrote pets to"),
        "{}",
        generated.stderr
    );
    let manifest = std::fs::read_to_string(out.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"pets\""), "{manifest}");
    let code = std::fs::read_to_string(out.join("src/lib.rs")).unwrap();
    // A tool per operation: a proxy, or a handler building its request where it does more
    // (here: a 404 on one pet names the tool that lists them).
    assert!(
        code.contains("http = \"GET /pets\""),
        "a proxy tool per operation: {code}"
    );
    assert!(
        code.contains("\"GET /pets/{pet_id}\"") && code.contains("\"petstore.list_pets\""),
        "{code}"
    );

    // A callback is reported with the operation it skips, and the rest is still written.
    let out = dir.path().join("callbacks");
    let spec = openapi_document("learn-v3.0-callback-example.yaml");
    let skipped = run(&["openapi", &spec, "--out", out.to_str().unwrap()]);
    assert_eq!(skipped.code, 0, "stderr: {}", skipped.stderr);
    assert!(skipped.stderr.contains("callback"), "{}", skipped.stderr);
}

#[test]
fn openapi_refuses_what_is_not_an_openapi_document_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("not-openapi.json");
    std::fs::write(&spec, r#"{"swagger": "2.0", "paths": {}}"#).unwrap();
    let out = dir.path().join("out");
    let refused = run(&[
        "openapi",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        refused.code, 2,
        "stdout: {} stderr: {}",
        refused.stdout, refused.stderr
    );
    assert!(refused.stderr.starts_with("error: "), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("not-openapi.json"),
        "{}",
        refused.stderr
    );
    assert!(!out.join("Cargo.toml").exists(), "nothing is written");

    let missing = run(&["openapi", "missing.yaml"]);
    assert_eq!(missing.code, 2, "--out is required: {}", missing.stderr);
}

#[test]
fn openapi_writes_a_relative_fusion_path_as_an_absolute_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pets");
    let spec = openapi_document("learn-v3.0-petstore.yaml");
    // Run from the repository root with `--fusion-path .`, as the README does.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cargo-fusion"))
        .current_dir(root)
        .args(["openapi", &spec, "--out", out.to_str().unwrap()])
        .args(["--fusion-path", "."])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let manifest = std::fs::read_to_string(out.join("Cargo.toml")).unwrap();
    let fusion = std::fs::canonicalize(root.join("fusion")).unwrap();
    assert!(
        manifest.contains(&format!("path = {:?}", fusion.display().to_string())),
        "{manifest}"
    );

    let missing = run(&[
        "openapi",
        &spec,
        "--out",
        out.to_str().unwrap(),
        "--fusion-path",
        "/nowhere/fusion",
    ]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("--fusion-path"),
        "{}",
        missing.stderr
    );
}
