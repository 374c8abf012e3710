use fusion::testing::Tester;
use fusion::{Presented, ServerBuilder, State, Suggestion, ToolError, UiBlock, model, presenter, tool};
use serde_json::json;
use std::sync::Mutex;

#[model(fillable(create = [customer_id, total_cents], filter = [status]))]
pub struct Invoice {
    #[cast("Invoice id, like INV-7")]
    pub id: String,
    #[cast("Customer id")]
    pub customer_id: String,
    #[cast("Total, integer cents")]
    pub total_cents: i64,
    #[cast("open, paid or voided")]
    pub status: String,
    #[hidden]
    pub webhook_secret: String,
    #[guarded]
    #[hidden]
    pub tenant_id: String,
}

fn invoice_actions(shown: Presented<'_, InvoiceViewItem<'_>>) -> Vec<Suggestion> {
    shown
        .items()
        .iter()
        .filter(|item| item.status == "open")
        .map(|item| Suggestion::new("billing.void_invoice", "It is open").with_arguments(json!({"id": item.id})))
        .collect()
}

fn invoice_ui(shown: Presented<'_, InvoiceViewItem<'_>>) -> Vec<UiBlock> {
    vec![UiBlock::table(
        ["id", "total"],
        shown.items().iter().map(|item| vec![item.id.clone(), item.total_cents.to_string()]),
    )]
}

#[presenter(Invoice, fields(id, total_cents, status), limit = 2,
            rules = ["Amounts are cents: divide by 100 for display."],
            suggest = invoice_actions, actions = ["billing.void_invoice"], ui = invoice_ui)]
pub struct InvoiceView;

pub struct Db(Mutex<Vec<Invoice>>);

fn inv(n: u32, status: &str) -> Invoice {
    Invoice {
        id: format!("INV-{n}"),
        customer_id: "C-1".into(),
        total_cents: 100 * n as i64,
        status: status.into(),
        webhook_secret: format!("whsec_{n}"),
        tenant_id: "t_777".into(),
    }
}

/// Gets one invoice.
#[tool(query, name = "billing.get_invoice", returns = InvoiceView)]
async fn get_invoice(db: State<Db>, /// The invoice id
 id: String) -> Result<Invoice, ToolError> {
    let db = db.0.0.lock().unwrap();
    db.iter()
        .find(|invoice| invoice.id == id)
        .map(|i| inv(i.total_cents as u32 / 100, &i.status))
        .ok_or_else(|| ToolError::new("InvoiceNotFound", format!("Invoice {id} does not exist.")).with_actions(["billing.list_invoices"]))
}

/// Lists invoices.
#[tool(query, name = "billing.list_invoices", returns = InvoiceView, cache = volatile)]
async fn list_invoices(db: State<Db>, filter: fusion::Filter<Invoice>) -> Result<Vec<Invoice>, ToolError> {
    let db = db.0.0.lock().unwrap();
    Ok(db
        .iter()
        .filter(|i| filter.status.as_ref().is_none_or(|s| *s == i.status))
        .map(|i| inv(i.total_cents as u32 / 100, &i.status))
        .collect())
}

/// Voids an invoice.
#[tool(mutation, name = "billing.void_invoice", returns = InvoiceView, invalidates = "billing.*")]
async fn void_invoice(db: State<Db>, id: String) -> Result<Invoice, ToolError> {
    let mut db = db.0.0.lock().unwrap();
    let invoice = db.iter_mut().find(|i| i.id == id).ok_or_else(|| ToolError::not_found("no"))?;
    invoice.status = "voided".into();
    Ok(inv(invoice.total_cents as u32 / 100, "voided"))
}

/// Creates an invoice.
#[tool(mutation, name = "billing.create_invoice", returns = InvoiceView, invalidates = "billing.*")]
async fn create_invoice(db: State<Db>, input: fusion::Create<Invoice>) -> Result<Invoice, ToolError> {
    let mut db = db.0.0.lock().unwrap();
    let n = db.len() as u32 + 1;
    let mut invoice = inv(n, "open");
    invoice.customer_id = input.customer_id;
    invoice.total_cents = input.total_cents;
    let shown = inv(n, "open");
    db.push(invoice);
    Ok(shown)
}

/// Panics.
#[tool(action)]
async fn explode() -> Result<String, ToolError> {
    panic!("secret internal detail db-7.internal")
}

fn server() -> fusion::Server {
    ServerBuilder::new("billing", "1.0.0")
        .state(Db(Mutex::new(vec![inv(1, "open"), inv(2, "paid"), inv(3, "open")])))
        .tool::<get_invoice>()
        .tool::<list_invoices>()
        .tool::<void_invoice>()
        .tool::<create_invoice>()
        .tool::<explode>()
        .build()
        .unwrap()
}

#[tokio::test]
async fn smoke() {
    let t = Tester::new(server());
    let r = t.call("billing.get_invoice", json!({"id": "INV-1"})).await;
    println!("{}", r.raw_text());
    assert!(!r.is_error());
    assert!(!r.raw_text().contains("whsec_"));
    let r = t.call("billing.list_invoices", json!({})).await;
    println!("{}", r.raw_text());
    let r = t.call("billing.void_invoice", json!({"id": "INV-1"})).await;
    println!("{}", r.raw_text());
    assert_eq!(r.invalidations(), ["billing.*"]);
    let r = t.call("billing.create_invoice", json!({"customer_id": "C-9", "total_cents": "x", "tenant_id": "t_1"})).await;
    println!("{}", r.raw_text());
    let r = t.call("billing.get_invoice", json!({"id": "INV-99"})).await;
    println!("{}", r.raw_text());
    let r = t.call("explode", json!({})).await;
    println!("{}", r.raw_text());
    for tool in t.server().tools() {
        println!("{}", serde_json::to_string(tool.definition()).unwrap());
    }
}
