//! `tools/list` of a server with mounted upstreams (SPEC R7): the built-in tools, then the
//! proxied ones, paged from the list the gateway computed when a catalog last changed; the
//! calls of proxied tools whose question rounds are the upstream's; and the changes of the
//! list a client listens for.

use rmcp::model::{CacheScope, ListToolsResult, Tool as ToolDefinition};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use std::sync::Arc;

use rmcp::model::CallToolResponse;

use super::listing::{Listed, page};
use super::rounds::Asking;
use super::{McpHandler, protocol_error};
use crate::context::CallContext;

impl McpHandler {
    pub(super) fn list_with_gateway(
        &self,
        cursor: Option<String>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let server = &self.shared.server;
        let Some(gateway) = server.gateway() else {
            return Ok(ListToolsResult::with_all_items(Vec::new()));
        };
        // Without an access policy, everyone sees the precomputed list.
        let (listed, scope) = if server.has_access_policy() {
            let call = self
                .call_context(context)
                .map_err(|error| protocol_error("tools/list", error))?;
            let visible: std::sync::Arc<[ToolDefinition]> = server.listed_tools(&call).into();
            (visible, CacheScope::Private)
        } else {
            (
                std::sync::Arc::clone(gateway.catalog().listed()),
                self.shared.discover_cache_scope,
            )
        };
        let (items, next) = page(&listed, self.shared.page_size, cursor.as_deref())?;
        // A client that is not told of changes must not keep the list past the next refresh.
        let ttl = gateway.list_ttl(std::time::Duration::from_millis(self.shared.list_ttl));
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Ok(ToolDefinition::page(items, next, ttl, scope))
    }

    /// A `subscriptions/listen` stream (2026-07-28): `notifications/tools/list_changed` each
    /// time a mounted catalog changes, until the client ends it.
    pub(super) async fn listen_for_changes(
        &self,
        context: rmcp::service::SubscriptionContext,
    ) -> Result<(), ErrorData> {
        let Some(gateway) = self.shared.server.gateway() else {
            context.cancelled().await;
            return Ok(());
        };
        let mut changes = gateway.changes();
        changes.mark_unchanged();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if let Err(error) = context.sink().notify_tool_list_changed().await {
                        tracing::debug!(%error, "a listening client was not told that the tool list changed");
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Whether a call of `name` is a proxied tool's whose rounds are the upstream's (SPEC R7):
    /// a 2026-07-28 caller's, or a session caller's that can be asked something (one that can
    /// be asked nothing has nothing to pass through, and takes the plain path).
    pub(super) fn passes_rounds_through(&self, name: &str, asking: &Asking) -> bool {
        self.shared.server.gateway().is_some()
            && self.shared.server.tool(name).is_none()
            && (asking.rounds
                || asking.capabilities.as_ref().is_some_and(|capabilities| {
                    crate::elicit::Need::ALL
                        .iter()
                        .any(|need| need.declared_by(capabilities))
                }))
    }

    /// A proxied call whose rounds pass through: the upstream's `input_required` answer, or
    /// its refusal of the caller's state or answers, is the caller's as it came.
    pub(super) async fn call_proxied(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        (state, responses): (Option<String>, Option<rmcp::model::InputResponses>),
        asking: Asking,
        mut call: CallContext,
    ) -> Result<CallToolResponse, ErrorData> {
        use crate::gateway::{Answer, Passthrough};
        let through = Arc::new(if asking.rounds {
            Passthrough::new(state, responses, asking.capabilities)
        } else {
            Passthrough::over_session(asking.peer, asking.capabilities)
        });
        call.extensions_mut().insert(Arc::clone(&through));
        let outcome = self.shared.server.call_tool(name, arguments, call).await;
        match through.take() {
            Some(Answer::InputRequired(result)) => Ok(CallToolResponse::InputRequired(result)),
            Some(Answer::Error(error)) => Err(error),
            None => self.complete(outcome),
        }
    }
}
