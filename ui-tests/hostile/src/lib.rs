//! A hostile call site: the user's own `Result`, `Option`, `Some`, `None`, `Ok`, `Err`, `Box`,
//! `Vec`, `String` and a module named `core` are in scope, and the facade is renamed.
// The shadowing unit structs are the point of this crate, not types anyone formats.
#![allow(
    dead_code,
    non_camel_case_types,
    missing_docs,
    missing_debug_implementations,
    clippy::disallowed_names
)]

/// Shadows `::core` for relative paths.
pub mod core {
    pub mod option {}
    pub mod result {}
}

pub type Result<T> = ::std::result::Result<T, my_fusion::ToolError>;
pub struct Option;
pub struct Some;
pub struct None;
pub struct Ok;
pub struct Err;
pub struct Box;
pub struct Vec;
pub struct String;
pub struct Serialize;
pub struct Deserialize;
pub struct JsonSchema;
pub struct Pin;
pub struct Hidden;
pub struct Debug;
pub mod fmt {}

use my_fusion::{Presented, Suggestion, UiBlock, model, presenter, tool};

type Text = ::std::string::String;

#[model(crate = ::my_fusion, fillable(create = [customer_id, total_cents], update = [total_cents], filter = [status]))]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: Text,
    #[cast("Customer id")]
    pub customer_id: Text,
    #[cast("Total in cents")]
    pub total_cents: i64,
    #[cast("open or paid")]
    pub status: Text,
    #[hidden]
    pub secret: my_fusion::Hidden<Text>,
    #[cast("The customer")]
    pub customer: ::std::option::Option<Customer>,
}

#[model(crate = ::my_fusion)]
pub struct Customer {
    #[cast("Customer name")]
    pub name: Text,
    #[guarded]
    #[hidden]
    pub owner: my_fusion::Hidden<Text>,
}

#[presenter(Customer, fields(name), crate = ::my_fusion)]
pub struct CustomerView;

fn suggest(shown: Presented<'_, InvoiceViewItem<'_>>) -> ::std::vec::Vec<Suggestion> {
    shown
        .items()
        .iter()
        .map(|item| Suggestion::new("billing.get_invoice", item.id.clone()))
        .collect()
}

fn ui(shown: Presented<'_, InvoiceViewItem<'_>>) -> ::std::vec::Vec<UiBlock> {
    ::std::vec![UiBlock::markdown(::std::format!(
        "{} invoices",
        shown.items().len()
    ))]
}

#[presenter(Invoice, fields(id, total_cents, customer = CustomerView), crate = ::my_fusion, limit = 10, rules = ["Cents."],
            suggest = suggest, actions = ["billing.get_invoice"], ui = ui)]
pub struct InvoiceView;

#[derive(my_fusion::ToolError)]
#[tool_error(crate = ::my_fusion)]
pub enum BillingError {
    #[tool_error(code = "InvoiceNotFound", message = "Invoice {0} does not exist.", actions = ["billing.list_invoices"])]
    NotFound(Text),
}

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice", returns = InvoiceView, crate = ::my_fusion)]
pub async fn get_invoice(id: Text) -> ::std::result::Result<Invoice, BillingError> {
    if id == "INV-404" {
        return ::std::result::Result::Err(BillingError::NotFound(id));
    }
    ::std::result::Result::Ok(Invoice {
        id,
        customer_id: "C-1".into(),
        total_cents: 5,
        status: "open".into(),
        secret: my_fusion::Hidden::new("whsec_1".into()),
        customer: ::std::option::Option::Some(Customer {
            name: "Ada".into(),
            owner: my_fusion::Hidden::new("t_1".into()),
        }),
    })
}

/// Lists invoices.
#[tool(query, name = "billing.list_invoices", returns = InvoiceView, crate = "::my_fusion")]
pub async fn list_invoices(filter: my_fusion::Filter<Invoice>) -> Result<::std::vec::Vec<Invoice>> {
    let _ = filter.status;
    Result::Ok(::std::vec::Vec::new())
}

/// Creates an invoice.
#[tool(mutation, name = "billing.create_invoice", invalidates = "billing.**", crate = ::my_fusion)]
pub async fn create_invoice(
    input: my_fusion::Create<Invoice>,
    note: ::std::option::Option<Text>,
) -> Result<Text> {
    Result::Ok(::std::format!(
        "{}:{}:{:?}",
        input.customer_id,
        input.total_cents,
        note
    ))
}

pub fn server() -> my_fusion::Server {
    my_fusion::ServerBuilder::new("hostile", "1.0.0")
        .tool::<get_invoice>()
        .tool::<list_invoices>()
        .tool::<create_invoice>()
        .build()
        .expect("the hostile server builds")
}
