//! What the consumers that fold streams into rows (views, multi-stream views, outboxes) have
//! in common: which streams are theirs, and how a stream that does not decode and a row
//! update that fails are reported.

use wow_core::aggregate::Aggregate;
use wow_core::event::{ConsumerError, DomainEventStream, ProcessError};
use wow_core::view::ViewRow;
use wow_core::ErrorCode;

/// Whether `stream` is one of the aggregate type `A`'s (same context, same name).
pub(crate) fn of_aggregate<A: Aggregate>(stream: &DomainEventStream) -> bool {
    let named = A::named_aggregate();
    stream.aggregate_id.aggregate_name == named.aggregate_name
        && stream.aggregate_id.context_name == named.context_name
}

/// `IllegalState`: `stream` does not decode into the events `consumer` (for instance
/// `view accounts`) reads.
pub(crate) fn undecodable(
    consumer: std::fmt::Arguments<'_>,
    stream: &DomainEventStream,
    error: impl std::fmt::Display,
) -> ConsumerError {
    ConsumerError::new(
        ErrorCode::IllegalState,
        format!("{consumer}: stream {} does not decode: {error}", stream.id),
    )
}

/// A row's update that failed: `ServiceUnavailable` when the store failed (the stream is
/// retried), `IllegalState` when the consumer's own work did.
pub(crate) fn update_failed(error: ProcessError) -> ConsumerError {
    let code = match &error {
        ProcessError::Store(_) => ErrorCode::ServiceUnavailable,
        _ => ErrorCode::IllegalState,
    };
    ConsumerError::new(code, error.to_string())
}

/// A row's state and version as stored, or `S`'s default at version 0 when there is no row.
pub(crate) fn stored_state<S>(current: Option<ViewRow>) -> Result<(S, u64), serde_json::Error>
where
    S: serde::de::DeserializeOwned + Default,
{
    Ok(match current {
        Some(row) => (serde_json::from_value::<S>(row.state)?, row.version),
        None => (S::default(), 0),
    })
}
