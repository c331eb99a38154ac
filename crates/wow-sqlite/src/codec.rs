//! Streams and snapshots to rows and back.

use rusqlite::Row;
use wow_core::eventsourcing::{RejectionRecord, RequestDecision, RequestRecord, Snapshot};
use wow_core::{AggregateId, DomainEventStream, ErrorCode};

/// The columns of a stream, encoded before it reaches the writer thread so that JSON work
/// happens on the callers' threads.
#[derive(Debug)]
pub(crate) struct StreamRow {
    pub(crate) aggregate_name: String,
    pub(crate) aggregate_id: String,
    pub(crate) version: i64,
    pub(crate) context_name: String,
    pub(crate) tenant_id: String,
    pub(crate) stream_id: String,
    pub(crate) request_id: String,
    pub(crate) command_id: String,
    pub(crate) fingerprint: String,
    pub(crate) create_time: i64,
    pub(crate) header: String,
    pub(crate) body: String,
}

impl StreamRow {
    pub(crate) fn encode(stream: &DomainEventStream) -> Result<Self, serde_json::Error> {
        Ok(Self {
            aggregate_name: stream.aggregate_id.aggregate_name.clone(),
            aggregate_id: stream.aggregate_id.id.clone(),
            version: i64::try_from(stream.version).unwrap_or(i64::MAX),
            context_name: stream.aggregate_id.context_name.clone(),
            tenant_id: stream.aggregate_id.tenant_id.clone(),
            stream_id: stream.id.clone(),
            request_id: stream.request_id.clone(),
            command_id: stream.command_id.clone(),
            fingerprint: stream.fingerprint.clone(),
            create_time: stream.create_time,
            header: serde_json::to_string(&stream.header)?,
            body: serde_json::to_string(&stream.body)?,
        })
    }
}

/// The columns a stream query selects, in this order.
pub(crate) const STREAM_COLUMNS: &str = "aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body";

/// Decodes a row of [`STREAM_COLUMNS`].
pub(crate) fn decode_stream(row: &Row<'_>) -> rusqlite::Result<DomainEventStream> {
    let json = |index: usize, text: String| {
        rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Text,
            Box::new(text_error(text)),
        )
    };
    let header: String = row.get(10)?;
    let body: String = row.get(11)?;
    Ok(DomainEventStream {
        aggregate_id: AggregateId {
            aggregate_name: row.get(0)?,
            id: row.get(1)?,
            context_name: row.get(3)?,
            tenant_id: row.get(4)?,
        },
        version: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
        id: row.get(5)?,
        request_id: row.get(6)?,
        command_id: row.get(7)?,
        fingerprint: row.get(8)?,
        create_time: row.get(9)?,
        header: serde_json::from_str(&header).map_err(|e| json(10, e.to_string()))?,
        body: serde_json::from_str(&body).map_err(|e| json(11, e.to_string()))?,
    })
}

fn text_error(text: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, text)
}

/// The columns [`decode_decision`] reads, in this order.
pub(crate) const DECISION_COLUMNS: &str = "version, stream_id, command_id, create_time, fingerprint, error_code, error_msg, decided_on_version";

/// Decodes a row of [`DECISION_COLUMNS`]: an appended stream (version from 1 up) or a
/// recorded rejection (a negative version). A row that makes no decision (version 0, a
/// stream with a rejection's columns, a rejection without them) is an error, never taken for
/// "no decision".
pub(crate) fn decode_decision(row: &Row<'_>) -> rusqlite::Result<RequestDecision> {
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

/// Decodes `aggregate_name, aggregate_id, context_name, tenant_id, version, state,
/// snapshot_time, state_version`.
pub(crate) fn decode_snapshot(row: &Row<'_>) -> rusqlite::Result<Snapshot> {
    let state: String = row.get(5)?;
    Ok(Snapshot {
        aggregate_id: AggregateId {
            aggregate_name: row.get(0)?,
            id: row.get(1)?,
            context_name: row.get(2)?,
            tenant_id: row.get(3)?,
        },
        version: u64::try_from(row.get::<_, i64>(4)?).unwrap_or(0),
        state: serde_json::from_str(&state).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                5,
                rusqlite::types::Type::Text,
                Box::new(text_error(e.to_string())),
            )
        })?,
        snapshot_time: row.get(6)?,
        state_version: row.get(7)?,
    })
}
