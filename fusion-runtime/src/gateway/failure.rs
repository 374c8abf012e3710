//! Why an exchange with an upstream did not give a tool result: what both of the gateway's
//! paths to an upstream (rmcp's client, and its own over HTTP) report.

use std::time::Duration;

use rmcp::model::{ErrorData, InputRequiredResult};
use rmcp::service::ServiceError;

/// Why an exchange with the upstream did not give a tool result.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A JSON-RPC error answered the call.
    Rpc(ErrorData),
    /// The exchange failed: not connected, refused, reset, an HTTP error status.
    Unreachable(String),
    /// Answered, but not with a tool result.
    Unexpected(String),
    /// rmcp's own request timeout.
    Timeout(Duration),
    /// Answered `input_required` (2026-07-28): the upstream asks the caller for input. Passed
    /// back to a caller that asks in rounds ([`Passthrough`](super::Passthrough)); an error for any other.
    InputRequired(Box<InputRequiredResult>),
    /// No token for the caller: the authorization server refused to exchange the caller's
    /// token, or could not be asked (token exchange, RFC 8693).
    Exchange(super::credentials::Refusal),
}

impl From<ServiceError> for Failure {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::McpError(data) => Failure::Rpc(data),
            ServiceError::Timeout { timeout } => Failure::Timeout(timeout),
            ServiceError::UnexpectedResponse => Failure::Unexpected(
                "tools/call answered with something else than a tool result".into(),
            ),
            other => Failure::Unreachable(other.to_string()),
        }
    }
}
