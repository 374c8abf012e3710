//! Resources, prompts and completions of a built server: what [`ServerBuilder`] compiled of
//! them (definitions, listings, URI templates, argument layouts), and their request paths.
//!
//! Each request runs as a query tool's call does: **resolve** (a URI by exact match, then the
//! templates in order; a prompt by name), **access** (the policy's
//! [`allows_resource`](crate::AccessPolicy::allows_resource) or
//! [`allows_prompt`](crate::AccessPolicy::allows_prompt), before anything is read), the
//! server's **rate limit**, **arguments** (template variables or prompt arguments, strings on
//! the wire, read as the declared types and validated), the server's **middleware** (which sees
//! [`Surface::Resource`](crate::Surface::Resource) or [`Surface::Prompt`](crate::Surface::Prompt)),
//! **handler** (within the server's default timeout, panics caught, stopped on cancellation),
//! **present** (the same presenter path as a tool: only the listed fields leave, with the
//! rules), then **report** (span and metrics; an audit record only under
//! [`audit_reads`](crate::ServerBuilder::audit_reads)). A failure is a
//! JSON-RPC error whose `data` is the error body a tool would send (`code`, `message`,
//! `recovery`, `errorId`…). A read of something that does not exist is `-32002` (`-32602` on
//! 2026-07-28, SEP-2164) with the URI in `data.uri`, whether no resource matches the URI or the
//! handler says so with a not-found code ([`is_not_found`]: `NOT_FOUND`, `InvoiceNotFound`); a
//! prompt's or completion's not-found error is `-32602`.
//!
//! [`ServerBuilder`]: crate::ServerBuilder

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    ArgumentInfo, CacheScope, CompleteResult, CompletionInfo, ErrorCode, GetPromptResult,
    JsonObject, Prompt as PromptDefinition, ReadResourceResult, Reference,
    Resource as ResourceDefinition, ResourceContents, ResourceTemplate,
};
use serde_json::{Map, Value};
use tracing::Instrument as _;

use crate::action::CacheHint;
use crate::action::{ActionFacts, ActionInfo};
use crate::args::ArgReader;
use crate::catalog::{CompiledPrompt, CompiledResource, Definition};
use crate::complete::CompletionRequest;
use crate::context::CallContext;
use crate::envelope::Outcome;
use crate::envelope::{SealedParts, seal_error};
use crate::error::{ToolError, codes};
use crate::middleware::Middleware;
use crate::pipeline::report::Report;
use crate::pipeline::{CatchPanic, Running, catch_panic, timed_out};
use crate::present::Presentation;
pub use crate::prompt::PromptInfo;
use crate::prompt::PromptMessages;
pub use crate::resource::ResourceInfo;
use crate::resource::template::typed_arguments;
use crate::server::Server;

/// The server's middleware, in order (a panic in one caught), then `run`, within the
/// timeout (which counts from the first middleware, as a tool's does).
async fn around<T, F, Fut>(
    action: &ActionFacts,
    middleware: &[Arc<dyn Middleware>],
    mut context: CallContext,
    run: F,
) -> Result<T, ToolError>
where
    F: FnOnce(CallContext) -> Fut,
    Fut: Future<Output = Result<T, ToolError>>,
{
    let rest = async move {
        if !middleware.is_empty() {
            let chain = crate::middleware::run_chain(middleware, &mut context, ActionInfo(action));
            CatchPanic::new(Box::pin(chain), "a middleware").await?;
        }
        run(context).await
    };
    match action.timeout {
        None => rest.await,
        Some(timeout) => tokio::time::timeout(timeout, rest)
            .await
            .unwrap_or_else(|_| Err(timed_out(timeout))),
    }
}

/// Prompt arguments are strings on the wire, read as the declared types; anything else is
/// taken as sent.
fn prompt_arguments(arguments: Option<JsonObject>, schema: &JsonObject) -> JsonObject {
    let (text, other): (Vec<_>, Vec<_>) = arguments
        .unwrap_or_default()
        .into_iter()
        .partition(|(_, value)| value.is_string());
    let mut args: Map<String, Value> = typed_arguments(
        text.into_iter().map(|(name, value)| match value {
            Value::String(text) => (name, text),
            _ => unreachable!("partitioned on strings"),
        }),
        schema,
    );
    args.extend(other);
    args
}

/// How a failed read or prompt is reported: its error code and error id.
fn failed(error: &ErrorData) -> Outcome {
    let field = |name: &str| {
        error
            .data
            .as_ref()
            .and_then(|data| data.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Outcome::Failed {
        code: field("code").unwrap_or_else(|| codes::INTERNAL_ERROR.to_owned()),
        error_id: field("errorId"),
    }
}

/// Whether an error code says that what was asked for does not exist: the framework's
/// `NOT_FOUND` (and codes ending in it, such as `TOOL_NOT_FOUND`) or a domain code ending in
/// `NotFound`, such as `InvoiceNotFound`.
pub fn is_not_found(code: &str) -> bool {
    code.ends_with("NOT_FOUND") || code.ends_with("NotFound")
}

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

    /// The definitions (fixed and templated) of the resources the caller of `context` may read:
    /// the one access filter both resource listings share.
    fn readable_definitions<'a>(
        &'a self,
        context: &'a CallContext,
    ) -> impl Iterator<Item = &'a Definition> + 'a {
        self.inner
            .content
            .resources
            .iter()
            .filter(move |resource| self.may_read(ResourceInfo(&resource.facts), context))
            .map(|resource| &resource.definition)
    }

    /// The fixed resources the caller of `context` may read, as `resources/list` shows them.
    pub fn visible_resources(&self, context: &CallContext) -> Vec<ResourceDefinition> {
        self.readable_definitions(context)
            .filter_map(|definition| match definition {
                Definition::Fixed(definition) => Some(definition.clone()),
                Definition::Template(_) => None,
            })
            .collect()
    }

    /// The resource templates the caller of `context` may read, as
    /// `resources/templates/list` shows them.
    pub fn visible_resource_templates(&self, context: &CallContext) -> Vec<ResourceTemplate> {
        self.readable_definitions(context)
            .filter_map(|definition| match definition {
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
        let args = typed_arguments(values, &facts.input_schema);
        let report = Report::start_read(
            &self.inner,
            "resources/read",
            &resource.action,
            &context,
            &args,
        );
        report.span.record("mcp.resource.uri", uri);
        let run = self.run_resource(resource, args, context);
        let outcome = if report.span.is_disabled() {
            run.await
        } else {
            run.instrument(report.span.clone()).await
        };
        let outcome = match outcome {
            Ok(presentation) => report
                .audit_read(&self.inner, &resource.action)
                .await
                .map(|()| presentation),
            Err(error) => Err(error),
        };
        let presentation = match outcome {
            Ok(presentation) => {
                report.finish(
                    &self.inner,
                    "resources/read",
                    Some(facts.key.as_str()),
                    &Outcome::Ok { cut: false },
                );
                presentation
            }
            Err(error) => {
                tracing::debug!(resource = %facts.key, code = error.code(), "resource read failed");
                let error = self.protocol_error(&resource.sealed, error, Some(uri));
                report.finish(
                    &self.inner,
                    "resources/read",
                    Some(facts.key.as_str()),
                    &failed(&error),
                );
                return Err(error);
            }
        };
        let mut contents = Vec::with_capacity(2);
        match (&presentation.data, resource.raw_text || resource.binary) {
            // A `Blob` serializes as its base64 text: that is the `blob` as it is.
            (Value::String(blob), true) if resource.binary => contents
                .push(ResourceContents::blob(blob.clone(), uri).with_mime_type(&facts.mime_type)),
            (Value::String(text), true) => contents
                .push(ResourceContents::text(text.clone(), uri).with_mime_type(&facts.mime_type)),
            _ => {
                let data_text = presentation
                    .data_text
                    .clone()
                    .unwrap_or_else(|| presentation.data.to_string());
                contents
                    .push(ResourceContents::text(data_text, uri).with_mime_type(&facts.mime_type));
            }
        }
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

    /// The key of the resource `uri` names, when the caller of `context` may read it: what a
    /// subscription to it (`resources/subscribe`) follows.
    pub(crate) fn subscribable(
        &self,
        uri: &str,
        context: &CallContext,
    ) -> Result<crate::key::ToolKey, ErrorData> {
        let Some((resource, _)) = self.inner.content.resolve(uri) else {
            return Err(ErrorData::resource_not_found(
                format!("unknown resource: {uri}"),
                Some(serde_json::json!({ "uri": uri })),
            ));
        };
        if !self.may_read(ResourceInfo(&resource.facts), context) {
            return Err(ErrorData::invalid_request(
                format!("You may not read `{}`.", resource.facts.key),
                None,
            ));
        }
        Ok(resource.facts.key.clone())
    }

    /// A read's path, as a query tool's: access, rate limits, arguments, then the server's
    /// middleware and the handler within the timeout.
    async fn run_resource(
        &self,
        resource: &CompiledResource,
        args: JsonObject,
        context: CallContext,
    ) -> Result<Presentation, ToolError> {
        let facts = &resource.facts;
        if !self.may_read(ResourceInfo(facts), &context) {
            return Err(
                ToolError::forbidden(format!("You may not read `{}`.", facts.key))
                    .with_recovery("Read another resource, or ask the operator for access."),
            );
        }
        self.check_rates(None, &context)?;
        let ready = catch_panic("reading the arguments", || {
            resource
                .handler
                .read(ArgReader::new(args, &resource.layout, facts.key.as_str()))
        })??;
        around(&resource.action, &resource.middleware, context, |context| {
            Running::new(ready, context)
        })
        .await
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
        let args = prompt_arguments(arguments, &prompt.facts.input_schema);
        let report =
            Report::start_read(&self.inner, "prompts/get", &prompt.action, &context, &args);
        let run = self.run_prompt(prompt, args, context);
        let outcome = if report.span.is_disabled() {
            run.await
        } else {
            run.instrument(report.span.clone()).await
        };
        let outcome = match outcome {
            Ok(messages) => report
                .audit_read(&self.inner, &prompt.action)
                .await
                .map(|()| messages),
            Err(error) => Err(error),
        };
        let key = prompt.facts.key.as_str();
        match outcome {
            Ok(messages) => {
                report.finish(
                    &self.inner,
                    "prompts/get",
                    Some(key),
                    &Outcome::Ok { cut: false },
                );
                let mut result = GetPromptResult::new(messages.messages);
                if let Some(description) = messages.description {
                    result = result.with_description(description);
                }
                Ok(result)
            }
            Err(error) => {
                tracing::debug!(prompt = %prompt.facts.key, code = error.code(), "prompt failed");
                let error = self.protocol_error(&prompt.sealed, error, None);
                report.finish(&self.inner, "prompts/get", Some(key), &failed(&error));
                Err(error)
            }
        }
    }

    async fn run_prompt(
        &self,
        prompt: &CompiledPrompt,
        args: JsonObject,
        context: CallContext,
    ) -> Result<PromptMessages, ToolError> {
        let facts = &prompt.facts;
        if !self.may_get(PromptInfo(facts), &context) {
            return Err(
                ToolError::forbidden(format!("You may not use `{}`.", facts.name))
                    .with_recovery("Use another prompt, or ask the operator for access."),
            );
        }
        self.check_rates(None, &context)?;
        let ready = catch_panic("reading the arguments", || {
            (prompt.handler)(ArgReader::new(args, &prompt.layout, &facts.name))
        })??;
        around(&prompt.action, &prompt.middleware, context, |context| async move {
            let cancellation = context.cancellation.clone();
            let future = catch_panic("the prompt", || ready(context))?;
            tokio::select! {
                outcome = CatchPanic::new(future, "the prompt") => outcome,
                () = cancellation.cancelled() => Err(ToolError::new(codes::CANCELLED, "The request was cancelled.")),
            }
        })
        .await
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
            .map_err(|error| self.protocol_error(sealed, error, None))?;
        let mut values = CatchPanic::new(future, "the completion")
            .await
            .map_err(|error| self.protocol_error(sealed, error, None))?;
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

    /// A failed read (of `uri`), prompt or completion as a JSON-RPC error: the message the
    /// agent would read in a tool's error, and the error body as `data` (its `errorId` logged
    /// with the cause of an internal error). A read of something that does not exist is a
    /// resource-not-found error carrying the URI in `data.uri`, as an unknown URI is.
    fn protocol_error(
        &self,
        sealed: &SealedParts,
        error: ToolError,
        uri: Option<&str>,
    ) -> ErrorData {
        let code = error.code().to_owned();
        let (message, mut body) = seal_error(&self.inner.names, sealed, error)
            .into_error()
            .unwrap_or_else(|| ("The request failed.".to_owned(), Value::Null));
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
            (codes::INTERNAL_ERROR | codes::TIMEOUT | codes::CANCELLED, _) => {
                ErrorCode::INTERNAL_ERROR
            }
            _ => ErrorCode::INVALID_REQUEST,
        };
        ErrorData::new(code, message, Some(body))
    }
}
