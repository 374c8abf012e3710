
use tokio_postgres::types::{ToSql, Type};

/// The PostgreSQL database, through a pool of connections.
#[derive(Clone)]
pub struct Db {
    pool: deadpool_postgres::Pool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").finish_non_exhaustive()
    }
}

fn failed(error: impl std::fmt::Display) -> StoreError {
    StoreError::Database(error.to_string())
}

impl Db {
    /// A pool for `url`; nothing connects until the first call.
    pub fn lazy(url: &str) -> Result<Db, StoreError> {
        let mut config = deadpool_postgres::Config::new();
        config.url = Some(url.to_owned());
        let pool = config
            .create_pool(Some(deadpool_postgres::Runtime::Tokio1), tokio_postgres::NoTls)
            .map_err(failed)?;
        Ok(Db { pool })
    }

    /// Connects to `url` and adds the audit and idempotency tables it lacks.
    pub async fn connect(url: &str) -> Result<Db, StoreError> {
        let db = Db::lazy(url)?;
        let client = db.pool.get().await.map_err(failed)?;
        client
            .batch_execute(&format!("{AUDIT_TABLE}; {IDEMPOTENCY_TABLE};"))
            .await
            .map_err(failed)?;
        Ok(db)
    }

    /// The rows `sql` returns.
    pub async fn query(&self, sql: String, params: Vec<Value>) -> Result<Vec<Row>, StoreError> {
        let client = self.pool.get().await.map_err(failed)?;
        query(&client, &sql, &params).await
    }

    /// Runs `change` with its audit record and idempotency key in one transaction.
    pub async fn change(&self, change: Change) -> Result<Changed, StoreError> {
        let mut client = self.pool.get().await.map_err(failed)?;
        let tx = client.transaction().await.map_err(failed)?;
        if let Some(key) = &change.idempotency {
            // Concurrent creates with one key wait here for each other.
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                &[&format!("{}/{}/{}", key.tenant, key.tool, key.key)],
            )
            .await
            .map_err(failed)?;
            let earlier = query(
                &tx,
                "SELECT request, row_key FROM fusion_idempotency WHERE tenant = $1 AND tool = $2 AND key = $3",
                &[key.tenant.as_str().into(), key.tool.into(), key.key.as_str().into()],
            )
            .await?;
            if let Some(earlier) = earlier.into_iter().next() {
                let mut earlier = earlier.into_iter();
                let request: String = field(&mut earlier, "request")?;
                let row_key: String = field(&mut earlier, "row_key")?;
                if request != key.request {
                    return Ok(Changed::KeyReused);
                }
                let rows = query(&tx, &key.replay_sql, &[row_key.into(), key.tenant.as_str().into()]).await?;
                return Ok(rows.into_iter().next().map_or(Changed::Nothing, Changed::Replayed));
            }
        }
        let Some(row) = query(&tx, &change.sql, &change.params).await?.into_iter().next() else {
            return Ok(Changed::Nothing);
        };
        if let Some(key) = &change.idempotency {
            tx.execute(
                "INSERT INTO fusion_idempotency (tenant, tool, key, request, row_key) VALUES ($1, $2, $3, $4, $5)",
                &[&key.tenant, &key.tool, &key.key, &key.request, &row[0].to_text()],
            )
            .await
            .map_err(failed)?;
        }
        let audit = &change.audit;
        tx.execute(
            "INSERT INTO fusion_audit VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[&unix_ms(audit), &audit.tool, &audit.action, &audit.principal, &audit.tenant, &audit.arguments_digest, &audit.outcome],
        )
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        Ok(Changed::Row(row))
    }
}

async fn query(
    client: &impl deadpool_postgres::GenericClient,
    sql: &str,
    params: &[Value],
) -> Result<Vec<Row>, StoreError> {
    let statement = client.prepare(sql).await.map_err(failed)?;
    // Every parameter is written `CAST($n AS bigint|double precision|boolean|text)`: its type
    // is one of these, and a null is a null of that type.
    let bound: Vec<Box<dyn ToSql + Sync + Send>> = params
        .iter()
        .zip(statement.params())
        .map(|(value, ty)| -> Box<dyn ToSql + Sync + Send> {
            match (value, ty) {
                (Value::Null, &Type::INT8) => Box::new(None::<i64>),
                (Value::Null, &Type::FLOAT8) => Box::new(None::<f64>),
                (Value::Null, &Type::BOOL) => Box::new(None::<bool>),
                (Value::Null, _) => Box::new(None::<String>),
                (Value::Int(value), _) => Box::new(*value),
                (Value::Real(value), _) => Box::new(*value),
                (Value::Bool(value), _) => Box::new(*value),
                (Value::Text(value), _) => Box::new(value.clone()),
            }
        })
        .collect();
    let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|value| value.as_ref() as &(dyn ToSql + Sync)).collect();
    let rows = client.query(&statement, &refs).await.map_err(failed)?;
    rows.iter()
        .map(|row| {
            (0..row.len())
                .map(|index| {
                    let value = match *row.columns()[index].type_() {
                        Type::INT8 => row.try_get::<_, Option<i64>>(index).map(Value::from),
                        Type::INT4 => row.try_get::<_, Option<i32>>(index).map(|value| value.map(i64::from).into()),
                        Type::FLOAT8 => row.try_get::<_, Option<f64>>(index).map(Value::from),
                        Type::BOOL => row.try_get::<_, Option<bool>>(index).map(Value::from),
                        _ => row.try_get::<_, Option<String>>(index).map(Value::from),
                    };
                    value.map_err(failed)
                })
                .collect()
        })
        .collect()
}
