//! A small invoicing domain shared by the behaviour tests: every feature of the macros in use.
#![allow(dead_code, missing_docs, unreachable_pub)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use fusion::{
    Create, Filter, Presented, ServerBuilder, State, Suggestion, ToolError, UiBlock, Update, model,
    presenter, tool,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Open,
    Paid,
    Voided,
}

/// An invoice, with secret columns a raw server would leak.
#[model(fillable(create = [customer_id, total_cents, memo], update = [total_cents, memo], filter = [status, customer_id]))]
#[derive(Debug, Clone)]
pub struct Invoice {
    #[cast("Invoice id, such as INV-7")]
    pub id: String,
    #[cast("Customer id")]
    pub customer_id: String,
    #[cast("Total in integer cents")]
    pub total_cents: i64,
    #[cast("open, paid or voided")]
    pub status: Status,
    #[cast("A note for <humans> & agents")]
    pub memo: Option<String>,
    /// Cast but presented by no presenter: reaches no response.
    #[cast("Margin in cents, internal")]
    pub internal_margin: i64,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
    #[guarded]
    #[hidden]
    pub tenant_id: fusion::Hidden<String>,
    /// A column added by a migration: neither cast nor presented.
    pub api_key: String,
}

pub const SECRETS: [&str; 4] = ["whsec_", "t_777", "sk_live_", "987654"];

pub fn invoice(n: u32, status: Status) -> Invoice {
    Invoice {
        id: format!("INV-{n}"),
        customer_id: format!("C-{}", n % 3),
        total_cents: i64::from(n) * 1000,
        status,
        memo: None,
        internal_margin: 987654,
        webhook_secret: format!("whsec_{n}").into(),
        tenant_id: "t_777".into(),
        api_key: format!("sk_live_{n}"),
    }
}

pub fn suggest_invoice(shown: Presented<'_, InvoiceViewItem<'_>>) -> Vec<Suggestion> {
    let mut suggestions = Vec::new();
    if let Some(one) = shown.one() {
        if *one.status == Status::Open {
            suggestions.push(
                Suggestion::new(
                    "billing.void_invoice",
                    "The invoice is open: it can be voided.",
                )
                .with_arguments(json!({"id": one.id})),
            );
        }
    } else {
        suggestions.push(Suggestion::new(
            "billing.get_invoice",
            "Open one invoice for its details.",
        ));
    }
    suggestions
}

pub fn invoice_ui(shown: Presented<'_, InvoiceViewItem<'_>>) -> Vec<UiBlock> {
    let rows = shown
        .items()
        .iter()
        .map(|item| vec![item.id.clone(), item.total_cents.to_string()])
        .collect::<Vec<_>>();
    vec![
        UiBlock::markdown(format!("**{} invoice(s)** <shown>", rows.len())),
        UiBlock::table(["id", "total_cents"], rows),
        UiBlock::mermaid("graph TD; open-->paid; open-->voided"),
        UiBlock::chart(json!({"mark": "bar", "encoding": {"x": {"field": "id"}}})),
        UiBlock::code("sql", "select * from invoices where total < 10"),
    ]
}

#[presenter(Invoice, fields(id, customer_id, total_cents, status, memo), limit = 3,
            rules = ["Amounts are cents: divide by 100 for display."],
            suggest = suggest_invoice, actions = ["billing.void_invoice", "billing.get_invoice"],
            ui = invoice_ui)]
pub struct InvoiceView;

/// A second presenter over the same model, showing less.
#[presenter(Invoice, fields(id, status))]
pub struct InvoiceSummary;

#[derive(Debug, fusion::ToolError)]
pub enum BillingError {
    #[tool_error(code = "InvoiceNotFound", message = "Invoice {0} does not exist.",
                 recovery = "Call billing.list_invoices to find valid ids.",
                 actions = ["billing.list_invoices"])]
    NotFound(String),
    #[tool_error(code = "AlreadyVoided", message = "Invoice {id} is already voided.",
                 actions = ["billing.get_invoice"])]
    AlreadyVoided { id: String },
    #[tool_error(code = "StoreBusy", message = "The store is busy.", retryable)]
    Busy,
    #[tool_error(internal, from)]
    Store(std::io::Error),
}

pub struct Db {
    pub invoices: Mutex<Vec<Invoice>>,
    /// How many times a handler ran: proves when one did not.
    pub handler_runs: AtomicUsize,
}

impl Db {
    pub fn seeded() -> Self {
        let statuses = [Status::Open, Status::Paid, Status::Voided];
        Db {
            invoices: Mutex::new(
                (1..=10)
                    .map(|n| invoice(n, statuses[(n as usize - 1) % 3]))
                    .collect(),
            ),
            handler_runs: AtomicUsize::new(0),
        }
    }

    pub fn runs(&self) -> usize {
        self.handler_runs.load(Ordering::SeqCst)
    }

    fn ran(&self) {
        self.handler_runs.fetch_add(1, Ordering::SeqCst);
    }
}

/// Gets one invoice by id.
#[tool(query, name = "billing.get_invoice", returns = InvoiceView, title = "Get invoice", tags = ["billing", "read"])]
pub async fn get_invoice(
    db: State<Db>,
    /// The invoice id, such as INV-7.
    id: String,
) -> Result<Invoice, BillingError> {
    db.ran();
    let invoices = db.invoices.lock().unwrap();
    invoices
        .iter()
        .find(|invoice| invoice.id == id)
        .cloned()
        .ok_or(BillingError::NotFound(id))
}

/// Lists invoices, optionally filtered.
#[tool(query, name = "billing.list_invoices", returns = InvoiceView, cache = volatile)]
pub async fn list_invoices(
    db: State<Db>,
    filter: Filter<Invoice>,
) -> Result<Vec<Invoice>, BillingError> {
    db.ran();
    let invoices = db.invoices.lock().unwrap();
    Ok(invoices
        .iter()
        .filter(|invoice| filter.status.is_none_or(|status| status == invoice.status))
        .filter(|invoice| {
            filter
                .customer_id
                .as_ref()
                .is_none_or(|customer| *customer == invoice.customer_id)
        })
        .cloned()
        .collect())
}

/// Summaries of every invoice.
#[tool(query, name = "billing.summaries", returns = InvoiceSummary, cache = immutable)]
pub async fn summaries(db: State<Db>) -> Result<Vec<Invoice>, ToolError> {
    Ok(db.invoices.lock().unwrap().clone())
}

/// Voids an open invoice.
#[tool(mutation, name = "billing.void_invoice", returns = InvoiceView, invalidates = "billing.*")]
pub async fn void_invoice(db: State<Db>, id: String) -> Result<Invoice, BillingError> {
    db.ran();
    let mut invoices = db.invoices.lock().unwrap();
    let invoice = invoices
        .iter_mut()
        .find(|invoice| invoice.id == id)
        .ok_or_else(|| BillingError::NotFound(id.clone()))?;
    if invoice.status == Status::Voided {
        return Err(BillingError::AlreadyVoided { id });
    }
    invoice.status = Status::Voided;
    Ok(invoice.clone())
}

/// Creates an invoice for a customer.
#[tool(mutation, name = "billing.create_invoice", returns = InvoiceView, invalidates = ["billing.list_invoices", "billing.summaries"], destructive = false)]
pub async fn create_invoice(
    db: State<Db>,
    input: Create<Invoice>,
    /// Send the invoice by e-mail too.
    notify: Option<bool>,
) -> Result<Invoice, BillingError> {
    db.ran();
    let mut invoices = db.invoices.lock().unwrap();
    let mut created = invoice(invoices.len() as u32 + 1, Status::Open);
    created.customer_id = input.customer_id;
    created.total_cents = input.total_cents;
    created.memo = input
        .memo
        .map(|memo| format!("{memo} (notify: {})", notify.unwrap_or(false)));
    invoices.push(created.clone());
    Ok(created)
}

/// Changes an invoice's total or memo.
#[tool(mutation, name = "billing.update_invoice", returns = InvoiceView, invalidates = "billing.**", idempotent)]
pub async fn update_invoice(
    db: State<Db>,
    id: String,
    changes: Update<Invoice>,
) -> Result<Invoice, BillingError> {
    db.ran();
    let mut invoices = db.invoices.lock().unwrap();
    let invoice = invoices
        .iter_mut()
        .find(|invoice| invoice.id == id)
        .ok_or_else(|| BillingError::NotFound(id.clone()))?;
    if let Some(total) = changes.total_cents {
        invoice.total_cents = total;
    }
    if let Some(memo) = changes.memo {
        invoice.memo = memo;
    }
    Ok(invoice.clone())
}

#[derive(Serialize, JsonSchema)]
pub struct Health {
    pub ok: bool,
    pub invoices: usize,
}

/// Reports whether the service is healthy.
#[tool(query, name = "ops.health")]
pub async fn health(db: State<Db>) -> Result<Health, ToolError> {
    Ok(Health {
        ok: true,
        invoices: db.invoices.lock().unwrap().len(),
    })
}

/// Fails the way a broken dependency does.
#[tool(action, name = "ops.reindex")]
pub async fn reindex(fail_with: String) -> Result<Value, BillingError> {
    match fail_with.as_str() {
        "io" => {
            Err(std::io::Error::other("disk /dev/nvme0n1 failed: secret-path /var/lib/db").into())
        }
        "busy" => Err(BillingError::Busy),
        "panic" => panic!("panicked with secret-path /var/lib/db"),
        _ => Ok(json!({"reindexed": true})),
    }
}

/// Gives every tool of this domain to a builder.
pub fn tools(builder: ServerBuilder) -> ServerBuilder {
    builder
        .tool::<get_invoice>()
        .tool::<list_invoices>()
        .tool::<summaries>()
        .tool::<void_invoice>()
        .tool::<create_invoice>()
        .tool::<update_invoice>()
        .tool::<health>()
        .tool::<reindex>()
}

pub fn server_with(exposition: fusion::Exposition) -> fusion::Server {
    tools(
        ServerBuilder::new("billing", "1.4.0")
            .exposition(exposition)
            .state(Db::seeded()),
    )
    .build()
    .expect("the test server builds")
}

pub fn server() -> fusion::Server {
    server_with(fusion::Exposition::Flat)
}

pub fn db(server: &fusion::Server) -> std::sync::Arc<Db> {
    server
        .new_context()
        .state::<Db>()
        .expect("Db is registered")
}

/// Asserts that no secret value appears anywhere in a response.
pub fn assert_no_secret(raw: &str) {
    for secret in SECRETS {
        assert!(!raw.contains(secret), "`{secret}` leaked in {raw}");
    }
    for field in ["webhook_secret", "tenant_id", "api_key", "internal_margin"] {
        assert!(!raw.contains(field), "field name `{field}` leaked in {raw}");
    }
}

/// Validates `instance` against `schema` with an independent JSON Schema implementation.
pub fn assert_valid(schema: &Value, instance: &Value) {
    let validator = jsonschema::validator_for(schema).expect("a valid JSON schema");
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|error| format!("{error} at {}", error.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{instance} does not match its schema: {errors:?}\nschema: {schema}"
    );
}

/// Captures what a test's `tracing` subscriber writes.
#[derive(Clone, Default)]
pub struct Logs(std::sync::Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
