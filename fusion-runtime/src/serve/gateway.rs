//! `tools/list` of a server with mounted upstreams (SPEC R7): the built-in tools, then the
//! proxied ones, paged from the list the gateway computed when a catalog last changed.

use rmcp::model::{CacheScope, ListToolsResult, Tool as ToolDefinition};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::{McpHandler, cursor_of, page_of, protocol_error};

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
        let page_size = self.shared.page_size;
        let index = match cursor {
            None => 0,
            Some(cursor) => page_of(&cursor)
                .filter(|index| index * page_size < listed.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None)
                })?,
        };
        let start = index * page_size;
        let end = (start + page_size).min(listed.len());
        // A client that is not told of changes must not keep the list past the next refresh.
        let ttl = gateway.list_ttl(std::time::Duration::from_millis(self.shared.list_ttl));
        let mut page = ListToolsResult::with_all_items(listed[start..end].to_vec())
            .with_ttl_ms(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
            .with_cache_scope(scope);
        if end < listed.len() {
            page.next_cursor = Some(cursor_of(index + 1));
        }
        Ok(page)
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
}
