//! The `gateway` binary in front of the `billing` binary, driven by the official MCP clients
//! (TypeScript SDK 1.x and 2.x, Python SDK) from `testkit/`: over stdio, and over Streamable
//! HTTP with a bearer token. Plan: `tests/plans/gateway.json` (listing, calls, a proxied
//! failure kept intact, an unknown tool, hidden billing fields absent from every byte).

mod support;

use std::process::Command;

use support::*;

fn ensure_testkit() {
    let status = Command::new("bash")
        .arg(workspace_root().join("testkit/install.sh"))
        .env("FUSION_TEST_DEPS", workspace_root().join(".test-deps"))
        .status()
        .expect("bash testkit/install.sh");
    assert!(status.success(), "testkit/install.sh failed");
}

/// `gateway --upstream acct=stdio:'billing --in-memory'`, as one shell line.
fn gateway_line(extra: &str) -> String {
    format!(
        "'{}' --upstream \"acct=stdio:'{}' --in-memory\" {extra}",
        gateway_bin().display(),
        billing_bin().display()
    )
}

fn plan() -> String {
    format!("{}/tests/plans/gateway.json", env!("CARGO_MANIFEST_DIR"))
}

/// Runs one client; panics with its report when a check failed.
fn run_client(what: &str, mut command: Command) {
    command
        .env("FUSION_TEST_DEPS", workspace_root().join(".test-deps"))
        .current_dir(workspace_root());
    let output = command.output().expect("running a client");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what}: {}\nstdout: {}\nstderr: {stderr}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
    );
    // A session's end (DELETE) is answered with a status the client takes as done.
    assert!(
        !stderr.contains("Session termination failed"),
        "{what}: {stderr}"
    );
}

fn ts(transport: &[&str], sdk: &str, protocol: &str) -> Command {
    let mut command = Command::new("node");
    command.arg("testkit/ts/client.mjs").args(transport).args([
        "--plan",
        &plan(),
        "--sdk",
        sdk,
        "--protocol",
        protocol,
    ]);
    command
}

fn py(transport: &[&str], protocol: &str) -> Command {
    let mut command = Command::new(workspace_root().join(".test-deps/py/bin/python"));
    command.arg("testkit/py/client.py").args(transport).args([
        "--plan",
        &plan(),
        "--protocol",
        protocol,
    ]);
    command
}

#[test]
fn official_clients_over_stdio() {
    ensure_testkit();
    let line = gateway_line("");
    let stdio = ["--stdio", line.as_str()];
    run_client("ts v1", ts(&stdio, "v1", "2025-11-25"));
    run_client("ts v2", ts(&stdio, "v2", "auto"));
    run_client("python", py(&stdio, "2025-11-25"));
}

fn gateway_http() -> GatewayHttp {
    GatewayHttp::start(
        &[
            "--upstream".to_owned(),
            format!("acct=stdio:'{}' --in-memory", billing_bin().display()),
        ],
        &[("GATEWAY_TOKENS", "tok-w=ops,tok-r=viewer:read")],
    )
}

#[test]
fn official_clients_over_http_with_a_bearer_token() {
    ensure_testkit();
    // A fresh gateway (and billing) per client: the plan changes an invoice.
    for (what, sdk) in [
        ("ts v1", Some(("v1", "2025-11-25"))),
        ("ts v2 stateless", Some(("v2", "2026-07-28"))),
        ("python", None),
    ] {
        let gateway = gateway_http();
        let http = [
            "--http",
            gateway.url.as_str(),
            "--header",
            "Authorization: Bearer tok-w",
        ];
        let command = match sdk {
            Some((sdk, protocol)) => ts(&http, sdk, protocol),
            None => py(&http, "2025-11-25"),
        };
        run_client(what, command);
    }
}
