//! Portable views in the store's schema: table `view_row`, one row per (view, tenant,
//! aggregate id), the state as JSONB.
//!
//! An update is one transaction: the processed-message record first (as
//! [`PostgresStore::process_once`] does), then a transaction-scoped advisory lock on the
//! row's key, then the read, the view's work and the upsert. Why a lock on the key rather
//! than `SELECT ... FOR UPDATE`: the first update of a key finds no row to lock, so two
//! first updates would both fold from nothing and one would overwrite the other. The lock
//! (class 7006, the key hashed; a hash collision only makes two keys wait for each other)
//! serialises every update of a key, existing or not; under READ COMMITTED the read after
//! the lock sees what the previous holder committed. Locks are taken in one order (record,
//! then one key), so updates cannot deadlock each other.
//!
//! Filters become `jsonb` comparisons (`state -> $n::text`), the field names checked and
//! bound, the values bound through `to_jsonb`, so a number equals a number numerically and
//! never a string.

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::BoxError;
use wow_core::query::{DocumentQuery, Filter};
use wow_core::view::{
    apply_update, Condition, FilterValue, ViewFilter, ViewKey, ViewRow, ViewStore, ViewStoreError,
    ViewUpdate,
};

use crate::error::{pool_view_error, view_error};
use crate::query::Translation;
use crate::PostgresStore;

const SELECT: &str = "SELECT aggregate_id, version, state, updated_at FROM view_row";

/// Decodes `aggregate_id, version, state, updated_at` into a row of `view` in `tenant_id`.
fn decode(view: &str, tenant_id: &str, row: &Row) -> Result<ViewRow, tokio_postgres::Error> {
    Ok(ViewRow {
        key: ViewKey::new(view, tenant_id, row.try_get::<_, String>(0)?),
        version: u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0),
        state: row.try_get(2)?,
        updated_at: row.try_get(3)?,
    })
}

type Param = Box<dyn ToSql + Sync + Send>;

/// The SQL of `filter`'s conditions (each `AND (...)`), with their parameters appended to
/// `params`: each condition binds its field name, then its value.
fn conditions(filter: &ViewFilter, params: &mut Vec<Param>) -> Result<String, ViewStoreError> {
    filter.check()?;
    let mut sql = String::new();
    for condition in filter.conditions() {
        let (field, value) = (params.len() + 1, params.len() + 2);
        let found = format!("(state -> ${field}::TEXT)");
        let number = format!("jsonb_typeof{found} = 'number'");
        let (clause, bound): (String, Param) = match condition {
            Condition::Equals {
                value: FilterValue::Text(text),
                ..
            } => (
                format!("{found} = to_jsonb(${value}::TEXT)"),
                Box::new(text.clone()),
            ),
            Condition::Equals {
                value: FilterValue::Integer(integer),
                ..
            } => (
                format!("{number} AND {found} = to_jsonb(${value}::BIGINT)"),
                Box::new(*integer),
            ),
            Condition::Equals {
                value: FilterValue::Bool(flag),
                ..
            } => (
                format!("{found} = to_jsonb(${value}::BOOLEAN)"),
                Box::new(*flag),
            ),
            Condition::AtLeast { value: bound, .. } => (
                format!("{number} AND {found} >= to_jsonb(${value}::BIGINT)"),
                Box::new(*bound),
            ),
            Condition::AtMost { value: bound, .. } => (
                format!("{number} AND {found} <= to_jsonb(${value}::BIGINT)"),
                Box::new(*bound),
            ),
            other => {
                return Err(ViewStoreError::IllegalArgument(format!(
                    "this store cannot filter by {other:?}"
                )))
            }
        };
        params.push(Box::new(condition.field().to_owned()));
        params.push(bound);
        sql.push_str(" AND (");
        sql.push_str(&clause);
        sql.push(')');
    }
    Ok(sql)
}

#[async_trait]
impl ViewStore for PostgresStore {
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        let key = key.clone();
        let view = key.view.clone();
        self.process_once(&view, message_id, move |transaction| {
            Box::pin(async move {
                let lock = format!("{}\u{1f}{}\u{1f}{}", key.view, key.tenant_id, key.aggregate_id);
                let select_sql =
                    format!("{SELECT} WHERE view = $1 AND tenant_id = $2 AND aggregate_id = $3");
                let (lock_statement, select) = futures::try_join!(
                    transaction.prepare_cached("SELECT pg_advisory_xact_lock(7006, hashtext($1))"),
                    transaction.prepare_cached(&select_sql),
                )?;
                let lock_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&lock];
                let select_params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                    [&key.view, &key.tenant_id, &key.aggregate_id];
                // Sent together (the lock is taken before the read runs, in order on the
                // connection): one round trip instead of two.
                let (_, current) = futures::try_join!(
                    transaction.execute(&lock_statement, &lock_params),
                    transaction.query_opt(&select, &select_params),
                )?;
                let current = current
                    .map(|row| decode(&key.view, &key.tenant_id, &row))
                    .transpose()?;
                let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    apply_update(&key, current, work)
                }))
                .map_err(|_| BoxError::from("the view's update panicked"))??;
                let Some(row) = next else {
                    return Ok(());
                };
                let version = i64::try_from(row.version).unwrap_or(i64::MAX);
                let upsert = transaction
                    .prepare_cached(
                        "INSERT INTO view_row (view, tenant_id, aggregate_id, version, state, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
                         ON CONFLICT (view, tenant_id, aggregate_id) DO UPDATE SET version = EXCLUDED.version, state = EXCLUDED.state, updated_at = EXCLUDED.updated_at",
                    )
                    .await?;
                transaction
                    .execute(
                        &upsert,
                        &[&row.key.view, &row.key.tenant_id, &row.key.aggregate_id, &version, &row.state, &row.updated_at],
                    )
                    .await?;
                Ok(())
            })
        })
        .await
    }

    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        let client = self.pool().get().await.map_err(pool_view_error)?;
        let row = client
            .query_opt(
                &format!("{SELECT} WHERE view = $1 AND tenant_id = $2 AND aggregate_id = $3"),
                &[&key.view, &key.tenant_id, &key.aggregate_id],
            )
            .await
            .map_err(view_error)?;
        row.map(|row| decode(&key.view, &key.tenant_id, &row))
            .transpose()
            .map_err(view_error)
    }

    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let mut params: Vec<Param> = vec![
            Box::new(view.to_owned()),
            Box::new(tenant_id.to_owned()),
            Box::new(after.map(str::to_owned)),
            Box::new(i64::try_from(limit).unwrap_or(i64::MAX)),
        ];
        let sql = format!(
            "{SELECT} WHERE view = $1 AND tenant_id = $2 AND ($3::TEXT IS NULL OR aggregate_id > $3::TEXT){} ORDER BY aggregate_id LIMIT $4",
            conditions(filter, &mut params)?
        );
        let refs: Vec<&(dyn ToSql + Sync)> = params
            .iter()
            .map(|param| param.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let client = self.pool().get().await.map_err(pool_view_error)?;
        let rows = client.query(&sql, &refs).await.map_err(view_error)?;
        rows.iter()
            .map(|row| decode(view, tenant_id, row).map_err(view_error))
            .collect()
    }

    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let mut sql = Translation::new(
            "state",
            vec![Box::new(view.to_owned()), Box::new(tenant_id.to_owned())],
        )
        .with_containment();
        let condition = sql.condition(&query.filter);
        let mut order = sql.order(&query.sort);
        order.push("aggregate_id".to_owned());
        let limit = sql.bind(Box::new(i64::try_from(query.limit).unwrap_or(i64::MAX)));
        let offset = sql.bind(Box::new(i64::try_from(query.offset).unwrap_or(i64::MAX)));
        let text = format!(
            "{SELECT} WHERE view = $1 AND tenant_id = $2 AND {condition} ORDER BY {} LIMIT {limit} OFFSET {offset}",
            order.join(", ")
        );
        let refs: Vec<&(dyn ToSql + Sync)> = sql
            .params
            .iter()
            .map(|param| param.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let bounded = self.queries.client(tenant_id).await?;
        let rows = bounded
            .client
            .query(&text, &refs)
            .await
            .map_err(|e| self.queries.failed(e))?;
        rows.iter()
            .map(|row| decode(view, tenant_id, row).map_err(view_error))
            .collect()
    }

    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, ViewStoreError> {
        let mut sql = Translation::new(
            "state",
            vec![Box::new(view.to_owned()), Box::new(tenant_id.to_owned())],
        )
        .with_containment();
        let condition = sql.condition(filter);
        let text = format!(
            "SELECT COUNT(*) FROM view_row WHERE view = $1 AND tenant_id = $2 AND {condition}"
        );
        let refs: Vec<&(dyn ToSql + Sync)> = sql
            .params
            .iter()
            .map(|param| param.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let bounded = self.queries.client(tenant_id).await?;
        let count: i64 = bounded
            .client
            .query_one(&text, &refs)
            .await
            .map_err(|e| self.queries.failed(e))?
            .get(0);
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let (tenant, id) = after
            .map(|key| (key.tenant_id.clone(), key.aggregate_id.clone()))
            .unzip();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.pool().get().await.map_err(pool_view_error)?;
        let rows = client
            .query(
                "SELECT aggregate_id, version, state, updated_at, tenant_id FROM view_row
                 WHERE view = $1 AND ($2::TEXT IS NULL OR (tenant_id, aggregate_id) > ($2::TEXT, $3::TEXT))
                 ORDER BY tenant_id, aggregate_id LIMIT $4",
                &[&view, &tenant, &id, &limit],
            )
            .await
            .map_err(view_error)?;
        rows.iter()
            .map(|row| {
                let tenant: String = row.try_get(4)?;
                decode(view, &tenant, row)
            })
            .collect::<Result<_, _>>()
            .map_err(view_error)
    }

    async fn declare_query_index(&self, view: &str) -> Result<(), ViewStoreError> {
        let name = query_index_name(view);
        let client = self.pool().get().await.map_err(pool_view_error)?;
        // A literal, not a parameter: an index's predicate is part of its definition. The
        // view's name is quoted as SQL quotes a string (every ' doubled).
        let literal = view.replace('\'', "''");
        let made = client
            .batch_execute(&format!(
                "CREATE INDEX IF NOT EXISTS {name} ON view_row USING gin (state jsonb_path_ops) WHERE view = '{literal}'"
            ))
            .await;
        if let Err(error) = made {
            // Two processes making it at once: one of them finds the other's in the catalog.
            let found: Option<String> = client
                .query_one("SELECT to_regclass($1)::text", &[&name])
                .await
                .map_err(view_error)?
                .get(0);
            if found.is_none() {
                return Err(view_error(error));
            }
        }
        Ok(())
    }

    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        let mut client = self.pool().get().await.map_err(pool_view_error)?;
        let transaction = client.transaction().await.map_err(view_error)?;
        transaction
            .execute("DELETE FROM view_row WHERE view = $1", &[&view])
            .await
            .map_err(view_error)?;
        transaction
            .execute(
                "DELETE FROM processed_message WHERE consumer = $1",
                &[&view],
            )
            .await
            .map_err(view_error)?;
        transaction.commit().await.map_err(view_error)
    }
}

/// The name of `view`'s query index: stable across builds, a valid identifier whatever the
/// view is named (its SHA-256, shortened).
pub(crate) fn query_index_name(view: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(view.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("view_row_query_{hex}")
}
