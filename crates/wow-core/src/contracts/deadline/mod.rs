//! The DeadlineStore contract (SPEC DM-2): the pending scheduled commands, as the scheduler
//! and the operators read them. Rows are written with the stream that schedules them
//! ([`EventStore::append_with`](crate::eventsourcing::EventStore::append_with)), or by a saga
//! through [`DeadlineStore::schedule`].

mod table;

use async_trait::async_trait;

use crate::contracts::eventsourcing::EventStoreError;
use crate::model::aggregate_id::AggregateId;
use crate::model::deadline::{DeadlineBacklog, ScheduledCommand};

pub use table::DeadlineTable;

/// The pending deadlines of a store, each a row keyed by its owner aggregate and its name.
///
/// Every backend passes the deadline cases of the conformance suite in `wow-tck`.
#[async_trait]
pub trait DeadlineStore: Send + Sync + std::fmt::Debug {
    /// The rows due at `now` (due time at or before it), earliest first, at most `limit`:
    /// one read of an index on the due time, so its cost follows what is due, not what is
    /// pending.
    async fn due(&self, now: i64, limit: usize) -> Result<Vec<ScheduledCommand>, EventStoreError>;

    /// Deletes `owner`'s row `name` if it still carries `request_id` (the schedule the
    /// scheduler fired): `true` when it did. A row scheduled again since, with another
    /// request id, stays.
    async fn fired(
        &self,
        owner: &AggregateId,
        name: &str,
        request_id: &str,
    ) -> Result<bool, EventStoreError>;

    /// `owner`'s pending rows, by name.
    async fn scheduled_for(
        &self,
        owner: &AggregateId,
    ) -> Result<Vec<ScheduledCommand>, EventStoreError>;

    /// Writes `row` on its own, replacing the owner's row of its name: for a saga, whose
    /// decision is no stream. Idempotent, so a redelivered event writes the same row again.
    async fn schedule(&self, row: &ScheduledCommand) -> Result<(), EventStoreError>;

    /// Deletes `owner`'s row `name` whatever it carries: `true` when there was one.
    async fn cancel(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError>;

    /// How many rows are pending, in every tenant, and the earliest due time.
    async fn backlog(&self) -> Result<DeadlineBacklog, EventStoreError>;
}
