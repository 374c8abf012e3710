// An internal error reaches the agent only as INTERNAL_ERROR with an errorId: options meant for
// the agent would be dropped silently, so they do not compile.
use fusion::ToolError;

#[derive(Debug, ToolError)]
pub enum StoreError {
    #[tool_error(internal, retryable)]
    Busy(std::io::Error),
    #[tool_error(internal, recovery = "Try again later.")]
    Locked(std::io::Error),
    #[tool_error(internal, actions = ["billing.list_invoices"])]
    Corrupt(std::io::Error),
}

fn main() {}
