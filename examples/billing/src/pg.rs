//! The PostgreSQL store behind the billing connector, for replicas that share one database.
//!
//! The same tables, seed and rules as the SQLite [`Store`](crate::Store):
//!
//! * [`PgStore::connect`] runs the migrations at start-up, in one transaction under an advisory
//!   lock, so that replicas starting together migrate and seed once. The seed is the SQLite
//!   one: `INV-1` to `INV-1000` of tenant `t_777`.
//! * Every statement filters on the caller's tenant.
//! * Every change writes its audit record (`audit_events`, the columns of
//!   [`SqliteAuditSink`](fusion::audit::SqliteAuditSink)) in its own transaction: an
//!   acknowledged write has its record, a failed one has none.
//! * A create takes a transaction-scoped advisory lock on its tenant before it reads the
//!   tenant's highest number and its idempotency keys, so that creates of one tenant on any
//!   number of replicas never share a number or a key.
//! * A void is one conditional `UPDATE … WHERE status <> 'voided'`: of concurrent voids of one
//!   invoice on any replicas, exactly one changes the row.
//!
//! Connections come from a [`deadpool_postgres`] pool; a call waits at most
//! [`BUSY_TIMEOUT`] for one, then fails with a transient error.
//! [`PgLock`] is the [`SerializationLock`](fusion::SerializationLock) of the replicas.

use std::str::FromStr as _;
use std::time::Duration;

use deadpool_postgres::Transaction;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use fusion::Hidden;
use fusion::audit::{AuditError, AuditRecord, AuditSink};
use fusion::{ToolError, codes};
use tokio_postgres::error::SqlState;
use tokio_postgres::{NoTls, Row};

use crate::model::{Invoice, Status};
use crate::store::{
    BUSY_TIMEOUT, Created, NewInvoice, SEED_INVOICES, SEED_TENANT, StoreError, VoidOutcome,
    failpoint, hold_for_tests,
};

/// The schema version [`PgStore::connect`] brings a database to.
const SCHEMA_VERSION: i32 = 1;

/// The advisory lock key of migrations (any constant; `fusion-billing-migrate` in ASCII).
const MIGRATION_LOCK: i64 = 0x6675_7369_6f6e_6d67;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS billing_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS invoices (
    seq            BIGSERIAL PRIMARY KEY,
    tenant_id      TEXT   NOT NULL,
    number         BIGINT NOT NULL,
    id             TEXT   NOT NULL,
    customer_id    TEXT   NOT NULL,
    total_cents    BIGINT NOT NULL,
    status         TEXT   NOT NULL CHECK (status IN ('open', 'paid', 'voided')),
    webhook_secret TEXT   NOT NULL,
    internal_flags TEXT   NOT NULL,
    UNIQUE (tenant_id, number),
    UNIQUE (tenant_id, id)
);
CREATE INDEX IF NOT EXISTS invoices_by_tenant_status ON invoices (tenant_id, status, number);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    tenant_id   TEXT   NOT NULL,
    action      TEXT   NOT NULL,
    key         TEXT   NOT NULL,
    request     TEXT   NOT NULL,
    invoice_id  TEXT   NOT NULL,
    at_unix_ms  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, action, key)
);
CREATE TABLE IF NOT EXISTS audit_events (
    seq              BIGSERIAL PRIMARY KEY,
    at_unix_ms       BIGINT NOT NULL,
    tool             TEXT   NOT NULL,
    action           TEXT   NOT NULL,
    principal        TEXT,
    tenant           TEXT,
    arguments_digest TEXT   NOT NULL,
    outcome          TEXT   NOT NULL,
    duration_us      BIGINT NOT NULL
);
CREATE OR REPLACE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN RAISE EXCEPTION 'audit_events is append-only'; END $$;
DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
";

const SEED: &str = "
INSERT INTO invoices (tenant_id, number, id, customer_id, total_cents, status, webhook_secret,
                      internal_flags)
SELECT $1, n, 'INV-' || n, 'C-' || (n % 37), (n * 7919) % 100000,
       (ARRAY['open', 'paid', 'voided'])[n % 3 + 1], 'whsec_' || n, 'beta'
FROM generate_series(1, $2::BIGINT) AS n ORDER BY n";

const COLUMNS: &str =
    "id, customer_id, total_cents, status, tenant_id, webhook_secret, internal_flags";

/// The action an idempotency key of a create belongs to.
const CREATE_ACTION: &str = "billing.create_invoice";

/// The invoice store on PostgreSQL: a pool of connections to one database that any number of
/// replicas share.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("PgStore")
            .field("pool", &self.pool.status())
            .finish()
    }
}

/// A pool of at most `size` connections to `url`, waiting at most `wait` for one.
fn pool(url: &str, size: usize, wait: Duration, options: Option<&str>) -> Result<Pool, StoreError> {
    let mut config =
        tokio_postgres::Config::from_str(url).map_err(StoreError::postgres("connect"))?;
    config.connect_timeout(Duration::from_secs(5));
    if let Some(options) = options {
        config.options(options);
    }
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(|error| StoreError::Pool {
            operation: "connect",
            source: error.to_string(),
        })
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`) with a pool of `size` connections,
    /// creates or migrates the schema and, on an empty database, seeds the demo invoices.
    ///
    /// # Errors
    ///
    /// [`StoreError::Pool`] or [`StoreError::Postgres`] if the database cannot be reached or
    /// migrated.
    pub async fn connect(url: &str, size: usize) -> Result<PgStore, StoreError> {
        let store = PgStore {
            pool: pool(url, size, BUSY_TIMEOUT, None)?,
        };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.client("migrate").await?;
        let run = async {
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await?;
            tx.batch_execute(SCHEMA).await?;
            tx.batch_execute(crate::pg_tasks::SCHEMA).await?;
            let version: Option<i32> = tx
                .query_opt("SELECT max(version) FROM billing_schema", &[])
                .await?
                .and_then(|row| row.get(0));
            if version.is_none() {
                tx.execute(SEED, &[&SEED_TENANT, &SEED_INVOICES]).await?;
                tx.execute(
                    "INSERT INTO billing_schema (version) VALUES ($1)",
                    &[&SCHEMA_VERSION],
                )
                .await?;
            }
            tx.commit().await
        };
        run.await.map_err(StoreError::postgres("migrate"))
    }

    /// Whether the database answers: one round trip on a pooled connection.
    ///
    /// # Errors
    ///
    /// As for any call: the pool is exhausted or the database is down.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let client = self.client("ping").await?;
        client
            .simple_query("SELECT 1")
            .await
            .map_err(StoreError::postgres("ping"))?;
        Ok(())
    }

    /// The pool, for the [`PgLock`] and [`PgAuditSink`] of the same database.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(&self, operation: &'static str) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|error| StoreError::Pool {
            operation,
            source: error.to_string(),
        })
    }

    /// The tenant's invoice `id`, or `None`.
    ///
    /// # Errors
    ///
    /// See [`StoreError::is_transient`].
    pub async fn get(&self, tenant: &str, id: &str) -> Result<Option<Invoice>, StoreError> {
        let client = self.client("get").await?;
        let sql = format!("SELECT {COLUMNS} FROM invoices WHERE tenant_id = $1 AND id = $2");
        let statement = client
            .prepare_cached(&sql)
            .await
            .map_err(StoreError::postgres("get"))?;
        client
            .query_opt(&statement, &[&tenant, &id])
            .await
            .map_err(StoreError::postgres("get"))?
            .map(|row| invoice_from_row(&row))
            .transpose()
    }

    /// A page of the tenant's invoices (optionally with `status`) in invoice number order, and
    /// how many match in all, from one snapshot.
    ///
    /// # Errors
    ///
    /// See [`StoreError::is_transient`].
    pub async fn page(
        &self,
        tenant: &str,
        status: Option<Status>,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<Invoice>, u64), StoreError> {
        let mut client = self.client("page").await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let status = status.map(Status::as_str);
        let run = async {
            let tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let rows = tx
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM invoices WHERE tenant_id = $1 \
                         AND ($2::TEXT IS NULL OR status = $2) ORDER BY number LIMIT $3 OFFSET $4"
                    ),
                    &[&tenant, &status, &limit, &offset],
                )
                .await?;
            let total: i64 = tx
                .query_one(
                    "SELECT count(*) FROM invoices WHERE tenant_id = $1 \
                     AND ($2::TEXT IS NULL OR status = $2)",
                    &[&tenant, &status],
                )
                .await?
                .get(0);
            tx.commit().await?;
            Ok::<_, Failure>((rows, total))
        };
        let (rows, total) = run.await.map_err(StoreError::postgres("page"))?;
        let invoices = rows
            .iter()
            .map(invoice_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((invoices, total.unsigned_abs()))
    }

    /// For each status (open, paid, voided), how many of the tenant's invoices have it and
    /// their total in cents.
    ///
    /// # Errors
    ///
    /// See [`StoreError::is_transient`].
    pub async fn totals_by_status(
        &self,
        tenant: &str,
    ) -> Result<Vec<(Status, u64, i64)>, StoreError> {
        let client = self.client("totals_by_status").await?;
        let rows = client
            .query(
                "SELECT status, count(*), COALESCE(sum(total_cents), 0)::BIGINT \
                 FROM invoices WHERE tenant_id = $1 GROUP BY status",
                &[&tenant],
            )
            .await
            .map_err(StoreError::postgres("totals_by_status"))?;
        let mut totals: Vec<(Status, u64, i64)> = [Status::Open, Status::Paid, Status::Voided]
            .into_iter()
            .map(|status| (status, 0, 0))
            .collect();
        for row in rows {
            let status: String = row.get(0);
            let count: i64 = row.get(1);
            if let Some(slot) = totals.iter_mut().find(|slot| slot.0.as_str() == status) {
                slot.1 = count.unsigned_abs();
                slot.2 = row.get(2);
            }
        }
        Ok(totals)
    }

    /// At most `limit` of the tenant's invoice ids that start with `prefix` (case-sensitive),
    /// in invoice number order; as [`Store::ids_with_prefix`](crate::Store::ids_with_prefix).
    ///
    /// # Errors
    ///
    /// See [`StoreError::is_transient`].
    pub async fn ids_with_prefix(
        &self,
        tenant: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let client = self.client("ids_with_prefix").await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = client
            .query(
                "SELECT id FROM invoices WHERE tenant_id = $1 \
                 AND left(id, char_length($2::TEXT)) = $2::TEXT ORDER BY number LIMIT $3",
                &[&tenant, &prefix, &limit],
            )
            .await
            .map_err(StoreError::postgres("ids_with_prefix"))?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// Voids the tenant's invoice `id` with its audit record, in one transaction; as
    /// [`Store::void`](crate::Store::void).
    ///
    /// # Errors
    ///
    /// See [`StoreError::is_transient`].
    pub async fn void(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditRecord,
    ) -> Result<VoidOutcome, StoreError> {
        let mut client = self.client("void").await?;
        let run = async {
            let tx = client.transaction().await?;
            let voided = tx
                .query_opt(
                    &format!(
                        "UPDATE invoices SET status = 'voided' WHERE tenant_id = $1 AND id = $2 \
                         AND status <> 'voided' RETURNING {COLUMNS}"
                    ),
                    &[&tenant, &id],
                )
                .await?;
            let (outcome, row) = match voided {
                Some(row) => {
                    record(&tx, audit).await?;
                    (Some(true), Some(row))
                }
                None => {
                    let row = tx
                        .query_opt(
                            &format!(
                                "SELECT {COLUMNS} FROM invoices WHERE tenant_id = $1 AND id = $2"
                            ),
                            &[&tenant, &id],
                        )
                        .await?;
                    (row.as_ref().map(|_| false), row)
                }
            };
            commit(tx).await?;
            Ok::<_, Failure>((outcome, row))
        };
        let (outcome, row) = run.await.map_err(StoreError::postgres("void"))?;
        Ok(match (outcome, row) {
            (Some(true), Some(row)) => VoidOutcome::Voided(invoice_from_row(&row)?),
            (Some(false), Some(row)) => VoidOutcome::AlreadyVoided(invoice_from_row(&row)?),
            _ => VoidOutcome::NotFound,
        })
    }

    /// Creates an open invoice for the tenant with its audit record (and its idempotency key);
    /// as [`Store::create`](crate::Store::create).
    ///
    /// # Errors
    ///
    /// See [`StoreError::is_transient`].
    pub async fn create(
        &self,
        tenant: &str,
        new: &NewInvoice<'_>,
        audit: &AuditRecord,
    ) -> Result<Created, StoreError> {
        let request = new.idempotency_key.map(|_| {
            fusion::audit::arguments_digest(&fusion::serde_json::json!({
                "customer_id": new.customer_id,
                "total_cents": new.total_cents,
            }))
        });
        let mut client = self.client("create").await?;
        let run = async {
            let tx = client.transaction().await?;
            // One create of a tenant at a time, on every replica: numbers and keys are read
            // and written under it. Released by the commit or the rollback.
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('billing.create/' || $1, 0))",
                &[&tenant],
            )
            .await?;
            if let (Some(key), Some(request)) = (new.idempotency_key, &request) {
                let seen = tx
                    .query_opt(
                        "SELECT request, invoice_id FROM idempotency_keys \
                         WHERE tenant_id = $1 AND action = $2 AND key = $3",
                        &[&tenant, &CREATE_ACTION, &key],
                    )
                    .await?;
                if let Some(seen) = seen {
                    let earlier: String = seen.get(0);
                    if earlier != *request {
                        return Ok(Err(Created::KeyReused));
                    }
                    let invoice_id: String = seen.get(1);
                    let row = tx
                        .query_one(
                            &format!(
                                "SELECT {COLUMNS} FROM invoices WHERE tenant_id = $1 AND id = $2"
                            ),
                            &[&tenant, &invoice_id],
                        )
                        .await?;
                    let mut replayed = audit.clone();
                    replayed.outcome = "ok_replayed";
                    record(&tx, &replayed).await?;
                    commit(tx).await?;
                    return Ok(Ok((row, false)));
                }
            }
            let number: i64 = tx
                .query_one(
                    "SELECT COALESCE(max(number), 0) + 1 FROM invoices WHERE tenant_id = $1",
                    &[&tenant],
                )
                .await?
                .get(0);
            let id = format!("INV-{number}");
            let secret = format!("whsec_{}", uuid::Uuid::new_v4().simple());
            let row = tx
                .query_one(
                    &format!(
                        "INSERT INTO invoices (tenant_id, number, id, customer_id, total_cents, \
                         status, webhook_secret, internal_flags) \
                         VALUES ($1, $2, $3, $4, $5, 'open', $6, '') RETURNING {COLUMNS}"
                    ),
                    &[
                        &tenant,
                        &number,
                        &id,
                        &new.customer_id,
                        &new.total_cents,
                        &secret,
                    ],
                )
                .await?;
            if let (Some(key), Some(request)) = (new.idempotency_key, &request) {
                tx.execute(
                    "INSERT INTO idempotency_keys \
                     (tenant_id, action, key, request, invoice_id, at_unix_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                    &[&tenant, &CREATE_ACTION, &key, request, &id, &unix_ms(audit)],
                )
                .await?;
            }
            record(&tx, audit).await?;
            commit(tx).await?;
            Ok::<_, Failure>(Ok((row, true)))
        };
        match run.await.map_err(StoreError::postgres("create"))? {
            Err(created) => Ok(created),
            Ok((row, true)) => Ok(Created::New(invoice_from_row(&row)?)),
            Ok((row, false)) => Ok(Created::Replayed(invoice_from_row(&row)?)),
        }
    }

    /// Sets the total of the tenant's open invoice `id` with its audit record; as
    /// [`Store::set_total`](crate::Store::set_total).
    ///
    /// # Errors
    ///
    /// See [`StoreError::is_transient`].
    pub async fn set_total(
        &self,
        tenant: &str,
        id: &str,
        total_cents: i64,
        audit: &AuditRecord,
    ) -> Result<Option<Invoice>, StoreError> {
        let mut client = self.client("set_total").await?;
        let run = async {
            let tx = client.transaction().await?;
            let changed = tx
                .query_opt(
                    &format!(
                        "UPDATE invoices SET total_cents = $3 WHERE tenant_id = $1 AND id = $2 \
                         AND status = 'open' RETURNING {COLUMNS}"
                    ),
                    &[&tenant, &id, &total_cents],
                )
                .await?;
            if changed.is_some() {
                record(&tx, audit).await?;
            }
            commit(tx).await?;
            Ok::<_, Failure>(changed)
        };
        run.await
            .map_err(StoreError::postgres("set_total"))?
            .map(|row| invoice_from_row(&row))
            .transpose()
    }
}

/// Appends `audit` to the trail inside the transaction of the change it records.
async fn record(tx: &Transaction<'_>, audit: &AuditRecord) -> Result<(), tokio_postgres::Error> {
    failpoint("between-change-and-audit");
    append(tx, audit).await
}

async fn append(
    client: &impl deadpool_postgres::GenericClient,
    audit: &AuditRecord,
) -> Result<(), tokio_postgres::Error> {
    let duration = i64::try_from(audit.duration.as_micros()).unwrap_or(i64::MAX);
    client
        .execute(
            "INSERT INTO audit_events (at_unix_ms, tool, action, principal, tenant, \
             arguments_digest, outcome, duration_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &unix_ms(audit),
                &audit.tool,
                &audit.action,
                &audit.principal,
                &audit.tenant,
                &audit.arguments_digest,
                &audit.outcome,
                &duration,
            ],
        )
        .await
        .map(|_| ())
}

async fn commit(tx: Transaction<'_>) -> Result<(), Failure> {
    if cfg!(debug_assertions) {
        // The SQLite store's test hook, off the async workers.
        tokio::task::block_in_place(hold_for_tests);
    }
    tx.commit().await.map_err(Failure::Commit)?;
    failpoint("after-commit");
    Ok(())
}

/// Where a PostgreSQL call failed: before `COMMIT` was sent, when the transaction is known not
/// to have happened (PostgreSQL rolls back a transaction whose connection drops), or at the
/// `COMMIT`, when a lost connection leaves the outcome unknown.
#[derive(Debug)]
pub(crate) enum Failure {
    Statement(tokio_postgres::Error),
    Commit(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Self {
        Failure::Statement(error)
    }
}

fn unix_ms(audit: &AuditRecord) -> i64 {
    audit
        .at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// Reads a row selected with [`COLUMNS`]. The store is where hidden values come from.
fn invoice_from_row(row: &Row) -> Result<Invoice, StoreError> {
    let status: String = row.get(3);
    let status = Status::parse(&status).ok_or(StoreError::Corrupt {
        operation: "read",
        what: "unknown invoice status",
    })?;
    Ok(Invoice {
        id: row.get(0),
        customer_id: row.get(1),
        total_cents: row.get(2),
        status,
        tenant_id: Hidden::new(row.get(4)),
        webhook_secret: Hidden::new(row.get(5)),
        internal_flags: Hidden::new(row.get(6)),
    })
}

/// The audit sink of the calls that record through the server (those that are not invoice
/// changes, such as reminders), into the same `audit_events` table.
#[derive(Debug, Clone)]
pub struct PgAuditSink {
    store: PgStore,
}

impl PgAuditSink {
    /// A sink writing to `store`'s database.
    pub fn new(store: PgStore) -> Self {
        PgAuditSink { store }
    }
}

impl AuditSink for PgAuditSink {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        // On the blocking pool (`is_blocking`), which runs inside the runtime.
        let handle = tokio::runtime::Handle::current();
        handle.block_on(async {
            let client = self
                .store
                .client("audit")
                .await
                .map_err(|error| AuditError::new(error.to_string()))?;
            append(&client, record)
                .await
                .map_err(|error| AuditError::new(format!("audit_events: {error}")))
        })
    }

    fn is_blocking(&self) -> bool {
        true
    }
}

/// The [`SerializationLock`](fusion::SerializationLock) of replicas on one PostgreSQL
/// database: a session advisory lock per key (`pg_advisory_lock(hashtextextended(key, 0))`),
/// held on a connection of its own pool for the whole call.
///
/// Its pool is separate from the store's, so that calls holding or waiting for locks never
/// take the connections their own transactions need. A wait longer than `lock_timeout`
/// (5 s) fails the call with a retryable `SERVER_BUSY`; a database that cannot be reached,
/// with the store's retryable `StoreUnavailable`. Two keys with the same 64-bit hash
/// share a lock: they are serialized together, which is slower but never wrong.
#[derive(Clone)]
pub struct PgLock {
    pool: Pool,
}

impl std::fmt::Debug for PgLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLock")
            .field("pool", &self.pool.status())
            .finish()
    }
}

impl PgLock {
    /// A lock on the database at `url`, with at most `size` locks held or awaited at once by
    /// this process.
    ///
    /// # Errors
    ///
    /// [`StoreError::Pool`] if the URL is not valid.
    pub fn new(url: &str, size: usize) -> Result<PgLock, StoreError> {
        Ok(PgLock {
            pool: pool(
                url,
                size,
                Duration::from_secs(5),
                Some("-c lock_timeout=5s"),
            )?,
        })
    }
}

/// A held advisory lock: unlocked, and its connection given back, when dropped.
struct Held {
    client: Option<Object>,
    key: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let key = std::mem::take(&mut self.key);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to unlock with: close the session, which releases its locks.
            drop(Object::take(client));
            return;
        };
        runtime.spawn(async move {
            let unlocked = client
                .query_one(
                    "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                    &[&key],
                )
                .await
                .map(|row| row.get::<_, bool>(0));
            if !matches!(unlocked, Ok(true)) {
                // Never pool a session that may still hold the lock: closing it releases it.
                tracing::warn!(?unlocked, "advisory unlock failed; closing its connection");
                drop(Object::take(client));
            }
        });
    }
}

impl fusion::SerializationLock for PgLock {
    fn acquire<'a>(
        &'a self,
        key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Box<dyn Send + 'static>, ToolError>> {
        Box::pin(async move {
            // Another replica holding the lock past `lock_timeout` is a busy item; a database
            // that cannot be reached (down, restarting, out of connection slots) is the store
            // being unavailable, as the store's own calls say.
            let unavailable = |why: String| {
                tracing::warn!(%why, "the shared serialization lock cannot be taken");
                ToolError::from(crate::BillingError::StoreUnavailable)
            };
            let client = self
                .pool
                .get()
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            client
                .execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&key])
                .await
                .map_err(|error| {
                    if error.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) {
                        tracing::warn!(%error, "the shared serialization lock is held elsewhere");
                        ToolError::new(
                            codes::SERVER_BUSY,
                            "Another change of the same item is in progress on another server.",
                        )
                        .with_recovery("Retry in a moment with the same arguments.")
                        .with_retryable(true)
                        .with_retry_after(Duration::from_secs(1))
                    } else {
                        unavailable(error.to_string())
                    }
                })?;
            Ok(Box::new(Held {
                client: Some(client),
                key: key.to_owned(),
            }) as Box<dyn Send>)
        })
    }
}

/// Whether a PostgreSQL error means nothing was done and the same call may succeed later.
/// Whether the connection itself failed: closed, cut (an I/O error), or ended by the server
/// (terminated, shutting down, a connection exception).
pub(crate) fn connection_lost(error: &tokio_postgres::Error) -> bool {
    let io = std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>());
    error.is_closed()
        || io
        || error.code().is_some_and(|code| {
            code == &SqlState::ADMIN_SHUTDOWN
                || code == &SqlState::CRASH_SHUTDOWN
                || code.code().starts_with("08")
        })
}

pub(crate) fn transient(error: &tokio_postgres::Error) -> bool {
    error.code().is_some_and(|code| {
        [
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::DISK_FULL,
        ]
        .contains(code)
    })
}
