//! The billing binary against the official MCP clients and the official conformance suite
//! (SPEC issue 3, item 5), installed by `testkit/install.sh` (see `testkit/README.md`).
//!
//! * Client matrix: TypeScript SDK 1.x (2025-11-25), TypeScript client 2.x (2025-11-25 and
//!   2026-07-28), Python `mcp` 2.x (2025-11-25 and 2026-07-28), over stdio and over
//!   Streamable HTTP, each with a fresh in-memory store.
//!   - `plans/billing.json` calls every tool (success and domain errors), sends invalid
//!     arguments, calls an unknown tool, and checks that no secret column, the demo tenant or
//!     the guarded field's name ever appears in any message from the server.
//!   - `plans/guarded.json` sends the guarded `tenant_id`: rejected before any handler runs,
//!     still no secret in any message. It is a plan of its own because the rejection names the
//!     field the agent sent (`tenant_id`), which `plans/billing.json` forbids everywhere.
//! * Conformance: every server scenario of the suite that applies to a tools-only server, at
//!   2025-11-25 and at 2026-07-28; the baseline excuses only checks that need the suite's own
//!   fixture tools, prompts or resources.
//!
//! Run with `-- --nocapture` to see the versions, negotiated protocols and pass counts.
#![cfg(unix)]

mod support;

use std::path::PathBuf;

use support::{BillingHttp, Conformance, MATRIX_CLIENTS, Matrix, billing_bin, ensure_testkit};

fn plan(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/plans")
        .join(name)
}

/// `billing --in-memory` as a `--stdio` command line: each client spawns its own server.
fn stdio_command() -> String {
    support::shell_line(&[billing_bin().to_string_lossy().as_ref(), "--in-memory"])
}

#[test]
fn every_official_client_passes_the_billing_plan_over_stdio() {
    ensure_testkit();
    let mut matrix = Matrix::default();
    matrix.run(
        &["--stdio", &stdio_command()],
        &plan("billing.json"),
        &[],
        None,
    );
    matrix.print("client matrix, stdio, plans/billing.json");
    matrix.assert_all_passed("stdio, plans/billing.json", 1);
}

#[test]
fn every_official_client_passes_the_billing_plan_over_http() {
    ensure_testkit();
    let mut matrix = Matrix::default();
    // The plan mutates (voids INV-3, creates INV-1001): one fresh server per client.
    for (client, _) in MATRIX_CLIENTS {
        let server = BillingHttp::spawn();
        matrix.run(
            &["--http", server.url()],
            &plan("billing.json"),
            &[client],
            Some(&server),
        );
    }
    matrix.print("client matrix, Streamable HTTP, plans/billing.json");
    matrix.assert_all_passed("HTTP, plans/billing.json", 1);
}

#[test]
fn a_guarded_field_is_rejected_for_every_official_client_over_stdio() {
    ensure_testkit();
    let mut matrix = Matrix::default();
    matrix.run(
        &["--stdio", &stdio_command()],
        &plan("guarded.json"),
        &[],
        None,
    );
    matrix.print("client matrix, stdio, plans/guarded.json");
    matrix.assert_all_passed("stdio, plans/guarded.json", 1);
}

#[test]
fn a_guarded_field_is_rejected_for_every_official_client_over_http() {
    ensure_testkit();
    // Nothing in this plan changes the store: one server for all five clients.
    let server = BillingHttp::spawn();
    let mut matrix = Matrix::default();
    matrix.run(
        &["--http", server.url()],
        &plan("guarded.json"),
        &[],
        Some(&server),
    );
    matrix.print("client matrix, Streamable HTTP, plans/guarded.json");
    matrix.assert_all_passed("HTTP, plans/guarded.json", 1);
}

/// Runs the conformance `scenarios` at `spec` against a fresh server and requires every check
/// to pass, except the baselined ones (`testkit/conformance/baseline-tools-only.yml`).
fn conformance(spec: &str, scenarios: &[&str]) {
    ensure_testkit();
    let server = BillingHttp::spawn();
    let baseline = support::testkit_dir().join("conformance/baseline-tools-only.yml");
    let run = Conformance::run(server.url(), spec, &baseline, scenarios);
    let suite = std::fs::read_to_string(
        support::test_deps_dir()
            .join("node/node_modules/@modelcontextprotocol/conformance/package.json"),
    )
    .ok()
    .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    .and_then(|package| package["version"].as_str().map(str::to_owned))
    .unwrap_or_else(|| "?".into());
    let count = |n: Option<u64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    // One println: tests running in parallel must not interleave their lines.
    println!(
        "conformance {spec} (@modelcontextprotocol/conformance {suite}), Streamable HTTP: \
         {} checks passed, {} failed, {} baselined, {} scenarios\n  {}",
        count(run.passed),
        count(run.failed),
        count(run.baselined),
        count(run.scenarios),
        run.scenario_lines().join("\n  ")
    );
    let complete = run.ran.success()
        && run.failed == Some(0)
        && run.passed.is_some_and(|n| n > 0)
        && run.scenarios == Some(scenarios.len() as u64);
    assert!(
        complete,
        "conformance {spec}: expected every check of these {} scenarios to pass (baseline aside): {}\n\n{}\n--- server stderr ({}) ---\n{}",
        scenarios.len(),
        scenarios.join(", "),
        run.ran.describe(),
        server.url(),
        support::tail(&server.logs(), 20_000)
    );
}

#[test]
fn conformance_2025_11_25_every_tools_only_scenario_passes() {
    conformance(
        "2025-11-25",
        &[
            "server-initialize",
            "ping",
            "tools-list",
            "server-session-lifecycle",
            "server-sse-multiple-streams",
            "dns-rebinding-protection",
        ],
    );
}

#[test]
fn conformance_2026_07_28_every_tools_only_scenario_passes() {
    conformance(
        "2026-07-28",
        &[
            "server-stateless",
            "tools-list",
            "caching",
            "http-header-validation",
            "server-sse-multiple-streams",
            "dns-rebinding-protection",
            "input-required-result-unsupported-methods",
            "input-required-result-validate-input",
        ],
    );
}
