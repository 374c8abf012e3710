//! The request path of a proxied call (SPEC R7): the stages of a built-in call that belong to
//! this server (access, rate limit, middleware, guard, timeout, audit, metrics, span), around a
//! forward to the upstream instead of arguments, handler and presenter.

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject};
use tracing::Instrument as _;

use super::CatchPanic;
use super::report::Report;
use crate::context::CallContext;
use crate::envelope::{Sealed, seal_error};
use crate::error::ToolError;
use crate::gateway::call::{passed, send, timed_out};
use crate::gateway::{Gateway, ProxiedTool};
use crate::middleware::run_chain;
use crate::server::Server;

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
        let run = self.forward(gateway, &tool, args, context);
        let outcome = if report.span.is_disabled() {
            run.await
        } else {
            run.instrument(report.span.clone()).await
        };
        let sealed = match outcome {
            Ok(result) => passed(crate::gateway::fit_result(result, gateway, &tool)),
            Err(error) => seal_error(&inner.names, &tool.sealed, error),
        };
        let key = tool.facts.key.as_str();
        let sealed = report
            .audit_target(inner, key, &tool.sealed, sealed, true)
            .await;
        report.finish(inner, tool.name(), Some(key), &sealed.outcome);
        Some(sealed)
    }

    /// Access, rate limit, middleware, guard and timeout around the forward.
    async fn forward(
        &self,
        gateway: &Gateway,
        tool: &ProxiedTool,
        args: JsonObject,
        mut context: CallContext,
    ) -> Result<CallToolResult, ToolError> {
        // Before anything reaches the upstream.
        self.check_access(tool.info(), &context)?;
        // Proxied tools have no rate limit of their own: the server's applies.
        self.check_rates(None, &context)?;
        let upstream = gateway.upstream(tool.upstream);
        // Boxed: held inline by the timeout, it would be copied into it whole.
        let rest = Box::pin(async move {
            let chain = gateway.middleware();
            if !chain.is_empty() {
                let chain = run_chain(chain, &mut context, tool.info());
                CatchPanic::new(Box::pin(chain), "a middleware").await?;
            }
            let _slot = match &upstream.concurrency {
                Some(guard) => Some(guard.enter(crate::tenancy::tenant_of(&context)).await?),
                None => None,
            };
            send(upstream, tool, args, &context).await
        });
        let timeout = upstream.config.timeout;
        tokio::time::timeout(timeout, rest)
            .await
            .unwrap_or_else(|_| Err(timed_out(&upstream.prefix, timeout)))
    }
}
