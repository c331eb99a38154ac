//! Table `execution_failed`: compensation records (`CompensationStore`), one per failing
//! (consumer, stream), with its attempts and when it is due for a retry.
//!
//! A report reads the existing record and writes the next one in the writer's transaction:
//! the one writer makes the two one step for concurrent reporters of the same pair.

use async_trait::async_trait;
use rusqlite::{params, Connection, Row};
use wow_core::compensation::{
    edited, next_record, skipped, succeeded, CompensationStore, ExecutionFailed,
    ExecutionFailedStatus, FailedExecution, FailureQuery, RecordEdit, RecoverableType, RetrySpec,
};
use wow_core::event::ConsumerStoreError;
use wow_core::eventsourcing::BoxError;
use wow_core::{AggregateId, CommandStage, ErrorCode};

use crate::store::clamp;
use crate::SqliteStore;

/// The columns of a record, in the order [`decode_failed`] reads them: a macro, so that the
/// statements below can be built from it at compile time.
macro_rules! failed_columns {
    () => {
        "id, consumer, stage, context_name, aggregate_name, aggregate_id, tenant_id, version, stream_id, event_ids, error_code, error_message, attempts, status, next_retry_at, created_at, updated_at, skipped_by, retry_spec, updated_by, recoverable"
    };
}

/// The record of consumer `?1` on stream `?2`, if it has one.
const SELECT_BY_STREAM: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE consumer = ?1 AND stream_id = ?2"
);

/// The record `?1`, if there is one.
const SELECT_BY_ID: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE id = ?1"
);

/// The filters of [`LIST`] and [`COUNT`]: status `?1`, consumer `?2`, tenant `?3`,
/// aggregate type `?4`, aggregate id `?5` and recoverability `?6`, each when not NULL.
macro_rules! failed_filters {
    () => {
        "(?1 IS NULL OR status = ?1) AND (?2 IS NULL OR consumer = ?2) AND (?3 IS NULL OR tenant_id = ?3) AND (?4 IS NULL OR aggregate_name = ?4) AND (?5 IS NULL OR aggregate_id = ?5) AND (?6 IS NULL OR recoverable = ?6)"
    };
}

/// The records [`failed_filters`] selects with ids after `?7` (when not NULL), in id order,
/// at most `?8`.
const LIST: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE ",
    failed_filters!(),
    " AND (?7 IS NULL OR id > ?7) ORDER BY id LIMIT ?8"
);

/// How many records [`failed_filters`] selects.
const COUNT: &str = concat!(
    "SELECT COUNT(*) FROM execution_failed WHERE ",
    failed_filters!()
);

/// The failed records (never an `UNRECOVERABLE` one) due for a retry at `?1`, in history order, at most `?2`.
const DUE: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE status = 'FAILED' AND recoverable <> 'UNRECOVERABLE' AND next_retry_at <= ?1 ORDER BY tenant_id, aggregate_name, aggregate_id, version, consumer LIMIT ?2"
);

/// Writes a record, `?1` to `?21` in the order of [`failed_columns`], replacing the one of
/// its id.
const SAVE: &str = concat!(
    "INSERT OR REPLACE INTO execution_failed (",
    failed_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
);

/// Column `index` could not be read: `error` says why.
fn bad_column(index: usize, error: impl Into<BoxError>) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, error.into())
}

/// Decodes the columns of [`failed_columns`].
fn decode_failed(row: &Row<'_>) -> rusqlite::Result<ExecutionFailed> {
    let stage: String = row.get(2)?;
    let event_ids: String = row.get(9)?;
    let error_code: String = row.get(10)?;
    let status: String = row.get(13)?;
    let retry_spec: Option<String> = row.get(18)?;
    let recoverable: String = row.get(20)?;
    Ok(ExecutionFailed {
        id: row.get(0)?,
        consumer: row.get(1)?,
        stage: stage
            .parse::<CommandStage>()
            .map_err(|e| bad_column(2, e.to_string()))?,
        aggregate_id: AggregateId {
            context_name: row.get(3)?,
            aggregate_name: row.get(4)?,
            id: row.get(5)?,
            tenant_id: row.get(6)?,
        },
        version: u64::try_from(row.get::<_, i64>(7)?).unwrap_or(0),
        stream_id: row.get(8)?,
        event_ids: serde_json::from_str(&event_ids).map_err(|e| bad_column(9, e))?,
        error_code: error_code
            .parse::<ErrorCode>()
            .map_err(|e| bad_column(10, e.to_string()))?,
        error_message: row.get(11)?,
        attempts: u32::try_from(row.get::<_, i64>(12)?).unwrap_or(u32::MAX),
        status: ExecutionFailedStatus::parse(&status)
            .ok_or_else(|| bad_column(13, format!("unknown status `{status}`")))?,
        next_retry_at: row.get(14)?,
        created_at: row.get(15)?,
        updated_at: row.get(16)?,
        skipped_by: row.get(17)?,
        retry_spec: retry_spec
            .map(|spec| serde_json::from_str::<RetrySpec>(&spec))
            .transpose()
            .map_err(|e| bad_column(18, e))?,
        updated_by: row.get(19)?,
        recoverable: RecoverableType::parse(&recoverable)
            .ok_or_else(|| bad_column(20, format!("unknown recoverability `{recoverable}`")))?,
    })
}

/// Writes `record` (see [`SAVE`]).
fn save_failed(connection: &Connection, record: &ExecutionFailed) -> Result<(), BoxError> {
    connection.execute(
        SAVE,
        params![
            record.id,
            record.consumer,
            record.stage.as_str(),
            record.aggregate_id.context_name,
            record.aggregate_id.aggregate_name,
            record.aggregate_id.id,
            record.aggregate_id.tenant_id,
            clamp(record.version),
            record.stream_id,
            serde_json::to_string(&record.event_ids)?,
            record.error_code.as_str(),
            record.error_message,
            record.attempts,
            record.status.as_str(),
            record.next_retry_at,
            record.created_at,
            record.updated_at,
            record.skipped_by,
            record
                .retry_spec
                .map(|spec| serde_json::to_string(&spec))
                .transpose()?,
            record.updated_by,
            record.recoverable.as_str(),
        ],
    )?;
    Ok(())
}

/// The records `sql` (one of the `SELECT`s above) reads with `values`.
fn select_failed(
    connection: &Connection,
    sql: &str,
    values: &[&dyn rusqlite::ToSql],
) -> rusqlite::Result<Vec<ExecutionFailed>> {
    let mut statement = connection.prepare_cached(sql)?;
    let rows = statement.query_map(values, decode_failed)?;
    rows.collect()
}

/// The parameters of [`failed_filters`] for `query`, `?1` to `?6`.
fn filter_values(query: &FailureQuery) -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value;
    let text =
        |value: Option<&str>| value.map_or(Value::Null, |value| Value::Text(value.to_owned()));
    vec![
        text(query.status.map(|status| status.as_str())),
        text(query.consumer.as_deref()),
        text(query.tenant_id.as_deref()),
        text(query.aggregate_name.as_deref()),
        text(query.aggregate_id.as_deref()),
        text(query.recoverable.map(|recoverable| recoverable.as_str())),
    ]
}

impl SqliteStore {
    /// Record `id` changed by `change` and written back in the writer's transaction: `None`
    /// when there is no such record.
    async fn change_record(
        &self,
        id: &str,
        change: impl FnOnce(ExecutionFailed) -> ExecutionFailed + Send + 'static,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let id = id.to_owned();
        self.write(move |connection| {
            let Some(record) = select_failed(connection, SELECT_BY_ID, &[&id])?.pop() else {
                return Ok(None);
            };
            let record = change(record);
            save_failed(connection, &record)?;
            Ok(Some(record))
        })
        .await
    }
}

#[async_trait]
impl CompensationStore for SqliteStore {
    async fn record_failure(
        &self,
        failure: &FailedExecution,
        retry: &RetrySpec,
        now: i64,
    ) -> Result<ExecutionFailed, ConsumerStoreError> {
        let (failure, retry) = (failure.clone(), *retry);
        self.write(move |connection| {
            let existing = select_failed(
                connection,
                SELECT_BY_STREAM,
                &[&failure.consumer, &failure.stream_id],
            )?
            .pop();
            let record = next_record(existing, &failure, &retry, now);
            save_failed(connection, &record)?;
            Ok(record)
        })
        .await
    }

    async fn mark_succeeded(
        &self,
        id: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        self.change_record(id, move |record| succeeded(record, now))
            .await
    }

    async fn mark_skipped(
        &self,
        id: &str,
        by: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let by = by.to_owned();
        self.change_record(id, move |record| skipped(record, &by, now))
            .await
    }

    async fn edit(
        &self,
        id: &str,
        edit: &RecordEdit,
        by: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let (edit, by) = (edit.clone(), by.to_owned());
        self.change_record(id, move |record| edited(record, &edit, &by, now))
            .await
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let id = id.to_owned();
        self.read_rows(move |connection| Ok(select_failed(connection, SELECT_BY_ID, &[&id])?.pop()))
            .await
    }

    async fn list(&self, query: &FailureQuery) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        let query = query.clone();
        self.read_rows(move |connection| {
            let mut values = filter_values(&query);
            values.push(
                query
                    .after_id
                    .map_or(rusqlite::types::Value::Null, rusqlite::types::Value::Text),
            );
            values.push(rusqlite::types::Value::Integer(
                i64::try_from(query.limit).unwrap_or(i64::MAX),
            ));
            let mut statement = connection.prepare_cached(LIST)?;
            let rows = statement.query_map(rusqlite::params_from_iter(values), decode_failed)?;
            rows.collect()
        })
        .await
    }

    async fn count(&self, query: &FailureQuery) -> Result<u64, ConsumerStoreError> {
        let query = query.clone();
        self.read_rows(move |connection| {
            let count: i64 = connection
                .prepare_cached(COUNT)?
                .query_row(rusqlite::params_from_iter(filter_values(&query)), |row| {
                    row.get(0)
                })?;
            Ok(u64::try_from(count).unwrap_or(0))
        })
        .await
    }

    async fn due(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        self.read_rows(move |connection| {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            select_failed(connection, DUE, &[&now, &limit])
        })
        .await
    }
}
