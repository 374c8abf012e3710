//! Resource subscriptions (`resources/subscribe`, 2025-11-25): which connections hold which
//! resources, and the `notifications/resources/updated` a successful mutation sends them.

use std::sync::Arc;

use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::{ConnectionState, McpHandler, locked, protocol_error};

/// The most resources one session may be subscribed to at once.
const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 256;

/// The connections with resource subscriptions; ended ones are dropped as they are met.
pub(super) type Subscribers = std::sync::Mutex<Vec<std::sync::Weak<ConnectionState>>>;

impl McpHandler {
    /// Subscribes the connection of `context` to the resource at `uri` (a second subscription
    /// to the same URI is one).
    pub(super) fn subscribe_to(
        &self,
        uri: String,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let connection = self.connection_of(&context);
        let peer = context.peer.clone();
        let call = self
            .call_context(context)
            .map_err(|error| protocol_error("resources/subscribe", error))?;
        let key = self.shared.server.subscribable(&uri, &call)?;
        {
            let mut subscriptions = locked(&connection.subscriptions);
            if subscriptions.iter().any(|(held, _)| *held == uri) {
                return Ok(());
            }
            if subscriptions.len() >= MAX_SUBSCRIPTIONS_PER_SESSION {
                return Err(ErrorData::invalid_request(
                    format!(
                        "resources/subscribe: a session may hold at most {MAX_SUBSCRIPTIONS_PER_SESSION} subscriptions"
                    ),
                    None,
                ));
            }
            subscriptions.push((uri, key));
        }
        *locked(&connection.peer) = Some(peer);
        let mut subscribers = locked(&self.shared.subscriptions);
        subscribers.retain(|subscriber| subscriber.strong_count() > 0);
        if !subscribers
            .iter()
            .any(|subscriber| std::ptr::eq(subscriber.as_ptr(), Arc::as_ptr(&connection)))
        {
            subscribers.push(Arc::downgrade(&connection));
        }
        Ok(())
    }

    /// Ends the subscription of the connection of `context` to `uri`, if it holds one.
    pub(super) fn unsubscribe_from(&self, uri: &str, context: &RequestContext<RoleServer>) {
        locked(&self.connection_of(context).subscriptions).retain(|(held, _)| held != uri);
    }

    /// Tells every session subscribed to a resource that a successful call's `invalidates`
    /// names (by key) that it changed (`notifications/resources/updated`).
    pub(super) fn notify_invalidated(&self, globs: &[crate::key::Glob]) {
        if globs.is_empty() {
            return;
        }
        let mut subscribers = locked(&self.shared.subscriptions);
        subscribers.retain(|subscriber| subscriber.strong_count() > 0);
        for connection in subscribers.iter().filter_map(std::sync::Weak::upgrade) {
            let Some(peer) = locked(&connection.peer).clone() else {
                continue;
            };
            for (uri, _) in locked(&connection.subscriptions)
                .iter()
                .filter(|(_, key)| globs.iter().any(|glob| glob.matches(key.as_str())))
            {
                let (peer, updated) = (
                    peer.clone(),
                    rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                );
                // Sent off the call's path: a slow or gone client does not hold the call up.
                tokio::spawn(async move {
                    if let Err(error) = peer.notify_resource_updated(updated).await {
                        tracing::debug!(%error, "resource update not delivered");
                    }
                });
            }
        }
    }
}
