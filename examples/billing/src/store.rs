//! The embedded SQLite store behind the billing connector.
//!
//! One table, `invoices`, holds every column of [`Invoice`], including the ones the model hides
//! from agents (`tenant_id`, `webhook_secret`, `internal_flags`). The store reads them all; what
//! leaves the process is decided by the presenters, not here.
//!
//! # Layout
//!
//! * The database lives in `billing.sqlite3` inside the data directory given to
//!   [`Store::open`], in WAL mode with `synchronous=NORMAL` and a busy timeout. The directory is
//!   created `0700` and the database file `0600` (SQLite gives its `-wal` and `-shm` files the
//!   same mode): it holds every tenant's invoices and webhook secrets.
//! * The first open seeds 1,000 invoices in one transaction (see [`Store::open`] for the formula);
//!   later opens find the schema version already set and leave the data alone. A database of
//!   schema version 1 (invoice numbers shared by all tenants) is migrated in place: its
//!   invoices keep their ids.
//! * Invoice numbers (`n` in `INV-{n}`) are per tenant: a tenant's next number is one more than
//!   its own highest, so a number says nothing about any other tenant. Listing is in numeric
//!   order (`INV-2` before `INV-10`).
//! * Every change writes its audit record (the `audit_events` table of
//!   [`SqliteAuditSink`]) in its own transaction: a change and
//!   its record commit together or not at all. A create's idempotency key is kept in the same
//!   transaction too (`idempotency_keys`, per tenant), so a retry after a crash finds it.
//!
//! # Tenancy
//!
//! Every method takes the caller's tenant and every statement filters on it: a tenant never
//! sees, counts, voids or totals another tenant's invoices. An invoice of another tenant is
//! indistinguishable from one that does not exist.
//!
//! # Concurrency and waiting
//!
//! [`Store`] is `Send + Sync` and meant to be shared behind an `Arc`. Reads go to a small pool
//! of read-only connections (`max(2, available_parallelism)`), each behind its own mutex and
//! picked round-robin with `try_lock`, so concurrent readers do not queue on one connection;
//! writes go to a single write connection and run in `BEGIN IMMEDIATE` transactions. Every
//! statement is prepared once per connection and cached.
//!
//! Calls are synchronous and may wait: for the write connection, for a lock another process
//! holds, for the disk. Async handlers run them with [`fusion::blocking`], never directly on
//! an async worker. A write waits at most [`BUSY_TIMEOUT`] in all (for the write connection
//! and for SQLite's lock together); past it, or when the disk is full, it fails with an error
//! whose [`StoreError::is_transient`] is true and nothing is written. The timeout is short on
//! purpose: a held lock shows up as retryable errors within a second, not as calls that hang.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};
use rusqlite::{
    Connection, ErrorCode, OpenFlags, OptionalExtension, Row, Transaction, TransactionBehavior,
    params,
};

use fusion::Hidden;
use fusion::audit::{AuditRecord, SqliteAuditSink};

use crate::model::{Invoice, Status};

/// File name of the database inside the data directory.
pub const DB_FILE_NAME: &str = "billing.sqlite3";

/// The tenant that owns the seeded invoices.
pub const SEED_TENANT: &str = "t_777";

/// How many invoices the seed creates (`INV-1` to `INV-1000`).
pub const SEED_INVOICES: i64 = 1000;

/// How long a call waits for the database (the write connection, a lock another process
/// holds) before it fails with a transient error. Short next to what an agent waits for, so
/// that a held lock shows as retryable errors, never as a frozen server.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(1);

/// Value of `PRAGMA user_version` once the schema exists and the seed is in: 2 since invoice
/// numbers are per tenant.
const SCHEMA_VERSION: i64 = 2;

/// Statuses in the order [`Store::totals_by_status`] reports them; also the seed's `n % 3` table.
pub(crate) const ALL_STATUSES: [Status; 3] = [Status::Open, Status::Paid, Status::Voided];

/// The schema (version 2); idempotent, run by every open inside the initializing transaction.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS invoices (
    seq            INTEGER PRIMARY KEY,
    tenant_id      TEXT    NOT NULL,
    number         INTEGER NOT NULL,
    id             TEXT    NOT NULL,
    customer_id    TEXT    NOT NULL,
    total_cents    INTEGER NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('open', 'paid', 'voided')),
    webhook_secret TEXT    NOT NULL,
    internal_flags TEXT    NOT NULL,
    UNIQUE (tenant_id, number),
    UNIQUE (tenant_id, id)
);
CREATE INDEX IF NOT EXISTS invoices_by_tenant_status ON invoices (tenant_id, status, number);
CREATE INDEX IF NOT EXISTS invoices_totals ON invoices (tenant_id, status, total_cents);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    tenant_id   TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    request     TEXT    NOT NULL,
    invoice_id  TEXT    NOT NULL,
    at_unix_ms  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, action, key)
) WITHOUT ROWID;
";

/// From version 1, where `number` was the primary key and numbers were shared by all tenants:
/// the same rows, the same ids (agents may hold them), in the version 2 table. Each tenant's
/// next number is then one more than its own highest.
const MIGRATE_FROM_V1: &str = "
DROP INDEX IF EXISTS invoices_by_tenant;
DROP INDEX IF EXISTS invoices_by_tenant_status;
DROP INDEX IF EXISTS invoices_totals;
ALTER TABLE invoices RENAME TO invoices_v1;
";
const MIGRATE_FROM_V1_COPY: &str = "
INSERT INTO invoices (seq, tenant_id, number, id, customer_id, total_cents, status,
                      webhook_secret, internal_flags)
    SELECT number, tenant_id, number, id, customer_id, total_cents, status,
           webhook_secret, internal_flags
    FROM invoices_v1 ORDER BY number;
DROP TABLE invoices_v1;
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
    " FROM invoices WHERE tenant_id = ?2 AND id = ?1"
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
// An exact, case-sensitive prefix (LIKE would ignore ASCII case and need escaping).
const SQL_IDS_WITH_PREFIX: &str = "SELECT id FROM invoices WHERE tenant_id = ?1 \
     AND substr(id, 1, length(?2)) = ?2 ORDER BY number LIMIT ?3";
const SQL_VOID: &str = concat!(
    "UPDATE invoices SET status = 'voided' \
     WHERE tenant_id = ?2 AND id = ?1 AND status != 'voided' RETURNING ",
    invoice_columns!()
);
const SQL_SET_TOTAL: &str = concat!(
    "UPDATE invoices SET total_cents = ?3 \
     WHERE tenant_id = ?2 AND id = ?1 AND status = 'open' RETURNING ",
    invoice_columns!()
);
const SQL_NEXT_NUMBER: &str =
    "SELECT COALESCE(MAX(number), 0) + 1 FROM invoices WHERE tenant_id = ?1";
const SQL_INSERT: &str = "INSERT INTO invoices \
     (tenant_id, number, id, customer_id, total_cents, status, webhook_secret, internal_flags) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
const SQL_FIND_KEY: &str = "SELECT request, invoice_id FROM idempotency_keys \
     WHERE tenant_id = ?1 AND action = ?2 AND key = ?3";
const SQL_KEEP_KEY: &str = "INSERT INTO idempotency_keys \
     (tenant_id, action, key, request, invoice_id, at_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// The action an idempotency key of a create belongs to.
const CREATE_ACTION: &str = "billing.create_invoice";

/// Why a store operation failed.
///
/// The text is meant for logs: the connector reports it to agents as a retryable
/// `StoreUnavailable` when [`StoreError::is_transient`], else as an internal error.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The data directory could not be created, or its permissions set.
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// The database file could not be created with, or restricted to, owner-only permissions.
    Permissions {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// The write connection stayed taken by other writes (all waiting on the database) for the
    /// whole [`BUSY_TIMEOUT`]; nothing was written.
    Busy {
        /// The store operation that gave up, such as `create`.
        operation: &'static str,
    },
    /// SQLite failed.
    Sqlite {
        /// The store operation that failed, such as `open` or `void`.
        operation: &'static str,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// No PostgreSQL connection could be had within [`BUSY_TIMEOUT`] (all in use, or the
    /// database unreachable); nothing was sent.
    Pool {
        /// The store operation that gave up.
        operation: &'static str,
        /// What the pool said.
        source: String,
    },
    /// PostgreSQL failed.
    Postgres {
        /// The store operation that failed.
        operation: &'static str,
        /// What PostgreSQL (or the connection to it) said.
        source: tokio_postgres::Error,
    },
    /// The connection to PostgreSQL was lost while the change was being committed: it may or
    /// may not have been applied (with its audit record, in the same transaction).
    CommitUnknown {
        /// The store operation whose commit was cut off.
        operation: &'static str,
        /// What the connection said.
        source: tokio_postgres::Error,
    },
    /// A value read back is not one the store writes.
    Corrupt {
        /// The store operation that read it.
        operation: &'static str,
        /// What was wrong.
        what: &'static str,
    },
}

impl StoreError {
    fn sqlite(operation: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        move |source| StoreError::Sqlite { operation, source }
    }

    pub(crate) fn postgres<E: Into<crate::pg::Failure>>(
        operation: &'static str,
    ) -> impl FnOnce(E) -> StoreError {
        move |failure| match failure.into() {
            crate::pg::Failure::Statement(source) => StoreError::Postgres { operation, source },
            // PostgreSQL's answer to the COMMIT (a serialization failure, say) means it rolled
            // back; no answer at all leaves the outcome unknown.
            crate::pg::Failure::Commit(source) if crate::pg::connection_lost(&source) => {
                StoreError::CommitUnknown { operation, source }
            }
            crate::pg::Failure::Commit(source) => StoreError::Postgres { operation, source },
        }
    }

    /// Whether the same call may succeed later: the database stayed locked or busy past
    /// [`BUSY_TIMEOUT`], or it (or the disk) is full. Nothing was written: the transaction did
    /// not start, or it rolled back.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Busy { .. } => true,
            StoreError::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::DiskFull)
            ),
            // No connection: nothing was sent.
            StoreError::Pool { .. } => true,
            // A connection lost before the commit rolled its transaction back: nothing was
            // written. One lost during the commit is `CommitUnknown`, not transient.
            StoreError::Postgres { source, .. } => {
                crate::pg::transient(source) || crate::pg::connection_lost(source)
            }
            StoreError::CommitUnknown { .. } => false,
            StoreError::CreateDir { .. }
            | StoreError::Permissions { .. }
            | StoreError::Corrupt { .. } => false,
        }
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
            StoreError::Permissions { path, source } => write!(
                f,
                "billing store: cannot make {} private to its owner: {source}",
                path.display()
            ),
            StoreError::Busy { operation } => write!(
                f,
                "billing store: {operation} gave up: the write connection stayed busy for {BUSY_TIMEOUT:?}"
            ),
            StoreError::Sqlite { operation, source } => {
                write!(f, "billing store: {operation} failed: {source}")
            }
            StoreError::Pool { operation, source } => {
                write!(
                    f,
                    "billing store: {operation}: no database connection: {source}"
                )
            }
            StoreError::Postgres { operation, source } => {
                write!(f, "billing store: {operation} failed: {source}")
            }
            StoreError::CommitUnknown { operation, source } => write!(
                f,
                "billing store: {operation}: the connection was lost during the commit, which may or may not have been applied: {source}"
            ),
            StoreError::Corrupt { operation, what } => {
                write!(f, "billing store: {operation}: {what}")
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::CreateDir { source, .. } | StoreError::Permissions { source, .. } => {
                Some(source)
            }
            StoreError::Busy { .. } | StoreError::Pool { .. } | StoreError::Corrupt { .. } => None,
            StoreError::Sqlite { source, .. } => Some(source),
            StoreError::Postgres { source, .. } | StoreError::CommitUnknown { source, .. } => {
                Some(source)
            }
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

/// An invoice to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewInvoice<'a> {
    /// The customer billed.
    pub customer_id: &'a str,
    /// The total, in cents.
    pub total_cents: i64,
    /// The caller's key for this create, if it sent one: a create with a key the tenant already
    /// used returns the invoice that key created.
    pub idempotency_key: Option<&'a str>,
}

/// A page of invoices and what is known of the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoicePage {
    /// The invoices of the page, shared with the store that keeps them (the in-memory one)
    /// or made for this page (SQLite, PostgreSQL).
    pub invoices: Vec<Arc<Invoice>>,
    /// How many invoices match in all, when known.
    pub total: Option<u64>,
    /// Whether invoices match after this page (known even when the total is not).
    pub more: bool,
}

impl InvoicePage {
    /// The page at `offset` of `total` matching invoices.
    pub fn counted(invoices: Vec<Arc<Invoice>>, total: u64, offset: usize) -> InvoicePage {
        let more = (offset as u64).saturating_add(invoices.len() as u64) < total;
        InvoicePage {
            invoices,
            total: Some(total),
            more,
        }
    }
}

/// What [`Store::create`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// A new invoice.
    New(Invoice),
    /// The idempotency key was used before, with the same request: the invoice it created (as
    /// it is now). Nothing was written but the audit record of the retry.
    Replayed(Invoice),
    /// The idempotency key was used before, with another customer or total; nothing changed.
    KeyReused,
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
    /// Opens the store in `data_dir`, creating the directory (`0700`) and the database
    /// (`0600`) on first run.
    ///
    /// The database is `billing.sqlite3` in WAL mode. A new database is seeded, in one
    /// transaction, with invoices `INV-1` to `INV-1000` of tenant `t_777`: invoice `n` has
    /// customer `C-{n % 37}`, total `(n * 7919) % 100000` cents, status
    /// `["open", "paid", "voided"][n % 3]`, webhook secret `whsec_{n}` and internal flags
    /// `beta`. An existing database is never re-seeded and keeps every earlier write; one of
    /// schema version 1 is migrated (see the [module docs](self)). An existing database file
    /// that others may read is restricted to its owner, with a warning.
    ///
    /// Other processes may open the same database at the same time (SQLite's own locking keeps
    /// them consistent); see [`Store::open_exclusive`] for the faster single-process variant.
    ///
    /// # Errors
    ///
    /// [`StoreError::CreateDir`] if the directory cannot be created,
    /// [`StoreError::Permissions`] if the file cannot be made private, [`StoreError::Sqlite`]
    /// if the database cannot be opened, migrated or seeded.
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
        private_dir(data_dir).map_err(|source| StoreError::CreateDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let path = data_dir.join(DB_FILE_NAME);
        private_file(&path).map_err(|source| StoreError::Permissions {
            path: path.clone(),
            source,
        })?;
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

    /// Caps the database at about `max_bytes` (whole pages): a write that would grow it further
    /// fails as on a full disk (transient, nothing written). Keeps a runaway client from
    /// filling the disk; tests use it to make the disk full.
    ///
    /// # Errors
    ///
    /// [`StoreError::Busy`] or [`StoreError::Sqlite`] if the write connection cannot be set.
    pub fn set_max_size(&self, max_bytes: u64) -> Result<(), StoreError> {
        let conn = self.writer("set_max_size")?;
        let run = || -> rusqlite::Result<()> {
            let page_size: i64 = conn.query_row("PRAGMA page_size", [], |row| row.get(0))?;
            let pages = (max_bytes / page_size.unsigned_abs().max(1)).max(1);
            conn.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
        };
        run().map_err(StoreError::sqlite("set_max_size"))
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

    /// A page of the tenant's invoices like [`Store::page`], counting them only where the count
    /// tells the agent something it cannot have: one more invoice than the page is read to learn
    /// whether any follow. The total is then known without counting when the page reaches the
    /// end; it is counted (`COUNT(*)`, a scan of the tenant's index) on the first page, which
    /// tells the agent how many exist, and when the offset is past the end; a later page with
    /// more after it says only that more exist.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn page_counting_once(
        &self,
        tenant: &str,
        status: Option<Status>,
        offset: usize,
        limit: usize,
    ) -> Result<InvoicePage, StoreError> {
        let mut conn = self.reader();
        let mut run = || -> rusqlite::Result<InvoicePage> {
            let tx = conn.transaction()?;
            let mut invoices = list_from(&tx, tenant, status, offset, limit.saturating_add(1))?;
            let more = invoices.len() > limit;
            invoices.truncate(limit);
            let reaches_end = !more && (offset == 0 || !invoices.is_empty());
            let total = if reaches_end {
                Some((offset + invoices.len()) as u64)
            } else if offset == 0 || invoices.is_empty() {
                Some(count(&tx, tenant, status)?)
            } else {
                None
            };
            tx.commit()?;
            Ok(InvoicePage {
                invoices: invoices.into_iter().map(Arc::new).collect(),
                total,
                more,
            })
        };
        run().map_err(StoreError::sqlite("page"))
    }

    /// Voids the tenant's invoice `id`, atomically, with its audit record.
    ///
    /// The change is a single conditional `UPDATE … WHERE status != 'voided'`, so of any number
    /// of concurrent voids of the same invoice exactly one returns [`VoidOutcome::Voided`] and
    /// the others [`VoidOutcome::AlreadyVoided`]. Another tenant's invoice is
    /// [`VoidOutcome::NotFound`]. `audit` is written in the same transaction when, and only
    /// when, the invoice is voided.
    ///
    /// # Errors
    ///
    /// [`StoreError::Busy`] or [`StoreError::Sqlite`] (see [`StoreError::is_transient`]).
    pub fn void(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditRecord,
    ) -> Result<VoidOutcome, StoreError> {
        let mut conn = self.writer("void")?;
        let mut run = || -> rusqlite::Result<VoidOutcome> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let voided = tx
                .prepare_cached(SQL_VOID)?
                .query_row(params![id, tenant], invoice_from_row)
                .optional()?;
            let outcome = match voided {
                Some(invoice) => {
                    record(&tx, audit)?;
                    VoidOutcome::Voided(invoice)
                }
                None => match tx
                    .prepare_cached(SQL_GET)?
                    .query_row(params![id, tenant], invoice_from_row)
                    .optional()?
                {
                    Some(invoice) => VoidOutcome::AlreadyVoided(invoice),
                    None => VoidOutcome::NotFound,
                },
            };
            commit(tx)?;
            Ok(outcome)
        };
        run().map_err(StoreError::sqlite("void"))
    }

    /// Creates an open invoice for the tenant, with its audit record, and returns it.
    ///
    /// Its number is one more than the tenant's highest, taken inside a `BEGIN IMMEDIATE`
    /// transaction so that concurrent creates never share an id. The webhook secret is random
    /// and the internal flags are empty. With an idempotency key, the key is kept in the same
    /// transaction; a later create with the same key (the agent's retry) writes no invoice and
    /// returns [`Created::Replayed`] with the invoice the key created, or
    /// [`Created::KeyReused`] when the customer or total differ. The retry's audit record
    /// (outcome `ok_replayed`) is written either way it succeeds.
    ///
    /// # Errors
    ///
    /// [`StoreError::Busy`] or [`StoreError::Sqlite`] (see [`StoreError::is_transient`]).
    pub fn create(
        &self,
        tenant: &str,
        new: &NewInvoice<'_>,
        audit: &AuditRecord,
    ) -> Result<Created, StoreError> {
        let request = new.idempotency_key.map(|_| create_request_digest(new));
        let mut conn = self.writer("create")?;
        let mut run = || -> rusqlite::Result<Created> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if let (Some(key), Some(request)) = (new.idempotency_key, &request) {
                let seen: Option<(String, String)> = tx
                    .prepare_cached(SQL_FIND_KEY)?
                    .query_row(params![tenant, CREATE_ACTION, key], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                    .optional()?;
                if let Some((earlier, invoice_id)) = seen {
                    if earlier != *request {
                        return Ok(Created::KeyReused);
                    }
                    let invoice = tx
                        .prepare_cached(SQL_GET)?
                        .query_row(params![invoice_id, tenant], invoice_from_row)?;
                    let mut replayed = audit.clone();
                    replayed.outcome = "ok_replayed";
                    record(&tx, &replayed)?;
                    commit(tx)?;
                    return Ok(Created::Replayed(invoice));
                }
            }
            let number: i64 = tx
                .prepare_cached(SQL_NEXT_NUMBER)?
                .query_row(params![tenant], |row| row.get(0))?;
            let invoice = Invoice {
                id: format!("INV-{number}"),
                customer_id: new.customer_id.to_owned(),
                total_cents: new.total_cents,
                status: Status::Open,
                tenant_id: Hidden::new(tenant.to_owned()),
                webhook_secret: Hidden::new(format!("whsec_{}", uuid::Uuid::new_v4().simple())),
                internal_flags: Hidden::new(String::new()),
            };
            insert(&tx, number, &invoice)?;
            if let (Some(key), Some(request)) = (new.idempotency_key, &request) {
                tx.prepare_cached(SQL_KEEP_KEY)?.execute(params![
                    tenant,
                    CREATE_ACTION,
                    key,
                    request,
                    invoice.id,
                    unix_ms(audit),
                ])?;
            }
            record(&tx, audit)?;
            commit(tx)?;
            Ok(Created::New(invoice))
        };
        run().map_err(StoreError::sqlite("create"))
    }

    /// Sets the total of the tenant's invoice `id` if it is open, with its audit record, and
    /// returns the invoice as changed.
    ///
    /// `None` when the tenant has no open invoice with that id (it does not exist, belongs to
    /// another tenant, or is paid or voided): paid and voided totals are history and never
    /// change. `audit` is written in the same transaction when, and only when, the total is set.
    ///
    /// # Errors
    ///
    /// [`StoreError::Busy`] or [`StoreError::Sqlite`] (see [`StoreError::is_transient`]).
    pub fn set_total(
        &self,
        tenant: &str,
        id: &str,
        total_cents: i64,
        audit: &AuditRecord,
    ) -> Result<Option<Invoice>, StoreError> {
        let mut conn = self.writer("set_total")?;
        let mut run = || -> rusqlite::Result<Option<Invoice>> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let changed = tx
                .prepare_cached(SQL_SET_TOTAL)?
                .query_row(params![id, tenant, total_cents], invoice_from_row)
                .optional()?;
            if changed.is_some() {
                record(&tx, audit)?;
            }
            commit(tx)?;
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

    /// At most `limit` of the tenant's invoice ids that start with `prefix` (case-sensitive),
    /// in invoice number order: what completing an invoice id suggests.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sqlite`] if SQLite fails.
    pub fn ids_with_prefix(
        &self,
        tenant: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conn = self.reader();
        let run = || -> rusqlite::Result<Vec<String>> {
            conn.prepare_cached(SQL_IDS_WITH_PREFIX)?
                .query_map(params![tenant, prefix, limit], |row| row.get(0))?
                .collect()
        };
        run().map_err(StoreError::sqlite("ids_with_prefix"))
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

    /// The write connection, waited for until [`BUSY_TIMEOUT`] after the call began; SQLite's
    /// own busy timeout is what is left of it, so that one write waits at most that long in
    /// all, however many are queued.
    ///
    /// A panic while it was held leaves no open transaction behind (an unfinished
    /// `Transaction` rolls back on drop), so a poisoned lock is still safe to use.
    fn writer(&self, operation: &'static str) -> Result<MutexGuard<'_, Connection>, StoreError> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        let mut pause = Duration::from_millis(1);
        let conn = loop {
            match self.writer.try_lock() {
                Ok(conn) => break conn,
                Err(TryLockError::Poisoned(poisoned)) => break poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StoreError::Busy { operation });
            }
            // A short backoff: writes are short, and a mutex offers no timed wait.
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_millis(10));
        };
        conn.busy_timeout(deadline.saturating_duration_since(Instant::now()))
            .map_err(StoreError::sqlite(operation))?;
        Ok(conn)
    }
}

/// Creates `dir` and its missing parents owner-only (`0700`); an existing directory is left as
/// it is (it may be shared on purpose, like `.`).
fn private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the database file owner-only (`0600`) before SQLite opens it (SQLite then gives its
/// `-wal` and `-shm` files the same mode); an existing file others may read is restricted, with
/// a warning: it holds every tenant's invoices and webhook secrets.
fn private_file(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        for file in [
            path.to_path_buf(),
            path.with_extension("sqlite3-wal"),
            path.with_extension("sqlite3-shm"),
        ] {
            let Ok(metadata) = std::fs::metadata(&file) else {
                continue;
            };
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    file = %file.display(),
                    mode = format!("{mode:o}"),
                    "the billing database was readable by others: restricting it to its owner"
                );
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode & 0o700))?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Appends `audit` to the audit trail inside the transaction of the change it records.
fn record(tx: &Transaction<'_>, audit: &AuditRecord) -> rusqlite::Result<()> {
    failpoint("between-change-and-audit");
    SqliteAuditSink::append(tx, audit)
}

/// Commits a change with its audit record.
fn commit(tx: Transaction<'_>) -> rusqlite::Result<()> {
    hold_for_tests();
    tx.commit()?;
    failpoint("after-commit");
    Ok(())
}

/// When the audited call happened, in milliseconds since the Unix epoch.
fn unix_ms(audit: &AuditRecord) -> i64 {
    audit
        .at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// A test hook in debug builds: aborts the process, as `kill -9` would stop it, at the named
/// point of a write when `BILLING_FAILPOINT` names it (`between-change-and-audit`,
/// `after-commit`), so that tests can prove what a crash there leaves behind. Release builds
/// have no failpoints.
pub(crate) fn failpoint(point: &str) {
    if !cfg!(debug_assertions) {
        return;
    }
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var("BILLING_FAILPOINT").ok());
    if armed.as_deref() == Some(point) {
        eprintln!("billing: failpoint `{point}`: aborting");
        std::process::abort();
    }
}

/// A test hook in debug builds: every write holds the store for `BILLING_WRITE_HOLD_MS`
/// milliseconds before it commits, so that tests can load the store the way slow disks or
/// long transactions do. Release builds never wait here.
pub(crate) fn hold_for_tests() {
    if !cfg!(debug_assertions) {
        return;
    }
    static HOLD: OnceLock<Option<Duration>> = OnceLock::new();
    let hold = HOLD.get_or_init(|| {
        std::env::var("BILLING_WRITE_HOLD_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map(Duration::from_millis)
    });
    if let Some(hold) = hold {
        std::thread::sleep(*hold);
    }
}

/// A test hook in debug builds: the export waits `BILLING_EXPORT_HOLD_MS` milliseconds after
/// each batch, so that tests can cancel an export, or kill its replica, while it works. Release
/// builds never wait here.
pub(crate) async fn hold_export_for_tests() {
    if !cfg!(debug_assertions) {
        return;
    }
    static HOLD: OnceLock<Option<Duration>> = OnceLock::new();
    let hold = HOLD.get_or_init(|| {
        std::env::var("BILLING_EXPORT_HOLD_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map(Duration::from_millis)
    });
    if let Some(hold) = hold {
        tokio::time::sleep(*hold).await;
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

/// Creates what is missing of the schema, migrates an older one and, the first time only,
/// seeds it: one transaction.
fn initialize(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version == 1 {
        tx.execute_batch(MIGRATE_FROM_V1)?;
        tx.execute_batch(SCHEMA)?;
        tx.execute_batch(MIGRATE_FROM_V1_COPY)?;
    } else {
        tx.execute_batch(SCHEMA)?;
    }
    SqliteAuditSink::create_table(&tx)?;
    if version == 0 {
        for n in 1..=SEED_INVOICES {
            insert(&tx, n, &seed_invoice(n))?;
        }
    }
    if version < SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()
}

/// Invoice `n` of the seed (see [`Store::open`]).
pub(crate) fn seed_invoice(n: i64) -> Invoice {
    Invoice {
        id: format!("INV-{n}"),
        customer_id: format!("C-{}", n % 37),
        total_cents: (n * 7919) % 100_000,
        status: ALL_STATUSES[usize::try_from(n % 3).unwrap_or_default()],
        tenant_id: Hidden::new(SEED_TENANT.to_owned()),
        webhook_secret: Hidden::new(format!("whsec_{n}")),
        internal_flags: Hidden::new("beta".to_owned()),
    }
}

/// What an idempotency key of a create stands for: a digest of its customer and total, so that
/// a retry with other values is told apart from the original.
pub(crate) fn create_request_digest(new: &NewInvoice<'_>) -> String {
    fusion::audit::arguments_digest(&fusion::serde_json::json!({
        "customer_id": new.customer_id,
        "total_cents": new.total_cents,
    }))
}

/// Inserts `invoice` under the tenant's `number`. The store is where hidden values are meant to
/// go: each is exposed here, on purpose.
fn insert(conn: &Connection, number: i64, invoice: &Invoice) -> rusqlite::Result<()> {
    conn.prepare_cached(SQL_INSERT)?.execute(params![
        invoice.tenant_id.expose(),
        number,
        invoice.id,
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

    /// An audit record, as a handler would pass it.
    fn audit() -> AuditRecord {
        fusion::audit::AuditEntry::new("billing_test", "billing.test", None, None, "digest")
            .record()
    }

    /// Creates an invoice without an idempotency key.
    fn create(store: &Store, tenant: &str, customer_id: &str, total_cents: i64) -> Invoice {
        let new = NewInvoice {
            customer_id,
            total_cents,
            idempotency_key: None,
        };
        match store.create(tenant, &new, &audit()).unwrap() {
            Created::New(invoice) => invoice,
            other => panic!("not created: {other:?}"),
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
    fn ids_with_prefix_complete_exactly_in_number_order_within_the_tenant() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(
            store.ids_with_prefix("t_777", "INV-99", 3).unwrap(),
            ["INV-99", "INV-990", "INV-991"]
        );
        // INV-1, INV-10..19, INV-100..199, INV-1000.
        assert_eq!(
            store.ids_with_prefix("t_777", "INV-1", 200).unwrap().len(),
            112
        );
        assert_eq!(store.ids_with_prefix("t_777", "", 5).unwrap().len(), 5);
        // Case-sensitive, and no pattern characters.
        assert!(
            store
                .ids_with_prefix("t_777", "inv-", 10)
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .ids_with_prefix("t_777", "INV-_", 10)
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .ids_with_prefix("t_777", "INV-%", 10)
                .unwrap()
                .is_empty()
        );
        // Only the tenant's own.
        assert!(
            store
                .ids_with_prefix("t_other", "INV-", 10)
                .unwrap()
                .is_empty()
        );
        let mine = create(&store, "t_other", "C-1", 100);
        assert_eq!(
            store.ids_with_prefix("t_other", "INV-", 10).unwrap(),
            [mine.id]
        );
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
            let created = create(&store, "t_777", "C-5", 1234);
            let voided = first_open(&store);
            assert!(matches!(
                store.void("t_777", &voided.id, &audit()).unwrap(),
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
        assert_eq!(create(&store, "t_777", "C-6", 1).id, "INV-1002");
    }

    #[test]
    fn exclusive_store_is_the_same_database() {
        let dir = tempfile::tempdir().unwrap();
        let created = {
            let store = Store::open_exclusive(dir.path()).unwrap();
            assert_eq!(store.get("t_777", "INV-7").unwrap(), Some(seed_invoice(7)));
            let created = create(&store, "t_777", "C-1", 77);
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
        let other = create(&store, "t_other", "C-1", 500);
        // Numbers are per tenant: t_other's first invoice is its INV-1, whatever t_777 has.
        assert_eq!(other.id, "INV-1");
        assert_eq!(other.tenant_id.expose(), "t_other");
        assert_eq!(other.status, Status::Open);
        assert!(other.webhook_secret.expose().starts_with("whsec_"));
        assert_ne!(other.webhook_secret.expose(), "whsec_1");
        assert_eq!(other.internal_flags.expose(), "");

        // t_777's INV-1 is its own: t_777 cannot see, list, count, total or void t_other's.
        assert_eq!(store.get("t_777", "INV-1").unwrap(), Some(seed_invoice(1)));
        assert_eq!(store.count("t_777", None).unwrap(), 1000);
        assert!(
            store
                .list("t_777", None, 5000)
                .unwrap()
                .iter()
                .all(|invoice| invoice.tenant_id.expose() == "t_777")
        );
        assert!(matches!(
            store.void("t_777", "INV-1", &audit()).unwrap(),
            VoidOutcome::Voided(_)
        ));
        assert_eq!(
            store.get("t_other", &other.id).unwrap(),
            Some(other.clone()),
            "t_777's void left t_other's INV-1 open"
        );

        // t_other sees only its own invoice and cannot touch t_777's.
        assert_eq!(store.get("t_other", "INV-2").unwrap(), None);
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
            store.void("t_other", &open.id, &audit()).unwrap(),
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

        // Void of an invoice t_other does not have is still NotFound, voided or not for t_777.
        assert_eq!(
            store.void("t_other", "INV-2", &audit()).unwrap(),
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
    fn pages_count_only_the_first_and_agree_with_the_memory_store() {
        let store = Store::open_in_memory().unwrap();
        let memory = crate::MemoryStore::new();
        let ids = |page: &InvoicePage| -> Vec<String> {
            page.invoices
                .iter()
                .map(|invoice| invoice.id.clone())
                .collect()
        };
        // 333 open invoices: the first page, a middle one, the last, one past the end.
        for (offset, limit, total, more) in [
            (0, 20, Some(333), true),
            (0, 400, Some(333), false),
            (40, 20, None, true),
            (320, 20, Some(333), false),
            (313, 20, Some(333), false),
            (500, 20, Some(333), false),
        ] {
            let page = store
                .page_counting_once("t_777", Some(Status::Open), offset, limit)
                .unwrap();
            assert_eq!((page.total, page.more), (total, more), "offset {offset}");
            let shown = 333usize.saturating_sub(offset).min(limit);
            assert_eq!(page.invoices.len(), shown, "offset {offset}");
            let kept = memory.page("t_777", Some(Status::Open), offset, limit);
            assert_eq!(ids(&page), ids(&kept), "offset {offset}");
            assert_eq!(kept.more, more);
            assert_eq!(kept.total, Some(333));
        }
        assert_eq!(
            store.page_counting_once("t_none", None, 0, 20).unwrap(),
            InvoicePage::counted(Vec::new(), 0, 0)
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
        let created = create(&store, "t_777", "C-1", 10);
        let all = store.list("t_777", None, 2000).unwrap();
        assert_eq!(all.len(), 1001);
        assert_eq!(all.last(), Some(&created));
    }

    #[test]
    fn void_outcomes() {
        let store = Store::open_in_memory().unwrap();
        // INV-3 is open, INV-1 paid, INV-2 voided.
        let VoidOutcome::Voided(voided) = store.void("t_777", "INV-3", &audit()).unwrap() else {
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
            store.void("t_777", "INV-3", &audit()).unwrap(),
            VoidOutcome::AlreadyVoided(voided.clone())
        );
        assert_eq!(store.get("t_777", "INV-3").unwrap(), Some(voided));
        assert!(matches!(
            store.void("t_777", "INV-1", &audit()).unwrap(),
            VoidOutcome::Voided(Invoice {
                status: Status::Voided,
                ..
            })
        ));
        assert_eq!(
            store.void("t_777", "INV-2", &audit()).unwrap(),
            VoidOutcome::AlreadyVoided(seed_invoice(2))
        );
        assert_eq!(
            store.void("t_777", "INV-99999", &audit()).unwrap(),
            VoidOutcome::NotFound
        );
        assert_eq!(
            store.void("t_777", "", &audit()).unwrap(),
            VoidOutcome::NotFound
        );
        assert_eq!(store.count("t_777", Some(Status::Voided)).unwrap(), 335);
    }

    #[test]
    fn set_total_changes_only_open_invoices_of_the_tenant() {
        let store = Store::open_in_memory().unwrap();
        // INV-3 is open, INV-1 paid, INV-2 voided.
        let changed = store.set_total("t_777", "INV-3", 4242, &audit()).unwrap();
        let expected = Invoice {
            total_cents: 4242,
            ..seed_invoice(3)
        };
        assert_eq!(changed.as_ref(), Some(&expected));
        assert_eq!(store.get("t_777", "INV-3").unwrap(), Some(expected));
        for id in ["INV-1", "INV-2"] {
            assert_eq!(
                store.set_total("t_777", id, 1, &audit()).unwrap(),
                None,
                "{id}"
            );
        }
        assert_eq!(store.get("t_777", "INV-1").unwrap(), Some(seed_invoice(1)));
        assert_eq!(
            store.set_total("t_other", "INV-6", 1, &audit()).unwrap(),
            None
        );
        assert_eq!(store.get("t_777", "INV-6").unwrap(), Some(seed_invoice(6)));
        assert_eq!(
            store.set_total("t_777", "INV-5000", 1, &audit()).unwrap(),
            None
        );
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
                    store.void("t_777", &target, &audit()).unwrap()
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
                        create(&store, "t_new", &format!("C-{i}"), i)
                    })
                })
                .collect();
            let created: Vec<Invoice> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            let ids: HashSet<&str> = created.iter().map(|invoice| invoice.id.as_str()).collect();
            // A new tenant's numbers start at 1, whatever other tenants have.
            let expected: HashSet<String> = (1..=20).map(|n| format!("INV-{n}")).collect();
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
        let created = create(&first, "t_777", "C-9", 9);
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

    /// How many audit records the database holds for `action`.
    fn audit_rows(store: &Store, action: &str) -> i64 {
        store
            .reader()
            .query_row(
                "SELECT COUNT(*) FROM audit_events WHERE action = ?1",
                [action],
                |row| row.get(0),
            )
            .unwrap()
    }

    #[test]
    fn every_change_and_only_a_change_commits_its_audit_record() {
        let store = Store::open_in_memory().unwrap();
        let record = |action: &str| {
            fusion::audit::AuditEntry::new("tool", action, None, Some("t_777".into()), "d").record()
        };
        assert!(matches!(
            store.void("t_777", "INV-3", &record("void")).unwrap(),
            VoidOutcome::Voided(_)
        ));
        store.void("t_777", "INV-3", &record("void")).unwrap();
        store.void("t_777", "INV-99999", &record("void")).unwrap();
        assert_eq!(audit_rows(&store, "void"), 1, "only the void that changed");
        assert!(
            store
                .set_total("t_777", "INV-6", 1, &record("set"))
                .unwrap()
                .is_some()
        );
        assert!(
            store
                .set_total("t_777", "INV-1", 1, &record("set"))
                .unwrap()
                .is_none()
        );
        assert_eq!(audit_rows(&store, "set"), 1);
        let new = NewInvoice {
            customer_id: "C-1",
            total_cents: 5,
            idempotency_key: None,
        };
        store.create("t_777", &new, &record("create")).unwrap();
        assert_eq!(audit_rows(&store, "create"), 1);
    }

    #[test]
    fn an_idempotency_key_replays_its_invoice_and_writes_nothing_else() {
        let store = Store::open_in_memory().unwrap();
        let keyed = |customer_id, total_cents, key| NewInvoice {
            customer_id,
            total_cents,
            idempotency_key: Some(key),
        };
        let Created::New(first) = store
            .create("t_777", &keyed("C-1", 5, "k-1"), &audit())
            .unwrap()
        else {
            panic!("the first create creates");
        };
        assert_eq!(
            store
                .create("t_777", &keyed("C-1", 5, "k-1"), &audit())
                .unwrap(),
            Created::Replayed(first.clone())
        );
        assert_eq!(
            store
                .create("t_777", &keyed("C-1", 6, "k-1"), &audit())
                .unwrap(),
            Created::KeyReused
        );
        assert_eq!(store.count("t_777", None).unwrap(), 1001);
        // The key is the tenant's: another tenant's same key creates its own invoice.
        assert!(matches!(
            store.create("t_other", &keyed("C-1", 5, "k-1"), &audit()).unwrap(),
            Created::New(Invoice { ref id, .. }) if id == "INV-1"
        ));
        let outcomes: Vec<String> = store
            .reader()
            .prepare("SELECT outcome FROM audit_events ORDER BY seq")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(outcomes, ["ok", "ok_replayed", "ok"]);
    }

    #[test]
    fn a_version_1_database_is_migrated_and_keeps_its_ids() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = Connection::open(dir.path().join(DB_FILE_NAME)).unwrap();
            // Version 1: numbers shared by all tenants, `number` the primary key.
            conn.execute_batch(
                "CREATE TABLE invoices (
                    number INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, tenant_id TEXT NOT NULL,
                    customer_id TEXT NOT NULL, total_cents INTEGER NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('open', 'paid', 'voided')),
                    webhook_secret TEXT NOT NULL, internal_flags TEXT NOT NULL);
                 CREATE INDEX invoices_by_tenant ON invoices (tenant_id, number);
                 CREATE INDEX invoices_by_tenant_status ON invoices (tenant_id, status, number);
                 CREATE INDEX invoices_totals ON invoices (tenant_id, status, total_cents);
                 INSERT INTO invoices VALUES
                    (1, 'INV-1', 't_777', 'C-1', 100, 'open', 'whsec_1', 'beta'),
                    (2, 'INV-2', 't_other', 'C-2', 200, 'paid', 'whsec_2', ''),
                    (3, 'INV-3', 't_777', 'C-3', 300, 'voided', 'whsec_3', 'beta');
                 PRAGMA user_version = 1;",
            )
            .unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.count("t_777", None).unwrap(), 2, "not re-seeded");
        let kept = store.get("t_other", "INV-2").unwrap().unwrap();
        assert_eq!((kept.customer_id.as_str(), kept.total_cents), ("C-2", 200));
        assert_eq!(
            store.get("t_777", "INV-3").unwrap().unwrap().status,
            Status::Voided
        );
        // Each tenant continues from its own highest number.
        assert_eq!(create(&store, "t_777", "C-4", 4).id, "INV-4");
        assert_eq!(create(&store, "t_other", "C-5", 5).id, "INV-3");
        assert_eq!(create(&store, "t_new", "C-6", 6).id, "INV-1");
        drop(store);
        let conn = Connection::open(dir.path().join(DB_FILE_NAME)).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        // Reopening a migrated database changes nothing.
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.count("t_other", None).unwrap(), 2);
    }

    #[test]
    fn a_held_lock_fails_writes_within_the_busy_timeout_not_one_after_another() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let holder = Connection::open(dir.path().join(DB_FILE_NAME)).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let started = std::time::Instant::now();
        let writers: Vec<_> = (0..4)
            .map(|i| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    let new = NewInvoice {
                        customer_id: "C-1",
                        total_cents: i,
                        idempotency_key: None,
                    };
                    store.create("t_777", &new, &audit()).unwrap_err()
                })
            })
            .collect();
        // Reads go on meanwhile (WAL).
        assert!(store.get("t_777", "INV-1").unwrap().is_some());
        for writer in writers {
            let error = writer.join().unwrap();
            assert!(error.is_transient(), "{error}");
        }
        let took = started.elapsed();
        assert!(
            took < BUSY_TIMEOUT + Duration::from_millis(700),
            "four queued writes took {took:?}: each must give up by the same deadline"
        );
        holder.execute_batch("ROLLBACK").unwrap();
        assert_eq!(store.count("t_777", None).unwrap(), 1000);
        create(&store, "t_777", "C-1", 1);
    }

    #[test]
    fn a_full_database_fails_writes_transiently_and_half_of_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let size = std::fs::metadata(dir.path().join(DB_FILE_NAME))
            .unwrap()
            .len();
        store.set_max_size(size).unwrap();
        let mut created = 0;
        let full = loop {
            let new = NewInvoice {
                customer_id: "C-full-and-a-rather-long-customer-id-to-fill-pages",
                total_cents: 1,
                idempotency_key: None,
            };
            match store.create("t_777", &new, &audit()) {
                Ok(_) => created += 1,
                Err(error) => break error,
            }
            assert!(created < 100_000, "the cap never filled");
        };
        assert!(full.is_transient(), "{full}");
        assert_eq!(
            store.count("t_777", None).unwrap(),
            1000 + created,
            "no invoice beyond the acknowledged ones"
        );
        assert_eq!(
            audit_rows(&store, "billing.test"),
            i64::try_from(created).unwrap()
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_data_directory_and_database_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/b");
        drop(Store::open(&data).unwrap());
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join(DB_FILE_NAME)), 0o600);
        // A file an earlier version left readable by others is restricted.
        std::fs::set_permissions(
            data.join(DB_FILE_NAME),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        drop(Store::open(&data).unwrap());
        assert_eq!(mode(&data.join(DB_FILE_NAME)), 0o600);
    }
}
