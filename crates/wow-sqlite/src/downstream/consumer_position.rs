//! Table `consumer_position`: how far each consumer got in each aggregate's history, the
//! `ConsumerPositions` implementation (whose global feed cursors are in
//! [`super::feed_cursor`]).
//!
//! A position is the version before the first gap in what the consumer handled; versions
//! handled past a gap are kept ahead (column `ahead`, as text, see [`HandledVersions`]) until
//! the gap fills, so runs written in any order never move a position past a version that was
//! not handled.

use std::collections::HashMap;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use wow_core::event::{ConsumerPositions, ConsumerStoreError, HandledVersions, PositionRun};
use wow_core::eventsourcing::{BoxError, GlobalPosition};
use wow_core::AggregateId;

use super::feed_cursor;
use crate::store::clamp;
use crate::SqliteStore;

/// The position of consumer `?1` in aggregate (`?4` tenant, `?2` name, `?3` id), past version
/// 0 only.
const POSITION: &str = "SELECT version FROM consumer_position WHERE consumer = ?1 AND tenant_id = ?4 AND aggregate_name = ?2 AND aggregate_id = ?3 AND version > 0";

/// Moves the position of consumer `?1` in aggregate (`?2` tenant, `?3` name, `?4` id) to
/// `?5` when the run `?6` to `?5` follows it and nothing is kept ahead: one row changed then,
/// none otherwise.
const FOLLOW_RUN: &str = "UPDATE consumer_position SET version = ?5 WHERE consumer = ?1 AND tenant_id = ?2 AND aggregate_name = ?3 AND aggregate_id = ?4 AND ahead = '' AND version >= ?6 - 1 AND version < ?5";

/// The position and the runs kept ahead of consumer `?1` in aggregate (`?2` tenant, `?3`
/// name, `?4` id), if it has a row.
const HANDLED: &str = "SELECT version, ahead FROM consumer_position WHERE consumer = ?1 AND tenant_id = ?2 AND aggregate_name = ?3 AND aggregate_id = ?4";

/// Writes the row of consumer `?1` in aggregate (`?2` tenant, `?3` name, `?4` id): position
/// `?5`, runs kept ahead `?6`.
const SAVE_HANDLED: &str = "INSERT INTO consumer_position (consumer, tenant_id, aggregate_name, aggregate_id, version, ahead) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
    ON CONFLICT (consumer, tenant_id, aggregate_name, aggregate_id) DO UPDATE SET version = excluded.version, ahead = excluded.ahead";

/// Forgets every position of consumer `?1`.
const RESET: &str = "DELETE FROM consumer_position WHERE consumer = ?1";

/// Adds the run `from..=to` to what `consumer` handled of `aggregate`, in the writer's
/// transaction. The common case, a run that follows the position with nothing kept ahead,
/// is one update ([`FOLLOW_RUN`]); otherwise the row is read, merged
/// ([`HandledVersions::add`]) and written.
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
    let moved = connection.prepare_cached(FOLLOW_RUN)?.execute(params![
        key.0,
        key.1,
        key.2,
        key.3,
        clamp(to),
        clamp(from)
    ])?;
    if moved > 0 {
        return Ok(());
    }
    let found: Option<(i64, String)> = connection
        .prepare_cached(HANDLED)?
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
    connection.prepare_cached(SAVE_HANDLED)?.execute(params![
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
impl ConsumerPositions for SqliteStore {
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<HashMap<AggregateId, u64>, ConsumerStoreError> {
        let consumer = consumer.to_owned();
        let aggregates = aggregates.to_vec();
        self.read_rows(move |connection| {
            let mut statement = connection.prepare_cached(POSITION)?;
            let mut found = HashMap::new();
            for aggregate in &aggregates {
                let version: Option<i64> = statement
                    .query_row(
                        params![
                            consumer,
                            aggregate.aggregate_name,
                            aggregate.id,
                            aggregate.tenant_id
                        ],
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
            connection.execute(RESET, [consumer])?;
            Ok(())
        })
        .await
    }

    async fn feed_cursor(&self, reader: &str) -> Result<GlobalPosition, ConsumerStoreError> {
        feed_cursor::load(self, reader).await
    }

    async fn save_feed_cursor(
        &self,
        reader: &str,
        position: GlobalPosition,
    ) -> Result<(), ConsumerStoreError> {
        feed_cursor::save(self, reader, position).await
    }
}
