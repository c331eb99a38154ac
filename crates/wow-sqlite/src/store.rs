//! The store's handle: one SQLite file, its one writer and its read pools.
//!
//! Why one handle for every table: history, snapshots, processed-message records, views and
//! the downstream tables live in one file and go through one writer thread, so that a
//! consumer's writes and the record that it ran them are one transaction (SPEC DS-2), and
//! one path opens everything a node needs. Writes reach the writer as jobs (see `writer.rs`);
//! reads run on the read pool, queries on connections of their own. The store traits it
//! implements are each in the module of the table they keep:
//!
//! - [`event_stream`]: `EventStore`, appending a stream and reading an aggregate's history;
//! - [`request_decision`]: the one decision per request id (appended streams and recorded
//!   rejections, rows of `event_stream` too);
//! - [`feed`]: the global feed over `event_stream`, in commit order;
//! - [`stream_query`]: Wow's event stream queries, on the query connections;
//! - [`stream_row`]: a row of `event_stream` as a stream, shared by the modules above;
//! - [`snapshot`]: `SnapshotStore`, table `snapshot`;
//! - [`processed_message`]: the record that a consumer ran a message, table
//!   `processed_message`, written by the writer before the consumer's work;
//! - [`unique_key`]: the keys aggregates hold (SPEC DM-1), table `unique_key`, changed in
//!   the savepoint of the stream that changes them;
//! - [`deadline`]: `DeadlineStore`, the pending scheduled commands (SPEC DM-2), table
//!   `deadline`, written in the savepoint of the stream that schedules them.

pub(crate) mod deadline;
pub(crate) mod event_stream;
mod feed;
pub(crate) mod processed_message;
pub(crate) mod request_decision;
pub(crate) mod snapshot;
mod stream_query;
pub(crate) mod stream_row;
pub(crate) mod unique_key;

use std::sync::Arc;

use rusqlite::{params, OptionalExtension, Row};
use tokio::sync::oneshot;
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::{BoxError, SchemaStatus};
use wow_core::id::{Clock, SystemClock};
use wow_core::AggregateId;

use crate::bounded::QueryPool;
use crate::error::gone;
use crate::reader::ReadPool;
use crate::schema::{connect, migrate};
use crate::write_job::{Work, WorkFn, WriteJob, WriterHandle};
use crate::writer::{self, WriterStats};
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

/// The (name, id, tenant) of `aggregate_id`, owned, for a read that runs on another thread.
pub(crate) fn owned_key(aggregate_id: &AggregateId) -> (String, String, String) {
    (
        aggregate_id.aggregate_name.clone(),
        aggregate_id.id.clone(),
        aggregate_id.tenant_id.clone(),
    )
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
        let connection = crate::schema::patiently(|| {
            let mut connection = connect(&options, false)?;
            migrate(&mut connection)?;
            Ok(connection)
        })?;
        let stats = Arc::new(WriterStats::default());
        let writer = writer::spawn(
            connection,
            options.max_batch,
            options.commit_delay,
            stats.clone(),
        )
        .map_err(io)?;
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
            true,
            Box::new(work),
        )
        .await
    }

    /// Runs `work` in the writer's transaction (for example a consumer's table setup).
    pub async fn transact(
        &self,
        work: impl FnOnce(&rusqlite::Connection) -> Result<(), BoxError> + Send + 'static,
    ) -> Result<(), ProcessError> {
        self.submit(None, true, Box::new(work)).await.map(|_| ())
    }

    /// Runs `work`, which is one statement and so atomic by itself, in the writer's
    /// transaction without a savepoint around it: the cheapest write a consumer can make
    /// (a view's `put_newer`). A failing statement changes nothing and fails alone.
    pub(crate) async fn write_statement(
        &self,
        work: impl FnOnce(&rusqlite::Connection) -> Result<(), BoxError> + Send + 'static,
    ) -> Result<(), ProcessError> {
        self.submit(None, false, Box::new(work)).await.map(|_| ())
    }

    async fn submit(
        &self,
        record: Option<(String, String, i64)>,
        savepoint: bool,
        work: Work,
    ) -> Result<Processed, ProcessError> {
        let (reply, answer) = oneshot::channel();
        let job = WriteJob::Work {
            record,
            savepoint,
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

    /// The row `sql` reads of aggregate (`?3` tenant, `?1` name, `?2` id), decoded by
    /// `decode`, if there is one, on the read pool.
    pub(crate) async fn read_aggregate_row<T: Send + 'static>(
        &self,
        sql: &'static str,
        aggregate_id: &AggregateId,
        decode: fn(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<Option<T>> {
        let (name, id, tenant) = owned_key(aggregate_id);
        self.reads
            .read(move |connection| {
                connection
                    .prepare_cached(sql)?
                    .query_row(params![name, id, tenant], decode)
                    .optional()
            })
            .await
    }

    /// The tenants' share of the query connections: how many queries of a tenant run now.
    pub fn query_share(&self) -> &wow_core::query::TenantShare {
        self.queries.share()
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.options
    }
}
