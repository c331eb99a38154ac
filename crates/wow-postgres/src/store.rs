//! The store's handle: one pool over one schema, and the connections it hands out.
//!
//! Why one handle for every table: appends, snapshots, processed-message records, views and
//! the downstream tables live in one schema and share one pool, so that a consumer's writes
//! and the record that it ran them can be one transaction (SPEC DS-2), and one URL opens
//! everything a node needs. The store traits it implements are each in the module of the
//! table they keep:
//!
//! - [`event_stream`]: `EventStore`, appending a stream and reading an aggregate's history;
//! - [`request_decision`]: the one decision per request id (appended streams and recorded
//!   rejections, rows of `event_stream` too);
//! - [`feed`]: the global feed over `event_stream`, and why it never skips a stream;
//! - [`stream_query`]: Wow's event stream queries, on the query connections;
//! - [`snapshot`]: `SnapshotStore`, table `snapshot`;
//! - [`processed_message`]: running a consumer's work once per message, table
//!   `processed_message`;
//! - [`unique_key`]: the keys aggregates hold (SPEC DM-1), table `unique_key`, changed in
//!   the transaction of the stream that changes them;
//! - [`deadline`]: `DeadlineStore`, the pending scheduled commands (SPEC DM-2), table
//!   `deadline`, written in the transaction of the stream that schedules them.

pub(crate) mod deadline;
mod event_stream;
mod feed;
pub(crate) mod processed_message;
mod read_guard;
mod request_decision;
mod snapshot;
mod stream_query;
mod stream_row;
mod unique_key;

use std::sync::Arc;

use deadpool_postgres::Pool;
use tokio_postgres::NoTls;
use wow_core::eventsourcing::{EventStoreError, SchemaStatus};
use wow_core::id::{Clock, SystemClock};

use crate::bounded::QueryPool;
use crate::call::Watch;
use crate::connect::{command_pool, driver_config};
use crate::error::pool_error;
use crate::schema::{check_schema_name, found_version, migrate};
use crate::{OpenError, PostgresOptions};

/// Event streams and snapshots in PostgreSQL, over a pool. Cloning is cheap; clones share
/// the pool.
#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: Pool,
    /// The connections queries run on, apart from `pool`.
    pub(crate) queries: QueryPool,
    /// Consumers' transactions at once: at most half the pool, so appends always find a
    /// connection however far behind the consumers are.
    consumer_slots: Arc<tokio::sync::Semaphore>,
    schema: String,
    pub(crate) clock: Arc<dyn Clock>,
    /// The call deadline, and what the store's failures say about its connections.
    pub(crate) watch: Arc<Watch>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

pub(crate) use crate::query::clamp;

impl PostgresStore {
    /// Where the schema `options` names stands against this build's migrations (what
    /// opening it would apply), read without changing anything: `wow migrate --dry-run`. A
    /// schema that does not exist yet is version 0, and is not made.
    ///
    /// # Errors
    ///
    /// [`OpenError`] when the database cannot be reached.
    pub async fn schema_status(options: PostgresOptions) -> Result<SchemaStatus, OpenError> {
        let config: tokio_postgres::Config = options
            .url
            .parse()
            .map_err(|e: tokio_postgres::Error| OpenError::BadUrl(e.to_string()))?;
        check_schema_name(&options.schema)?;
        let (client, connection) = config.connect(NoTls).await?;
        let connection = tokio::spawn(connection);
        let found = found_version(&client, &options.schema).await?;
        drop(client);
        let _ = connection.await;
        Ok(crate::schema::status(u32::try_from(found).unwrap_or(0)))
    }

    /// Connects, creates the schema if missing and migrates it.
    ///
    /// The URL may name several hosts (`postgres://u@h1:p1,h2:p2/db?target_session_attrs=read-write`,
    /// what `pg_autoctl show uri` prints): each connection goes to the first host that sets
    /// one up within its `connect_timeout` (default 2 s) and, with `read-write`, accepts writes;
    /// a start with several hosts and without `read-write` is warned of.
    ///
    /// Fails with [`OpenError::SchemaTooNew`] for a schema written by a newer build, and with
    /// [`OpenError::Postgres`] or [`OpenError::Pool`] when the database cannot be reached.
    pub async fn open(options: PostgresOptions) -> Result<Self, OpenError> {
        let config = driver_config(&options)?;
        let queries = QueryPool::open(
            config.clone(),
            options.query_connections,
            options.query_timeout,
        )?;
        let watch = Arc::new(Watch::new(options.call_timeout));
        let pool = command_pool(config, options.max_connections, watch.clone())?;
        let mut client = pool.get().await.map_err(|error| match error {
            deadpool_postgres::PoolError::Backend(error) => OpenError::Postgres(error),
            other => OpenError::Pool(other.to_string()),
        })?;
        migrate(&mut client, &options.schema).await?;
        Ok(Self {
            pool,
            queries,
            consumer_slots: Arc::new(tokio::sync::Semaphore::new(
                (options.max_connections / 2).max(1),
            )),
            schema: options.schema,
            clock: Arc::new(SystemClock),
            watch,
        })
    }

    /// This store, timing the processed-message records it writes by `clock` instead of the
    /// system clock (the one wiring place of a service chooses it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The pool, for a consumer's own reads.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The tenants' share of the query connections: how many queries of a tenant run now.
    pub fn query_share(&self) -> &wow_core::query::TenantShare {
        self.queries.share()
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A connection of the pool, its failure an [`EventStoreError`].
    async fn client(&self) -> Result<deadpool_postgres::Object, EventStoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}
