//! The store: event streams and snapshots over one SQLite file.

use std::sync::Arc;
use wow_core::eventsourcing::SchemaStatus;

use async_trait::async_trait;
use rusqlite::{params, params_from_iter, OptionalExtension};
use tokio::sync::oneshot;
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::BoxError;
use wow_core::eventsourcing::{
    check_appendable, check_claimable, check_deadline_changes, check_key_changes, check_rejectable,
    check_time_range, check_version_range, AppendChanges, EventStore, EventStoreError, FeedEntry,
    GlobalPosition, RejectedStream, RejectionRecord, RequestDecision, Snapshot, SnapshotStore,
    SnapshotStoreError,
};
use wow_core::id::{Clock, SystemClock};
use wow_core::query::{DocumentQuery, Filter};
use wow_core::unique_key::{KeyClaim, KeyHolder, UniqueKey};
use wow_core::{AggregateId, DomainEventStream, NamedAggregate};

use crate::bounded::QueryPool;
use crate::codec::{
    decode_decision, decode_snapshot, decode_stream, StreamRow, DECISION_COLUMNS, STREAM_COLUMNS,
};
use crate::error::{gone, snapshot_error, store_error};
use crate::query::Translation;
use crate::reader::ReadPool;
use crate::schema::{connect, migrate};
use crate::unique_key;
use crate::writer::{self, Rejection, Work, WorkFn, WriteJob, WriterHandle, WriterStats};
use crate::{OpenError, SqliteOptions};

/// Event streams and snapshots in one SQLite file. Cloning is cheap; clones share the writer
/// and the read pool. The writer thread ends when the last clone is dropped, after it has
/// committed every write already queued.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pub(crate) writer: WriterHandle,
    stats: Arc<WriterStats>,
    pub(crate) reads: Arc<ReadPool>,
    pub(crate) queries: Arc<QueryPool>,
    options: Arc<SqliteOptions>,
    pub(crate) clock: Arc<dyn Clock>,
}

/// `value` as a database integer, saturating.
pub(crate) fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl SqliteStore {
    /// Opens (creating if missing) the store described by `options`, migrating its schema.
    ///
    /// Fails with [`OpenError::SchemaTooNew`] for a file written by a newer build, and with
    /// [`OpenError::Io`] or [`OpenError::Sqlite`] when the file cannot be opened.
    pub async fn open(options: SqliteOptions) -> Result<Self, OpenError> {
        tokio::task::spawn_blocking(move || Self::open_blocking(options))
            .await
            .map_err(|error| OpenError::Io {
                path: String::new(),
                source: std::io::Error::other(error.to_string()),
            })?
    }

    /// Where the file `options` names stands against this build's migrations (what opening
    /// it would apply), read without changing anything: `wow migrate --dry-run`.
    ///
    /// # Errors
    ///
    /// [`OpenError`] when the file cannot be read.
    pub async fn schema_status(options: SqliteOptions) -> Result<SchemaStatus, OpenError> {
        tokio::task::spawn_blocking(move || crate::schema::status(&options))
            .await
            .map_err(|error| OpenError::Io {
                path: String::new(),
                source: std::io::Error::other(error.to_string()),
            })?
    }

    fn open_blocking(options: SqliteOptions) -> Result<Self, OpenError> {
        let io = |source| OpenError::Io {
            path: options.path.display().to_string(),
            source,
        };
        if let Some(folder) = options.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(io)?;
        }
        let mut connection = connect(&options, false)?;
        migrate(&mut connection)?;
        let stats = Arc::new(WriterStats::default());
        let writer = writer::spawn(connection, options.max_batch, stats.clone()).map_err(io)?;
        let reads = ReadPool::open(&options, options.read_connections)?;
        let queries = Arc::new(QueryPool::new(
            ReadPool::open(&options, options.query_connections)?,
            options.query_connections,
            options.query_timeout,
        ));
        Ok(Self {
            writer,
            stats,
            reads,
            queries,
            options: Arc::new(options),
            clock: Arc::new(SystemClock),
        })
    }

    /// This store, timing the processed-message records it writes by `clock` instead of the
    /// system clock (the one wiring place of a service chooses it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How many transactions the writer committed (or tried to), and how many writes they
    /// held: their ratio is the average group-commit batch.
    pub fn writer_stats(&self) -> (u64, u64) {
        (
            self.stats
                .transactions
                .load(std::sync::atomic::Ordering::Relaxed),
            self.stats.writes.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Runs `work` once per (`consumer`, `message_id`), in one transaction with the record
    /// that it ran (SPEC DS-2): a redelivered message finds the record and `work` does not
    /// run; a failing `work` leaves neither its writes nor the record. `work` runs on the
    /// store's writer thread, inside its group commit, so it should be short: a few
    /// statements on the consumer's own tables.
    pub async fn process_once(
        &self,
        consumer: &str,
        message_id: &str,
        work: impl FnOnce(&rusqlite::Connection) -> Result<(), BoxError> + Send + 'static,
    ) -> Result<Processed, ProcessError> {
        self.submit(
            Some((
                consumer.to_owned(),
                message_id.to_owned(),
                self.clock.now_millis(),
            )),
            Box::new(work),
        )
        .await
    }

    /// Runs `work` in the writer's transaction (for example a consumer's table setup).
    pub async fn transact(
        &self,
        work: impl FnOnce(&rusqlite::Connection) -> Result<(), BoxError> + Send + 'static,
    ) -> Result<(), ProcessError> {
        self.submit(None, Box::new(work)).await.map(|_| ())
    }

    async fn submit(
        &self,
        record: Option<(String, String, i64)>,
        work: Work,
    ) -> Result<Processed, ProcessError> {
        let (reply, answer) = oneshot::channel();
        let job = WriteJob::Work {
            record,
            work: Some(WorkFn(work)),
            reply,
        };
        self.writer
            .send(job)
            .await
            .map_err(|_| ProcessError::Store(gone()))?;
        answer.await.map_err(|_| ProcessError::Store(gone()))?
    }

    /// Runs `read` on a read-only connection of the pool (for a consumer's own tables).
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, BoxError> {
        self.reads
            .read(read)
            .await
            .map_err(|e| Box::new(e) as BoxError)
    }

    /// The tenants' share of the query connections: how many queries of a tenant run now.
    pub fn query_share(&self) -> &wow_core::query::TenantShare {
        self.queries.share()
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.options
    }

    async fn streams(
        &self,
        sql: &'static str,
        aggregate_id: &AggregateId,
        from: i64,
        to: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let (name, id, tenant) = (
            aggregate_id.aggregate_name.clone(),
            aggregate_id.id.clone(),
            aggregate_id.tenant_id.clone(),
        );
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
    async fn write_history(
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
}

/// The appended streams of one aggregate type in one tenant (`?1`, `?2`), each with `doc`: the
/// JSON document Wow's event stream queries filter (see `EventStore::query_streams`).
const STREAM_DOCUMENTS: &str = "SELECT *, json_object('id', stream_id, 'requestId', request_id, 'commandId', command_id, 'contextName', context_name, 'aggregateName', aggregate_name, 'aggregateId', aggregate_id, 'tenantId', tenant_id, 'ownerId', COALESCE(json_extract(header, '$.owner_id'), ''), 'spaceId', COALESCE(json_extract(header, '$.space_id'), ''), 'version', version, 'createTime', create_time, 'header', json(header), 'body', json(body)) AS doc FROM event_stream WHERE tenant_id = ?1 AND aggregate_name = ?2 AND version > 0";

/// The values of [`STREAM_DOCUMENTS`]'s scope.
fn stream_scope(named: &NamedAggregate, tenant_id: &str) -> Vec<rusqlite::types::Value> {
    vec![
        rusqlite::types::Value::Text(tenant_id.to_owned()),
        rusqlite::types::Value::Text(named.aggregate_name.clone()),
    ]
}

const LOAD: &str = "SELECT aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body FROM event_stream WHERE tenant_id = ?5 AND aggregate_name = ?1 AND aggregate_id = ?2 AND version BETWEEN ?3 AND ?4 ORDER BY version";
const LOAD_BY_TIME: &str = "SELECT aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body FROM event_stream WHERE tenant_id = ?5 AND aggregate_name = ?1 AND aggregate_id = ?2 AND version > 0 AND create_time BETWEEN ?3 AND ?4 ORDER BY version";

/// The global feed: appended streams (versions from 1 up; a rejection row's is negative) after
/// a position, along the primary key. `position` is the rowid, chosen as `MAX + 1` under
/// SQLite's one write lock and committed before the next writer takes that lock, so position
/// order is commit order: a reader's snapshot never lacks a lower position that commits later.
/// (Positions taken by a transaction that rolled back are taken again by the next one; they
/// were never visible. No row of `event_stream` is ever deleted, so a committed position is
/// never reused.) The position is the feed's sequence; the transaction part is always 0.
const READ_FEED: &str = "SELECT aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body, position FROM event_stream WHERE position > ?1 AND version > 0 ORDER BY position LIMIT ?2";

#[async_trait]
impl EventStore for SqliteStore {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        check_appendable(stream)?;
        self.append_changing(stream, None).await
    }

    /// Writes the stream's key and deadline changes in the savepoint of its insert, inside
    /// the writer's group commit (see `writer.rs`); with no changes it is [`Self::append`].
    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        if changes.is_empty() {
            return self.append(stream).await;
        }
        check_appendable(stream)?;
        check_key_changes(&changes.keys)?;
        check_deadline_changes(stream, &changes.deadlines)?;
        self.append_changing(stream, Some(Box::new(changes.clone())))
            .await
    }

    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        let (tenant, key) = (tenant_id.to_owned(), key.clone());
        self.reads
            .read(move |connection| unique_key::live_holder(connection, &tenant, &key))
            .await
            .map_err(store_error)
    }

    /// Claims the free keys in the writer's transaction, each by one upsert (see
    /// `unique_key.rs`).
    async fn claim_keys(
        &self,
        aggregate_id: &AggregateId,
        version: u64,
        keys: &[UniqueKey],
    ) -> Result<Vec<KeyClaim>, EventStoreError> {
        check_claimable(version, keys)?;
        let (aggregate, keys) = (aggregate_id.clone(), keys.to_vec());
        let (answer, claims) = oneshot::channel();
        self.submit(
            None,
            Box::new(move |connection| {
                let made = unique_key::claim_free(connection, &aggregate, clamp(version), &keys)?;
                // The receiver waits for the submission's reply first; it is not dropped.
                let _ = answer.send(made);
                Ok(())
            }),
        )
        .await
        .map_err(|error| match error {
            ProcessError::Work(error) => EventStoreError::Internal(error),
            ProcessError::Store(error) => EventStoreError::Unavailable(error),
            other => EventStoreError::Internal(Box::new(other)),
        })?;
        claims
            .await
            .map_err(|_| EventStoreError::Unavailable(gone()))
    }

    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        check_version_range(head, tail)?;
        self.streams(LOAD, aggregate_id, clamp(head), clamp(tail))
            .await
    }

    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        check_time_range(start, end)?;
        self.streams(LOAD_BY_TIME, aggregate_id, start, end).await
    }

    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError> {
        let (name, id, tenant) = (
            aggregate_id.aggregate_name.clone(),
            aggregate_id.id.clone(),
            aggregate_id.tenant_id.clone(),
        );
        self.reads
            .read(move |connection| {
                let sql = format!("SELECT {STREAM_COLUMNS} FROM event_stream WHERE tenant_id = ?3 AND aggregate_name = ?1 AND aggregate_id = ?2 AND version > 0 ORDER BY version DESC LIMIT 1");
                connection
                    .prepare_cached(&sql)?
                    .query_row(params![name, id, tenant], decode_stream)
                    .optional()
            })
            .await
            .map_err(store_error)
    }

    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        let (name, id, request, tenant) = (
            aggregate_id.aggregate_name.clone(),
            aggregate_id.id.clone(),
            request_id.to_owned(),
            aggregate_id.tenant_id.clone(),
        );
        self.reads
            .read(move |connection| {
                // The tenant leads the key: another tenant's decision is another key (SPEC TN-1).
                let sql = format!("SELECT {DECISION_COLUMNS} FROM event_stream WHERE tenant_id = ?4 AND aggregate_name = ?1 AND aggregate_id = ?2 AND request_id = ?3");
                connection
                    .prepare_cached(&sql)?
                    .query_row(params![name, id, request, tenant], decode_decision)
                    .optional()
            })
            .await
            .map_err(store_error)
    }

    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        check_rejectable(request_id)?;
        let (reply, answer) = oneshot::channel();
        let job = WriteJob::Reject {
            rejection: Box::new(Rejection {
                aggregate_id: aggregate_id.clone(),
                request_id: request_id.to_owned(),
                record: rejection.clone(),
            }),
            reply,
        };
        self.write_history(job, answer).await
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
                // Version 1 is the aggregate's first stream: one row per aggregate.
                let mut statement = connection.prepare_cached(
                    "SELECT context_name, aggregate_name, aggregate_id, tenant_id FROM event_stream
                     WHERE aggregate_name = ?1 AND context_name = ?2 AND version = 1
                       AND (?3 IS NULL OR (tenant_id, aggregate_id) > (?3, ?5))
                     ORDER BY tenant_id, aggregate_id LIMIT ?4",
                )?;
                let rows = statement.query_map(
                    params![name, context, after_tenant, limit, after_id],
                    |row| {
                        Ok(AggregateId {
                            context_name: row.get(0)?,
                            aggregate_name: row.get(1)?,
                            id: row.get(2)?,
                            tenant_id: row.get(3)?,
                        })
                    },
                )?;
                rows.collect()
            })
            .await
            .map_err(store_error)
    }

    async fn query_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(named, tenant_id));
        let condition = sql.condition(&query.filter);
        let mut order = sql.order(&query.sort);
        order.push("aggregate_id, version".to_owned());
        let limit = sql.bind_integer(query.limit);
        let offset = sql.bind_integer(query.offset);
        let text = format!(
            "SELECT {STREAM_COLUMNS} FROM ({STREAM_DOCUMENTS}) WHERE {condition} ORDER BY {} LIMIT {limit} OFFSET {offset}",
            order.join(", ")
        );
        let values = sql.values;
        Ok(self
            .queries
            .read(tenant_id, move |connection| {
                let mut statement = connection.prepare(&text)?;
                let rows = statement.query_map(params_from_iter(values), decode_stream)?;
                rows.collect()
            })
            .await?)
    }

    async fn count_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(named, tenant_id));
        let condition = sql.condition(filter);
        let text = format!("SELECT COUNT(*) FROM ({STREAM_DOCUMENTS}) WHERE {condition}");
        let values = sql.values;
        let count: i64 = self
            .queries
            .read(tenant_id, move |connection| {
                connection
                    .prepare(&text)?
                    .query_row(params_from_iter(values), |row| row.get(0))
            })
            .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError> {
        // Every position here is (0, rowid): nothing comes after a later transaction's.
        if after.transaction > 0 || limit == 0 {
            return Ok(Vec::new());
        }
        let (after, limit) = (
            clamp(after.sequence),
            i64::try_from(limit).unwrap_or(i64::MAX),
        );
        self.reads
            .read(move |connection| {
                let mut statement = connection.prepare_cached(READ_FEED)?;
                let rows = statement.query_map(params![after, limit], |row| {
                    let position = u64::try_from(row.get::<_, i64>(12)?).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(
                            12,
                            rusqlite::types::Type::Integer,
                            Box::new(e),
                        )
                    })?;
                    Ok(FeedEntry {
                        position: GlobalPosition::new(0, position),
                        stream: decode_stream(row)?,
                    })
                })?;
                rows.collect()
            })
            .await
            .map_err(store_error)
    }

    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        unique_key::release_any(self, tenant_id, key).await
    }
}

#[async_trait]
impl SnapshotStore for SqliteStore {
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        let (name, id, tenant) = (
            aggregate_id.aggregate_name.clone(),
            aggregate_id.id.clone(),
            aggregate_id.tenant_id.clone(),
        );
        self.reads
            .read(move |connection| {
                connection
                    .prepare_cached("SELECT aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time, state_version FROM snapshot WHERE tenant_id = ?3 AND aggregate_name = ?1 AND aggregate_id = ?2")?
                    .query_row(params![name, id, tenant], decode_snapshot)
                    .optional()
            })
            .await
            .map_err(snapshot_error)
    }

    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        let (name, id, tenant) = (
            aggregate_id.aggregate_name.clone(),
            aggregate_id.id.clone(),
            aggregate_id.tenant_id.clone(),
        );
        self.reads
            .read(move |connection| {
                connection
                    .prepare_cached("SELECT version FROM snapshot WHERE tenant_id = ?3 AND aggregate_name = ?1 AND aggregate_id = ?2")?
                    .query_row(params![name, id, tenant], |row| row.get::<_, i64>(0))
                    .optional()
            })
            .await
            .map(|version| version.map(|v| u64::try_from(v).unwrap_or(0)))
            .map_err(snapshot_error)
    }

    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        let state = serde_json::to_string(&snapshot.state)
            .map_err(|e| SnapshotStoreError::Internal(Box::new(e)))?;
        let (reply, answer) = oneshot::channel();
        let job = WriteJob::SaveSnapshot {
            snapshot: snapshot.clone(),
            state,
            reply,
        };
        self.writer
            .send(job)
            .await
            .map_err(|_| SnapshotStoreError::Unavailable(gone()))?;
        answer
            .await
            .map_err(|_| SnapshotStoreError::Unavailable(gone()))?
    }
}
