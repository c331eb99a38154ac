//! The requests a node holds in flight: handed to the bus by its gateway and not yet decided
//! by its processing node (SPEC TO-1).

use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};

use foldhash::quality::FixedState;
use foldhash::HashMap;

use crate::AggregateId;

const SHARDS: usize = 16;

/// A request's key: a 64-bit hash of tenant, aggregate and request id, so that entering and
/// leaving allocate nothing on the command path. Two requests whose hashes collide (about
/// one chance in 2^64 per pair in flight) would make one look in flight while the other is.
type Key = u64;

fn key(aggregate_id: &AggregateId, request_id: &str) -> Key {
    FixedState::with_seed(0x5eed_f1a6).hash_one((
        &aggregate_id.tenant_id,
        &aggregate_id.aggregate_name,
        &aggregate_id.id,
        request_id,
    ))
}

/// Request ids between "the gateway is sending it" and "the processing node has decided on
/// it" (appended, rejection recorded, or failed without a decision).
///
/// One registry is shared by a gateway and the processing node behind it in the same
/// process (see `LocalPipeline`). The gateway enters a request before it sends it, and leaves
/// it when the send fails; the node leaves it once its decision is durable. So a look-up that
/// finds a request here answers `IN_FLIGHT`, and one that does not, then finds no decision in
/// the store, may answer `NONE`: a request leaves only after its decision was recorded.
///
/// Entries are counted: two sends of one request id in flight at once stay in flight until
/// both are decided. A redelivered message that leaves twice is harmless.
#[derive(Debug)]
pub struct InFlightRequests {
    shards: Vec<Mutex<HashMap<Key, usize>>>,
}

impl Default for InFlightRequests {
    fn default() -> Self {
        Self::new()
    }
}

impl InFlightRequests {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
        }
    }

    fn shard(&self, key: Key) -> MutexGuard<'_, HashMap<Key, usize>> {
        // Every update below completes without panicking, so a poisoned lock holds
        // consistent data.
        self.shards[(key % SHARDS as u64) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `request_id` of `aggregate_id` in flight.
    pub fn enter(&self, aggregate_id: &AggregateId, request_id: &str) {
        let key = key(aggregate_id, request_id);
        *self.shard(key).entry(key).or_default() += 1;
    }

    /// Ends one flight of `request_id` of `aggregate_id`; call it once its decision is
    /// durable or it failed without one.
    pub fn leave(&self, aggregate_id: &AggregateId, request_id: &str) {
        let key = key(aggregate_id, request_id);
        let mut shard = self.shard(key);
        if let Some(count) = shard.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                shard.remove(&key);
            }
        }
    }

    /// Whether `request_id` of `aggregate_id` is in flight here.
    pub fn contains(&self, aggregate_id: &AggregateId, request_id: &str) -> bool {
        let key = key(aggregate_id, request_id);
        self.shard(key).contains_key(&key)
    }

    /// How many requests are in flight.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }

    /// Whether no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_stays_in_flight_until_every_send_of_it_left() {
        let registry = InFlightRequests::new();
        let account = AggregateId::new("bank", "account", "a", "t");
        registry.enter(&account, "r");
        registry.enter(&account, "r");
        registry.leave(&account, "r");
        assert!(registry.contains(&account, "r"));
        registry.leave(&account, "r");
        registry.leave(&account, "r");
        assert!(!registry.contains(&account, "r"));
        assert!(registry.is_empty());
    }

    #[test]
    fn tenants_and_aggregates_do_not_share_flights() {
        let registry = InFlightRequests::new();
        registry.enter(&AggregateId::new("bank", "account", "a", "t1"), "r");
        assert!(!registry.contains(&AggregateId::new("bank", "account", "a", "t2"), "r"));
        assert!(!registry.contains(&AggregateId::new("bank", "account", "b", "t1"), "r"));
    }
}
