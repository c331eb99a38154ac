//! Table `event_stream`: appending a stream and reading an aggregate's history back, the
//! `EventStore` implementation.
//!
//! One append is one `INSERT` (autocommit), atomic by itself, never `ON CONFLICT DO
//! NOTHING`: a taken version or request id breaks a named constraint, which is mapped to its
//! typed error. An append with changes is the same `INSERT` in a transaction with its key
//! changes (SPEC DM-1, [`super::unique_key`]) and then its deadline changes (SPEC DM-2,
//! [`super::deadline`]), made after it (so that a taken version or request id is reported
//! before a taken key) and committed with it: a refusal of any of them rolls all back. An
//! append without changes is the one autocommit `INSERT`, as before. Every read of history
//! asks for versions from 1 up, because recorded rejections are rows of this table too, at
//! negative versions (see [`super::request_decision`]).
//! The look-ups, the global feed and the queries over this table are in modules of their
//! own; the methods here hand over to them.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use wow_core::eventsourcing::{
    check_appendable, check_conditions, check_deadline_changes, check_key_changes,
    check_time_range, check_version_range, AppendChanges, EventStoreError, History, RejectedStream,
};
use wow_core::{AggregateId, DomainEventStream, NamedAggregate};

use super::stream_row::{corrupt, decode_stream, stream_columns};
use super::{clamp, deadline, read_guard, request_decision, unique_key, PostgresStore};
use crate::error::{store_error, violated_constraint, REQUEST_CONSTRAINT, VERSION_CONSTRAINT};

/// Appends one stream, `$1` to `$12` in the order of [`stream_columns`]. A taken version
/// breaks `event_stream_pk`, a taken request id `event_stream_request_uq`.
const INSERT_STREAM: &str = concat!(
    "INSERT INTO event_stream (",
    stream_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
);

/// The streams of aggregate (`$5` tenant, `$1` name, `$2` id) from version `$3` to `$4`, in
/// version order.
const LOAD_VERSIONS: &str = concat!(
    "SELECT ",
    stream_columns!(),
    " FROM event_stream WHERE tenant_id = $5 AND aggregate_name = $1 AND aggregate_id = $2 AND version BETWEEN $3 AND $4 ORDER BY version"
);

/// The streams of aggregate (`$5` tenant, `$1` name, `$2` id) created from `$3` to `$4`
/// (epoch milliseconds), in version order.
const LOAD_TIMES: &str = concat!(
    "SELECT ",
    stream_columns!(),
    " FROM event_stream WHERE tenant_id = $5 AND aggregate_name = $1 AND aggregate_id = $2 AND version > 0 AND create_time BETWEEN $3 AND $4 ORDER BY version"
);

/// The last stream of aggregate (`$3` tenant, `$1` name, `$2` id), if it has one.
const LOAD_LAST: &str = concat!(
    "SELECT ",
    stream_columns!(),
    " FROM event_stream WHERE tenant_id = $3 AND aggregate_name = $1 AND aggregate_id = $2 AND version > 0 ORDER BY version DESC LIMIT 1"
);

/// The aggregates of type (`$1` name, `$2` context) that have a first stream, in (tenant, id)
/// order after (`$3` tenant, `$5` id) when `$3` is not NULL, at most `$4` of them.
const SCAN_AGGREGATE_IDS: &str =
    "SELECT context_name, aggregate_name, aggregate_id, tenant_id FROM event_stream
                 WHERE aggregate_name = $1 AND context_name = $2 AND version = 1
                   AND ($3::TEXT IS NULL OR (tenant_id, aggregate_id) > ($3::TEXT, $5::TEXT))
                 ORDER BY tenant_id, aggregate_id LIMIT $4";

/// Decodes a row of [`SCAN_AGGREGATE_IDS`].
fn decode_aggregate_id(row: &Row) -> Result<AggregateId, EventStoreError> {
    Ok(AggregateId {
        context_name: row.try_get(0).map_err(store_error)?,
        aggregate_name: row.try_get(1).map_err(store_error)?,
        id: row.try_get(2).map_err(store_error)?,
        tenant_id: row.try_get(3).map_err(store_error)?,
    })
}

/// A stream's header and events as their `JSONB` columns hold them.
struct Encoded {
    header: serde_json::Value,
    body: serde_json::Value,
}

impl Encoded {
    /// `stream`'s header and events, encoded before a connection is taken.
    fn of(stream: &DomainEventStream) -> Result<Self, EventStoreError> {
        Ok(Self {
            header: serde_json::to_value(&stream.header).map_err(corrupt)?,
            body: serde_json::to_value(&stream.body).map_err(corrupt)?,
        })
    }
}

/// Inserts `stream` ([`INSERT_STREAM`]) on `client`: a pooled connection, where the insert
/// commits by itself, or the transaction of an append with changes. The error is the
/// database's, for [`PostgresStore::append_refused`] to name.
async fn insert_stream(
    client: &impl GenericClient,
    stream: &DomainEventStream,
    encoded: &Encoded,
) -> Result<(), tokio_postgres::Error> {
    let statement = client.prepare_cached(INSERT_STREAM).await?;
    client
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
                &encoded.header,
                &encoded.body,
            ],
        )
        .await?;
    Ok(())
}

/// Rolls back a refused append's `transaction` now, rather than when the connection next
/// runs (as dropping it would), so that the rows it locked, a claimed key's among them, are
/// free before the refusal is answered. A rollback that fails leaves the refusal as it was:
/// nothing was committed, and the server ends the transaction with its connection.
async fn roll_back(transaction: deadpool_postgres::Transaction<'_>) {
    if let Err(error) = transaction.rollback().await {
        tracing::debug!(%error, "rolling back a refused append failed");
    }
}

impl PostgresStore {
    /// Appends `stream` and makes its (non-empty) changes in one transaction: the guards of
    /// its conditions first (SPEC DM-5, [`read_guard`]), then the stream's insert, so that a
    /// taken request id or version is reported as it is without changes, then the
    /// conditions, then [`unique_key::change`], then [`deadline::change`] (SPEC DM-2: a
    /// deadline row exists only with the stream that scheduled it). A refused append rolls
    /// everything back, and so does a deadline write that fails.
    async fn append_changing(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        let encoded = Encoded::of(stream)?;
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(store_error)?;
        if read_guard::guards_needed(changes) {
            if let Err(error) = read_guard::take(&transaction, stream, changes).await {
                roll_back(transaction).await;
                return Err(error);
            }
        }
        if let Err(error) = insert_stream(&transaction, stream, &encoded).await {
            roll_back(transaction).await;
            // The connection goes back to the pool before the refusal is looked into.
            drop(client);
            return Err(self.append_refused(stream, error).await);
        }
        if let Err(error) = read_guard::check(&transaction, stream, changes).await {
            roll_back(transaction).await;
            return Err(error);
        }
        if let Err(error) = unique_key::change(&transaction, stream, &changes.keys).await {
            roll_back(transaction).await;
            return Err(error);
        }
        if let Err(error) = deadline::change(&transaction, stream, &changes.deadlines).await {
            roll_back(transaction).await;
            return Err(error);
        }
        transaction.commit().await.map_err(store_error)
    }

    /// The streams `sql` (a prepared, cached statement of [`stream_columns`]) reads with
    /// `params`.
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

    /// The error of an append that broke `error`'s constraint: a taken request id is a
    /// duplicate once its holder is read durably; a taken version is a duplicate too when the aggregate already holds the
    /// stream's request id (a replayed request, SPEC ES-4), else a version conflict.
    async fn append_refused(
        &self,
        stream: &DomainEventStream,
        error: tokio_postgres::Error,
    ) -> EventStoreError {
        match violated_constraint(&error) {
            // The holder read again, durably: a duplicate only of a decision that stays.
            Some(REQUEST_CONSTRAINT) => match request_decision::holds_request(self, stream).await {
                Ok(true) => EventStoreError::duplicate_request_id(stream),
                Ok(false) => EventStoreError::Unavailable(
                    "the request id was taken by a decision no longer there: the outcome is unknown"
                        .into(),
                ),
                Err(error) => error,
            },
            Some(VERSION_CONSTRAINT) => match request_decision::holds_request(self, stream).await {
                Ok(true) => {
                    EventStoreError::DuplicateRequestId(Box::new(RejectedStream::of(stream)))
                }
                Ok(false) => EventStoreError::version_taken(stream),
                Err(error) => error,
            },
            _ => store_error(error),
        }
    }
}

#[async_trait]
impl History for PostgresStore {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        self.within(async {
            check_appendable(stream)?;
            let encoded = Encoded::of(stream)?;
            let client = self.client().await?;
            let outcome = insert_stream(&client, stream, &encoded).await;
            drop(client);
            match outcome {
                Ok(()) => Ok(()),
                Err(error) => Err(self.append_refused(stream, error).await),
            }
        })
        .await
    }

    /// Without changes, [`append`](Self::append) itself: one autocommit `INSERT`. With
    /// them, one transaction that inserts the stream, then makes the key changes (the
    /// primary key of `unique_key` deciding between concurrent claimants of a key), then
    /// the deadline changes.
    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        self.within(async {
            check_appendable(stream)?;
            check_key_changes(&changes.keys)?;
            check_deadline_changes(stream, &changes.deadlines)?;
            check_conditions(stream, &changes.conditions)?;
            if changes.is_empty() {
                return self.append(stream).await;
            }
            self.append_changing(stream, changes).await
        })
        .await
    }

    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.within(async {
            check_version_range(head, tail)?;
            self.streams(
                LOAD_VERSIONS,
                &[
                    &aggregate_id.aggregate_name,
                    &aggregate_id.id,
                    &clamp(head),
                    &clamp(tail),
                    &aggregate_id.tenant_id,
                ],
            )
            .await
        })
        .await
    }

    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.within(async {
            check_time_range(start, end)?;
            self.streams(
                LOAD_TIMES,
                &[
                    &aggregate_id.aggregate_name,
                    &aggregate_id.id,
                    &start,
                    &end,
                    &aggregate_id.tenant_id,
                ],
            )
            .await
        })
        .await
    }

    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError> {
        self.within(async {
            Ok(self
                .streams(
                    LOAD_LAST,
                    &[
                        &aggregate_id.aggregate_name,
                        &aggregate_id.id,
                        &aggregate_id.tenant_id,
                    ],
                )
                .await?
                .pop())
        })
        .await
    }

    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        self.within(async {
            let (after_tenant, after_id) = match after {
                Some(after) => (Some(after.tenant_id.as_str()), Some(after.id.as_str())),
                None => (None, None),
            };
            let client = self.client().await?;
            let rows = client
                .query(
                    SCAN_AGGREGATE_IDS,
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
            rows.iter().map(decode_aggregate_id).collect()
        })
        .await
    }
}
