// Arguments behind type aliases keep their full schema: types are resolved by the compiler,
// never recognised by name.
use fusion::{Create, ServerBuilder, ToolError, model, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[model(fillable(create = [customer_id, total_cents]))]
pub struct Invoice {
    #[cast("Customer id")]
    pub customer_id: String,
    #[cast("Total in cents")]
    pub total_cents: i64,
}

type NewInvoice = Create<Invoice>;
type InvoiceId = String;
type Limit = Option<u32>;

#[derive(Deserialize, JsonSchema)]
pub struct Window {
    /// First day, inclusive.
    pub from: String,
    /// Last day, inclusive.
    pub to: String,
}
type Period = Window;

#[derive(Serialize, JsonSchema)]
pub struct Created {
    pub id: String,
}

/// Creates an invoice.
#[tool(mutation, name = "billing.create_invoice")]
async fn create_invoice(input: NewInvoice, memo: InvoiceId, limit: Limit, period: Period) -> Result<Created, ToolError> {
    let _ = (input.total_cents, limit, period.from, period.to);
    Ok(Created { id: format!("{}-{memo}", input.customer_id) })
}

fn main() {
    let server = ServerBuilder::new("t", "1").tool::<create_invoice>().build().unwrap();
    let action = server.action("billing.create_invoice").unwrap();
    let schema = serde_json::Value::Object(action.input_schema().clone());
    let properties = schema["properties"].as_object().unwrap();
    let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["customer_id", "limit", "memo", "period", "total_cents"]);
    assert_eq!(schema["properties"]["total_cents"]["type"], "integer");
    assert_eq!(schema["properties"]["memo"]["type"], "string");
    assert_eq!(schema["properties"]["limit"]["type"], serde_json::json!(["integer", "null"]));
    let mut required: Vec<&str> = schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    required.sort();
    assert_eq!(required, ["customer_id", "memo", "period", "total_cents"]);
    // The aliased struct keeps its own fields and docs.
    let period = &schema["properties"]["period"];
    let period = match period.get("$ref").and_then(|r| r.as_str()) {
        Some(reference) => &schema["$defs"][reference.trim_start_matches("#/$defs/")],
        None => period,
    };
    assert_eq!(period["properties"]["from"]["description"], "First day, inclusive.");
}
