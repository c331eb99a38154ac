//! Aggregates whose history this code cannot apply (SPEC PX-1), kept out of the command path
//! until the cause is fixed.
//!
//! A processing node quarantines an aggregate when rebuilding its state fails in a way a retry
//! cannot cure: the aggregate's `apply` panicked (or overflowed) on a stream, or a stream does
//! not replay at all ([`AggregateError::unappliable_history`](wow_model::aggregate::AggregateError::unappliable_history)).
//! From then on every command to it is answered at once, without loading its history again:
//! a poison pill costs one failed load, not one per command, and never a worker.
//!
//! # Lifting a quarantine
//!
//! The registry lives in memory, so a process restart lifts every quarantine: a restart after
//! the code (or the stored history) was fixed is the ordinary way out, and a restart without
//! a fix quarantines the aggregate again on its first command, after one failed load. Within
//! a process, a quarantine is also lifted when a retry of its compensation record (consumer
//! [`AGGREGATE_PROCESSOR`](wow_contracts::compensation::AGGREGATE_PROCESSOR), through
//! `POST /compensation/failures/{id}/retry` or the scheduler's backoff) loads the aggregate
//! without a failure, for example after an operator repaired the stored stream.
//!
//! # Concurrency
//!
//! A cloneable handle over a std mutex; every method is synchronous and holds the lock only
//! for the map operation. Clones share one registry.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use wow_model::aggregate_id::AggregateId;

/// One quarantined aggregate: which one, the version of the stream that could not be
/// applied, what went wrong, and since when.
///
/// In JSON (as `/health` shows it): `contextName`, `aggregateName`, `aggregateId`,
/// `tenantId`, `version`, `message`, `since`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantinedAggregate {
    /// The aggregate, with the tenant the command that found the fault named.
    #[serde(flatten)]
    pub aggregate_id: AggregateId,
    /// The version of the stream whose `apply` failed.
    pub version: u64,
    /// What went wrong (the panic's message), for a person.
    pub message: String,
    /// When the aggregate was first quarantined, in milliseconds since the Unix epoch.
    pub since: i64,
}

/// The registry of quarantined aggregates of one process: a small cloneable handle.
///
/// Keyed by tenant, aggregate name and id, so one tenant's quarantine never blocks another
/// tenant's aggregate of the same id.
#[derive(Debug, Clone, Default)]
pub struct QuarantinedAggregates {
    inner: Arc<Mutex<BTreeMap<Key, QuarantinedAggregate>>>,
}

type Key = (String, String, String);

fn key(aggregate_id: &AggregateId) -> Key {
    (
        aggregate_id.tenant_id.clone(),
        aggregate_id.aggregate_name.clone(),
        aggregate_id.id.clone(),
    )
}

impl QuarantinedAggregates {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<Key, QuarantinedAggregate>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Quarantines `aggregate_id` at `now`: its stream at `version` cannot be applied, for
    /// the reason `message`. An aggregate already quarantined keeps its `since` and takes the
    /// new version and message. Returns the record as it now stands.
    pub fn quarantine(
        &self,
        aggregate_id: &AggregateId,
        version: u64,
        message: impl Into<String>,
        now: i64,
    ) -> QuarantinedAggregate {
        let message = message.into();
        let mut quarantined = self.lock();
        let record = quarantined
            .entry(key(aggregate_id))
            .and_modify(|record| {
                record.version = version;
                record.message.clone_from(&message);
            })
            .or_insert_with(|| QuarantinedAggregate {
                aggregate_id: aggregate_id.clone(),
                version,
                message: message.clone(),
                since: now,
            });
        record.clone()
    }

    /// The quarantine of `aggregate_id`, if it is quarantined.
    pub fn get(&self, aggregate_id: &AggregateId) -> Option<QuarantinedAggregate> {
        self.lock().get(&key(aggregate_id)).cloned()
    }

    /// Lifts the quarantine of `aggregate_id`, returning it; `None` if it was not quarantined.
    /// The next command loads the aggregate from history again.
    pub fn lift(&self, aggregate_id: &AggregateId) -> Option<QuarantinedAggregate> {
        self.lock().remove(&key(aggregate_id))
    }

    /// Lifts every quarantine, as a process restart does.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Every quarantined aggregate, by tenant, aggregate name and id.
    pub fn list(&self) -> Vec<QuarantinedAggregate> {
        self.lock().values().cloned().collect()
    }

    /// How many aggregates are quarantined.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no aggregate is quarantined.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(tenant: &str) -> AggregateId {
        AggregateId::new("bank", "account", "a", tenant)
    }

    #[test]
    fn quarantines_per_tenant_keeps_the_first_time_and_lifts() {
        let registry = QuarantinedAggregates::new();
        let clone = registry.clone();
        registry.quarantine(&id("t1"), 2, "boom", 10);
        assert!(clone.get(&id("t2")).is_none(), "another tenant's aggregate");
        let again = clone.quarantine(&id("t1"), 3, "boom again", 20);
        assert_eq!((again.version, again.since), (3, 10));
        assert_eq!(registry.len(), 1);
        assert_eq!(
            registry.lift(&id("t1")).map(|q| q.message),
            Some("boom again".to_owned())
        );
        assert!(clone.is_empty());
    }

    #[test]
    fn serializes_the_aggregate_flat() {
        let record = QuarantinedAggregate {
            aggregate_id: id("t1"),
            version: 2,
            message: "boom".into(),
            since: 5,
        };
        assert_eq!(
            serde_json::to_value(&record).unwrap(),
            serde_json::json!({"contextName": "bank", "aggregateName": "account",
                "aggregateId": "a", "tenantId": "t1", "version": 2, "message": "boom", "since": 5})
        );
    }
}
