//! Where what the request path sealed becomes the protocol's answer: the only place a typed
//! result turns into rmcp's `CallToolResult`, `ReadResourceResult`, `GetPromptResult` or a
//! JSON-RPC error. The pipeline hands over the sealed envelope with its outcome and
//! invalidations; nothing here reads JSON back to learn what the pipeline knew.

use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, CallToolResult, ContentBlock, GetPromptResult, JsonObject, ReadResourceResult,
    ResourceContents,
};
use serde_json::Value;

use crate::action::CacheHint;
use crate::content::{IMMUTABLE_TTL_MS, Read};
use crate::context::CallContext;
use crate::envelope::content_error;
use crate::envelope::{ClientForm, Reply, Sealed};
use crate::prompt::PromptMessages;

/// A sealed tool result as the protocol's `CallToolResult`: its text blocks in the client's
/// `form` (see [`ClientForm::of`]), and its envelope as `structuredContent`.
#[inline]
pub(crate) fn call_tool_result(sealed: Sealed, form: ClientForm) -> CallToolResult {
    match sealed.reply {
        Reply::Success {
            mut content,
            ui,
            data_text,
            data_pending,
            columns,
            envelope,
            ..
        } => {
            form.for_tool(data_text)
                .apply(&mut content, ui, &envelope, columns, data_pending);
            let mut result = CallToolResult::success(content);
            result.structured_content = Some(envelope);
            result
        }
        Reply::Failure {
            block, envelope, ..
        } => {
            let mut result = CallToolResult::error(vec![ContentBlock::text(block)]);
            result.structured_content = Some(to_value(&*envelope));
            result
        }
        Reply::Passed(result) => result,
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
                let text = presentation
                    .data_text
                    .unwrap_or_else(|| crate::present::json_text(&data, presentation.columns));
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

/// Serializes a type whose serialization cannot fail (plain data, string keys).
fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

// Written here rather than beside `ToolResult` so that only the transport knows rmcp's result
// types: the server module does not import serving.
impl crate::server::ToolResult {
    /// The protocol's result (rmcp's `CallToolResult`): what goes on the wire.
    pub fn into_protocol(self) -> CallToolResult {
        let form = self.form();
        call_tool_result(self.into_sealed(), form)
    }
}

// The public `resources/read` and `prompts/get` of a server are written here, beside their
// answers' shapes, so that the content module does not import serving.
impl crate::server::Server {
    /// Runs `resources/read` (see the [content module](crate::content)).
    pub async fn read_resource(
        &self,
        uri: &str,
        context: CallContext,
    ) -> Result<ReadResourceResult, ErrorData> {
        read_result(uri, self.read(uri, context).await)
    }

    /// Runs `prompts/get` (see the [content module](crate::content)).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Result<GetPromptResult, ErrorData> {
        prompt_result(name, self.prompt(name, arguments, context).await)
    }
}
