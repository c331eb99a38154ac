//! The EventStore contract, the persistence boundary of SPEC ES-1: the bundle of the narrow
//! traits a store implements, and the checks every backend shares.

use crate::eventsourcing::{
    EventFeed, EventStoreError, History, KeyIndex, RequestLog, StreamQueries,
};
use wow_model::aggregate::VersionCondition;
use wow_model::deadline::{check_deadline_name, DeadlineChange};
use wow_model::event::DomainEventStream;
use wow_model::unique_key::{check_unique_key, KeyChange, UniqueKey};

/// What a decision changes besides its aggregate's history, written in the same atomic write
/// as its stream: the unique keys it claims and releases (SPEC DM-1) and the deadlines it
/// schedules and cancels (SPEC DM-2); and what the append depends on: the other aggregates
/// the decision read, each of which must still be at the version read (SPEC DM-5).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendChanges {
    /// Claims and releases of the aggregate's unique keys.
    pub keys: Vec<KeyChange>,
    /// Deadlines the aggregate schedules (a row per owner and name) and cancels.
    pub deadlines: Vec<DeadlineChange>,
    /// Aggregates of the same tenant that must still be at a version for the append to
    /// take place: checked after the stream's own version and request id, before the keys.
    pub conditions: Vec<VersionCondition>,
    /// Whether other aggregates' decisions read this aggregate under a condition: its
    /// append must exclude a concurrent check of one (a store whose check could otherwise
    /// miss an append committing meanwhile takes a lock for it).
    pub read_by_others: bool,
}

impl AppendChanges {
    /// Whether it schedules a deadline (a cancel alone schedules none).
    pub fn schedules_a_deadline(&self) -> bool {
        self.deadlines
            .iter()
            .any(|change| matches!(change, DeadlineChange::Schedule(_)))
    }

    /// Key changes only.
    pub fn keys(keys: Vec<KeyChange>) -> Self {
        Self {
            keys,
            ..Self::default()
        }
    }

    /// Deadline changes only.
    pub fn deadlines(deadlines: Vec<DeadlineChange>) -> Self {
        Self {
            deadlines,
            ..Self::default()
        }
    }

    /// Whether it changes nothing (the append is then a plain [`History::append`]).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
            && self.deadlines.is_empty()
            && self.conditions.is_empty()
            && !self.read_by_others
    }

    /// Whether it changes nothing and checks nothing: empty, or only
    /// [`read_by_others`](Self::read_by_others), which a store with one writer can ignore.
    pub fn is_empty_but_guard(&self) -> bool {
        self.keys.is_empty() && self.deadlines.is_empty() && self.conditions.is_empty()
    }

    /// Conditions only (SPEC DM-5).
    pub fn conditions(conditions: Vec<VersionCondition>) -> Self {
        Self {
            conditions,
            ..Self::default()
        }
    }
}

/// Checks the deadline changes every store's `append_with` shares: each row is the stream's
/// aggregate's, in its tenant, with a well-formed name and request id.
pub fn check_deadline_changes(
    stream: &DomainEventStream,
    deadlines: &[DeadlineChange],
) -> Result<(), EventStoreError> {
    for change in deadlines {
        check_deadline_name(change.name()).map_err(EventStoreError::IllegalArgument)?;
        if let DeadlineChange::Schedule(row) = change {
            if row.owner != stream.aggregate_id {
                return Err(EventStoreError::IllegalArgument(format!(
                    "deadline `{}` belongs to {}, not to the appending aggregate {}",
                    row.name, row.owner, stream.aggregate_id
                )));
            }
            if row.target.tenant_id != row.owner.tenant_id {
                return Err(EventStoreError::IllegalArgument(format!(
                    "deadline `{}` sends to another tenant",
                    row.name
                )));
            }
            wow_model::aggregate_id::check_request_id(&row.request_id).map_err(|why| {
                EventStoreError::IllegalArgument(format!(
                    "deadline `{}`'s request id {why}",
                    row.name
                ))
            })?;
        }
    }
    Ok(())
}

/// Checks the conditions every store's `append_with` shares: each names another aggregate
/// (the appending one's own version is the append's own check) of the appending
/// aggregate's tenant.
pub fn check_conditions(
    stream: &DomainEventStream,
    conditions: &[VersionCondition],
) -> Result<(), EventStoreError> {
    for condition in conditions {
        if condition.aggregate_id.tenant_id != stream.aggregate_id.tenant_id {
            return Err(EventStoreError::IllegalArgument(format!(
                "an append of {} cannot depend on {}, of another tenant",
                stream.aggregate_id, condition.aggregate_id
            )));
        }
        if condition.aggregate_id == stream.aggregate_id {
            return Err(EventStoreError::IllegalArgument(format!(
                "an append of {} cannot depend on its own aggregate's version: its stream's version is that condition",
                stream.aggregate_id
            )));
        }
    }
    Ok(())
}

/// Checks the arguments every store's `append` shares; a backend calls it before writing.
pub fn check_appendable(stream: &DomainEventStream) -> Result<(), EventStoreError> {
    if stream.version == 0 {
        return Err(EventStoreError::IllegalArgument(
            "a stream's version starts at 1".to_owned(),
        ));
    }
    if stream.body.is_empty() {
        return Err(EventStoreError::IllegalArgument(
            "a stream holds at least one event".to_owned(),
        ));
    }
    if stream.request_id.is_empty() {
        return Err(EventStoreError::IllegalArgument(
            "a stream's request id must not be empty".to_owned(),
        ));
    }
    Ok(())
}

/// Checks the key changes every store's `append_with` shares (after
/// [`check_appendable`]); a backend calls it first.
pub fn check_key_changes(keys: &[KeyChange]) -> Result<(), EventStoreError> {
    for change in keys {
        let (KeyChange::Claim(key) | KeyChange::Release(key)) = change;
        check_unique_key(key).map_err(EventStoreError::IllegalArgument)?;
    }
    Ok(())
}

/// Checks the arguments every store's [`KeyIndex::claim_keys`] shares: a version from 1,
/// and keys [`check_unique_key`] accepts.
pub fn check_claimable(version: u64, keys: &[UniqueKey]) -> Result<(), EventStoreError> {
    if version == 0 {
        return Err(EventStoreError::IllegalArgument(
            "a key is claimed at a version from 1".to_owned(),
        ));
    }
    for key in keys {
        check_unique_key(key).map_err(EventStoreError::IllegalArgument)?;
    }
    Ok(())
}

/// Checks the arguments every store's `record_rejection` shares; a backend calls it first.
pub fn check_rejectable(request_id: &str) -> Result<(), EventStoreError> {
    if request_id.is_empty() {
        return Err(EventStoreError::IllegalArgument(
            "a rejection's request id must not be empty".to_owned(),
        ));
    }
    Ok(())
}

/// Checks an inclusive version range `head..=tail`.
pub fn check_version_range(head: u64, tail: u64) -> Result<(), EventStoreError> {
    if head == 0 {
        return Err(EventStoreError::IllegalArgument(
            "head version starts at 1".to_owned(),
        ));
    }
    if head > tail {
        return Err(EventStoreError::IllegalArgument(format!(
            "head version {head} is after tail version {tail}"
        )));
    }
    Ok(())
}

/// Checks an inclusive time range `start..=end`.
pub fn check_time_range(start: i64, end: i64) -> Result<(), EventStoreError> {
    if start > end {
        return Err(EventStoreError::IllegalArgument(format!(
            "start time {start} is after end time {end}"
        )));
    }
    Ok(())
}

/// Everything a service asks of the store of its aggregates' history, in one object: its
/// [`History`], its [`RequestLog`], its [`EventFeed`], its [`StreamQueries`] and its
/// [`KeyIndex`]. Each concern is a trait of its own, implemented by a backend in the module
/// of the table that keeps it; every type that implements all five is an `EventStore`, and a
/// service takes an `Arc<dyn EventStore>`.
///
/// Every backend passes the conformance suite in `wow-tck` (SPEC ES-2).
pub trait EventStore: History + RequestLog + EventFeed + StreamQueries + KeyIndex {}

impl<T> EventStore for T where
    T: History + RequestLog + EventFeed + StreamQueries + KeyIndex + ?Sized
{
}
