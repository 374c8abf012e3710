//! Scopes on resources and prompts (`#[resource(scopes = [...])]`, `#[prompt(scopes = [...])]`)
//! under the `ScopeRules` access policy, through rmcp's own client on a duplex: a caller lists
//! only what its token's scopes let it read or get, a read or get it lacks the scope for is
//! refused naming the scope before its handler runs, undeclared ones need the namespace's read
//! scope; and declared scopes are in the capability lockfile, classified like a tool's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fusion::lock::{Rule, diff, surface};
use fusion::protocol as rmcp;
use fusion::scopes::ScopeRules;
use fusion::serve::Mcp;
use fusion::{Principal, PromptMessages, Server, ServerBuilder, ToolError, prompt, resource};
use rmcp::model::{ErrorCode, GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};

/// Handlers that ran: a refused read or get must not add to it.
static RAN: AtomicUsize = AtomicUsize::new(0);

/// The notes board: the default scope (`notes:read`).
#[resource(uri = "notes://board", name = "notes.board")]
async fn board() -> Result<String, ToolError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok("the board".to_owned())
}

/// One day of the audit trail: only for auditors.
#[resource(uri = "notes://audit/{day}", name = "notes.audit", scopes = ["notes:audit"])]
async fn audit_day(day: String) -> Result<String, ToolError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(format!("audit of {day}"))
}

// The same resource, declaring no scope.
/// One day of the audit trail: only for auditors.
#[resource(uri = "notes://audit/{day}", name = "notes.audit")]
async fn audit_day_unscoped(day: String) -> Result<String, ToolError> {
    Ok(day)
}

/// Summarize the board: the default scope.
#[prompt(name = "notes.summarize")]
async fn summarize() -> Result<PromptMessages, ToolError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(PromptMessages::new().user("Summarize the board."))
}

/// Plan a purge: needs both admin scopes.
#[prompt(name = "notes.purge_plan", scopes = ["notes:admin", "notes:purge"])]
async fn purge_plan() -> Result<PromptMessages, ToolError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(PromptMessages::new().user("Plan a purge."))
}

// The same prompt, declaring one scope only.
/// Plan a purge: needs both admin scopes.
#[prompt(name = "notes.purge_plan", scopes = ["notes:admin"])]
async fn purge_plan_admin_only() -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new().user("Plan a purge."))
}

fn notes() -> Server {
    ServerBuilder::new("notes", "1.0.0")
        .resource::<board>()
        .resource::<audit_day>()
        .prompt::<summarize>()
        .prompt::<purge_plan>()
        .access(ScopeRules::new())
        .build()
        .expect("the notes server builds")
}

type Client = RunningService<RoleClient, ()>;

async fn connect_as(server: &Server, scopes: &[&str]) -> Client {
    let principal =
        Principal::new("ann").with_scopes(scopes.iter().map(|scope| (*scope).to_owned()));
    let mcp = Mcp::new(server.clone()).context(move |_, call| {
        call.extensions_mut().insert(principal.clone());
    });
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let handler = mcp.handler();
    tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    ().serve(client_io).await.expect("client handshake")
}

fn forbidden(result: Result<impl std::fmt::Debug, ServiceError>) -> String {
    let error = match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    };
    assert_eq!(error.code, ErrorCode::INVALID_REQUEST);
    let data = error.data.expect("the error body");
    assert_eq!(data["code"], "FORBIDDEN");
    error.message.to_string() + " " + data["recovery"].as_str().unwrap_or_default()
}

async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("the test did not finish in time")
}

#[tokio::test]
async fn each_caller_lists_reads_and_gets_what_its_scopes_allow() {
    within(async {
        let server = notes();

        // The read scope: the board and the summary, not the audit trail nor the purge plan.
        let reader = connect_as(&server, &["notes:read"]).await;
        let fixed = reader.list_all_resources().await.unwrap();
        assert_eq!(
            fixed.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(),
            ["notes://board"]
        );
        assert!(
            reader
                .list_all_resource_templates()
                .await
                .unwrap()
                .is_empty()
        );
        let prompts = reader.list_all_prompts().await.unwrap();
        assert_eq!(
            prompts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["notes_summarize"]
        );
        reader
            .read_resource(ReadResourceRequestParams::new("notes://board"))
            .await
            .expect("a reader reads the board");
        let before = RAN.load(Ordering::SeqCst);
        let refused = forbidden(
            reader
                .read_resource(ReadResourceRequestParams::new("notes://audit/monday"))
                .await,
        );
        assert!(refused.contains("`notes:audit`"), "{refused}");
        assert!(refused.contains("insufficient_scope"), "{refused}");
        let refused = forbidden(
            reader
                .get_prompt(GetPromptRequestParams::new("notes_purge_plan"))
                .await,
        );
        assert!(refused.contains("`notes:admin notes:purge`"), "{refused}");
        assert_eq!(RAN.load(Ordering::SeqCst), before, "no refused handler ran");
        reader.cancel().await.unwrap();

        // The audit scope alone: the template, but not the board (its default read scope).
        let auditor = connect_as(&server, &["notes:audit"]).await;
        assert!(auditor.list_all_resources().await.unwrap().is_empty());
        let templates = auditor.list_all_resource_templates().await.unwrap();
        assert_eq!(
            templates
                .iter()
                .map(|t| t.uri_template.as_str())
                .collect::<Vec<_>>(),
            ["notes://audit/{day}"]
        );
        auditor
            .read_resource(ReadResourceRequestParams::new("notes://audit/monday"))
            .await
            .expect("an auditor reads the trail");
        let refused = forbidden(
            auditor
                .read_resource(ReadResourceRequestParams::new("notes://board"))
                .await,
        );
        assert!(refused.contains("`notes:read`"), "{refused}");
        auditor.cancel().await.unwrap();

        // One admin scope of two is not enough; both are.
        let half = connect_as(&server, &["notes:read", "notes:admin"]).await;
        assert_eq!(half.list_all_prompts().await.unwrap().len(), 1);
        let refused = forbidden(
            half.get_prompt(GetPromptRequestParams::new("notes_purge_plan"))
                .await,
        );
        assert!(
            refused.contains("`notes:purge`"),
            "only the scope it lacks: {refused}"
        );
        half.cancel().await.unwrap();
        let admin = connect_as(&server, &["notes:read", "notes:admin", "notes:purge"]).await;
        assert_eq!(admin.list_all_prompts().await.unwrap().len(), 2);
        admin
            .get_prompt(GetPromptRequestParams::new("notes_purge_plan"))
            .await
            .expect("an admin gets the purge plan");
        admin.cancel().await.unwrap();
    })
    .await;
}

#[test]
fn declared_scopes_are_supported_and_read_back() {
    let server = notes();
    let supported = ScopeRules::new().supported(&server);
    for scope in ["notes:read", "notes:audit", "notes:admin", "notes:purge"] {
        assert!(
            supported.iter().any(|s| s == scope),
            "{scope} in {supported:?}"
        );
    }
    let audit = server
        .resources()
        .find(|resource| resource.key().as_str() == "notes.audit")
        .unwrap();
    assert_eq!(audit.scopes(), ["notes:audit"]);
    let board = server
        .resources()
        .find(|resource| resource.key().as_str() == "notes.board")
        .unwrap();
    assert!(board.scopes().is_empty(), "left to the default");
}

fn rules(before: &Server, after: &Server) -> Vec<Rule> {
    let mut rules: Vec<Rule> = diff(&surface(before), &surface(after))
        .changes()
        .iter()
        .map(|change| change.rule)
        .collect();
    rules.sort();
    rules
}

fn notes_with<Audit: fusion::Resource, Purge: fusion::Prompt>() -> Server {
    ServerBuilder::new("notes", "1.0.0")
        .resource::<Audit>()
        .prompt::<Purge>()
        .build()
        .expect("the notes server builds")
}

#[test]
fn a_resource_or_prompt_scope_change_is_classified_like_a_tools() {
    let unscoped = notes_with::<audit_day_unscoped, purge_plan_admin_only>();
    let scoped = notes_with::<audit_day, purge_plan>();
    let entry = &surface(&scoped);
    assert_eq!(entry.resources["notes.audit"].scopes, ["notes:audit"]);
    assert_eq!(
        entry.prompts["notes.purge_plan"].scopes,
        ["notes:admin", "notes:purge"]
    );
    // A scope declared (or one more): tokens that could read or get it no longer can.
    assert_eq!(
        rules(&unscoped, &scoped),
        [Rule::ScopeAdded, Rule::ScopeAdded]
    );
    // Dropped: a token with fewer scopes can; widening is at least risky.
    let widened = diff(&surface(&scoped), &surface(&unscoped));
    assert_eq!(
        rules(&scoped, &unscoped),
        [Rule::ScopeRemoved, Rule::ScopeRemoved]
    );
    assert!(
        widened
            .changes()
            .iter()
            .all(|change| change.rule.class() >= fusion::lock::Class::Risky),
        "{widened:?}"
    );
    // A lockfile without scopes on its content reads the same as before.
    let unscoped_surface = serde_json::to_value(surface(&unscoped)).unwrap();
    assert!(
        unscoped_surface["resources"]["notes.audit"]
            .get("scopes")
            .is_none()
    );
}
