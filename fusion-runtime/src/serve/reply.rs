//! Where what the request path sealed becomes the protocol's answer: the only place a typed
//! result turns into rmcp's `CallToolResult`, `ReadResourceResult`, `GetPromptResult` or a
//! JSON-RPC error. The pipeline hands over the sealed envelope with its outcome and
//! invalidations; nothing here reads JSON back to learn what the pipeline knew.

use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, CallToolResult, ContentBlock, ErrorCode, GetPromptResult, ReadResourceResult,
    ResourceContents,
};
use serde_json::Value;

use crate::action::CacheHint;
use crate::content::{IMMUTABLE_TTL_MS, Read, is_not_found};
use crate::envelope::{DataText, Outcome, Reply, Sealed};
use crate::error::codes;
use crate::prompt::PromptMessages;

/// A sealed tool result as the protocol's `CallToolResult`: its text blocks, the data block in
/// `form` (the client's protocol era's, see [`DataText::for_protocol`]), and its envelope as
/// `structuredContent`.
#[inline]
pub(crate) fn call_tool_result(sealed: Sealed, form: DataText) -> CallToolResult {
    match sealed.reply {
        Reply::Success {
            mut content,
            envelope,
            ..
        } => {
            form.apply(&mut content, &envelope);
            let mut result = CallToolResult::success(content);
            result.structured_content = Some(envelope);
            result
        }
        Reply::Failure { block, envelope } => {
            let mut result = CallToolResult::error(vec![ContentBlock::text(block)]);
            result.structured_content = Some(to_value(&*envelope));
            result
        }
        Reply::Passed(result) => result,
    }
}

/// The message and error body of a sealed failure, as a protocol error carries them (its
/// `message` and `data`); `None` for anything else.
pub(crate) fn failure(sealed: Sealed) -> Option<(String, Value)> {
    match sealed.reply {
        Reply::Failure { envelope, .. } => {
            let body = to_value(&envelope.error);
            Some((envelope.error.message, body))
        }
        Reply::Success { .. } | Reply::Passed(_) => None,
    }
}

/// `resources/read`'s answer: the presented contents of `uri`, or its failure as a JSON-RPC
/// error (`None`: no resource matches the URI).
pub(crate) fn read_result(
    uri: &str,
    read: Option<Result<Read<'_>, Box<Sealed>>>,
) -> Result<ReadResourceResult, ErrorData> {
    let Some(read) = read else {
        return Err(ErrorData::resource_not_found(
            format!("unknown resource: {uri}"),
            Some(serde_json::json!({ "uri": uri })),
        ));
    };
    let Read {
        resource,
        presentation,
    } = read.map_err(|sealed| content_error(*sealed, Some(uri)))?;
    let facts = &resource.facts;
    // The rules follow only what was shown.
    let shown = !presentation.data.is_null();
    let mut contents = Vec::with_capacity(2);
    contents.push(
        match (presentation.data, resource.raw_text || resource.binary) {
            // A `Blob` serializes as its base64 text: that is the `blob` as it is.
            (Value::String(blob), true) if resource.binary => ResourceContents::blob(blob, uri),
            (Value::String(text), true) => ResourceContents::text(text, uri),
            (data, _) => {
                let text = presentation.data_text.unwrap_or_else(|| data.to_string());
                ResourceContents::text(text, uri)
            }
        }
        .with_mime_type(&facts.mime_type),
    );
    // The UI blocks its presenter declared, then the rules, as one text content after the data.
    let mut notes: Vec<String> = presentation
        .ui
        .iter()
        .filter(|block| presentation.declared_ui.contains(&block.kind()))
        .map(|block| block.render())
        .collect();
    if let Some(rules) = &resource.sealed.rules_block
        && shown
    {
        notes.push(rules.clone());
    }
    if !notes.is_empty() {
        contents.push(ResourceContents::text(notes.join("\n\n"), uri));
    }
    let result = ReadResourceResult::new(contents).with_cache_scope(CacheScope::Private);
    Ok(match facts.cache {
        Some(CacheHint::Immutable) => result.with_ttl_ms(IMMUTABLE_TTL_MS),
        Some(CacheHint::Volatile) => result.with_ttl_ms(0),
        None => result,
    })
}

/// `prompts/get`'s answer: the prompt's messages, or its failure as a JSON-RPC error (`None`:
/// no prompt has this name).
pub(crate) fn prompt_result(
    name: &str,
    got: Option<Result<PromptMessages, Box<Sealed>>>,
) -> Result<GetPromptResult, ErrorData> {
    let Some(got) = got else {
        return Err(ErrorData::invalid_params(
            format!("unknown prompt: {name}"),
            None,
        ));
    };
    let messages = got.map_err(|sealed| content_error(*sealed, None))?;
    let result = GetPromptResult::new(messages.messages);
    Ok(match messages.description {
        Some(description) => result.with_description(description),
        None => result,
    })
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
