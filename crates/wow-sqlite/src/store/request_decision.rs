//! The one decision per request id (SPEC ID-6): an appended stream or a recorded rejection,
//! both rows of `event_stream` under its unique index on (tenant, aggregate name, aggregate
//! id, request id).
//!
//! Why a rejection is a row of `event_stream` rather than of a table of its own: one unique
//! index then holds both kinds of decision, and SQLite itself refuses the second of an
//! append and a rejection of one request id, in whichever order and from whichever process
//! they come (`schema.rs` has the reasoning). A rejection is written through the writer, as
//! an append is, in the same group commits; it has minus its own position as its version (so
//! it never takes a version of history and never collides with another rejection), no
//! stream id, no events, and its own three columns.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};
use tokio::sync::oneshot;
use wow_core::eventsourcing::{
    check_rejectable, EventStoreError, RejectionRecord, RequestDecision, RequestLog, RequestRecord,
};
use wow_core::{AggregateId, ErrorCode};

use super::stream_row::{text_error, StreamRow};
use super::{owned_key, SqliteStore};
use crate::error::store_error;
use crate::write_job::{Rejection, WriteJob};

/// Records a rejection: `?1` aggregate name, `?2` id, `?3` context, `?4` tenant, `?5` request
/// id, `?6` command id, `?7` fingerprint, `?8` time, `?9` error code, `?10` message, `?11`
/// the version it was decided on. It takes minus its own position as its version (see
/// `schema.rs`); the one writer makes `MAX(position) + 1` the position no other row has.
const INSERT_REJECTION: &str = "INSERT INTO event_stream (position, aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body, error_code, error_msg, decided_on_version)
    SELECT p, ?1, ?2, -p, ?3, ?4, '', ?5, ?6, ?7, ?8, '{}', '[]', ?9, ?10, ?11 FROM (SELECT COALESCE(MAX(position), 0) + 1 AS p FROM event_stream)";

/// The decision on request id `?3` of aggregate (`?4` tenant, `?1` name, `?2` id): the row
/// that holds its key, an appended stream (version from 1 up) or a rejection (a negative
/// version). The tenant leads the key: another tenant's decision is another key (SPEC TN-1).
const FIND_DECISION: &str = "SELECT version, stream_id, command_id, create_time, fingerprint, error_code, error_msg, decided_on_version FROM event_stream WHERE tenant_id = ?4 AND aggregate_name = ?1 AND aggregate_id = ?2 AND request_id = ?3";

/// A row when aggregate (`?4` tenant, `?1` name, `?2` id) holds a decision on request id
/// `?3`, none otherwise.
const HOLDS_REQUEST: &str = "SELECT 1 FROM event_stream WHERE tenant_id = ?4 AND aggregate_name = ?1 AND aggregate_id = ?2 AND request_id = ?3";

/// The decision `aggregate_id` holds on `request_id`, if any, read on the read pool.
pub(super) async fn find(
    store: &SqliteStore,
    aggregate_id: &AggregateId,
    request_id: &str,
) -> Result<Option<RequestDecision>, EventStoreError> {
    let (name, id, tenant) = owned_key(aggregate_id);
    let request = request_id.to_owned();
    store
        .reads
        .read(move |connection| {
            connection
                .prepare_cached(FIND_DECISION)?
                .query_row(params![name, id, request, tenant], decode_decision)
                .optional()
        })
        .await
        .map_err(store_error)
}

/// Records `rejection` as the decision on `request_id` of `aggregate_id`, through the writer;
/// a key that holds a decision already is [`EventStoreError::request_decided`].
pub(super) async fn record_rejection(
    store: &SqliteStore,
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
    store.write_history(job, answer).await
}

/// Inserts `rejection` ([`INSERT_REJECTION`]) on the writer's connection, inside its
/// transaction. The error is SQLite's, for the writer to classify.
pub(crate) fn insert_rejection(
    connection: &Connection,
    rejection: &Rejection,
) -> rusqlite::Result<()> {
    let (aggregate, record) = (&rejection.aggregate_id, &rejection.record);
    connection
        .prepare_cached(INSERT_REJECTION)?
        .execute(params![
            aggregate.aggregate_name,
            aggregate.id,
            aggregate.context_name,
            aggregate.tenant_id,
            rejection.request_id,
            record.command_id,
            record.fingerprint,
            record.create_time,
            record.error_code.as_str(),
            record.error_msg,
            i64::try_from(record.version).unwrap_or(i64::MAX),
        ])?;
    Ok(())
}

/// Whether `row`'s aggregate holds a decision on its request id, a stream or a rejection
/// ([`HOLDS_REQUEST`]), read in the writer's transaction (asked after a version conflict, so
/// that a replayed request is reported as the duplicate it is, SPEC ES-4).
pub(crate) fn holds_request(connection: &Connection, row: &StreamRow) -> rusqlite::Result<bool> {
    connection
        .prepare_cached(HOLDS_REQUEST)
        .and_then(|mut statement| {
            statement.exists(params![
                row.aggregate_name,
                row.aggregate_id,
                row.request_id,
                row.tenant_id
            ])
        })
}

/// Decodes a row of [`FIND_DECISION`]: an appended stream (version from 1 up) or a recorded
/// rejection (a negative version). A row that makes no decision (version 0, a stream with a
/// rejection's columns, a rejection without them) is an error, never taken for "no
/// decision".
fn decode_decision(row: &Row<'_>) -> rusqlite::Result<RequestDecision> {
    let corrupt = |index: usize, message: &str| {
        rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Null,
            Box::new(text_error(message.to_owned())),
        )
    };
    let version: i64 = row.get(0)?;
    let command_id: String = row.get(2)?;
    let create_time: i64 = row.get(3)?;
    let fingerprint: String = row.get(4)?;
    let error_code: Option<String> = row.get(5)?;
    match u64::try_from(version) {
        Ok(0) => Err(corrupt(0, "a request id is held at version 0")),
        Ok(version) => match error_code {
            Some(_) => Err(corrupt(
                5,
                "an appended stream carries a rejection's error code",
            )),
            None => Ok(RequestDecision::Appended(RequestRecord {
                stream_id: row.get(1)?,
                version,
                command_id,
                create_time,
                fingerprint,
            })),
        },
        Err(_) => {
            let code = error_code.ok_or_else(|| corrupt(5, "a rejection has no error code"))?;
            let error_msg: Option<String> = row.get(6)?;
            let decided_on: Option<i64> = row.get(7)?;
            let decided_on = decided_on
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(|| {
                    corrupt(
                        7,
                        "a rejection has no decided-on version, or a negative one",
                    )
                })?;
            let Ok(error_code) = code.parse::<ErrorCode>();
            Ok(RequestDecision::Rejected(RejectionRecord {
                command_id,
                fingerprint,
                error_code,
                error_msg: error_msg.ok_or_else(|| corrupt(6, "a rejection has no message"))?,
                version: decided_on,
                create_time,
            }))
        }
    }
}

#[async_trait]
impl RequestLog for SqliteStore {
    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        find(self, aggregate_id, request_id).await
    }

    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        record_rejection(self, aggregate_id, request_id, rejection).await
    }
}
