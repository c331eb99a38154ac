//! The requests a node holds in flight: handed to the bus by its gateway and not yet decided
//! by its processing node (SPEC TO-1).

use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use foldhash::quality::FixedState;
use foldhash::HashMap;

use wow_core::AggregateId;

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
///
/// A send that failed in a way that may still have delivered (the transport failed, the
/// send timed out) is [`unsure`](InFlightRequests::unsure): it stays in flight until the
/// node decides on it, or until the registry's horizon has passed (the bus has delivered it
/// by then or never will), so a look-up in between never says `NONE` for a message the node
/// then appends (found by wow-sim, seed 16).
#[derive(Debug)]
pub struct InFlightRequests {
    shards: Vec<Mutex<HashMap<Key, Flight>>>,
    horizon: Duration,
}

/// The default time an unsure send stays in flight.
pub const DEFAULT_UNSURE_HORIZON: Duration = Duration::from_secs(120);

/// One request's flights.
#[derive(Debug, Default)]
struct Flight {
    /// Sends handed to the bus and not yet decided.
    sent: usize,
    /// Until when a send that may have been delivered counts as in flight.
    unsure_until: Option<Instant>,
}

impl Flight {
    fn is_over(&self, now: Instant) -> bool {
        self.sent == 0 && self.unsure_until.is_none_or(|until| until <= now)
    }
}

impl Default for InFlightRequests {
    fn default() -> Self {
        Self::new()
    }
}

impl InFlightRequests {
    /// An empty registry, with [`DEFAULT_UNSURE_HORIZON`].
    pub fn new() -> Self {
        Self::with_unsure_horizon(DEFAULT_UNSURE_HORIZON)
    }

    /// An empty registry in which an unsure send stays in flight for `horizon` unless the
    /// node decides on it sooner: set it to the longest time the bus may take to deliver.
    pub fn with_unsure_horizon(horizon: Duration) -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            horizon,
        }
    }

    fn shard(&self, key: Key) -> MutexGuard<'_, HashMap<Key, Flight>> {
        // Every update below completes without panicking, so a poisoned lock holds
        // consistent data.
        self.shards[(key % SHARDS as u64) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `request_id` of `aggregate_id` in flight.
    pub fn enter(&self, aggregate_id: &AggregateId, request_id: &str) {
        let key = key(aggregate_id, request_id);
        self.shard(key).entry(key).or_default().sent += 1;
    }

    /// Ends one flight of `request_id` of `aggregate_id`: the node calls it once its
    /// decision is durable (or it failed without one), the gateway when a send surely did
    /// not deliver. A decision also ends an unsure send of the request.
    pub fn leave(&self, aggregate_id: &AggregateId, request_id: &str) {
        let key = key(aggregate_id, request_id);
        let mut shard = self.shard(key);
        if let Some(flight) = shard.get_mut(&key) {
            if flight.sent > 0 {
                flight.sent -= 1;
            } else {
                flight.unsure_until = None;
            }
            if flight.is_over(Instant::now()) {
                shard.remove(&key);
            }
        }
    }

    /// Turns one flight of `request_id` of `aggregate_id` into an unsure one: its send
    /// failed in a way that may still have delivered it.
    pub fn unsure(&self, aggregate_id: &AggregateId, request_id: &str) {
        let key = key(aggregate_id, request_id);
        let mut shard = self.shard(key);
        let flight = shard.entry(key).or_default();
        flight.sent = flight.sent.saturating_sub(1);
        flight.unsure_until = Some(Instant::now() + self.horizon);
    }

    /// Whether `request_id` of `aggregate_id` is in flight here.
    pub fn contains(&self, aggregate_id: &AggregateId, request_id: &str) -> bool {
        let key = key(aggregate_id, request_id);
        let mut shard = self.shard(key);
        match shard.get(&key) {
            Some(flight) if flight.is_over(Instant::now()) => {
                shard.remove(&key);
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// How many requests are in flight.
    pub fn len(&self) -> usize {
        let now = Instant::now();
        self.shards
            .iter()
            .map(|shard| {
                let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
                shard.values().filter(|flight| !flight.is_over(now)).count()
            })
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

    #[tokio::test(start_paused = true)]
    async fn an_unsure_send_stays_in_flight_until_decided_or_past_the_horizon() {
        let registry = InFlightRequests::with_unsure_horizon(Duration::from_secs(10));
        let account = AggregateId::new("bank", "account", "a", "t");
        registry.enter(&account, "r");
        registry.unsure(&account, "r");
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(
            registry.contains(&account, "r"),
            "it may still be delivered"
        );
        registry.leave(&account, "r");
        assert!(!registry.contains(&account, "r"), "the node decided on it");

        registry.enter(&account, "s");
        registry.unsure(&account, "s");
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(!registry.contains(&account, "s"), "past the horizon");
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
