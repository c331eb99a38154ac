//! The DeadlineStore contract (SPEC DM-2): the pending scheduled commands, as the scheduler
//! and the operators read them. Rows are written with the stream that schedules them
//! ([`History::append_with`](crate::eventsourcing::History::append_with)), or by a saga
//! through [`DeadlineStore::schedule`].

mod decorator;
mod table;

use async_trait::async_trait;

use crate::eventsourcing::EventStoreError;
use wow_model::aggregate_id::AggregateId;
use wow_model::deadline::{
    DeadlineBacklog, DueQuery, FailedFiring, PartitionFilter, PendingDeadline, ScheduledCommand,
};

pub use decorator::DeadlineStoreDecorator;
pub use table::DeadlineTable;

/// The pending deadlines of a store, each a row keyed by its owner aggregate and its name.
///
/// Every backend passes the deadline cases of the conformance suite in `wow-tck`.
#[async_trait]
pub trait DeadlineStore: Send + Sync + std::fmt::Debug {
    /// The rows a scheduler may fire now (SPEC DM-2, DM-6): those whose `fire_at` (their due
    /// time, later after a failed firing) is at or before the query's time (the store's own
    /// clock when it names none), of the query's partitions only, at most
    /// [`per_tenant`](DueQuery::per_tenant) of one tenant and [`limit`](DueQuery::limit) in
    /// all, shared across tenants as [`share_across_tenants`](wow_model::deadline::share_across_tenants)
    /// does, earliest first. Held rows are not due. Its cost follows what it returns and the
    /// number of tenants with rows, never what is pending: a tenant's or partition's backlog
    /// and a row waiting out its retry delay nothing behind them.
    async fn due_rows(&self, query: &DueQuery) -> Result<Vec<PendingDeadline>, EventStoreError>;

    /// When the next row a scheduler of `partitions` (every partition where `None`) may fire
    /// comes due: the earliest `fire_at` of their rows, in milliseconds since the Unix epoch
    /// by the store's clock, held rows not counted; `None` when no row waits. A scheduler
    /// sleeps until then rather than until its next poll, so a deadline fires when it is due,
    /// not up to a poll late. Its cost follows the number of tenants with rows, never what is
    /// pending. The default answers `None`: a store that cannot tell leaves the scheduler to
    /// its poll.
    async fn next_fire_at(
        &self,
        partitions: Option<&PartitionFilter>,
    ) -> Result<Option<i64>, EventStoreError> {
        let _ = partitions;
        Ok(None)
    }

    /// The schedules of up to `limit` rows due at `now`, of every tenant and partition,
    /// earliest first ([`due_rows`](Self::due_rows) with [`DueQuery::at`]).
    async fn due(&self, now: i64, limit: usize) -> Result<Vec<ScheduledCommand>, EventStoreError> {
        let rows = self.due_rows(&DueQuery::at(now, limit)).await?;
        Ok(rows.into_iter().map(|row| row.schedule).collect())
    }

    /// The store's clock, in milliseconds since the Unix epoch: the one clock every process
    /// judges "due" by (the database server's on PostgreSQL, the machine's on an embedded
    /// store).
    async fn now(&self) -> Result<i64, EventStoreError>;

    /// Records a failed firing of the `owner`'s row `name`, if it still carries the
    /// `request_id`: one attempt more, and due again `after` from `from` (the store's now
    /// when `None`, as when the scheduler judges "due" by the store's clock), or held (no
    /// longer fired by the scheduler, see [`HELD`](wow_model::deadline::HELD)) when `after`
    /// is `None` ([`FailedFiring::fire_at`]). The row's attempts after it, or `None` when the
    /// row is gone or was scheduled again since.
    async fn retry_later(&self, failure: FailedFiring<'_>) -> Result<Option<u32>, EventStoreError>;

    /// Makes `owner`'s row `name` due at the store's now, whatever its retry time, and lifts
    /// a hold (an operator's re-fire, a compensation retry): `true` when there was a row.
    async fn fire_now(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError>;

    /// `owner`'s pending rows, by name, with where each firing stands.
    async fn pending_for(
        &self,
        owner: &AggregateId,
    ) -> Result<Vec<PendingDeadline>, EventStoreError>;

    /// Deletes every row named `name` in `tenant`, whoever owns it (a saga's cancel-all):
    /// how many there were.
    async fn cancel_named(&self, tenant: &str, name: &str) -> Result<u64, EventStoreError>;

    /// Deletes the row of `schedule`'s owner and name if it still carries `schedule`'s request
    /// id (the schedule the scheduler fired): `true` when it did. A row scheduled again since,
    /// with another request id, stays.
    async fn fired(&self, schedule: &ScheduledCommand) -> Result<bool, EventStoreError>;

    /// The schedules of `owner`'s pending rows, by name ([`pending_for`](Self::pending_for)).
    async fn scheduled_for(
        &self,
        owner: &AggregateId,
    ) -> Result<Vec<ScheduledCommand>, EventStoreError> {
        let rows = self.pending_for(owner).await?;
        Ok(rows.into_iter().map(|row| row.schedule).collect())
    }

    /// Writes `row` on its own, replacing the owner's row of its name: for a saga, whose
    /// decision is no stream. Idempotent, so a redelivered event writes the same row again.
    async fn schedule(&self, row: &ScheduledCommand) -> Result<(), EventStoreError>;

    /// Deletes `owner`'s row `name` whatever it carries: `true` when there was one.
    async fn cancel(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError>;

    /// How many rows are pending, in every tenant, and the earliest due time.
    async fn backlog(&self) -> Result<DeadlineBacklog, EventStoreError>;
}
