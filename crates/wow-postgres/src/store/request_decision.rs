//! The one decision per request id (SPEC ID-6): an appended stream or a recorded rejection,
//! both rows of `event_stream` under its unique key `event_stream_request_uq`.
//!
//! Why a rejection is a row of `event_stream` rather than of a table of its own: one unique
//! index then holds both kinds of decision, and PostgreSQL itself decides which of an append
//! and a rejection of one request id came first, whichever node wrote them (`schema.rs` has
//! the measurements behind it). A rejection has minus its position as its version (so it
//! never takes a version of history and never collides with another rejection), no stream
//! id, no events, and its own three columns.
//!
//! Why the decision is read `FOR KEY SHARE`, a row lock no write of ours conflicts with: a
//! decision answered (`APPENDED`, a replayed rejection, `DuplicateRequestId`) must be one
//! that a failover cannot undo. A commit on the primary becomes visible there before it is
//! on a synchronous standby when its wait for the standby is cancelled (a fast shutdown
//! during a switchover, an operator's cancel): the primary then shows a stream the next
//! primary never had. Locking the row makes the read a transaction that writes WAL, whose
//! commit waits for the synchronous standby up to a point past the commit of every row it
//! read; so when the read returns, what it read is on the standby too, and when the wait is
//! cut short (the server going down) the read fails `Unavailable` instead of answering. The
//! lock also refuses the read on a standby or a read-only server (SQLSTATE 25006, even when
//! no row is found), so `None` ("no decision recorded, a resend is safe") is never read from
//! a standby that lags behind the primary. What "durable" means with and without a
//! synchronous standby is in docs/decisions.md.

use async_trait::async_trait;
use tokio_postgres::Row;
use wow_core::eventsourcing::{
    check_rejectable, EventStoreError, RejectionRecord, RequestDecision, RequestLog, RequestRecord,
};
use wow_core::{AggregateId, DomainEventStream, ErrorCode};

use super::stream_row::corrupt;
use super::{clamp, PostgresStore};
use crate::error::{store_error, violated_constraint, REQUEST_CONSTRAINT};

/// Records a rejection: `$1` aggregate name, `$2` id, `$3` context, `$4` tenant, `$5` request
/// id, `$6` command id, `$7` fingerprint, `$8` time, `$9` error code, `$10` message, `$11`
/// the version it was decided on. It shares `event_stream_request_uq` with the appended
/// streams, which refuses it when the key holds a decision.
const INSERT_REJECTION: &str = "INSERT INTO event_stream (position, aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body, error_code, error_msg, decided_on_version)
    SELECT p, $1, $2, -p, $3, $4, '', $5, $6, $7, $8, '{}'::JSONB, '[]'::JSONB, $9, $10, $11 FROM nextval(pg_get_serial_sequence('event_stream', 'position')) AS p";

/// The decision on request id `$3` of aggregate (`$4` tenant, `$1` name, `$2` id): the row
/// that holds its key, an appended stream (version from 1 up) or a rejection (a negative
/// version). One read of `event_stream_request_uq`, made durable by its row lock (see the
/// module docs).
const FIND_DECISION: &str = "SELECT version, stream_id, command_id, create_time, fingerprint, error_code, error_msg, decided_on_version FROM event_stream WHERE tenant_id = $4 AND aggregate_name = $1 AND aggregate_id = $2 AND request_id = $3 FOR KEY SHARE";

/// A row when aggregate (`$4` tenant, `$1` name, `$2` id) holds a decision on request id
/// `$3`, none otherwise; durable as [`FIND_DECISION`] is.
const HOLDS_REQUEST: &str = "SELECT 1 FROM event_stream WHERE tenant_id = $4 AND aggregate_name = $1 AND aggregate_id = $2 AND request_id = $3 FOR KEY SHARE";

/// The decision `aggregate_id` holds on `request_id`, if any.
pub(super) async fn find(
    store: &PostgresStore,
    aggregate_id: &AggregateId,
    request_id: &str,
) -> Result<Option<RequestDecision>, EventStoreError> {
    let client = store.client().await?;
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

/// Records `rejection` as the decision on `request_id` of `aggregate_id`; a key that holds a
/// decision already is [`EventStoreError::request_decided`].
pub(super) async fn record_rejection(
    store: &PostgresStore,
    aggregate_id: &AggregateId,
    request_id: &str,
    rejection: &RejectionRecord,
) -> Result<(), EventStoreError> {
    check_rejectable(request_id)?;
    let client = store.client().await?;
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

/// Whether `stream`'s aggregate holds a decision on its request id, a stream or a rejection,
/// read durably (asked after a version conflict, so that a replayed request is reported as
/// the duplicate it is, SPEC ES-4, and after a taken request id, so that a duplicate is
/// answered only for a decision a failover cannot undo).
pub(super) async fn holds_request(
    store: &PostgresStore,
    stream: &DomainEventStream,
) -> Result<bool, EventStoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            HOLDS_REQUEST,
            &[
                &stream.aggregate_id.aggregate_name,
                &stream.aggregate_id.id,
                &stream.request_id,
                &stream.aggregate_id.tenant_id,
            ],
        )
        .await
        .map_err(store_error)?;
    Ok(row.is_some())
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

#[async_trait]
impl RequestLog for PostgresStore {
    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        self.within(async { find(self, aggregate_id, request_id).await })
            .await
    }

    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        self.within(async { record_rejection(self, aggregate_id, request_id, rejection).await })
            .await
    }
}
