//! The downstream stores in the same schema as history: consumer positions, the effect
//! journal and compensation records.

use std::collections::HashMap;
use wow_core::eventsourcing::GlobalPosition;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use wow_core::compensation::{
    next_record, succeeded, CompensationStore, ExecutionFailed, ExecutionFailedStatus,
    FailedExecution, FailureQuery, RetrySpec,
};
use wow_core::event::{
    ConsumerPositions, ConsumerStoreError, EffectJournal, EffectState, PositionRun,
};
use wow_core::{AggregateId, CommandStage, ErrorCode};

use crate::error::consumer_store_error as db_error;
use crate::store::clamp;
use crate::PostgresStore;

fn internal(error: impl Into<wow_core::eventsourcing::BoxError>) -> ConsumerStoreError {
    ConsumerStoreError::Internal(error.into())
}

impl PostgresStore {
    async fn downstream_client(&self) -> Result<deadpool_postgres::Object, ConsumerStoreError> {
        self.pool().get().await.map_err(|error| match error {
            deadpool_postgres::PoolError::Backend(error) => db_error(error),
            other => ConsumerStoreError::Unavailable(Box::new(other)),
        })
    }
}

#[async_trait]
impl ConsumerPositions for PostgresStore {
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<HashMap<AggregateId, u64>, ConsumerStoreError> {
        let Some(first) = aggregates.first() else {
            return Ok(HashMap::new());
        };
        let ids: Vec<&str> = aggregates.iter().map(|a| a.id.as_str()).collect();
        let tenants: Vec<&str> = aggregates.iter().map(|a| a.tenant_id.as_str()).collect();
        let client = self.downstream_client().await?;
        let rows = client
            .query(
                "SELECT p.tenant_id, p.aggregate_id, p.version FROM consumer_position p
                 JOIN UNNEST($3::TEXT[], $4::TEXT[]) AS a(tenant_id, aggregate_id)
                   ON p.tenant_id = a.tenant_id AND p.aggregate_id = a.aggregate_id
                 WHERE p.consumer = $1 AND p.aggregate_name = $2 AND p.version > 0",
                &[&consumer, &first.aggregate_name, &tenants, &ids],
            )
            .await
            .map_err(db_error)?;
        // Every aggregate of one call is of one type (the trait's contract).
        Ok(rows
            .iter()
            .map(|row| {
                let mut aggregate = first.clone();
                aggregate.tenant_id = row.get::<_, String>(0);
                aggregate.id = row.get::<_, String>(1);
                (aggregate, u64::try_from(row.get::<_, i64>(2)).unwrap_or(0))
            })
            .collect())
    }

    async fn advance_runs(&self, runs: &[PositionRun<'_>]) -> Result<(), ConsumerStoreError> {
        let mut client = self.downstream_client().await?;
        let transaction = client.transaction().await.map_err(db_error)?;
        // One statement per run, order-free: what was handled (every version up to the
        // position, with 0 standing for "before version 1", and the runs kept ahead) joined
        // with the run; the position is the version before the first gap, the rest is kept
        // ahead. A row is created at version 0 by a run past a gap. A run already handled
        // writes nothing.
        let statement = transaction
            .prepare_cached(
                "INSERT INTO consumer_position AS p (consumer, tenant_id, aggregate_name, aggregate_id, version, ahead)
                 VALUES ($1, $2, $3, $4,
                         CASE WHEN $6::BIGINT <= 1 THEN $5::BIGINT ELSE 0 END,
                         CASE WHEN $6::BIGINT <= 1 THEN '{}'::INT8MULTIRANGE ELSE INT8MULTIRANGE(INT8RANGE($6::BIGINT, $5::BIGINT + 1)) END)
                 ON CONFLICT (consumer, tenant_id, aggregate_name, aggregate_id) DO UPDATE SET (version, ahead) = (
                     SELECT LOWER(gaps) - 1, handled - INT8MULTIRANGE(INT8RANGE(0, LOWER(gaps)))
                     FROM (SELECT handled, '{[0,)}'::INT8MULTIRANGE - handled AS gaps
                           FROM (SELECT INT8MULTIRANGE(INT8RANGE(0, p.version + 1)) + p.ahead
                                        + INT8MULTIRANGE(INT8RANGE(GREATEST($6::BIGINT, 1), $5::BIGINT + 1)) AS handled) AS h) AS g)
                 WHERE NOT (INT8MULTIRANGE(INT8RANGE(0, p.version + 1)) + p.ahead) @> INT8RANGE(GREATEST($6::BIGINT, 1), $5::BIGINT + 1)",
            )
            .await
            .map_err(db_error)?;
        // In key order, so two writers (two nodes around a partition move) lock the rows
        // they share in the same order and never deadlock.
        let mut runs: Vec<&PositionRun<'_>> =
            runs.iter().filter(|run| run.from <= run.to).collect();
        runs.sort_by(|a, b| (a.aggregate, a.consumer).cmp(&(b.aggregate, b.consumer)));
        type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);
        let spans: Vec<(i64, i64)> = runs
            .iter()
            .map(|run| (clamp(run.from), clamp(run.to)))
            .collect();
        let params: Vec<[Param<'_>; 6]> = runs
            .iter()
            .zip(&spans)
            .map(|(run, (from, to))| {
                let aggregate = &run.aggregate;
                [
                    &run.consumer as Param<'_>,
                    &aggregate.tenant_id,
                    &aggregate.aggregate_name,
                    &aggregate.id,
                    to,
                    from,
                ]
            })
            .collect();
        // Every run is sent at once (pipelined): one round trip for the batch.
        futures::future::try_join_all(params.iter().map(|p| transaction.execute(&statement, p)))
            .await
            .map_err(db_error)?;
        transaction.commit().await.map_err(db_error)
    }

    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError> {
        let client = self.downstream_client().await?;
        client
            .execute(
                "DELETE FROM consumer_position WHERE consumer = $1",
                &[&consumer],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn feed_cursor(&self, reader: &str) -> Result<GlobalPosition, ConsumerStoreError> {
        let client = self.downstream_client().await?;
        let row = client
            .query_opt(
                "SELECT txn, sequence FROM feed_cursor WHERE reader = $1",
                &[&reader],
            )
            .await
            .map_err(db_error)?;
        let part = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(row.map_or(GlobalPosition::START, |row| {
            GlobalPosition::new(part(row.get(0)), part(row.get(1)))
        }))
    }

    async fn save_feed_cursor(
        &self,
        reader: &str,
        position: GlobalPosition,
    ) -> Result<(), ConsumerStoreError> {
        let part = |n: u64| {
            i64::try_from(n).map_err(|_| {
                ConsumerStoreError::Internal(
                    format!("feed position {position} is out of range").into(),
                )
            })
        };
        let (txn, sequence) = (part(position.transaction)?, part(position.sequence)?);
        let client = self.downstream_client().await?;
        client
            .execute(
                "INSERT INTO feed_cursor (reader, txn, sequence) VALUES ($1, $2, $3)
                 ON CONFLICT (reader) DO UPDATE SET txn = excluded.txn, sequence = excluded.sequence
                 WHERE (feed_cursor.txn, feed_cursor.sequence) < (excluded.txn, excluded.sequence)",
                &[&reader, &txn, &sequence],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

fn effect_state(row: &Row) -> EffectState {
    if row.get::<_, String>(0) == "DONE" {
        EffectState::Done
    } else {
        EffectState::Started {
            attempts: u32::try_from(row.get::<_, i32>(1)).unwrap_or(0),
            first_started: row.get(2),
        }
    }
}

#[async_trait]
impl EffectJournal for PostgresStore {
    async fn start(
        &self,
        consumer: &str,
        key: &str,
        now: i64,
    ) -> Result<EffectState, ConsumerStoreError> {
        let client = self.downstream_client().await?;
        let row = client
            .query_one(
                "INSERT INTO external_effect (consumer, effect_key, status, attempts, first_started) VALUES ($1, $2, 'STARTED', 1, $3)
                 ON CONFLICT (consumer, effect_key) DO UPDATE SET attempts = external_effect.attempts + CASE WHEN external_effect.status = 'STARTED' THEN 1 ELSE 0 END
                 RETURNING status, attempts, first_started",
                &[&consumer, &key, &now],
            )
            .await
            .map_err(db_error)?;
        Ok(effect_state(&row))
    }

    async fn finish(&self, consumer: &str, key: &str, now: i64) -> Result<(), ConsumerStoreError> {
        let client = self.downstream_client().await?;
        client
            .execute(
                "INSERT INTO external_effect (consumer, effect_key, status, attempts, first_started, done_time) VALUES ($1, $2, 'DONE', 1, $3, $3)
                 ON CONFLICT (consumer, effect_key) DO UPDATE SET status = 'DONE', done_time = $3",
                &[&consumer, &key, &now],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn state(
        &self,
        consumer: &str,
        key: &str,
    ) -> Result<Option<EffectState>, ConsumerStoreError> {
        let client = self.downstream_client().await?;
        let row = client
            .query_opt(
                "SELECT status, attempts, first_started FROM external_effect WHERE consumer = $1 AND effect_key = $2",
                &[&consumer, &key],
            )
            .await
            .map_err(db_error)?;
        Ok(row.as_ref().map(effect_state))
    }
}

const FAILED_COLUMNS: &str = "id, consumer, stage, context_name, aggregate_name, aggregate_id, tenant_id, version, stream_id, event_ids, error_code, error_message, attempts, status, next_retry_at, created_at, updated_at";

fn decode_failed(row: &Row) -> Result<ExecutionFailed, ConsumerStoreError> {
    let stage: String = row.get(2);
    let error_code: String = row.get(10);
    let status: String = row.get(13);
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
    })
}

async fn select_failed(
    client: &impl GenericClient,
    clause: &str,
    values: &[&(dyn ToSql + Sync)],
) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
    let rows = client
        .query(
            &format!("SELECT {FAILED_COLUMNS} FROM execution_failed {clause}"),
            values,
        )
        .await
        .map_err(db_error)?;
    rows.iter().map(decode_failed).collect()
}

async fn save_failed(
    client: &impl GenericClient,
    record: &ExecutionFailed,
) -> Result<(), ConsumerStoreError> {
    let event_ids = serde_json::to_value(&record.event_ids).map_err(internal)?;
    let attempts = i32::try_from(record.attempts).unwrap_or(i32::MAX);
    client
        .execute(
            &format!(
                "INSERT INTO execution_failed ({FAILED_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
                 ON CONFLICT (id) DO UPDATE SET error_code = EXCLUDED.error_code, error_message = EXCLUDED.error_message, attempts = EXCLUDED.attempts,
                 status = EXCLUDED.status, next_retry_at = EXCLUDED.next_retry_at, updated_at = EXCLUDED.updated_at"
            ),
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
            ],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

#[async_trait]
impl CompensationStore for PostgresStore {
    async fn record_failure(
        &self,
        failure: &FailedExecution,
        retry: &RetrySpec,
        now: i64,
    ) -> Result<ExecutionFailed, ConsumerStoreError> {
        let mut client = self.downstream_client().await?;
        let transaction = client.transaction().await.map_err(db_error)?;
        // One failure of a consumer on a stream at a time: the read and the write below are
        // one step for concurrent reporters of the same pair.
        let lock_key = format!("{}\n{}", failure.consumer, failure.stream_id);
        transaction
            .execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                &[&lock_key],
            )
            .await
            .map_err(db_error)?;
        let existing = select_failed(
            &transaction,
            "WHERE consumer = $1 AND stream_id = $2",
            &[&failure.consumer, &failure.stream_id],
        )
        .await?
        .pop();
        let record = next_record(existing, failure, retry, now);
        save_failed(&transaction, &record).await?;
        transaction.commit().await.map_err(db_error)?;
        Ok(record)
    }

    async fn mark_succeeded(
        &self,
        id: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let mut client = self.downstream_client().await?;
        let transaction = client.transaction().await.map_err(db_error)?;
        let Some(record) = select_failed(&transaction, "WHERE id = $1 FOR UPDATE", &[&id])
            .await?
            .pop()
        else {
            return Ok(None);
        };
        let record = succeeded(record, now);
        save_failed(&transaction, &record).await?;
        transaction.commit().await.map_err(db_error)?;
        Ok(Some(record))
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let client = self.downstream_client().await?;
        Ok(select_failed(&client, "WHERE id = $1", &[&id]).await?.pop())
    }

    async fn list(&self, query: &FailureQuery) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        let client = self.downstream_client().await?;
        let status = query.status.map(|status| status.as_str());
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        select_failed(
            &client,
            "WHERE ($1::TEXT IS NULL OR status = $1) AND ($2::TEXT IS NULL OR consumer = $2) AND ($3::TEXT IS NULL OR id > $3) AND ($5::TEXT IS NULL OR tenant_id = $5) ORDER BY id LIMIT $4",
            &[&status, &query.consumer, &query.after_id, &limit, &query.tenant_id],
        )
        .await
    }

    async fn due(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        let client = self.downstream_client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        select_failed(
            &client,
            "WHERE status = 'FAILED' AND next_retry_at <= $1 ORDER BY tenant_id, aggregate_name, aggregate_id, version, consumer LIMIT $2",
            &[&now, &limit],
        )
        .await
    }
}
