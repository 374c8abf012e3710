//! `raw-billing`: the billing connector written directly on rmcp's [`ServerHandler`], with no
//! Fusion code in the request path. It is the baseline the load driver compares Fusion with.
//!
//! It serves the same store (`billing::Store`, tenant `t_777`) and the same contract for
//! `billing_get_invoice`, `billing_list_invoices`, `billing_void_invoice` and
//! `billing_create_invoice` as the Fusion billing connector on SQLite (`billing --data-dir`),
//! and does the same store work: the same `Store` calls (a void reads the invoice first; a list
//! is `page_counting_once`), each on the blocking pool. Its answers are byte for byte billing's:
//! `structuredContent` is `{"ok":true,"data":…}` with `meta` only for what varies per call
//! (`cache` of a list, `truncated`, `invalidates` after a write), or
//! `{"ok":false,"error":{"code":…}}` with `isError`, the message, recovery and tools to call
//! only in the `<tool_error>` block. The text blocks come in billing's order: the data (a list
//! of two or more as a table, `[20]{id,customer_id,total_cents,status}:` and one line per
//! invoice, for clients on protocol 2025-06-18 or later; JSON otherwise), the truncation notice,
//! the UI blocks (only for a client that declares the `io.modelcontextprotocol/ui` extension),
//! the rule the output schema does not state, the suggested next calls and the
//! cache-invalidation notice. All of it is written by hand, the way a careful author without a
//! framework would: the hidden columns (`tenant_id`, `webhook_secret`, `internal_flags`) are
//! stripped by serializing a hand-written view struct, and the arguments are plain structs with
//! `serde` and `schemars` derives. Invalid arguments are refused with serde's message, not
//! Fusion's per-field report: the one kind of answer that differs.
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
    Created, DEMO_TENANT, Invoice, InvoicePage, MAX_TOTAL_CENTS, NewInvoice, Status, Store,
    StoreError, VoidOutcome,
};
use clap::Parser;
use fusion::audit::AuditRecord;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
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

/// The rule the output schema does not already state (Fusion sends only those).
const RULES: &str = "<domain_rules>\n- Amounts are integer cents: divide by 100 and show two decimals.\n</domain_rules>";
/// The most invoices a list shows an agent.
const LIST_LIMIT: usize = 50;
/// The extension a client declares to receive UI blocks.
const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";
/// What a void makes stale, and what a create does, as the agent calls them.
const VOID_STALE: &[&str] = &[
    "billing_get_invoice",
    "billing_list_invoices",
    "billing_invoice_stats",
    "billing_statuses",
    "billing_export_invoices",
];
const CREATE_STALE: &[&str] = &["billing_list_invoices", "billing_invoice_stats"];

/// How the asking client reads an answer: a list as a table (protocol 2025-06-18 or later, or
/// unknown) or as JSON, and whether it draws UI blocks (it declared [`UI_EXTENSION`]).
#[derive(Debug, Clone, Copy)]
struct Form {
    table: bool,
    ui: bool,
}

impl Form {
    fn of(context: &RequestContext<RoleServer>) -> Form {
        let table = context
            .protocol_version()
            .is_none_or(|version| version >= ProtocolVersion::V_2025_06_18);
        let ui = context.client_capabilities().is_some_and(|capabilities| {
            let declares = |map: Option<&std::collections::BTreeMap<String, _>>| {
                map.is_some_and(|map| map.contains_key(UI_EXTENSION))
            };
            declares(capabilities.extensions.as_ref())
                || declares(capabilities.experimental.as_ref())
        });
        Form { table, ui }
    }
}

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

/// One suggested next call: (tool, arguments, reason). Said in the text only.
type Suggestion = (&'static str, Value, &'static str);

fn suggestions_block(content: &mut Vec<ContentBlock>, list: Vec<Suggestion>) {
    if list.is_empty() {
        return;
    }
    let mut block = String::from("<action_suggestions>");
    for (tool, arguments, reason) in list {
        let _ = write!(
            block,
            "\n- {tool} {}: {}",
            escape(&arguments.to_string()),
            escape(reason)
        );
    }
    block.push_str("\n</action_suggestions>");
    content.push(ContentBlock::text(block));
}

/// `{"ok":true,"data":…}`, with `meta` only when it says something.
fn envelope_ok(
    data: Value,
    meta: Map<String, Value>,
    content: Vec<ContentBlock>,
) -> CallToolResult {
    let mut envelope = Map::new();
    envelope.insert("ok".into(), true.into());
    envelope.insert("data".into(), data);
    if !meta.is_empty() {
        envelope.insert("meta".into(), Value::Object(meta));
    }
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(Value::Object(envelope));
    result
}

/// A tool failure as the agent sees it.
struct Failure {
    code: &'static str,
    message: String,
    recovery: &'static str,
    /// Tools to call, said apart only when the recovery does not name them.
    actions: &'static [&'static str],
    retryable: bool,
    retry_after_ms: Option<u64>,
}

impl Failure {
    fn not_found(id: &str) -> Self {
        Failure {
            code: "InvoiceNotFound",
            message: format!("Invoice {} does not exist.", echo(id)),
            recovery: "Call `billing_list_invoices` to find valid invoice ids.",
            actions: &["billing_list_invoices"],
            retryable: false,
            retry_after_ms: None,
        }
    }

    fn already_voided(id: &str) -> Self {
        Failure {
            code: "AlreadyVoided",
            message: format!("Invoice {} is already voided.", echo(id)),
            recovery: "Nothing to do: the invoice stays voided. Fetch it again with `billing_get_invoice` to see its state.",
            actions: &["billing_get_invoice"],
            retryable: false,
            retry_after_ms: None,
        }
    }

    fn invalid_amount(total_cents: i64) -> Self {
        Failure {
            code: "InvalidAmount",
            message: format!("{total_cents} cents is not a valid invoice total."),
            recovery: "Send a total between 0 and 100000000000 cents (one billion dollars).",
            actions: &[],
            retryable: false,
            retry_after_ms: None,
        }
    }

    fn invalid(tool: &str, error: &serde_json::Error) -> Self {
        Failure {
            code: "VALIDATION_ERROR",
            message: format!("The arguments for `{tool}` are invalid: {error}."),
            recovery: "Correct the listed fields and call again; the tool's input schema describes every argument.",
            actions: &[],
            retryable: false,
            retry_after_ms: None,
        }
    }

    fn store(tool: &str, error: &StoreError) -> Self {
        if error.is_transient() {
            tracing::warn!(tool, %error, "the invoice store is unavailable");
            return Failure {
                code: "StoreUnavailable",
                message: "The invoice store cannot serve this call right now (locked by another writer, busy, or out of space); nothing was changed.".into(),
                recovery: "Wait for the retry window, then call again with the same arguments (and the same idempotency_key, if you sent one).",
                actions: &[],
                retryable: true,
                retry_after_ms: Some(1000),
            };
        }
        tracing::error!(tool, %error, "store failed");
        Failure {
            code: "INTERNAL_ERROR",
            message: "The server failed while handling this call.".into(),
            recovery: "Try again later.",
            actions: &[],
            retryable: true,
            retry_after_ms: None,
        }
    }

    /// The result: everything in the `<tool_error>` block; in `structuredContent` only the
    /// code and when to retry (and `meta`, when the tool has any).
    fn into_result(self, meta: Map<String, Value>) -> CallToolResult {
        let mut error = Map::new();
        error.insert("code".into(), self.code.into());
        if self.retryable {
            error.insert("retryable".into(), true.into());
        }
        if let Some(wait) = self.retry_after_ms {
            error.insert("retryAfterMs".into(), wait.into());
        }
        let mut block = format!("<tool_error code=\"{}\">", escape_attr(self.code));
        let _ = write!(block, "\n<message>{}</message>", escape(&self.message));
        let _ = write!(block, "\n<recovery>{}</recovery>", escape(self.recovery));
        if !self
            .actions
            .iter()
            .all(|action| self.message.contains(action) || self.recovery.contains(action))
        {
            let _ = write!(
                block,
                "\n<available_actions>{}</available_actions>",
                self.actions.join(", ")
            );
        }
        if let Some(wait) = self.retry_after_ms {
            let _ = write!(block, "\n<retry_after>{wait}ms</retry_after>");
        }
        block.push_str("\n</tool_error>");
        let mut envelope = Map::new();
        envelope.insert("ok".into(), false.into());
        envelope.insert("error".into(), Value::Object(error));
        if !meta.is_empty() {
            envelope.insert("meta".into(), Value::Object(meta));
        }
        let mut result = CallToolResult::error(vec![ContentBlock::text(block)]);
        result.structured_content = Some(Value::Object(envelope));
        result
    }
}

/// A value an agent sent, cut as billing's error messages echo it.
fn echo(value: &str) -> Cow<'_, str> {
    fusion::echo(value, billing::ECHO_CHARS)
}

/// A list's meta: its answers may change at any time.
fn volatile() -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("cache".into(), "volatile".into());
    meta
}

/// A single invoice, presented: data, the UI blocks for a client that draws them, the rule,
/// suggestions, and for writes the cache-invalidation notice.
fn present_one(form: Form, invoice: &Invoice, stale: Option<(&str, &[&str])>) -> CallToolResult {
    let view = InvoiceOut::from(invoice);
    let data_text = serde_json::to_string(&view).unwrap_or_default();
    let data = serde_json::to_value(&view).unwrap_or(Value::Null);
    let status = invoice.status.as_str();
    let mut content = Vec::with_capacity(if form.ui { 7 } else { 4 });
    content.push(ContentBlock::text(data_text));
    if form.ui {
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
    }
    content.push(ContentBlock::text(RULES));
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
    suggestions_block(&mut content, next);
    let mut meta = Map::new();
    if let Some((cause, tools)) = stale {
        content.push(ContentBlock::text(format!(
            "<cache_invalidation cause=\"{cause}\" domains=\"{}\"/>",
            escape_attr(&tools.join(","))
        )));
        meta.insert("invalidates".into(), tools.into());
    }
    envelope_ok(data, meta, content)
}

/// Whether a string reads as itself in a table cell (else it is written as a JSON string).
fn plain(text: &str) -> bool {
    !text.is_empty()
        && text.trim() == text
        && !text.contains([',', '"', '\\', ':', '[', ']', '{', '}'])
        && !text.chars().any(char::is_control)
        && !matches!(text, "true" | "false" | "null")
        && text.parse::<f64>().is_err()
        && !text.starts_with('-')
}

fn cell(table: &mut String, text: &str) {
    if plain(text) {
        table.push_str(text);
    } else {
        let _ = write!(table, "{}", Value::from(text));
    }
}

/// Invoices as the model reads them: the field names once, then one line per invoice.
fn table(invoices: &[Arc<Invoice>]) -> String {
    let mut table = format!("[{}]{{id,customer_id,total_cents,status}}:", invoices.len());
    for invoice in invoices {
        table.push('\n');
        cell(&mut table, &invoice.id);
        table.push(',');
        cell(&mut table, &invoice.customer_id);
        let _ = write!(
            table,
            ",{},{}",
            invoice.total_cents,
            invoice.status.as_str()
        );
    }
    table
}

/// A page of invoices fetched at `offset`, presented: at most 50, what was cut and how to get
/// the rest, a table and a chart for a client that draws them, the rule and one suggestion.
fn present_list(form: Form, page: &InvoicePage, offset: u32) -> CallToolResult {
    let returned = page.invoices.len();
    let shown = &page.invoices[..returned.min(LIST_LIMIT)];
    let views: Vec<InvoiceOut<'_>> = shown
        .iter()
        .map(|invoice| InvoiceOut::from(&**invoice))
        .collect();
    let data_text = if form.table && shown.len() >= 2 {
        table(shown)
    } else {
        serde_json::to_string(&views).unwrap_or_default()
    };
    let data = serde_json::to_value(&views).unwrap_or(Value::Null);
    let mut meta = volatile();
    let mut content = Vec::with_capacity(if form.ui { 6 } else { 4 });
    content.push(ContentBlock::text(data_text));
    if let Some((notice, truncated)) = truncation(page, shown.len(), u64::from(offset)) {
        content.push(ContentBlock::text(notice));
        meta.insert("truncated".into(), truncated);
    }
    if form.ui {
        list_ui(&mut content, shown);
    }
    content.push(ContentBlock::text(RULES));
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
    suggestions_block(&mut content, next);
    envelope_ok(data, meta, content)
}

/// What the agent is told of a page it sees only part of (the `<truncation>` block and
/// `meta.truncated`), or `None` when it sees everything.
fn truncation(page: &InvoicePage, shown: usize, offset: u64) -> Option<(String, Value)> {
    let returned = page.invoices.len();
    let limited = shown < returned;
    let after = page.more
        || page
            .total
            .is_some_and(|total| offset + (returned as u64) < total);
    if !limited && !after && page.total.is_none_or(|total| shown as u64 >= total) {
        return None;
    }
    let next = if limited {
        Some(offset + shown as u64)
    } else if after {
        Some(offset + returned as u64)
    } else {
        None
    };
    let reason = if limited { "limit" } else { "page" };
    let mut truncated = Map::new();
    truncated.insert("shown".into(), shown.into());
    let mut text = format!("<truncation shown=\"{shown}\"");
    if let Some(total) = page.total {
        let hidden = total.saturating_sub(shown as u64);
        let _ = write!(text, " total=\"{total}\" hidden=\"{hidden}\"");
        truncated.insert("total".into(), total.into());
        truncated.insert("hidden".into(), hidden.into());
    }
    let _ = write!(text, " reason=\"{reason}\" offset=\"{offset}\"");
    truncated.insert("reason".into(), reason.into());
    truncated.insert("offset".into(), offset.into());
    if let Some(next) = next {
        let _ = write!(text, " next_offset=\"{next}\"");
        truncated.insert("nextOffset".into(), next.into());
    }
    match page.total {
        Some(total) => {
            let hidden = total.saturating_sub(shown as u64);
            let _ = write!(
                text,
                ">Only {shown} of {total} items are shown; {hidden} are hidden."
            );
        }
        None => {
            let _ = write!(text, ">Only {shown} items are shown; more exist.");
        }
    }
    if shown > 0 {
        let _ = write!(
            text,
            " They are items {} to {}.",
            offset + 1,
            offset + shown as u64
        );
    }
    let by_page = page.total.is_some_and(|total| (returned as u64) < total) || page.more;
    match (by_page, limited) {
        (true, true) => {
            let _ = write!(
                text,
                " Cut by the page the tool fetched ({returned} items) and the agent limit ({shown} items)."
            );
        }
        (true, false) => {
            let _ = write!(
                text,
                " Cut by the page the tool fetched ({returned} items)."
            );
        }
        (false, true) => {
            let _ = write!(text, " Cut by the agent limit ({shown} items).");
        }
        (false, false) => {}
    }
    match next {
        Some(next) => {
            let instead = if limited {
                ", or narrow the request with filters"
            } else {
                ""
            };
            let _ = write!(
                text,
                " Call `{LIST}` again with the same arguments and \"offset\": {next} for the next ones{instead}."
            );
        }
        None => text.push_str(" There are no more after these."),
    }
    text.push_str("</truncation>");
    Some((text, Value::Object(truncated)))
}

/// A list's UI blocks: a table and a chart of the totals by status.
fn list_ui(content: &mut Vec<ContentBlock>, shown: &[Arc<Invoice>]) {
    if shown.is_empty() {
        content.push(ContentBlock::text(ui_block(
            "markdown",
            "No invoices match.",
        )));
        return;
    }
    let mut table = String::from("| id | customer | total | status |\n| --- | --- | --- | --- |");
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

    /// One store call on the blocking pool, as the connector's `fusion::blocking` runs it, so
    /// that a locked database never holds an async worker.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<Result<T, StoreError>, ErrorData> {
        let store = self.shared.store.clone();
        tokio::task::spawn_blocking(move || work(&store))
            .await
            .map_err(|_| ErrorData::internal_error("the call panicked", None))
    }

    /// The call, doing the store work billing does on SQLite: the same store calls, each on
    /// the blocking pool.
    async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        form: Form,
    ) -> Result<Option<CallToolResult>, ErrorData> {
        let tenant = DEMO_TENANT;
        let result = match name {
            GET => match parse::<IdArgs>(arguments) {
                Err(error) => Failure::invalid(GET, &error).into_result(Map::new()),
                Ok(IdArgs { id }) => {
                    let key = id.clone();
                    match self.blocking(move |store| store.get(tenant, &key)).await? {
                        Ok(Some(invoice)) => present_one(form, &invoice, None),
                        Ok(None) => Failure::not_found(&id).into_result(Map::new()),
                        Err(error) => Failure::store(GET, &error).into_result(Map::new()),
                    }
                }
            },
            LIST => match parse::<ListArgs>(arguments) {
                Err(error) => Failure::invalid(LIST, &error).into_result(volatile()),
                Ok(args) => {
                    let limit = args.limit.unwrap_or(20) as usize;
                    let offset = args.offset.unwrap_or(0);
                    let status = args.status;
                    let page = self
                        .blocking(move |store| {
                            store.page_counting_once(tenant, status, offset as usize, limit)
                        })
                        .await?;
                    match page {
                        Ok(page) => present_list(form, &page, offset),
                        Err(error) => Failure::store(LIST, &error).into_result(volatile()),
                    }
                }
            },
            VOID => match parse_audited::<IdArgs>(VOID, "billing.void_invoice", arguments) {
                Err(error) => Failure::invalid(VOID, &error).into_result(Map::new()),
                Ok((IdArgs { id }, audit)) => {
                    // As the connector: it reads the invoice first (a large open one is voided
                    // only once the user confirms; the seed has none), then voids it.
                    let key = id.clone();
                    let found = self.blocking(move |store| store.get(tenant, &key)).await?;
                    let key = id.clone();
                    let voided = match found {
                        Err(error) => Err(error),
                        Ok(_) => {
                            self.blocking(move |store| store.void(tenant, &key, &audit))
                                .await?
                        }
                    };
                    match voided {
                        Ok(VoidOutcome::Voided(invoice)) => {
                            present_one(form, &invoice, Some((VOID, VOID_STALE)))
                        }
                        Ok(VoidOutcome::AlreadyVoided(_)) => {
                            Failure::already_voided(&id).into_result(Map::new())
                        }
                        Ok(VoidOutcome::NotFound) => {
                            Failure::not_found(&id).into_result(Map::new())
                        }
                        Err(error) => Failure::store(VOID, &error).into_result(Map::new()),
                    }
                }
            },
            CREATE => {
                match parse_audited::<CreateArgs>(CREATE, "billing.create_invoice", arguments) {
                    Err(error) => Failure::invalid(CREATE, &error).into_result(Map::new()),
                    Ok((args, _)) if !(0..=MAX_TOTAL_CENTS).contains(&args.total_cents) => {
                        Failure::invalid_amount(args.total_cents).into_result(Map::new())
                    }
                    Ok((args, audit)) => {
                        let created = self
                            .blocking(move |store| {
                                store.create(
                                    tenant,
                                    &NewInvoice {
                                        customer_id: &args.customer_id,
                                        total_cents: args.total_cents,
                                        idempotency_key: None,
                                    },
                                    &audit,
                                )
                            })
                            .await?;
                        match created {
                            Ok(Created::New(invoice) | Created::Replayed(invoice)) => {
                                present_one(form, &invoice, Some((CREATE, CREATE_STALE)))
                            }
                            Ok(Created::KeyReused) => unreachable_key_reuse(),
                            Err(error) => Failure::store(CREATE, &error).into_result(Map::new()),
                        }
                    }
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(result))
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
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let form = Form::of(&context);
        let called = self.call(&request.name, request.arguments, form).await?;
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
