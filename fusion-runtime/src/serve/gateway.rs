//! `tools/list` of a server with mounted upstreams (SPEC R7): the built-in tools, then the
//! proxied ones, paged from the list the gateway computed when a catalog last changed; the
//! calls of proxied tools whose question rounds are the upstream's; and the changes of the
//! list a client listens for.

use rmcp::model::{CacheScope, ListToolsResult, Tool as ToolDefinition};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use std::sync::Arc;

use rmcp::model::CallToolResponse;

use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientCapabilities, ClientRequest, CreateTaskResult,
    GetTaskParams, GetTaskRequest, GetTaskResult, JsonObject, ServerResult, TaskPayload,
    UpdateTaskParams, UpdateTaskRequest,
};
use serde_json::Value;

use super::listing::{Listed, page};
use super::rounds::Asking;
use super::{McpHandler, protocol_error, tasks};
use crate::context::CallContext;
use crate::envelope::ClientForm;
use crate::gateway::tasks::{ProxiedTask, Refused, TaskStart};
use crate::gateway::{Gateway, fit_task_result};
use crate::task::{TaskOwner, now_ms};

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

/// Tasks of upstreams (module [`crate::gateway::tasks`]): started through a proxied call,
/// reached by the gateway's own ids, for their owner only.
impl McpHandler {
    /// Whether `tool` is a proxied tool's name (no built-in tool has it).
    pub(super) fn proxies(&self, tool: &str) -> bool {
        self.shared.server.gateway().is_some() && self.shared.server.tool(tool).is_none()
    }

    /// Whether `id` is a gateway id of an upstream task (any caller's).
    pub(super) fn is_upstream_task(&self, id: &str) -> bool {
        self.shared
            .server
            .gateway()
            .is_some_and(|gateway| gateway.upstream_tasks.knows(id, now_ms()))
    }

    /// A proxied call its caller asked to run as a task: the upstream is asked for one through
    /// the call's whole path (access, middleware, audit); the caller gets a gateway id for it,
    /// or the call's result when the upstream answered at once.
    pub(super) async fn start_upstream_task(
        &self,
        tool: String,
        arguments: Option<JsonObject>,
        mut call: CallContext,
        form: ClientForm,
        asks: Option<ClientCapabilities>,
    ) -> Result<CallToolResponse, ErrorData> {
        let server = &self.shared.server;
        let gateway = server.gateway().expect("a proxied tool has a gateway");
        let Some(upstream) = gateway.catalog().get(&tool).map(|proxied| proxied.upstream) else {
            return self.complete(Err(crate::server::UnknownTool(tool)));
        };
        let options = &self.tasks().options;
        let owner = TaskOwner::of(&call);
        let unfinished = gateway.upstream_tasks.unfinished(&owner, now_ms());
        if unfinished >= options.max_live_per_owner {
            let refused = tasks::too_many(unfinished, options);
            return self.complete(server.refuse_call(&tool, refused));
        }
        let start = Arc::new(TaskStart::new(asks));
        call.extensions_mut().insert(Arc::clone(&start));
        let outcome = server
            .call_tool(&tool, arguments, call)
            .await
            .map(|result| result.for_client(form));
        let Some(created) = start.take() else {
            return self.complete(outcome);
        };
        let mut task = created.task;
        // Kept here no longer than the upstream keeps it, nor than this server keeps its own.
        let ttl_ms = task.ttl_ms.map_or(tasks::millis(options.ttl), |ttl| {
            ttl.min(tasks::millis(options.ttl))
        });
        task.task_id = gateway.upstream_tasks.insert(
            upstream,
            std::mem::take(&mut task.task_id),
            tool,
            owner,
            ttl_ms,
            options.max_live_per_owner,
            now_ms(),
        );
        task.ttl_ms = Some(ttl_ms);
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// The upstream task of gateway id `id`, if the caller of `context` started it, and what
    /// that caller can be asked (told to the upstream with each request for the task).
    fn owned_upstream_task(
        &self,
        id: &str,
        context: RequestContext<RoleServer>,
    ) -> Result<(&Arc<Gateway>, ProxiedTask, Option<ClientCapabilities>), ErrorData> {
        let asks = context.client_capabilities();
        let call = self
            .call_context(context)
            .map_err(|error| protocol_error("tasks", error))?;
        let owner = TaskOwner::of(&call);
        let gateway = self
            .shared
            .server
            .gateway()
            .ok_or_else(|| tasks::unknown_task(id))?;
        let task = gateway
            .upstream_tasks
            .owned(id, &owner, now_ms())
            .ok_or_else(|| tasks::unknown_task(id))?;
        Ok((gateway, task, asks))
    }

    /// Sends `request` for the task of gateway id `id` to its upstream.
    async fn forward_task(
        gateway: &Gateway,
        id: &str,
        task: &ProxiedTask,
        request: ClientRequest,
        asks: Option<ClientCapabilities>,
    ) -> Result<ServerResult, ErrorData> {
        crate::gateway::tasks::forward(gateway.upstream(task.upstream), request, asks)
            .await
            .map_err(|refused| match refused {
                // Gone upstream (expired there, or lost with a restart): gone here too.
                Refused::Unknown => {
                    gateway.upstream_tasks.forget(id);
                    tasks::unknown_task(id)
                }
                Refused::Error(error) => error,
            })
    }

    pub(super) async fn get_upstream_task(
        &self,
        params: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let id = params.task_id;
        let (gateway, task, asks) = self.owned_upstream_task(&id, context)?;
        let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(
            task.upstream_id.clone(),
        )));
        let ServerResult::GetTaskResult(got) =
            Self::forward_task(gateway, &id, &task, request, asks).await?
        else {
            return Err(answered_otherwise(gateway, &task));
        };
        let mut detailed = got.task;
        detailed.task.task_id.clone_from(&id);
        let prefix = &gateway.upstream(task.upstream).prefix;
        detailed.payload = match detailed.payload {
            TaskPayload::Completed { result } => {
                let Ok(mut result) =
                    serde_json::from_value::<rmcp::model::CallToolResult>(Value::Object(result))
                else {
                    return Err(answered_otherwise(gateway, &task));
                };
                // As a proxied call's result: the upstream's names as served here, bounded.
                gateway
                    .upstream(task.upstream)
                    .renames()
                    .result(&mut result);
                let result = fit_task_result(result, gateway, task.upstream, &task.tool);
                match serde_json::to_value(result) {
                    Ok(Value::Object(result)) => TaskPayload::Completed { result },
                    _ => return Err(answered_otherwise(gateway, &task)),
                }
            }
            // The upstream's error, its code kept, its message cut short, its data left out.
            TaskPayload::Failed { error } => {
                let said = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let mut told = JsonObject::new();
                told.insert(
                    "code".into(),
                    error.get("code").cloned().unwrap_or(Value::from(-32603)),
                );
                told.insert(
                    "message".into(),
                    Value::from(format!(
                        "The task failed on the server behind `{prefix}`: {}",
                        crate::error::echo(said, 300)
                    )),
                );
                TaskPayload::Failed { error: told }
            }
            other => other,
        };
        if detailed.status().is_terminal() {
            gateway.upstream_tasks.finished(&id);
        }
        Ok(GetTaskResult::new(detailed))
    }

    pub(super) async fn cancel_upstream_task(
        &self,
        params: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let id = params.task_id;
        let (gateway, task, asks) = self.owned_upstream_task(&id, context)?;
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
            CancelTaskParams::new(task.upstream_id.clone()),
        ));
        Self::forward_task(gateway, &id, &task, request, asks).await?;
        Ok(())
    }

    pub(super) async fn update_upstream_task(
        &self,
        params: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (gateway, task, asks) = self.owned_upstream_task(&params.task_id, context)?;
        let mut forwarded = params.clone();
        forwarded.task_id.clone_from(&task.upstream_id);
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(forwarded));
        Self::forward_task(gateway, &params.task_id, &task, request, asks).await?;
        Ok(())
    }
}

/// An upstream that answered a `tasks/*` request with something else than its result.
fn answered_otherwise(gateway: &Gateway, task: &ProxiedTask) -> ErrorData {
    let prefix = &gateway.upstream(task.upstream).prefix;
    tracing::error!(upstream = %prefix, task = %task.upstream_id,
        "an upstream answered tasks/get with something that is not a task of a tool call");
    ErrorData::internal_error(
        format!(
            "The server behind `{prefix}` answered for this task with something that is not a \
             tool's task: report it to the operator."
        ),
        None,
    )
}
