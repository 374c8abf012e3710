//! The embedded SQLite store behind the billing connector.
//!
//! One table, `invoices`, holds every column of [`Invoice`], including the ones the model hides
//! from agents (`tenant_id`, `webhook_secret`, `internal_flags`). The store reads them all; what
//! leaves the process is decided by the presenters, not here.
//!
//! # Layout
//!
//! * The database lives in `billing.sqlite3` inside the data directory given to
//!   [`Store::open`], in WAL mode with `synchronous=NORMAL` and a busy timeout.
//! * The first open seeds 1,000 invoices in one transaction (see [`Store::open`] for the formula);
//!   later opens find the schema version already set and leave the data alone.
//! * The invoice number (`n` in `INV-{n}`) is its own `INTEGER PRIMARY KEY` column, so listing is
//!   in numeric order (`INV-2` before `INV-10`) and new numbers are `max + 1` across all tenants.
//!
//! # Tenancy
//!
//! Every method takes the caller's tenant and every statement filters on it: a tenant never
//! sees, counts, voids or totals another tenant's invoices. An invoice of another tenant is
//! indistinguishable from one that does not exist.
//!
//! # Concurrency
//!
//! [`Store`] is `Send + Sync` and meant to be shared behind an `Arc`. Reads go to a small pool
//! of read-only connections (`max(2, available_parallelism)`), each behind its own mutex and
//! picked round-robin with `try_lock`, so concurrent readers do not queue on one connection;
//! writes go to a single write connection and run in `BEGIN IMMEDIATE` transactions. Every
//! statement is prepared once per connection and cached. Calls are synchronous and short (a
//! point read takes a few microseconds), so async handlers may call them directly.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, TransactionBehavior, params};

use fusion::Hidden;

use crate::model::{Invoice, Status};

/// File name of the database inside the data directory.
pub const DB_FILE_NAME: &str = "billing.sqlite3";

/// The tenant that owns the seeded invoices.
pub const SEED_TENANT: &str = "t_777";

/// How many invoices the seed creates (`INV-1` to `INV-1000`).
pub const SEED_INVOICES: i64 = 1000;

/// How long a connection waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Value of `PRAGMA user_version` once the schema exists and the seed is in.
const SCHEMA_VERSION: i64 = 1;

/// Statuses in the order [`Store::totals_by_status`] reports them; also the seed's `n % 3` table.
const ALL_STATUSES: [Status; 3] = [Status::Open, Status::Paid, Status::Voided];

/// The schema; idempotent, run by every open inside the seeding transaction.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS invoices (
    number         INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    tenant_id      TEXT    NOT NULL,
    customer_id    TEXT    NOT NULL,
    total_cents    INTEGER NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('open', 'paid', 'voided')),
    webhook_secret TEXT    NOT NULL,
    internal_flags TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS invoices_by_tenant ON invoices (tenant_id, number);
CREATE INDEX IF NOT EXISTS invoices_by_tenant_status ON invoices (tenant_id, status, number);
CREATE INDEX IF NOT EXISTS invoices_totals ON invoices (tenant_id, status, total_cents);
";

/// The columns [`invoice_from_row`] expects, in order.
macro_rules! invoice_columns {
    () => {
        "id, customer_id, total_cents, status, tenant_id, webhook_secret, internal_flags"
    };
}

const SQL_GET: &str = concat!(
    "SELECT ",
    invoice_columns!(),
    " FROM invoices WHERE id = ?1 AND tenant_id = ?2"
);
const SQL_LIST_ALL: &str = concat!(
    "SELECT ",
    invoice_columns!(),
    " FROM invoices WHERE tenant_id = ?1 ORDER BY number LIMIT ?2 OFFSET ?3"
);
const SQL_LIST_STATUS: &str = concat!(
    "SELECT ",
    invoice_columns!(),
    " FROM invoices WHERE tenant_id = ?1 AND status = ?2 ORDER BY number LIMIT ?3 OFFSET ?4"
);
const SQL_COUNT_ALL: &str = "SELECT COUNT(*) FROM invoices WHERE tenant_id = ?1";
const SQL_COUNT_STATUS: &str = "SELECT COUNT(*) FROM invoices WHERE tenant_id = ?1 AND status = ?2";
const SQL_TOTALS: &str = "SELECT status, COUNT(*), COALESCE(SUM(total_cents), 0) \
     FROM invoices WHERE tenant_id = ?1 GROUP BY status";
const SQL_VOID: &str = concat!(
    "UPDATE invoices SET status = 'voided' \
     WHERE id = ?1 AND tenant_id = ?2 AND status != 'voided' RETURNING ",
    invoice_columns!()
);
const SQL_SET_TOTAL: &str = concat!(
    "UPDATE invoices SET total_cents = ?3 \
     WHERE id = ?1 AND tenant_id = ?2 AND status = 'open' RETURNING ",
    invoice_columns!()
);
const SQL_NEXT_NUMBER: &str = "SELECT COALESCE(MAX(number), 0) + 1 FROM invoices";
const SQL_INSERT: &str = "INSERT INTO invoices \
     (number, id, tenant_id, customer_id, total_cents, status, webhook_secret, internal_flags) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// Why a store operation failed.
///
/// The text is meant for logs: the connector reports it to agents only as an internal error.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The data directory could not be created.
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// SQLite failed.
    Sqlite {
        /// The store operation that failed, such as `open` or `void`.
        operation: &'static str,
        /// What SQLite said.
        source: rusqlite::Error,
    },
}

impl StoreError {
    fn sqlite(operation: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        move |source| StoreError::Sqlite { operation, source }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::CreateDir { path, source } => write!(
                f,
                "billing store: cannot create data directory {}: {source}",
                path.display()
            ),
            StoreError::Sqlite { operation, source } => {
                write!(f, "billing store: {operation} failed: {source}")
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::CreateDir { source, .. } => Some(source),
            StoreError::Sqlite { source, .. } => Some(source),
        }
    }
}

/// What [`Store::void`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoidOutcome {
    /// The invoice was open or paid and is now voided; this is its new state.
    Voided(Invoice),
    /// The invoice was already voided; nothing changed.
    AlreadyVoided(Invoice),
    /// The tenant has no invoice with that id.
    NotFound,
}

/// The invoice store: a pool of read connections and one write connection to one database.
pub struct Store {
    /// Read-only connections; a reader takes the first free one from a rotating start.
    readers: Box<[Mutex<Connection>]>,
    /// Where the next reader starts looking.
    next_reader: AtomicUsize,
    /// The only connection that writes.
    writer: Mutex<Connection>,
    /// The file, or `None` for an in-memory store.
    path: Option<PathBuf>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("readers", &self.readers.len())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the store in `data_dir`, creating the directory and the database on first run.
    ///
    /// The database is `billing.sqlite3` in WAL mode. A new database is seeded, in one
    /// transaction, with invoices `INV-1` to `INV-1000` of tenant `t_777`: invoice `n` has
    /// customer `C-{n % 37}`, total `(n * 7919) % 100000` cents, status
    /// `["open", "paid", "voided"][n % 3]`, webhook secret `whsec_{n}` and internal flags
    /// `beta`. An existing database is never re-seeded and keeps every earlier write.
    ///
    /// Other processes may open the same database at the same time (SQLite's own locking keeps
    /// them consistent); see [`Store::open_exclusive`] for the faster single-process variant.
    ///
    /// # Errors
    ///
    /// [`StoreError::CreateDir`] if the directory cannot be created, [`StoreError::Sqlite`] if
    /// the database cannot be opened, migrated or seeded.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        Store::open_file(data_dir, false)
    }

    /// Like [`Store::open`], but locks the database to this process for the store's lifetime.
    ///
    /// SQLite's `unix-excl` VFS takes one exclusive file lock at the first access and then
    /// coordinates this process's connections in memory, which saves the two `fcntl` system
    /// calls every read transaction otherwise costs (a point read drops from about 7 µs to
    /// about 2.5 µs on a small VM). While the store is open, other processes (a second
    /// connector, the `sqlite3` shell) cannot read or write the database. On platforms without
    /// that VFS this is the same as [`Store::open`].
    ///
    /// # Errors
    ///
    /// As for [`Store::open`]; also [`StoreError::Sqlite`] (`database is locked`) if another
    /// process has the database open.
    pub fn open_exclusive(data_dir: &Path) -> Result<Store, StoreError> {
        Store::open_file(data_dir, cfg!(unix))
    }

    fn open_file(data_dir: &Path, exclusive: bool) -> Result<Store, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::CreateDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let path = data_dir.join(DB_FILE_NAME);
        let open = || {
            if exclusive {
                Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), c"unix-excl")
            } else {
                Connection::open_with_flags(&path, OpenFlags::default())
            }
        };
        Store::build(open, true, Some(path.clone())).map_err(StoreError::sqlite("open"))
    }

    /// Opens a fresh in-memory store with the same schema and seed as [`Store::open`].
    ///
    /// All the store's connections share one database (SQLite's `memdb` VFS under a name unique
    /// to this store, with a rollback journal instead of WAL), which lives until the store is
    /// dropped. Two in-memory stores never share data.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite cannot create or seed the database.
    pub fn open_in_memory() -> Result<Store, StoreError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let uri = format!(
            "file:/fusion-billing-{}-{}?vfs=memdb",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let open = || Connection::open_with_flags(&uri, OpenFlags::default());
        Store::build(open, false, None).map_err(StoreError::sqlite("open_in_memory"))
    }

    /// Opens the writer, prepares the database, then opens the readers.
    fn build(
        open: impl Fn() -> rusqlite::Result<Connection>,
        wal: bool,
        path: Option<PathBuf>,
    ) -> rusqlite::Result<Store> {
        let mut writer = open()?;
        configure(&writer)?;
        if wal {
            // Persistent in the file; must run outside a transaction. If the file system cannot
            // do WAL, SQLite keeps the rollback journal, which is slower but still correct.
            writer.query_row("PRAGMA journal_mode = WAL", [], |row| {
                row.get::<_, String>(0)
            })?;
        }
        initialize(&mut writer)?;

        let pool = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let readers = (0..pool)
            .map(|_| {
                let reader = open()?;
                configure(&reader)?;
                reader.pragma_update(None, "query_only", true)?;
                Ok(Mutex::new(reader))
            })
            .collect::<rusqlite::Result<Box<[_]>>>()?;

        Ok(Store {
            readers,
            next_reader: AtomicUsize::new(0),
            writer: Mutex::new(writer),
            path,
        })
    }

    /// The database file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The tenant's invoice `id`, or `None` if the tenant has no such invoice.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn get(&self, tenant: &str, id: &str) -> Result<Option<Invoice>, StoreError> {
        let conn = self.reader();
        let mut stmt = conn
            .prepare_cached(SQL_GET)
            .map_err(StoreError::sqlite("get"))?;
        stmt.query_row(params![id, tenant], invoice_from_row)
            .optional()
            .map_err(StoreError::sqlite("get"))
    }

    /// At most `limit` of the tenant's invoices, optionally only those with `status`, in
    /// ascending invoice number (`INV-2` before `INV-10`).
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn list(
        &self,
        tenant: &str,
        status: Option<Status>,
        limit: usize,
    ) -> Result<Vec<Invoice>, StoreError> {
        self.list_from(tenant, status, 0, limit)
    }

    /// Like [`Store::list`], after skipping the first `offset` matching invoices: the page
    /// that starts where a cut list stopped.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn list_from(
        &self,
        tenant: &str,
        status: Option<Status>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<Invoice>, StoreError> {
        list_from(&self.reader(), tenant, status, offset, limit).map_err(StoreError::sqlite("list"))
    }

    /// How many invoices the tenant has, optionally only those with `status`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn count(&self, tenant: &str, status: Option<Status>) -> Result<u64, StoreError> {
        count(&self.reader(), tenant, status).map_err(StoreError::sqlite("count"))
    }

    /// [`Store::list_from`] and [`Store::count`] with the same filters, read from one snapshot
    /// so that the count describes the list: a page of the tenant's invoices and how many
    /// there are in all.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn page(
        &self,
        tenant: &str,
        status: Option<Status>,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<Invoice>, u64), StoreError> {
        let mut conn = self.reader();
        let mut run = || -> rusqlite::Result<(Vec<Invoice>, u64)> {
            // A deferred read transaction: both statements see the same snapshot.
            let tx = conn.transaction()?;
            let invoices = list_from(&tx, tenant, status, offset, limit)?;
            let total = count(&tx, tenant, status)?;
            tx.commit()?;
            Ok((invoices, total))
        };
        run().map_err(StoreError::sqlite("page"))
    }

    /// Voids the tenant's invoice `id`, atomically.
    ///
    /// The change is a single conditional `UPDATE … WHERE status != 'voided'`, so of any number
    /// of concurrent voids of the same invoice exactly one returns [`VoidOutcome::Voided`] and
    /// the others [`VoidOutcome::AlreadyVoided`]. Another tenant's invoice is
    /// [`VoidOutcome::NotFound`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn void(&self, tenant: &str, id: &str) -> Result<VoidOutcome, StoreError> {
        let mut conn = self.writer();
        let mut run = || -> rusqlite::Result<VoidOutcome> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let voided = tx
                .prepare_cached(SQL_VOID)?
                .query_row(params![id, tenant], invoice_from_row)
                .optional()?;
            let outcome = match voided {
                Some(invoice) => VoidOutcome::Voided(invoice),
                None => match tx
                    .prepare_cached(SQL_GET)?
                    .query_row(params![id, tenant], invoice_from_row)
                    .optional()?
                {
                    Some(invoice) => VoidOutcome::AlreadyVoided(invoice),
                    None => VoidOutcome::NotFound,
                },
            };
            tx.commit()?;
            Ok(outcome)
        };
        run().map_err(StoreError::sqlite("void"))
    }

    /// Creates an open invoice for the tenant and returns it.
    ///
    /// Its number is one more than the highest number in the table, across all tenants (ids
    /// are global), taken inside a `BEGIN IMMEDIATE` transaction so that concurrent creates
    /// never share an id. The webhook secret is `whsec_{n}` and the internal flags are empty.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn create(
        &self,
        tenant: &str,
        customer_id: &str,
        total_cents: i64,
    ) -> Result<Invoice, StoreError> {
        let mut conn = self.writer();
        let mut run = || -> rusqlite::Result<Invoice> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let number: i64 = tx
                .prepare_cached(SQL_NEXT_NUMBER)?
                .query_row([], |row| row.get(0))?;
            let invoice = Invoice {
                id: format!("INV-{number}"),
                customer_id: customer_id.to_owned(),
                total_cents,
                status: Status::Open,
                tenant_id: Hidden::new(tenant.to_owned()),
                webhook_secret: Hidden::new(format!("whsec_{number}")),
                internal_flags: Hidden::new(String::new()),
            };
            insert(&tx, number, &invoice)?;
            tx.commit()?;
            Ok(invoice)
        };
        run().map_err(StoreError::sqlite("create"))
    }

    /// Sets the total of the tenant's invoice `id` if it is open, and returns the invoice as
    /// changed.
    ///
    /// `None` when the tenant has no open invoice with that id (it does not exist, belongs to
    /// another tenant, or is paid or voided): paid and voided totals are history and never
    /// change.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn set_total(
        &self,
        tenant: &str,
        id: &str,
        total_cents: i64,
    ) -> Result<Option<Invoice>, StoreError> {
        let mut conn = self.writer();
        let mut run = || -> rusqlite::Result<Option<Invoice>> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let changed = tx
                .prepare_cached(SQL_SET_TOTAL)?
                .query_row(params![id, tenant, total_cents], invoice_from_row)
                .optional()?;
            tx.commit()?;
            Ok(changed)
        };
        run().map_err(StoreError::sqlite("set_total"))
    }

    /// For each status, how many of the tenant's invoices have it and their total in cents.
    ///
    /// Always three entries, in the order open, paid, voided; a status the tenant has no
    /// invoice in reports `(status, 0, 0)`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn totals_by_status(&self, tenant: &str) -> Result<Vec<(Status, u64, i64)>, StoreError> {
        let conn = self.reader();
        let run = || -> rusqlite::Result<Vec<(Status, u64, i64)>> {
            let mut totals: Vec<(Status, u64, i64)> =
                ALL_STATUSES.iter().map(|&status| (status, 0, 0)).collect();
            let mut stmt = conn.prepare_cached(SQL_TOTALS)?;
            let rows = stmt.query_map(params![tenant], |row| {
                Ok((
                    row.get::<_, StatusColumn>(0)?.0,
                    row.get::<_, i64>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            })?;
            for row in rows {
                let (status, count, sum) = row?;
                if let Some(slot) = totals.iter_mut().find(|slot| slot.0 == status) {
                    slot.1 = count.unsigned_abs();
                    slot.2 = sum;
                }
            }
            Ok(totals)
        };
        run().map_err(StoreError::sqlite("totals_by_status"))
    }

    /// A read connection: the first free one from a rotating start, else wait for that start.
    fn reader(&self) -> MutexGuard<'_, Connection> {
        let count = self.readers.len();
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed) % count;
        for offset in 0..count {
            match self.readers[(start + offset) % count].try_lock() {
                Ok(guard) => return guard,
                Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        self.readers[start]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The write connection.
    ///
    /// A panic while it was held leaves no open transaction behind (an unfinished
    /// `Transaction` rolls back on drop), so a poisoned lock is still safe to use.
    fn writer(&self) -> MutexGuard<'_, Connection> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The tenant's invoices with `status` (any when `None`), `limit` of them after `offset`.
fn list_from(
    conn: &Connection,
    tenant: &str,
    status: Option<Status>,
    offset: usize,
    limit: usize,
) -> rusqlite::Result<Vec<Invoice>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    match status {
        None => conn
            .prepare_cached(SQL_LIST_ALL)?
            .query_map(params![tenant, limit, offset], invoice_from_row)?
            .collect(),
        Some(status) => conn
            .prepare_cached(SQL_LIST_STATUS)?
            .query_map(
                params![tenant, status.as_str(), limit, offset],
                invoice_from_row,
            )?
            .collect(),
    }
}

/// How many invoices the tenant has with `status` (any when `None`).
fn count(conn: &Connection, tenant: &str, status: Option<Status>) -> rusqlite::Result<u64> {
    let count: i64 = match status {
        None => conn
            .prepare_cached(SQL_COUNT_ALL)?
            .query_row(params![tenant], |row| row.get(0))?,
        Some(status) => conn
            .prepare_cached(SQL_COUNT_STATUS)?
            .query_row(params![tenant, status.as_str()], |row| row.get(0))?,
    };
    // COUNT(*) is never negative.
    Ok(count.unsigned_abs())
}

/// Per-connection settings.
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(32);
    // Per connection; with WAL, NORMAL only risks the last commits on power loss, never
    // corruption. (Meaningless for the in-memory database, harmless there.)
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(())
}

/// Creates what is missing of the schema and, the first time only, seeds it: one transaction.
fn initialize(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version < SCHEMA_VERSION {
        for n in 1..=SEED_INVOICES {
            let invoice = Invoice {
                id: format!("INV-{n}"),
                customer_id: format!("C-{}", n % 37),
                total_cents: (n * 7919) % 100_000,
                status: ALL_STATUSES[usize::try_from(n % 3).unwrap_or_default()],
                tenant_id: Hidden::new(SEED_TENANT.to_owned()),
                webhook_secret: Hidden::new(format!("whsec_{n}")),
                internal_flags: Hidden::new("beta".to_owned()),
            };
            insert(&tx, n, &invoice)?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()
}

/// Inserts `invoice` under `number`. The store is where hidden values are meant to go: each is
/// exposed here, on purpose.
fn insert(conn: &Connection, number: i64, invoice: &Invoice) -> rusqlite::Result<()> {
    conn.prepare_cached(SQL_INSERT)?.execute(params![
        number,
        invoice.id,
        invoice.tenant_id.expose(),
        invoice.customer_id,
        invoice.total_cents,
        invoice.status.as_str(),
        invoice.webhook_secret.expose(),
        invoice.internal_flags.expose(),
    ])?;
    Ok(())
}

/// Reads a row selected with `invoice_columns!()`.
fn invoice_from_row(row: &Row<'_>) -> rusqlite::Result<Invoice> {
    Ok(Invoice {
        id: row.get(0)?,
        customer_id: row.get(1)?,
        total_cents: row.get(2)?,
        status: row.get::<_, StatusColumn>(3)?.0,
        tenant_id: Hidden::new(row.get(4)?),
        webhook_secret: Hidden::new(row.get(5)?),
        internal_flags: Hidden::new(row.get(6)?),
    })
}

/// A `status` column value.
struct StatusColumn(Status);

impl FromSql for StatusColumn {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let text = value.as_str()?;
        Status::parse(text)
            .map(StatusColumn)
            .ok_or_else(|| FromSqlError::Other(format!("unknown invoice status {text:?}").into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Arc, Barrier};

    fn seed_status(n: i64) -> Status {
        [Status::Open, Status::Paid, Status::Voided][(n % 3) as usize]
    }

    fn seed_invoice(n: i64) -> Invoice {
        Invoice {
            id: format!("INV-{n}"),
            customer_id: format!("C-{}", n % 37),
            total_cents: (n * 7919) % 100_000,
            status: seed_status(n),
            tenant_id: Hidden::new("t_777".to_owned()),
            webhook_secret: Hidden::new(format!("whsec_{n}")),
            internal_flags: Hidden::new("beta".to_owned()),
        }
    }

    fn first_open(store: &Store) -> Invoice {
        store
            .list("t_777", Some(Status::Open), 1)
            .unwrap()
            .pop()
            .expect("the seed has open invoices")
    }

    #[test]
    fn store_and_error_are_thread_safe() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<Store>();
        assert_send_sync::<StoreError>();
        fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}
        assert_error::<StoreError>();
    }

    #[test]
    fn seed_is_correct() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(dir.path().join("billing.sqlite3").is_file());
        for n in [1, 2, 3, 36, 37, 38, 500, 999, 1000] {
            assert_eq!(
                store.get("t_777", &format!("INV-{n}")).unwrap(),
                Some(seed_invoice(n)),
                "INV-{n}"
            );
        }
        assert_eq!(store.get("t_777", "INV-0").unwrap(), None);
        assert_eq!(store.get("t_777", "INV-1001").unwrap(), None);
        assert_eq!(store.count("t_777", None).unwrap(), 1000);
        for status in ALL_STATUSES {
            let expected = (1..=1000).filter(|&n| seed_status(n) == status).count() as u64;
            assert_eq!(store.count("t_777", Some(status)).unwrap(), expected);
        }
        assert_eq!(store.count("t_other", None).unwrap(), 0);
        let all = store.list("t_777", None, 2000).unwrap();
        assert_eq!(all, (1..=1000).map(seed_invoice).collect::<Vec<_>>());
    }

    #[test]
    fn file_is_wal_with_seed_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("nested/data")).unwrap();
        let path = store.path().unwrap().to_path_buf();
        assert_eq!(path, dir.path().join("nested/data/billing.sqlite3"));
        let conn = Connection::open(&path).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn reopen_keeps_writes_and_does_not_reseed() {
        let dir = tempfile::tempdir().unwrap();
        let (created, voided) = {
            let store = Store::open(dir.path()).unwrap();
            let created = store.create("t_777", "C-5", 1234).unwrap();
            let voided = first_open(&store);
            assert!(matches!(
                store.void("t_777", &voided.id).unwrap(),
                VoidOutcome::Voided(_)
            ));
            (created, voided)
        };
        assert_eq!(created.id, "INV-1001");
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.count("t_777", None).unwrap(), 1001);
        assert_eq!(store.get("t_777", &created.id).unwrap(), Some(created));
        assert_eq!(
            store.get("t_777", &voided.id).unwrap().unwrap().status,
            Status::Voided
        );
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.count("t_777", None).unwrap(), 1001);
        assert_eq!(store.create("t_777", "C-6", 1).unwrap().id, "INV-1002");
    }

    #[test]
    fn exclusive_store_is_the_same_database() {
        let dir = tempfile::tempdir().unwrap();
        let created = {
            let store = Store::open_exclusive(dir.path()).unwrap();
            assert_eq!(store.get("t_777", "INV-7").unwrap(), Some(seed_invoice(7)));
            let created = store.create("t_777", "C-1", 77).unwrap();
            // All connections of the store see the write.
            for _ in 0..store.readers.len() * 2 {
                assert_eq!(
                    store.get("t_777", &created.id).unwrap().as_ref(),
                    Some(&created)
                );
            }
            created
        };
        // Once it is dropped, the lock is gone and a shared open sees the write.
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.get("t_777", &created.id).unwrap(), Some(created));
        assert_eq!(store.count("t_777", None).unwrap(), 1001);
    }

    #[test]
    fn tenants_are_isolated() {
        let store = Store::open_in_memory().unwrap();
        let other = store.create("t_other", "C-1", 500).unwrap();
        assert_eq!(other.id, "INV-1001");
        assert_eq!(other.tenant_id.expose(), "t_other");
        assert_eq!(other.status, Status::Open);
        assert_eq!(other.webhook_secret.expose(), "whsec_1001");
        assert_eq!(other.internal_flags.expose(), "");

        // t_777 cannot see, list, count, total or void it.
        assert_eq!(store.get("t_777", &other.id).unwrap(), None);
        assert_eq!(store.count("t_777", None).unwrap(), 1000);
        assert!(
            store
                .list("t_777", None, 5000)
                .unwrap()
                .iter()
                .all(|invoice| invoice.tenant_id.expose() == "t_777")
        );
        assert_eq!(
            store.void("t_777", &other.id).unwrap(),
            VoidOutcome::NotFound
        );
        assert_eq!(
            store.get("t_other", &other.id).unwrap(),
            Some(other.clone())
        );

        // t_other sees only its own invoice and cannot touch t_777's.
        assert_eq!(store.get("t_other", "INV-1").unwrap(), None);
        assert_eq!(store.count("t_other", None).unwrap(), 1);
        assert_eq!(
            store.page("t_other", None, 0, 20).unwrap(),
            (vec![other.clone()], 1)
        );
        assert_eq!(
            store.page("t_other", Some(Status::Open), 1, 20).unwrap(),
            (Vec::new(), 1)
        );
        let (page, total) = store.page("t_777", Some(Status::Open), 0, 20).unwrap();
        assert_eq!((page.len(), total), (20, 333));
        assert_eq!(
            store.list("t_other", None, 100).unwrap(),
            vec![other.clone()]
        );
        let open = first_open(&store);
        assert_eq!(
            store.void("t_other", &open.id).unwrap(),
            VoidOutcome::NotFound
        );
        assert_eq!(store.get("t_777", &open.id).unwrap(), Some(open));
        assert_eq!(
            store.totals_by_status("t_other").unwrap(),
            vec![
                (Status::Open, 1, 500),
                (Status::Paid, 0, 0),
                (Status::Voided, 0, 0)
            ]
        );

        // Void of an already-voided invoice by the wrong tenant is still NotFound.
        assert_eq!(
            store.void("t_other", "INV-2").unwrap(),
            VoidOutcome::NotFound
        );
        assert_eq!(
            store.totals_by_status("nobody").unwrap(),
            vec![
                (Status::Open, 0, 0),
                (Status::Paid, 0, 0),
                (Status::Voided, 0, 0)
            ]
        );
    }

    #[test]
    fn list_orders_numerically_filters_and_limits() {
        let store = Store::open_in_memory().unwrap();
        let ids = |invoices: Vec<Invoice>| -> Vec<String> {
            invoices.into_iter().map(|invoice| invoice.id).collect()
        };
        let expected: Vec<String> = (1..=12).map(|n| format!("INV-{n}")).collect();
        assert_eq!(ids(store.list("t_777", None, 12).unwrap()), expected);
        assert_eq!(
            ids(store.list("t_777", Some(Status::Open), 5).unwrap()),
            ["INV-3", "INV-6", "INV-9", "INV-12", "INV-15"]
        );
        assert_eq!(
            ids(store.list("t_777", Some(Status::Paid), 4).unwrap()),
            ["INV-1", "INV-4", "INV-7", "INV-10"]
        );
        assert!(store.list("t_777", None, 0).unwrap().is_empty());
        assert_eq!(
            ids(store.list_from("t_777", Some(Status::Open), 2, 3).unwrap()),
            ["INV-9", "INV-12", "INV-15"]
        );
        assert_eq!(
            ids(store.list_from("t_777", None, 10, 2).unwrap()),
            ["INV-11", "INV-12"]
        );
        let voided = store
            .list("t_777", Some(Status::Voided), usize::MAX)
            .unwrap();
        assert_eq!(voided.len(), 333);
        assert!(
            voided
                .iter()
                .all(|invoice| invoice.status == Status::Voided)
        );
        let numbers: Vec<i64> = voided
            .iter()
            .map(|invoice| invoice.id["INV-".len()..].parse().unwrap())
            .collect();
        assert!(numbers.windows(2).all(|pair| pair[0] < pair[1]));

        // New invoices land at the end, after INV-1000.
        let created = store.create("t_777", "C-1", 10).unwrap();
        let all = store.list("t_777", None, 2000).unwrap();
        assert_eq!(all.len(), 1001);
        assert_eq!(all.last(), Some(&created));
    }

    #[test]
    fn void_outcomes() {
        let store = Store::open_in_memory().unwrap();
        // INV-3 is open, INV-1 paid, INV-2 voided.
        let VoidOutcome::Voided(voided) = store.void("t_777", "INV-3").unwrap() else {
            panic!("INV-3 should void");
        };
        assert_eq!(
            voided,
            Invoice {
                status: Status::Voided,
                ..seed_invoice(3)
            }
        );
        assert_eq!(
            store.void("t_777", "INV-3").unwrap(),
            VoidOutcome::AlreadyVoided(voided.clone())
        );
        assert_eq!(store.get("t_777", "INV-3").unwrap(), Some(voided));
        assert!(matches!(
            store.void("t_777", "INV-1").unwrap(),
            VoidOutcome::Voided(Invoice {
                status: Status::Voided,
                ..
            })
        ));
        assert_eq!(
            store.void("t_777", "INV-2").unwrap(),
            VoidOutcome::AlreadyVoided(seed_invoice(2))
        );
        assert_eq!(
            store.void("t_777", "INV-99999").unwrap(),
            VoidOutcome::NotFound
        );
        assert_eq!(store.void("t_777", "").unwrap(), VoidOutcome::NotFound);
        assert_eq!(store.count("t_777", Some(Status::Voided)).unwrap(), 335);
    }

    #[test]
    fn set_total_changes_only_open_invoices_of_the_tenant() {
        let store = Store::open_in_memory().unwrap();
        // INV-3 is open, INV-1 paid, INV-2 voided.
        let changed = store.set_total("t_777", "INV-3", 4242).unwrap();
        let expected = Invoice {
            total_cents: 4242,
            ..seed_invoice(3)
        };
        assert_eq!(changed.as_ref(), Some(&expected));
        assert_eq!(store.get("t_777", "INV-3").unwrap(), Some(expected));
        for id in ["INV-1", "INV-2"] {
            assert_eq!(store.set_total("t_777", id, 1).unwrap(), None, "{id}");
        }
        assert_eq!(store.get("t_777", "INV-1").unwrap(), Some(seed_invoice(1)));
        assert_eq!(store.set_total("t_other", "INV-6", 1).unwrap(), None);
        assert_eq!(store.get("t_777", "INV-6").unwrap(), Some(seed_invoice(6)));
        assert_eq!(store.set_total("t_777", "INV-5000", 1).unwrap(), None);
    }

    #[test]
    fn concurrent_voids_void_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let target = first_open(&store).id;
        let barrier = Arc::new(Barrier::new(50));
        let handles: Vec<_> = (0..50)
            .map(|_| {
                let (store, barrier, target) = (store.clone(), barrier.clone(), target.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    store.void("t_777", &target).unwrap()
                })
            })
            .collect();
        let outcomes: Vec<VoidOutcome> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let voided = outcomes
            .iter()
            .filter(|o| matches!(o, VoidOutcome::Voided(_)))
            .count();
        let already = outcomes
            .iter()
            .filter(|o| matches!(o, VoidOutcome::AlreadyVoided(_)))
            .count();
        assert_eq!((voided, already), (1, 49));
        assert_eq!(
            store.get("t_777", &target).unwrap().unwrap().status,
            Status::Voided
        );
    }

    #[test]
    fn concurrent_creates_get_distinct_ids() {
        let dir = tempfile::tempdir().unwrap();
        for store in [
            Store::open_in_memory().unwrap(),
            Store::open(dir.path()).unwrap(),
        ] {
            let store = Arc::new(store);
            let barrier = Arc::new(Barrier::new(20));
            let handles: Vec<_> = (0..20)
                .map(|i| {
                    let (store, barrier) = (store.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        // Readers run alongside the writers.
                        assert!(store.get("t_777", "INV-1").unwrap().is_some());
                        store.create("t_new", &format!("C-{i}"), i).unwrap()
                    })
                })
                .collect();
            let created: Vec<Invoice> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            let ids: HashSet<&str> = created.iter().map(|invoice| invoice.id.as_str()).collect();
            let expected: HashSet<String> = (1001..=1020).map(|n| format!("INV-{n}")).collect();
            assert_eq!(ids, expected.iter().map(String::as_str).collect());
            assert_eq!(store.count("t_new", None).unwrap(), 20);
            for invoice in &created {
                assert_eq!(
                    store.get("t_new", &invoice.id).unwrap().as_ref(),
                    Some(invoice)
                );
            }
        }
    }

    #[test]
    fn totals_match_the_seed_formula() {
        let store = Store::open_in_memory().unwrap();
        let expected: Vec<(Status, u64, i64)> = ALL_STATUSES
            .iter()
            .map(|&status| {
                let matching: Vec<i64> = (1..=1000i64)
                    .filter(|&n| seed_status(n) == status)
                    .collect();
                let sum = matching.iter().map(|n| (n * 7919) % 100_000).sum();
                (status, matching.len() as u64, sum)
            })
            .collect();
        assert_eq!(store.totals_by_status("t_777").unwrap(), expected);
    }

    #[test]
    fn in_memory_connections_share_one_database_and_stores_do_not() {
        let first = Store::open_in_memory().unwrap();
        let second = Store::open_in_memory().unwrap();
        let created = first.create("t_777", "C-9", 9).unwrap();
        // Every read connection of `first` sees the write.
        for _ in 0..first.readers.len() * 2 {
            assert_eq!(
                first.get("t_777", &created.id).unwrap().as_ref(),
                Some(&created)
            );
        }
        assert_eq!(first.count("t_777", None).unwrap(), 1001);
        assert_eq!(second.get("t_777", &created.id).unwrap(), None);
        assert_eq!(second.count("t_777", None).unwrap(), 1000);
        assert!(first.path().is_none());
    }

    #[test]
    fn queries_use_indexes() {
        let store = Store::open_in_memory().unwrap();
        let conn = store.reader();
        let cases: [(&str, &[&dyn rusqlite::ToSql]); 6] = [
            (SQL_GET, &[&"INV-1", &"t_777"]),
            (SQL_LIST_ALL, &[&"t_777", &10, &20]),
            (SQL_LIST_STATUS, &[&"t_777", &"open", &10, &20]),
            (SQL_COUNT_ALL, &[&"t_777"]),
            (SQL_COUNT_STATUS, &[&"t_777", &"open"]),
            (SQL_TOTALS, &[&"t_777"]),
        ];
        for (sql, params) in cases {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let plan: Vec<String> = stmt
                .query_map(params, |row| row.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let plan = plan.join("; ");
            assert!(plan.contains("INDEX"), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}: {plan}");
        }
    }

    #[test]
    fn errors_display_the_operation() {
        let file = tempfile::NamedTempFile::new().unwrap();
        // A regular file where the directory should be.
        let err = Store::open(file.path()).unwrap_err();
        assert!(matches!(err, StoreError::CreateDir { .. }));
        assert!(
            err.to_string()
                .starts_with("billing store: cannot create data directory")
        );
        assert!(std::error::Error::source(&err).is_some());
    }
}
