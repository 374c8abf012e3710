//! Tasks in an SQLite database (feature `tasks-sqlite`): they outlive the process, and every
//! process that opens the same file (replicas on one host, a restarted server) reaches them.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::{StoreFuture, TaskOwner, TaskRecord, TaskState, TaskStore, TaskStoreError};

/// Tasks in the `fusion_tasks` table of an SQLite database (which may be the application's
/// own). Each call runs on the blocking pool.
#[derive(Clone)]
pub struct SqliteTaskStore {
    connection: Arc<Mutex<Connection>>,
}

impl std::fmt::Debug for SqliteTaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteTaskStore").finish_non_exhaustive()
    }
}

const COLUMNS: &str = "id, tenant, subject, tool, status, payload, status_message, created_ms, \
                       updated_ms, ttl_ms, poll_interval_ms, lease_ms";

impl SqliteTaskStore {
    /// Opens (or creates) the `fusion_tasks` table in the database file at `path`.
    pub fn open(path: &Path) -> Result<Self, TaskStoreError> {
        let connection = Connection::open(path).map_err(failed("opening the task database"))?;
        Self::with_connection(connection)
    }

    /// Uses an open connection, creating the table if it is missing.
    pub fn with_connection(connection: Connection) -> Result<Self, TaskStoreError> {
        connection
            .busy_timeout(Duration::from_secs(5))
            .map_err(failed("setting the busy timeout"))?;
        connection
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS fusion_tasks (
                     id TEXT PRIMARY KEY,
                     tenant TEXT,
                     subject TEXT,
                     tool TEXT NOT NULL,
                     status TEXT NOT NULL,
                     payload TEXT,
                     status_message TEXT,
                     created_ms INTEGER NOT NULL,
                     updated_ms INTEGER NOT NULL,
                     ttl_ms INTEGER NOT NULL,
                     poll_interval_ms INTEGER NOT NULL,
                     lease_ms INTEGER NOT NULL
                 );
                 CREATE INDEX IF NOT EXISTS fusion_tasks_expiry
                     ON fusion_tasks (created_ms + ttl_ms);",
            )
            .map_err(failed("creating the task table"))?;
        Ok(SqliteTaskStore {
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    /// Runs `work` on the connection, on the blocking pool.
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'static, T> {
        let connection = Arc::clone(&self.connection);
        Box::pin(async move {
            crate::blocking(move || {
                let connection = connection.lock().unwrap_or_else(PoisonError::into_inner);
                work(&connection)
            })
            .await
            .map_err(|error| TaskStoreError::new(format!("the task store's thread: {error}")))?
            .map_err(failed("the task database"))
        })
    }
}

fn failed(what: &'static str) -> impl Fn(rusqlite::Error) -> TaskStoreError {
    move |error| TaskStoreError::with_source(what, error)
}

/// Milliseconds as SQLite stores them (times past the year 292 million are clamped).
fn stored(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn read(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

fn record_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRecord> {
    Ok(TaskRecord {
        id: row.get(0)?,
        owner: TaskOwner {
            tenant: row.get(1)?,
            subject: row.get(2)?,
        },
        tool: row.get(3)?,
        state: TaskState::from_stored(
            &row.get::<_, String>(4)?,
            row.get::<_, Option<String>>(5)?.as_deref(),
        ),
        status_message: row.get(6)?,
        created_ms: read(row.get(7)?),
        updated_ms: read(row.get(8)?),
        ttl_ms: read(row.get(9)?),
        poll_interval_ms: read(row.get(10)?),
        lease_ms: read(row.get(11)?),
    })
}

impl TaskStore for SqliteTaskStore {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> StoreFuture<'a, ()> {
        let task = task.clone();
        self.run(move |connection| {
            // Expired tasks go as new ones come: the table holds one time to live of tasks.
            connection.execute(
                "DELETE FROM fusion_tasks WHERE created_ms + ttl_ms <= ?1",
                params![stored(task.created_ms)],
            )?;
            let (status, payload) = (task.state.status(), task.state.payload());
            connection.execute(
                &format!(
                    "INSERT INTO fusion_tasks ({COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
                ),
                params![
                    task.id,
                    task.owner.tenant,
                    task.owner.subject,
                    task.tool,
                    status,
                    payload,
                    task.status_message,
                    stored(task.created_ms),
                    stored(task.updated_ms),
                    stored(task.ttl_ms),
                    stored(task.poll_interval_ms),
                    stored(task.lease_ms),
                ],
            )?;
            Ok(())
        })
    }

    fn get<'a>(
        &'a self,
        owner: &'a TaskOwner,
        id: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<TaskRecord>> {
        let (owner, id) = (owner.clone(), id.to_owned());
        self.run(move |connection| {
            let found = connection
                .query_row(
                    &format!("SELECT {COLUMNS} FROM fusion_tasks WHERE id = ?1"),
                    params![id],
                    record_of,
                )
                .optional()?;
            Ok(found.filter(|task| task.visible_to(&owner, now_ms)))
        })
    }

    fn settle<'a>(
        &'a self,
        id: &'a str,
        state: &'a TaskState,
        now_ms: u64,
    ) -> StoreFuture<'a, bool> {
        let (id, status, payload) = (id.to_owned(), state.status(), state.payload());
        self.run(move |connection| {
            let moved = connection.execute(
                "UPDATE fusion_tasks SET status = ?2, payload = ?3, updated_ms = ?4 \
                 WHERE id = ?1 AND status NOT IN ('completed', 'failed', 'cancelled')",
                params![id, status, payload, stored(now_ms)],
            )?;
            Ok(moved == 1)
        })
    }

    fn list<'a>(&'a self, owner: &'a TaskOwner, now_ms: u64) -> StoreFuture<'a, Vec<TaskRecord>> {
        let owner = owner.clone();
        self.run(move |connection| {
            // `IS` compares NULL with NULL: an unauthenticated owner is one owner.
            let mut statement = connection.prepare(&format!(
                "SELECT {COLUMNS} FROM fusion_tasks WHERE tenant IS ?1 AND subject IS ?2 \
                 ORDER BY created_ms DESC, id"
            ))?;
            let rows = statement.query_map(params![owner.tenant, owner.subject], record_of)?;
            let mut own = rows.collect::<rusqlite::Result<Vec<_>>>()?;
            own.retain(|task| task.visible_to(&owner, now_ms));
            Ok(own)
        })
    }

    fn renew<'a>(&'a self, id: &'a str, lease_ms: u64, now_ms: u64) -> StoreFuture<'a, bool> {
        let id = id.to_owned();
        self.run(move |connection| {
            let renewed = connection.execute(
                "UPDATE fusion_tasks SET lease_ms = ?2 WHERE id = ?1 \
                 AND status NOT IN ('completed', 'failed', 'cancelled') \
                 AND created_ms + ttl_ms > ?3",
                params![id, stored(lease_ms), stored(now_ms)],
            )?;
            Ok(renewed == 1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::fixtures::{owner, record};
    use crate::task::new_task_id;
    use serde_json::{Map, Value};

    #[tokio::test]
    async fn tasks_survive_a_reopened_database_and_reach_only_their_owner() {
        let dir = std::env::temp_dir().join(format!("fusion-tasks-{}", new_task_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tasks.db");
        let alice = owner(Some("acme"), Some("alice"));
        let task = record(alice.clone(), 10_000);
        {
            let store = SqliteTaskStore::open(&path).unwrap();
            store.create(&task).await.unwrap();
            let mut result = Map::new();
            result.insert("isError".into(), Value::Bool(false));
            let done = TaskState::Completed(result);
            assert!(store.settle(&task.id, &done, 10_100).await.unwrap());
            // Done: a late cancel does not move it, nor does a renewal keep it.
            assert!(
                !store
                    .settle(&task.id, &TaskState::Cancelled, 10_200)
                    .await
                    .unwrap()
            );
            assert!(!store.renew(&task.id, 20_000, 10_200).await.unwrap());
        }
        // Another process opening the same file (a restart, a replica on this host).
        let store = SqliteTaskStore::open(&path).unwrap();
        let found = store.get(&alice, &task.id, 10_300).await.unwrap().unwrap();
        assert_eq!(found.state.status(), "completed");
        assert_eq!((found.updated_ms, found.lease_ms), (10_100, 10_500));
        for other in [
            owner(Some("acme"), Some("reader")),
            owner(Some("globex"), Some("alice")),
            owner(None, Some("alice")),
            owner(None, None),
        ] {
            assert_eq!(store.get(&other, &task.id, 10_300).await.unwrap(), None);
            assert!(store.list(&other, 10_300).await.unwrap().is_empty());
        }
        assert_eq!(store.list(&alice, 10_300).await.unwrap(), [found]);
        // Past its time to live it is gone, and the next task sweeps it.
        assert_eq!(store.get(&alice, &task.id, 11_000).await.unwrap(), None);
        let anonymous = record(owner(None, None), 20_000);
        store.create(&anonymous).await.unwrap();
        assert!(store.renew(&anonymous.id, 20_900, 20_100).await.unwrap());
        let kept = store
            .get(&owner(None, None), &anonymous.id, 20_200)
            .await
            .unwrap();
        assert_eq!(kept.map(|task| task.lease_ms), Some(20_900));
        assert!(store.list(&alice, 10_300).await.unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
