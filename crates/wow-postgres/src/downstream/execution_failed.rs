//! Table `execution_failed`: compensation records (`CompensationStore`), one per failing
//! (consumer, stream), with its attempts and when it is due for a retry.
//!
//! Why a report takes an advisory lock on (consumer, stream): reading the existing record
//! and writing the next one are one step for concurrent reporters of the same pair, the
//! first report too, which finds no row it could lock.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use wow_core::compensation::{
    edited, next_record, skipped, succeeded, CompensationStore, ExecutionFailed,
    ExecutionFailedStatus, FailedExecution, FailureQuery, RecordEdit, RecoverableType, RetrySpec,
};
use wow_core::event::ConsumerStoreError;
use wow_core::{AggregateId, CommandStage, ErrorCode};

use super::internal;
use crate::error::consumer_store_error as db_error;
use crate::store::clamp;
use crate::PostgresStore;

/// The columns of a record, in the order [`decode_failed`] reads them: a macro, so that the
/// statements below can be built from it at compile time.
macro_rules! failed_columns {
    () => {
        "id, consumer, stage, context_name, aggregate_name, aggregate_id, tenant_id, version, stream_id, event_ids, error_code, error_message, attempts, status, next_retry_at, created_at, updated_at, skipped_by, retry_spec, updated_by, recoverable"
    };
}

/// Waits for, then holds until the transaction ends, the lock on the key hashed from `$1`
/// (a consumer and a stream id).
const LOCK_STREAM: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

/// The record of consumer `$1` on stream `$2`, if it has one.
const SELECT_BY_STREAM: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE consumer = $1 AND stream_id = $2"
);

/// The record `$1`, if there is one.
const SELECT_BY_ID: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE id = $1"
);

/// The record `$1`, if there is one, locked until the transaction ends.
const SELECT_BY_ID_FOR_UPDATE: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE id = $1 FOR UPDATE"
);

/// The filters of [`LIST`] and [`COUNT`]: status `$1`, consumer `$2`, tenant `$3`,
/// aggregate type `$4`, aggregate id `$5` and recoverability `$6`, each when not NULL.
macro_rules! failed_filters {
    () => {
        "($1::TEXT IS NULL OR status = $1) AND ($2::TEXT IS NULL OR consumer = $2) AND ($3::TEXT IS NULL OR tenant_id = $3) AND ($4::TEXT IS NULL OR aggregate_name = $4) AND ($5::TEXT IS NULL OR aggregate_id = $5) AND ($6::TEXT IS NULL OR recoverable = $6)"
    };
}

/// The records [`failed_filters`] selects with ids after `$7` (when not NULL), in id order,
/// at most `$8`.
const LIST: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE ",
    failed_filters!(),
    " AND ($7::TEXT IS NULL OR id > $7) ORDER BY id LIMIT $8"
);

/// How many records [`failed_filters`] selects.
const COUNT: &str = concat!(
    "SELECT COUNT(*) FROM execution_failed WHERE ",
    failed_filters!()
);

/// The failed records (never an `UNRECOVERABLE` one) due for a retry at `$1`, in history order, at most `$2`.
const DUE: &str = concat!(
    "SELECT ",
    failed_columns!(),
    " FROM execution_failed WHERE status = 'FAILED' AND recoverable <> 'UNRECOVERABLE' AND next_retry_at <= $1 ORDER BY tenant_id, aggregate_name, aggregate_id, version, consumer LIMIT $2"
);

/// Writes a record, `$1` to `$21` in the order of [`failed_columns`]. A record already there
/// takes the new error, attempts, status, retry time and update time, and keeps the rest.
const SAVE: &str = concat!(
    "INSERT INTO execution_failed (",
    failed_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
                 ON CONFLICT (id) DO UPDATE SET error_code = EXCLUDED.error_code, error_message = EXCLUDED.error_message, attempts = EXCLUDED.attempts,
                 status = EXCLUDED.status, next_retry_at = EXCLUDED.next_retry_at, updated_at = EXCLUDED.updated_at, skipped_by = EXCLUDED.skipped_by,
                 retry_spec = EXCLUDED.retry_spec, updated_by = EXCLUDED.updated_by,
                 recoverable = EXCLUDED.recoverable"
);

/// Decodes the columns of [`failed_columns`].
fn decode_failed(row: &Row) -> Result<ExecutionFailed, ConsumerStoreError> {
    let stage: String = row.get(2);
    let error_code: String = row.get(10);
    let status: String = row.get(13);
    let recoverable: String = row.get(20);
    Ok(ExecutionFailed {
        id: row.get(0),
        consumer: row.get(1),
        stage: stage
            .parse::<CommandStage>()
            .map_err(|e| internal(e.to_string()))?,
        aggregate_id: AggregateId {
            context_name: row.get(3),
            aggregate_name: row.get(4),
            id: row.get(5),
            tenant_id: row.get(6),
        },
        version: u64::try_from(row.get::<_, i64>(7)).unwrap_or(0),
        stream_id: row.get(8),
        event_ids: serde_json::from_value(row.get(9)).map_err(internal)?,
        error_code: error_code
            .parse::<ErrorCode>()
            .map_err(|e| internal(e.to_string()))?,
        error_message: row.get(11),
        attempts: u32::try_from(row.get::<_, i32>(12)).unwrap_or(0),
        status: ExecutionFailedStatus::parse(&status)
            .ok_or_else(|| internal(format!("unknown status `{status}`")))?,
        next_retry_at: row.get(14),
        created_at: row.get(15),
        updated_at: row.get(16),
        skipped_by: row.get(17),
        retry_spec: row
            .get::<_, Option<serde_json::Value>>(18)
            .map(serde_json::from_value::<RetrySpec>)
            .transpose()
            .map_err(internal)?,
        updated_by: row.get(19),
        recoverable: RecoverableType::parse(&recoverable)
            .ok_or_else(|| internal(format!("unknown recoverability `{recoverable}`")))?,
    })
}

/// The records `sql` (one of the `SELECT`s above) reads with `values`.
async fn select_failed(
    client: &impl GenericClient,
    sql: &str,
    values: &[&(dyn ToSql + Sync)],
) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
    let rows = client.query(sql, values).await.map_err(db_error)?;
    rows.iter().map(decode_failed).collect()
}

/// Writes `record` (see [`SAVE`]).
async fn save_failed(
    client: &impl GenericClient,
    record: &ExecutionFailed,
) -> Result<(), ConsumerStoreError> {
    let event_ids = serde_json::to_value(&record.event_ids).map_err(internal)?;
    let attempts = i32::try_from(record.attempts).unwrap_or(i32::MAX);
    let retry_spec = record
        .retry_spec
        .map(serde_json::to_value)
        .transpose()
        .map_err(internal)?;
    client
        .execute(
            SAVE,
            &[
                &record.id,
                &record.consumer,
                &record.stage.as_str(),
                &record.aggregate_id.context_name,
                &record.aggregate_id.aggregate_name,
                &record.aggregate_id.id,
                &record.aggregate_id.tenant_id,
                &clamp(record.version),
                &record.stream_id,
                &event_ids,
                &record.error_code.as_str(),
                &record.error_message,
                &attempts,
                &record.status.as_str(),
                &record.next_retry_at,
                &record.created_at,
                &record.updated_at,
                &record.skipped_by,
                &retry_spec,
                &record.updated_by,
                &record.recoverable.as_str(),
            ],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

impl PostgresStore {
    /// Record `id` changed by `change` under its row lock, and written back: `None` when there
    /// is no such record.
    async fn change_record(
        &self,
        id: &str,
        change: impl FnOnce(ExecutionFailed) -> ExecutionFailed + Send,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        self.within(async {
            let mut client = self.downstream_client().await?;
            let transaction = client.transaction().await.map_err(db_error)?;
            let Some(record) = select_failed(&transaction, SELECT_BY_ID_FOR_UPDATE, &[&id])
                .await?
                .pop()
            else {
                return Ok(None);
            };
            let record = change(record);
            save_failed(&transaction, &record).await?;
            transaction.commit().await.map_err(db_error)?;
            Ok(Some(record))
        })
        .await
    }
}

#[async_trait]
impl CompensationStore for PostgresStore {
    async fn record_failure(
        &self,
        failure: &FailedExecution,
        retry: &RetrySpec,
        now: i64,
    ) -> Result<ExecutionFailed, ConsumerStoreError> {
        self.within(async {
            let mut client = self.downstream_client().await?;
            let transaction = client.transaction().await.map_err(db_error)?;
            // One failure of a consumer on a stream at a time: the read and the write below are
            // one step for concurrent reporters of the same pair.
            let lock_key = format!("{}\n{}", failure.consumer, failure.stream_id);
            transaction
                .execute(LOCK_STREAM, &[&lock_key])
                .await
                .map_err(db_error)?;
            let existing = select_failed(
                &transaction,
                SELECT_BY_STREAM,
                &[&failure.consumer, &failure.stream_id],
            )
            .await?
            .pop();
            let record = next_record(existing, failure, retry, now);
            save_failed(&transaction, &record).await?;
            transaction.commit().await.map_err(db_error)?;
            Ok(record)
        })
        .await
    }

    async fn mark_succeeded(
        &self,
        id: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        self.change_record(id, |record| succeeded(record, now))
            .await
    }

    async fn mark_skipped(
        &self,
        id: &str,
        by: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        self.change_record(id, |record| skipped(record, by, now))
            .await
    }

    async fn edit(
        &self,
        id: &str,
        edit: &RecordEdit,
        by: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        self.change_record(id, |record| edited(record, edit, by, now))
            .await
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            Ok(select_failed(&client, SELECT_BY_ID, &[&id]).await?.pop())
        })
        .await
    }

    async fn list(&self, query: &FailureQuery) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            let status = query.status.map(|status| status.as_str());
            let recoverable = query.recoverable.map(|recoverable| recoverable.as_str());
            let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
            select_failed(
                &client,
                LIST,
                &[
                    &status,
                    &query.consumer,
                    &query.tenant_id,
                    &query.aggregate_name,
                    &query.aggregate_id,
                    &recoverable,
                    &query.after_id,
                    &limit,
                ],
            )
            .await
        })
        .await
    }

    async fn count(&self, query: &FailureQuery) -> Result<u64, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            let status = query.status.map(|status| status.as_str());
            let recoverable = query.recoverable.map(|recoverable| recoverable.as_str());
            let row = client
                .query_one(
                    COUNT,
                    &[
                        &status,
                        &query.consumer,
                        &query.tenant_id,
                        &query.aggregate_name,
                        &query.aggregate_id,
                        &recoverable,
                    ],
                )
                .await
                .map_err(db_error)?;
            Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
        })
        .await
    }

    async fn due(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        self.within(async {
            let client = self.downstream_client().await?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            select_failed(&client, DUE, &[&now, &limit]).await
        })
        .await
    }
}
