//! Resources, prompts and completions through rmcp's own client, in-process, in both protocol
//! eras: listings paged and cached as declared, reads and prompts through the presenter (no
//! hidden or unlisted field, rules included), errors as JSON-RPC errors carrying the error
//! body, completions, and access.

mod common;

use std::future::Future;
use std::time::Duration;

use common::*;
use fusion::complete::CompletionRequest;
use fusion::protocol as rmcp;
use fusion::serve::{Mcp, McpOptions};
use fusion::{
    AccessPolicy, ActionInfo, CallContext, Principal, PromptInfo, PromptMessages, ResourceInfo,
    ResourceSpec, ServerBuilder, State, ToolError, Verb, prompt, resource,
};
use rmcp::model::{
    ArgumentInfo, CacheScope, ClientConfig, CompleteRequestParams, ErrorCode,
    GetPromptRequestParams, InitializeResult, ProtocolVersion, ReadResourceRequestParams,
    Reference, ResourceContents,
};
use rmcp::service::{RunningService, ServiceError, serve_directly};
use rmcp::{RoleClient, RoleServer, ServiceExt};
use serde_json::{Value, json};

const TEST_TIMEOUT: Duration = Duration::from_secs(30);

async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test did not finish in time")
}

// ---------------------------------------------------------------------------------------------
// Resources and prompts over the shared invoicing domain

/// One invoice, as the agent may see it.
#[resource(uri = "billing://invoices/{id}", name = "billing.invoice", returns = InvoiceView,
           cache = volatile, complete(id = invoice_ids))]
async fn invoice_resource(db: State<Db>, id: String) -> Result<Invoice, BillingError> {
    let invoices = db.invoices.lock().unwrap();
    invoices
        .iter()
        .find(|invoice| invoice.id == id)
        .cloned()
        .ok_or(BillingError::NotFound(id))
}

/// The totals of one customer, in cents: a template variable read as an integer.
#[resource(
    uri = "billing://customers/{number}/total",
    name = "billing.customer_total"
)]
async fn customer_total(db: State<Db>, number: u32) -> Result<i64, BillingError> {
    let customer = format!("C-{number}");
    let invoices = db.invoices.lock().unwrap();
    Ok(invoices
        .iter()
        .filter(|invoice| invoice.customer_id == customer)
        .map(|invoice| invoice.total_cents)
        .sum())
}

/// How to read this server's invoices.
#[resource(uri = "billing://guide", name = "billing.guide", mime = "text/markdown", cache = immutable)]
async fn guide() -> Result<String, ToolError> {
    Ok("# Billing\nAmounts are cents.".to_owned())
}

async fn invoice_ids(
    context: CallContext,
    request: CompletionRequest,
) -> Result<Vec<String>, ToolError> {
    let db = context.state::<Db>().expect("Db is registered");
    let invoices = db.invoices.lock().unwrap();
    Ok(invoices
        .iter()
        .map(|invoice| invoice.id.clone())
        .filter(|id| id.starts_with(request.value()))
        .collect())
}

async fn statuses(_: CallContext, request: CompletionRequest) -> Result<Vec<String>, ToolError> {
    Ok(["open", "paid", "voided"]
        .into_iter()
        .filter(|status| status.starts_with(request.value()))
        .map(str::to_owned)
        .collect())
}

/// Review one invoice with the customer in mind.
#[prompt(name = "billing.review_invoice", title = "Review an invoice", uses = InvoiceView,
         complete(id = invoice_ids))]
async fn review_invoice(
    db: State<Db>,
    /// The invoice to review, such as INV-7.
    id: String,
    /// What to focus on.
    focus: Option<String>,
) -> Result<PromptMessages, ToolError> {
    let invoice = {
        let invoices = db.invoices.lock().unwrap();
        invoices
            .iter()
            .find(|invoice| invoice.id == id)
            .cloned()
            .ok_or(BillingError::NotFound(id))?
    };
    let focus = focus.unwrap_or_else(|| "anything unusual".to_owned());
    Ok(PromptMessages::new()
        .presented::<InvoiceView, _>(invoice)?
        .user(format!("Review this invoice, focusing on {focus}.")))
}

/// Lists the invoices of one status, at most `limit`.
#[prompt(name = "billing.by_status", complete(status = statuses))]
async fn by_status(
    db: State<Db>,
    /// open, paid or voided.
    status: Status,
    /// How many to show.
    limit: u8,
) -> Result<PromptMessages, ToolError> {
    let invoices: Vec<Invoice> = db
        .invoices
        .lock()
        .unwrap()
        .iter()
        .filter(|invoice| invoice.status == status)
        .take(usize::from(limit))
        .cloned()
        .collect();
    PromptMessages::new().presented::<InvoiceSummary, _>(invoices)
}

fn builder() -> ServerBuilder {
    tools(ServerBuilder::new("billing", "1.4.0").state(Db::seeded()))
        .resource::<invoice_resource>()
        .resource::<customer_total>()
        .resource::<guide>()
        .prompt::<review_invoice>()
        .prompt::<by_status>()
}

fn content_server() -> fusion::Server {
    builder().build().expect("the server builds")
}

// ---------------------------------------------------------------------------------------------
// Connections

type Client = RunningService<RoleClient, ()>;

struct Connected {
    client: Client,
    server: tokio::task::JoinHandle<()>,
}

impl Connected {
    fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.client.peer()
    }

    async fn close(self) {
        self.client.cancel().await.expect("the client stops");
        tokio::time::timeout(Duration::from_secs(5), self.server)
            .await
            .expect("the server stops when the client goes away")
            .expect("server task");
    }
}

/// rmcp's client over an in-memory pipe with the `initialize` handshake (2025-11-25).
async fn connect(mcp: &Mcp) -> Connected {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let handler = mcp.handler();
    let server = tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    let client = ().serve(client_io).await.expect("client handshake");
    Connected { client, server }
}

/// Both sides already on `version`, without a handshake (the 2026-07-28 lifecycle).
fn connect_directly(mcp: &Mcp, version: ProtocolVersion) -> Connected {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let mut client_info = ClientConfig::default();
    client_info.protocol_version = version.clone();
    let mut server_info = InitializeResult::default();
    server_info.protocol_version = version;
    let running =
        serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
    let server = tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    let client = serve_directly::<RoleClient, _, _, _, _>((), client_io, Some(server_info.into()));
    Connected { client, server }
}

async fn both_eras(mcp: &Mcp) -> [Connected; 2] {
    [
        connect(mcp).await,
        connect_directly(mcp, ProtocolVersion::V_2026_07_28),
    ]
}

fn text_of(contents: &ResourceContents) -> (&str, Option<&str>) {
    match contents {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => (text.as_str(), mime_type.as_deref()),
        other => panic!("expected text contents, got {other:?}"),
    }
}

fn rpc_error(result: Result<impl std::fmt::Debug, ServiceError>) -> rmcp::ErrorData {
    match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

fn message_texts(messages: &[rmcp::model::PromptMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|message| {
            serde_json::to_value(&message.content).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn capabilities_and_listings_in_both_eras() {
    within(async {
        let mcp = Mcp::new(content_server()).options(McpOptions {
            page_size: 1,
            ..McpOptions::default()
        });
        for connected in both_eras(&mcp).await {
            let peer = connected.peer();
            let resources = peer.list_all_resources().await.unwrap();
            let uris: Vec<&str> = resources
                .iter()
                .map(|resource| resource.uri.as_str())
                .collect();
            assert_eq!(uris, ["billing://guide"]);
            assert_eq!(resources[0].mime_type.as_deref(), Some("text/markdown"));
            assert_eq!(resources[0].name, "billing.guide");

            let first = peer.list_resource_templates(None).await.unwrap();
            assert_eq!(first.resource_templates.len(), 1);
            assert_eq!(first.next_cursor.as_deref(), Some("page-1"));
            let templates = peer.list_all_resource_templates().await.unwrap();
            let uris: Vec<&str> = templates
                .iter()
                .map(|template| template.uri_template.as_str())
                .collect();
            assert_eq!(
                uris,
                [
                    "billing://invoices/{id}",
                    "billing://customers/{number}/total"
                ]
            );
            assert_eq!(templates[0].mime_type.as_deref(), Some("application/json"));
            assert_eq!(
                templates[0].description.as_deref(),
                Some("One invoice, as the agent may see it.")
            );

            let prompts = peer.list_all_prompts().await.unwrap();
            let names: Vec<&str> = prompts.iter().map(|prompt| prompt.name.as_str()).collect();
            assert_eq!(names, ["billing_review_invoice", "billing_by_status"]);
            let review = &prompts[0];
            assert_eq!(review.title.as_deref(), Some("Review an invoice"));
            let arguments = review.arguments.as_ref().unwrap();
            let id = arguments
                .iter()
                .find(|argument| argument.name == "id")
                .unwrap();
            assert_eq!(id.required, Some(true));
            assert_eq!(
                id.description.as_deref(),
                Some("The invoice to review, such as INV-7.")
            );
            let focus = arguments
                .iter()
                .find(|argument| argument.name == "focus")
                .unwrap();
            assert_eq!(focus.required, Some(false));
            connected.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn listings_carry_cache_hints_on_2026_07_28() {
    within(async {
        let mcp = Mcp::new(content_server());
        let connected = connect_directly(&mcp, ProtocolVersion::V_2026_07_28);
        let page = connected.peer().list_resources(None).await.unwrap();
        assert_eq!(page.ttl_ms, Some(300_000));
        assert_eq!(page.cache_scope, Some(CacheScope::Public));
        let page = connected.peer().list_prompts(None).await.unwrap();
        assert_eq!(page.ttl_ms, Some(300_000));
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_template_read_goes_through_the_presenter() {
    within(async {
        let mcp = Mcp::new(content_server());
        for connected in both_eras(&mcp).await {
            let read = connected
                .peer()
                .read_resource(ReadResourceRequestParams::new("billing://invoices/INV-4"))
                .await
                .unwrap();
            let raw = serde_json::to_string(&read).unwrap();
            assert_no_secret(&raw);
            let (data, mime) = text_of(&read.contents[0]);
            assert_eq!(mime, Some("application/json"));
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(
                data,
                json!({"id": "INV-4", "customer_id": "C-1", "total_cents": 4000, "status": "open", "memo": null})
            );
            let (notes, _) = text_of(&read.contents[1]);
            assert!(notes.contains("<domain_rules>"), "{notes}");
            assert!(notes.contains("Amounts are cents: divide by 100 for display."));
            assert!(notes.contains("<ui_passthrough"), "{notes}");
            connected.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn cache_hints_follow_the_declaration() {
    within(async {
        let mcp = Mcp::new(content_server());
        let connected = connect_directly(&mcp, ProtocolVersion::V_2026_07_28);
        let peer = connected.peer();
        let volatile = peer
            .read_resource(ReadResourceRequestParams::new("billing://invoices/INV-1"))
            .await
            .unwrap();
        assert_eq!(volatile.ttl_ms, Some(0));
        assert_eq!(volatile.cache_scope, Some(CacheScope::Private));
        let immutable = peer
            .read_resource(ReadResourceRequestParams::new("billing://guide"))
            .await
            .unwrap();
        assert_eq!(immutable.ttl_ms, Some(fusion::content::IMMUTABLE_TTL_MS));
        let (text, mime) = text_of(&immutable.contents[0]);
        assert_eq!(text, "# Billing\nAmounts are cents.");
        assert_eq!(mime, Some("text/markdown"));
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn template_variables_take_the_declared_type() {
    within(async {
        let mcp = Mcp::new(content_server());
        let connected = connect(&mcp).await;
        let peer = connected.peer();
        let read = peer
            .read_resource(ReadResourceRequestParams::new(
                "billing://customers/1/total",
            ))
            .await
            .unwrap();
        // C-1 holds INV-1, INV-4, INV-7 and INV-10.
        assert_eq!(text_of(&read.contents[0]).0, "22000");
        // Not a number: the validation error names the argument.
        let error = rpc_error(
            peer.read_resource(ReadResourceRequestParams::new(
                "billing://customers/one/total",
            ))
            .await,
        );
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        let data = error.data.unwrap();
        assert_eq!(data["code"], "VALIDATION_ERROR");
        assert!(data.to_string().contains("number"), "{data}");
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn read_errors_are_json_rpc_errors_with_the_error_body() {
    within(async {
        let mcp = Mcp::new(content_server());
        let [legacy, current] = both_eras(&mcp).await;
        // An unknown URI: -32002 on 2025-11-25, -32602 on 2026-07-28.
        let error = rpc_error(
            legacy
                .peer()
                .read_resource(ReadResourceRequestParams::new("billing://nothing"))
                .await,
        );
        assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND);
        let error = rpc_error(
            current
                .peer()
                .read_resource(ReadResourceRequestParams::new("billing://nothing"))
                .await,
        );
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        // A template's URI whose handler finds nothing is not found either, with the URI as
        // SEP-2164 asks, and the domain error keeps its code, message, recovery and actions.
        for (connected, code) in [
            (&legacy, ErrorCode::RESOURCE_NOT_FOUND),
            (&current, ErrorCode::INVALID_PARAMS),
        ] {
            let error = rpc_error(
                connected
                    .peer()
                    .read_resource(ReadResourceRequestParams::new("billing://invoices/INV-99"))
                    .await,
            );
            assert_eq!(error.code, code);
            assert_eq!(error.message, "Invoice INV-99 does not exist.");
            let data = error.data.unwrap();
            assert_eq!(data["code"], "InvoiceNotFound");
            assert_eq!(data["uri"], "billing://invoices/INV-99");
            assert_eq!(data["availableActions"], json!(["billing_list_invoices"]));
        }
        legacy.close().await;
        current.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_prompt_built_from_a_presenter_carries_its_rules_and_no_secret() {
    within(async {
        let mcp = Mcp::new(content_server());
        for connected in both_eras(&mcp).await {
            let mut arguments = serde_json::Map::new();
            arguments.insert("id".into(), json!("INV-4"));
            arguments.insert("focus".into(), json!("the total"));
            let prompt = connected
                .peer()
                .get_prompt(
                    GetPromptRequestParams::new("billing_review_invoice").with_arguments(arguments),
                )
                .await
                .unwrap();
            assert_no_secret(&serde_json::to_string(&prompt).unwrap());
            let texts = message_texts(&prompt.messages);
            assert_eq!(texts.len(), 3, "{texts:?}");
            assert!(texts[0].starts_with("<domain_rules>"), "{}", texts[0]);
            assert!(texts[0].contains("total_cents: Total in integer cents"));
            assert!(texts[1].starts_with("{\"id\":\"INV-4\""), "{}", texts[1]);
            assert_eq!(texts[2], "Review this invoice, focusing on the total.");
            connected.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn prompt_arguments_are_read_as_their_types_and_validated() {
    within(async {
        let mcp = Mcp::new(content_server());
        let connected = connect(&mcp).await;
        let peer = connected.peer();
        let mut arguments = serde_json::Map::new();
        arguments.insert("status".into(), json!("open"));
        arguments.insert("limit".into(), json!("2"));
        let prompt = peer
            .get_prompt(GetPromptRequestParams::new("billing_by_status").with_arguments(arguments))
            .await
            .unwrap();
        let texts = message_texts(&prompt.messages);
        let data: Value = serde_json::from_str(texts.last().unwrap()).unwrap();
        assert_eq!(
            data,
            json!([{"id": "INV-1", "status": "open"}, {"id": "INV-4", "status": "open"}])
        );

        // A missing argument and an unknown status, both named.
        let mut arguments = serde_json::Map::new();
        arguments.insert("status".into(), json!("lost"));
        let error = rpc_error(
            peer.get_prompt(
                GetPromptRequestParams::new("billing_by_status").with_arguments(arguments),
            )
            .await,
        );
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        let details = error.data.unwrap().to_string();
        assert!(
            details.contains("limit") && details.contains("status"),
            "{details}"
        );

        let error = rpc_error(peer.get_prompt(GetPromptRequestParams::new("nope")).await);
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);

        // An argument naming nothing that exists: invalid params, with the domain error.
        let mut arguments = serde_json::Map::new();
        arguments.insert("id".into(), json!("INV-99"));
        let error = rpc_error(
            peer.get_prompt(
                GetPromptRequestParams::new("billing_review_invoice").with_arguments(arguments),
            )
            .await,
        );
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        let data = error.data.unwrap();
        assert_eq!(data["code"], "InvoiceNotFound");
        assert!(data.get("uri").is_none(), "{data}");
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn completions_for_template_variables_and_prompt_arguments() {
    within(async {
        let mcp = Mcp::new(content_server());
        for connected in both_eras(&mcp).await {
            let peer = connected.peer();
            let completed = peer
                .complete(CompleteRequestParams::new(
                    Reference::for_resource("billing://invoices/{id}"),
                    ArgumentInfo::new("id", "INV-1"),
                ))
                .await
                .unwrap();
            assert_eq!(completed.completion.values, ["INV-1", "INV-10"]);
            assert_eq!(completed.completion.has_more, Some(false));
            let completed = peer
                .complete_prompt_argument("billing_by_status", "status", "p", None)
                .await
                .unwrap();
            assert_eq!(completed.values, ["paid"]);
            // An argument without a completion function: nothing to suggest.
            let completed = peer
                .complete_prompt_argument("billing_by_status", "limit", "1", None)
                .await
                .unwrap();
            assert!(completed.values.is_empty());
            let error = rpc_error(
                peer.complete_prompt_argument("nope", "status", "", None)
                    .await,
            );
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            connected.close().await;
        }
    })
    .await;
}

/// Readers (any principal) may read and list; only `billing:prompts` may use prompts; tools
/// as in the other tests.
struct ReadersPolicy;

impl AccessPolicy for ReadersPolicy {
    fn allows(&self, call: &CallContext, action: ActionInfo<'_>) -> bool {
        call.principal().is_some() && action.verb() == Verb::Query
    }
    fn allows_resource(&self, call: &CallContext, resource: ResourceInfo<'_>) -> bool {
        call.principal().is_some() && resource.key().as_str() != "billing.customer_total"
    }
    fn allows_prompt(&self, call: &CallContext, _: PromptInfo<'_>) -> bool {
        call.principal()
            .is_some_and(|principal| principal.has_scope("billing:prompts"))
    }
}

fn as_caller(mcp: Mcp, principal: Option<Principal>) -> Mcp {
    mcp.context(move |_, call| {
        if let Some(principal) = &principal {
            call.extensions_mut().insert(principal.clone());
        }
    })
}

#[tokio::test]
async fn access_decides_what_each_caller_lists_reads_gets_and_completes() {
    within(async {
        let server = builder().access(ReadersPolicy).build().unwrap();
        let reader = Principal::new("ann");
        let connected = connect(&as_caller(Mcp::new(server.clone()), Some(reader))).await;
        let peer = connected.peer();
        let templates = peer.list_all_resource_templates().await.unwrap();
        assert_eq!(templates.len(), 1, "the customer total is not for readers");
        let page = peer.list_resource_templates(None).await.unwrap();
        assert_eq!(
            page.cache_scope,
            Some(CacheScope::Private),
            "the listing is this caller's"
        );
        assert!(peer.list_all_prompts().await.unwrap().is_empty());
        let read = peer
            .read_resource(ReadResourceRequestParams::new("billing://invoices/INV-1"))
            .await;
        assert!(read.is_ok());
        let error = rpc_error(
            peer.read_resource(ReadResourceRequestParams::new(
                "billing://customers/1/total",
            ))
            .await,
        );
        // Any other failure stays an invalid request carrying its error body.
        assert_eq!(error.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(error.data.unwrap()["code"], "FORBIDDEN");
        let error = rpc_error(
            peer.get_prompt(GetPromptRequestParams::new("billing_by_status"))
                .await,
        );
        assert_eq!(error.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(error.data.unwrap()["code"], "FORBIDDEN");
        // No completion of what the caller may not use.
        let error = rpc_error(
            peer.complete_prompt_argument("billing_by_status", "status", "", None)
                .await,
        );
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        connected.close().await;

        // Anonymous callers see nothing.
        let connected = connect_directly(
            &as_caller(Mcp::new(server.clone()), None),
            ProtocolVersion::V_2026_07_28,
        );
        let peer = connected.peer();
        let page = peer.list_resource_templates(None).await.unwrap();
        assert!(page.resource_templates.is_empty());
        assert_eq!(page.cache_scope, Some(CacheScope::Private));
        assert!(peer.list_all_resources().await.unwrap().is_empty());
        connected.close().await;

        // A prompt user may.
        let user = Principal::new("bob").with_scopes(["billing:prompts".to_owned()]);
        let connected = connect(&as_caller(Mcp::new(server), Some(user))).await;
        assert_eq!(connected.peer().list_all_prompts().await.unwrap().len(), 2);
        connected.close().await;
    })
    .await;
}

#[test]
fn a_closure_policy_serves_tools_only() {
    let server = builder()
        .access(|_: &CallContext, _: ActionInfo<'_>| true)
        .build()
        .unwrap();
    let call = server.new_context();
    assert!(server.visible_resources(&call).is_empty());
    assert!(server.visible_resource_templates(&call).is_empty());
    assert!(server.visible_prompts(&call).is_empty());
}

#[test]
fn a_mutation_may_invalidate_a_resource() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Nothing {}
    let spec = fusion::ToolSpec::mutation("notes.touch", "Touches the notes.")
        .with_invalidates("notes.board")
        .handler(|_: CallContext, _: Nothing| async { Ok::<_, ToolError>(true) });
    let board = ResourceSpec::new("notes.board", "notes://board", "The board.")
        .handler(|_: CallContext, _: Nothing| async { Ok::<_, ToolError>("empty".to_owned()) });
    ServerBuilder::new("notes", "1.0.0")
        .tool_spec(spec)
        .resource_spec(board)
        .build()
        .expect("a glob that matches a resource is valid");
}

#[test]
fn resource_mistakes_fail_the_build() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Id {
        id: String,
    }
    let handler = |_: CallContext, id: Id| async move { Ok::<_, ToolError>(id.id) };
    let error = ServerBuilder::new("notes", "1.0.0")
        .resource_spec(
            ResourceSpec::new("notes.one", "notes://notes/{number}", "A note.").handler(handler),
        )
        .resource_spec(
            ResourceSpec::new("notes.two", "notes://{+path}", "A note.").handler(handler),
        )
        .resource_spec(ResourceSpec::new("notes.three", "not a uri", "").handler(handler))
        .build()
        .unwrap_err();
    let problems = error.problems().join("\n");
    for expected in [
        "resource `notes.one`: URI template variable `{number}` has no matching argument",
        "resource `notes.one` takes argument `id`, which its URI `notes://notes/{number}` does not provide",
        "resource `notes.two`: URI template `notes://{+path}`: `{+path}` is not a simple variable",
        "resource `notes.three` has no description for the agent",
        "resource `notes.three`: `not a uri` is not a URI",
    ] {
        assert!(
            problems.contains(expected),
            "missing `{expected}` in:\n{problems}"
        );
    }
}

#[test]
fn the_lockfile_holds_resources_and_prompts() {
    let surface = fusion::lock::surface(&content_server());
    let invoice = &surface.resources["billing.invoice"];
    assert_eq!(invoice.uri, "billing://invoices/{id}");
    assert_eq!(invoice.cache, Some(fusion::lock::Cache::Volatile));
    assert_eq!(invoice.egress.presenter.as_deref(), Some("InvoiceView"));
    let fields: Vec<&String> = invoice.egress.presenters["InvoiceView"]
        .fields
        .keys()
        .collect();
    assert_eq!(
        fields,
        ["customer_id", "id", "memo", "status", "total_cents"]
    );
    assert_eq!(
        surface.resources["billing.guide"].mime_type,
        "text/markdown"
    );
    let review = &surface.prompts["billing.review_invoice"];
    assert_eq!(review.name, "billing_review_invoice");
    assert!(review.arguments["id"].required);
    assert!(!review.arguments["focus"].required);
    assert!(review.presenters.contains_key("InvoiceView"));
    // The text says it too, and reads back the same.
    let text = surface.to_lockfile();
    let read = fusion::lock::Lockfile::parse(&text).unwrap();
    assert_eq!(read.surface, surface.normalized());
    // Removing a resource is breaking.
    let mut without = surface.clone();
    without.resources.remove("billing.invoice");
    let diff = fusion::lock::diff(&surface, &without);
    assert_eq!(diff.worst(), Some(fusion::lock::Class::Breaking));
}

// ---------------------------------------------------------------------------------------------
// The request path of reads and prompts: middleware, rate limits, timeouts, observation, audit

/// The region a caller acts for: provided by server middleware to tools, resources and prompts.
#[derive(Debug, Clone)]
struct Region(String);

impl fusion::Provided for Region {}

/// The summary of the caller's region: takes the `Region` only middleware provides.
#[resource(uri = "billing://region", name = "billing.region")]
async fn region_summary(region: Region) -> Result<String, ToolError> {
    Ok(format!("region {}", region.0))
}

/// A region briefing.
#[prompt(name = "billing.region_brief")]
async fn region_brief(region: Region) -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new().user(format!("Brief me on region {}.", region.0)))
}

/// A slow report.
#[resource(uri = "billing://slow", name = "billing.slow")]
async fn slow_report() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok("late".to_owned())
}

/// Records what middleware saw and provides the caller's region (refusing callers without
/// one).
struct RegionMiddleware {
    seen: std::sync::Arc<std::sync::Mutex<Vec<(fusion::Surface, String, Verb)>>>,
}

impl fusion::Middleware for RegionMiddleware {
    fn before<'a>(
        &'a self,
        call: &'a mut CallContext,
        action: ActionInfo<'a>,
    ) -> fusion::middleware::MiddlewareFuture<'a> {
        Box::pin(async move {
            self.seen.lock().unwrap().push((
                action.surface(),
                action.key().as_str().to_owned(),
                action.verb(),
            ));
            let region = call
                .principal()
                .and_then(|principal| principal.tenant.clone())
                .ok_or_else(|| ToolError::unauthorized("No region for this caller."))?;
            call.extensions_mut().insert(Region(region));
            Ok(())
        })
    }

    fn provides(&self) -> Vec<std::any::TypeId> {
        vec![std::any::TypeId::of::<Region>()]
    }
}

/// Keeps audit records.
#[derive(Default, Clone)]
struct Records(std::sync::Arc<std::sync::Mutex<Vec<fusion::AuditRecord>>>);

impl fusion::AuditSink for Records {
    fn record(&self, record: &fusion::AuditRecord) -> Result<(), fusion::audit::AuditError> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

fn region_call(server: &fusion::Server, tenant: Option<&str>) -> CallContext {
    let mut call = server.new_context();
    let mut principal = Principal::new("ann");
    if let Some(tenant) = tenant {
        principal = principal.with_tenant(tenant);
    }
    call.extensions_mut().insert(principal);
    call
}

#[tokio::test]
async fn reads_and_prompts_run_the_servers_middleware_limits_timeout_and_reports() {
    within(async {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let records = Records::default();
        let stats = std::sync::Arc::new(fusion::observe::CallStats::new());
        let server = ServerBuilder::new("regions", "1.0.0")
            .middleware(RegionMiddleware { seen: seen.clone() })
            .resource::<region_summary>()
            .resource::<slow_report>()
            .prompt::<region_brief>()
            .default_timeout(Duration::from_millis(100))
            // Per caller, and a caller is a subject of a tenant: `ann` of `eu` has two.
            .rate_limit(fusion::RateLimit::new(2, Duration::from_secs(3600)))
            .audit(records.clone())
            .metrics(stats.clone())
            .build()
            .expect("a resource may take what server middleware provides");

        // Middleware provides the region, and sees a read under the resource's key.
        let read = server
            .read_resource("billing://region", region_call(&server, Some("eu")))
            .await
            .unwrap();
        assert_eq!(text_of(&read.contents[0]).0, "region eu");
        let got = server
            .get_prompt(
                "billing_region_brief",
                None,
                region_call(&server, Some("us")),
            )
            .await
            .unwrap();
        assert_eq!(message_texts(&got.messages), ["Brief me on region us."]);
        assert_eq!(
            *seen.lock().unwrap(),
            [
                (
                    fusion::Surface::Resource,
                    "billing.region".to_owned(),
                    Verb::Query
                ),
                (
                    fusion::Surface::Prompt,
                    "billing.region_brief".to_owned(),
                    Verb::Query
                ),
            ]
        );

        // A middleware's refusal stops the read before the handler.
        let error = server
            .read_resource("billing://region", region_call(&server, None))
            .await
            .unwrap_err();
        assert_eq!(error.data.unwrap()["code"], "UNAUTHORIZED");

        // The server's default timeout stops a slow read.
        let started = std::time::Instant::now();
        let error = server
            .read_resource("billing://slow", region_call(&server, Some("eu")))
            .await
            .unwrap_err();
        assert_eq!(error.data.unwrap()["code"], "TIMEOUT");
        assert!(started.elapsed() < Duration::from_secs(2));

        // The server's rate limit counts reads and prompts with calls: `ann` of `eu` had two
        // admitted (the other tenant's `ann` has buckets of her own).
        let error = server
            .get_prompt(
                "billing_region_brief",
                None,
                region_call(&server, Some("eu")),
            )
            .await
            .unwrap_err();
        let data = error.data.unwrap();
        assert_eq!(data["code"], "RATE_LIMITED");
        assert!(data["retryAfterMs"].as_u64().is_some(), "{data}");

        // Every request was observed: two successes, three failures.
        let snapshot = stats.snapshot();
        assert_eq!((snapshot.calls, snapshot.errors), (5, 3));
        // Reads are not audited unless the audit records reads.
        assert!(records.0.lock().unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_read_is_audited_as_a_read_when_the_audit_records_reads() {
    within(async {
        let records = Records::default();
        let server = builder()
            .audit(records.clone())
            .audit_reads()
            .build()
            .unwrap();
        let mut call = server.new_context();
        call.extensions_mut()
            .insert(Principal::new("ann").with_tenant("acme"));
        server
            .read_resource("billing://invoices/INV-1", call)
            .await
            .unwrap();
        server
            .get_prompt(
                "billing_review_invoice",
                Some(json!({ "id": "INV-1" }).as_object().unwrap().clone()),
                server.new_context(),
            )
            .await
            .unwrap();
        // A failed read is not audited.
        server
            .read_resource("billing://invoices/INV-404", server.new_context())
            .await
            .unwrap_err();
        let records = records.0.lock().unwrap();
        let seen: Vec<_> = records
            .iter()
            .map(|record| {
                (
                    record.tool.as_str(),
                    record.action.as_str(),
                    record.principal.as_deref(),
                    record.tenant.as_deref(),
                    record.outcome,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "resources/read",
                    "billing.invoice",
                    Some("ann"),
                    Some("acme"),
                    "ok"
                ),
                ("prompts/get", "billing.review_invoice", None, None, "ok"),
            ]
        );
        assert_eq!(
            records[0].arguments_digest,
            fusion::audit::arguments_digest(&json!({ "id": "INV-1" }))
        );
    })
    .await;
}
