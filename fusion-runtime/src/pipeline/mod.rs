//! The request path of `tools/call` (SPEC T4, E2, G1–G3, R5–R8), in the order it runs:
//!
//! 1. **resolve** the action from the tool's name (and the `action` discriminator of a grouped
//!    tool): one hash lookup;
//! 2. **access**: the access policy, then the rate limits of the server and the action; a
//!    denied or limited call stops here, before its arguments are read;
//! 3. **arguments**: read and validated against the input schema; a `VALIDATION_ERROR` names
//!    every issue, and nothing after this runs;
//! 4. **middleware**: the server's, then the router's, then the action's own;
//! 5. **guards**: the concurrency limit, then the FIFO turn of a serialized action, keyed on a
//!    validated argument, then a slot of the server as a whole (every target takes one);
//! 6. **handler**: context parameters, then the author's function, stopped if the request is
//!    cancelled or its timeout (which counts from stage 4) runs out, its panics caught;
//! 7. **present**: the result through its presenter;
//! 8. **seal**: the envelope and text blocks, fitted to the egress budget;
//! 9. **report**: for a successful write, the audit record (unless the handler kept it in its
//!    own transaction through an [`AuditEntry`](crate::audit::AuditEntry); a lost required
//!    record turns success into `AUDIT_FAILED`), then span and metrics.
//!
//! Unset stages cost nothing: an action without middleware or guards goes from its arguments
//! straight to its handler, and a span no subscriber wants is never entered.
//!
//! The path is written once, over a target: a built-in tool's action (here), a resource read
//! and a prompt (`content.rs`) and a proxied tool (`pipeline/proxied.rs`) supply only what
//! differs (who may call them, how their arguments are read, their guards, what runs).
//! `Server::serve_target` runs stages 2 to 9 for all of them, its ending (audit, span,
//! metrics) included. What is sealed stays typed until the transport writes it
//! (`serve/reply.rs`).

#[cfg(feature = "gateway")]
mod proxied;
pub(crate) mod report;
mod running;
mod target;

pub(crate) use running::{CatchPanic, Running, catch_panic};
pub(crate) use target::Target;

use rmcp::model::JsonObject;
use serde_json::{Value, json};

use std::sync::Arc;

use crate::action::{ActionFacts, ActionInfo, Verb};
use crate::args::ArgReader;
use crate::context::CallContext;
use crate::envelope::{Sealed, SealedParts, seal_error, seal_success};
use crate::error::{ToolError, codes};
use crate::middleware::Middleware;
use crate::present::Presentation;
use crate::server::{
    CompiledAction, Dispatch, ExposedTool, Server, ServerInner, ToolResult, UnknownTool,
};
use crate::spec::ReadyCall;
use report::Report;

/// The refusal of a call, read or get whose token lacks `missing`, naming them (step-up).
pub(crate) fn insufficient_scope(what: String, missing: &[String]) -> ToolError {
    let scopes = missing.join(" ");
    ToolError::forbidden(format!(
        "You may not {what}: your token lacks the scope `{scopes}`."
    ))
    .with_recovery(format!(
        "Ask the authorization server for a token with scope `{scopes}` (insufficient_scope)."
    ))
}

impl Server {
    /// Runs `tools/call` along the request path (see the [module docs](self)).
    ///
    /// Returns `Err` only when no tool has this name (a protocol error); every failure of the
    /// tool itself is a result with `isError: true`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Result<ToolResult, UnknownTool> {
        self.call_sealed(name, arguments, context)
            .await
            .map(ToolResult::new)
    }

    /// [`Server::call_tool`], with what sealing knows besides the result (the tester shows
    /// what was dropped).
    pub(crate) async fn call_sealed(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        mut context: CallContext,
    ) -> Result<Sealed, UnknownTool> {
        let inner = &*self.inner;
        // 1. Resolve.
        let Some(tool) = inner.by_name.get(name).map(|&index| &inner.tools[index]) else {
            // Not built in: a tool of a mounted upstream, maybe (SPEC R7).
            #[cfg(feature = "gateway")]
            // Boxed: the proxied path's future is large, and inline it would make every call's
            // future as large, copied whole each time a request task is spawned.
            if let Some(gateway) = &inner.gateway
                && let Some(sealed) =
                    Box::pin(self.call_proxied(gateway, name, arguments, context)).await
            {
                return Ok(sealed);
            }
            return Err(UnknownTool(name.to_owned()));
        };
        let mut args = arguments.unwrap_or_default();
        let action = match resolve(tool, &mut args) {
            Ok(index) => &inner.actions[index],
            Err(unresolved) => return Ok(self.refuse_unresolved(tool, unresolved, &context)),
        };
        let report = Report::start(inner, action.tool(), Some(action), &context, Some(&args));
        if action.audit_entry
            && let Some(entry) = report.entry()
        {
            context.extensions_mut().insert(entry.clone());
        }
        // Read now, before the handler takes the arguments; used only where a cut can happen.
        let offset = action
            .pages_by_offset
            .then(|| args.get("offset").and_then(Value::as_u64).unwrap_or(0));
        // 2–9.
        let sealed = self
            .serve_target(action, report, args, context, |outcome| match outcome {
                Ok(presentation) => seal_success(
                    &inner.names,
                    &action.facts,
                    &action.sealed,
                    presentation,
                    offset,
                ),
                Err(error) => seal_error(&inner.names, &action.sealed, error),
            })
            .await;
        Ok(sealed)
    }

    /// The rate limits of the server and, if any, of what is called.
    pub(crate) fn check_rates(
        &self,
        own: Option<&crate::guard::RateLimiter>,
        context: &CallContext,
    ) -> Result<(), ToolError> {
        let limiters = [self.inner.rate_limiter.as_ref(), own];
        if limiters.iter().all(Option::is_none) {
            return Ok(());
        }
        let caller = crate::tenancy::caller_key(context);
        for limiter in limiters.into_iter().flatten() {
            if let Err(wait) = limiter.admit(&caller) {
                let limit = limiter.limit();
                return Err(ToolError::new(
                    codes::RATE_LIMITED,
                    format!(
                        "Too many calls: at most {} per {} ms.",
                        limit.max,
                        limit.per.as_millis()
                    ),
                )
                .with_recovery(
                    "Wait for the retry window, then call again with the same arguments.",
                )
                .with_retry_after(wait));
            }
        }
        Ok(())
    }

    /// Whether the access policy lets the caller of `context` call `action`; a denied call is
    /// `FORBIDDEN`, naming the action.
    pub(crate) fn check_access(
        &self,
        action: ActionInfo<'_>,
        context: &CallContext,
    ) -> Result<(), ToolError> {
        if self.allows(action, context)? {
            return Ok(());
        }
        let what = match action.exposure().action() {
            Some(grouped) => format!("`{}` with action `{grouped}`", action.exposed_tool()),
            None => format!("`{}`", action.exposed_tool()),
        };
        let needed = self.scopes_missing(action, context);
        if !needed.is_empty() {
            return Err(insufficient_scope(format!("call {what}"), &needed));
        }
        Err(ToolError::forbidden(format!("You may not call {what}."))
            .with_recovery("Use another tool, or ask the operator for access."))
    }

    /// The scopes the access policy says `action` needs that the caller's token lacks.
    pub(crate) fn scopes_missing(
        &self,
        action: ActionInfo<'_>,
        context: &CallContext,
    ) -> Vec<String> {
        self.scopes_lacking(context, |policy| policy.required_scopes(action))
    }

    /// The scopes `needed` reads from the access policy that the caller's token lacks (none
    /// without a policy, or when it panics).
    pub(crate) fn scopes_lacking(
        &self,
        context: &CallContext,
        needed: impl FnOnce(&dyn crate::AccessPolicy) -> Vec<String>,
    ) -> Vec<String> {
        let Some(policy) = &self.inner.access else {
            return Vec::new();
        };
        let Ok(needed) = catch_panic("the access policy", || needed(policy.as_ref())) else {
            return Vec::new();
        };
        needed
            .into_iter()
            .filter(|scope| {
                !context
                    .principal()
                    .is_some_and(|principal| principal.has_scope(scope))
            })
            .collect()
    }

    /// Whether the access policy (if any) lets the caller of `context` see and call `action`;
    /// a panicking policy refuses, with an `INTERNAL_ERROR` that logs the panic.
    fn allows(&self, action: ActionInfo<'_>, context: &CallContext) -> Result<bool, ToolError> {
        match &self.inner.access {
            None => Ok(true),
            Some(policy) => catch_panic("the access policy", || policy.allows(context, action)),
        }
    }

    /// Whether the caller of `context` may see the exposed tool `name` (a grouped tool is
    /// visible when any of its actions is).
    pub fn is_visible(&self, name: &str, context: &CallContext) -> bool {
        let Some(tool) = self.tool(name) else {
            return false;
        };
        tool.actions()
            .into_iter()
            .any(|action| self.may_call(action, context))
    }

    /// Whether the access policy lets the caller of `context` call `action`, for what it is
    /// shown (`tools/list`, the valid actions of an error): a panicking policy hides it.
    pub(crate) fn may_call(&self, action: ActionInfo<'_>, context: &CallContext) -> bool {
        match self.allows(action, context) {
            Ok(allowed) => allowed,
            Err(_) => {
                tracing::error!(
                    tool = action.exposed_tool(),
                    action = %action.key(),
                    "the access policy panicked: the action is hidden"
                );
                false
            }
        }
    }

    /// A grouped tool called without a valid action: no action's path runs, but the call is
    /// spanned and counted like any other. The error lists only the actions the caller may
    /// call; a caller who may call none is refused without hearing of any.
    #[cold]
    fn refuse_unresolved(
        &self,
        tool: &ExposedTool,
        unresolved: Unresolved,
        context: &CallContext,
    ) -> Sealed {
        let inner = &*self.inner;
        let report = Report::start(inner, &tool.name, None, context, None);
        let callable: Vec<&str> = match &tool.dispatch {
            Dispatch::Grouped { names, members, .. } => members
                .iter()
                .zip(names)
                .filter(|&(&index, _)| {
                    inner.access.is_none() || self.may_call(inner.actions[index].info(), context)
                })
                .map(|(_, name)| name.as_str())
                .collect(),
            Dispatch::Single(_) => Vec::new(),
        };
        let error = match unresolved {
            _ if callable.is_empty() => {
                ToolError::forbidden(format!("You may not call `{}`.", tool.name))
                    .with_recovery("Use another tool, or ask the operator for access.")
            }
            Unresolved::Unknown(action) => unknown_action(&tool.name, &action, &callable),
            Unresolved::Missing => missing_discriminator(&tool.name, &callable),
        };
        let parts = SealedParts::for_tool(&tool.name);
        let sealed: Sealed = seal_error(&inner.names, &parts, error);
        report.finish(inner, &tool.name, None, &sealed.outcome);
        sealed
    }

    /// Answers a call to `name` that failed before it could start (the transport's context
    /// factory panicked): the error sealed for the tool, reported like any refused call.
    pub(crate) fn refuse_call(
        &self,
        name: &str,
        error: ToolError,
    ) -> Result<ToolResult, UnknownTool> {
        let inner = &*self.inner;
        let tool = inner
            .by_name
            .get(name)
            .map(|&index| &inner.tools[index])
            .ok_or_else(|| UnknownTool(name.to_owned()))?;
        let context = self.new_context();
        let report = Report::start(inner, &tool.name, None, &context, None);
        let parts = SealedParts::for_tool(&tool.name);
        let sealed: Sealed = seal_error(&inner.names, &parts, error);
        report.finish(inner, &tool.name, None, &sealed.outcome);
        Ok(ToolResult::new(sealed))
    }

    /// The core path only (arguments, handler, presenter, envelope), without access,
    /// middleware, guards, audit, metrics or span: the yardstick that shows those stages cost
    /// nothing when unset. Flat tools only.
    #[cfg(feature = "bench-hooks")]
    #[doc(hidden)]
    pub async fn call_tool_core_only(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Result<ToolResult, UnknownTool> {
        let inner = &*self.inner;
        let unknown = || UnknownTool(name.to_owned());
        let tool = inner
            .by_name
            .get(name)
            .map(|&index| &inner.tools[index])
            .ok_or_else(unknown)?;
        let Dispatch::Single(index) = tool.dispatch else {
            return Err(unknown());
        };
        let action = &inner.actions[index];
        let args = arguments.unwrap_or_default();
        let outcome = match action
            .handler
            .read(ArgReader::new(args, &action.layout, action.tool()))
        {
            Ok(ready) => Running::new(ready, context).await,
            Err(error) => Err(error),
        };
        let sealed = match outcome {
            Ok(presentation) => seal_success(
                &inner.names,
                &action.facts,
                &action.sealed,
                presentation,
                None,
            ),
            Err(error) => seal_error(&inner.names, &action.sealed, error),
        };
        Ok(ToolResult::new(sealed))
    }
}

/// Why a grouped tool's call names none of its actions.
enum Unresolved {
    /// An `action` that the tool does not have.
    Unknown(String),
    /// No `action`, or one that is not a string.
    Missing,
}

/// The action a call names: the tool's own, or the one its `action` discriminator names
/// (removed from the arguments).
fn resolve(tool: &ExposedTool, args: &mut JsonObject) -> Result<usize, Unresolved> {
    match &tool.dispatch {
        Dispatch::Single(index) => Ok(*index),
        Dispatch::Grouped { actions, .. } => match args.remove("action") {
            Some(Value::String(action)) => match actions.get(&action) {
                Some(&index) => Ok(index),
                None => Err(Unresolved::Unknown(action)),
            },
            Some(_) | None => Err(Unresolved::Missing),
        },
    }
}

/// A built-in tool's action: its own access decision, rate limit, middleware and guards, and
/// a handler whose result its presenter shapes.
impl Target for CompiledAction {
    type Ready = ReadyCall;
    type Output = Presentation;
    /// Its concurrency slot, FIFO turn and shared lock (lent while it waits on a person, see
    /// [`waiting`](crate::waiting)).
    type Held = crate::waiting::Holding<crate::waiting::ToolGuards>;

    #[inline]
    fn facts(&self) -> &ActionFacts {
        &self.facts
    }

    #[inline]
    fn name(&self) -> &str {
        self.tool()
    }

    #[inline]
    fn sealed(&self) -> &SealedParts {
        &self.sealed
    }

    /// Reads are recorded only when the audit records reads.
    #[inline]
    fn records(&self, inner: &ServerInner) -> bool {
        self.facts.verb != Verb::Query || inner.audit.as_ref().is_some_and(|audit| audit.reads)
    }

    #[inline]
    fn check_access(&self, server: &Server, context: &CallContext) -> Result<(), ToolError> {
        server.check_access(self.info(), context)
    }

    #[inline]
    fn rate_limiter(&self) -> Option<&crate::guard::RateLimiter> {
        self.rate_limiter.as_ref()
    }

    #[inline]
    fn turn_key(&self, args: &JsonObject) -> Option<String> {
        self.serial.as_ref().and_then(|serial| serial.key_of(args))
    }

    #[inline]
    fn read(&self, args: JsonObject) -> Result<ReadyCall, ToolError> {
        self.handler
            .read(ArgReader::new(args, &self.layout, self.tool()))
    }

    #[inline]
    fn middleware(&self) -> &[Arc<dyn Middleware>] {
        &self.middleware
    }

    #[inline]
    fn bare(&self) -> bool {
        self.bare
    }

    async fn guards(
        &self,
        key: Option<String>,
        context: &mut CallContext,
    ) -> Result<Option<Self::Held>, ToolError> {
        crate::waiting::ToolGuards::enter(self, context, key)
            .await
            .map(Some)
    }

    fn run(
        &self,
        ready: ReadyCall,
        mut context: CallContext,
    ) -> impl std::future::Future<Output = Result<Presentation, ToolError>> + Send {
        if let Some(timeout) = self.ask_timeout {
            context.request.waiting.ask_timeout = Some(timeout);
        }
        // 6–7. Handler and presenter.
        Running::new(ready, context)
    }
}

/// A call stopped at its timeout: retryable, since the same call may be faster next time.
pub(crate) fn timed_out(timeout: std::time::Duration) -> ToolError {
    ToolError::new(
        codes::TIMEOUT,
        format!(
            "The call took longer than its {} ms limit and was stopped.",
            timeout.as_millis()
        ),
    )
    .with_recovery("Retry later, or ask for less (a narrower filter, a smaller limit).")
    .with_retryable(true)
}

fn unknown_action(tool: &str, action: &str, names: &[&str]) -> ToolError {
    ToolError::new(
        codes::UNKNOWN_ACTION,
        format!("`{tool}` has no action `{action}`."),
    )
    .with_recovery(format!(
        "Call `{tool}` again with `action` set to one of: {}.",
        names.join(", ")
    ))
    .with_details(json!({ "validActions": names }))
}

fn missing_discriminator(tool: &str, names: &[&str]) -> ToolError {
    ToolError::new(
        codes::MISSING_DISCRIMINATOR,
        format!("`{tool}` needs an `action` argument naming what to do."),
    )
    .with_recovery(format!(
        "Call `{tool}` again with `action` set to one of: {}.",
        names.join(", ")
    ))
    .with_details(json!({ "validActions": names }))
}
