//! Resource subscriptions (`resources/subscribe`, 2025-11-25): which connections hold which
//! resources, and the `notifications/resources/updated` a successful mutation sends them.
//!
//! An update goes only where the change could have been: to the subscriptions of the calling
//! tenant (a subscription of another tenant, or of none, hears nothing of it), to a resource
//! whose key the mutation's `invalidates` names, and, when the mutation names a parameter of
//! the resource's URI template among its arguments (`id` of `billing://invoices/{id}`), only
//! to the resource with that value. So no tenant learns the timing or volume of another's
//! writes, and nobody is told that a resource changed when another one did.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::Value;

use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::{ConnectionState, McpHandler, locked, protocol_error};

/// The most resources one session may be subscribed to at once.
const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 256;

/// The connections with resource subscriptions; ended ones are dropped as they are met.
pub(super) type Subscribers = std::sync::Mutex<Vec<std::sync::Weak<ConnectionState>>>;

/// One resource a connection subscribed to.
pub(crate) struct Subscription {
    uri: String,
    /// The resource's key, which `invalidates` globs match.
    key: crate::key::ToolKey,
    /// The tenant of the caller who subscribed.
    tenant: Option<String>,
    /// The values of the URI template's parameters (`id` = `INV-1`).
    params: Vec<(String, String)>,
}

/// Who made a change, and with what arguments: what decides which subscriptions hear of it.
pub(super) struct Change {
    tenant: Option<String>,
    arguments: JsonObject,
}

impl Change {
    /// Whether a subscription may hear of this change to a resource its `invalidates` names.
    fn reaches(&self, subscription: &Subscription) -> bool {
        subscription.tenant == self.tenant
            && subscription
                .params
                .iter()
                .all(|(name, value)| match self.arguments.get(name) {
                    None => true,
                    Some(Value::String(argument)) => argument == value,
                    // A number or a boolean, as the URI spells it.
                    Some(argument) => {
                        serde_json::from_str::<Value>(value).is_ok_and(|parsed| parsed == *argument)
                    }
                })
    }
}

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
        let params = self
            .shared
            .server
            .inner
            .content
            .resolve(&uri)
            .map(|(_, params)| params)
            .unwrap_or_default();
        let tenant = crate::tenancy::tenant_of(&call).map(str::to_owned);
        {
            let mut subscriptions = locked(&connection.subscriptions);
            if subscriptions.iter().any(|held| held.uri == uri) {
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
            subscriptions.push(Subscription {
                uri,
                key,
                tenant,
                params,
            });
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
        locked(&self.connection_of(context).subscriptions).retain(|held| held.uri != uri);
    }

    /// What a call about to run may change, for [`McpHandler::notify_invalidated`]; nothing
    /// (and nothing copied) while no connection subscribes to anything.
    pub(super) fn change_of(
        &self,
        call: &crate::context::CallContext,
        arguments: Option<&JsonObject>,
    ) -> Option<Change> {
        if locked(&self.shared.subscriptions).is_empty() {
            return None;
        }
        Some(Change {
            tenant: crate::tenancy::tenant_of(call).map(str::to_owned),
            arguments: arguments.cloned().unwrap_or_default(),
        })
    }

    /// Tells the sessions subscribed to a resource that a successful call's `invalidates`
    /// names (by key), and that `change` reaches, that it changed
    /// (`notifications/resources/updated`).
    pub(super) fn notify_invalidated(&self, globs: &[crate::key::Glob], change: Option<&Change>) {
        let Some(change) = change.filter(|_| !globs.is_empty()) else {
            return;
        };
        let mut subscribers = locked(&self.shared.subscriptions);
        subscribers.retain(|subscriber| subscriber.strong_count() > 0);
        for connection in subscribers.iter().filter_map(std::sync::Weak::upgrade) {
            let Some(peer) = locked(&connection.peer).clone() else {
                continue;
            };
            for subscription in locked(&connection.subscriptions).iter().filter(|held| {
                globs.iter().any(|glob| glob.matches(held.key.as_str())) && change.reaches(held)
            }) {
                let (peer, updated) = (
                    peer.clone(),
                    rmcp::model::ResourceUpdatedNotificationParam::new(&subscription.uri),
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
