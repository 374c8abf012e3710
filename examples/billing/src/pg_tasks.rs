//! The tasks of replicas sharing one PostgreSQL database (the export's): a task started on one
//! replica is read, renewed and cancelled through any other.

use fusion::{StoreFuture, TaskOwner, TaskRecord, TaskState, TaskStore, TaskStoreError};
use tokio_postgres::Row;

use crate::pg::PgStore;

/// The `fusion_tasks` table, created with the rest of the schema.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS fusion_tasks (
    id               TEXT PRIMARY KEY,
    tenant           TEXT,
    subject          TEXT,
    tool             TEXT   NOT NULL,
    status           TEXT   NOT NULL,
    payload          TEXT,
    status_message   TEXT,
    created_ms       BIGINT NOT NULL,
    updated_ms       BIGINT NOT NULL,
    ttl_ms           BIGINT NOT NULL,
    poll_interval_ms BIGINT NOT NULL,
    lease_ms         BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS fusion_tasks_expiry ON fusion_tasks ((created_ms + ttl_ms));
";

const COLUMNS: &str = "id, tenant, subject, tool, status, payload, status_message, created_ms, \
                       updated_ms, ttl_ms, poll_interval_ms, lease_ms";

/// Tasks in the store's database.
#[derive(Debug, Clone)]
pub struct PgTaskStore {
    store: PgStore,
}

impl PgTaskStore {
    /// The tasks of `store`'s database (its schema has their table).
    pub fn new(store: PgStore) -> Self {
        PgTaskStore { store }
    }
}

fn failed(error: impl std::fmt::Display) -> TaskStoreError {
    TaskStoreError::new(format!("fusion_tasks: {error}"))
}

/// Milliseconds as a `BIGINT` (clamped past the year 292 million).
fn stored(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn record_of(row: &Row) -> TaskRecord {
    let state = TaskState::from_stored(row.get(4), row.get::<_, Option<&str>>(5));
    let ms = |index: usize| u64::try_from(row.get::<_, i64>(index)).unwrap_or(0);
    TaskRecord {
        id: row.get(0),
        owner: TaskOwner {
            tenant: row.get(1),
            subject: row.get(2),
        },
        tool: row.get(3),
        state,
        status_message: row.get(6),
        created_ms: ms(7),
        updated_ms: ms(8),
        ttl_ms: ms(9),
        poll_interval_ms: ms(10),
        lease_ms: ms(11),
    }
}

impl TaskStore for PgTaskStore {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.store.pool().get().await.map_err(failed)?;
            // Expired tasks go as new ones come: the table holds one time to live of tasks.
            client
                .execute(
                    "DELETE FROM fusion_tasks WHERE created_ms + ttl_ms <= $1",
                    &[&stored(task.created_ms)],
                )
                .await
                .map_err(failed)?;
            let (status, payload) = (task.state.status(), task.state.payload());
            client
                .execute(
                    &format!(
                        "INSERT INTO fusion_tasks ({COLUMNS}) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
                    ),
                    &[
                        &task.id,
                        &task.owner.tenant,
                        &task.owner.subject,
                        &task.tool,
                        &status,
                        &payload,
                        &task.status_message,
                        &stored(task.created_ms),
                        &stored(task.updated_ms),
                        &stored(task.ttl_ms),
                        &stored(task.poll_interval_ms),
                        &stored(task.lease_ms),
                    ],
                )
                .await
                .map_err(failed)?;
            Ok(())
        })
    }

    fn get<'a>(
        &'a self,
        owner: &'a TaskOwner,
        id: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<TaskRecord>> {
        Box::pin(async move {
            let client = self.store.pool().get().await.map_err(failed)?;
            let row = client
                .query_opt(
                    &format!("SELECT {COLUMNS} FROM fusion_tasks WHERE id = $1"),
                    &[&id],
                )
                .await
                .map_err(failed)?;
            Ok(row
                .as_ref()
                .map(record_of)
                .filter(|task| task.visible_to(owner, now_ms)))
        })
    }

    fn settle<'a>(
        &'a self,
        id: &'a str,
        state: &'a TaskState,
        now_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let client = self.store.pool().get().await.map_err(failed)?;
            let (status, payload) = (state.status(), state.payload());
            let moved = client
                .execute(
                    "UPDATE fusion_tasks SET status = $2, payload = $3, updated_ms = $4 \
                     WHERE id = $1 AND status NOT IN ('completed', 'failed', 'cancelled')",
                    &[&id, &status, &payload, &stored(now_ms)],
                )
                .await
                .map_err(failed)?;
            Ok(moved == 1)
        })
    }

    fn list<'a>(&'a self, owner: &'a TaskOwner, now_ms: u64) -> StoreFuture<'a, Vec<TaskRecord>> {
        Box::pin(async move {
            let client = self.store.pool().get().await.map_err(failed)?;
            let rows = client
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM fusion_tasks \
                         WHERE tenant IS NOT DISTINCT FROM $1 AND subject IS NOT DISTINCT FROM $2 \
                         ORDER BY created_ms DESC, id"
                    ),
                    &[&owner.tenant, &owner.subject],
                )
                .await
                .map_err(failed)?;
            Ok(rows
                .iter()
                .map(record_of)
                .filter(|task| task.visible_to(owner, now_ms))
                .collect())
        })
    }

    fn renew<'a>(&'a self, id: &'a str, lease_ms: u64, now_ms: u64) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let client = self.store.pool().get().await.map_err(failed)?;
            let renewed = client
                .execute(
                    "UPDATE fusion_tasks SET lease_ms = $2 WHERE id = $1 \
                     AND status NOT IN ('completed', 'failed', 'cancelled') \
                     AND created_ms + ttl_ms > $3",
                    &[&id, &stored(lease_ms), &stored(now_ms)],
                )
                .await
                .map_err(failed)?;
            Ok(renewed == 1)
        })
    }
}
