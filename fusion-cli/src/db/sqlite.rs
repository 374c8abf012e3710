//! The schema of a SQLite file, from its `PRAGMA`s.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::{Column, ForeignKey, Kind, Schema, Table};
use crate::Failure;

pub(super) fn read(path: &Path) -> Result<Schema, Failure> {
    let failed = |error: rusqlite::Error| Failure(format!("{}: {error}", path.display()));
    // Read only: generating a connector never changes the database.
    let connection =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(failed)?;
    let names: Vec<String> = connection
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table' \
             AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'fusion_%' ORDER BY name",
        )
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<_, _>>()
        })
        .map_err(failed)?;
    let tables = names
        .into_iter()
        .map(|name| table(&connection, name))
        .collect::<Result<_, _>>()
        .map_err(failed)?;
    Ok(Schema { tables })
}

fn table(connection: &Connection, name: String) -> rusqlite::Result<Table> {
    let quoted = name.replace('"', "\"\"");
    // (name, declared type, not null, default, position in the primary key)
    let rows: Vec<(String, String, bool, Option<String>, i64)> = connection
        .prepare(&format!("PRAGMA table_info(\"{quoted}\")"))?
        .query_map([], |row| {
            Ok((
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let mut key: Vec<(i64, String)> = rows
        .iter()
        .filter(|row| row.4 > 0)
        .map(|row| (row.4, row.0.clone()))
        .collect();
    key.sort();
    let primary_key: Vec<String> = key.into_iter().map(|(_, name)| name).collect();
    let columns = rows
        .iter()
        .map(|(column, sql_type, not_null, default, in_key)| {
            let kind = kind_of(sql_type);
            // An INTEGER PRIMARY KEY is the rowid: SQLite numbers it.
            let rowid =
                *in_key > 0 && primary_key.len() == 1 && sql_type.eq_ignore_ascii_case("INTEGER");
            Column {
                name: column.clone(),
                sql_type: sql_type.clone(),
                kind,
                nullable: !not_null && !rowid && *in_key == 0,
                has_default: default.is_some() || rowid,
            }
        })
        .collect();
    let foreign_keys = connection
        .prepare(&format!("PRAGMA foreign_key_list(\"{quoted}\")"))?
        .query_map([], |row| {
            Ok(ForeignKey {
                table: row.get(2)?,
                column: row.get(3)?,
                references: row.get::<_, Option<String>>(4)?.unwrap_or_default(),
            })
        })?
        .collect::<Result<_, _>>()?;
    let indexes: Vec<String> = connection
        .prepare(&format!("PRAGMA index_list(\"{quoted}\")"))?
        .query_map([], |row| row.get(1))?
        .collect::<Result<_, _>>()?;
    let mut indexed = Vec::new();
    for index in indexes {
        let first: Option<String> = connection
            .prepare(&format!(
                "PRAGMA index_info(\"{}\")",
                index.replace('"', "\"\"")
            ))?
            .query_map([], |row| row.get(2))?
            .next()
            .transpose()?;
        if let Some(first) = first.filter(|first| !indexed.contains(first)) {
            indexed.push(first);
        }
    }
    Ok(Table {
        name,
        columns,
        primary_key,
        foreign_keys,
        indexed,
    })
}

/// SQLite's type affinity rules, with booleans apart.
fn kind_of(declared: &str) -> Kind {
    let upper = declared.to_ascii_uppercase();
    if upper.contains("BOOL") {
        Kind::Bool
    } else if upper.contains("INT") {
        Kind::Integer
    } else if upper.contains("CHAR") || upper.contains("CLOB") || upper.contains("TEXT") {
        Kind::Text
    } else if upper.contains("REAL") || upper.contains("FLOA") || upper.contains("DOUB") {
        Kind::Real
    } else {
        Kind::Text
    }
}
