//! Deadlines (SPEC DM-2): commands scheduled for a time. An aggregate states the deadlines
//! its state holds ([`Aggregate::deadlines`](crate::aggregate::Aggregate::deadlines)); the
//! node hands the difference a decision makes ([`deadline_changes`]) to the store with the
//! stream, which writes the rows in the same atomic write
//! ([`History::append_with`](crate::eventsourcing::History::append_with)). A
//! scheduler fires due rows ([`DeadlineStore::due`]) through the gateway with the request
//! id derived from the schedule, so firing twice takes effect once.
pub use wow_contracts::deadline::{DeadlineStore, DeadlineStoreDecorator, DeadlineTable};
pub use wow_model::deadline::{
    aggregate_hash, backoff, check_deadline_name, deadline_changes, deadline_request_id,
    owner_hash, partition_of, share_across_tenants, Deadline, DeadlineBacklog, DeadlineChange,
    DueQuery, FailedFiring, PartitionFilter, PendingDeadline, ScheduledCommand, HELD,
    MAX_DEADLINE_NAME_LEN,
};
