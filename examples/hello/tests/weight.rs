//! What hello carries, counted without timing anything (BENCHMARKS.md, "Kept from
//! regressing"): the crates in its build. A connector that uses no schema validator, no SQLite,
//! no OpenTelemetry and no JWTs pays for none of them: each is behind a `fusion` feature, off by
//! default. (`jsonschema` alone was about half of hello's stripped binary.) Nor does it pay for
//! HTTP/2 (feature `http2`) or a regex engine to filter its logs.

use std::process::Command;

/// Crates that only an opt-in feature of `fusion` may bring in.
const OPT_IN: &[&str] = &[
    "jsonschema",
    "fancy-regex",
    "rusqlite",
    "opentelemetry",
    "tracing-opentelemetry",
    "jsonwebtoken",
    "h2",
    "regex-automata",
    "regex-syntax",
];

#[test]
fn hello_builds_no_crate_of_a_feature_it_does_not_use() {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            "hello",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && tree.starts_with("hello "),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(crates.contains(&"fusion-runtime"), "{tree}");
    let carried: Vec<&&str> = OPT_IN
        .iter()
        .filter(|name| crates.contains(*name))
        .collect();
    assert!(carried.is_empty(), "hello builds {carried:?}:\n{tree}");
}
