//! The store: event streams and snapshots in PostgreSQL.
//!
//! ## The global feed
//!
//! [`EventStore::read_feed`] lists appended streams in `(txid, position)` order: the
//! appending transaction's id (`xid8`, column `txid`), then the `BIGSERIAL` position its row
//! took. A position alone is not a safe resume point: sequence values are handed out at
//! insert time and never rolled back, so a transaction that took position 10 may commit after
//! one that took 11, and a reader that read 11 and moved on would never see 10.
//!
//! So the feed reads only rows whose `txid` is below the xmin of the reading statement's
//! snapshot (`pg_snapshot_xmin(pg_current_snapshot())`), the oldest transaction id still in
//! flight. Why that is gap-free: every transaction with an id below xmin has ended (committed,
//! so its rows are visible in the same snapshot, or aborted, so they never will be), and every
//! transaction that can still commit rows is in flight (its id is at least xmin) or has no id
//! yet (it will take one above every id handed out so far). Rows that appear later therefore
//! all sort at or after `(xmin, 0)`, after everything a read returned: the prefix of the feed
//! below xmin never grows in the middle. Within one transaction, rows keep position order.
//!
//! The cost: **any transaction in the database cluster that holds an xid holds the feed
//! back** (xids are cluster-wide), not only appends. A session left `idle in transaction`
//! after a write, a long batch job, or a forgotten prepared transaction stops the feed at its
//! xid until it ends; appends still succeed and are read as soon as it does. Nothing is lost,
//! the feed is only late. To see who holds it:
//!
//! ```sql
//! SELECT pid, backend_xid, xact_start, state, left(query, 60)
//!   FROM pg_stat_activity WHERE backend_xid IS NOT NULL ORDER BY xact_start;
//! SELECT gid, transaction, prepared FROM pg_prepared_xacts;
//! SELECT pg_snapshot_xmin(pg_current_snapshot());  -- the feed's current bound
//! ```
//!
//! `idle_in_transaction_session_timeout` bounds the first kind. Read-only transactions take no
//! xid and hold nothing back. Recorded rejections (negative versions) are not streams and are
//! not in the feed, nor in its index `event_stream_feed`.

use std::sync::Arc;
use wow_core::eventsourcing::SchemaStatus;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::future::BoxFuture;
use tokio_postgres::{NoTls, Row};
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::BoxError;
use wow_core::eventsourcing::{
    check_appendable, check_rejectable, check_time_range, check_version_range, EventStore,
    EventStoreError, FeedEntry, GlobalPosition, RejectedStream, RejectionRecord, RequestDecision,
    RequestRecord, Snapshot, SnapshotStore, SnapshotStoreError,
};
use wow_core::id::{Clock, SystemClock};
use wow_core::query::{DocumentQuery, Filter};
use wow_core::{AggregateId, DomainEventStream, ErrorCode, NamedAggregate};

use crate::bounded::QueryPool;
use crate::error::{
    pool_error, pool_snapshot_error, snapshot_error, store_error, violated_constraint,
    REQUEST_CONSTRAINT, VERSION_CONSTRAINT,
};
use crate::query::{Param, Translation};
use crate::schema::migrate;
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
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

const INSERT: &str = "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
const COLUMNS: &str = "aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body";

/// A rejection is a row of `event_stream` (see `schema.rs`): minus its position as its
/// version, no stream id, no events, and its own columns. It shares `event_stream_request_uq`
/// with the appended streams, which refuses it when the key holds a decision.
const INSERT_REJECTION: &str = "INSERT INTO event_stream (position, aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body, error_code, error_msg, decided_on_version)
    SELECT p, $1, $2, -p, $3, $4, '', $5, $6, $7, $8, '{}'::JSONB, '[]'::JSONB, $9, $10, $11 FROM nextval(pg_get_serial_sequence('event_stream', 'position')) AS p";

/// The decision on one request id: the row that holds its key, an appended stream (version
/// from 1 up) or a rejection (a negative version). One read of `event_stream_request_uq`.
const FIND_DECISION: &str = "SELECT version, stream_id, command_id, create_time, fingerprint, error_code, error_msg, decided_on_version FROM event_stream WHERE tenant_id = $4 AND aggregate_name = $1 AND aggregate_id = $2 AND request_id = $3";

/// The global feed (see the module docs): appended streams after `($1, $2)` in
/// `(txid, position)` order, below the oldest transaction in flight, along the partial index
/// `event_stream_feed`. The `xid8` travels as text both ways: `tokio-postgres` has no Rust
/// type for it. The text is named `feed_txid`, never `txid`: `ORDER BY txid` would take an
/// output column of that name first and sort transaction ids as text ("10" before "9").
const READ_FEED: &str = "SELECT aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body, txid::TEXT AS feed_txid, position FROM event_stream
    WHERE (txid, position) > ($1::TEXT::XID8, $2) AND version > 0
      AND txid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY txid, position LIMIT $3";

/// Decodes a row of [`READ_FEED`].
fn decode_feed_entry(row: &Row) -> Result<FeedEntry, EventStoreError> {
    let txid: String = row.try_get(12).map_err(store_error)?;
    let transaction = txid.parse::<u64>().map_err(|_| {
        corrupt(format!(
            "a stream's transaction id `{txid}` is not a number"
        ))
    })?;
    let position: i64 = row.try_get(13).map_err(store_error)?;
    let sequence = u64::try_from(position)
        .map_err(|_| corrupt(format!("a stream has the negative position {position}")))?;
    Ok(FeedEntry {
        position: GlobalPosition::new(transaction, sequence),
        stream: decode_stream(row)?,
    })
}

/// The columns [`decode_stream`] reads, in its order.
const STREAM_COLUMNS: &str = "aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body";

/// The appended streams of one aggregate type in one tenant (`$1`, `$2`), each with `doc`: the
/// JSONB document Wow's event stream queries filter (see `EventStore::query_streams`).
const STREAM_DOCUMENTS: &str = "SELECT *, jsonb_build_object('id', stream_id, 'requestId', request_id, 'commandId', command_id, 'contextName', context_name, 'aggregateName', aggregate_name, 'aggregateId', aggregate_id, 'tenantId', tenant_id, 'ownerId', COALESCE(header->>'owner_id', ''), 'spaceId', COALESCE(header->>'space_id', ''), 'version', version, 'createTime', create_time, 'header', header, 'body', body) AS doc FROM event_stream WHERE tenant_id = $1 AND aggregate_name = $2 AND version > 0";

/// The parameters of [`STREAM_DOCUMENTS`]'s scope.
fn stream_scope(named: &NamedAggregate, tenant_id: &str) -> Vec<Param> {
    vec![
        Box::new(tenant_id.to_owned()),
        Box::new(named.aggregate_name.clone()),
    ]
}

/// `value` as a database integer, saturating.
pub(crate) fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn corrupt(message: impl std::fmt::Display) -> EventStoreError {
    EventStoreError::Internal(message.to_string().into())
}

fn decode_stream(row: &Row) -> Result<DomainEventStream, EventStoreError> {
    let header: serde_json::Value = row.try_get(10).map_err(store_error)?;
    let body: serde_json::Value = row.try_get(11).map_err(store_error)?;
    Ok(DomainEventStream {
        aggregate_id: AggregateId {
            aggregate_name: row.try_get(0).map_err(store_error)?,
            id: row.try_get(1).map_err(store_error)?,
            context_name: row.try_get(3).map_err(store_error)?,
            tenant_id: row.try_get(4).map_err(store_error)?,
        },
        version: u64::try_from(row.try_get::<_, i64>(2).map_err(store_error)?).unwrap_or(0),
        id: row.try_get(5).map_err(store_error)?,
        request_id: row.try_get(6).map_err(store_error)?,
        command_id: row.try_get(7).map_err(store_error)?,
        fingerprint: row.try_get(8).map_err(store_error)?,
        create_time: row.try_get(9).map_err(store_error)?,
        header: serde_json::from_value(header).map_err(corrupt)?,
        body: serde_json::from_value(body).map_err(corrupt)?,
    })
}

/// Column `index` of `row`, which must not be NULL: a NULL is a row this build cannot read
/// (an [`EventStoreError::Internal`]).
fn required<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    index: usize,
    what: &str,
) -> Result<T, EventStoreError> {
    row.try_get::<_, Option<T>>(index)
        .map_err(store_error)?
        .ok_or_else(|| corrupt(format!("a recorded rejection has no {what}")))
}

/// Decodes a row of [`FIND_DECISION`]. A row that makes no decision (version 0, an appended
/// stream with a rejection's columns, a rejection without them, a negative decided-on
/// version) is [`EventStoreError::Internal`], never taken for "no decision".
fn decode_decision(row: &Row) -> Result<RequestDecision, EventStoreError> {
    let version: i64 = row.try_get(0).map_err(store_error)?;
    let command_id: String = row.try_get(2).map_err(store_error)?;
    let create_time: i64 = row.try_get(3).map_err(store_error)?;
    let fingerprint: String = row.try_get(4).map_err(store_error)?;
    let error_code: Option<String> = row.try_get(5).map_err(store_error)?;
    match u64::try_from(version) {
        Ok(0) => Err(corrupt("a request id is held at version 0")),
        Ok(version) => {
            if error_code.is_some() {
                return Err(corrupt(format!(
                    "the stream at version {version} carries a rejection's error code"
                )));
            }
            Ok(RequestDecision::Appended(RequestRecord {
                stream_id: row.try_get(1).map_err(store_error)?,
                version,
                command_id,
                create_time,
                fingerprint,
            }))
        }
        Err(_) => {
            let decided_on: i64 = required(row, 7, "decided-on version")?;
            let decided_on = u64::try_from(decided_on)
                .map_err(|_| corrupt(format!("a rejection was decided on version {decided_on}")))?;
            let error_code =
                error_code.ok_or_else(|| corrupt("a recorded rejection has no error code"))?;
            let Ok(error_code) = error_code.parse::<ErrorCode>();
            Ok(RequestDecision::Rejected(RejectionRecord {
                command_id,
                fingerprint,
                error_code,
                error_msg: required(row, 6, "error message")?,
                version: decided_on,
                create_time,
            }))
        }
    }
}

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
        if options.schema.is_empty()
            || !options
                .schema
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(OpenError::BadUrl(format!(
                "schema `{}` may hold only letters, digits and _",
                options.schema
            )));
        }
        let (client, connection) = config.connect(NoTls).await?;
        let connection = tokio::spawn(connection);
        let table = format!("{}.wow_schema", options.schema);
        let exists: bool = client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
            .await?
            .get(0);
        let found: i32 = if exists {
            client
                .query_one(
                    &format!("SELECT COALESCE(MAX(version), 0) FROM {table}"),
                    &[],
                )
                .await?
                .get(0)
        } else {
            0
        };
        drop(client);
        let _ = connection.await;
        Ok(crate::schema::status(u32::try_from(found).unwrap_or(0)))
    }

    /// Connects, creates the schema if missing and migrates it.
    ///
    /// Fails with [`OpenError::SchemaTooNew`] for a schema written by a newer build, and with
    /// [`OpenError::Postgres`] or [`OpenError::Pool`] when the database cannot be reached.
    pub async fn open(options: PostgresOptions) -> Result<Self, OpenError> {
        let mut config: tokio_postgres::Config = options
            .url
            .parse()
            .map_err(|e: tokio_postgres::Error| OpenError::BadUrl(e.to_string()))?;
        config.options(format!("-c search_path={}", options.schema));
        config.connect_timeout(std::time::Duration::from_secs(5));
        let queries = QueryPool::open(
            config.clone(),
            options.query_connections,
            options.query_timeout,
        )?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections)
            .wait_timeout(Some(std::time::Duration::from_secs(10)))
            .create_timeout(Some(std::time::Duration::from_secs(5)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| OpenError::Pool(e.to_string()))?;
        let mut client = pool
            .get()
            .await
            .map_err(|e| OpenError::Pool(e.to_string()))?;
        migrate(&mut client, &options.schema).await?;
        Ok(Self {
            pool,
            queries,
            consumer_slots: Arc::new(tokio::sync::Semaphore::new(
                (options.max_connections / 2).max(1),
            )),
            schema: options.schema,
            clock: Arc::new(SystemClock),
        })
    }

    /// This store, timing the processed-message records it writes by `clock` instead of the
    /// system clock (the one wiring place of a service chooses it, DESIGN §8).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Runs `work` once per (`consumer`, `message_id`), in one transaction with the record
    /// that it ran (SPEC DS-2): a redelivered message finds the record and `work` does not
    /// run; a failing `work` leaves neither its writes nor the record. Concurrent deliveries
    /// of one message wait for each other on the record's key; one of them runs `work`.
    /// Consumers use at most half the pool at once, leaving the rest to appends.
    pub async fn process_once<F>(
        &self,
        consumer: &str,
        message_id: &str,
        work: F,
    ) -> Result<Processed, ProcessError>
    where
        F: for<'t> FnOnce(
                &'t deadpool_postgres::Transaction<'t>,
            ) -> BoxFuture<'t, Result<(), BoxError>>
            + Send,
    {
        let store = |error: tokio_postgres::Error| ProcessError::Store(Box::new(error));
        let _slot = self
            .consumer_slots
            .acquire()
            .await
            .map_err(|e| ProcessError::Store(Box::new(e)))?;
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|e| ProcessError::Store(Box::new(e)))?;
        let transaction = client.transaction().await.map_err(store)?;
        // The record first: its key makes concurrent deliveries of one message queue up.
        let record = transaction
            .prepare_cached(
                "INSERT INTO processed_message (consumer, message_id, processed_time) VALUES ($1, $2, $3) ON CONFLICT (consumer, message_id) DO NOTHING",
            )
            .await
            .map_err(store)?;
        let recorded = transaction
            .execute(&record, &[&consumer, &message_id, &self.clock.now_millis()])
            .await
            .map_err(store)?;
        if recorded == 0 {
            transaction.rollback().await.map_err(store)?;
            return Ok(Processed::AlreadyProcessed);
        }
        if let Err(error) = work(&transaction).await {
            transaction.rollback().await.map_err(store)?;
            return Err(ProcessError::Work(error));
        }
        transaction.commit().await.map_err(store)?;
        Ok(Processed::Applied)
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

    async fn client(&self) -> Result<deadpool_postgres::Object, EventStoreError> {
        self.pool.get().await.map_err(pool_error)
    }

    async fn streams(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(store_error)?;
        let rows = client
            .query(&statement, params)
            .await
            .map_err(store_error)?;
        rows.iter().map(decode_stream).collect()
    }

    /// Whether `aggregate` holds a decision on `request_id`, a stream or a rejection (asked
    /// after a version conflict, so that a replayed request is reported as the duplicate it
    /// is, SPEC ES-4).
    async fn holds_request(&self, stream: &DomainEventStream) -> Result<bool, EventStoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT 1 FROM event_stream WHERE tenant_id = $4 AND aggregate_name = $1 AND aggregate_id = $2 AND request_id = $3",
                &[&stream.aggregate_id.aggregate_name, &stream.aggregate_id.id, &stream.request_id, &stream.aggregate_id.tenant_id],
            )
            .await
            .map_err(store_error)?;
        Ok(row.is_some())
    }
}

#[async_trait]
impl EventStore for PostgresStore {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        check_appendable(stream)?;
        let header = serde_json::to_value(&stream.header).map_err(corrupt)?;
        let body = serde_json::to_value(&stream.body).map_err(corrupt)?;
        let client = self.client().await?;
        let statement = client.prepare_cached(INSERT).await.map_err(store_error)?;
        let outcome = client
            .execute(
                &statement,
                &[
                    &stream.aggregate_id.aggregate_name,
                    &stream.aggregate_id.id,
                    &clamp(stream.version),
                    &stream.aggregate_id.context_name,
                    &stream.aggregate_id.tenant_id,
                    &stream.id,
                    &stream.request_id,
                    &stream.command_id,
                    &stream.fingerprint,
                    &stream.create_time,
                    &header,
                    &body,
                ],
            )
            .await;
        drop(client);
        let Err(error) = outcome else {
            return Ok(());
        };
        match violated_constraint(&error) {
            Some(REQUEST_CONSTRAINT) => Err(EventStoreError::duplicate_request_id(stream)),
            Some(VERSION_CONSTRAINT) => {
                if self.holds_request(stream).await? {
                    Err(EventStoreError::DuplicateRequestId(Box::new(
                        RejectedStream::of(stream),
                    )))
                } else {
                    Err(EventStoreError::version_taken(stream))
                }
            }
            _ => Err(store_error(error)),
        }
    }

    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        check_version_range(head, tail)?;
        let sql = format!("SELECT {COLUMNS} FROM event_stream WHERE tenant_id = $5 AND aggregate_name = $1 AND aggregate_id = $2 AND version BETWEEN $3 AND $4 ORDER BY version");
        self.streams(
            &sql,
            &[
                &aggregate_id.aggregate_name,
                &aggregate_id.id,
                &clamp(head),
                &clamp(tail),
                &aggregate_id.tenant_id,
            ],
        )
        .await
    }

    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        check_time_range(start, end)?;
        let sql = format!("SELECT {COLUMNS} FROM event_stream WHERE tenant_id = $5 AND aggregate_name = $1 AND aggregate_id = $2 AND version > 0 AND create_time BETWEEN $3 AND $4 ORDER BY version");
        self.streams(
            &sql,
            &[
                &aggregate_id.aggregate_name,
                &aggregate_id.id,
                &start,
                &end,
                &aggregate_id.tenant_id,
            ],
        )
        .await
    }

    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError> {
        let sql = format!("SELECT {COLUMNS} FROM event_stream WHERE tenant_id = $3 AND aggregate_name = $1 AND aggregate_id = $2 AND version > 0 ORDER BY version DESC LIMIT 1");
        Ok(self
            .streams(
                &sql,
                &[
                    &aggregate_id.aggregate_name,
                    &aggregate_id.id,
                    &aggregate_id.tenant_id,
                ],
            )
            .await?
            .pop())
    }

    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(FIND_DECISION)
            .await
            .map_err(store_error)?;
        let row = client
            .query_opt(
                &statement,
                &[
                    &aggregate_id.aggregate_name,
                    &aggregate_id.id,
                    &request_id,
                    &aggregate_id.tenant_id,
                ],
            )
            .await
            .map_err(store_error)?;
        row.as_ref().map(decode_decision).transpose()
    }

    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        check_rejectable(request_id)?;
        let client = self.client().await?;
        let statement = client
            .prepare_cached(INSERT_REJECTION)
            .await
            .map_err(store_error)?;
        let outcome = client
            .execute(
                &statement,
                &[
                    &aggregate_id.aggregate_name,
                    &aggregate_id.id,
                    &aggregate_id.context_name,
                    &aggregate_id.tenant_id,
                    &request_id,
                    &rejection.command_id,
                    &rejection.fingerprint,
                    &rejection.create_time,
                    &rejection.error_code.as_str(),
                    &rejection.error_msg,
                    &clamp(rejection.version),
                ],
            )
            .await;
        match outcome {
            Ok(_) => Ok(()),
            Err(error) if violated_constraint(&error) == Some(REQUEST_CONSTRAINT) => Err(
                EventStoreError::request_decided(aggregate_id, request_id, rejection),
            ),
            Err(error) => Err(store_error(error)),
        }
    }

    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        let (after_tenant, after_id) = match after {
            Some(after) => (Some(after.tenant_id.as_str()), Some(after.id.as_str())),
            None => (None, None),
        };
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT context_name, aggregate_name, aggregate_id, tenant_id FROM event_stream
                 WHERE aggregate_name = $1 AND context_name = $2 AND version = 1
                   AND ($3::TEXT IS NULL OR (tenant_id, aggregate_id) > ($3::TEXT, $5::TEXT))
                 ORDER BY tenant_id, aggregate_id LIMIT $4",
                &[
                    &named.aggregate_name,
                    &named.context_name,
                    &after_tenant,
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                    &after_id,
                ],
            )
            .await
            .map_err(store_error)?;
        rows.iter()
            .map(|row| {
                Ok(AggregateId {
                    context_name: row.try_get(0).map_err(store_error)?,
                    aggregate_name: row.try_get(1).map_err(store_error)?,
                    id: row.try_get(2).map_err(store_error)?,
                    tenant_id: row.try_get(3).map_err(store_error)?,
                })
            })
            .collect()
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
        order.push("aggregate_id COLLATE \"C\", version".to_owned());
        let limit = sql.bind(Box::new(clamp(query.limit)));
        let offset = sql.bind(Box::new(clamp(query.offset)));
        let text = format!(
            "SELECT {STREAM_COLUMNS} FROM ({STREAM_DOCUMENTS}) AS s WHERE {condition} ORDER BY {} LIMIT {limit} OFFSET {offset}",
            order.join(", ")
        );
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = sql
            .params
            .iter()
            .map(|param| param.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        let bounded = self.queries.client(tenant_id).await?;
        let rows = bounded
            .client
            .query(&text, &refs)
            .await
            .map_err(|e| self.queries.failed(e))?;
        rows.iter().map(decode_stream).collect()
    }

    async fn count_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        let mut sql = Translation::new("doc", stream_scope(named, tenant_id));
        let condition = sql.condition(filter);
        let text = format!("SELECT COUNT(*) FROM ({STREAM_DOCUMENTS}) AS s WHERE {condition}");
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = sql
            .params
            .iter()
            .map(|param| param.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        let bounded = self.queries.client(tenant_id).await?;
        let count: i64 = bounded
            .client
            .query_one(&text, &refs)
            .await
            .map_err(|e| self.queries.failed(e))?
            .get(0);
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let statement = client
            .prepare_cached(READ_FEED)
            .await
            .map_err(store_error)?;
        let rows = client
            .query(
                &statement,
                &[
                    &after.transaction.to_string(),
                    &clamp(after.sequence),
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(store_error)?;
        rows.iter().map(decode_feed_entry).collect()
    }
}

#[async_trait]
impl SnapshotStore for PostgresStore {
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        let client = self.pool.get().await.map_err(pool_snapshot_error)?;
        let row = client
            .query_opt(
                "SELECT aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time, state_version FROM snapshot WHERE tenant_id = $3 AND aggregate_name = $1 AND aggregate_id = $2",
                &[&aggregate_id.aggregate_name, &aggregate_id.id, &aggregate_id.tenant_id],
            )
            .await
            .map_err(snapshot_error)?;
        row.map(|row| {
            Ok(Snapshot {
                aggregate_id: AggregateId {
                    aggregate_name: row.try_get(0).map_err(snapshot_error)?,
                    id: row.try_get(1).map_err(snapshot_error)?,
                    context_name: row.try_get(2).map_err(snapshot_error)?,
                    tenant_id: row.try_get(3).map_err(snapshot_error)?,
                },
                version: u64::try_from(row.try_get::<_, i64>(4).map_err(snapshot_error)?)
                    .unwrap_or(0),
                state: row.try_get(5).map_err(snapshot_error)?,
                snapshot_time: row.try_get(6).map_err(snapshot_error)?,
                state_version: u32::try_from(row.try_get::<_, i32>(7).map_err(snapshot_error)?)
                    .unwrap_or(0),
            })
        })
        .transpose()
    }

    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        let client = self.pool.get().await.map_err(pool_snapshot_error)?;
        let row = client
            .query_opt(
                "SELECT version FROM snapshot WHERE tenant_id = $3 AND aggregate_name = $1 AND aggregate_id = $2",
                &[&aggregate_id.aggregate_name, &aggregate_id.id, &aggregate_id.tenant_id],
            )
            .await
            .map_err(snapshot_error)?;
        Ok(row
            .and_then(|row| row.try_get::<_, i64>(0).ok())
            .map(|v| u64::try_from(v).unwrap_or(0)))
    }

    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        let client = self.pool.get().await.map_err(pool_snapshot_error)?;
        // Version-guarded upsert: an older snapshot never replaces a newer one, whatever the
        // order concurrent saves land in.
        let changed = client
            .execute(
                "INSERT INTO snapshot (aggregate_name, aggregate_id, context_name, tenant_id, version, state, snapshot_time, state_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (tenant_id, aggregate_name, aggregate_id) DO UPDATE SET
                    context_name = EXCLUDED.context_name, version = EXCLUDED.version,
                    state = EXCLUDED.state, snapshot_time = EXCLUDED.snapshot_time,
                    state_version = EXCLUDED.state_version
                 WHERE EXCLUDED.version >= snapshot.version",
                &[
                    &snapshot.aggregate_id.aggregate_name,
                    &snapshot.aggregate_id.id,
                    &snapshot.aggregate_id.context_name,
                    &snapshot.aggregate_id.tenant_id,
                    &clamp(snapshot.version),
                    &snapshot.state,
                    &snapshot.snapshot_time,
                    &i32::try_from(snapshot.state_version).unwrap_or(i32::MAX),
                ],
            )
            .await
            .map_err(snapshot_error)?;
        Ok(changed > 0)
    }
}
