//! Upstream tasks through the gateway (the tasks extension, issue 26): a caller that declared
//! the extension and calls a proxied tool of an upstream that declares it (2026-07-28) has the
//! upstream asked for a task, with the gateway's own credentials as for every call. The caller
//! gets a task id of the gateway's (unguessable, not the upstream's), mapped here to the
//! upstream, the upstream's id, and the caller as owner; `tasks/get`, `tasks/update` and
//! `tasks/cancel` reach the upstream's task only through its owner's id, and every other caller
//! is told that no such task exists, as for a local task.
//!
//! The map is bounded: an entry is forgotten once its task's time to live ran out, an owner
//! may have only as many unfinished tasks as a local owner, and keeps only so many finished
//! ones (the oldest are forgotten first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientRequest,
    CreateTaskResult, ErrorCode, ErrorData, JsonObject, RequestMetaObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;

use super::call::{failed, unavailable, upstream_error};
use super::failure::Failure;
use super::{ProxiedTool, UpstreamState};
use crate::context::CallContext;
use crate::error::ToolError;
use crate::task::TaskOwner;

/// How many finished tasks one owner's entries may hold, per unfinished task it may have.
const FINISHED_PER_LIVE: usize = 4;

/// One upstream task, as the gateway knows it.
#[derive(Debug, Clone)]
pub(crate) struct ProxiedTask {
    /// The index of its upstream (mount order).
    pub(crate) upstream: usize,
    /// The upstream's id for it.
    pub(crate) upstream_id: String,
    /// The served name of the tool it runs, for the bounds of its result.
    pub(crate) tool: String,
    pub(crate) owner: TaskOwner,
    created_ms: u64,
    expires_ms: u64,
    /// Whether it was seen done (completed, failed or cancelled).
    finished: bool,
}

/// The gateway's task ids, mapped to the upstreams' tasks.
#[derive(Default)]
pub(crate) struct ProxiedTasks {
    by_id: Mutex<HashMap<String, ProxiedTask>>,
}

impl ProxiedTasks {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, ProxiedTask>> {
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `id` is one of the gateway's (any owner's, not expired at `now_ms`).
    pub(crate) fn knows(&self, id: &str, now_ms: u64) -> bool {
        self.entries()
            .get(id)
            .is_some_and(|task| now_ms < task.expires_ms)
    }

    /// Task `id`, if `owner` started it and it has not expired at `now_ms`.
    pub(crate) fn owned(&self, id: &str, owner: &TaskOwner, now_ms: u64) -> Option<ProxiedTask> {
        self.entries()
            .get(id)
            .filter(|task| task.owner == *owner && now_ms < task.expires_ms)
            .cloned()
    }

    /// How many of `owner`'s tasks are not known to be done at `now_ms`.
    pub(crate) fn unfinished(&self, owner: &TaskOwner, now_ms: u64) -> usize {
        self.entries()
            .values()
            .filter(|task| task.owner == *owner && !task.finished && now_ms < task.expires_ms)
            .count()
    }

    /// Maps a new gateway id to the upstream's task, kept `ttl_ms` from `now_ms`; forgets the
    /// expired entries, and the oldest finished ones of `owner` beyond what it may keep
    /// (`max_live` unfinished ones may have been let in before). Returns the new id.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert(
        &self,
        upstream: usize,
        upstream_id: String,
        tool: String,
        owner: TaskOwner,
        ttl_ms: u64,
        max_live: usize,
        now_ms: u64,
    ) -> String {
        let id = crate::task::new_task_id();
        let mut entries = self.entries();
        entries.retain(|_, task| now_ms < task.expires_ms);
        let mut finished: Vec<(u64, String)> = entries
            .iter()
            .filter(|(_, task)| task.owner == owner && task.finished)
            .map(|(id, task)| (task.created_ms, id.clone()))
            .collect();
        let keep = max_live.saturating_mul(FINISHED_PER_LIVE);
        if finished.len() >= keep {
            finished.sort_unstable();
            for (_, old) in &finished[..=finished.len() - keep.max(1)] {
                entries.remove(old);
            }
        }
        entries.insert(
            id.clone(),
            ProxiedTask {
                upstream,
                upstream_id,
                tool,
                owner,
                created_ms: now_ms,
                expires_ms: now_ms.saturating_add(ttl_ms),
                finished: false,
            },
        );
        id
    }

    /// Task `id` was seen done.
    pub(crate) fn finished(&self, id: &str) {
        if let Some(task) = self.entries().get_mut(id) {
            task.finished = true;
        }
    }

    /// Forgets task `id` (its upstream no longer has it).
    pub(crate) fn forget(&self, id: &str) {
        self.entries().remove(id);
    }
}

/// Set in a call's extensions when the caller asked for a task: the call asks the upstream
/// for one, and the task it answered with is kept here.
#[derive(Default)]
pub(crate) struct TaskStart {
    created: Mutex<Option<CreateTaskResult>>,
    /// What the caller can be asked (its declared capabilities), told to the upstream: a task
    /// may ask its caller (`input_required`, answered with `tasks/update`).
    asks: Option<ClientCapabilities>,
}

impl TaskStart {
    pub(crate) fn new(asks: Option<ClientCapabilities>) -> Self {
        Self {
            created: Mutex::default(),
            asks,
        }
    }

    pub(crate) fn take(&self) -> Option<CreateTaskResult> {
        self.created
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// `_meta` that declares the tasks extension for this one request (the gateway's client does
/// not declare it, so a plain call never gets a task), beside what the caller can be asked: a
/// task may ask its caller (`input_required`, answered with `tasks/update`).
fn with_tasks(asks: Option<ClientCapabilities>) -> RequestMetaObject {
    let mut capabilities = asks.unwrap_or_default();
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(
            rmcp::model::TASKS_EXTENSION_ID.to_owned(),
            JsonObject::new(),
        );
    let mut meta = RequestMetaObject::default();
    meta.set_client_capabilities(capabilities);
    meta
}

/// Calls `tool` upstream as a task: the task it answers with goes to `start`, and the call's
/// result is an empty success (what reaches the pipeline: audited as the write it starts); an
/// upstream that answers at once instead gives its result.
pub(crate) async fn start(
    upstream: &Arc<UpstreamState>,
    tool: &ProxiedTool,
    args: JsonObject,
    context: &CallContext,
    start: &TaskStart,
) -> Result<CallToolResult, ToolError> {
    let link = upstream
        .link()
        .ok_or_else(|| unavailable(&upstream.prefix, "the upstream is not connected".into()))?;
    // Never reached (such an upstream's tools are not offered as tasks), kept so that a task
    // can never run with the gateway's token where its caller's was required.
    if link
        .http
        .as_ref()
        .is_some_and(super::http::HttpCalls::exchanges_tokens)
    {
        return Err(upstream_error(
            &upstream.prefix,
            "token exchange: a task would run with the gateway's own token".into(),
        ));
    }
    let mut meta = with_tasks(start.asks.clone());
    if let Some(traceparent) = context.meta().get_traceparent() {
        meta.set_traceparent(traceparent);
    }
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(tool.upstream_name.clone()).with_arguments(args),
    ));
    let options = PeerRequestOptions::no_options().with_meta(meta);
    let handle = link
        .peer
        .send_request_with_option(request, options)
        .await
        .map_err(|error| failed(upstream, error.into(), None))?;
    let answer = tokio::select! {
        answer = handle.await_response() => answer,
        () = context.cancellation().cancelled() => {
            return Err(ToolError::new(crate::error::codes::CANCELLED, "The request was cancelled."));
        }
    };
    match answer {
        Ok(ServerResult::CreateTaskResult(created)) => {
            *start.created.lock().unwrap_or_else(PoisonError::into_inner) = Some(created);
            Ok(CallToolResult::success(Vec::new()))
        }
        Ok(ServerResult::CallToolResult(result)) => Ok(result),
        Ok(other) => Err(upstream_error(
            &upstream.prefix,
            format!("a task-augmented tools/call answered with something else: {other:?}"),
        )),
        Err(error) => Err(failed(upstream, error.into(), None)),
    }
}

/// Why a `tasks/*` request for a gateway task could not be answered by its upstream.
pub(crate) enum Refused {
    /// The upstream no longer has the task (expired there, or it restarted without it).
    Unknown,
    /// Any other failure, said to the caller without the upstream's text.
    Error(ErrorData),
}

/// Sends `request` (a `tasks/*` request for the upstream's id) to `upstream`, declaring the
/// extension and what its caller can be asked.
pub(crate) async fn forward(
    upstream: &UpstreamState,
    request: ClientRequest,
    asks: Option<ClientCapabilities>,
) -> Result<ServerResult, Refused> {
    let Some(link) = upstream.link() else {
        return Err(Refused::Error(unreachable(&upstream.prefix)));
    };
    let options = PeerRequestOptions::no_options().with_meta(with_tasks(asks));
    let sent = match link.peer.send_request_with_option(request, options).await {
        Ok(handle) => handle.await_response().await,
        Err(error) => Err(error),
    };
    sent.map_err(|error| match Failure::from(error) {
        Failure::Rpc(data) if data.code == ErrorCode::INVALID_PARAMS => Refused::Unknown,
        Failure::Unreachable(cause) => {
            tracing::warn!(upstream = %upstream.prefix, %cause, "a task's upstream is unreachable");
            upstream.connection_failed();
            Refused::Error(unreachable(&upstream.prefix))
        }
        other => {
            tracing::error!(upstream = %upstream.prefix, cause = ?other,
                "an upstream failed to answer for a task");
            Refused::Error(ErrorData::internal_error(
                format!(
                    "The server behind `{}` failed to answer for this task: report it to the \
                     operator.",
                    upstream.prefix
                ),
                None,
            ))
        }
    })
}

fn unreachable(prefix: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "The server behind `{prefix}`, which runs this task, cannot be reached right now: \
             ask again in a moment."
        ),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(subject: &str) -> TaskOwner {
        TaskOwner {
            tenant: Some("t".into()),
            subject: Some(subject.into()),
        }
    }

    fn insert(tasks: &ProxiedTasks, who: &str, now: u64) -> String {
        tasks.insert(
            0,
            format!("up-{now}"),
            "b_x".into(),
            owner(who),
            1000,
            2,
            now,
        )
    }

    #[test]
    fn an_id_reaches_its_task_only_for_its_owner_and_until_it_expires() {
        let tasks = ProxiedTasks::default();
        let id = insert(&tasks, "alice", 0);
        assert_eq!(id.len(), 64);
        assert_eq!(
            tasks.owned(&id, &owner("alice"), 999).unwrap().upstream_id,
            "up-0"
        );
        assert!(tasks.owned(&id, &owner("bob"), 0).is_none());
        assert!(tasks.owned(&id, &owner("alice"), 1000).is_none());
        assert!(tasks.knows(&id, 10) && !tasks.knows(&id, 1000));
        assert_eq!(tasks.unfinished(&owner("alice"), 10), 1);
        assert_eq!(tasks.unfinished(&owner("bob"), 10), 0);
    }

    #[test]
    fn an_owner_keeps_only_so_many_finished_tasks() {
        let tasks = ProxiedTasks::default();
        // Two live tasks at most: eight finished ones kept, the oldest forgotten first.
        let ids: Vec<String> = (0..20)
            .map(|now| {
                let id = insert(&tasks, "alice", now);
                tasks.finished(&id);
                id
            })
            .collect();
        let kept: Vec<bool> = ids
            .iter()
            .map(|id| tasks.owned(id, &owner("alice"), 30).is_some())
            .collect();
        assert_eq!(kept.iter().filter(|kept| **kept).count(), 8, "{kept:?}");
        assert!(kept[12..].iter().all(|kept| *kept), "{kept:?}");
        // Another owner's entries are not touched by alice's.
        let bob = insert(&tasks, "bob", 21);
        insert(&tasks, "alice", 22);
        assert!(tasks.owned(&bob, &owner("bob"), 30).is_some());
        // Expired entries are forgotten at the next insert.
        insert(&tasks, "carol", 5000);
        assert_eq!(tasks.entries().len(), 1);
    }
}
