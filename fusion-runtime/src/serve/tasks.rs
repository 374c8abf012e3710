//! The tasks extension served (SEP-2663, see the [task module](crate::task)): `tools/call` of
//! a tool that may run as a task answers a client that declared the extension with the task at
//! once, and runs the call (the same request path as any call) on; `tasks/get`, `tasks/cancel`
//! and `tasks/update` reach a task only for the caller that created it.
//!
//! A handler that asks its client a question during a task parks it in `input_required` with
//! the questions as `inputRequests`; `tasks/update` answers them, and once every one is
//! answered the handler runs again with the answers, as a 2026-07-28 call does across rounds.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CancelTaskParams, ClientCapabilities, CreateTaskResult, DetailedTask,
    ErrorCode, GetTaskParams, GetTaskResult, JsonObject, Notification, ServerNotification, Task,
    TaskPayload, TaskStatus, TaskStatusNotificationParams, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::rounds::Asking;
use super::{Erased, McpHandler, erased, locked};
use crate::context::CallContext;
use crate::elicit::{Asked, Era, Round};
use crate::envelope::ClientForm;
use crate::error::{ToolError, codes};
use crate::server::{Server, ToolResult, UnknownTool};
use crate::task::{
    TaskHook, TaskOptions, TaskOwner, TaskRecord, TaskState, TaskStore, TaskSupport, iso8601,
    new_task_id, now_ms,
};

/// The tasks of one [`Mcp`](super::Mcp): where they are kept, and those this process runs.
pub(crate) struct Tasks {
    store: Arc<dyn TaskStore>,
    pub(super) options: TaskOptions,
    /// The tasks this process runs or parked, by id.
    live: Mutex<HashMap<String, Live>>,
}

impl Tasks {
    pub(crate) fn new(store: Arc<dyn TaskStore>, options: TaskOptions) -> Tasks {
        Tasks {
            store,
            options,
            live: Mutex::default(),
        }
    }
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks::new(
            Arc::new(crate::task::MemoryTaskStore::new()),
            TaskOptions::default(),
        )
    }
}

/// A task of this process: running (cancelling stops its handler where it waits), or parked
/// on its client's answers with what runs it again.
enum Live {
    Running(CancellationToken),
    Parked(Parked),
}

/// What a parked task runs again with once its questions are answered.
struct Parked {
    tool: String,
    arguments: Option<JsonObject>,
    /// Every question asked so far, with the answers given.
    asked: BTreeMap<String, Asked>,
    /// The questions not answered yet, as `inputRequests`.
    open: JsonObject,
    /// Stops the watch that renews its lease (while it runs and while it waits).
    watch: CancellationToken,
    /// How its result is written for the client that started it.
    form: ClientForm,
    /// The session that started it, told of each change of its status.
    notify: Option<Peer<RoleServer>>,
}

/// The tasks extension, served: what a server reaches only through the pointer that
/// [`ToolSpec::with_task`](crate::ToolSpec::with_task) (or mounting an upstream) gives it, so
/// that a connector with no tool that may run as a task does not link any of it (0.39 MB of
/// hello's stripped release binary, its generics and drop glue included).
pub(crate) struct TaskService {
    /// The tasks of an [`Mcp`](super::Mcp) that was given no store: in memory.
    pub(super) in_memory: fn() -> Tasks,
    pub(super) mode: ModeOf,
    pub(super) start: Start,
    pub(super) get: TaskRequest<GetTaskParams, GetTaskResult>,
    pub(super) cancel: TaskRequest<CancelTaskParams, ()>,
    pub(super) update: TaskRequest<UpdateTaskParams, ()>,
}

/// [`McpHandler::mode`].
type ModeOf = fn(
    &McpHandler,
    &str,
    Option<&JsonObject>,
    &RequestContext<RoleServer>,
) -> Result<Mode, ErrorData>;

/// [`McpHandler::start_task`], erased.
type Start = for<'a> fn(
    &'a McpHandler,
    String,
    Option<JsonObject>,
    CallContext,
    Asking,
    ClientForm,
) -> Erased<'a, Result<CallToolResponse, ErrorData>>;

/// A `tasks/*` request with params `P` answered `T`, erased.
type TaskRequest<P, T> =
    for<'a> fn(&'a McpHandler, P, RequestContext<RoleServer>) -> Erased<'a, Result<T, ErrorData>>;

impl std::fmt::Debug for TaskService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskService")
    }
}

/// The one [`TaskService`].
pub(crate) static SERVICE: TaskService = TaskService {
    in_memory: Tasks::default,
    mode: McpHandler::mode,
    start: |handler, tool, arguments, call, asking, form| {
        erased(handler.start_task(tool, arguments, call, asking, form))
    },
    get: |handler, params, context| erased(handler.read_task(params, context)),
    cancel: |handler, params, context| erased(handler.cancel_owned_task(params, context)),
    update: |handler, params, context| erased(handler.answer_task(params, context)),
};

/// [`SERVICE`], opaque, for the layers below this one.
pub(crate) fn hook() -> TaskHook {
    TaskHook(&SERVICE)
}

// Here rather than beside the other options of a tool: the tasks extension is served by this
// layer, which the spec may not import, and naming `SERVICE` here links it only for a connector
// that calls this.
impl crate::spec::ToolSpec {
    /// Whether the tool may run as a task (see the [task module](crate::task)).
    #[must_use]
    pub fn with_task(mut self, support: TaskSupport) -> Self {
        self.task = support;
        self.task_service = Some(hook());
        self
    }
}

/// The tasks a handler serves, and how.
#[derive(Clone)]
pub(super) struct Served {
    pub(super) tasks: Arc<Tasks>,
    pub(super) service: &'static TaskService,
}

/// How a call of a tool that may run as a task is answered.
pub(super) enum Mode {
    /// As any call.
    Call,
    /// As a task.
    Task,
}

impl McpHandler {
    /// Its tasks: only a server with tools that may run as tasks declares the extension, and
    /// rmcp answers `tasks/*` only for a server that declares it.
    pub(super) fn tasks(&self) -> &Tasks {
        &self
            .shared
            .tasks
            .as_ref()
            .expect("tasks are served only by a server with tools that may run as tasks")
            .tasks
    }

    /// Whether `tools/call` of `name` runs as a task: when the tool may and the request declared
    /// the extension; a tool that runs only as a task refuses a client that did not (`-32021`).
    pub(super) fn mode(
        &self,
        name: &str,
        arguments: Option<&JsonObject>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Mode, ErrorData> {
        let support = self.shared.server.task_support(name, arguments);
        if support == TaskSupport::Forbidden {
            return Ok(Mode::Call);
        }
        if context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks())
        {
            return Ok(Mode::Task);
        }
        match support {
            TaskSupport::Required => Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            )),
            _ => Ok(Mode::Call),
        }
    }

    /// Creates the task of a call and starts it: once the store has it, its id is answered.
    pub(super) async fn start_task(
        &self,
        tool: String,
        arguments: Option<JsonObject>,
        call: CallContext,
        asking: Asking,
        form: ClientForm,
    ) -> Result<CallToolResponse, ErrorData> {
        #[cfg(feature = "gateway")]
        if self.proxies(&tool) {
            return self
                .start_upstream_task(tool, arguments, call, form, asking.capabilities)
                .await;
        }
        let tasks = self.tasks();
        let now = now_ms();
        let owner = TaskOwner::of(&call);
        let live = tasks
            .store
            .count_live(&owner, now)
            .await
            .map_err(store_failed)?;
        if live >= tasks.options.max_live_per_owner {
            let refused = too_many(live, &tasks.options);
            return self.complete(self.shared.server.refuse_call(&tool, refused));
        }
        let record = TaskRecord {
            id: new_task_id(),
            owner,
            tool: tool.clone(),
            state: TaskState::Working,
            status_message: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: millis(tasks.options.ttl),
            poll_interval_ms: millis(tasks.options.poll_interval),
            lease_ms: now.saturating_add(millis(tasks.options.lease)),
        };
        tasks.store.create(&record).await.map_err(store_failed)?;
        self.shared
            .server
            .audit_task(&tool, arguments.as_ref(), &record.id, &call, "task_started")
            .await;
        let parked = Parked {
            tool,
            arguments,
            asked: BTreeMap::new(),
            open: JsonObject::new(),
            watch: CancellationToken::new(),
            form,
            // A session's stream carries its status; a 2026-07-28 request has none to keep.
            notify: (!asking.rounds).then_some(asking.peer),
        };
        self.run_task(&record, parked, call, asking.capabilities);
        Ok(CallToolResponse::Task(CreateTaskResult::new(task_of(
            &record,
        ))))
    }

    /// Runs the call of task `id` (again, with the answers of `parked`) on a task of its own,
    /// then settles the task with what it gave.
    fn run_task(
        &self,
        record: &TaskRecord,
        mut parked: Parked,
        mut call: CallContext,
        capabilities: Option<ClientCapabilities>,
    ) {
        let cancel = CancellationToken::new();
        parked.watch = cancel.clone();
        // The request that started the task ends now: the task stops when it is cancelled.
        call.cancellation = cancel.clone();
        let round = Arc::new(Round::new(
            Era::Rounds(parked.asked.clone()),
            capabilities.as_ref(),
        ));
        call.extensions_mut().insert(Arc::clone(&round));
        let (form, notify) = (parked.form, parked.notify.clone());
        let owner = record.owner.clone();
        let change = self.change_of(&call, parked.arguments.as_ref());
        let id = record.id.clone();
        locked(&self.tasks().live).insert(id.clone(), Live::Running(cancel.clone()));
        let handler = self.clone();
        tokio::spawn(watch(
            Arc::clone(&self.tasks().store),
            id.clone(),
            self.tasks().options.clone(),
            cancel.clone(),
        ));
        tokio::spawn(async move {
            let outcome = handler
                .shared
                .server
                .call_tool(&parked.tool, parked.arguments.clone(), call)
                .await
                .map(|result| result.for_client(form));
            if let Ok(result) = &outcome
                && !result.is_error()
            {
                handler.notify_invalidated(result.invalidates(), change.as_ref());
            }
            let state = handler.ended(&id, parked, &round, outcome, &cancel);
            // Where this replica's run of it ended: a cancel through another replica shows here.
            tracing::info!(task = %id, status = state.status(), "a task's run ended");
            let settled = handler.tasks().store.settle(&id, &state, now_ms()).await;
            if let Err(error) = settled {
                tracing::error!(task = %id, %error, "a task's end could not be stored");
            }
            handler.notify_status(notify.as_ref(), &owner, &id).await;
            // A parked task's lease is renewed while it waits; a done one's no more.
            if !matches!(state, TaskState::InputRequired(_)) {
                cancel.cancel();
            }
        });
    }

    /// What task `id` comes to once its call returned: cancelled, parked on the questions it
    /// asked, failed for a reason that is not the tool's answer, or completed with the result.
    fn ended(
        &self,
        id: &str,
        mut parked: Parked,
        round: &Round,
        outcome: Result<ToolResult, UnknownTool>,
        cancel: &CancellationToken,
    ) -> TaskState {
        let mut live = locked(&self.tasks().live);
        live.remove(id);
        if cancel.is_cancelled() {
            return TaskState::Cancelled;
        }
        let failed = outcome.as_ref().map_or(true, ToolResult::is_error);
        if let Some(need) = round.take_missing()
            && failed
        {
            return TaskState::Failed(error_object(
                &ErrorData::missing_required_client_capability(need.capabilities()),
            ));
        }
        let pending = round.take_pending();
        if !pending.is_empty() {
            for (key, pending) in pending {
                parked.asked.insert(key.clone(), pending.asked);
                parked.open.insert(key, to_value(&pending.request));
            }
            let open = parked.open.clone();
            live.insert(id.to_owned(), Live::Parked(parked));
            return TaskState::InputRequired(open);
        }
        drop(live);
        match outcome {
            Err(unknown) => TaskState::Failed(error_object(&super::unknown_tool(&unknown.0))),
            // An internal failure (a panic, a lost dependency) is the protocol's, not the tool's
            // answer: its message names only the error id its cause is logged under.
            Ok(result) if result.outcome() == codes::INTERNAL_ERROR => {
                let message = match result.into_sealed().outcome.error_id() {
                    Some(error_id) => format!("Internal error (errorId {error_id})."),
                    None => "Internal error.".to_owned(),
                };
                TaskState::Failed(error_object(&ErrorData::internal_error(message, None)))
            }
            Ok(result) => {
                let Value::Object(result) = to_value(&result.into_protocol()) else {
                    unreachable!("a tool result is a JSON object");
                };
                let size = Value::Object(result.clone()).to_string().len();
                let limit = self.tasks().options.max_result_bytes;
                if size > limit {
                    return TaskState::Failed(error_object(&ErrorData::internal_error(
                        format!(
                            "The task's result ({size} bytes) is larger than this server keeps \
                             ({limit} bytes)."
                        ),
                        None,
                    )));
                }
                TaskState::Completed(result)
            }
        }
    }

    /// Tells `session` (the one that started task `id` of `owner`) where the task is now, as
    /// `tasks/get` would (`notifications/tasks`). Only that session: a status goes to no other
    /// session, of its owner or anyone else's.
    async fn notify_status(&self, session: Option<&Peer<RoleServer>>, owner: &TaskOwner, id: &str) {
        let Some(session) = session.filter(|session| !session.is_transport_closed()) else {
            return;
        };
        let record = match self.tasks().store.get(owner, id, now_ms()).await {
            Ok(Some(record)) => record,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(task = %id, %error, "a task's status was not read to be sent");
                return;
            }
        };
        let status = TaskStatusNotificationParams::new(detailed(record));
        let notification = ServerNotification::TaskStatusNotification(Notification::new(status));
        if let Err(error) = session.send_notification(notification).await {
            tracing::debug!(task = %id, %error, "a task's status was not delivered");
        }
    }

    /// The task `id` of the caller of `context`; any other caller's, or none, is `-32602`.
    async fn owned_task(
        &self,
        id: &str,
        context: RequestContext<RoleServer>,
    ) -> Result<(TaskRecord, CallContext), ErrorData> {
        let call = self
            .call_context(context)
            .map_err(|error| super::protocol_error("tasks", error))?;
        let owner = TaskOwner::of(&call);
        let found = self
            .tasks()
            .store
            .get(&owner, id, now_ms())
            .await
            .map_err(store_failed)?;
        let Some(mut record) = found else {
            return Err(unknown_task(id));
        };
        let now = now_ms();
        if record.abandoned(now) {
            // Its replica stopped (or lost its store) before it finished: it never will.
            let lost = TaskState::Failed(error_object(&ErrorData::internal_error(
                "The server instance running this task stopped before it finished: start the \
                 call again.",
                None,
            )));
            self.tasks()
                .store
                .settle(&record.id, &lost, now)
                .await
                .map_err(store_failed)?;
            record = self
                .tasks()
                .store
                .get(&record.owner, id, now)
                .await
                .map_err(store_failed)?
                .ok_or_else(|| unknown_task(id))?;
        }
        Ok((record, call))
    }

    pub(super) async fn read_task(
        &self,
        params: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        #[cfg(feature = "gateway")]
        if self.is_upstream_task(&params.task_id) {
            return self.get_upstream_task(params, context).await;
        }
        let (record, _) = self.owned_task(&params.task_id, context).await?;
        Ok(GetTaskResult::new(detailed(record)))
    }

    /// Cancels a task that is not done (its handler stops where it waits); a done one is left
    /// as it is. Either way the answer is the empty acknowledgement.
    pub(super) async fn cancel_owned_task(
        &self,
        params: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        #[cfg(feature = "gateway")]
        if self.is_upstream_task(&params.task_id) {
            return self.cancel_upstream_task(params, context).await;
        }
        let (record, call) = self.owned_task(&params.task_id, context).await?;
        if record.state.is_terminal() {
            return Ok(());
        }
        let tasks = self.tasks();
        let cancelled = tasks
            .store
            .settle(&record.id, &TaskState::Cancelled, now_ms())
            .await
            .map_err(store_failed)?;
        if cancelled {
            self.shared
                .server
                .audit_task(&record.tool, None, &record.id, &call, "task_cancelled")
                .await;
        }
        let held = locked(&tasks.live).remove(&record.id);
        match held {
            Some(Live::Running(cancel)) => cancel.cancel(),
            Some(Live::Parked(parked)) => {
                parked.watch.cancel();
                self.notify_status(parked.notify.as_ref(), &record.owner, &record.id)
                    .await;
            }
            None => {}
        }
        Ok(())
    }

    /// Answers questions of a parked task; once every one is answered, it runs again.
    pub(super) async fn answer_task(
        &self,
        params: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        #[cfg(feature = "gateway")]
        if self.is_upstream_task(&params.task_id) {
            return self.update_upstream_task(params, context).await;
        }
        let capabilities = context.client_capabilities();
        let (record, call) = self.owned_task(&params.task_id, context).await?;
        if !matches!(record.state, TaskState::InputRequired(_)) {
            // Nothing is asked: answers that come late or twice change nothing.
            return Ok(());
        }
        let tasks = self.tasks();
        let mut parked = match locked(&tasks.live).remove(&record.id) {
            Some(Live::Parked(parked)) => parked,
            Some(running) => {
                locked(&tasks.live).insert(record.id.clone(), running);
                return Ok(());
            }
            None => {
                return Err(ErrorData::internal_error(
                    "This task's questions are held by another replica of this server, which \
                     is gone: start the call again.",
                    None,
                ));
            }
        };
        let answered = match super::rounds::answer(&mut parked.asked, params.input_responses) {
            Ok(answered) => answered,
            Err(error) => {
                locked(&tasks.live).insert(record.id.clone(), Live::Parked(parked));
                return Err(ErrorData::invalid_params(error.message().to_owned(), None));
            }
        };
        for key in &answered {
            parked.open.remove(key);
        }
        let now = now_ms();
        if !parked.open.is_empty() {
            let open = TaskState::InputRequired(parked.open.clone());
            let notify = parked.notify.clone();
            locked(&tasks.live).insert(record.id.clone(), Live::Parked(parked));
            tasks
                .store
                .settle(&record.id, &open, now)
                .await
                .map_err(store_failed)?;
            self.notify_status(notify.as_ref(), &record.owner, &record.id)
                .await;
            return Ok(());
        }
        tasks
            .store
            .settle(&record.id, &TaskState::Working, now)
            .await
            .map_err(store_failed)?;
        self.notify_status(parked.notify.as_ref(), &record.owner, &record.id)
            .await;
        // The run renews the lease from here.
        parked.watch.cancel();
        self.run_task(&record, parked, call, capabilities);
        Ok(())
    }
}

impl Server {
    /// The action `tools/call` of `name` with `arguments` runs, if it is built in (a grouped
    /// tool's action is named by its `action` argument).
    fn action_of(
        &self,
        name: &str,
        arguments: Option<&JsonObject>,
    ) -> Option<&crate::server::CompiledAction> {
        use crate::server::Dispatch;
        let inner = &*self.inner;
        let tool = &inner.tools[*inner.by_name.get(name)?];
        let index = match &tool.dispatch {
            Dispatch::Single(index) => *index,
            Dispatch::Grouped { actions, .. } => *arguments
                .and_then(|arguments| arguments.get("action"))
                .and_then(Value::as_str)
                .and_then(|action| actions.get(action))?,
        };
        Some(&inner.actions[index])
    }

    /// Whether `tools/call` of `name` with `arguments` may run as a task.
    pub(crate) fn task_support(&self, name: &str, arguments: Option<&JsonObject>) -> TaskSupport {
        if let Some(action) = self.action_of(name, arguments) {
            return action.facts.task;
        }
        #[cfg(feature = "gateway")]
        if let Some(gateway) = self.gateway()
            && let Some(tool) = gateway.catalog().get(name)
        {
            return tool.facts.task;
        }
        TaskSupport::Forbidden
    }

    /// Records that task `id` of a call of `tool` (with `arguments`) by the caller of `call`
    /// started or was cancelled (`outcome`), when the server audits that action's calls: its
    /// end is the call's own record. The digest is of the task's id (`{"taskId": …}`), which
    /// the record of its `tasks/cancel` shares; the call's arguments are the end's to prove.
    pub(crate) async fn audit_task(
        &self,
        tool: &str,
        arguments: Option<&JsonObject>,
        id: &str,
        call: &CallContext,
        outcome: &'static str,
    ) {
        let inner = &*self.inner;
        let Some(audit) = &inner.audit else { return };
        let action = self.action_of(tool, arguments);
        let audited = action
            .is_some_and(|action| audit.reads || action.facts.verb != crate::action::Verb::Query);
        if !audited {
            return;
        }
        let key = action.map_or(tool, |action| action.facts.key.as_str());
        let principal = call.principal();
        let mut asked = JsonObject::new();
        asked.insert("taskId".to_owned(), Value::from(id));
        let record = crate::audit::AuditRecord {
            at: std::time::SystemTime::now(),
            tool: tool.to_owned(),
            action: key.to_owned(),
            principal: principal.map(|principal| principal.subject.clone()),
            tenant: principal.and_then(|principal| principal.tenant.clone()),
            arguments_digest: crate::audit::arguments_digest_of(&asked),
            outcome,
            duration: std::time::Duration::ZERO,
        };
        // A lost record is logged in full and counted; the task goes on (its end is the
        // record a required audit holds the call to).
        let _ = crate::pipeline::report::write(inner, audit, record, key).await;
    }

    /// What serves its tasks, if a tool (or a mount) gave it.
    pub(crate) fn task_service(&self) -> Option<&'static TaskService> {
        let TaskHook(hook) = self.inner.task_service?;
        hook.downcast_ref()
    }

    /// Whether any of its tools may run as a task.
    pub(crate) fn has_tasks(&self) -> bool {
        // Mounted upstreams may run tasks (which ones is known only once they answered).
        #[cfg(feature = "gateway")]
        if self.gateway().is_some() {
            return true;
        }
        self.inner
            .actions
            .iter()
            .any(|action| action.facts.task != TaskSupport::Forbidden)
    }
}

/// Renews the lease of task `id` while this replica runs it or holds it parked, and stops it
/// (through `cancel`) once its store says it is done or gone: cancelled through another
/// replica, or expired. Ends when `cancel` is cancelled.
async fn watch(
    store: Arc<dyn TaskStore>,
    id: String,
    options: TaskOptions,
    cancel: CancellationToken,
) {
    let every = options.poll_interval.min(options.lease / 3);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let now = now_ms();
        match store
            .renew(&id, now.saturating_add(millis(options.lease)), now)
            .await
        {
            Ok(true) => {}
            // A store that fails now may answer at the next renewal, within the lease.
            Err(error) => tracing::warn!(task = %id, %error, "a task's lease was not renewed"),
            Ok(false) => {
                cancel.cancel();
                return;
            }
        }
    }
}

/// The protocol's `Task` of `record`.
fn task_of(record: &TaskRecord) -> Task {
    let status = match record.state {
        TaskState::Working => TaskStatus::Working,
        TaskState::InputRequired(_) => TaskStatus::InputRequired,
        TaskState::Completed(_) => TaskStatus::Completed,
        TaskState::Failed(_) => TaskStatus::Failed,
        TaskState::Cancelled => TaskStatus::Cancelled,
    };
    let mut task = Task::new(
        record.id.clone(),
        status,
        iso8601(record.created_ms),
        iso8601(record.updated_ms),
    )
    .with_ttl_ms(record.ttl_ms)
    .with_poll_interval_ms(record.poll_interval_ms);
    // A failed task says why in its status too: the error's message, which holds no internal
    // text (internal failures name only their error id).
    task.status_message = record
        .status_message
        .clone()
        .or_else(|| match &record.state {
            TaskState::Failed(error) => error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        });
    task
}

/// `tasks/get`'s answer: the task with its questions, result or error inlined.
fn detailed(record: TaskRecord) -> DetailedTask {
    let task = task_of(&record);
    let payload = match record.state {
        TaskState::Working => TaskPayload::Working,
        TaskState::InputRequired(open) => TaskPayload::InputRequired {
            input_requests: serde_json::from_value(Value::Object(open)).unwrap_or_default(),
        },
        TaskState::Completed(result) => TaskPayload::Completed { result },
        TaskState::Failed(error) => TaskPayload::Failed { error },
        TaskState::Cancelled => TaskPayload::Cancelled,
    };
    DetailedTask::new(task, payload)
}

/// A call refused because its caller has `live` unfinished tasks, as many as `options` allow.
pub(super) fn too_many(live: usize, options: &TaskOptions) -> ToolError {
    ToolError::new(
        codes::RATE_LIMITED,
        format!("You have {live} tasks running, as many as this server runs for one caller."),
    )
    .with_recovery(
        "Wait for one of your tasks to finish (or cancel one you no longer need), then call \
         again with the same arguments.",
    )
    .with_retry_after(options.poll_interval)
}

/// An id this caller has no task under: the same answer whether it was never issued, expired,
/// or is another caller's.
pub(super) fn unknown_task(id: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_PARAMS,
        "unknown task",
        Some(json!({ "taskId": id })),
    )
}

/// A store that failed: logged, and an internal error without its text.
#[cold]
fn store_failed(error: crate::task::TaskStoreError) -> ErrorData {
    tracing::error!(%error, "the task store failed");
    ErrorData::internal_error("Internal error: the task store failed.", None)
}

/// A JSON-RPC error as the `error` of a failed task.
fn error_object(error: &ErrorData) -> JsonObject {
    match to_value(error) {
        Value::Object(error) => error,
        _ => JsonObject::new(),
    }
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

pub(super) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
