//! `plain-billing`: the billing data served the way a plain rmcp server serves it, written as
//! rmcp's own examples write tools: argument and output structs with `serde` and `schemars`
//! derives, `Tool::with_input_schema`/`with_output_schema`, answers through
//! `CallToolResult::structured` (the JSON as a text block and again as `structuredContent`) and
//! failures as one plain text block with `isError`.
//!
//! It is the token baseline of `bench/tokens.sh` (TOKENS.md): what an agent pays for three
//! billing tools (get, list, void) when no framework adds anything. It has no envelope, no
//! rules, no suggestions, no UI blocks and no truncation notice; the hidden columns are left
//! out by a hand-written view.
//!
//! ```text
//! plain-billing        # MCP over stdio, fresh demo data in memory
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use billing::{DEMO_TENANT, Invoice, Status, Store, VoidOutcome};
use fusion::audit::AuditRecord;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Deserialize, JsonSchema)]
struct GetInvoice {
    /// The invoice id, such as INV-7.
    id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ListInvoices {
    /// Only invoices with this status.
    status: Option<Status>,
    /// How many invoices to return (default 20).
    limit: Option<u32>,
    /// How many invoices to skip first (default 0).
    offset: Option<u32>,
}

/// An invoice. Amounts are integer cents.
#[derive(Debug, Serialize, JsonSchema)]
struct InvoiceOut {
    id: String,
    customer_id: String,
    total_cents: i64,
    status: Status,
}

impl From<Invoice> for InvoiceOut {
    fn from(invoice: Invoice) -> Self {
        InvoiceOut {
            id: invoice.id,
            customer_id: invoice.customer_id,
            total_cents: invoice.total_cents,
            status: invoice.status,
        }
    }
}

/// A page of invoices.
#[derive(Debug, Serialize, JsonSchema)]
struct InvoicePage {
    invoices: Vec<InvoiceOut>,
    /// How many invoices match in all.
    total: u64,
}

const GET: &str = "billing_get_invoice";
const LIST: &str = "billing_list_invoices";
const VOID: &str = "billing_void_invoice";

#[derive(Clone)]
struct PlainBilling {
    store: Arc<Store>,
    tools: Arc<Vec<Tool>>,
}

impl PlainBilling {
    fn new(store: Arc<Store>) -> Self {
        let read = |title: &str| ToolAnnotations::with_title(title).read_only(true);
        let tools = vec![
            Tool::new(GET, "Gets one invoice by its id.", JsonObject::new())
                .with_input_schema::<GetInvoice>()
                .with_output_schema::<InvoiceOut>()
                .with_annotations(read("Get invoice")),
            Tool::new(
                LIST,
                "Lists invoices, oldest first, optionally only those with a status.",
                JsonObject::new(),
            )
            .with_input_schema::<ListInvoices>()
            .with_output_schema::<InvoicePage>()
            .with_annotations(read("List invoices")),
            Tool::new(
                VOID,
                "Voids an invoice so that it can no longer be paid.",
                JsonObject::new(),
            )
            .with_input_schema::<GetInvoice>()
            .with_output_schema::<InvoiceOut>()
            .with_annotations(ToolAnnotations::with_title("Void invoice").destructive(true)),
        ];
        PlainBilling {
            store,
            tools: Arc::new(tools),
        }
    }

    fn call(&self, name: &str, arguments: Option<JsonObject>) -> Option<CallToolResult> {
        let tenant = DEMO_TENANT;
        Some(match name {
            GET => match parse::<GetInvoice>(arguments) {
                Ok(args) => match self.store.get(tenant, &args.id) {
                    Ok(Some(invoice)) => structured(InvoiceOut::from(invoice)),
                    Ok(None) => failed(format!("Invoice {} not found.", args.id)),
                    Err(error) => failed(error.to_string()),
                },
                Err(error) => failed(error),
            },
            LIST => match parse::<ListInvoices>(arguments) {
                Ok(args) => {
                    let (limit, offset) = (args.limit.unwrap_or(20), args.offset.unwrap_or(0));
                    match self
                        .store
                        .page(tenant, args.status, offset as usize, limit as usize)
                    {
                        Ok((invoices, total)) => structured(InvoicePage {
                            invoices: invoices.into_iter().map(InvoiceOut::from).collect(),
                            total,
                        }),
                        Err(error) => failed(error.to_string()),
                    }
                }
                Err(error) => failed(error),
            },
            VOID => match parse::<GetInvoice>(arguments) {
                Ok(args) => match self.store.void(tenant, &args.id, &audit(VOID)) {
                    Ok(VoidOutcome::Voided(invoice)) => structured(InvoiceOut::from(invoice)),
                    Ok(VoidOutcome::AlreadyVoided(_)) => {
                        failed(format!("Invoice {} is already voided.", args.id))
                    }
                    Ok(VoidOutcome::NotFound) => failed(format!("Invoice {} not found.", args.id)),
                    Err(error) => failed(error.to_string()),
                },
                Err(error) => failed(error),
            },
            _ => return None,
        })
    }
}

fn parse<T: DeserializeOwned>(arguments: Option<JsonObject>) -> Result<T, String> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default()))
        .map_err(|error| format!("Invalid arguments: {error}"))
}

fn structured(value: impl Serialize) -> CallToolResult {
    CallToolResult::structured(serde_json::to_value(value).unwrap_or(Value::Null))
}

fn failed(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// The store writes an audit record with every change; the plain server has nothing to say in
/// it beyond the tool.
fn audit(tool: &str) -> AuditRecord {
    AuditRecord {
        at: std::time::SystemTime::now(),
        tool: tool.to_owned(),
        action: tool.to_owned(),
        principal: None,
        tenant: Some(DEMO_TENANT.to_owned()),
        arguments_digest: String::new(),
        outcome: "ok",
        duration: std::time::Duration::ZERO,
    }
}

impl ServerHandler for PlainBilling {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("plain-billing", "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.call(&request.name, request.arguments) {
            Some(result) => Ok(CallToolResponse::Complete(result)),
            None => Err(ErrorData::new(
                ErrorCode::INVALID_PARAMS,
                format!("unknown tool: {}", request.name),
                None,
            )),
        }
    }
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("plain-billing: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async {
        let store = Arc::new(Store::open_in_memory()?);
        let service = PlainBilling::new(store)
            .serve(rmcp::transport::stdio_pipes())
            .await?;
        service.waiting().await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("plain-billing: {error}");
            ExitCode::FAILURE
        }
    }
}
