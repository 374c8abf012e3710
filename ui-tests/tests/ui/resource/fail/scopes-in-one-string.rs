// Two scopes written as one string: `"billing:read billing:audit"` is not a scope (an OAuth
// scope has no space), and a token would never carry it. Each scope is its own string.
use fusion::{ToolError, prompt, resource};

/// The ledger.
#[resource(uri = "billing://ledger", name = "billing.ledger", scopes = ["billing:read billing:audit"])]
async fn ledger() -> Result<String, ToolError> {
    Ok("the ledger".to_owned())
}

/// Close the books.
#[prompt(name = "billing.close_books", scopes = ["billing:admin", "billing \"root\""])]
async fn close_books() -> Result<fusion::PromptMessages, ToolError> {
    Ok(fusion::PromptMessages::new().user("Close them."))
}

fn main() {}
