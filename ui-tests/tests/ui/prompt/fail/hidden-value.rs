// A hidden value never reaches a prompt, neither as JSON nor formatted into its text.
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

/// Explains a webhook failure.
#[prompt(name = "billing.webhook_help")]
async fn webhook_help(id: String) -> Result<PromptMessages, ToolError> {
    let invoice = load(id);
    PromptMessages::new()
        .user(format!("The secret is {}.", invoice.webhook_secret))
        .user_json(&invoice.webhook_secret)
}

fn main() {}
