//! A sealed failure as a JSON-RPC error, for the requests whose failures are not tool results
//! (resource reads, prompts, completions, a question round's refusal). Beside the envelope so
//! that the content module and the transport both use it without importing each other.

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use serde_json::Value;

use super::{Outcome, Reply, Sealed};
use crate::error::{codes, is_not_found};

/// The message and error body of a sealed failure, as a protocol error carries them (its
/// `message` and `data`); `None` for anything else.
pub(crate) fn failure(sealed: Sealed) -> Option<(String, Value)> {
    match sealed.reply {
        Reply::Failure { body, .. } => {
            let data = to_value(&body);
            Some((body.message, data))
        }
        Reply::Success { .. } | Reply::Passed(_) => None,
    }
}

/// A failed read (of `uri`), prompt or completion as a JSON-RPC error: the message the agent
/// would read in a tool's error, and the error body as `data`. A read of something that does
/// not exist is a resource-not-found error carrying the URI in `data.uri`, as an unknown URI
/// is.
pub(crate) fn content_error(sealed: Sealed, uri: Option<&str>) -> ErrorData {
    let code = match &sealed.outcome {
        Outcome::Failed { code, .. } => code.clone(),
        Outcome::Ok { .. } => codes::INTERNAL_ERROR.to_owned(),
    };
    let (message, mut body) =
        failure(sealed).unwrap_or_else(|| ("The request failed.".to_owned(), Value::Null));
    if let Some(body) = body.as_object_mut() {
        body.retain(|_, value| !value.is_null());
    }
    let code = match (code.as_str(), uri) {
        (codes::VALIDATION_ERROR, _) => ErrorCode::INVALID_PARAMS,
        (code, Some(uri)) if is_not_found(code) => {
            if let Some(body) = body.as_object_mut() {
                body.insert("uri".to_owned(), Value::String(uri.to_owned()));
            }
            ErrorCode::RESOURCE_NOT_FOUND
        }
        (code, _) if is_not_found(code) => ErrorCode::INVALID_PARAMS,
        (codes::INTERNAL_ERROR | codes::TIMEOUT | codes::CANCELLED, _) => ErrorCode::INTERNAL_ERROR,
        _ => ErrorCode::INVALID_REQUEST,
    };
    ErrorData::new(code, message, Some(body))
}

/// Serializes a type whose serialization cannot fail (plain data, string keys).
fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
