//! A bounded in-memory cache of hot aggregates' states, owned by one processing node.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::{Equivalent, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use wow_core::aggregate::AggregateState;
use wow_core::AggregateId;

const SHARDS: usize = 16;

/// How many states a cache made by [`AggregateCache::default`] keeps.
pub const DEFAULT_CACHE_CAPACITY: usize = 100_000;

type Key = (String, String, String);

/// A [`Key`] borrowed from an [`AggregateId`]: it hashes as the key does, so a look-up
/// copies no id.
#[derive(Hash)]
struct KeyOf<'a>(&'a str, &'a str, &'a str);

impl<'a> KeyOf<'a> {
    fn of(aggregate_id: &'a AggregateId) -> Self {
        Self(
            &aggregate_id.tenant_id,
            &aggregate_id.aggregate_name,
            &aggregate_id.id,
        )
    }
}

impl Equivalent<Key> for KeyOf<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.2 == key.2 && self.1 == key.1 && self.0 == key.0
    }
}

/// The states of one shard. A taken state leaves its slot empty (`None`) so that putting it
/// back finds the slot, with no key to make again.
type Slots<V> = HashMap<Key, Option<V>, RandomState>;

/// States of recently used aggregates, at most about `capacity` of them.
///
/// A state is taken out while a command runs against it and put back after; an aggregate's
/// commands run one at a time on a node (the bus partitions by aggregate), so nothing else
/// needs it meanwhile. Any doubt (a conflict, a failed append) evicts it: the next command
/// reloads from the store.
///
/// A clone shares the states: the node's owner keeps one to
/// [`evict_where`](AggregateCache::evict_where) what the node must no longer trust (a
/// partition that another process may have moved on while this one did not own it).
///
/// What it keeps per aggregate is an [`AggregateState`] unless `V` says otherwise (a
/// consumer's own fold of one aggregate, say).
#[derive(Debug)]
pub struct AggregateCache<V = AggregateState> {
    shards: Arc<[Mutex<Slots<V>>]>,
    per_shard: usize,
    hasher: RandomState,
}

impl<V> Clone for AggregateCache<V> {
    fn clone(&self) -> Self {
        Self {
            shards: self.shards.clone(),
            per_shard: self.per_shard,
            hasher: self.hasher.clone(),
        }
    }
}

impl<V> Default for AggregateCache<V> {
    /// A cache of [`DEFAULT_CACHE_CAPACITY`] states.
    fn default() -> Self {
        Self::new(DEFAULT_CACHE_CAPACITY)
    }
}

impl<V> AggregateCache<V> {
    /// A cache of about `capacity` states (0 disables it).
    pub fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Slots::default())).collect(),
            per_shard: capacity.div_ceil(SHARDS),
            hasher: RandomState::default(),
        }
    }

    fn shard(&self, key: &KeyOf<'_>) -> MutexGuard<'_, Slots<V>> {
        let index = (self.hasher.hash_one(key) % SHARDS as u64) as usize;
        self.shards[index].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the cached state of `aggregate_id` out, if there is one.
    pub fn take(&self, aggregate_id: &AggregateId) -> Option<V> {
        let key = KeyOf::of(aggregate_id);
        self.shard(&key).get_mut(&key).and_then(Option::take)
    }

    /// Puts `state` back as the state of `aggregate_id`, evicting another entry when full.
    pub fn put(&self, aggregate_id: &AggregateId, state: V) {
        if self.per_shard == 0 {
            return;
        }
        let key = KeyOf::of(aggregate_id);
        let mut shard = self.shard(&key);
        if let Some(slot) = shard.get_mut(&key) {
            *slot = Some(state);
            return;
        }
        if shard.len() >= self.per_shard {
            if let Some(victim) = shard.keys().next().cloned() {
                shard.remove(&victim);
            }
        }
        shard.insert(
            (
                aggregate_id.tenant_id.clone(),
                aggregate_id.aggregate_name.clone(),
                aggregate_id.id.clone(),
            ),
            Some(state),
        );
    }

    /// Forgets `aggregate_id`.
    pub fn evict(&self, aggregate_id: &AggregateId) {
        let key = KeyOf::of(aggregate_id);
        self.shard(&key).remove(&key);
    }

    /// Forgets every aggregate for which `evicted(tenant, aggregate name, aggregate id)`
    /// holds; returns how many. Visits every state: for rare events (a partition taken
    /// over), not per command.
    pub fn evict_where(&self, evicted: impl Fn(&str, &str, &str) -> bool) -> usize {
        let mut count = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            shard.retain(|(tenant, name, id), state| {
                let evict = evicted(tenant, name, id);
                count += usize::from(evict && state.is_some());
                !evict
            });
        }
        count
    }

    /// Forgets every aggregate.
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            shard.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(id: &str) -> AggregateId {
        AggregateId::new("bank", "account", id, "t1")
    }

    fn state(version: u64) -> AggregateState {
        AggregateState::new(version, version)
    }

    #[test]
    fn a_taken_state_is_gone_until_it_is_put_back() {
        let cache = AggregateCache::new(100);
        assert!(cache.take(&account("a")).is_none());
        cache.put(&account("a"), state(3));
        assert_eq!(cache.take(&account("a")).map(|s| s.version()), Some(3));
        assert!(cache.take(&account("a")).is_none(), "taken once");
        cache.put(&account("a"), state(4));
        assert_eq!(cache.take(&account("a")).map(|s| s.version()), Some(4));
        // Another tenant's aggregate of the same id is another entry.
        cache.put(&account("b"), state(1));
        assert!(cache
            .take(&AggregateId::new("bank", "account", "b", "t2"))
            .is_none());
    }

    #[test]
    fn a_full_cache_evicts_and_evicting_counts_states_only() {
        let cache = AggregateCache::new(SHARDS);
        for n in 0..10 * SHARDS {
            cache.put(&account(&n.to_string()), state(1));
        }
        let kept: usize = cache
            .shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum();
        assert!(kept <= SHARDS, "{kept} kept");
        // Room enough that `x` and `y` both stay, whichever shards they fall in.
        let cache = AggregateCache::new(100 * SHARDS);
        cache.put(&account("x"), state(1));
        cache.put(&account("y"), state(1));
        assert!(cache.take(&account("y")).is_some());
        // `y` left an empty slot: only `x` is a state to forget.
        assert_eq!(cache.evict_where(|_, _, _| true), 1);
        assert!(cache.take(&account("x")).is_none());
    }
}
