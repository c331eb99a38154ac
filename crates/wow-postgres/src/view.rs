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
//! A list's filters are in [`filter`]; Wow's query DSL over the states is translated by
//! [`crate::query`], on the query connections; a view's query index is in [`query_index`].

pub(crate) mod field_index;
pub(crate) mod filter;
mod query_index;

use async_trait::async_trait;
use deadpool_postgres::Transaction;
use tokio_postgres::Row;
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::BoxError;
use wow_core::query::{DocumentQuery, Filter};
use wow_core::view::{
    apply_update, ViewFilter, ViewKey, ViewRow, ViewStore, ViewStoreError, ViewUpdate,
};

use crate::error::{pool_view_error, view_error};
use crate::query::{param_refs, Param, Translation};
use crate::store::processed_message::FORGET_CONSUMER;
use crate::PostgresStore;

/// The columns [`decode`] reads, from `view_row`: a macro, so that the statements below can
/// be built from it at compile time.
macro_rules! select_rows {
    () => {
        "SELECT aggregate_id, version, state, updated_at FROM view_row"
    };
}

/// The rows of [`select_rows`], with the conditions that follow it.
const SELECT: &str = select_rows!();

/// The row of key (`$1` view, `$2` tenant, `$3` aggregate id), if it has one.
const LOAD_ROW: &str = concat!(
    select_rows!(),
    " WHERE view = $1 AND tenant_id = $2 AND aggregate_id = $3"
);

/// Waits for, then holds until the transaction ends, the lock on the key hashed from `$1`
/// (class 7006, see the module docs).
const LOCK_KEY: &str = "SELECT pg_advisory_xact_lock(7006, hashtext($1))";

/// Writes the row of key (`$1` view, `$2` tenant, `$3` aggregate id): version `$4`, state
/// `$5`, updated at `$6`.
const UPSERT_ROW: &str = "INSERT INTO view_row (view, tenant_id, aggregate_id, version, state, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
                         ON CONFLICT (view, tenant_id, aggregate_id) DO UPDATE SET version = EXCLUDED.version, state = EXCLUDED.state, updated_at = EXCLUDED.updated_at";

/// Writes the row of key as [`UPSERT_ROW`] does, unless the stored one is at version `$4`
/// or later: one statement, atomic by itself, so it needs no lock on the key.
const PUT_NEWER_ROW: &str = "INSERT INTO view_row (view, tenant_id, aggregate_id, version, state, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
                         ON CONFLICT (view, tenant_id, aggregate_id) DO UPDATE SET version = EXCLUDED.version, state = EXCLUDED.state, updated_at = EXCLUDED.updated_at
                         WHERE EXCLUDED.version > view_row.version";

/// Every tenant's rows of view `$1` after (`$2` tenant, `$3` aggregate id) when `$2` is not
/// NULL, in key order, at most `$4`: the columns of [`select_rows`], then the tenant.
const SCAN_ROWS: &str = "SELECT aggregate_id, version, state, updated_at, tenant_id FROM view_row
                 WHERE view = $1 AND ($2::TEXT IS NULL OR (tenant_id, aggregate_id) > ($2::TEXT, $3::TEXT))
                 ORDER BY tenant_id, aggregate_id LIMIT $4";

/// Drops every row of view `$1`.
const CLEAR_ROWS: &str = "DELETE FROM view_row WHERE view = $1";

/// The rows of view `$1` in tenant `$2` after aggregate id `$3` (when not NULL) that
/// `conditions` (each `AND (...)`, see [`filter::conditions`]) select, in id order, at most
/// `$4`.
pub(crate) fn list_rows_sql(conditions: &str) -> String {
    format!(
        "{SELECT} WHERE view = $1 AND tenant_id = $2 AND ($3::TEXT IS NULL OR aggregate_id > $3::TEXT){conditions} ORDER BY aggregate_id LIMIT $4"
    )
}

/// The scope of a query of view `$1` in tenant `$2`, before its own conditions.
const QUERY_SCOPE: &str = "view = $1 AND tenant_id = $2 AND ";

/// Decodes `aggregate_id, version, state, updated_at` into a row of `view` in `tenant_id`.
fn decode(view: &str, tenant_id: &str, row: &Row) -> Result<ViewRow, tokio_postgres::Error> {
    Ok(ViewRow {
        key: ViewKey::new(view, tenant_id, row.try_get::<_, String>(0)?),
        version: u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0),
        state: row.try_get(2)?,
        updated_at: row.try_get(3)?,
    })
}

/// A translation of Wow's query DSL over the states of `view` in `tenant_id`, the two bound
/// as `$1` and `$2`.
fn translation<'a>(view: &str, tenant_id: &str) -> Translation<'a> {
    Translation::new(
        "state",
        vec![Box::new(view.to_owned()), Box::new(tenant_id.to_owned())],
    )
    .with_containment()
}

/// The view's work on `key` in `transaction` (whose processed-message record is written):
/// the key locked, its row read, `work` applied and what it answers written.
async fn update_row(
    transaction: &Transaction<'_>,
    key: ViewKey,
    work: ViewUpdate,
) -> Result<(), BoxError> {
    let lock = format!(
        "{}\u{1f}{}\u{1f}{}",
        key.view, key.tenant_id, key.aggregate_id
    );
    let (lock_statement, select) = futures::try_join!(
        transaction.prepare_cached(LOCK_KEY),
        transaction.prepare_cached(LOAD_ROW),
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
    let upsert = transaction.prepare_cached(UPSERT_ROW).await?;
    transaction
        .execute(
            &upsert,
            &[
                &row.key.view,
                &row.key.tenant_id,
                &row.key.aggregate_id,
                &version,
                &row.state,
                &row.updated_at,
            ],
        )
        .await?;
    Ok(())
}

#[async_trait]
impl ViewStore for PostgresStore {
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        // Bounded by the call deadline in `process_once`.
        let key = key.clone();
        let view = key.view.clone();
        self.process_once(&view, message_id, move |transaction| {
            Box::pin(update_row(transaction, key, work))
        })
        .await
    }

    async fn put_newer(&self, row: ViewRow) -> Result<bool, ViewStoreError> {
        self.within(async {
            let client = self.pool().get().await.map_err(pool_view_error)?;
            let statement = client
                .prepare_cached(PUT_NEWER_ROW)
                .await
                .map_err(view_error)?;
            let version = i64::try_from(row.version).unwrap_or(i64::MAX);
            let changed = client
                .execute(
                    &statement,
                    &[
                        &row.key.view,
                        &row.key.tenant_id,
                        &row.key.aggregate_id,
                        &version,
                        &row.state,
                        &row.updated_at,
                    ],
                )
                .await
                .map_err(view_error)?;
            Ok(changed > 0)
        })
        .await
    }

    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        self.within(async {
            let client = self.pool().get().await.map_err(pool_view_error)?;
            let row = client
                .query_opt(LOAD_ROW, &[&key.view, &key.tenant_id, &key.aggregate_id])
                .await
                .map_err(view_error)?;
            row.map(|row| decode(&key.view, &key.tenant_id, &row))
                .transpose()
                .map_err(view_error)
        })
        .await
    }

    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.within(async {
            let mut params: Vec<Param> = vec![
                Box::new(view.to_owned()),
                Box::new(tenant_id.to_owned()),
                Box::new(after.map(str::to_owned)),
                Box::new(i64::try_from(limit).unwrap_or(i64::MAX)),
            ];
            let sql = list_rows_sql(&filter::conditions(filter, &mut params)?);
            let client = self.pool().get().await.map_err(pool_view_error)?;
            let rows = client
                .query(&sql, &param_refs(&params))
                .await
                .map_err(view_error)?;
            rows.iter()
                .map(|row| decode(view, tenant_id, row).map_err(view_error))
                .collect()
        })
        .await
    }

    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let mut sql = translation(view, tenant_id);
        let text = sql.page_sql(SELECT, QUERY_SCOPE, query, "aggregate_id");
        let rows = self.queries.rows(tenant_id, &text, &sql.params).await?;
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
        let mut sql = translation(view, tenant_id);
        let text = sql.count_sql("view_row", QUERY_SCOPE, filter);
        Ok(self.queries.count(tenant_id, &text, &sql.params).await?)
    }

    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        self.within(async {
            let (tenant, id) = after
                .map(|key| (key.tenant_id.clone(), key.aggregate_id.clone()))
                .unzip();
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let client = self.pool().get().await.map_err(pool_view_error)?;
            let rows = client
                .query(SCAN_ROWS, &[&view, &tenant, &id, &limit])
                .await
                .map_err(view_error)?;
            rows.iter()
                .map(|row| {
                    let tenant: String = row.try_get(4)?;
                    decode(view, &tenant, row)
                })
                .collect::<Result<_, _>>()
                .map_err(view_error)
        })
        .await
    }

    async fn declare_query_index(&self, view: &str) -> Result<(), ViewStoreError> {
        query_index::declare(self, view).await
    }

    async fn declare_field_index(&self, view: &str, field: &str) -> Result<(), ViewStoreError> {
        let _ = view;
        field_index::declare(self, field).await
    }

    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        let mut client = self.pool().get().await.map_err(pool_view_error)?;
        let transaction = client.transaction().await.map_err(view_error)?;
        transaction
            .execute(CLEAR_ROWS, &[&view])
            .await
            .map_err(view_error)?;
        transaction
            .execute(FORGET_CONSUMER, &[&view])
            .await
            .map_err(view_error)?;
        transaction.commit().await.map_err(view_error)
    }
}
