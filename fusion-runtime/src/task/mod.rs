//! Long-running calls as tasks (the MCP tasks extension, `io.modelcontextprotocol/tasks`,
//! SEP-2663): a tool declared with `#[tool(..., task = "optional")]` (or `"required"`) answers
//! a client that declared the extension with a task id at once, and runs on; the client polls
//! `tasks/get` for its status and, once it is done, its result, and may `tasks/cancel` it.
//!
//! The handler is the same `async fn` as for a plain call and runs through the same request
//! path (access, arguments, middleware, guards, presenter, egress, audit): only what happens to
//! its sealed result differs, which is kept in a [`TaskStore`] instead of being sent.
//!
//! **Owned.** A task belongs to the caller that created it: its verified principal's subject
//! and tenant ([`TaskOwner`]). Every other caller, another principal of the same tenant
//! included, is told that no such task exists, exactly as for an id that was never issued.
//! Ids carry 244 random bits (two version-4 UUIDs), so they cannot be guessed either.
//!
//! **Bounded.** A task and its result are kept for its time to live ([`TaskOptions::ttl`]),
//! counted from its creation, and then forgotten; a result larger than
//! [`TaskOptions::max_result_bytes`] is not kept (the task fails, saying why).
//!
//! The serving side (the protocol's methods, the runner) is `serve/tasks.rs`; this module is
//! what a store sees and keeps, in plain JSON, with no protocol types.

mod memory;
#[cfg(feature = "tasks-sqlite")]
mod sqlite;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

pub use memory::MemoryTaskStore;
#[cfg(feature = "tasks-sqlite")]
pub use sqlite::SqliteTaskStore;

use crate::context::CallContext;

/// Whether a tool may run as a task (`#[tool(task = "...")]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TaskSupport {
    /// Never: every call is answered when it is done (the default).
    #[default]
    Forbidden,
    /// A client that declared the tasks extension gets a task; any other is answered when the
    /// call is done.
    Optional,
    /// Only as a task: a client that did not declare the extension is refused (`-32021`).
    Required,
}

impl TaskSupport {
    /// As the lockfile and `#[tool(task = ...)]` write it: `forbidden`, `optional`, `required`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

/// Who a task belongs to: the verified subject and tenant of the caller that created it (both
/// `None` for an unauthenticated caller, whose tasks any unauthenticated caller that knows the
/// id may reach: there is no identity to tell them apart).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TaskOwner {
    /// The tenant of the caller's credential.
    pub tenant: Option<String>,
    /// The caller's subject.
    pub subject: Option<String>,
}

impl TaskOwner {
    /// The owner of the tasks the caller of `context` creates.
    pub fn of(context: &CallContext) -> TaskOwner {
        match context.principal() {
            Some(principal) => TaskOwner {
                tenant: principal.tenant.clone(),
                subject: Some(principal.subject.clone()),
            },
            None => TaskOwner::default(),
        }
    }
}

/// Where a task is: running, waiting for its client's answers, or done one way or another.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskState {
    /// Running.
    Working,
    /// Waiting for the answers to these questions (keyed as `inputRequests` are, each a
    /// server-to-client request), delivered by `tasks/update`.
    InputRequired(Map<String, Value>),
    /// Done: the tool's result as the protocol writes it (`content`, `structuredContent`,
    /// `isError`); a tool that reported a failure is completed too.
    Completed(Map<String, Value>),
    /// Failed for a reason that is not the tool's answer (an internal failure, a result too
    /// large to keep, a replica that stopped): a JSON-RPC error object.
    Failed(Map<String, Value>),
    /// Cancelled by its owner.
    Cancelled,
}

impl TaskState {
    /// Whether nothing can change it any more.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            TaskState::Completed(_) | TaskState::Failed(_) | TaskState::Cancelled
        )
    }

    /// What a store keeps of it besides its status: the object it carries (the questions, the
    /// result, the error) as JSON text.
    pub fn payload(&self) -> Option<String> {
        match self {
            TaskState::Working | TaskState::Cancelled => None,
            TaskState::InputRequired(object)
            | TaskState::Completed(object)
            | TaskState::Failed(object) => Some(Value::Object(object.clone()).to_string()),
        }
    }

    /// The state a store kept as its [`status`](Self::status) and [`payload`](Self::payload)
    /// (an unknown status is working; an unreadable payload is an empty object).
    pub fn from_stored(status: &str, payload: Option<&str>) -> TaskState {
        let object = || match payload.map(serde_json::from_str::<Value>) {
            Some(Ok(Value::Object(object))) => object,
            _ => Map::new(),
        };
        match status {
            "input_required" => TaskState::InputRequired(object()),
            "completed" => TaskState::Completed(object()),
            "failed" => TaskState::Failed(object()),
            "cancelled" => TaskState::Cancelled,
            _ => TaskState::Working,
        }
    }

    /// Its status as the protocol names it.
    pub fn status(&self) -> &'static str {
        match self {
            TaskState::Working => "working",
            TaskState::InputRequired(_) => "input_required",
            TaskState::Completed(_) => "completed",
            TaskState::Failed(_) => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }
}

/// One task, as a store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// Its id (unguessable, see the [module docs](self)).
    pub id: String,
    /// Who created it: nobody else reaches it.
    pub owner: TaskOwner,
    /// The exposed name of the tool it runs.
    pub tool: String,
    /// Where it is.
    pub state: TaskState,
    /// What the client may be told about where it is.
    pub status_message: Option<String>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When its state last changed, in milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// How long it is kept from its creation, in milliseconds.
    pub ttl_ms: u64,
    /// How often the client is asked to poll it, in milliseconds.
    pub poll_interval_ms: u64,
    /// Until when the replica that runs it vouches for it, in milliseconds since the Unix
    /// epoch: it renews this while the task runs or waits for answers. A task that is not done
    /// once its lease ran out lost its replica, and is reported failed.
    pub lease_ms: u64,
}

impl TaskRecord {
    /// Whether `owner` may see it at `now_ms`: it is theirs and has not expired. A store's
    /// [`get`](TaskStore::get) and [`list`](TaskStore::list) answer only such tasks.
    pub fn visible_to(&self, owner: &TaskOwner, now_ms: u64) -> bool {
        self.owner == *owner && !self.expired(now_ms)
    }

    /// Whether its time to live has run out at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.created_ms.saturating_add(self.ttl_ms)
    }

    /// Whether it is not done and its replica still vouches for it at `now_ms`.
    pub fn live(&self, now_ms: u64) -> bool {
        !self.state.is_terminal() && !self.abandoned(now_ms)
    }

    /// Whether it is not done and its replica stopped renewing its lease before `now_ms`.
    pub fn abandoned(&self, now_ms: u64) -> bool {
        !self.state.is_terminal() && now_ms > self.lease_ms
    }
}

crate::described::described_error! {
    /// Why a store could not do what it was asked.
    pub struct TaskStoreError;
}

/// What a store's methods return.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, TaskStoreError>> + Send + 'a>>;

/// Where tasks and their results are kept: in memory ([`MemoryTaskStore`], the default) or in
/// a database that every replica of a server shares.
///
/// A store never hands one owner's task to another: [`TaskStore::get`] and
/// [`TaskStore::list`] filter by owner, and the runtime reaches a task only through them
/// (settling it only after its owner's `get` found it, or as its runner).
pub trait TaskStore: Send + Sync + 'static {
    /// Keeps a new task. Once this returned, [`TaskStore::get`] finds it (the extension
    /// requires a task to exist before its id is given out).
    fn create<'a>(&'a self, task: &'a TaskRecord) -> StoreFuture<'a, ()>;

    /// Task `id`, if `owner` created it and it has not expired at `now_ms`.
    fn get<'a>(
        &'a self,
        owner: &'a TaskOwner,
        id: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<TaskRecord>>;

    /// Moves task `id` to `state` at `now_ms`, unless it is terminal already (a cancel is not
    /// undone by the result that arrives after it). Returns whether it moved.
    fn settle<'a>(
        &'a self,
        id: &'a str,
        state: &'a TaskState,
        now_ms: u64,
    ) -> StoreFuture<'a, bool>;

    /// The tasks of `owner` that have not expired at `now_ms`, newest first.
    fn list<'a>(&'a self, owner: &'a TaskOwner, now_ms: u64) -> StoreFuture<'a, Vec<TaskRecord>>;

    /// How many tasks of `owner` are live at `now_ms`: not done, not expired, and still vouched
    /// for by their replica. The default counts [`TaskStore::list`]; a database may count
    /// without reading the results.
    fn count_live<'a>(&'a self, owner: &'a TaskOwner, now_ms: u64) -> StoreFuture<'a, usize> {
        Box::pin(async move {
            let own = self.list(owner, now_ms).await?;
            Ok(own.iter().filter(|task| task.live(now_ms)).count())
        })
    }

    /// Renews the lease of task `id` until `lease_ms`, if it is not done. Returns whether it
    /// is still there and not done (its runner stops otherwise).
    fn renew<'a>(&'a self, id: &'a str, lease_ms: u64, now_ms: u64) -> StoreFuture<'a, bool>;
}

/// How tasks are kept and polled.
#[derive(Debug, Clone)]
pub struct TaskOptions {
    /// How long a task and its result are kept from its creation (default: one hour).
    pub ttl: Duration,
    /// How often clients are asked to poll (default: one second).
    pub poll_interval: Duration,
    /// The largest result kept, in bytes of JSON (default: 4 MiB); a larger one fails its task.
    pub max_result_bytes: usize,
    /// How long a replica vouches for a task it runs without renewing (default: 30 s; it renews
    /// at every poll interval, or three times a lease if that is shorter). A task whose
    /// replica stopped is reported failed once its lease ran out.
    pub lease: Duration,
    /// How many live tasks (not done) one owner may have at once, a principal in its tenant
    /// (default: 64; every unauthenticated caller is one owner). One more is refused with a
    /// retryable `RATE_LIMITED` until one of them ends. Counted before a task is created, so
    /// calls that start at the same instant may pass it by a few.
    pub max_live_per_owner: usize,
}

impl Default for TaskOptions {
    fn default() -> Self {
        TaskOptions {
            ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            max_result_bytes: 4 * 1024 * 1024,
            lease: Duration::from_secs(30),
            max_live_per_owner: 64,
        }
    }
}

/// What serves tasks, as the serving layer made it (`serve::tasks::TaskService`), opaque here:
/// a tool's spec and the server carry it without importing the serving layer, which imports
/// them.
#[derive(Clone, Copy)]
pub(crate) struct TaskHook(pub(crate) &'static (dyn std::any::Any + Send + Sync));

/// A new task id: two version-4 UUIDs, 244 random bits, as 64 hex digits.
pub(crate) fn new_task_id() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// `ms` since the Unix epoch as an ISO 8601 UTC timestamp, `2026-12-04T11:36:00.123Z`.
pub(crate) fn iso8601(ms: u64) -> String {
    let (days, rest) = (ms / 86_400_000, ms % 86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (hours, minutes) = (rest / 3_600_000, rest / 60_000 % 60);
    let (seconds, millis) = (rest / 1000 % 60, rest % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hours:02}:{minutes:02}:{seconds:02}.{millis:03}Z")
}

/// The proleptic Gregorian date `days` after 1970-01-01 (the era arithmetic of the civil
/// calendar: 400-year eras of 146097 days, years starting in March).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

/// What the stores' tests make their tasks of.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{TaskOwner, TaskRecord, TaskState, new_task_id};

    pub(crate) fn owner(tenant: Option<&str>, subject: Option<&str>) -> TaskOwner {
        TaskOwner {
            tenant: tenant.map(str::to_owned),
            subject: subject.map(str::to_owned),
        }
    }

    /// A working task of `owner` created at `created_ms`, kept 1 s, its lease 0.5 s.
    pub(crate) fn record(owner: TaskOwner, created_ms: u64) -> TaskRecord {
        TaskRecord {
            id: new_task_id(),
            owner,
            tool: "export".to_owned(),
            state: TaskState::Working,
            status_message: None,
            created_ms,
            updated_ms: created_ms,
            ttl_ms: 1000,
            poll_interval_ms: 100,
            lease_ms: created_ms + 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day of a century year) and a time of day.
        assert_eq!(
            iso8601(951_782_400_000 + 3_723_004),
            "2000-02-29T01:02:03.004Z"
        );
        assert_eq!(iso8601(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(iso8601(1_709_251_200_000), "2024-03-01T00:00:00.000Z");
    }

    #[test]
    fn ids_are_64_hex_digits_and_differ() {
        let (one, two) = (new_task_id(), new_task_id());
        assert_eq!(one.len(), 64);
        assert!(one.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_ne!(one, two);
    }
}
