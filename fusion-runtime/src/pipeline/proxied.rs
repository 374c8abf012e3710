//! The request path of a proxied call (SPEC R7): the stages of a built-in call that belong to
//! this server (access, rate limit, middleware, guard, timeout, audit, metrics, span), around a
//! forward to the upstream instead of arguments, handler and presenter. A proxied tool is one
//! more [`Target`] of the pipeline's one path. It lives with the pipeline, not the gateway, so
//! that the gateway never imports the pipeline (the server holds the gateway, and the pipeline
//! the server: the other way round would be a cycle).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};

use super::Target;
use super::report::Report;
use crate::action::ActionFacts;
use crate::context::CallContext;
use crate::envelope::{Sealed, SealedParts, seal_error};
use crate::error::ToolError;
use crate::gateway::call::{passed, send, timed_out};
use crate::gateway::{Gateway, ProxiedTool, UpstreamState};
use crate::middleware::Middleware;
use crate::server::{Server, ServerInner};

/// A call of a proxied tool: the gateway's middleware, then its upstream's concurrency limit
/// and timeout, around the forward.
struct Forward<'a> {
    gateway: &'a Gateway,
    tool: &'a ProxiedTool,
    upstream: &'a Arc<UpstreamState>,
}

impl Target for Forward<'_> {
    /// The arguments, forwarded as they came: the upstream reads them.
    type Ready = JsonObject;
    type Output = CallToolResult;
    type Held = crate::guard::Slot;

    fn facts(&self) -> &ActionFacts {
        &self.tool.facts
    }

    fn name(&self) -> &str {
        self.tool.name()
    }

    fn sealed(&self) -> &SealedParts {
        &self.tool.sealed
    }

    /// Every proxied call is a write for the audit trail: the gateway cannot know what the
    /// upstream changed.
    fn records(&self, _inner: &ServerInner) -> bool {
        true
    }

    fn check_access(&self, server: &Server, context: &CallContext) -> Result<(), ToolError> {
        // Before anything reaches the upstream. Proxied tools have no rate limit of their own:
        // the server's applies.
        server.check_access(self.tool.info(), context)
    }

    fn read(&self, args: JsonObject) -> Result<JsonObject, ToolError> {
        Ok(args)
    }

    fn middleware(&self) -> &[Arc<dyn Middleware>] {
        self.gateway.middleware()
    }

    fn bare(&self) -> bool {
        self.gateway.middleware().is_empty() && self.upstream.concurrency.is_none()
    }

    async fn guards(
        &self,
        _key: Option<String>,
        context: &mut CallContext,
    ) -> Result<Option<Self::Held>, ToolError> {
        match &self.upstream.concurrency {
            Some(guard) => Ok(Some(guard.enter(crate::tenancy::tenant_of(context)).await?)),
            None => Ok(None),
        }
    }

    fn run(
        &self,
        args: JsonObject,
        context: CallContext,
    ) -> impl Future<Output = Result<CallToolResult, ToolError>> + Send {
        // Boxed: held inline by the timeout, it would be copied into it whole.
        Box::pin(async move { send(self.upstream, self.tool, args, &context).await })
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.upstream.config.timeout)
    }

    fn timed_out(&self, timeout: Duration) -> ToolError {
        timed_out(&self.upstream.prefix, timeout)
    }
}

impl Server {
    /// Runs the proxied tool `name`, if there is one now.
    pub(crate) async fn call_proxied(
        &self,
        gateway: &Gateway,
        name: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Option<Sealed> {
        let catalog = gateway.catalog();
        let tool = Arc::clone(catalog.get(name)?);
        drop(catalog);
        let inner = &*self.inner;
        let args = arguments.unwrap_or_default();
        // 9. Report, as a built-in call's: its span, metrics and audit record (every proxied
        // call is a write for the audit trail: the gateway cannot know what the upstream
        // changed).
        let report = Report::start_forwarded(inner, tool.name(), &tool.facts, &context, &args);
        let target = Forward {
            gateway,
            tool: &tool,
            upstream: gateway.upstream(tool.upstream),
        };
        let sealed = self
            .serve_target(&target, report, args, context, |outcome| match outcome {
                Ok(result) => passed(crate::gateway::fit_result(result, gateway, &tool)),
                Err(error) => seal_error(&inner.names, &tool.sealed, error),
            })
            .await;
        Some(sealed)
    }
}
