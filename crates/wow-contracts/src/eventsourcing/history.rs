//! History: appending an aggregate's streams and reading them back (SPEC ES-1).

use async_trait::async_trait;

use crate::eventsourcing::{AppendChanges, EventStoreError};
use wow_model::aggregate_id::{AggregateId, NamedAggregate};
use wow_model::event::DomainEventStream;

/// The authoritative history of aggregates, one [`DomainEventStream`] per command: appends,
/// all or nothing, and reads of an aggregate's streams.
///
/// # Cancel safety
///
/// Reads are cancel safe. `append` is not: a future dropped before it completes may or may
/// not have appended its stream;
/// [`RequestLog::find_request`](crate::eventsourcing::RequestLog::find_request)
/// tells which.
#[async_trait]
pub trait History: Send + Sync + std::fmt::Debug {
    /// Appends `stream` as one unit, all its events or none.
    ///
    /// Inside one atomic write, checked in this order: the aggregate already holds the request
    /// id → [`EventStoreError::DuplicateRequestId`]; the version is taken and it is 1 →
    /// [`EventStoreError::DuplicateAggregateId`]; the version is taken →
    /// [`EventStoreError::EventVersionConflict`]. Version 0, no events or an empty request id
    /// are [`EventStoreError::IllegalArgument`]. Returns once the stream is durable.
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError>;

    /// Appends `stream` as [`History::append`](crate::eventsourcing::History::append) does and, in the same atomic write, makes
    /// the changes its decision makes besides history: all or nothing.
    ///
    /// **Keys** (SPEC DM-1): each claim takes its key for the stream's aggregate in the
    /// aggregate's tenant, each release gives it up. Checked after the request id and the
    /// version, a claim of a key another aggregate of the tenant holds fails the whole append
    /// with [`EventStoreError::DuplicateKey`] naming the holder, and the store's own unique
    /// constraint decides between two concurrent claimants. A claim of a key the aggregate
    /// holds, or a release of one it does not, changes nothing. A key
    /// [`check_unique_key`](wow_model::unique_key::check_unique_key) refuses is
    /// [`EventStoreError::IllegalArgument`].
    ///
    /// **Reservations** (SPEC DM-1): a claim of a key with
    /// [`reserved_until`](wow_model::unique_key::UniqueKey::reserved_until) holds it until that time, judged by the
    /// store's clock (the process's in memory and on SQLite, the database's on PostgreSQL),
    /// and not after: a reservation that lapsed holds nothing, another aggregate's claim
    /// takes the key, and [`KeyIndex::find_key`](crate::eventsourcing::KeyIndex::find_key) no longer finds it. A claim of a key the
    /// aggregate holds sets the reservation time to the claim's, so a claim without one
    /// confirms a reservation; once another aggregate took the lapsed key, that confirmation
    /// is refused `DuplicateKey` like any claim of a held key.
    ///
    /// **Deadlines** (SPEC DM-2): each schedule writes the aggregate's row of that name
    /// (replacing one there), each cancel deletes it; a row is then pending for
    /// [`DeadlineStore`](crate::deadline::DeadlineStore). A change
    /// [`check_deadline_changes`](crate::eventsourcing::check_deadline_changes) refuses is `IllegalArgument`.
    ///
    /// With no changes it is [`History::append`]; a store that keeps neither refuses any
    /// with `IllegalArgument`.
    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        if changes.is_empty() {
            return self.append(stream).await;
        }
        Err(EventStoreError::IllegalArgument(
            "this event store keeps no unique keys and no deadlines".to_owned(),
        ))
    }

    /// The streams of `aggregate_id` with versions in `head..=tail`, in version order.
    ///
    /// `head` 0 or `head > tail` is [`EventStoreError::IllegalArgument`].
    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError>;

    /// The streams of `aggregate_id` made in `start..=end` (milliseconds since the Unix
    /// epoch), in version order. `start > end` is [`EventStoreError::IllegalArgument`].
    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError>;

    /// The stream with the highest version of `aggregate_id`, if it has any.
    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError>;

    /// Up to `limit` aggregates of the type `named` (context and name), of every tenant, each
    /// once, in (tenant id, aggregate id) order, starting after `after` (from the first when
    /// `None`): pass the last aggregate of one page to get the next. Two tenants may both
    /// hold an id (SPEC TN-1); each is listed.
    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError>;
}
