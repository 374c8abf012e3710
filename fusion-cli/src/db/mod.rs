//! A database's schema, read from PostgreSQL ([`postgres`]) or SQLite ([`sqlite`]), for
//! `cargo fusion new NAME --from-postgres URL | --from-sqlite PATH` ([`emit`] writes the
//! connector).

pub(crate) mod emit;
mod postgres;
mod sqlite;

use std::path::PathBuf;

use crate::Failure;

/// Where the schema comes from, and what the generated connector serves.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// A PostgreSQL URL.
    Postgres(String),
    /// A SQLite file.
    Sqlite(PathBuf),
}

/// What the command line chose.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// Only these tables; every table when empty.
    pub(crate) tables: Vec<String>,
    /// The tenant column; detected when `None`.
    pub(crate) tenant_column: Option<String>,
}

/// The tables of a database (PostgreSQL: of its `public` schema).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Schema {
    pub(crate) tables: Vec<Table>,
}

/// One table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub(crate) name: String,
    pub(crate) columns: Vec<Column>,
    /// The primary key's columns, in order.
    pub(crate) primary_key: Vec<String>,
    pub(crate) foreign_keys: Vec<ForeignKey>,
    /// Columns that lead an index (a filter on them is cheap).
    pub(crate) indexed: Vec<String>,
}

/// One column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Column {
    pub(crate) name: String,
    /// The type as the database spells it (`integer`, `character varying(64)`, `TEXT`).
    pub(crate) sql_type: String,
    pub(crate) kind: Kind,
    pub(crate) nullable: bool,
    /// The database fills it when an insert leaves it out (a default, a sequence, a rowid).
    pub(crate) has_default: bool,
}

/// How a column's values travel: as a Rust type, and on the wire to the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Integer,
    Real,
    Bool,
    /// Text and everything read as text (dates, numerics, UUIDs, JSON).
    Text,
}

/// `column` references `table.references`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ForeignKey {
    pub(crate) column: String,
    pub(crate) table: String,
    pub(crate) references: String,
}

impl Table {
    pub(crate) fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|column| column.name == name)
    }
}

/// Reads the schema at `source`.
pub(crate) fn read(source: &Source) -> Result<Schema, Failure> {
    match source {
        Source::Postgres(url) => postgres::read(url),
        Source::Sqlite(path) => sqlite::read(path),
    }
}
