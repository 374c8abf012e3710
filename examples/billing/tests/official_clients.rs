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
//!   - `plans/content.json` (SPEC issue 15): the invoice resource template listed and read
//!     through `InvoiceView` (exactly the listed fields, with the rules and UI blocks), an unknown
//!     invoice read as resource-not-found (`-32002`, `-32602` on 2026-07-28, with `data.uri`),
//!     the reminder prompt listed and got (its errors `-32602`), invoice ids completed for the
//!     template and the prompt, and no secret, tenant or hidden field's name in any message.
//!   - `plans/confirm.json`: voiding an invoice above $1,000 asks the user (an
//!     `elicitation/create` request on 2025-11-25, an `input_required` result on 2026-07-28,
//!     answered through the SDK's own handler): accepted it is voided, declined, cancelled or
//!     answered "no" it stays open; small or already voided invoices are not asked about.
//!   - `plans/confirm-unsupported.json`: a client without the elicitation capability is never
//!     asked; voiding a large invoice changes nothing and is `ELICITATION_UNSUPPORTED` on
//!     2025-11-25, the protocol's JSON-RPC error `-32021` (missing client capability) on
//!     2026-07-28.
//! * Conformance: every server scenario of the suite that does not need the suite's own
//!   fixture tools, prompts or resources, at 2025-11-25 and at 2026-07-28 (the baseline
//!   excuses the four checks of `server-stateless` that call its diagnostic tools);
//!   `examples/conformance` implements the fixtures and passes every scenario with no baseline.
//!
//! Run with `-- --nocapture` to see the versions, negotiated protocols and pass counts.
#![cfg(unix)]

mod support;

use std::path::PathBuf;

use fusion::serde_json::{Value, json};
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

/// Whether a plan changes the store: one that does needs a fresh HTTP server per client, so
/// that each client finds the demo data as the plan expects it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Store {
    Read,
    Changed,
}

/// Every official client runs `plans/<name>` over stdio (each spawns its own server), and every
/// step passes; the matrix is printed and returned for the plan's own checks.
fn passes_over_stdio(name: &str) -> Matrix {
    ensure_testkit();
    let mut matrix = Matrix::default();
    matrix.run(&["--stdio", &stdio_command()], &plan(name), &[], None);
    matrix.print(&format!("client matrix, stdio, plans/{name}"));
    matrix.assert_all_passed(&format!("stdio, plans/{name}"), 1);
    matrix
}

/// The same over Streamable HTTP, against `billing --in-memory` on 127.0.0.1.
fn passes_over_http(name: &str, store: Store) -> Matrix {
    ensure_testkit();
    let mut matrix = Matrix::default();
    if store == Store::Changed {
        for (client, _) in MATRIX_CLIENTS {
            let server = BillingHttp::spawn();
            matrix.run(
                &["--http", server.url()],
                &plan(name),
                &[client],
                Some(&server),
            );
        }
    } else {
        let server = BillingHttp::spawn();
        matrix.run(&["--http", server.url()], &plan(name), &[], Some(&server));
    }
    matrix.print(&format!("client matrix, Streamable HTTP, plans/{name}"));
    matrix.assert_all_passed(&format!("HTTP, plans/{name}"), 1);
    matrix
}

#[test]
fn every_official_client_passes_the_billing_plan_over_stdio() {
    passes_over_stdio("billing.json");
}

#[test]
fn every_official_client_passes_the_billing_plan_over_http() {
    // The plan voids INV-3 and creates INV-1001.
    passes_over_http("billing.json", Store::Changed);
}

#[test]
fn a_guarded_field_is_rejected_for_every_official_client_over_stdio() {
    passes_over_stdio("guarded.json");
}

#[test]
fn a_guarded_field_is_rejected_for_every_official_client_over_http() {
    passes_over_http("guarded.json", Store::Read);
}

/// Every client's report holds these values (report key → value): what the plan implies the
/// client did, so that a client which skipped a whole section could not pass unnoticed.
fn assert_reports(matrix: &Matrix, what: &str, expected: &[(&str, Value)]) {
    let mut problems = Vec::new();
    for report in &matrix.reports {
        let Some(json) = &report.report else { continue };
        for (key, want) in expected {
            if &json[*key] != want {
                problems.push(format!(
                    "{}: {key} = {}, expected {want}",
                    report.name, json[*key]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

/// The questions each client was asked by `plans/confirm.json`, in order, each the way its
/// protocol era asks: over the session on 2025-11-25, in an `input_required` result on
/// 2026-07-28.
fn assert_confirm_questions(matrix: &Matrix, what: &str) {
    for report in &matrix.reports {
        let Some(json) = &report.report else { continue };
        let era = MATRIX_CLIENTS
            .iter()
            .find(|(client, _)| *client == report.name)
            .map(|(_, era)| *era)
            .expect("a matrix client");
        let via = if era == "2026-07-28" {
            "input_required"
        } else {
            "elicitation/create"
        };
        let asked = |step: &str, invoice: &str, action: &str| {
            let (amount, customer) = if invoice == "INV-1001" {
                ("$2500.00", "C-42")
            } else {
                ("$3000.00", "C-43")
            };
            json!({
                "step": step,
                "message": format!("Void invoice {invoice} of {amount} for customer {customer}? It can no longer be paid."),
                "via": via,
                "action": action,
            })
        };
        let expected = json!([
            asked("calls[1]", "INV-1001", "accept"),
            asked("calls[5]", "INV-1002", "decline"),
            asked("calls[7]", "INV-1002", "cancel"),
            asked("calls[8]", "INV-1002", "accept"),
        ]);
        assert_eq!(
            json["elicitations"], expected,
            "{what}: {} was asked other questions than plans/confirm.json expects",
            report.name
        );
    }
}

/// What every client did with `plans/content.json`.
fn content_counts() -> [(&'static str, Value); 8] {
    [
        ("resources", json!(0)),
        ("resourceTemplates", json!(1)),
        ("reads", json!(4)),
        ("prompts", json!(1)),
        ("promptGets", json!(4)),
        ("completions", json!(5)),
        ("calls", json!(0)),
        ("skipped", json!(0)),
    ]
}

#[test]
fn every_official_client_reads_resources_gets_the_prompt_and_completes_over_stdio() {
    let matrix = passes_over_stdio("content.json");
    assert_reports(&matrix, "stdio, plans/content.json", &content_counts());
}

#[test]
fn every_official_client_reads_resources_gets_the_prompt_and_completes_over_http() {
    let matrix = passes_over_http("content.json", Store::Read);
    assert_reports(&matrix, "HTTP, plans/content.json", &content_counts());
}

/// What every client's report of `plans/confirm.json` says it did.
fn confirm_counts() -> [(&'static str, Value); 2] {
    [("calls", json!(13)), ("skipped", json!(0))]
}

#[test]
fn every_official_client_is_asked_before_a_large_void_over_stdio() {
    let matrix = passes_over_stdio("confirm.json");
    assert_reports(&matrix, "stdio, plans/confirm.json", &confirm_counts());
    assert_confirm_questions(&matrix, "stdio, plans/confirm.json");
}

#[test]
fn every_official_client_is_asked_before_a_large_void_over_http() {
    // The plan creates and voids invoices.
    let matrix = passes_over_http("confirm.json", Store::Changed);
    assert_reports(&matrix, "HTTP, plans/confirm.json", &confirm_counts());
    assert_confirm_questions(&matrix, "HTTP, plans/confirm.json");
}

#[test]
fn a_client_without_elicitation_cannot_void_a_large_invoice_over_stdio() {
    let matrix = passes_over_stdio("confirm-unsupported.json");
    assert_reports(
        &matrix,
        "stdio, plans/confirm-unsupported.json",
        &[("calls", json!(4)), ("elicitations", json!([]))],
    );
}

#[test]
fn a_client_without_elicitation_cannot_void_a_large_invoice_over_http() {
    // The plan creates an invoice.
    let matrix = passes_over_http("confirm-unsupported.json", Store::Changed);
    assert_reports(
        &matrix,
        "HTTP, plans/confirm-unsupported.json",
        &[("calls", json!(4)), ("elicitations", json!([]))],
    );
}

/// Runs the conformance `scenarios` at `spec` against a fresh server and requires every check
/// to pass, except the baselined ones (`testkit/conformance/baseline-tools-only.yml`).
fn conformance(spec: &str, scenarios: &[&str]) {
    ensure_testkit();
    let server = BillingHttp::spawn();
    let baseline = support::testkit_dir().join("conformance/baseline-tools-only.yml");
    let run = Conformance::run(server.url(), spec, Some(&baseline), scenarios);
    let suite = std::fs::read_to_string(
        support::test_deps_dir()
            .join("node/node_modules/@modelcontextprotocol/conformance/package.json"),
    )
    .ok()
    .and_then(|text| fusion::serde_json::from_str::<fusion::serde_json::Value>(&text).ok())
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
fn conformance_2025_11_25_every_scenario_billing_can_serve_passes() {
    conformance(
        "2025-11-25",
        &[
            "server-initialize",
            "ping",
            "tools-list",
            "prompts-list",
            "resources-list",
            "server-session-lifecycle",
            "server-sse-multiple-streams",
            "dns-rebinding-protection",
        ],
    );
}

#[test]
fn conformance_2026_07_28_every_scenario_billing_can_serve_passes() {
    conformance(
        "2026-07-28",
        &[
            "server-stateless",
            "tools-list",
            "prompts-list",
            "resources-list",
            "sep-2164-resource-not-found",
            "caching",
            "http-header-validation",
            "server-sse-multiple-streams",
            "dns-rebinding-protection",
            "input-required-result-unsupported-methods",
            "input-required-result-validate-input",
        ],
    );
}
