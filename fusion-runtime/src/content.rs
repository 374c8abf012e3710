//! Resources, prompts and completions of a built server: what [`ServerBuilder`] compiled of
//! them (definitions, listings, URI templates, argument layouts), and their request paths.
//!
//! Each request runs as a tool call does, minus what only writes need: **resolve** (a URI by
//! exact match, then the templates in order; a prompt by name), **access** (the policy's
//! [`allows_resource`](crate::AccessPolicy::allows_resource) or
//! [`allows_prompt`](crate::AccessPolicy::allows_prompt), before anything is read), **arguments**
//! (template variables or prompt arguments, strings on the wire, read as the declared types and
//! validated), **handler** (panics caught, stopped on cancellation), **present** (the same
//! presenter path as a tool: only the listed fields leave, with the rules). A failure is a
//! JSON-RPC error whose `data` is the error body a tool would send (`code`, `message`,
//! `recovery`, `errorId`…): unknown resources are `-32002` (`-32602` on 2026-07-28).
//!
//! [`ServerBuilder`]: crate::ServerBuilder

use std::collections::HashMap;

use rmcp::ErrorData;
use rmcp::model::{
    ArgumentInfo, CacheScope, CompleteResult, CompletionInfo, ErrorCode, GetPromptResult,
    JsonObject, Prompt as PromptDefinition, ReadResourceResult, Reference,
    Resource as ResourceDefinition, ResourceContents, ResourceTemplate,
};
use serde_json::{Map, Value};

use crate::action::CacheHint;
use crate::args::ArgReader;
use crate::catalog::{CompiledPrompt, CompiledResource, Definition};
use crate::complete::CompletionRequest;
use crate::context::CallContext;
use crate::envelope::{SealedParts, seal_error};
use crate::error::{ToolError, codes};
use crate::pipeline::{Running, catch_panic};
use crate::present::Presentation;
pub use crate::prompt::PromptInfo;
use crate::prompt::PromptMessages;
pub use crate::resource::ResourceInfo;
use crate::resource::template::typed_arguments;
use crate::server::Server;

/// How long a read of an `immutable` resource may be reused (`ttlMs`): a day.
pub const IMMUTABLE_TTL_MS: u64 = 24 * 60 * 60 * 1000;

impl Server {
    /// Whether the server has resources.
    pub fn has_resources(&self) -> bool {
        self.inner.content.has_resources()
    }

    /// Whether the server has prompts.
    pub fn has_prompts(&self) -> bool {
        self.inner.content.has_prompts()
    }

    /// Whether any prompt argument or template variable has a completion function.
    pub fn has_completions(&self) -> bool {
        self.inner.content.has_completions()
    }

    /// Every resource, fixed and templated, in registration order.
    pub fn resources(&self) -> impl ExactSizeIterator<Item = ResourceInfo<'_>> {
        self.inner
            .content
            .resources
            .iter()
            .map(|resource| ResourceInfo(&resource.facts))
    }

    /// Every prompt, in registration order.
    pub fn prompts(&self) -> impl ExactSizeIterator<Item = PromptInfo<'_>> {
        self.inner
            .content
            .prompts
            .iter()
            .map(|prompt| PromptInfo(&prompt.facts))
    }

    /// Whether the access policy (if any) lets the caller of `context` read `resource`; a
    /// panicking policy refuses.
    pub fn may_read(&self, resource: ResourceInfo<'_>, context: &CallContext) -> bool {
        match &self.inner.access {
            None => true,
            Some(policy) => catch_panic("the access policy", || {
                policy.allows_resource(context, resource)
            })
            .unwrap_or(false),
        }
    }

    /// Whether the access policy (if any) lets the caller of `context` get `prompt`; a
    /// panicking policy refuses.
    pub fn may_get(&self, prompt: PromptInfo<'_>, context: &CallContext) -> bool {
        match &self.inner.access {
            None => true,
            Some(policy) => catch_panic("the access policy", || {
                policy.allows_prompt(context, prompt)
            })
            .unwrap_or(false),
        }
    }

    /// The fixed resources the caller of `context` may read, as `resources/list` shows them.
    pub fn visible_resources(&self, context: &CallContext) -> Vec<ResourceDefinition> {
        self.inner
            .content
            .resources
            .iter()
            .filter(|resource| self.may_read(ResourceInfo(&resource.facts), context))
            .filter_map(|resource| match &resource.definition {
                Definition::Fixed(definition) => Some(definition.clone()),
                Definition::Template(_) => None,
            })
            .collect()
    }

    /// The resource templates the caller of `context` may read, as
    /// `resources/templates/list` shows them.
    pub fn visible_resource_templates(&self, context: &CallContext) -> Vec<ResourceTemplate> {
        self.inner
            .content
            .resources
            .iter()
            .filter(|resource| self.may_read(ResourceInfo(&resource.facts), context))
            .filter_map(|resource| match &resource.definition {
                Definition::Template(definition) => Some(definition.clone()),
                Definition::Fixed(_) => None,
            })
            .collect()
    }

    /// The prompts the caller of `context` may get, as `prompts/list` shows them.
    pub fn visible_prompts(&self, context: &CallContext) -> Vec<PromptDefinition> {
        self.inner
            .content
            .prompts
            .iter()
            .filter(|prompt| self.may_get(PromptInfo(&prompt.facts), context))
            .map(|prompt| prompt.definition.clone())
            .collect()
    }

    /// Runs `resources/read` (see the [module docs](self)).
    pub async fn read_resource(
        &self,
        uri: &str,
        context: CallContext,
    ) -> Result<ReadResourceResult, ErrorData> {
        let content = &self.inner.content;
        let Some((resource, values)) = content.resolve(uri) else {
            return Err(ErrorData::resource_not_found(
                format!("unknown resource: {uri}"),
                Some(serde_json::json!({ "uri": uri })),
            ));
        };
        let facts = &resource.facts;
        let outcome = self.run_resource(resource, values, context).await;
        let presentation = match outcome {
            Ok(presentation) => presentation,
            Err(error) => {
                tracing::debug!(resource = %facts.key, code = error.code(), "resource read failed");
                return Err(self.protocol_error(&resource.sealed, error, true));
            }
        };
        let mut contents = Vec::with_capacity(2);
        let data_text = match (&presentation.data, resource.raw_text) {
            (Value::String(text), true) => text.clone(),
            _ => presentation
                .data_text
                .clone()
                .unwrap_or_else(|| presentation.data.to_string()),
        };
        contents.push(ResourceContents::text(data_text, uri).with_mime_type(&facts.mime_type));
        let mut notes = Vec::new();
        for block in presentation
            .ui
            .iter()
            .filter(|block| presentation.declared_ui.contains(&block.kind()))
        {
            notes.push(block.render());
        }
        if let Some(rules) = &resource.sealed.rules_block
            && !presentation.data.is_null()
        {
            notes.push(rules.clone());
        }
        if !notes.is_empty() {
            contents.push(ResourceContents::text(notes.join("\n\n"), uri));
        }
        let mut result = ReadResourceResult::new(contents).with_cache_scope(CacheScope::Private);
        match facts.cache {
            Some(CacheHint::Immutable) => result = result.with_ttl_ms(IMMUTABLE_TTL_MS),
            Some(CacheHint::Volatile) => result = result.with_ttl_ms(0),
            None => {}
        }
        Ok(result)
    }

    async fn run_resource(
        &self,
        resource: &CompiledResource,
        values: Vec<(String, String)>,
        context: CallContext,
    ) -> Result<Presentation, ToolError> {
        let facts = &resource.facts;
        if !self.may_read(ResourceInfo(facts), &context) {
            return Err(
                ToolError::forbidden(format!("You may not read `{}`.", facts.key))
                    .with_recovery("Read another resource, or ask the operator for access."),
            );
        }
        let args = typed_arguments(values, &facts.input_schema);
        let ready = catch_panic("reading the arguments", || {
            resource
                .handler
                .read(ArgReader::new(args, &resource.layout, facts.key.as_str()))
        })??;
        Running::new(ready, context).await
    }

    /// Runs `prompts/get` (see the [module docs](self)).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Result<GetPromptResult, ErrorData> {
        let content = &self.inner.content;
        let Some(prompt) = content
            .by_prompt_name
            .get(name)
            .map(|&index| &content.prompts[index])
        else {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt: {name}"),
                None,
            ));
        };
        match self.run_prompt(prompt, arguments, context).await {
            Ok(messages) => {
                let mut result = GetPromptResult::new(messages.messages);
                if let Some(description) = messages.description {
                    result = result.with_description(description);
                }
                Ok(result)
            }
            Err(error) => {
                tracing::debug!(prompt = %prompt.facts.key, code = error.code(), "prompt failed");
                Err(self.protocol_error(&prompt.sealed, error, false))
            }
        }
    }

    async fn run_prompt(
        &self,
        prompt: &CompiledPrompt,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Result<PromptMessages, ToolError> {
        let facts = &prompt.facts;
        if !self.may_get(PromptInfo(facts), &context) {
            return Err(
                ToolError::forbidden(format!("You may not use `{}`.", facts.name))
                    .with_recovery("Use another prompt, or ask the operator for access."),
            );
        }
        // Prompt arguments are strings on the wire; anything else is taken as sent.
        let (text, other): (Vec<_>, Vec<_>) = arguments
            .unwrap_or_default()
            .into_iter()
            .partition(|(_, value)| value.is_string());
        let mut args: Map<String, Value> = typed_arguments(
            text.into_iter().map(|(name, value)| match value {
                Value::String(text) => (name, text),
                _ => unreachable!("partitioned on strings"),
            }),
            &facts.input_schema,
        );
        args.extend(other);
        let ready = catch_panic("reading the arguments", || {
            (prompt.handler)(ArgReader::new(args, &prompt.layout, &facts.name))
        })??;
        let cancellation = context.cancellation.clone();
        let future = catch_panic("the prompt", || ready(context))?;
        tokio::select! {
            outcome = crate::pipeline::CatchPanic::new(future, "the prompt") => outcome,
            () = cancellation.cancelled() => Err(ToolError::new(codes::CANCELLED, "The request was cancelled.")),
        }
    }

    /// Runs `completion/complete`: the completion function of a prompt's argument or a
    /// resource template's variable, for a caller who may see it.
    pub async fn complete(
        &self,
        reference: &Reference,
        argument: &ArgumentInfo,
        resolved: HashMap<String, String>,
        context: CallContext,
    ) -> Result<CompleteResult, ErrorData> {
        let content = &self.inner.content;
        let (complete, sealed) = match reference {
            Reference::Prompt(prompt) => {
                let Some(prompt) = content
                    .by_prompt_name
                    .get(&prompt.name)
                    .map(|&index| &content.prompts[index])
                    .filter(|prompt| self.may_get(PromptInfo(&prompt.facts), &context))
                else {
                    return Err(ErrorData::invalid_params(
                        format!("unknown prompt: {}", prompt.name),
                        None,
                    ));
                };
                (prompt.completions.get(&argument.name), &prompt.sealed)
            }
            Reference::Resource(reference) => {
                let Some(resource) = content
                    .resources
                    .iter()
                    .find(|resource| resource.facts.uri == reference.uri)
                    .filter(|resource| self.may_read(ResourceInfo(&resource.facts), &context))
                else {
                    return Err(ErrorData::resource_not_found(
                        format!("unknown resource template: {}", reference.uri),
                        None,
                    ));
                };
                (resource.completions.get(&argument.name), &resource.sealed)
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "unknown completion reference",
                    None,
                ));
            }
        };
        // An argument without a completion function has no suggestions.
        let Some(complete) = complete else {
            return Ok(CompleteResult::new(CompletionInfo::default()));
        };
        let request = CompletionRequest {
            argument: argument.name.clone(),
            value: argument.value.clone(),
            resolved,
        };
        let future = catch_panic("the completion", || complete(context, request))
            .map_err(|error| self.protocol_error(sealed, error, false))?;
        let mut values = crate::pipeline::CatchPanic::new(future, "the completion")
            .await
            .map_err(|error| self.protocol_error(sealed, error, false))?;
        let total = values.len();
        values.truncate(CompletionInfo::MAX_VALUES);
        let info = CompletionInfo::with_pagination(
            values,
            Some(u32::try_from(total).unwrap_or(u32::MAX)),
            total > CompletionInfo::MAX_VALUES,
        )
        .unwrap_or_default();
        Ok(CompleteResult::new(info))
    }

    /// A failed read, prompt or completion as a JSON-RPC error: the message the agent would
    /// read in a tool's error, and the error body as `data` (its `errorId` logged with the
    /// cause of an internal error).
    fn protocol_error(&self, sealed: &SealedParts, error: ToolError, resource: bool) -> ErrorData {
        let code = error.code().to_owned();
        let mut body = seal_error(&self.inner.names, sealed, error)
            .result
            .structured_content
            .and_then(|mut envelope| envelope.get_mut("error").map(Value::take))
            .unwrap_or(Value::Null);
        let message = body
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("The request failed.")
            .to_owned();
        if let Some(body) = body.as_object_mut() {
            body.retain(|_, value| !value.is_null());
        }
        let code = match code.as_str() {
            codes::VALIDATION_ERROR => ErrorCode::INVALID_PARAMS,
            code if resource && code.ends_with("NOT_FOUND") => ErrorCode::RESOURCE_NOT_FOUND,
            code if code.ends_with("NOT_FOUND") => ErrorCode::INVALID_PARAMS,
            codes::INTERNAL_ERROR | codes::TIMEOUT | codes::CANCELLED => ErrorCode::INTERNAL_ERROR,
            _ => ErrorCode::INVALID_REQUEST,
        };
        ErrorData::new(code, message, Some(body))
    }
}
