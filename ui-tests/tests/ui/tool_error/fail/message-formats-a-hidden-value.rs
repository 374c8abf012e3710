// An agent-facing message formats neither a hidden value (no `Display`; its `Debug` is
// redacted, but the message should not even try) nor a model.
use fusion::Hidden;

#[derive(Debug, fusion::ToolError)]
pub enum TokenError {
    #[tool_error(code = "TokenMismatch", message = "Token {0} does not match.")]
    Mismatch(Hidden<String>),
    #[tool_error(code = "TokenExpired", message = "Token {token:?} has expired.")]
    Expired { token: Hidden<String> },
}

fn main() {}
