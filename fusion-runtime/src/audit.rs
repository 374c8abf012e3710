//! The audit trail (SPEC R6): every successful call that is not read-only is recorded.
//! Read-only calls and failed calls are not.
//!
//! **Atomic with the change.** A sink records a call after the handler returned, on its own
//! connection: a crash between the two leaves a committed change without its record. A handler
//! whose change lives in a transactional store keeps the record itself instead, in the same
//! transaction: it takes an [`AuditEntry`] parameter, writes [`AuditEntry::record`] with its
//! change, and calls [`AuditEntry::recorded`] once the transaction committed. The sink then does
//! not record that call again. Either both the change and its record are there, or neither is.
//! With the `audit-sqlite` feature, `SqliteAuditSink::create_table` and
//! `SqliteAuditSink::append` write the same table from the handler's own transaction.
//!
//! **When the sink fails.** The call's effect has already happened. The record is never dropped
//! silently: it is written in full to the `tracing` log at `ERROR` level (target
//! `fusion::audit`) with the sink's error, and
//! [`Metrics::audit_failed`](crate::observe::Metrics::audit_failed) is called. Point your log
//! pipeline at that target, or alert on the metric, to reconcile. What the agent is told
//! depends on how the sink was set:
//! - [`ServerBuilder::audit`](crate::ServerBuilder::audit) (required, the default): the agent
//!   is not told plain success but [`AUDIT_FAILED`](crate::codes::AUDIT_FAILED), which says
//!   that the change was made and must not be retried;
//! - [`ServerBuilder::audit_best_effort`](crate::ServerBuilder::audit_best_effort): the agent
//!   gets its result, as if the sink had recorded it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::context::{CallContext, FromContext};
use crate::error::ToolError;
use crate::keyed::DigestKey;

/// One audited call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// When the call finished.
    pub at: SystemTime,
    /// The exposed tool name.
    pub tool: String,
    /// The canonical key, `billing.void_invoice`.
    pub action: String,
    /// The verified caller, if any.
    pub principal: Option<String>,
    /// The caller's tenant, if any.
    pub tenant: Option<String>,
    /// SHA-256 of the arguments as canonical JSON (keys sorted), hex: proves what was asked
    /// without storing it. When the arguments carry a hidden value (a `Hidden` field of a
    /// profile, or anything holding one), an HMAC-SHA-256 under the server's audit digest key
    /// instead, written `hmac-sha256:` and 64 hex digits (see [`keyed_arguments_digest`]): a
    /// plain digest of a low-entropy secret would let anyone who reads the trail find it by
    /// trying candidates.
    pub arguments_digest: String,
    /// `ok`, or `ok_truncated` when the egress budget cut the result.
    pub outcome: &'static str,
    /// How long the call took.
    pub duration: Duration,
}

crate::described::described_error! {
    /// Why a sink could not record: what failed, and the error that caused it.
    pub struct AuditError;
}

/// Receives audit records. Called on the call's path, before the result is returned, so a
/// record is written before the agent sees success; keep it fast.
pub trait AuditSink: Send + Sync + 'static {
    /// Records one call.
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError>;

    /// Whether [`AuditSink::record`] may wait on I/O or a lock (a database, a file): the
    /// pipeline then calls it on the blocking pool ([`blocking`](crate::blocking)), so that a
    /// slow or locked trail delays only the calls it records, never the server's async workers.
    fn is_blocking(&self) -> bool {
        false
    }
}

impl<S: AuditSink + ?Sized> AuditSink for std::sync::Arc<S> {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        (**self).record(record)
    }

    fn is_blocking(&self) -> bool {
        (**self).is_blocking()
    }
}

impl<S: AuditSink + ?Sized> AuditSink for Box<S> {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        (**self).record(record)
    }

    fn is_blocking(&self) -> bool {
        (**self).is_blocking()
    }
}

/// The audit record of the call that is running, for a handler that keeps it itself, in the
/// same transaction as its change (see the [module docs](self)).
///
/// Take it as a handler parameter: it comes from the call's context, never from the agent.
/// [`AuditEntry::record`] gives the record as the pipeline would write it (tool, action,
/// principal, tenant, arguments digest); write it with the change, commit, then call
/// [`AuditEntry::recorded`]: the server's sink then leaves the call alone. A handler that
/// returns success without calling it (it changed nothing, say) is recorded by the sink as any
/// other call.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use fusion_runtime::audit::{AuditEntry, AuditRecord};
/// use fusion_runtime::{State, ToolError, blocking};
///
/// /// A store whose change and audit record commit together.
/// #[derive(Default)]
/// struct Ledger {
///     committed: Mutex<(Vec<String>, Vec<AuditRecord>)>,
/// }
///
/// impl Ledger {
///     fn void(&self, id: &str, audit: &AuditRecord) -> Result<(), std::io::Error> {
///         // One transaction: the change and its record, or neither.
///         let mut committed = self.committed.lock().unwrap();
///         committed.0.push(id.to_owned());
///         committed.1.push(audit.clone());
///         Ok(())
///     }
/// }
///
/// /// The handler of a `#[tool(mutation)]`: `audit` comes from the context, like `ledger`.
/// async fn void(ledger: State<Ledger>, audit: AuditEntry, id: String) -> Result<String, ToolError> {
///     let record = audit.record();
///     let ledger = State::arc(&ledger).clone();
///     let voided = id.clone();
///     blocking(move || ledger.void(&voided, &record)).await??;
///     // Committed: the server's sink must not record this call a second time.
///     audit.recorded();
///     Ok(id)
/// }
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// let ledger = Arc::new(Ledger::default());
/// let entry = AuditEntry::new("ledger_void", "ledger.void", None, None, "digest");
/// void(State::new(Arc::clone(&ledger)), entry.clone(), "E-7".into()).await.unwrap();
/// assert!(entry.is_recorded());
/// assert_eq!(ledger.committed.lock().unwrap().1[0].action, "ledger.void");
/// # });
/// ```
#[derive(Clone)]
pub struct AuditEntry {
    inner: Arc<EntryInner>,
}

struct EntryInner {
    tool: String,
    action: String,
    principal: Option<String>,
    tenant: Option<String>,
    digest: String,
    started: Instant,
    recorded: AtomicBool,
}

impl AuditEntry {
    /// The entry of a call of `action` (canonical key) exposed as `tool`, whose arguments have
    /// `arguments_digest`, made by `principal` of `tenant`. The pipeline makes one for every
    /// call of a handler that takes it; tests of a store make their own.
    pub fn new(
        tool: impl Into<String>,
        action: impl Into<String>,
        principal: Option<String>,
        tenant: Option<String>,
        arguments_digest: impl Into<String>,
    ) -> Self {
        AuditEntry {
            inner: Arc::new(EntryInner {
                tool: tool.into(),
                action: action.into(),
                principal,
                tenant,
                digest: arguments_digest.into(),
                started: Instant::now(),
                recorded: AtomicBool::new(false),
            }),
        }
    }

    /// The record of this call as of now: outcome `ok`, the duration so far.
    pub fn record(&self) -> AuditRecord {
        let inner = &*self.inner;
        AuditRecord {
            at: SystemTime::now(),
            tool: inner.tool.clone(),
            action: inner.action.clone(),
            principal: inner.principal.clone(),
            tenant: inner.tenant.clone(),
            arguments_digest: inner.digest.clone(),
            outcome: "ok",
            duration: inner.started.elapsed(),
        }
    }

    /// Says that the handler's own transaction committed this call's record: the server's sink
    /// does not record the call again. Call it only once the record is durable.
    pub fn recorded(&self) {
        self.inner.recorded.store(true, Ordering::Release);
    }

    /// Whether [`AuditEntry::recorded`] was called.
    pub fn is_recorded(&self) -> bool {
        self.inner.recorded.load(Ordering::Acquire)
    }

    pub(crate) fn started(&self) -> Instant {
        self.inner.started
    }
}

impl fmt::Debug for AuditEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditEntry")
            .field("action", &self.inner.action)
            .field("recorded", &self.is_recorded())
            .finish_non_exhaustive()
    }
}

/// Put in the context by the pipeline for the handlers that take it.
impl FromContext for AuditEntry {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        context
            .extensions
            .get::<AuditEntry>()
            .cloned()
            .ok_or_else(|| {
                ToolError::internal_message(
                    "no AuditEntry in the call context: the pipeline made none",
                )
            })
    }
}

/// Writes each record to the `tracing` log (target `fusion::audit`, level `INFO`).
#[derive(Debug, Default, Clone, Copy)]
pub struct TracingAuditSink;

impl AuditSink for TracingAuditSink {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        tracing::info!(
            target: "fusion::audit",
            tool = %record.tool,
            action = %record.action,
            principal = record.principal.as_deref().unwrap_or("-"),
            tenant = record.tenant.as_deref().unwrap_or("-"),
            arguments_digest = %record.arguments_digest,
            outcome = record.outcome,
            duration_us = u64::try_from(record.duration.as_micros()).unwrap_or(u64::MAX),
            "audited call"
        );
        Ok(())
    }
}

/// The digest of a call's arguments: SHA-256 of their canonical JSON (object keys sorted,
/// no whitespace), hex encoded.
pub fn arguments_digest(arguments: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(arguments, &mut canonical);
    sha256_hex(&canonical)
}

/// [`arguments_digest`] of an arguments object.
pub(crate) fn arguments_digest_of(arguments: &serde_json::Map<String, Value>) -> String {
    let mut canonical = String::new();
    write_object(arguments, &mut canonical);
    sha256_hex(&canonical)
}

/// What marks a keyed digest, before its 64 hex digits.
pub const KEYED_DIGEST_PREFIX: &str = "hmac-sha256:";

/// The digest of arguments that carry a hidden value: HMAC-SHA-256 of their canonical JSON
/// under `key`, hex encoded after [`KEYED_DIGEST_PREFIX`]. Unlike [`arguments_digest`], no one
/// without the key can test a guess of the hidden value against it.
pub fn keyed_arguments_digest(arguments: &Value, key: &DigestKey) -> String {
    let mut canonical = String::new();
    write_canonical(arguments, &mut canonical);
    format!(
        "{KEYED_DIGEST_PREFIX}{}",
        key.digest_hex(canonical.as_bytes())
    )
}

/// [`keyed_arguments_digest`] of an arguments object.
pub(crate) fn keyed_arguments_digest_of(
    arguments: &serde_json::Map<String, Value>,
    key: &DigestKey,
) -> String {
    let mut canonical = String::new();
    write_object(arguments, &mut canonical);
    format!(
        "{KEYED_DIGEST_PREFIX}{}",
        key.digest_hex(canonical.as_bytes())
    )
}

fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    crate::keyed::hex(&Sha256::digest(text.as_bytes()))
}

fn write_object(object: &serde_json::Map<String, Value>, out: &mut String) {
    let mut keys: Vec<&String> = object.keys().collect();
    keys.sort();
    out.push('{');
    for (index, key) in keys.into_iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(key.as_str()).to_string());
        out.push(':');
        write_canonical(&object[key], out);
    }
    out.push('}');
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(object) => write_object(object, out),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Logs a record a sink could not keep: the log becomes its home.
pub(crate) fn log_lost(record: &AuditRecord, error: &AuditError) {
    tracing::error!(
        target: "fusion::audit",
        error = %crate::error::DisplayChain(error),
        tool = %record.tool,
        action = %record.action,
        principal = record.principal.as_deref().unwrap_or("-"),
        tenant = record.tenant.as_deref().unwrap_or("-"),
        arguments_digest = %record.arguments_digest,
        outcome = record.outcome,
        at_unix_ms = record.at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_millis()),
        "audit sink failed; the record is kept here"
    );
}

#[cfg(feature = "audit-sqlite")]
pub use sqlite::SqliteAuditSink;

#[cfg(feature = "audit-sqlite")]
mod sqlite {
    use std::path::Path;
    use std::sync::{Mutex, PoisonError};
    use std::time::{Duration, SystemTime};

    use super::{AuditError, AuditRecord, AuditSink};

    /// An append-only audit table in an SQLite database (which may be the application's own).
    ///
    /// Triggers refuse `UPDATE` and `DELETE` on the table, so the trail can only grow through
    /// this connection and any other. (Failed calls are not audited, so the table has no
    /// error id; a table created by an earlier version keeps its `error_id` column, left NULL.)
    pub struct SqliteAuditSink {
        connection: Mutex<rusqlite::Connection>,
    }

    impl std::fmt::Debug for SqliteAuditSink {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("SqliteAuditSink").finish_non_exhaustive()
        }
    }

    impl SqliteAuditSink {
        /// Opens (or creates) the `audit_events` table in the database file at `path`.
        pub fn open(path: &Path) -> Result<Self, AuditError> {
            let connection = rusqlite::Connection::open(path).map_err(to_audit_error)?;
            Self::with_connection(connection)
        }

        /// Uses an open connection.
        pub fn with_connection(connection: rusqlite::Connection) -> Result<Self, AuditError> {
            connection
                .busy_timeout(Duration::from_secs(5))
                .map_err(to_audit_error)?;
            Self::create_table(&connection).map_err(to_audit_error)?;
            Ok(SqliteAuditSink {
                connection: Mutex::new(connection),
            })
        }

        /// Creates the `audit_events` table and its append-only triggers if they are missing,
        /// on any connection (or inside a transaction): for a store that writes its records
        /// itself with [`SqliteAuditSink::append`].
        pub fn create_table(connection: &rusqlite::Connection) -> rusqlite::Result<()> {
            connection.execute_batch(
                "CREATE TABLE IF NOT EXISTS audit_events (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    at_unix_ms INTEGER NOT NULL,
                    tool TEXT NOT NULL,
                    action TEXT NOT NULL,
                    principal TEXT,
                    tenant TEXT,
                    arguments_digest TEXT NOT NULL,
                    outcome TEXT NOT NULL,
                    duration_us INTEGER NOT NULL
                );
                CREATE TRIGGER IF NOT EXISTS audit_events_no_update BEFORE UPDATE ON audit_events
                BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END;
                CREATE TRIGGER IF NOT EXISTS audit_events_no_delete BEFORE DELETE ON audit_events
                BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END;",
            )
        }

        /// Appends `record` to the `audit_events` table through `connection`: inside the
        /// transaction of the change it records, the two commit or roll back together (see
        /// [`AuditEntry`](super::AuditEntry)).
        pub fn append(
            connection: &rusqlite::Connection,
            record: &AuditRecord,
        ) -> rusqlite::Result<()> {
            let at = record
                .at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |since| {
                    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
                });
            let duration = i64::try_from(record.duration.as_micros()).unwrap_or(i64::MAX);
            connection
                .prepare_cached(
                    "INSERT INTO audit_events (at_unix_ms, tool, action, principal, tenant, \
                     arguments_digest, outcome, duration_us) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?
                .execute(rusqlite::params![
                    at,
                    record.tool,
                    record.action,
                    record.principal,
                    record.tenant,
                    record.arguments_digest,
                    record.outcome,
                    duration,
                ])
                .map(|_| ())
        }

        /// Runs `f` on the audit connection (to read the trail back).
        pub fn with<R>(&self, f: impl FnOnce(&rusqlite::Connection) -> R) -> R {
            let connection = self
                .connection
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            f(&connection)
        }
    }

    impl AuditSink for SqliteAuditSink {
        fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
            self.with(|connection| Self::append(connection, record).map_err(to_audit_error))
        }

        /// A write may wait for the database's lock.
        fn is_blocking(&self) -> bool {
            true
        }
    }

    fn to_audit_error(error: rusqlite::Error) -> AuditError {
        AuditError::with_source("the SQLite audit sink failed", error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_ignores_key_order_and_whitespace() {
        let a = arguments_digest(&json!({"id": "INV-1", "nested": {"b": 1, "a": [1, 2]}}));
        let b = arguments_digest(
            &serde_json::from_str(r#"{ "nested": {"a": [1,2], "b": 1}, "id": "INV-1" }"#).unwrap(),
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        assert_ne!(a, arguments_digest(&json!({"id": "INV-2"})));
        // SHA-256 of `{}`, lower-case hex.
        assert_eq!(
            arguments_digest(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
