// A model goes into a prompt only through a presenter: written as JSON, it would carry every
// field, hidden and unlisted ones included.
use fusion::{PromptMessages, ToolError, model, prompt};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

fn load(id: String) -> Invoice {
    Invoice { id, webhook_secret: "whsec_1".into() }
}

/// Reviews an invoice.
#[prompt(name = "billing.review")]
async fn review(id: String) -> Result<PromptMessages, ToolError> {
    let invoice = load(id);
    PromptMessages::new().user_json(&invoice)
}

fn main() {}
