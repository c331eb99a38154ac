//! The downstream stores in the same file as history: consumer positions, the effect journal
//! and compensation records.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wow_core::eventsourcing::GlobalPosition;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};
use wow_core::compensation::{
    next_record, succeeded, CompensationStore, ExecutionFailed, ExecutionFailedStatus,
    FailedExecution, FailureQuery, RetrySpec,
};
use wow_core::event::{
    ConsumerPositions, ConsumerStoreError, EffectJournal, EffectState, HandledVersions,
    PositionRun, ProcessError,
};
use wow_core::eventsourcing::BoxError;
use wow_core::{AggregateId, CommandStage, ErrorCode};

use crate::store::clamp;
use crate::SqliteStore;

fn internal(error: impl Into<BoxError>) -> ConsumerStoreError {
    ConsumerStoreError::Internal(error.into())
}

impl SqliteStore {
    /// Runs `work` in the writer's transaction and returns what it made.
    async fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, BoxError> + Send + 'static,
    ) -> Result<T, ConsumerStoreError> {
        let made = Arc::new(Mutex::new(None));
        let slot = made.clone();
        self.transact(move |connection| {
            let value = work(connection)?;
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
            Ok(())
        })
        .await
        .map_err(|error| match error {
            ProcessError::Store(error) => ConsumerStoreError::Unavailable(error),
            other => internal(other),
        })?;
        let value = made.lock().unwrap_or_else(|p| p.into_inner()).take();
        value.ok_or_else(|| internal("the writer ran no work"))
    }

    async fn read_rows<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, ConsumerStoreError> {
        self.read(read).await.map_err(ConsumerStoreError::Internal)
    }
}

#[async_trait]
impl ConsumerPositions for SqliteStore {
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<HashMap<AggregateId, u64>, ConsumerStoreError> {
        let consumer = consumer.to_owned();
        let aggregates = aggregates.to_vec();
        self.read_rows(move |connection| {
            let mut statement = connection.prepare_cached(
                "SELECT version FROM consumer_position WHERE consumer = ?1 AND tenant_id = ?4 AND aggregate_name = ?2 AND aggregate_id = ?3 AND version > 0",
            )?;
            let mut found = HashMap::new();
            for aggregate in &aggregates {
                let version: Option<i64> = statement
                    .query_row(
                        params![consumer, aggregate.aggregate_name, aggregate.id, aggregate.tenant_id],
                        |row| row.get(0),
                    )
                    .optional()?;
                if let Some(version) = version {
                    found.insert(aggregate.clone(), u64::try_from(version).unwrap_or(0));
                }
            }
            Ok(found)
        })
        .await
    }

    async fn advance_runs(&self, runs: &[PositionRun<'_>]) -> Result<(), ConsumerStoreError> {
        let runs: Vec<(String, AggregateId, u64, u64)> = runs
            .iter()
            .map(|run| {
                (
                    run.consumer.to_owned(),
                    run.aggregate.clone(),
                    run.from,
                    run.to,
                )
            })
            .collect();
        self.write(move |connection| {
            for (consumer, aggregate, from, to) in &runs {
                advance_run(connection, consumer, aggregate, *from, *to)?;
            }
            Ok(())
        })
        .await
    }

    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError> {
        let consumer = consumer.to_owned();
        self.write(move |connection| {
            connection.execute(
                "DELETE FROM consumer_position WHERE consumer = ?1",
                [consumer],
            )?;
            Ok(())
        })
        .await
    }

    async fn feed_cursor(&self, reader: &str) -> Result<GlobalPosition, ConsumerStoreError> {
        let reader = reader.to_owned();
        self.read_rows(move |connection| {
            connection
                .prepare_cached("SELECT txn, sequence FROM feed_cursor WHERE reader = ?1")?
                .query_row([reader], |row| {
                    let part = |n: i64| u64::try_from(n).unwrap_or(0);
                    Ok(GlobalPosition::new(part(row.get(0)?), part(row.get(1)?)))
                })
                .optional()
                .map(Option::unwrap_or_default)
        })
        .await
    }

    async fn save_feed_cursor(
        &self,
        reader: &str,
        position: GlobalPosition,
    ) -> Result<(), ConsumerStoreError> {
        let reader = reader.to_owned();
        let (txn, sequence) = feed_parts(position)?;
        self.write(move |connection| {
            connection
                .prepare_cached(
                    "INSERT INTO feed_cursor (reader, txn, sequence) VALUES (?1, ?2, ?3)
                     ON CONFLICT (reader) DO UPDATE SET txn = excluded.txn, sequence = excluded.sequence
                     WHERE (feed_cursor.txn, feed_cursor.sequence) < (excluded.txn, excluded.sequence)",
                )?
                .execute(params![reader, txn, sequence])?;
            Ok(())
        })
        .await
    }
}

/// A feed position as two integers SQLite stores.
fn feed_parts(position: GlobalPosition) -> Result<(i64, i64), ConsumerStoreError> {
    let part = |n: u64| {
        i64::try_from(n).map_err(|_| {
            ConsumerStoreError::Internal(format!("feed position {position} is out of range").into())
        })
    };
    Ok((part(position.transaction)?, part(position.sequence)?))
}

fn effect_state(status: &str, attempts: i64, first_started: i64) -> EffectState {
    if status == "DONE" {
        EffectState::Done
    } else {
        EffectState::Started {
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            first_started,
        }
    }
}

/// Adds the run `from..=to` to what `consumer` handled of `aggregate`, in the writer's
/// transaction. The common case, a run that follows the position with nothing kept ahead,
/// is one update; otherwise the row is read, merged ([`HandledVersions::add`]) and written.
fn advance_run(
    connection: &Connection,
    consumer: &str,
    aggregate: &AggregateId,
    from: u64,
    to: u64,
) -> Result<(), BoxError> {
    let key = (
        consumer,
        &aggregate.tenant_id,
        &aggregate.aggregate_name,
        &aggregate.id,
    );
    let moved = connection
        .prepare_cached(
            "UPDATE consumer_position SET version = ?5 WHERE consumer = ?1 AND tenant_id = ?2 AND aggregate_name = ?3 AND aggregate_id = ?4 AND ahead = '' AND version >= ?6 - 1 AND version < ?5",
        )?
        .execute(params![key.0, key.1, key.2, key.3, clamp(to), clamp(from)])?;
    if moved > 0 {
        return Ok(());
    }
    let found: Option<(i64, String)> = connection
        .prepare_cached(
            "SELECT version, ahead FROM consumer_position WHERE consumer = ?1 AND tenant_id = ?2 AND aggregate_name = ?3 AND aggregate_id = ?4",
        )?
        .query_row(params![key.0, key.1, key.2, key.3], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    let mut handled = match &found {
        Some((version, ahead)) => HandledVersions::with_runs(
            u64::try_from(*version).unwrap_or(0),
            HandledVersions::parse_runs(ahead)?,
        ),
        None => HandledVersions::new(),
    };
    if !handled.add(from, to) {
        return Ok(());
    }
    connection
        .prepare_cached(
            "INSERT INTO consumer_position (consumer, tenant_id, aggregate_name, aggregate_id, version, ahead) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (consumer, tenant_id, aggregate_name, aggregate_id) DO UPDATE SET version = excluded.version, ahead = excluded.ahead",
        )?
        .execute(params![
            key.0,
            key.1,
            key.2,
            key.3,
            clamp(handled.position()),
            handled.runs_text().to_string()
        ])?;
    Ok(())
}

#[async_trait]
impl EffectJournal for SqliteStore {
    async fn start(
        &self,
        consumer: &str,
        key: &str,
        now: i64,
    ) -> Result<EffectState, ConsumerStoreError> {
        let (consumer, key) = (consumer.to_owned(), key.to_owned());
        self.write(move |connection| {
            let (status, attempts, first_started): (String, i64, i64) = connection.query_row(
                "INSERT INTO external_effect (consumer, effect_key, status, attempts, first_started) VALUES (?1, ?2, 'STARTED', 1, ?3)
                 ON CONFLICT (consumer, effect_key) DO UPDATE SET attempts = attempts + (status = 'STARTED')
                 RETURNING status, attempts, first_started",
                params![consumer, key, now],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )?;
            Ok(effect_state(&status, attempts, first_started))
        })
        .await
    }

    async fn finish(&self, consumer: &str, key: &str, now: i64) -> Result<(), ConsumerStoreError> {
        let (consumer, key) = (consumer.to_owned(), key.to_owned());
        self.write(move |connection| {
            connection.execute(
                "INSERT INTO external_effect (consumer, effect_key, status, attempts, first_started, done_time) VALUES (?1, ?2, 'DONE', 1, ?3, ?3)
                 ON CONFLICT (consumer, effect_key) DO UPDATE SET status = 'DONE', done_time = ?3",
                params![consumer, key, now],
            )?;
            Ok(())
        })
        .await
    }

    async fn state(
        &self,
        consumer: &str,
        key: &str,
    ) -> Result<Option<EffectState>, ConsumerStoreError> {
        let (consumer, key) = (consumer.to_owned(), key.to_owned());
        self.read_rows(move |connection| {
            connection
                .query_row(
                    "SELECT status, attempts, first_started FROM external_effect WHERE consumer = ?1 AND effect_key = ?2",
                    params![consumer, key],
                    |row| Ok(effect_state(&row.get::<_, String>(0)?, row.get(1)?, row.get(2)?)),
                )
                .optional()
        })
        .await
    }
}

const FAILED_COLUMNS: &str = "id, consumer, stage, context_name, aggregate_name, aggregate_id, tenant_id, version, stream_id, event_ids, error_code, error_message, attempts, status, next_retry_at, created_at, updated_at";

fn bad_column(index: usize, error: impl Into<BoxError>) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, error.into())
}

fn decode_failed(row: &Row<'_>) -> rusqlite::Result<ExecutionFailed> {
    let stage: String = row.get(2)?;
    let event_ids: String = row.get(9)?;
    let error_code: String = row.get(10)?;
    let status: String = row.get(13)?;
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
    })
}

fn save_failed(connection: &Connection, record: &ExecutionFailed) -> Result<(), BoxError> {
    connection.execute(
        &format!("INSERT OR REPLACE INTO execution_failed ({FAILED_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"),
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
        ],
    )?;
    Ok(())
}

fn select_failed(
    connection: &Connection,
    clause: &str,
    values: &[&dyn rusqlite::ToSql],
) -> rusqlite::Result<Vec<ExecutionFailed>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {FAILED_COLUMNS} FROM execution_failed {clause}"
    ))?;
    let rows = statement.query_map(values, decode_failed)?;
    rows.collect()
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
                "WHERE consumer = ?1 AND stream_id = ?2",
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
        let id = id.to_owned();
        self.write(move |connection| {
            let Some(record) = select_failed(connection, "WHERE id = ?1", &[&id])?.pop() else {
                return Ok(None);
            };
            let record = succeeded(record, now);
            save_failed(connection, &record)?;
            Ok(Some(record))
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let id = id.to_owned();
        self.read_rows(move |connection| {
            Ok(select_failed(connection, "WHERE id = ?1", &[&id])?.pop())
        })
        .await
    }

    async fn list(&self, query: &FailureQuery) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        let query = query.clone();
        self.read_rows(move |connection| {
            let status = query.status.map(|status| status.as_str());
            let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
            select_failed(
                connection,
                "WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR consumer = ?2) AND (?3 IS NULL OR id > ?3) AND (?5 IS NULL OR tenant_id = ?5) ORDER BY id LIMIT ?4",
                &[&status, &query.consumer, &query.after_id, &limit, &query.tenant_id],
            )
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
            select_failed(
                connection,
                "WHERE status = 'FAILED' AND next_retry_at <= ?1 ORDER BY tenant_id, aggregate_name, aggregate_id, version, consumer LIMIT ?2",
                &[&now, &limit],
            )
        })
        .await
    }
}
