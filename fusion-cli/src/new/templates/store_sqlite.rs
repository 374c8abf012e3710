
/// The SQLite database, one connection; its calls run on the blocking pool.
#[derive(Debug, Clone)]
pub struct Db {
    connection: std::sync::Arc<std::sync::Mutex<rusqlite::Connection>>,
}

fn failed(error: rusqlite::Error) -> StoreError {
    StoreError::Database(error.to_string())
}

impl Db {
    /// Opens the database at `path` and adds the audit and idempotency tables it lacks.
    pub fn open(path: &str) -> Result<Db, StoreError> {
        let connection = rusqlite::Connection::open(path).map_err(failed)?;
        connection
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(failed)?;
        connection.execute_batch(&format!("{AUDIT_TABLE}; {IDEMPOTENCY_TABLE};")).map_err(failed)?;
        Ok(Db {
            connection: std::sync::Arc::new(std::sync::Mutex::new(connection)),
        })
    }

    fn with<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut rusqlite::Connection) -> Result<R, StoreError> + Send + 'static,
    ) -> impl std::future::Future<Output = Result<R, StoreError>> {
        let connection = self.connection.clone();
        async move {
            fusion::blocking(move || {
                let mut connection = connection.lock().unwrap_or_else(|poison| poison.into_inner());
                work(&mut connection)
            })
            .await
            .map_err(|error| StoreError::Database(error.to_string()))?
        }
    }

    /// The rows `sql` returns.
    pub async fn query(&self, sql: String, params: Vec<Value>) -> Result<Vec<Row>, StoreError> {
        self.with(move |connection| query(connection, &sql, &params)).await
    }

    /// Runs `change` with its audit record and idempotency key in one transaction.
    pub async fn change(&self, change: Change) -> Result<Changed, StoreError> {
        self.with(move |connection| {
            let tx = connection.transaction().map_err(failed)?;
            if let Some(key) = &change.idempotency {
                let earlier = query(
                    &tx,
                    "SELECT request, row_key FROM fusion_idempotency WHERE tenant = ?1 AND tool = ?2 AND key = ?3",
                    &[key.tenant.as_str().into(), key.tool.into(), key.key.as_str().into()],
                )?;
                if let Some(earlier) = earlier.into_iter().next() {
                    let mut earlier = earlier.into_iter();
                    let request: String = field(&mut earlier, "request")?;
                    let row_key: String = field(&mut earlier, "row_key")?;
                    if request != key.request {
                        return Ok(Changed::KeyReused);
                    }
                    let rows = query(&tx, &key.replay_sql, &[row_key.into(), key.tenant.as_str().into()])?;
                    return Ok(rows.into_iter().next().map_or(Changed::Nothing, Changed::Replayed));
                }
            }
            let Some(row) = query(&tx, &change.sql, &change.params)?.into_iter().next() else {
                return Ok(Changed::Nothing);
            };
            if let Some(key) = &change.idempotency {
                tx.execute(
                    "INSERT INTO fusion_idempotency (tenant, tool, key, request, row_key) VALUES (?1, ?2, ?3, ?4, ?5)",
                    rusqlite::params![key.tenant, key.tool, key.key, key.request, row[0].to_text()],
                )
                .map_err(failed)?;
            }
            let audit = &change.audit;
            tx.execute(
                "INSERT INTO fusion_audit VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![unix_ms(audit), audit.tool, audit.action, audit.principal, audit.tenant, audit.arguments_digest, audit.outcome],
            )
            .map_err(failed)?;
            tx.commit().map_err(failed)?;
            Ok(Changed::Row(row))
        })
        .await
    }
}

fn query(connection: &rusqlite::Connection, sql: &str, params: &[Value]) -> Result<Vec<Row>, StoreError> {
    use rusqlite::types::Value as Sql;
    let mut statement = connection.prepare(sql).map_err(failed)?;
    let width = statement.column_count();
    let params = params.iter().map(|value| match value {
        Value::Null => Sql::Null,
        Value::Int(value) => Sql::Integer(*value),
        Value::Real(value) => Sql::Real(*value),
        Value::Bool(value) => Sql::Integer(i64::from(*value)),
        Value::Text(value) => Sql::Text(value.clone()),
    });
    let mut rows = statement.query(rusqlite::params_from_iter(params)).map_err(failed)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(failed)? {
        let mut values = Vec::with_capacity(width);
        for index in 0..width {
            values.push(match row.get::<_, Sql>(index).map_err(failed)? {
                Sql::Null => Value::Null,
                Sql::Integer(value) => Value::Int(value),
                Sql::Real(value) => Value::Real(value),
                Sql::Text(value) => Value::Text(value),
                Sql::Blob(_) => Value::Null,
            });
        }
        out.push(values);
    }
    Ok(out)
}
