//! Portable views in the same file as history: table `view_row`, one row per (view, tenant,
//! aggregate id), the state as JSON text.
//!
//! Updates go through the writer, as every write does: the row is read, the view's work
//! runs and the row is saved inside the writer's savepoint, after its processed-message
//! record. The writer is the only one, so updates of one row are serialised without locks.
//! Filters become `json_type` / `json_extract` conditions over paths built from checked field
//! names; every value is bound.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row};
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::BoxError;
use wow_core::query::{DocumentQuery, Filter};
use wow_core::view::{
    apply_update, Condition, FilterValue, ViewFilter, ViewKey, ViewRow, ViewStore, ViewStoreError,
    ViewUpdate,
};

use crate::query::Translation;
use crate::store::clamp;
use crate::store::processed_message::FORGET_CONSUMER;
use crate::SqliteStore;

/// The columns [`decode`] reads, from `view_row`: a macro, so that the statements below can
/// be built from it at compile time.
macro_rules! select_rows {
    () => {
        "SELECT aggregate_id, version, state, updated_at FROM view_row"
    };
}

/// The row of key (`?1` view, `?2` tenant, `?3` aggregate id), if it has one.
const LOAD_ROW: &str = concat!(
    select_rows!(),
    " WHERE view = ?1 AND tenant_id = ?2 AND aggregate_id = ?3"
);

/// Writes the row of key (`?1` view, `?2` tenant, `?3` aggregate id): version `?4`, state
/// `?5`, updated at `?6`.
const SAVE_ROW: &str = "INSERT INTO view_row (view, tenant_id, aggregate_id, version, state, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
    ON CONFLICT (view, tenant_id, aggregate_id) DO UPDATE SET version = excluded.version, state = excluded.state, updated_at = excluded.updated_at";

/// Writes the row of key (`?1` view, `?2` tenant, `?3` aggregate id) as [`SAVE_ROW`] does,
/// unless the stored one is at version `?4` or later.
const PUT_NEWER_ROW: &str = "INSERT INTO view_row (view, tenant_id, aggregate_id, version, state, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
    ON CONFLICT (view, tenant_id, aggregate_id) DO UPDATE SET version = excluded.version, state = excluded.state, updated_at = excluded.updated_at
    WHERE excluded.version > view_row.version";

/// Every tenant's rows of view `?1` after (`?2` tenant, `?3` aggregate id) when `?2` is not
/// NULL, in key order, at most `?4`: the columns of [`select_rows`], then the tenant.
const SCAN_ROWS: &str = "SELECT aggregate_id, version, state, updated_at, tenant_id FROM view_row
    WHERE view = ?1 AND (?2 IS NULL OR (tenant_id, aggregate_id) > (?2, ?3))
    ORDER BY tenant_id, aggregate_id LIMIT ?4";

/// Drops every row of view `?1`.
const CLEAR_ROWS: &str = "DELETE FROM view_row WHERE view = ?1";

/// The rows of view `?1` in tenant `?2` after aggregate id `?3` (when not NULL) that
/// `conditions` (each `AND (...)`, see [`conditions`]) select, in id order, at most `?4`.
fn list_rows_sql(conditions: &str) -> String {
    format!(
        "{} WHERE view = ?1 AND tenant_id = ?2 AND (?3 IS NULL OR aggregate_id > ?3){conditions} ORDER BY aggregate_id LIMIT ?4",
        select_rows!()
    )
}

/// The scope of a query of view `?1` in tenant `?2`, before its own conditions.
const QUERY_SCOPE: &str = "view = ?1 AND tenant_id = ?2 AND ";

/// A query over the `state` of view `view`'s rows in `tenant_id` (`?1`, `?2`).
fn translation<'a>(view: &str, tenant_id: &str) -> Translation<'a> {
    Translation::new(
        "state",
        vec![
            SqlValue::Text(view.to_owned()),
            SqlValue::Text(tenant_id.to_owned()),
        ],
    )
}

fn bad_state(error: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(error))
}

/// Decodes the columns of [`select_rows`] (`aggregate_id, version, state, updated_at`) into a
/// row of `view` in `tenant_id`.
fn decode(view: &str, tenant_id: &str, row: &Row<'_>) -> rusqlite::Result<ViewRow> {
    let state: String = row.get(2)?;
    Ok(ViewRow {
        key: ViewKey::new(view, tenant_id, row.get::<_, String>(0)?),
        version: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
        state: serde_json::from_str(&state).map_err(bad_state)?,
        updated_at: row.get(3)?,
    })
}

/// The row of `key` ([`LOAD_ROW`]), if it has one.
fn load_row(connection: &Connection, key: &ViewKey) -> rusqlite::Result<Option<ViewRow>> {
    connection
        .prepare_cached(LOAD_ROW)?
        .query_row(params![key.view, key.tenant_id, key.aggregate_id], |row| {
            decode(&key.view, &key.tenant_id, row)
        })
        .optional()
}

/// Writes `row` ([`SAVE_ROW`]).
fn save_row(connection: &Connection, row: &ViewRow) -> Result<(), BoxError> {
    connection.prepare_cached(SAVE_ROW)?.execute(params![
        row.key.view,
        row.key.tenant_id,
        row.key.aggregate_id,
        clamp(row.version),
        serde_json::to_string(&row.state)?,
        row.updated_at,
    ])?;
    Ok(())
}

/// The SQL of `filter`'s conditions (each `AND (...)`), with their values appended to
/// `values` as numbered placeholders. A field's JSON path is written into the SQL (the field
/// passed `check_field`: `$.` and an identifier), so that the expression is the one a field
/// index holds ([`field_index_sql`]).
fn conditions(filter: &ViewFilter, values: &mut Vec<SqlValue>) -> Result<String, ViewStoreError> {
    filter.check()?;
    let mut sql = String::new();
    for condition in filter.conditions() {
        let value = values.len() + 1;
        let path = format!("'$.{}'", condition.field());
        let number = format!("json_type(state, {path}) IN ('integer', 'real')");
        let (clause, bound) = match condition {
            Condition::Equals {
                value: FilterValue::Text(text),
                ..
            } => (
                format!("json_type(state, {path}) = 'text' AND json_extract(state, {path}) = ?{value}"),
                SqlValue::Text(text.clone()),
            ),
            Condition::Equals {
                value: FilterValue::Integer(integer),
                ..
            } => (
                format!("{number} AND json_extract(state, {path}) = ?{value}"),
                SqlValue::Integer(*integer),
            ),
            Condition::Equals {
                value: FilterValue::Bool(flag),
                ..
            } => (
                format!("json_extract(state, {path}) = ?{value} AND json_type(state, {path}) IN ('true', 'false')"),
                SqlValue::Integer(i64::from(*flag)),
            ),
            Condition::AtLeast { value: bound, .. } => (
                format!("{number} AND json_extract(state, {path}) >= ?{value}"),
                SqlValue::Integer(*bound),
            ),
            Condition::AtMost { value: bound, .. } => (
                format!("{number} AND json_extract(state, {path}) <= ?{value}"),
                SqlValue::Integer(*bound),
            ),
            other => {
                return Err(ViewStoreError::IllegalArgument(format!(
                    "this store cannot filter by {other:?}"
                )))
            }
        };
        values.push(bound);
        sql.push_str(" AND (");
        sql.push_str(&clause);
        sql.push(')');
    }
    Ok(sql)
}

/// The index on `field` of every view's states (SPEC DM-4), which a list filtering the field
/// by equality reads. `view_row` is `WITHOUT ROWID`, so the index holds its primary key after
/// the field's value: (value, view, tenant, row key), equality on the first three and the
/// list's order in the fourth; SQLite's planner does not pick an index that names the
/// primary key's columns itself. One per field name, whatever the view: its name is stable
/// across builds and a valid identifier (the field passed `check_field`).
fn field_index_sql(field: &str) -> String {
    format!(
        "CREATE INDEX IF NOT EXISTS view_row_field_{field} ON view_row (json_extract(state, '$.{field}'))"
    )
}

#[async_trait]
impl ViewStore for SqliteStore {
    async fn update(
        &self,
        key: &ViewKey,
        message_id: &str,
        work: ViewUpdate,
    ) -> Result<Processed, ProcessError> {
        let key = key.clone();
        let view = key.view.clone();
        self.process_once(&view, message_id, move |connection| {
            let current = load_row(connection, &key)?;
            if let Some(row) = apply_update(&key, current, work)? {
                save_row(connection, &row)?;
            }
            Ok(())
        })
        .await
    }

    async fn put_newer(&self, row: ViewRow) -> Result<bool, ViewStoreError> {
        // Encoded here, not on the writer's thread, which every append waits for.
        let state = serde_json::to_string(&row.state)
            .map_err(|error| ViewStoreError::Internal(Box::new(error)))?;
        let wrote = Arc::new(AtomicBool::new(false));
        let marked = wrote.clone();
        self.write_statement(move |connection| {
            let changed = connection.prepare_cached(PUT_NEWER_ROW)?.execute(params![
                row.key.view,
                row.key.tenant_id,
                row.key.aggregate_id,
                clamp(row.version),
                state,
                row.updated_at,
            ])?;
            marked.store(changed > 0, Ordering::Relaxed);
            Ok(())
        })
        .await
        .map_err(|error| match error {
            ProcessError::Store(error) => ViewStoreError::Unavailable(error),
            other => ViewStoreError::Internal(Box::new(other)),
        })?;
        Ok(wrote.load(Ordering::Relaxed))
    }

    async fn load(&self, key: &ViewKey) -> Result<Option<ViewRow>, ViewStoreError> {
        let key = key.clone();
        self.read(move |connection| load_row(connection, &key))
            .await
            .map_err(ViewStoreError::Internal)
    }

    async fn list(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &ViewFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let mut values = vec![
            SqlValue::Text(view.to_owned()),
            SqlValue::Text(tenant_id.to_owned()),
            after.map_or(SqlValue::Null, |after| SqlValue::Text(after.to_owned())),
            SqlValue::Integer(i64::try_from(limit).unwrap_or(i64::MAX)),
        ];
        let sql = list_rows_sql(&conditions(filter, &mut values)?);
        let (view, tenant_id) = (view.to_owned(), tenant_id.to_owned());
        self.read(move |connection| {
            let mut statement = connection.prepare_cached(&sql)?;
            let rows = statement.query_map(params_from_iter(values), |row| {
                decode(&view, &tenant_id, row)
            })?;
            rows.collect()
        })
        .await
        .map_err(ViewStoreError::Internal)
    }

    async fn query(
        &self,
        view: &str,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let mut sql = translation(view, tenant_id);
        let text = sql.page_sql(select_rows!(), QUERY_SCOPE, query, "aggregate_id");
        let (view, tenant, values) = (view.to_owned(), tenant_id.to_owned(), sql.values);
        Ok(self
            .queries
            .read(tenant_id, move |connection| {
                let mut statement = connection.prepare(&text)?;
                let rows = statement
                    .query_map(params_from_iter(values), |row| decode(&view, &tenant, row))?;
                rows.collect()
            })
            .await?)
    }

    async fn count(
        &self,
        view: &str,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, ViewStoreError> {
        let mut sql = translation(view, tenant_id);
        let text = sql.count_sql("view_row", QUERY_SCOPE, filter);
        Ok(self.queries.count(tenant_id, text, sql.values).await?)
    }

    async fn scan(
        &self,
        view: &str,
        after: Option<&ViewKey>,
        limit: usize,
    ) -> Result<Vec<ViewRow>, ViewStoreError> {
        let (view, limit) = (view.to_owned(), i64::try_from(limit).unwrap_or(i64::MAX));
        let after = after.map(|key| (key.tenant_id.clone(), key.aggregate_id.clone()));
        self.read(move |connection| {
            let (tenant, id) = after.unzip();
            let mut statement = connection.prepare_cached(SCAN_ROWS)?;
            let rows = statement.query_map(params![view, tenant, id, limit], |row| {
                decode(&view, &row.get::<_, String>(4)?, row)
            })?;
            rows.collect()
        })
        .await
        .map_err(ViewStoreError::Internal)
    }

    async fn declare_field_index(&self, view: &str, field: &str) -> Result<(), ViewStoreError> {
        let _ = view;
        wow_core::view::check_field(field)?;
        let sql = field_index_sql(field);
        self.transact(move |connection| {
            connection.execute_batch(&sql)?;
            Ok(())
        })
        .await
        .map_err(|error| match error {
            ProcessError::Store(error) => ViewStoreError::Unavailable(error),
            other => ViewStoreError::Internal(Box::new(other)),
        })
    }

    async fn clear(&self, view: &str) -> Result<(), ViewStoreError> {
        let view = view.to_owned();
        self.transact(move |connection| {
            connection.execute(CLEAR_ROWS, [&view])?;
            connection.execute(FORGET_CONSUMER, [&view])?;
            Ok(())
        })
        .await
        .map_err(|error| match error {
            ProcessError::Store(error) => ViewStoreError::Unavailable(error),
            other => ViewStoreError::Internal(Box::new(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC DM-4: a list filtering a declared field by equality reads that field's index,
    /// never every row of the tenant.
    #[test]
    fn a_list_on_an_indexed_field_reads_its_index() {
        let mut connection = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut connection).unwrap();
        connection.execute_batch(&field_index_sql("open")).unwrap();
        // As `list` binds them: view, tenant, after, limit, then the conditions' values.
        let mut values = vec![
            SqlValue::Text("room_schedule".to_owned()),
            SqlValue::Text("t".to_owned()),
            SqlValue::Null,
            SqlValue::Integer(10),
        ];
        let filter = ViewFilter::new().equals("open", true);
        let sql = list_rows_sql(&conditions(&filter, &mut values).unwrap());
        let mut statement = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap();
        let plan: Vec<String> = statement
            .query_map(params_from_iter(values), |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter()
                .any(|step| step.contains("USING INDEX view_row_field_open")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "the index holds the list's order: {plan:?}"
        );
    }
}
