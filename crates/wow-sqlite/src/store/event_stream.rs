//! Table `event_stream`: appending a stream and reading an aggregate's history back, the
//! `EventStore` implementation.
//!
//! An append is a job for the writer (see `writer.rs`): one `INSERT` of one row
//! ([`INSERT_STREAM`]), atomic by itself inside the writer's group commit; a taken version or
//! request id breaks a unique index, which the writer maps to its typed error. An append with
//! changes runs the same `INSERT` and then its key changes (SPEC DM-1, [`super::unique_key`])
//! and its deadline changes (SPEC DM-2, [`super::deadline`]) in one savepoint: a refusal of
//! any of them rolls all back. Every read of history asks for versions from 1 up, because
//! recorded rejections are rows of this table too, at negative versions (see
//! [`super::request_decision`]). The look-ups, the global feed and the queries over this
//! table are in modules of their own; the methods here hand over to them.

use async_trait::async_trait;
use rusqlite::{params, Connection, Row};
use tokio::sync::oneshot;
use wow_core::aggregate::VersionCondition;
use wow_core::eventsourcing::{
    check_appendable, check_conditions, check_deadline_changes, check_key_changes,
    check_time_range, check_version_range, AppendChanges, EventStoreError, History, RejectedStream,
};
use wow_core::{AggregateId, DomainEventStream, NamedAggregate};

use super::stream_row::{decode_stream, stream_columns, StreamRow};
use super::{clamp, owned_key, SqliteStore};
use crate::error::{gone, store_error};
use crate::write_job::WriteJob;

/// Appends one stream, `?1` to `?12` in the order of [`stream_columns`]. A taken version
/// breaks the unique index on (tenant, name, id, version), a taken request id the one on
/// (tenant, name, id, request id).
const INSERT_STREAM: &str = concat!(
    "INSERT INTO event_stream (",
    stream_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
);

/// The streams of aggregate (`?5` tenant, `?1` name, `?2` id) from version `?3` to `?4`, in
/// version order.
const LOAD_VERSIONS: &str = concat!(
    "SELECT ",
    stream_columns!(),
    " FROM event_stream WHERE tenant_id = ?5 AND aggregate_name = ?1 AND aggregate_id = ?2 AND version BETWEEN ?3 AND ?4 ORDER BY version"
);

/// The streams of aggregate (`?5` tenant, `?1` name, `?2` id) created from `?3` to `?4`
/// (epoch milliseconds), in version order.
const LOAD_TIMES: &str = concat!(
    "SELECT ",
    stream_columns!(),
    " FROM event_stream WHERE tenant_id = ?5 AND aggregate_name = ?1 AND aggregate_id = ?2 AND version > 0 AND create_time BETWEEN ?3 AND ?4 ORDER BY version"
);

/// The last stream of aggregate (`?3` tenant, `?1` name, `?2` id), if it has one.
const LOAD_LAST: &str = concat!(
    "SELECT ",
    stream_columns!(),
    " FROM event_stream WHERE tenant_id = ?3 AND aggregate_name = ?1 AND aggregate_id = ?2 AND version > 0 ORDER BY version DESC LIMIT 1"
);

/// The aggregates of type (`?1` name, `?2` context) that have a first stream (version 1: one
/// row per aggregate), in (tenant, id) order after (`?3` tenant, `?5` id) when `?3` is not
/// NULL, at most `?4` of them.
const SCAN_AGGREGATE_IDS: &str =
    "SELECT context_name, aggregate_name, aggregate_id, tenant_id FROM event_stream
    WHERE aggregate_name = ?1 AND context_name = ?2 AND version = 1
      AND (?3 IS NULL OR (tenant_id, aggregate_id) > (?3, ?5))
    ORDER BY tenant_id, aggregate_id LIMIT ?4";

/// Inserts `row` ([`INSERT_STREAM`]) on the writer's connection, inside its transaction. The
/// error is SQLite's, for the writer to classify.
pub(crate) fn insert_stream(connection: &Connection, row: &StreamRow) -> rusqlite::Result<()> {
    connection.prepare_cached(INSERT_STREAM)?.execute(params![
        row.aggregate_name,
        row.aggregate_id,
        row.version,
        row.context_name,
        row.tenant_id,
        row.stream_id,
        row.request_id,
        row.command_id,
        row.fingerprint,
        row.create_time,
        row.header,
        row.body,
    ])?;
    Ok(())
}

/// The version of the last stream of aggregate (`?3` tenant, `?1` name, `?2` id), 0 when it
/// has none: what a condition of an append compares (SPEC DM-5).
const HEAD_VERSION: &str = "SELECT COALESCE(MAX(version), 0) FROM event_stream WHERE tenant_id = ?3 AND aggregate_name = ?1 AND aggregate_id = ?2 AND version > 0";

/// Checks `conditions` on the writer's connection, inside the append's savepoint (the
/// writer is the only one, so nothing moves between this check and the commit): the first
/// that does not hold, with the version found, or none.
pub(crate) fn failed_condition<'c>(
    connection: &Connection,
    conditions: &'c [VersionCondition],
) -> rusqlite::Result<Option<(&'c VersionCondition, u64)>> {
    for condition in conditions {
        let id = &condition.aggregate_id;
        let head: i64 = connection
            .prepare_cached(HEAD_VERSION)?
            .query_row(params![id.aggregate_name, id.id, id.tenant_id], |row| {
                row.get(0)
            })?;
        let head = u64::try_from(head).unwrap_or(0);
        if head != condition.version {
            return Ok(Some((condition, head)));
        }
    }
    Ok(None)
}

/// Decodes a row of [`SCAN_AGGREGATE_IDS`].
fn decode_aggregate_id(row: &Row<'_>) -> rusqlite::Result<AggregateId> {
    Ok(AggregateId {
        context_name: row.get(0)?,
        aggregate_name: row.get(1)?,
        id: row.get(2)?,
        tenant_id: row.get(3)?,
    })
}

impl SqliteStore {
    /// Appends `stream` with `changes`, or alone when there are none; the caller has checked
    /// both.
    async fn append_changing(
        &self,
        stream: &DomainEventStream,
        changes: Option<Box<AppendChanges>>,
    ) -> Result<(), EventStoreError> {
        let row = StreamRow::encode(stream).map_err(|e| EventStoreError::Internal(Box::new(e)))?;
        let (reply, answer) = oneshot::channel();
        let job = WriteJob::Append {
            row: Box::new(row),
            rejected: Box::new(RejectedStream::of(stream)),
            changes,
            reply,
        };
        self.write_history(job, answer).await
    }

    /// Hands `job` (an append or a rejection) to the writer and waits for its answer; a
    /// writer that has stopped is [`EventStoreError::Unavailable`].
    pub(super) async fn write_history(
        &self,
        job: WriteJob,
        answer: oneshot::Receiver<Result<(), EventStoreError>>,
    ) -> Result<(), EventStoreError> {
        self.writer
            .send(job)
            .await
            .map_err(|_| EventStoreError::Unavailable(gone()))?;
        answer
            .await
            .map_err(|_| EventStoreError::Unavailable(gone()))?
    }

    /// The streams `sql` ([`LOAD_VERSIONS`] or [`LOAD_TIMES`]) reads of `aggregate_id`
    /// between `from` and `to`, on the read pool.
    async fn streams(
        &self,
        sql: &'static str,
        aggregate_id: &AggregateId,
        from: i64,
        to: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let (name, id, tenant) = owned_key(aggregate_id);
        self.reads
            .read(move |connection| {
                let mut statement = connection.prepare_cached(sql)?;
                let rows =
                    statement.query_map(params![name, id, from, to, tenant], decode_stream)?;
                rows.collect()
            })
            .await
            .map_err(store_error)
    }
}

#[async_trait]
impl History for SqliteStore {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        check_appendable(stream)?;
        self.append_changing(stream, None).await
    }

    /// Checks the stream's conditions (SPEC DM-5) and writes its key and deadline changes
    /// in the savepoint of its insert, inside
    /// the writer's group commit (see `writer.rs`); with no changes it is [`Self::append`].
    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        // One writer: an aggregate others read needs no guard here (SPEC DM-5).
        if changes.is_empty_but_guard() {
            return self.append(stream).await;
        }
        check_appendable(stream)?;
        check_key_changes(&changes.keys)?;
        check_deadline_changes(stream, &changes.deadlines)?;
        check_conditions(stream, &changes.conditions)?;
        self.append_changing(stream, Some(Box::new(changes.clone())))
            .await
    }

    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        check_version_range(head, tail)?;
        self.streams(LOAD_VERSIONS, aggregate_id, clamp(head), clamp(tail))
            .await
    }

    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        check_time_range(start, end)?;
        self.streams(LOAD_TIMES, aggregate_id, start, end).await
    }

    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError> {
        self.read_aggregate_row(LOAD_LAST, aggregate_id, decode_stream)
            .await
            .map_err(store_error)
    }

    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        let (context, name) = (named.context_name.clone(), named.aggregate_name.clone());
        let after = after.map(|a| (a.tenant_id.clone(), a.id.clone()));
        let (after_tenant, after_id) = match after {
            Some((tenant, id)) => (Some(tenant), Some(id)),
            None => (None, None),
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.reads
            .read(move |connection| {
                let mut statement = connection.prepare_cached(SCAN_AGGREGATE_IDS)?;
                let rows = statement.query_map(
                    params![name, context, after_tenant, limit, after_id],
                    decode_aggregate_id,
                )?;
                rows.collect()
            })
            .await
            .map_err(store_error)
    }
}
