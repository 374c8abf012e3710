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
use std::pin::Pin;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    ArgumentInfo, CompleteResult, CompletionInfo, JsonObject, Prompt as PromptDefinition,
    Reference, Resource as ResourceDefinition, ResourceTemplate,
};
use serde_json::{Map, Value};

use crate::action::ActionFacts;
use crate::args::ArgReader;
use crate::catalog::{CompiledPrompt, CompiledResource, Definition};
use crate::complete::CompletionRequest;
use crate::context::CallContext;
use crate::envelope::{Sealed, SealedParts, seal_error};
use crate::error::ToolError;
use crate::middleware::Middleware;
use crate::observe::{PROMPTS_GET, RESOURCES_READ};
use crate::pipeline::report::Report;
use crate::pipeline::{CatchPanic, Running, Target, catch_panic};
use crate::present::Presentation;
pub use crate::prompt::PromptInfo;
use crate::prompt::{PromptMessages, ReadyPrompt};
pub use crate::resource::ResourceInfo;
use crate::resource::template::typed_arguments;
use crate::server::Server;
use crate::spec::ReadyCall;

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

pub use crate::error::is_not_found;

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

    /// Reads `uri` along the request path: its presented contents, or its failure sealed;
    /// `None` when no resource matches the URI.
    pub(crate) async fn read<'a>(
        &'a self,
        uri: &'a str,
        context: CallContext,
    ) -> Option<Result<Read<'a>, Box<Sealed>>> {
        // A server built without resources or prompts resolves nothing.
        (self.content_paths()?.read)(self, uri, context).await
    }

    /// Its [`ContentPaths`], when it was built with resources or prompts.
    fn content_paths(&self) -> Option<&'static ContentPaths> {
        let crate::catalog::ContentHook(hook) = self.inner.content_paths?;
        hook.downcast_ref()
    }

    async fn read_resolved<'a>(
        &'a self,
        uri: &'a str,
        context: CallContext,
    ) -> Option<Result<Read<'a>, Box<Sealed>>> {
        let inner = &*self.inner;
        // 1. Resolve.
        let (resource, values) = inner.content.resolve(uri)?;
        let facts = &resource.facts;
        let args = typed_arguments(values, &facts.input_schema);
        let report = Report::start_read(inner, RESOURCES_READ, &resource.action, &context, &args);
        report.span.record("mcp.resource.uri", uri);
        // 2–9; a failure is sealed, contents are shaped by the transport.
        let ended = self
            .serve_target(resource, report, args, context, |outcome| {
                outcome.map_err(|error| Box::new(seal_error(&inner.names, &resource.sealed, error)))
            })
            .await;
        if let Err(sealed) = &ended {
            tracing::debug!(resource = %facts.key, code = sealed.outcome.label(), "resource read failed");
        }
        Some(ended.map(|presentation| Read {
            resource,
            presentation,
        }))
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

    /// The scopes the caller of `context` lacks to read `uri`, when the access policy refuses
    /// it for that reason (empty when it may, for another reason, or no resource matches).
    /// Only HTTP's step-up challenge asks, before it reads the body.
    #[cfg(feature = "http")]
    pub(crate) fn read_scopes_missing(&self, uri: &str, context: &CallContext) -> Vec<String> {
        match self.inner.content.resolve(uri) {
            Some((resource, _)) if !self.may_read(ResourceInfo(&resource.facts), context) => self
                .scopes_lacking(context, |policy| {
                    policy.required_resource_scopes(ResourceInfo(&resource.facts))
                }),
            _ => Vec::new(),
        }
    }

    /// The scopes the caller of `context` lacks to get the prompt `name`, as
    /// [`read_scopes_missing`](Self::read_scopes_missing) for a resource.
    #[cfg(feature = "http")]
    pub(crate) fn prompt_scopes_missing(&self, name: &str, context: &CallContext) -> Vec<String> {
        let content = &self.inner.content;
        match content.by_prompt_name.get(name) {
            Some(&index) if !self.may_get(PromptInfo(&content.prompts[index].facts), context) => {
                self.scopes_lacking(context, |policy| {
                    policy.required_prompt_scopes(PromptInfo(&content.prompts[index].facts))
                })
            }
            _ => Vec::new(),
        }
    }

    /// Gets the prompt `name` along the request path: its messages, or its failure sealed;
    /// `None` when no prompt has this name.
    pub(crate) async fn prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Option<Result<PromptMessages, Box<Sealed>>> {
        // A server built without resources or prompts has no prompt of any name.
        (self.content_paths()?.prompt)(self, name, arguments, context).await
    }

    async fn prompt_resolved(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Option<Result<PromptMessages, Box<Sealed>>> {
        let inner = &*self.inner;
        let content = &inner.content;
        // 1. Resolve.
        let prompt = &content.prompts[*content.by_prompt_name.get(name)?];
        let args = prompt_arguments(arguments, &prompt.facts.input_schema);
        let report = Report::start_read(inner, PROMPTS_GET, &prompt.action, &context, &args);
        // 2–9.
        let ended = self
            .serve_target(prompt, report, args, context, |outcome| {
                outcome.map_err(|error| Box::new(seal_error(&inner.names, &prompt.sealed, error)))
            })
            .await;
        if let Err(sealed) = &ended {
            tracing::debug!(prompt = %prompt.facts.key, code = sealed.outcome.label(), "prompt failed");
        }
        Some(ended)
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
            .map_err(|error| self.protocol_error(sealed, error))?;
        let mut values = CatchPanic::new(future, "the completion")
            .await
            .map_err(|error| self.protocol_error(sealed, error))?;
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

    /// A failed completion as a JSON-RPC error, as a failed read or prompt is
    /// (`envelope::content_error`).
    fn protocol_error(&self, sealed: &SealedParts, error: ToolError) -> ErrorData {
        crate::envelope::content_error(seal_error(&self.inner.names, sealed, error), None)
    }
}

/// A resource read: what its handler returned, presented, for the transport to shape into
/// contents.
pub(crate) struct Read<'a> {
    pub(crate) resource: &'a CompiledResource,
    pub(crate) presentation: Presentation,
}

/// A resource read: access by the policy's `allows_resource`, the server's rate limit and
/// middleware, a handler presented as a query tool's.
impl Target for CompiledResource {
    type Ready = ReadyCall;
    type Output = Presentation;
    type Held = ();

    fn facts(&self) -> &ActionFacts {
        &self.action
    }

    fn name(&self) -> &str {
        RESOURCES_READ
    }

    fn sealed(&self) -> &SealedParts {
        &self.sealed
    }

    fn check_access(&self, server: &Server, context: &CallContext) -> Result<(), ToolError> {
        let resource = ResourceInfo(&self.facts);
        if server.may_read(resource, context) {
            return Ok(());
        }
        let missing =
            server.scopes_lacking(context, |policy| policy.required_resource_scopes(resource));
        if !missing.is_empty() {
            return Err(crate::pipeline::insufficient_scope(
                format!("read `{}`", self.facts.key),
                &missing,
            ));
        }
        Err(
            ToolError::forbidden(format!("You may not read `{}`.", self.facts.key))
                .with_recovery("Read another resource, or ask the operator for access."),
        )
    }

    fn read(&self, args: JsonObject) -> Result<ReadyCall, ToolError> {
        self.handler
            .read(ArgReader::new(args, &self.layout, self.facts.key.as_str()))
    }

    fn middleware(&self) -> &[Arc<dyn Middleware>] {
        &self.middleware
    }

    fn run(
        &self,
        ready: ReadyCall,
        context: CallContext,
    ) -> impl Future<Output = Result<Presentation, ToolError>> + Send {
        Running::new(ready, context)
    }
}

/// A prompt: access by the policy's `allows_prompt`, the server's rate limit and middleware,
/// then its messages.
impl Target for CompiledPrompt {
    type Ready = ReadyPrompt;
    type Output = PromptMessages;
    type Held = ();

    fn facts(&self) -> &ActionFacts {
        &self.action
    }

    fn name(&self) -> &str {
        PROMPTS_GET
    }

    fn sealed(&self) -> &SealedParts {
        &self.sealed
    }

    fn check_access(&self, server: &Server, context: &CallContext) -> Result<(), ToolError> {
        let prompt = PromptInfo(&self.facts);
        if server.may_get(prompt, context) {
            return Ok(());
        }
        let missing =
            server.scopes_lacking(context, |policy| policy.required_prompt_scopes(prompt));
        if !missing.is_empty() {
            return Err(crate::pipeline::insufficient_scope(
                format!("use `{}`", self.facts.name),
                &missing,
            ));
        }
        Err(
            ToolError::forbidden(format!("You may not use `{}`.", self.facts.name))
                .with_recovery("Use another prompt, or ask the operator for access."),
        )
    }

    fn read(&self, args: JsonObject) -> Result<ReadyPrompt, ToolError> {
        (self.handler)(ArgReader::new(args, &self.layout, &self.facts.name))
    }

    fn middleware(&self) -> &[Arc<dyn Middleware>] {
        &self.middleware
    }

    fn run(
        &self,
        ready: ReadyPrompt,
        context: CallContext,
    ) -> impl Future<Output = Result<PromptMessages, ToolError>> + Send {
        Running::start(context, ready)
    }
}

/// A future boxed and type-erased.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The request paths of resources and prompts, which only a server with some needs: reached
/// through the hook that [`ServerBuilder::resource_spec`](crate::ServerBuilder::resource_spec)
/// and [`prompt_spec`](crate::ServerBuilder::prompt_spec) give the server, so that a connector
/// with neither does not link them.
struct ContentPaths {
    read: ReadOf,
    prompt: PromptOf,
}

/// [`Server::read`], erased.
type ReadOf = for<'a> fn(
    &'a Server,
    &'a str,
    CallContext,
) -> Boxed<'a, Option<Result<Read<'a>, Box<Sealed>>>>;

/// [`Server::prompt`], erased.
type PromptOf = for<'a> fn(
    &'a Server,
    &'a str,
    Option<JsonObject>,
    CallContext,
) -> Boxed<'a, Option<Result<PromptMessages, Box<Sealed>>>>;

/// The one [`ContentPaths`].
static PATHS: ContentPaths = ContentPaths {
    read: |server, uri, context| Box::pin(server.read_resolved(uri, context)),
    prompt: |server, name, arguments, context| {
        Box::pin(server.prompt_resolved(name, arguments, context))
    },
};

/// [`PATHS`], opaque, for the builder and the server, which this module imports.
pub(crate) fn hook() -> crate::catalog::ContentHook {
    crate::catalog::ContentHook(&PATHS)
}
