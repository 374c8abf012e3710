//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, installed by
//! `testkit/install.sh`) against the gateway: `conformance-server` (the suite's fixtures,
//! `examples/conformance`) mounted unprefixed, so that its tools keep the names the suite
//! calls, with the gateway serving Streamable HTTP on 127.0.0.1 in front of it, at 2025-11-25
//! and at 2026-07-28, with **no baseline**. Every scenario that applies to a tools gateway
//! passes: lifecycle and transport, every tools scenario (results and schemas intact), and at
//! 2026-07-28 the tasks extension, a task's questions to its caller included.
//! The others are listed in [`LEFT_OUT_2025_11_25`] and [`LEFT_OUT_2026_07_28`] with the reason
//! each cannot apply; a test checks that the suite has no server scenario both lists forgot.
//!
//! The upstream is `conformance-server --http`, not a stdio child of the gateway: the gateway
//! speaks to stdio upstreams in 2025-11-25 sessions, and to an HTTP upstream that speaks it in
//! stateless 2026-07-28, where a tool asks for input with an `input_required` result that must
//! pass through the gateway to the caller (and its answers back, under the upstream's own
//! `requestState`).
//!
//! The harness is `testkit/harness`, as for `examples/conformance`'s own test. Run with
//! `-- --nocapture` to see the pass counts per scenario.
#![cfg(unix)]

mod support;

use std::process::Command;

use testkit_harness::{
    AcceptedWarning, ServerHttp, require_every_check_passes, require_every_scenario_listed,
};

/// The server scenarios of 2025-11-25 that apply to a tools gateway: all pass through it.
const SCENARIOS_2025_11_25: &[&str] = &[
    // Lifecycle and transport: the gateway's own.
    "server-initialize",
    "ping",
    "server-session-lifecycle",
    "server-sse-multiple-streams",
    "server-sse-polling",
    "dns-rebinding-protection",
    "logging-set-level",
    // Tools and their content: proxied.
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "json-schema-2020-12",
    // Requests to the caller during a proxied call: the upstream's `input_required` questions,
    // asked over the caller's session by the gateway.
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    // The upstream's log messages on a call's stream, at the level the caller asked for.
    "tools-call-with-logging",
];

/// The server scenarios of 2026-07-28 that apply to a tools gateway: all pass through it.
const SCENARIOS_2026_07_28: &[&str] = &[
    // Stateless lifecycle and transport: the gateway's own.
    "server-stateless",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "caching",
    "http-header-validation",
    "http-custom-header-server-validation",
    // Tools and their content: proxied.
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "json-schema-2020-12",
    // Multi-round tool calls: the upstream's `input_required` and `requestState` pass through.
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
    // The tasks extension (SEP-2663): the upstream's tasks under the gateway's own ids, for
    // their caller only, with its questions (`input_required`, `tasks/update`) passed through.
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-dispatch-and-envelope",
    "tasks-required-task-error",
];

/// The gateway mounts tools only: no prompts, resources or completions reach it.
const NOT_A_TOOL: &str = "the gateway mounts tools only: an upstream's prompts, resources and \
                          completions are not served";

/// Server scenarios of 2025-11-25 (names or prefixes) not run through the gateway, and why.
const LEFT_OUT_2025_11_25: &[(&str, &str)] = &[
    ("prompts-", NOT_A_TOOL),
    ("resources-", NOT_A_TOOL),
    ("completion-", NOT_A_TOOL),
    (
        "tasks-",
        "the Tasks extension (SEP-2663) is run at 2026-07-28, the revision that defines it",
    ),
    (
        "sep-2640-",
        "the Skills extension (SEP-2640, unscored): Fusion does not implement skills",
    ),
];

/// Server scenarios of 2026-07-28 (names or prefixes) not run through the gateway, and why.
const LEFT_OUT_2026_07_28: &[(&str, &str)] = &[
    ("prompts-", NOT_A_TOOL),
    ("resources-", NOT_A_TOOL),
    ("completion-", NOT_A_TOOL),
    ("sep-2164-resource-not-found", NOT_A_TOOL),
    (
        "input-required-result-non-tool-request",
        "it asks for input from a prompt and a resource read: the gateway mounts tools only",
    ),
    (
        "tasks-status-notifications",
        "the gateway does not relay an upstream's task status notifications: its callers poll \
         `tasks/get`, which the gateway forwards (the suite skips its one check here)",
    ),
    (
        "tasks-mrtr-composition",
        "a call that asks in rounds and then becomes a task: the fixture server decides whether \
         a call is a task when it arrives (see `examples/conformance`'s test)",
    ),
    (
        "tasks-request-headers",
        "its first check wants `greet`'s text block to be the bare string, which the fixture \
         server writes as JSON (see `examples/conformance`'s test)",
    ),
    (
        "sep-2640-",
        "the Skills extension (SEP-2640, unscored): Fusion does not implement skills",
    ),
];

/// The WARNINGs the gateway may get, each with the reason: those `conformance-server` gets on
/// its own (`examples/conformance/tests/conformance.rs`), for the same reasons.
const ACCEPTED_WARNINGS: &[AcceptedWarning] = &[
    (
        "2025-11-25",
        "server-sse-polling",
        "server-sse-disconnect-resume",
        "SEP-1699 polling needs a `test_reconnection` tool that closes its own SSE stream in the \
         middle of the call; conformance-server does not serve it (a Fusion handler has no hold \
         on the transport's streams), so the gateway has none to mount",
    ),
    (
        "2026-07-28",
        "server-stateless",
        "sep-2575-server-sends-tools-list-changed-on-subscription",
        "the gateway declares tools.listChanged (its list follows its upstreams'), so the suite \
         calls its diagnostic hook `test_trigger_tool_change` to change the list while it \
         listens; conformance-server has no such tool (a Fusion server's tools are fixed), so \
         nothing changes and no notification comes. The gateway's notifications on listen \
         streams are tested in catalog.rs",
    ),
    (
        "2026-07-28",
        "input-required-result-ignore-extra-params",
        "sep-2322-ignore-unexpected-params",
        "the check sends answers without the requestState that asked for them; the upstream \
         (Fusion) trusts an answer only under the sealed state of its question, so it asks \
         again instead of completing",
    ),
];

/// `conformance-server --http 127.0.0.1:0`, and the gateway on 127.0.0.1 in front of it,
/// anonymous, the upstream mounted unprefixed. Both are killed when dropped.
fn gateway_in_front_of_conformance_server() -> (ServerHttp, ServerHttp) {
    let mut upstream = Command::new(support::conformance_server_bin());
    upstream.args(["--http", "127.0.0.1:0"]);
    let upstream = ServerHttp::start(upstream, "conformance-server");
    let mut command = Command::new(support::gateway_bin());
    command
        .args(["--http", "127.0.0.1:0", "--allow-anonymous"])
        .arg("--upstream")
        .arg(format!("conf=http:{}", upstream.url()))
        .args(["--unprefixed", "conf"]);
    let gateway = ServerHttp::start(command, "gateway");
    (upstream, gateway)
}

fn conformance(spec: &str, scenarios: &[&str]) {
    let (_upstream, gateway) = gateway_in_front_of_conformance_server();
    require_every_check_passes(&gateway, spec, scenarios, ACCEPTED_WARNINGS);
}

#[test]
fn conformance_2025_11_25_through_the_gateway() {
    conformance("2025-11-25", SCENARIOS_2025_11_25);
}

#[test]
fn conformance_2026_07_28_through_the_gateway() {
    conformance("2026-07-28", SCENARIOS_2026_07_28);
}

/// Every server scenario the suite has for a revision is run through the gateway or left out
/// for a stated reason, and none is run that the revision does not have.
#[test]
fn the_scenario_lists_cover_the_suites_server_scenarios() {
    for (spec, ours, left_out) in [
        ("2025-11-25", SCENARIOS_2025_11_25, LEFT_OUT_2025_11_25),
        ("2026-07-28", SCENARIOS_2026_07_28, LEFT_OUT_2026_07_28),
    ] {
        let left_out: Vec<&str> = left_out.iter().map(|(name, _)| *name).collect();
        require_every_scenario_listed(spec, ours, &left_out);
    }
}
