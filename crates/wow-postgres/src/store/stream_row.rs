//! A row of `event_stream` as a stream: the columns that make one, and their decoding, shared
//! by the appends and loads, the look-ups, the feed and the queries.

use tokio_postgres::Row;
use wow_core::eventsourcing::EventStoreError;
use wow_core::{AggregateId, DomainEventStream};

use crate::error::store_error;

/// The columns of `event_stream` that make a stream, in the order [`decode_stream`] reads
/// them: a macro, so that the statements below can be built from it at compile time.
macro_rules! stream_columns {
    () => {
        "aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body"
    };
}
pub(super) use stream_columns;

/// A row this build cannot read, as [`EventStoreError::Internal`].
pub(super) fn corrupt(message: impl std::fmt::Display) -> EventStoreError {
    EventStoreError::Internal(message.to_string().into())
}

/// Decodes the columns of [`stream_columns`] (the first twelve of `row`) into a stream.
pub(super) fn decode_stream(row: &Row) -> Result<DomainEventStream, EventStoreError> {
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
