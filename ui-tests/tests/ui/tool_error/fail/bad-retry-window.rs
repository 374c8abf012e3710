// A retry window is a whole number of `ms`, `s` or `m`; an internal error has none.
use fusion::ToolError;

#[derive(Debug, ToolError)]
pub enum ExportError {
    #[tool_error(code = "Throttled", message = "Too many exports.", retry_after = "5 parsecs")]
    Throttled,
    #[tool_error(code = "Queued", message = "Queued.", retry_after = 5000)]
    Queued,
    #[tool_error(internal, retry_after = "5s")]
    Store(std::io::Error),
}

fn main() {}
