//! A bounded in-memory cache of hot aggregates' states, owned by one processing node.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use foldhash::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use wow_core::aggregate::AggregateState;
use wow_core::AggregateId;

const SHARDS: usize = 16;

/// How many states a cache made by [`AggregateCache::default`] keeps.
pub const DEFAULT_CACHE_CAPACITY: usize = 100_000;

type Key = (String, String, String);

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
#[derive(Debug, Clone)]
pub struct AggregateCache {
    shards: Arc<[Mutex<HashMap<Key, AggregateState>>]>,
    per_shard: usize,
    hasher: RandomState,
}

impl Default for AggregateCache {
    /// A cache of [`DEFAULT_CACHE_CAPACITY`] states.
    fn default() -> Self {
        Self::new(DEFAULT_CACHE_CAPACITY)
    }
}

impl AggregateCache {
    /// A cache of about `capacity` states (0 disables it).
    pub fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            per_shard: capacity.div_ceil(SHARDS),
            hasher: RandomState::default(),
        }
    }

    fn shard(&self, key: &Key) -> MutexGuard<'_, HashMap<Key, AggregateState>> {
        let index = (self.hasher.hash_one(key) % SHARDS as u64) as usize;
        self.shards[index].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn key(aggregate_id: &AggregateId) -> Key {
        (
            aggregate_id.tenant_id.clone(),
            aggregate_id.aggregate_name.clone(),
            aggregate_id.id.clone(),
        )
    }

    /// Takes the cached state of `aggregate_id` out, if there is one.
    pub fn take(&self, aggregate_id: &AggregateId) -> Option<AggregateState> {
        let key = Self::key(aggregate_id);
        self.shard(&key).remove(&key)
    }

    /// Puts `state` back as the state of `aggregate_id`, evicting another entry when full.
    pub fn put(&self, aggregate_id: &AggregateId, state: AggregateState) {
        if self.per_shard == 0 {
            return;
        }
        let key = Self::key(aggregate_id);
        let mut shard = self.shard(&key);
        if shard.len() >= self.per_shard && !shard.contains_key(&key) {
            if let Some(victim) = shard.keys().next().cloned() {
                shard.remove(&victim);
            }
        }
        shard.insert(key, state);
    }

    /// Forgets `aggregate_id`.
    pub fn evict(&self, aggregate_id: &AggregateId) {
        let key = Self::key(aggregate_id);
        self.shard(&key).remove(&key);
    }

    /// Forgets every aggregate for which `evicted(tenant, aggregate name, aggregate id)`
    /// holds; returns how many. Visits every state: for rare events (a partition taken
    /// over), not per command.
    pub fn evict_where(&self, evicted: impl Fn(&str, &str, &str) -> bool) -> usize {
        let mut count = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            let before = shard.len();
            shard.retain(|(tenant, name, id), _| !evicted(tenant, name, id));
            count += before - shard.len();
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
