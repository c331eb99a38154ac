//! A row of `event_stream` as a stream: the columns that make one, their encoding before an
//! append reaches the writer, and their decoding, shared by the appends and loads, the
//! look-ups, the feed and the queries.

use rusqlite::Row;
use wow_core::{AggregateId, DomainEventStream};

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

/// The columns of `event_stream` that make a stream, in the order [`decode_stream`] reads
/// them and [`StreamRow`] binds them: a macro, so that the statements can be built from it at
/// compile time.
macro_rules! stream_columns {
    () => {
        "aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body"
    };
}
pub(crate) use stream_columns;

/// Decodes the columns of [`stream_columns`] (the first twelve of `row`) into a stream.
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

/// `text` as the error of a column this build cannot read.
pub(crate) fn text_error(text: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, text)
}
