//! `raw-billing`: the billing connector written directly on rmcp's [`ServerHandler`], with no
//! Fusion code in the request path. It is the baseline the load driver compares Fusion with.
//!
//! It serves the same store (`billing::Store`, tenant `t_777`) and the same contract for
//! `billing_get_invoice`, `billing_list_invoices`, `billing_void_invoice` and
//! `billing_create_invoice` as the Fusion billing connector: the same tool names and input
//! schemas, the same `structuredContent` envelope (`{"ok":true,"data":…,"meta":…}` or
//! `{"ok":false,"error":…,"meta":…}` with `isError`) and the same text content blocks, in the
//! same order: the data as JSON, then the UI blocks, the domain rules, the suggested next
//! actions and the cache-invalidation notice; or one `<tool_error>` block. All of it is written
//! by hand, the way a careful author without a framework would: the hidden columns
//! (`tenant_id`, `webhook_secret`, `internal_flags`) are stripped by serializing a hand-written
//! view struct, and the arguments are plain structs with `serde` and `schemars` derives.
//!
//! Its configuration is rmcp's fastest: `stdio_pipes()` over stdio; over HTTP, TCP_NODELAY on
//! every socket, JSON (not SSE) responses for stateless requests, sessions for 2025-11-25
//! clients; the tool list and server info computed once at start.
//!
//! ```text
//! raw-billing --in-memory                      # MCP over stdio
//! raw-billing --in-memory --http 127.0.0.1:0   # Streamable HTTP on /mcp
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use billing::{
    Created, DEMO_TENANT, Invoice, MAX_TOTAL_CENTS, NewInvoice, Status, Store, StoreError,
    VoidOutcome,
};
use clap::Parser;
use fusion::audit::AuditRecord;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The raw rmcp billing server (baseline for the Fusion benchmarks).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Serve Streamable HTTP at this address (e.g. 127.0.0.1:8080) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Where the SQLite database lives; created and seeded on first run.
    #[arg(long, value_name = "DIR", default_value = "raw-billing-data")]
    data_dir: PathBuf,
    /// Keep the data in memory only (fresh demo data on every start).
    #[arg(long, conflicts_with = "data_dir")]
    in_memory: bool,
}

const VERSION: &str = "0.1.0";

fn main() -> ExitCode {
    // As the billing binary does: logs on stderr (stdout carries the protocol), `info,rmcp=warn`
    // unless RUST_LOG says otherwise. The raw peer itself logs only store failures.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        )
        .init();
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("raw-billing: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("raw-billing: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let store = if args.in_memory {
        Store::open_in_memory()?
    } else {
        Store::open(&args.data_dir)?
    };
    let handler = RawBilling::new(Arc::new(store));
    match args.http {
        Some(address) => serve_http(handler, address).await,
        None => {
            let service = handler.serve(rmcp::transport::stdio_pipes()).await?;
            service.waiting().await?;
            Ok(())
        }
    }
}

async fn serve_http(
    handler: RawBilling,
    address: SocketAddr,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".into(), "::1".into()];
    if !bound.ip().is_unspecified() {
        hosts.push(bound.ip().to_string());
    }
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_json_response(true)
        .with_legacy_session_mode(true);
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().route_service("/mcp", service);
    eprintln!("raw-billing: listening on http://{bound}/mcp");
    let listener =
        axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
            let _ = stream.set_nodelay(true);
        });
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Arguments: plain structs, schemas derived once.

/// `billing_get_invoice` and `billing_void_invoice`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    /// The invoice id, such as INV-7.
    id: String,
}

/// `billing_list_invoices`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// open, paid or voided
    status: Option<Status>,
    /// How many invoices to return (default 20; at most 50 are shown).
    limit: Option<u32>,
    /// How many matching invoices to skip first (default 0). A cut list says which offset
    /// shows the next ones.
    offset: Option<u32>,
}

/// `billing_create_invoice`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    /// Customer id, such as C-12
    customer_id: String,
    /// Total in integer cents: divide by 100 for display
    total_cents: i64,
}

fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut object = match serde_json::to_value(schema) {
        Ok(Value::Object(object)) => object,
        _ => JsonObject::new(),
    };
    object.remove("title");
    object.remove("description");
    Arc::new(object)
}

// ---------------------------------------------------------------------------------------------
// What leaves the process: a hand-written view without the hidden columns.

/// The egress view of an invoice.
#[derive(Debug, Serialize)]
struct InvoiceOut<'a> {
    id: &'a str,
    customer_id: &'a str,
    total_cents: i64,
    status: Status,
}

impl<'a> From<&'a Invoice> for InvoiceOut<'a> {
    fn from(invoice: &'a Invoice) -> Self {
        InvoiceOut {
            id: &invoice.id,
            customer_id: &invoice.customer_id,
            total_cents: invoice.total_cents,
            status: invoice.status,
        }
    }
}

const ONE_RULES: &str = "<domain_rules>\n- id: Invoice id, such as INV-7\n- customer_id: Customer id, such as C-12\n- total_cents: Total in integer cents: divide by 100 for display\n- status: open, paid or voided\n- Amounts are integer cents: divide by 100 and show two decimals.\n- A voided invoice can no longer be paid or changed.\n</domain_rules>";
const LIST_RULES: &str = "<domain_rules>\n- id: Invoice id, such as INV-7\n- customer_id: Customer id, such as C-12\n- total_cents: Total in integer cents: divide by 100 for display\n- status: open, paid or voided\n- Amounts are integer cents: divide by 100 and show two decimals.\n</domain_rules>";
/// The most invoices a list shows an agent.
const LIST_LIMIT: usize = 50;

fn escape(text: &str) -> Cow<'_, str> {
    if !text.contains(['&', '<', '>']) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;"),
    )
}

fn escape_attr(text: &str) -> Cow<'_, str> {
    if !text.contains(['&', '<', '>', '"']) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(escape(text).replace('"', "&quot;"))
}

fn money(cents: i64) -> String {
    format!("${}.{:02}", cents / 100, (cents % 100).abs())
}

fn ui_block(kind: &str, body: &str) -> String {
    format!(
        "<ui_passthrough type=\"{kind}\">\n{}\n</ui_passthrough>",
        escape(body)
    )
}

/// One suggested next call: (tool, arguments, reason).
type Suggestion = (&'static str, Value, &'static str);

fn suggestions_block(
    meta: &mut Map<String, Value>,
    content: &mut Vec<ContentBlock>,
    list: Vec<Suggestion>,
) {
    if list.is_empty() {
        return;
    }
    let mut block = String::from("<action_suggestions>");
    let mut listed = Vec::with_capacity(list.len());
    for (tool, arguments, reason) in list {
        let _ = write!(
            block,
            "\n- {tool} {}: {}",
            escape(&arguments.to_string()),
            escape(reason)
        );
        listed.push(json!({"tool": tool, "arguments": arguments, "reason": reason}));
    }
    block.push_str("\n</action_suggestions>");
    content.push(ContentBlock::text(block));
    meta.insert("suggestions".into(), Value::Array(listed));
}

fn base_meta(tool: &str) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("tool".into(), tool.into());
    meta.insert("version".into(), VERSION.into());
    meta
}

fn envelope_ok(
    data: Value,
    meta: Map<String, Value>,
    content: Vec<ContentBlock>,
) -> CallToolResult {
    let mut envelope = Map::new();
    envelope.insert("ok".into(), true.into());
    envelope.insert("data".into(), data);
    envelope.insert("meta".into(), Value::Object(meta));
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(Value::Object(envelope));
    result
}

/// A tool failure as the agent sees it.
struct Failure {
    code: &'static str,
    message: String,
    recovery: &'static str,
    actions: &'static [&'static str],
    retryable: bool,
}

impl Failure {
    fn not_found(id: &str) -> Self {
        Failure {
            code: "InvoiceNotFound",
            message: format!("Invoice {id} does not exist."),
            recovery: "Call billing_list_invoices to find valid invoice ids.",
            actions: &["billing_list_invoices"],
            retryable: false,
        }
    }

    fn already_voided(id: &str) -> Self {
        Failure {
            code: "AlreadyVoided",
            message: format!("Invoice {id} is already voided."),
            recovery: "Nothing to do: the invoice stays voided. Fetch it again to see its state.",
            actions: &["billing_get_invoice"],
            retryable: false,
        }
    }

    fn invalid_amount(total_cents: i64) -> Self {
        Failure {
            code: "InvalidAmount",
            message: format!("{total_cents} cents is not a valid invoice total."),
            recovery: "Send a total between 0 and 100000000000 cents (one billion dollars).",
            actions: &[],
            retryable: false,
        }
    }

    fn invalid(tool: &str, error: &serde_json::Error) -> Self {
        Failure {
            code: "VALIDATION_ERROR",
            message: format!("The arguments for `{tool}` are invalid: {error}."),
            recovery: "Correct the listed fields and call again; the tool's input schema describes every argument.",
            actions: &[],
            retryable: false,
        }
    }

    fn store(tool: &str, error: &StoreError) -> Self {
        tracing::error!(tool, %error, "store failed");
        Failure {
            code: "INTERNAL_ERROR",
            message: "The server failed while handling this call.".into(),
            recovery: "Try again later.",
            actions: &[],
            retryable: true,
        }
    }

    fn into_result(self, meta: Map<String, Value>) -> CallToolResult {
        let mut error = Map::new();
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.as_str().into());
        error.insert("retryable".into(), self.retryable.into());
        error.insert("recovery".into(), self.recovery.into());
        if !self.actions.is_empty() {
            error.insert("availableActions".into(), self.actions.into());
        }
        let mut block = format!("<tool_error code=\"{}\">", escape_attr(self.code));
        let _ = write!(block, "\n<message>{}</message>", escape(&self.message));
        let _ = write!(block, "\n<recovery>{}</recovery>", escape(self.recovery));
        if !self.actions.is_empty() {
            let _ = write!(
                block,
                "\n<available_actions>{}</available_actions>",
                self.actions.join(", ")
            );
        }
        block.push_str("\n</tool_error>");
        let mut envelope = Map::new();
        envelope.insert("ok".into(), false.into());
        envelope.insert("error".into(), Value::Object(error));
        envelope.insert("meta".into(), Value::Object(meta));
        let mut result = CallToolResult::error(vec![ContentBlock::text(block)]);
        result.structured_content = Some(Value::Object(envelope));
        result
    }
}

/// A single invoice, presented: data, three UI blocks, rules, suggestions, and for writes the
/// cache-invalidation notice.
fn present_one(
    tool: &str,
    invoice: &Invoice,
    invalidates: Option<&[&str]>,
    cause: &str,
) -> CallToolResult {
    let view = InvoiceOut::from(invoice);
    let data_text = serde_json::to_string(&view).unwrap_or_default();
    let data = serde_json::to_value(&view).unwrap_or(Value::Null);
    let status = invoice.status.as_str();
    let mut content = Vec::with_capacity(8);
    content.push(ContentBlock::text(data_text));
    content.push(ContentBlock::text(ui_block(
        "markdown",
        &format!(
            "**{}** for customer {}: **{}** ({status})",
            invoice.id,
            invoice.customer_id,
            money(invoice.total_cents)
        ),
    )));
    content.push(ContentBlock::text(ui_block(
        "mermaid",
        &format!(
            "stateDiagram-v2\n  [*] --> open\n  open --> paid\n  open --> voided\n  paid --> voided\n  note right of {status}: current"
        ),
    )));
    content.push(ContentBlock::text(format!(
        "<ui_passthrough type=\"code\" language=\"csv\">\n{}\n</ui_passthrough>",
        escape(&format!(
            "id,customer_id,total_cents,status\n{},{},{},{status}",
            invoice.id, invoice.customer_id, invoice.total_cents
        ))
    )));
    content.push(ContentBlock::text(ONE_RULES));
    let mut meta = base_meta(tool);
    let mut next = Vec::with_capacity(2);
    if invoice.status == Status::Open {
        next.push((
            "billing_void_invoice",
            json!({"id": invoice.id}),
            "The invoice is open: void it if it was issued by mistake.",
        ));
    }
    next.push((
        "billing_list_invoices",
        json!({"status": status}),
        "See the customer's other invoices.",
    ));
    suggestions_block(&mut meta, &mut content, next);
    if let Some(globs) = invalidates {
        content.push(ContentBlock::text(format!(
            "<cache_invalidation cause=\"{cause}\" domains=\"{}\"/>",
            escape_attr(&globs.join(","))
        )));
        meta.insert("invalidates".into(), globs.into());
    }
    envelope_ok(data, meta, content)
}

/// A list of invoices, presented: at most 50, a table, a chart, rules and one suggestion.
/// A page of invoices: `invoices` fetched at `offset`, of `total` that match.
fn present_list(tool: &str, invoices: &[Invoice], offset: u32, total: u64) -> CallToolResult {
    let shown = &invoices[..invoices.len().min(LIST_LIMIT)];
    let total = usize::try_from(total).unwrap_or(usize::MAX);
    let views: Vec<InvoiceOut<'_>> = shown.iter().map(InvoiceOut::from).collect();
    let data_text = serde_json::to_string(&views).unwrap_or_default();
    let data = serde_json::to_value(&views).unwrap_or(Value::Null);
    let mut meta = base_meta(tool);
    meta.insert("cache".into(), "volatile".into());
    let mut content = Vec::with_capacity(6);
    content.push(ContentBlock::text(data_text));
    if total > shown.len() {
        // As the connector tells it: the page the store fetched, of how many there are.
        let (shown, hidden) = (shown.len(), total - shown.len());
        let next = u64::from(offset) + shown as u64;
        content.push(ContentBlock::text(format!(
            "<truncation shown=\"{shown}\" total=\"{total}\" hidden=\"{hidden}\" reason=\"page\" offset=\"{offset}\" next_offset=\"{next}\">Only {shown} of {total} items are shown; {hidden} are hidden. They are items {} to {next}. Cut by the page the tool fetched ({shown} items). Call `{tool}` again with the same arguments and \"offset\": {next} for the next ones.</truncation>",
            u64::from(offset) + 1
        )));
        meta.insert(
            "truncated".into(),
            json!({"shown": shown, "total": total, "hidden": hidden, "reason": "page", "offset": offset, "nextOffset": next}),
        );
    }
    if shown.is_empty() {
        content.push(ContentBlock::text(ui_block(
            "markdown",
            "No invoices match.",
        )));
    } else {
        let mut table =
            String::from("| id | customer | total | status |\n| --- | --- | --- | --- |");
        let mut totals = [0i64; 3];
        for invoice in shown {
            let cell = |text: &str| text.replace('|', "\\|").replace(['\r', '\n'], " ");
            let _ = write!(
                table,
                "\n| {} | {} | {} | {} |",
                cell(&invoice.id),
                cell(&invoice.customer_id),
                money(invoice.total_cents),
                invoice.status.as_str()
            );
            totals[invoice.status as usize] += invoice.total_cents;
        }
        content.push(ContentBlock::text(ui_block("table", &table)));
        let chart = json!({
            "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
            "description": "Total of the listed invoices by status, in cents",
            "data": {"values": [
                {"status": "open", "cents": totals[0]},
                {"status": "paid", "cents": totals[1]},
                {"status": "voided", "cents": totals[2]},
            ]},
            "mark": "bar",
            "encoding": {
                "x": {"field": "status", "type": "nominal"},
                "y": {"field": "cents", "type": "quantitative"}
            }
        });
        content.push(ContentBlock::text(ui_block("chart", &chart.to_string())));
    }
    content.push(ContentBlock::text(LIST_RULES));
    let next = shown
        .first()
        .map(|first| {
            vec![(
                "billing_get_invoice",
                json!({"id": first.id}),
                "Open an invoice for its details and actions.",
            )]
        })
        .unwrap_or_default();
    suggestions_block(&mut meta, &mut content, next);
    envelope_ok(data, meta, content)
}

// ---------------------------------------------------------------------------------------------
// The handler.

const GET: &str = "billing_get_invoice";
const LIST: &str = "billing_list_invoices";
const VOID: &str = "billing_void_invoice";
const CREATE: &str = "billing_create_invoice";

/// Everything computed once at start; the handler is a cheap `Arc` clone per session/request.
#[derive(Clone)]
struct RawBilling {
    shared: Arc<Shared>,
}

struct Shared {
    store: Arc<Store>,
    info: ServerConfig,
    list: ListToolsResult,
    tools: HashMap<&'static str, Tool>,
}

fn tool(
    name: &'static str,
    title: &'static str,
    description: &'static str,
    schema: Arc<JsonObject>,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
) -> Tool {
    Tool::new(name, description, schema)
        .with_title(title)
        .with_annotations(
            ToolAnnotations::with_title(title)
                .read_only(read_only)
                .destructive(destructive)
                .idempotent(idempotent),
        )
}

impl RawBilling {
    fn new(store: Arc<Store>) -> Self {
        let tools = vec![
            tool(
                GET,
                "Get invoice",
                "Gets one invoice by its id.",
                input_schema::<IdArgs>(),
                true,
                false,
                true,
            ),
            tool(
                LIST,
                "List invoices",
                "Lists invoices, oldest first, optionally only those with a status.\n\nCache: volatile. The result may change at any time; fetch it again before relying on it.",
                input_schema::<ListArgs>(),
                true,
                false,
                true,
            ),
            tool(
                VOID,
                "Void invoice",
                "Voids an invoice so that it can no longer be paid.\n\nAfter it succeeds, earlier results of billing.* are stale.",
                input_schema::<IdArgs>(),
                false,
                true,
                false,
            ),
            tool(
                CREATE,
                "Create invoice",
                "Creates an open invoice for a customer.\n\nAfter it succeeds, earlier results of billing.list_invoices, billing.invoice_stats are stale.",
                input_schema::<CreateArgs>(),
                false,
                false,
                false,
            ),
        ];
        let by_name = [GET, LIST, VOID, CREATE]
            .into_iter()
            .zip(tools.iter().cloned())
            .collect();
        let list = ListToolsResult::with_all_items(tools)
            .with_ttl_ms(300_000)
            .with_cache_scope(CacheScope::Public);
        let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("raw-billing", VERSION))
            .with_instructions(
                "Invoices of one tenant. Amounts are integer cents. Look invoices up with \
                 billing_list_invoices or billing_get_invoice before changing them.",
            );
        RawBilling {
            shared: Arc::new(Shared {
                store,
                info,
                list,
                tools: by_name,
            }),
        }
    }

    fn call(&self, name: &str, arguments: Option<JsonObject>) -> Option<CallToolResult> {
        let store = &self.shared.store;
        let tenant = DEMO_TENANT;
        let result = match name {
            GET => match parse::<IdArgs>(arguments) {
                Err(error) => Failure::invalid(GET, &error).into_result(base_meta(GET)),
                Ok(args) => match store.get(tenant, &args.id) {
                    Ok(Some(invoice)) => present_one(GET, &invoice, None, ""),
                    Ok(None) => Failure::not_found(&args.id).into_result(base_meta(GET)),
                    Err(error) => Failure::store(GET, &error).into_result(base_meta(GET)),
                },
            },
            LIST => {
                let mut meta = base_meta(LIST);
                meta.insert("cache".into(), "volatile".into());
                match parse::<ListArgs>(arguments) {
                    Err(error) => Failure::invalid(LIST, &error).into_result(meta),
                    Ok(args) => {
                        let limit = args.limit.unwrap_or(20) as usize;
                        let offset = args.offset.unwrap_or(0);
                        match store.page(tenant, args.status, offset as usize, limit) {
                            Ok((invoices, total)) => present_list(LIST, &invoices, offset, total),
                            Err(error) => Failure::store(LIST, &error).into_result(meta),
                        }
                    }
                }
            }
            VOID => match parse_audited::<IdArgs>(VOID, "billing.void_invoice", arguments) {
                Err(error) => Failure::invalid(VOID, &error).into_result(base_meta(VOID)),
                Ok((args, audit)) => match store.void(tenant, &args.id, &audit) {
                    Ok(VoidOutcome::Voided(invoice)) => {
                        present_one(VOID, &invoice, Some(&["billing.*"]), "billing.void_invoice")
                    }
                    Ok(VoidOutcome::AlreadyVoided(_)) => {
                        Failure::already_voided(&args.id).into_result(base_meta(VOID))
                    }
                    Ok(VoidOutcome::NotFound) => {
                        Failure::not_found(&args.id).into_result(base_meta(VOID))
                    }
                    Err(error) => Failure::store(VOID, &error).into_result(base_meta(VOID)),
                },
            },
            CREATE => {
                match parse_audited::<CreateArgs>(CREATE, "billing.create_invoice", arguments) {
                    Err(error) => Failure::invalid(CREATE, &error).into_result(base_meta(CREATE)),
                    Ok((args, _)) if !(0..=MAX_TOTAL_CENTS).contains(&args.total_cents) => {
                        Failure::invalid_amount(args.total_cents).into_result(base_meta(CREATE))
                    }
                    Ok((args, audit)) => match store.create(
                        tenant,
                        &NewInvoice {
                            customer_id: &args.customer_id,
                            total_cents: args.total_cents,
                            idempotency_key: None,
                        },
                        &audit,
                    ) {
                        Ok(Created::New(invoice) | Created::Replayed(invoice)) => present_one(
                            CREATE,
                            &invoice,
                            Some(&["billing.list_invoices", "billing.invoice_stats"]),
                            "billing.create_invoice",
                        ),
                        Ok(Created::KeyReused) => unreachable_key_reuse(),
                        Err(error) => Failure::store(CREATE, &error).into_result(base_meta(CREATE)),
                    },
                }
            }
            _ => return None,
        };
        Some(result)
    }
}

fn parse<T: DeserializeOwned>(arguments: Option<JsonObject>) -> Result<T, serde_json::Error> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default()))
}

/// The arguments of a write and the audit record the billing store writes with the change in
/// the same transaction, made as the connector makes it (digest of the arguments), so that
/// both servers do the same work per write.
fn parse_audited<T: DeserializeOwned>(
    tool: &str,
    action: &str,
    arguments: Option<JsonObject>,
) -> Result<(T, AuditRecord), serde_json::Error> {
    let arguments = Value::Object(arguments.unwrap_or_default());
    let record = AuditRecord {
        at: std::time::SystemTime::now(),
        tool: tool.to_owned(),
        action: action.to_owned(),
        principal: None,
        tenant: Some(DEMO_TENANT.to_owned()),
        arguments_digest: fusion::audit::arguments_digest(&arguments),
        outcome: "ok",
        duration: std::time::Duration::ZERO,
    };
    Ok((serde_json::from_value(arguments)?, record))
}

/// Creates without an idempotency key never reuse one.
fn unreachable_key_reuse() -> CallToolResult {
    unreachable!("a create without an idempotency key cannot reuse one")
}

impl ServerHandler for RawBilling {
    fn get_info(&self) -> ServerConfig {
        self.shared.info.clone()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(self.shared.list.clone())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.tools.get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The store is synchronous: its calls run on the blocking pool, as the connector's do
        // (`fusion::blocking`), so that a locked database never holds an async worker.
        let this = self.clone();
        let name = request.name.clone();
        let called = tokio::task::spawn_blocking(move || this.call(&name, request.arguments))
            .await
            .map_err(|_| ErrorData::internal_error("the call panicked", None))?;
        match called {
            Some(result) => Ok(CallToolResponse::Complete(result)),
            None => Err(ErrorData::new(
                ErrorCode::INVALID_PARAMS,
                format!("unknown tool: {}", request.name),
                None,
            )),
        }
    }
}
