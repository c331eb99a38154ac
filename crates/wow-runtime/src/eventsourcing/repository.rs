//! Loading an aggregate's state: its snapshot, then the events after it.

use wow_core::aggregate::AggregateRuntime;
use wow_core::aggregate::{AggregateError, AggregateScope, AggregateState};
use wow_core::event::{ConsumerError, DomainEventStream};
use wow_core::eventsourcing::{EventStore, EventStoreError, SnapshotStore};
use wow_core::AggregateId;
use wow_core::ErrorCode;

/// Why an aggregate could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The event store failed.
    #[error(transparent)]
    Store(EventStoreError),
    /// The history does not replay.
    #[error(transparent)]
    Aggregate(AggregateError),
}

impl LoadError {
    /// The error code a result reports for this error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            LoadError::Store(error) => error.error_code(),
            LoadError::Aggregate(error) => error.error_code(),
        }
    }
}

/// The current state of `aggregate_id`: from its snapshot when `snapshots` has a usable one,
/// then every later stream. An aggregate with no history has version 0.
///
/// A snapshot that cannot be read or decoded is skipped (logged): the events alone rebuild
/// the state.
pub async fn load_aggregate(
    runtime: &dyn AggregateRuntime,
    store: &dyn EventStore,
    snapshots: Option<&dyn SnapshotStore>,
    aggregate_id: &AggregateId,
) -> Result<AggregateState, LoadError> {
    let mut state = runtime.initial_state();
    if let Some(snapshots) = snapshots {
        match snapshots.load(aggregate_id).await {
            Ok(Some(snapshot)) => match runtime.restore_state(&snapshot) {
                Ok(restored) => state = restored,
                Err(error) => {
                    tracing::warn!(%aggregate_id, %error, "snapshot ignored; replaying all events")
                }
            },
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%aggregate_id, %error, "snapshot store failed; replaying all events")
            }
        }
    }
    replay(runtime, store, aggregate_id, &mut state, u64::MAX).await?;
    Ok(state)
}

/// Applies to `state` the streams of `aggregate_id` after its version, up to version `to`
/// (as far as the store has them), in order; the streams applied.
pub(crate) async fn replay(
    runtime: &dyn AggregateRuntime,
    store: &dyn EventStore,
    aggregate_id: &AggregateId,
    state: &mut AggregateState,
    to: u64,
) -> Result<Vec<DomainEventStream>, LoadError> {
    let streams = store
        .load(aggregate_id, state.version() + 1, to)
        .await
        .map_err(LoadError::Store)?;
    for stream in &streams {
        runtime.apply(state, stream).map_err(LoadError::Aggregate)?;
    }
    Ok(streams)
}

/// A consumer's failure to replay: the event store's with its own code, a history that does
/// not apply as [`internal`].
pub(crate) fn replay_failed(error: LoadError) -> ConsumerError {
    match error {
        LoadError::Store(error) => ConsumerError::new(error.error_code(), error.to_string()),
        LoadError::Aggregate(error) => internal(error),
    }
}

/// A consumer's failure that is the service's own fault: `InternalServerError`.
pub(crate) fn internal(error: impl std::fmt::Display) -> ConsumerError {
    ConsumerError::new(ErrorCode::InternalServerError, error.to_string())
}

/// The owner and space `aggregate_id` was created for (SPEC TN-2), read from its first stream
/// alone (one stream, never the whole history); `None` when it does not exist in its tenant.
///
/// # Errors
///
/// The event store's, when it cannot be read.
pub async fn recorded_scope(
    store: &dyn EventStore,
    aggregate_id: &AggregateId,
) -> Result<Option<AggregateScope>, EventStoreError> {
    let first = store.load(aggregate_id, 1, 1).await?;
    Ok(first
        .first()
        .filter(|stream| stream.aggregate_id.tenant_id == aggregate_id.tenant_id)
        .map(AggregateScope::of_first_stream))
}
