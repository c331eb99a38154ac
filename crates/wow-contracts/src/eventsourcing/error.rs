//! What an event store or snapshot store can fail with.

use wow_model::aggregate::VersionCondition;
use wow_model::aggregate_id::AggregateId;
use wow_model::error::BoxError;
use wow_model::error_code::ErrorCode;
use wow_model::unique_key::KeyHolder;

/// The ids of a stream an append rejected, so that the caller can tell which attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedStream {
    /// The aggregate the stream was for.
    pub aggregate_id: AggregateId,
    /// The rejected stream's id.
    pub stream_id: String,
    /// The rejected stream's request id.
    pub request_id: String,
    /// The rejected stream's command id.
    pub command_id: String,
    /// The version the rejected stream asked for.
    pub version: u64,
}

impl RejectedStream {
    /// The ids of `stream`.
    pub fn of(stream: &wow_model::event::DomainEventStream) -> Self {
        Self {
            aggregate_id: stream.aggregate_id.clone(),
            stream_id: stream.id.clone(),
            request_id: stream.request_id.clone(),
            command_id: stream.command_id.clone(),
            version: stream.version,
        }
    }
}

/// A claim an append could not take: the key, and the aggregate that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTaken {
    /// The stream the append was refused for.
    pub stream: RejectedStream,
    /// The key, and who holds it (another aggregate of the same tenant).
    pub holder: KeyHolder,
}

/// A condition an append was refused on (SPEC DM-5): the aggregate the decision read had
/// moved from the version read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionFailed {
    /// The stream the append was refused for.
    pub stream: RejectedStream,
    /// The condition that no longer held.
    pub condition: VersionCondition,
    /// The version the aggregate read was at when the append was refused.
    pub actual: u64,
}

/// Why an [`EventStore`](crate::eventsourcing::EventStore) operation failed.
///
/// The three conflicts are decided by the store's own atomic constraints (SPEC ES-1); a
/// rejected append leaves nothing behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventStoreError {
    /// The aggregate already holds a decision on this request id (a stream, or a recorded
    /// rejection, SPEC ID-6): the intent was decided before. Look it up with `find_decision`
    /// to learn the original outcome; do not resend it under a new request id.
    #[error("aggregate {} already holds request id `{}`", .0.aggregate_id, .0.request_id)]
    DuplicateRequestId(Box<RejectedStream>),
    /// The version is taken: the decision used stale state. Reload, decide again, and only
    /// then retry (never bump the version blindly, SPEC ES-3).
    #[error("version {} of aggregate {} is taken", .0.version, .0.aggregate_id)]
    EventVersionConflict(Box<RejectedStream>),
    /// A create (version 1) named an aggregate that exists: a business conflict when the
    /// request id differs (SPEC ES-4).
    #[error("aggregate {} already exists", .0.aggregate_id)]
    DuplicateAggregateId(Box<RejectedStream>),
    /// The append would claim a unique key another aggregate of its tenant holds (SPEC
    /// DM-1): nothing was written, neither the stream nor any of its key changes. The holder
    /// is in [`KeyTaken::holder`], for the process; the message names the key only, since
    /// it may reach a caller that must not learn another owner's aggregate (SPEC TN-2).
    #[error("{} is held by another aggregate", .0.holder.key)]
    DuplicateKey(Box<KeyTaken>),
    /// The decision read another aggregate that has moved since (SPEC DM-5): nothing was
    /// written. Decide again on fresh state, as for a version conflict (SPEC ES-3).
    #[error("aggregate {} moved from version {} to {} since the decision read it", .0.condition.aggregate_id, .0.condition.version, .0.actual)]
    ConditionFailed(Box<ConditionFailed>),
    /// An argument is out of range (an empty stream, version 0, a head after the tail, ...);
    /// nothing was read or written.
    #[error("illegal argument: {0}")]
    IllegalArgument(String),
    /// The store could not be reached; whether an append took effect is unknown until the
    /// store answers again.
    #[error("event store unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The store failed in an unexpected way.
    #[error("event store failed: {0}")]
    Internal(#[source] BoxError),
    /// A query was not answered within the store's bounds (its time budget, the tenant's
    /// share of query connections); nothing was written.
    #[error(transparent)]
    QueryRefused(#[from] wow_model::query::QueryRefusal),
}

impl EventStoreError {
    /// `DuplicateRequestId` for `stream`.
    pub fn duplicate_request_id(stream: &wow_model::event::DomainEventStream) -> Self {
        EventStoreError::DuplicateRequestId(Box::new(RejectedStream::of(stream)))
    }

    /// `DuplicateRequestId` for a rejection of `request_id` that found the key taken; the
    /// rejected "stream" has no id and the version the rejection was decided on.
    pub fn request_decided(
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &wow_model::eventsourcing::RejectionRecord,
    ) -> Self {
        EventStoreError::DuplicateRequestId(Box::new(RejectedStream {
            aggregate_id: aggregate_id.clone(),
            stream_id: String::new(),
            request_id: request_id.to_owned(),
            command_id: rejection.command_id.clone(),
            version: rejection.version,
        }))
    }

    /// `ConditionFailed` for `stream`, whose `condition` found the aggregate at `actual`.
    pub fn condition_failed(
        stream: &wow_model::event::DomainEventStream,
        condition: &VersionCondition,
        actual: u64,
    ) -> Self {
        EventStoreError::ConditionFailed(Box::new(ConditionFailed {
            stream: RejectedStream::of(stream),
            condition: condition.clone(),
            actual,
        }))
    }

    /// `DuplicateKey` for `stream`, whose claim of `holder.key` found it held.
    pub fn key_taken(stream: &wow_model::event::DomainEventStream, holder: KeyHolder) -> Self {
        EventStoreError::DuplicateKey(Box::new(KeyTaken {
            stream: RejectedStream::of(stream),
            holder,
        }))
    }

    /// The conflict of `stream` at a taken version: `DuplicateAggregateId` for a create
    /// (version 1), `EventVersionConflict` otherwise.
    pub fn version_taken(stream: &wow_model::event::DomainEventStream) -> Self {
        let rejected = Box::new(RejectedStream::of(stream));
        if stream.version == 1 {
            EventStoreError::DuplicateAggregateId(rejected)
        } else {
            EventStoreError::EventVersionConflict(rejected)
        }
    }

    /// The error code a result reports for this error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            EventStoreError::DuplicateRequestId(_) => ErrorCode::DuplicateRequestId,
            EventStoreError::EventVersionConflict(_) => ErrorCode::EventVersionConflict,
            EventStoreError::DuplicateAggregateId(_) => ErrorCode::DuplicateAggregateId,
            EventStoreError::DuplicateKey(_) => ErrorCode::DuplicateKey,
            EventStoreError::ConditionFailed(_) => ErrorCode::EventVersionConflict,
            EventStoreError::IllegalArgument(_) => ErrorCode::IllegalArgument,
            EventStoreError::Unavailable(_) => ErrorCode::ServiceUnavailable,
            EventStoreError::Internal(_) => ErrorCode::InternalServerError,
            EventStoreError::QueryRefused(refusal) => refusal.error_code(),
        }
    }

    /// The ids of the rejected stream, for the conflicts.
    pub fn rejected(&self) -> Option<&RejectedStream> {
        match self {
            EventStoreError::DuplicateRequestId(rejected)
            | EventStoreError::EventVersionConflict(rejected)
            | EventStoreError::DuplicateAggregateId(rejected) => Some(rejected),
            EventStoreError::DuplicateKey(taken) => Some(&taken.stream),
            _ => None,
        }
    }
}

/// Why a [`SnapshotStore`](crate::eventsourcing::SnapshotStore) operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotStoreError {
    /// The store could not be reached; the snapshot is an optimisation, so callers may go on
    /// from the event store alone.
    #[error("snapshot store unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The store failed in an unexpected way.
    #[error("snapshot store failed: {0}")]
    Internal(#[source] BoxError),
}

impl SnapshotStoreError {
    /// The error code a result reports for this error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            SnapshotStoreError::Unavailable(_) => ErrorCode::ServiceUnavailable,
            SnapshotStoreError::Internal(_) => ErrorCode::InternalServerError,
        }
    }
}
