//! Conditions on an append (SPEC DM-5): "append only while that aggregate is still at the
//! version the decision read", checked inside the append's transaction.
//!
//! Why locks: under `READ COMMITTED` a check of another aggregate's last version sees what
//! was committed when the check ran, and an append of that aggregate could commit between
//! the check and this transaction's commit (a new row, which no row lock of the check would
//! stop). So the two exclude each other through a transaction-scoped advisory lock per
//! aggregate: a conditional append holds the lock of each aggregate it read in shared mode
//! (conditional appends that read one room run side by side), and an append of an aggregate
//! that some decision reads ([`AppendChanges::read_by_others`]) holds its own in exclusive
//! mode. Every lock is taken first, in one statement, in key order, so two appends never
//! wait on each other's guards in a cycle; the check runs in a later statement, with a
//! snapshot taken once the locks are held.

use deadpool_postgres::GenericClient;
use wow_core::eventsourcing::{AppendChanges, EventStoreError};
use wow_core::{AggregateId, DomainEventStream};
use xxhash_rust::xxh3::Xxh3;

use crate::error::store_error;

/// Takes the advisory locks `$1`, each shared where `$2` says so, in the order given.
const TAKE_GUARDS: &str = "SELECT count(CASE WHEN shared THEN pg_advisory_xact_lock_shared(key) ELSE pg_advisory_xact_lock(key) END) FROM unnest($1::int8[], $2::bool[]) AS guard(key, shared)";

/// The last version of each aggregate (`$1` names, `$2` ids, `$3` tenants), 0 for one with
/// no stream, in the order given.
const HEAD_VERSIONS: &str = "SELECT COALESCE((SELECT MAX(e.version) FROM event_stream e WHERE e.tenant_id = c.tenant_id AND e.aggregate_name = c.aggregate_name AND e.aggregate_id = c.aggregate_id AND e.version > 0), 0) FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS c(aggregate_name, aggregate_id, tenant_id, n) ORDER BY n";

/// The advisory lock key of `aggregate_id`: the same in every process and release.
fn guard_key(aggregate_id: &AggregateId) -> i64 {
    let mut hasher = Xxh3::new();
    for part in [
        "wow.read-guard",
        &aggregate_id.tenant_id,
        &aggregate_id.context_name,
        &aggregate_id.aggregate_name,
        &aggregate_id.id,
    ] {
        hasher.update(part.as_bytes());
        hasher.update(&[0x1f]);
    }
    i64::from_ne_bytes(hasher.digest().to_ne_bytes())
}

/// Whether an append of `stream` with `changes` takes guards at all.
pub(super) fn guards_needed(changes: &AppendChanges) -> bool {
    changes.read_by_others || !changes.conditions.is_empty()
}

/// Takes the guards an append of `stream` with `changes` needs, in `transaction`.
pub(super) async fn take(
    transaction: &impl GenericClient,
    stream: &DomainEventStream,
    changes: &AppendChanges,
) -> Result<(), EventStoreError> {
    let mut guards: Vec<(i64, bool)> = changes
        .conditions
        .iter()
        .map(|condition| (guard_key(&condition.aggregate_id), true))
        .collect();
    if changes.read_by_others {
        guards.push((guard_key(&stream.aggregate_id), false));
    }
    // Exclusive before shared for one key (never both, but a total order all the same).
    guards.sort_unstable();
    guards.dedup_by_key(|(key, _)| *key);
    let (keys, shared): (Vec<i64>, Vec<bool>) = guards.into_iter().unzip();
    let statement = transaction
        .prepare_cached(TAKE_GUARDS)
        .await
        .map_err(store_error)?;
    transaction
        .execute(&statement, &[&keys, &shared])
        .await
        .map_err(store_error)?;
    Ok(())
}

/// Checks `changes`' conditions in `transaction`, once [`take`] holds the guards: the
/// `ConditionFailed` of the first that does not hold.
pub(super) async fn check(
    transaction: &impl GenericClient,
    stream: &DomainEventStream,
    changes: &AppendChanges,
) -> Result<(), EventStoreError> {
    if changes.conditions.is_empty() {
        return Ok(());
    }
    let mut names = Vec::with_capacity(changes.conditions.len());
    let mut ids = Vec::with_capacity(changes.conditions.len());
    let mut tenants = Vec::with_capacity(changes.conditions.len());
    for condition in &changes.conditions {
        names.push(condition.aggregate_id.aggregate_name.as_str());
        ids.push(condition.aggregate_id.id.as_str());
        tenants.push(condition.aggregate_id.tenant_id.as_str());
    }
    let statement = transaction
        .prepare_cached(HEAD_VERSIONS)
        .await
        .map_err(store_error)?;
    let rows = transaction
        .query(&statement, &[&names, &ids, &tenants])
        .await
        .map_err(store_error)?;
    for (condition, row) in changes.conditions.iter().zip(&rows) {
        let head: i64 = row.try_get(0).map_err(store_error)?;
        let head = u64::try_from(head).unwrap_or(0);
        if head != condition.version {
            return Err(EventStoreError::condition_failed(stream, condition, head));
        }
    }
    Ok(())
}
