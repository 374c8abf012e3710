//! The connector's store: SQL the generated tools wrote, run against the database, with the
//! audit record (and idempotency key) of every change in the change's own transaction.

use fusion::audit::AuditRecord;

/// A value to or from the database.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Bool(bool),
    Text(String),
}

impl Value {
    /// The value as text (a key's value in the idempotency table).
    pub fn to_text(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Int(value) => value.to_string(),
            Value::Real(value) => value.to_string(),
            Value::Bool(value) => value.to_string(),
            Value::Text(value) => value.clone(),
        }
    }
}

impl From<i64> for Value {
    fn from(value: i64) -> Self {
        Value::Int(value)
    }
}
impl From<f64> for Value {
    fn from(value: f64) -> Self {
        Value::Real(value)
    }
}
impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Value::Bool(value)
    }
}
impl From<String> for Value {
    fn from(value: String) -> Self {
        Value::Text(value)
    }
}
impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::Text(value.to_owned())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Self {
        value.map_or(Value::Null, Into::into)
    }
}

/// A Rust value read from a [`Value`].
pub trait FromValue: Sized {
    fn from_value(value: Value) -> Option<Self>;
}
impl FromValue for i64 {
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Int(value) => Some(value),
            _ => None,
        }
    }
}
impl FromValue for f64 {
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Real(value) => Some(value),
            Value::Int(value) => Some(value as f64),
            _ => None,
        }
    }
}
impl FromValue for bool {
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Bool(value) => Some(value),
            Value::Int(value) => Some(value != 0),
            _ => None,
        }
    }
}
impl FromValue for String {
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Text(value) => Some(value),
            _ => None,
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Null => Some(None),
            value => T::from_value(value).map(Some),
        }
    }
}

/// A row, its values in the order of the query's columns.
pub type Row = Vec<Value>;

/// The next value of `row`, as the model's field `column` holds it.
pub fn field<T: FromValue>(
    row: &mut impl Iterator<Item = Value>,
    column: &'static str,
) -> Result<T, StoreError> {
    row.next()
        .and_then(T::from_value)
        .ok_or(StoreError::Shape(column))
}

/// Why the store failed. Like every `std::error::Error`, it becomes an internal `ToolError`:
/// agents see an error id, the details go to the log.
#[derive(Debug)]
pub enum StoreError {
    /// The database refused or failed.
    Database(String),
    /// A row did not have the shape the model expects (the schema changed?).
    Shape(&'static str),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Database(error) => write!(f, "database: {error}"),
            StoreError::Shape(column) => {
                write!(f, "column `{column}` does not hold what the model expects")
            }
        }
    }
}

impl std::error::Error for StoreError {}

/// A change: one statement that returns the changed row (`RETURNING`), its audit record, and
/// for a create its idempotency key.
#[derive(Debug)]
pub struct Change {
    pub sql: String,
    pub params: Vec<Value>,
    pub audit: AuditRecord,
    pub idempotency: Option<Idempotency>,
}

/// A create's idempotency key and how to read back what it created.
#[derive(Debug)]
pub struct Idempotency {
    pub tenant: String,
    pub tool: &'static str,
    pub key: String,
    /// A digest of the create's arguments: the same key with other arguments is refused.
    pub request: String,
    /// Reads the row by its key as text (`$1`/`?1`) and tenant (`$2`/`?2`).
    pub replay_sql: String,
}

/// What a change did.
#[derive(Debug)]
pub enum Changed {
    /// The row as changed.
    Row(Row),
    /// An earlier create with the same key and arguments: its row.
    Replayed(Row),
    /// The key was used for other arguments: nothing changed.
    KeyReused,
    /// No row matched: nothing changed.
    Nothing,
}

const AUDIT_TABLE: &str = "CREATE TABLE IF NOT EXISTS fusion_audit (at_ms BIGINT NOT NULL, \
    tool TEXT NOT NULL, action TEXT NOT NULL, principal TEXT, tenant TEXT, \
    arguments_digest TEXT NOT NULL, outcome TEXT NOT NULL)";
const IDEMPOTENCY_TABLE: &str = "CREATE TABLE IF NOT EXISTS fusion_idempotency (tenant TEXT NOT NULL, \
    tool TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL, row_key TEXT NOT NULL, \
    PRIMARY KEY (tenant, tool, key))";

fn unix_ms(audit: &AuditRecord) -> i64 {
    audit
        .at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}
