//! The billing connector: invoices in an embedded SQLite store, in front of AI agents.
//!
//! Run it with `cargo run -p billing` (stdio) or `cargo run -p billing -- --http 127.0.0.1:8080`.
//!
//! Read top to bottom: the [model](model::Invoice) says what each column means and which never
//! leave or enter; the presenters say what an agent sees and what it may do next; the tools are
//! plain `async fn`s with a verb; [`server`] puts them together.

pub mod memory;
pub mod model;
pub mod pg;
mod pg_tasks;
pub mod store;

use std::sync::Arc;

use fusion::audit::{AuditEntry, AuditRecord};
use fusion::complete::CompletionRequest;
use fusion::serde_json::json;
use fusion::{
    AccessPolicy, ActionInfo, CallContext, Create, Elicit, Filter, Page, Presented, Principal,
    Progress, PromptInfo, PromptMessages, Provided, ResourceInfo, Router, Server, ServerBuilder,
    State, Suggestion, ToolError, UiBlock, Update, Verb, blocking, presenter, prompt, resource,
    tool,
};

pub use memory::MemoryStore;
pub use model::{Invoice, Status};
pub use pg::{PgAuditSink, PgLock, PgStore};
pub use pg_tasks::PgTaskStore;
pub use store::{Created, InvoicePage, NewInvoice, Store, StoreError, VoidOutcome};

/// Where the invoices live: the embedded SQLite [`Store`] (one process), a [`PgStore`]
/// (replicas sharing one PostgreSQL database) or a [`MemoryStore`] (a demo that forgets). The
/// tools see only this.
#[derive(Debug, Clone)]
pub enum Invoices {
    /// SQLite; its synchronous calls run on the blocking pool.
    Sqlite(Arc<Store>),
    /// In memory: a lock held for microseconds, called on the async workers directly.
    Memory(Arc<MemoryStore>),
    /// PostgreSQL, asynchronous.
    Postgres(PgStore),
}

impl Invoices {
    /// The tenant's invoice `id`: shared with the in-memory store, not copied.
    async fn get(&self, tenant: &str, id: &str) -> Result<Option<Arc<Invoice>>, BillingError> {
        match self {
            Invoices::Sqlite(store) => {
                let (store, tenant, id) = (store.clone(), tenant.to_owned(), id.to_owned());
                Ok(blocking(move || store.get(&tenant, &id))
                    .await??
                    .map(Arc::new))
            }
            Invoices::Memory(store) => Ok(store.get(tenant, id)),
            Invoices::Postgres(store) => Ok(store.get(tenant, id).await?.map(Arc::new)),
        }
    }

    async fn page(
        &self,
        tenant: &str,
        status: Option<Status>,
        offset: usize,
        limit: usize,
    ) -> Result<InvoicePage, BillingError> {
        match self {
            Invoices::Sqlite(store) => {
                let (store, tenant) = (store.clone(), tenant.to_owned());
                Ok(
                    blocking(move || store.page_counting_once(&tenant, status, offset, limit))
                        .await??,
                )
            }
            Invoices::Memory(store) => Ok(store.page(tenant, status, offset, limit)),
            Invoices::Postgres(store) => {
                let (invoices, total) = store.page(tenant, status, offset, limit).await?;
                let invoices = invoices.into_iter().map(Arc::new).collect();
                Ok(InvoicePage::counted(invoices, total, offset))
            }
        }
    }

    async fn void(
        &self,
        tenant: &str,
        id: &str,
        audit: AuditRecord,
    ) -> Result<VoidOutcome, BillingError> {
        match self {
            Invoices::Sqlite(store) => {
                let (store, tenant, id) = (store.clone(), tenant.to_owned(), id.to_owned());
                Ok(blocking(move || store.void(&tenant, &id, &audit)).await??)
            }
            Invoices::Memory(store) => Ok(store.void(tenant, id, &audit)),
            Invoices::Postgres(store) => Ok(store.void(tenant, id, &audit).await?),
        }
    }

    async fn create(
        &self,
        tenant: &str,
        customer_id: String,
        total_cents: i64,
        idempotency_key: Option<String>,
        audit: AuditRecord,
    ) -> Result<Created, BillingError> {
        match self {
            Invoices::Sqlite(store) => {
                let (store, tenant) = (store.clone(), tenant.to_owned());
                Ok(blocking(move || {
                    let new = NewInvoice {
                        customer_id: &customer_id,
                        total_cents,
                        idempotency_key: idempotency_key.as_deref(),
                    };
                    store.create(&tenant, &new, &audit)
                })
                .await??)
            }
            Invoices::Memory(store) => {
                let new = NewInvoice {
                    customer_id: &customer_id,
                    total_cents,
                    idempotency_key: idempotency_key.as_deref(),
                };
                Ok(store.create(tenant, &new, &audit))
            }
            Invoices::Postgres(store) => {
                let new = NewInvoice {
                    customer_id: &customer_id,
                    total_cents,
                    idempotency_key: idempotency_key.as_deref(),
                };
                Ok(store.create(tenant, &new, &audit).await?)
            }
        }
    }

    async fn set_total(
        &self,
        tenant: &str,
        id: &str,
        total_cents: i64,
        audit: AuditRecord,
    ) -> Result<Option<Invoice>, BillingError> {
        match self {
            Invoices::Sqlite(store) => {
                let (store, tenant, id) = (store.clone(), tenant.to_owned(), id.to_owned());
                Ok(blocking(move || store.set_total(&tenant, &id, total_cents, &audit)).await??)
            }
            Invoices::Memory(store) => Ok(store.set_total(tenant, id, total_cents, &audit)),
            Invoices::Postgres(store) => {
                Ok(store.set_total(tenant, id, total_cents, &audit).await?)
            }
        }
    }

    async fn ids_with_prefix(
        &self,
        tenant: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, BillingError> {
        match self {
            Invoices::Sqlite(store) => {
                let (store, tenant, prefix) = (store.clone(), tenant.to_owned(), prefix.to_owned());
                Ok(blocking(move || store.ids_with_prefix(&tenant, &prefix, limit)).await??)
            }
            Invoices::Memory(store) => Ok(store.ids_with_prefix(tenant, prefix, limit)),
            Invoices::Postgres(store) => Ok(store.ids_with_prefix(tenant, prefix, limit).await?),
        }
    }

    async fn totals_by_status(
        &self,
        tenant: &str,
    ) -> Result<Vec<(Status, u64, i64)>, BillingError> {
        match self {
            Invoices::Sqlite(store) => {
                let (store, tenant) = (store.clone(), tenant.to_owned());
                Ok(blocking(move || store.totals_by_status(&tenant)).await??)
            }
            Invoices::Memory(store) => Ok(store.totals_by_status(tenant)),
            Invoices::Postgres(store) => Ok(store.totals_by_status(tenant).await?),
        }
    }
}

/// The tenant of the demo data.
pub const DEMO_TENANT: &str = "t_777";

/// The scope that allows changing invoices; reads need no scope.
pub const WRITE_SCOPE: &str = "billing:write";

/// The tenant a call acts for: derived by [`tenant_of`] from the verified credential, never
/// taken from an agent's arguments (`tenant_id` is guarded in the model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

impl Provided for Tenant {}

/// The caller's tenant; a call without one is refused.
pub fn tenant_of(call: &CallContext) -> Result<Tenant, ToolError> {
    let why = match call.principal() {
        Some(principal) => match &principal.tenant {
            Some(tenant) => return Ok(Tenant(tenant.clone())),
            None => "not bound to a tenant",
        },
        None => "missing",
    };
    Err(ToolError::unauthorized(format!(
        "The caller's credential is {why}: billing tools act for one tenant."
    )))
}

/// Reads are open to every verified caller; changes need the [`WRITE_SCOPE`].
pub fn access(call: &CallContext, action: ActionInfo<'_>) -> bool {
    action.verb() == Verb::Query
        || call
            .principal()
            .is_some_and(|principal| principal.has_scope(WRITE_SCOPE))
}

/// The billing policy: [`access`] for tools; the invoice resource and the prompts for every
/// caller bound to a tenant (they only read, and only that tenant's invoices).
#[derive(Debug, Clone, Copy)]
pub struct BillingAccess;

impl AccessPolicy for BillingAccess {
    fn allows(&self, call: &CallContext, action: ActionInfo<'_>) -> bool {
        access(call, action)
    }
    fn allows_resource(&self, call: &CallContext, _: ResourceInfo<'_>) -> bool {
        tenant_of(call).is_ok()
    }
    fn allows_prompt(&self, call: &CallContext, _: PromptInfo<'_>) -> bool {
        tenant_of(call).is_ok()
    }
    /// Named to a caller refused a change, so that its client can ask for a token with it.
    fn required_scopes(&self, action: ActionInfo<'_>) -> Vec<String> {
        match action.verb() {
            Verb::Query => Vec::new(),
            Verb::Mutation | Verb::Action => vec![WRITE_SCOPE.to_owned()],
        }
    }
}

/// The principal of a trusted local session (stdio: the user who started the process), or of
/// an anonymous demo over HTTP: the demo tenant, allowed to write.
pub fn local_principal() -> Principal {
    Principal::new("local")
        .with_tenant(DEMO_TENANT)
        .with_scopes([WRITE_SCOPE.to_owned()])
}

// ---------------------------------------------------------------------------------------------
// What the agent sees

/// One invoice: its fields, a summary, its lifecycle and a CSV line.
#[presenter(Invoice, fields(id, customer_id, total_cents, status),
            rules = ["Amounts are integer cents: divide by 100 and show two decimals.",
                     "A voided invoice can no longer be paid or changed."],
            suggest = next_for_invoice, actions = ["billing.void_invoice", "billing.list_invoices"],
            ui = invoice_blocks, ui_kinds = ["markdown", "mermaid", "code"])]
#[derive(Debug)]
pub struct InvoiceView;

fn next_for_invoice(shown: Presented<'_, InvoiceViewItem<'_>>) -> Vec<Suggestion> {
    let Some(invoice) = shown.one() else {
        return Vec::new();
    };
    let mut next = vec![
        Suggestion::new(
            "billing.list_invoices",
            "See the customer's other invoices.",
        )
        .with_arguments(json!({"status": invoice.status})),
    ];
    if *invoice.status == Status::Open {
        next.insert(
            0,
            Suggestion::new(
                "billing.void_invoice",
                "The invoice is open: void it if it was issued by mistake.",
            )
            .with_arguments(json!({"id": invoice.id})),
        );
    }
    next
}

fn invoice_blocks(shown: Presented<'_, InvoiceViewItem<'_>>) -> Vec<UiBlock> {
    let Some(invoice) = shown.one() else {
        return Vec::new();
    };
    vec![
        UiBlock::markdown(format!(
            "**{}** for customer {}: **{}** ({})",
            invoice.id,
            invoice.customer_id,
            money(*invoice.total_cents),
            invoice.status.as_str()
        )),
        UiBlock::mermaid(format!(
            "stateDiagram-v2\n  [*] --> open\n  open --> paid\n  open --> voided\n  paid --> voided\n  note right of {}: current",
            invoice.status.as_str()
        )),
        UiBlock::code(
            "csv",
            format!(
                "id,customer_id,total_cents,status\n{},{},{},{}",
                invoice.id,
                invoice.customer_id,
                invoice.total_cents,
                invoice.status.as_str()
            ),
        ),
    ]
}

/// Invoices in a list: at most 50 reach the agent, as a table and a chart.
#[presenter(Invoice, fields(id, customer_id, total_cents, status), limit = 50,
            rules = ["Amounts are integer cents: divide by 100 and show two decimals."],
            suggest = next_for_list, actions = ["billing.get_invoice"],
            ui = list_blocks, ui_kinds = ["markdown", "table", "chart"])]
#[derive(Debug)]
pub struct InvoiceList;

fn next_for_list(shown: Presented<'_, InvoiceListItem<'_>>) -> Vec<Suggestion> {
    shown
        .items()
        .first()
        .map(|first| {
            vec![
                Suggestion::new(
                    "billing.get_invoice",
                    "Open an invoice for its details and actions.",
                )
                .with_arguments(json!({"id": first.id})),
            ]
        })
        .unwrap_or_default()
}

fn list_blocks(shown: Presented<'_, InvoiceListItem<'_>>) -> Vec<UiBlock> {
    let items = shown.items();
    if items.is_empty() {
        return vec![UiBlock::markdown("No invoices match.")];
    }
    let rows = items
        .iter()
        .map(|item| {
            vec![
                item.id.clone(),
                item.customer_id.clone(),
                money(*item.total_cents),
                item.status.as_str().to_owned(),
            ]
        })
        .collect::<Vec<_>>();
    let mut totals = [(Status::Open, 0i64), (Status::Paid, 0), (Status::Voided, 0)];
    for item in items {
        if let Some(total) = totals.iter_mut().find(|(status, _)| status == item.status) {
            total.1 += *item.total_cents;
        }
    }
    vec![
        UiBlock::table(["id", "customer", "total", "status"], rows),
        UiBlock::chart(json!({
            "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
            "description": "Total of the listed invoices by status, in cents",
            "data": {"values": totals.iter().map(|(status, cents)| json!({"status": status, "cents": cents})).collect::<Vec<_>>()},
            "mark": "bar",
            "encoding": {
                "x": {"field": "status", "type": "nominal"},
                "y": {"field": "cents", "type": "quantitative"}
            }
        })),
    ]
}

fn money(cents: i64) -> String {
    format!("${}.{:02}", cents / 100, (cents % 100).abs())
}

// ---------------------------------------------------------------------------------------------
// What the agent may do

/// Domain errors: each has its own code and tells the agent how to recover. Tools are named by
/// canonical key between backticks (`` `billing.list_invoices` ``): Fusion writes them as the
/// agent calls them, flat or grouped; so do the tools' descriptions and the instructions.
///
/// Values an agent sent are echoed cut to [`ECHO_CHARS`] characters ([`fusion::echo`]), so that
/// a megabyte id never comes back as a megabyte.
#[derive(Debug, fusion::ToolError)]
pub enum BillingError {
    /// No invoice with this id for this tenant.
    #[tool_error(code = "InvoiceNotFound", message = "Invoice {0} does not exist.",
                 recovery = "Call `billing.list_invoices` to find valid invoice ids.",
                 actions = ["billing.list_invoices"])]
    InvoiceNotFound(Echoed),
    /// Voiding twice changes nothing.
    #[tool_error(code = "AlreadyVoided", message = "Invoice {0} is already voided.",
                 recovery = "Nothing to do: the invoice stays voided. Fetch it again with `billing.get_invoice` to see its state.",
                 actions = ["billing.get_invoice"])]
    AlreadyVoided(Echoed),
    /// Only open invoices change.
    #[tool_error(code = "InvoiceNotOpen", message = "Invoice {id} is {status}: only open invoices can change.",
                 recovery = "Leave it as it is, or create a new invoice with `billing.create_invoice`.", actions = ["billing.create_invoice"])]
    InvoiceNotOpen {
        /// The invoice.
        id: Echoed,
        /// Its status.
        status: &'static str,
    },
    /// An amount out of range.
    #[tool_error(
        code = "InvalidAmount",
        message = "{0} cents is not a valid invoice total.",
        recovery = "Send a total between 0 and 100000000000 cents (one billion dollars)."
    )]
    InvalidAmount(i64),
    /// An idempotency key used before for another request.
    #[tool_error(code = "IdempotencyKeyReused",
                 message = "The idempotency key {0} was already used for a create with another customer or total; nothing was created.",
                 recovery = "To retry the earlier create, send exactly its arguments with this key. For a new invoice, make up a new key.",
                 actions = ["billing.list_invoices"])]
    IdempotencyKeyReused(Echoed),
    /// The store is locked by another writer, busy or full: nothing was changed, and the same
    /// call may succeed shortly.
    #[tool_error(
        code = "StoreUnavailable",
        message = "The invoice store cannot serve this call right now (locked by another writer, busy, or out of space); nothing was changed.",
        recovery = "Wait for the retry window, then call again with the same arguments (and the same idempotency_key, if you sent one).",
        retry_after = "1s"
    )]
    StoreUnavailable,
    /// The store lost its database connection while committing the change: it may have been
    /// applied or not, so a blind retry could apply it twice.
    #[tool_error(
        code = "StoreOutcomeUnknown",
        message = "The connection to the invoice store was lost while this change was being saved: it may or may not have been applied.",
        recovery = "Check with `billing.get_invoice` (or `billing.list_invoices`) whether the change is there before calling again. A create sent with an idempotency_key can be retried with the same key: it is applied once either way.",
        actions = ["billing.get_invoice", "billing.list_invoices"]
    )]
    StoreOutcomeUnknown,
    /// The store failed: the agent sees INTERNAL_ERROR, the operator sees the cause in the logs.
    #[tool_error(internal)]
    Store(StoreError),
    /// An error of the framework (the blocking pool's), passed through.
    #[tool_error(transparent, from)]
    Tool(ToolError),
    /// The user did not confirm voiding a large invoice.
    #[tool_error(code = "VoidNotConfirmed", message = "The user did not confirm voiding invoice {0}; it stays as it was.",
                 recovery = "Do not void it again unless the user asks you to.",
                 actions = ["billing.get_invoice"])]
    VoidNotConfirmed(Echoed),
}

/// A transient store error (locked, busy, full) is `StoreUnavailable`, retryable; any other is
/// internal. The cause goes to the log either way.
impl From<StoreError> for BillingError {
    fn from(error: StoreError) -> Self {
        if error.is_transient() {
            tracing::warn!(%error, "the invoice store is unavailable; the agent is told to retry");
            BillingError::StoreUnavailable
        } else if matches!(error, StoreError::CommitUnknown { .. }) {
            tracing::error!(%error, "a commit's outcome is unknown; the agent is told to check");
            BillingError::StoreOutcomeUnknown
        } else {
            BillingError::Store(error)
        }
    }
}

/// How many characters of a value an agent sent an error message echoes.
pub const ECHO_CHARS: usize = 40;

/// A value an agent sent, as an error message shows it: at most [`ECHO_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Echoed(String);

impl Echoed {
    /// `value`, cut for an error message.
    pub fn new(value: &str) -> Self {
        Echoed(fusion::echo(value, ECHO_CHARS).into_owned())
    }
}

impl std::fmt::Display for Echoed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

// The limits below are advertised in the input schemas (`maxLength`) and enforced by Fusion
// before any handler runs: nothing longer is stored or echoed.

/// The longest invoice id accepted, in characters (`INV-` and a 64-bit number fit).
pub const MAX_ID_CHARS: usize = 32;
/// The longest customer id accepted, in characters.
pub const MAX_CUSTOMER_ID_CHARS: usize = 64;
/// The longest idempotency key accepted, in characters (a UUID is 36).
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;

/// Gets one invoice by its id (`billing.list_invoices` finds ids).
#[tool(query, name = "billing.get_invoice", returns = InvoiceView, title = "Get invoice", tags = ["invoices"])]
pub async fn get_invoice(
    store: State<Invoices>,
    tenant: Tenant,
    /// The invoice id, such as INV-7.
    #[schemars(length(max = MAX_ID_CHARS))]
    id: String,
) -> Result<Arc<Invoice>, BillingError> {
    let found = store.get(&tenant.0, &id).await?;
    found.ok_or_else(|| BillingError::InvoiceNotFound(Echoed::new(&id)))
}

/// How many matching invoice ids a completion considers: the client is sent the first 100
/// (in invoice number order) with the count of all of these, so the count is exact up to here.
pub const MAX_COMPLETION_CANDIDATES: usize = 10_000;

/// Completes an invoice id (the invoice resource's `{id}`, the reminder prompt's `id`): the
/// caller's tenant's ids that start with what was typed, oldest first.
pub async fn invoice_ids(
    context: CallContext,
    request: CompletionRequest,
) -> Result<Vec<String>, ToolError> {
    let tenant = tenant_of(&context)?;
    let store = context
        .state::<Invoices>()
        .ok_or_else(|| ToolError::internal_message("the invoice store is not registered"))?;
    Ok(store
        .ids_with_prefix(&tenant.0, request.value(), MAX_COMPLETION_CANDIDATES)
        .await?)
}

/// One invoice of the caller's tenant, as `billing.get_invoice` shows it.
#[resource(uri = "billing://invoices/{id}", name = "billing.invoice", returns = InvoiceView,
           cache = volatile, title = "Invoice", complete(id = invoice_ids))]
pub async fn invoice(
    store: State<Invoices>,
    tenant: Tenant,
    id: String,
) -> Result<Arc<Invoice>, BillingError> {
    let found = store.get(&tenant.0, &id).await?;
    found.ok_or_else(|| BillingError::InvoiceNotFound(Echoed::new(&id)))
}

/// Drafts a payment reminder for one invoice, from what the agent may see of it.
#[prompt(name = "billing.reminder_draft", title = "Draft a payment reminder", uses = InvoiceView,
         complete(id = invoice_ids))]
pub async fn reminder_draft(
    store: State<Invoices>,
    tenant: Tenant,
    /// The invoice id, such as INV-7.
    id: String,
) -> Result<PromptMessages, BillingError> {
    let invoice = invoice(store, tenant, id).await?;
    Ok(PromptMessages::new()
        .presented::<InvoiceView, _>(invoice)?
        .user(
            "Draft a short, polite payment reminder for this invoice, amounts in currency units.",
        ))
}

/// Lists invoices, oldest first, optionally only those with a status.
#[tool(query, name = "billing.list_invoices", returns = InvoiceList, cache = volatile, title = "List invoices",
       tags = ["invoices"], concurrency(max = 16, queue = 64), max_bytes = 65536)]
pub async fn list_invoices(
    store: State<Invoices>,
    tenant: Tenant,
    filter: Filter<Invoice>,
    /// How many invoices to return (default 20; at most 50 are shown).
    limit: Option<u32>,
    /// How many matching invoices to skip first (default 0). A partial list says which offset
    /// shows the next ones.
    offset: Option<u32>,
) -> Result<Page<Arc<Invoice>>, BillingError> {
    let limit = limit.unwrap_or(20) as usize;
    let offset = offset.unwrap_or(0);
    // The first page says how many invoices exist; a later one may only say that more follow
    // (counting every page would scan the tenant's invoices on each).
    let page = store
        .page(&tenant.0, filter.status, offset as usize, limit)
        .await?;
    let answer = Page::new(page.invoices).at_offset(u64::from(offset));
    Ok(match page.total {
        Some(total) => answer.with_total(total),
        None => answer.with_more(page.more),
    })
}

/// Voids an invoice so that it can no longer be paid; see it first with `billing.get_invoice`.
// At most 64 calls of each write run at once, each holding a blocking thread for at most
// `store::BUSY_TIMEOUT`, and 64 more wait without a thread; beyond, SERVER_BUSY at once. So a
// flood of writes against a locked database never takes the blocking threads reads need (tokio
// has 512), and every write answers within two busy timeouts.
#[tool(mutation, name = "billing.void_invoice", returns = InvoiceView, invalidates = "billing.*", title = "Void invoice",
       tags = ["invoices"], serialize = "id", concurrency(max = 64, queue = 64))]
pub async fn void_invoice(
    store: State<Invoices>,
    tenant: Tenant,
    audit: AuditEntry,
    ask: Elicit,
    /// The invoice id, such as INV-7.
    #[schemars(length(max = MAX_ID_CHARS))]
    id: String,
) -> Result<Invoice, BillingError> {
    // A large invoice is voided only once the user confirmed it; one already voided is not
    // asked about (nothing would happen: AlreadyVoided). Nothing is changed before the
    // question: on protocol 2026-07-28 this handler runs again with the answer.
    let found = store.get(&tenant.0, &id).await?;
    if let Some(invoice) = found.filter(|invoice| {
        invoice.total_cents > CONFIRM_VOID_ABOVE_CENTS && invoice.status != Status::Voided
    }) && !ask
        .confirm(format!(
            "Void invoice {} of {} for customer {}? It can no longer be paid.",
            invoice.id,
            money(invoice.total_cents),
            invoice.customer_id
        ))
        .await?
    {
        return Err(BillingError::VoidNotConfirmed(Echoed::new(&id)));
    }
    let outcome = store.void(&tenant.0, &id, audit.record()).await?;
    match outcome {
        VoidOutcome::Voided(invoice) => {
            // Committed with the change: the server's sink must not record it again.
            audit.recorded();
            Ok(invoice)
        }
        VoidOutcome::AlreadyVoided(_) => Err(BillingError::AlreadyVoided(Echoed::new(&id))),
        VoidOutcome::NotFound => Err(BillingError::InvoiceNotFound(Echoed::new(&id))),
    }
}

/// Voiding an invoice whose total is above this, in cents ($1,000), asks the user to confirm.
pub const CONFIRM_VOID_ABOVE_CENTS: i64 = 100_000;

/// The largest invoice total accepted, in cents: one billion dollars. It also keeps every sum
/// of totals far from overflowing.
pub const MAX_TOTAL_CENTS: i64 = 100_000_000_000;

fn checked_amount(total_cents: i64) -> Result<i64, BillingError> {
    if (0..=MAX_TOTAL_CENTS).contains(&total_cents) {
        Ok(total_cents)
    } else {
        Err(BillingError::InvalidAmount(total_cents))
    }
}

/// Creates an open invoice for a customer.
///
/// Retrying: make up one `idempotency_key` (a UUID, say) per invoice you mean to create and
/// send it with every attempt of that create. If an earlier attempt was created but its answer
/// was lost (a timeout, a dropped connection, a retryable error), the retry returns that
/// invoice instead of creating a second one. Without a key, retry only after checking with
/// `billing.list_invoices` that the invoice does not exist.
// Bounded like void_invoice.
#[tool(mutation, name = "billing.create_invoice", returns = InvoiceView, invalidates = ["billing.list_invoices", "billing.invoice_stats"], destructive = false, title = "Create invoice", tags = ["invoices"],
       concurrency(max = 64, queue = 64))]
pub async fn create_invoice(
    store: State<Invoices>,
    tenant: Tenant,
    audit: AuditEntry,
    invoice: Create<Invoice>,
    /// Your key for this create (at most 128 characters), the same on every retry of it: a
    /// retry with a key you already used returns the invoice that key created.
    #[schemars(length(max = MAX_IDEMPOTENCY_KEY_CHARS))]
    idempotency_key: Option<String>,
) -> Result<Invoice, BillingError> {
    let total_cents = checked_amount(invoice.total_cents)?;
    let created = store
        .create(
            &tenant.0,
            invoice.customer_id.clone(),
            total_cents,
            idempotency_key.clone(),
            audit.record(),
        )
        .await?;
    match created {
        Created::New(invoice) | Created::Replayed(invoice) => {
            audit.recorded();
            Ok(invoice)
        }
        Created::KeyReused => Err(BillingError::IdempotencyKeyReused(Echoed::new(
            idempotency_key.as_deref().unwrap_or_default(),
        ))),
    }
}

/// Counts and totals of the tenant's invoices by status.
#[fusion::data(serialize, schema)]
#[derive(Debug)]
pub struct Stats {
    /// One line per status.
    pub by_status: Vec<StatusTotal>,
}

/// Count and total of the invoices with one status.
#[fusion::data(serialize, schema)]
#[derive(Debug)]
pub struct StatusTotal {
    /// The status.
    pub status: Status,
    /// How many invoices have it.
    pub count: u64,
    /// Their total, in integer cents.
    pub total_cents: i64,
}

/// Counts and totals of invoices by status.
#[tool(query, name = "billing.invoice_stats", cache = volatile, tags = ["reports"], toolset = "reports")]
pub async fn invoice_stats(store: State<Invoices>, tenant: Tenant) -> Result<Stats, BillingError> {
    let by_status = store
        .totals_by_status(&tenant.0)
        .await?
        .into_iter()
        .map(|(status, count, total_cents)| StatusTotal {
            status,
            count,
            total_cents,
        })
        .collect();
    Ok(Stats { by_status })
}

/// What each invoice status means.
#[fusion::data(serialize, schema)]
#[derive(Debug)]
pub struct StatusGuide {
    /// Status and meaning.
    pub statuses: Vec<(Status, String)>,
}

/// Explains the invoice statuses; the answer never changes.
#[tool(query, name = "billing.statuses", cache = immutable, tags = ["reference"], toolset = "reports")]
pub async fn statuses() -> Result<StatusGuide, ToolError> {
    Ok(StatusGuide {
        statuses: vec![
            (Status::Open, "Issued and waiting for payment.".into()),
            (Status::Paid, "Paid in full.".into()),
            (
                Status::Voided,
                "Cancelled; it can no longer be paid.".into(),
            ),
        ],
    })
}

/// A CSV export of a tenant's invoices.
#[fusion::data(serialize, schema)]
#[derive(Debug)]
pub struct InvoiceExport {
    /// How many invoices it holds.
    pub rows: u64,
    /// `id,customer_id,status,total_cents`, one invoice per line after the header, oldest
    /// first. Hidden columns are never exported.
    pub csv: String,
}

/// How many invoices the export reads at a time (one progress step each).
const EXPORT_BATCH: usize = 100;

/// Exports every invoice of the tenant as CSV. Long-running: a client that supports tasks gets
/// a task id at once and polls for the file; it can cancel the export between two batches.
#[tool(query, name = "billing.export_invoices", task = "optional", title = "Export invoices",
       tags = ["reports"], toolset = "reports", timeout = "10m", concurrency(max = 4, queue = 16))]
pub async fn export_invoices(
    store: State<Invoices>,
    tenant: Tenant,
    progress: Progress,
) -> Result<InvoiceExport, BillingError> {
    let mut csv = String::from("id,customer_id,status,total_cents\n");
    let mut rows = 0u64;
    // A page counts the matches only when it must; the first page's count is the total shown.
    let mut total = None;
    loop {
        let page = store
            .page(&tenant.0, None, rows as usize, EXPORT_BATCH)
            .await?;
        let batch = page.invoices;
        for invoice in &batch {
            csv.push_str(&format!(
                "{},{},{},{}\n",
                csv_field(&invoice.id),
                csv_field(&invoice.customer_id),
                invoice.status.as_str(),
                invoice.total_cents
            ));
        }
        rows += batch.len() as u64;
        total = page.total.or(total);
        let message = match total {
            Some(total) => format!("{rows} of {total} invoices"),
            None => format!("{rows} invoices"),
        };
        progress
            .report(rows as f64, total.map(|total| total as f64), message)
            .await;
        if !page.more {
            return Ok(InvoiceExport { rows, csv });
        }
        // Between batches the export yields, so that a cancelled task stops here.
        tokio::task::yield_now().await;
        crate::store::hold_export_for_tests().await;
    }
}

/// `text` as one CSV field (RFC 4180): quoted, with its quotes doubled, when it holds a comma,
/// a quote or a line break.
fn csv_field(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\"")).into()
    } else {
        text.into()
    }
}

/// A reminder that was sent.
#[fusion::data(serialize, schema)]
#[derive(Debug)]
pub struct Reminder {
    /// The invoice reminded about.
    pub invoice: String,
    /// The customer who was reminded.
    pub customer_id: String,
}

/// Sends the customer a payment reminder for an open invoice.
#[tool(action, name = "billing.send_reminder", idempotent, tags = ["invoices"], toolset = "reminders")]
pub async fn send_reminder(
    store: State<Invoices>,
    tenant: Tenant,
    /// The invoice id, such as INV-7.
    #[schemars(length(max = MAX_ID_CHARS))]
    id: String,
) -> Result<Reminder, BillingError> {
    let found = store.get(&tenant.0, &id).await?;
    let invoice = found.ok_or_else(|| BillingError::InvoiceNotFound(Echoed::new(&id)))?;
    tracing::info!(invoice = %invoice.id, customer = %invoice.customer_id, "payment reminder sent");
    Ok(Reminder {
        invoice: invoice.id.clone(),
        customer_id: invoice.customer_id.clone(),
    })
}

/// Changes the total of an open invoice.
// Bounded like void_invoice.
#[tool(mutation, name = "billing.update_invoice", returns = InvoiceView, invalidates = "billing.*", idempotent,
       tags = ["invoices"], serialize = "id", concurrency(max = 64, queue = 64))]
pub async fn update_invoice(
    store: State<Invoices>,
    tenant: Tenant,
    audit: AuditEntry,
    /// The invoice id, such as INV-7.
    #[schemars(length(max = MAX_ID_CHARS))]
    id: String,
    changes: Update<Invoice>,
) -> Result<Invoice, BillingError> {
    let Some(total_cents) = changes.total_cents else {
        let found = store.get(&tenant.0, &id).await?;
        return found
            .map(|invoice| Invoice::clone(&invoice))
            .ok_or_else(|| BillingError::InvoiceNotFound(Echoed::new(&id)));
    };
    let updated = store
        .set_total(&tenant.0, &id, total_cents, audit.record())
        .await?;
    // Not changed: read why.
    let current = match updated {
        Some(_) => None,
        None => store.get(&tenant.0, &id).await?,
    };
    if let Some(updated) = updated {
        audit.recorded();
        return Ok(updated);
    }
    match current {
        Some(invoice) => Err(BillingError::InvoiceNotOpen {
            id: Echoed::new(&id),
            status: invoice.status.as_str(),
        }),
        None => Err(BillingError::InvoiceNotFound(Echoed::new(&id))),
    }
}

/// The billing tools over `store`, with their middleware and access policy: add transport-level
/// concerns (audit sink, metrics, toolsets, exposition) to the builder, then build it.
pub fn builder(store: Arc<Store>) -> ServerBuilder {
    builder_on(Invoices::Sqlite(store))
}

/// [`builder`] over either store: [`Invoices::Postgres`] for replicas sharing a database
/// (add their [`PgLock`] with [`ServerBuilder::serialization_lock`]).
pub fn builder_on(invoices: Invoices) -> ServerBuilder {
    ServerBuilder::new("billing", env!("CARGO_PKG_VERSION"))
        .instructions(
            "Invoices of one tenant. Amounts are integer cents. Look invoices up with \
             `billing.list_invoices` or `billing.get_invoice` before changing them.",
        )
        .state(invoices)
        .access(BillingAccess)
        // The tenant, for the tools, the invoice resource and the prompt alike.
        .provide(tenant_of)
        .resource::<invoice>()
        .prompt::<reminder_draft>()
        .router(
            Router::new("billing")
                .tool::<get_invoice>()
                .tool::<list_invoices>()
                .tool::<void_invoice>()
                .tool::<create_invoice>()
                .tool::<update_invoice>()
                .tool::<invoice_stats>()
                .tool::<statuses>()
                .tool::<send_reminder>()
                .tool::<export_invoices>(),
        )
}

/// The billing server over `store`, flat (`billing_get_invoice`) or grouped (`billing` with an
/// `action` argument), without audit or metrics.
pub fn server(
    store: Arc<Store>,
    exposition: fusion::Exposition,
) -> Result<Server, fusion::BuildError> {
    builder(store).exposition(exposition).build()
}
