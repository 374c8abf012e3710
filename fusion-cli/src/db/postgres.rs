//! The schema of a PostgreSQL database's `public` schema, from its catalog.

use tokio_postgres::NoTls;

use super::{Column, ForeignKey, Kind, Schema, Table};
use crate::Failure;

const COLUMNS: &str = "SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod), \
     t.typname::text, NOT a.attnotnull, (a.atthasdef OR a.attidentity <> '') \
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
     JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid \
     WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped \
     AND c.relname NOT LIKE 'fusion\\_%' ORDER BY c.relname, a.attnum";

const KEYS: &str = "SELECT c.conrelid::regclass::text, c.contype::text, a.attname::text, \
     coalesce(r.relname::text, ''), coalesce(ra.attname::text, '') \
     FROM pg_constraint c \
     CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, position) \
     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum \
     LEFT JOIN pg_class r ON r.oid = c.confrelid \
     LEFT JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = c.confkey[k.position] \
     WHERE c.contype IN ('p', 'f') AND c.connamespace = 'public'::regnamespace \
     ORDER BY c.conname, k.position";

const INDEXES: &str = "SELECT t.relname::text, a.attname::text FROM pg_index i \
     JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace \
     JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0] \
     WHERE n.nspname = 'public' ORDER BY t.relname, a.attname";

pub(super) fn read(url: &str) -> Result<Schema, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure(format!("cannot start a runtime: {error}")))?;
    // The URL may hold a password: errors never repeat it.
    let failed = |error: tokio_postgres::Error| Failure(format!("PostgreSQL: {error}"));
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await.map_err(failed)?;
        let connection = tokio::spawn(connection);
        let mut tables: Vec<Table> = Vec::new();
        for row in client.query(COLUMNS, &[]).await.map_err(failed)? {
            let table: String = row.get(0);
            if tables.last().is_none_or(|last| last.name != table) {
                tables.push(Table {
                    name: table,
                    columns: Vec::new(),
                    primary_key: Vec::new(),
                    foreign_keys: Vec::new(),
                    indexed: Vec::new(),
                });
            }
            let type_name: String = row.get(3);
            let last = tables.last_mut().expect("pushed above");
            last.columns.push(Column {
                name: row.get(1),
                sql_type: row.get(2),
                kind: kind_of(&type_name),
                nullable: row.get(4),
                has_default: row.get(5),
            });
        }
        for row in client.query(KEYS, &[]).await.map_err(failed)? {
            let table: String = row.get(0);
            let table = table.trim_matches('"').to_owned();
            let Some(table) = tables.iter_mut().find(|found| found.name == table) else {
                continue;
            };
            let kind: String = row.get(1);
            let column: String = row.get(2);
            if kind == "p" {
                table.primary_key.push(column);
            } else {
                table.foreign_keys.push(ForeignKey {
                    column,
                    table: row.get(3),
                    references: row.get(4),
                });
            }
        }
        for row in client.query(INDEXES, &[]).await.map_err(failed)? {
            let table: String = row.get(0);
            let column: String = row.get(1);
            if let Some(table) = tables.iter_mut().find(|found| found.name == table)
                && !table.indexed.contains(&column)
            {
                table.indexed.push(column);
            }
        }
        drop(client);
        let _ = connection.await;
        Ok(Schema { tables })
    })
}

/// How a PostgreSQL type (by `pg_type.typname`) travels.
fn kind_of(type_name: &str) -> Kind {
    match type_name {
        "int2" | "int4" | "int8" => Kind::Integer,
        "float4" | "float8" => Kind::Real,
        "bool" => Kind::Bool,
        _ => Kind::Text,
    }
}
