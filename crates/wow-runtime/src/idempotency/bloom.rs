//! The fast, probabilistic half of the request-id check: a Bloom filter per aggregate type.
//!
//! A filter answers "new" or "maybe seen". It is sharded by the request id's hash, and each
//! shard checks and inserts under one lock, so check-and-insert is atomic per request id.
//! It rotates by generations: after one TTL the current generation becomes the previous one
//! and a fresh one starts, so a rotation forgets only ids older than two TTLs, never all at
//! once.

use foldhash::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use std::hash::BuildHasher;

use fastbloom::BloomFilter;
use foldhash::fast::FixedState;

use crate::idempotency::IdempotencyConfig;
use wow_core::id::{Clock, SystemClock};
use wow_core::{AggregateId, NamedAggregate};

/// The fast request-id check of one aggregate type (SPEC RQ-1).
pub trait IdempotencyChecker: Send + Sync + std::fmt::Debug {
    /// Records `request_id` and says whether it is new (`true`) or may have been seen
    /// (`false`). Concurrent calls with one request id: at most one of them sees it as new.
    fn check_and_insert(&self, request_id: &str) -> bool;

    /// Gives back a reservation made by [`check_and_insert`](Self::check_and_insert) whose
    /// command was never sent (SPEC RQ-10): the next check of `request_id` sees it as new.
    fn release(&self, request_id: &str);
}

/// An [`IdempotencyChecker`] that finds every request id new (the filter is disabled).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopIdempotencyChecker;

impl IdempotencyChecker for NoopIdempotencyChecker {
    fn check_and_insert(&self, _request_id: &str) -> bool {
        true
    }

    fn release(&self, _request_id: &str) {}
}

const SHARDS: usize = 16;
const SEED: u64 = 0x5745_575f_5253_5f49;
/// Bits set per request id. The classic optimum for a 0.00001 false-positive rate is 17;
/// 8 costs about a quarter more memory for the same rate and halves the memory touched
/// per check, which is what the check's time is made of.
const HASHES: u32 = 8;

type Filter = BloomFilter<FixedState>;

#[derive(Debug)]
struct Shard {
    current: Filter,
    previous: Option<Filter>,
    generation_start: i64,
    released: HashSet<String>,
}

/// A rotating, sharded Bloom filter: the default [`IdempotencyChecker`].
#[derive(Debug)]
pub struct BloomIdempotencyChecker {
    shards: Vec<Mutex<Shard>>,
    ttl_millis: i64,
    per_shard: usize,
    fpp: f64,
    clock: Arc<dyn Clock>,
}

/// A filter of `HASHES` hashes sized so that `expected` ids give a false-positive rate of
/// `fpp`: m = -k·n / ln(1 - fpp^(1/k)).
fn new_filter(fpp: f64, expected: usize) -> Filter {
    let k = f64::from(HASHES);
    let bits_per_item = -k / (1.0 - fpp.powf(1.0 / k)).ln();
    let bits = (bits_per_item * expected.max(1) as f64).ceil() as usize;
    BloomFilter::with_num_bits(bits.max(64))
        .hasher(FixedState::with_seed(SEED))
        .hashes(HASHES)
}

impl BloomIdempotencyChecker {
    /// A filter sized and timed by `config`, on the system clock.
    pub fn new(config: &IdempotencyConfig) -> Self {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// A filter sized and timed by `config`, on `clock` (tests turn the clock to rotate).
    pub fn with_clock(config: &IdempotencyConfig, clock: Arc<dyn Clock>) -> Self {
        let per_shard = config.expected_insertions.div_ceil(SHARDS);
        let now = clock.now_millis();
        Self {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        current: new_filter(config.fpp, per_shard),
                        previous: None,
                        generation_start: now,
                        released: HashSet::default(),
                    })
                })
                .collect(),
            ttl_millis: i64::try_from(config.ttl.as_millis()).unwrap_or(i64::MAX),
            per_shard,
            fpp: config.fpp,
            clock,
        }
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        // The shard index uses high bits; the filter uses the whole hash for its bits.
        let index = (hash >> 59) as usize % SHARDS;
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn hash(&self, request_id: &str) -> u64 {
        // Every filter shares one seeded hasher, so one source hash serves all generations.
        FixedState::with_seed(SEED).hash_one(request_id)
    }

    fn rotate_if_due(&self, shard: &mut Shard) {
        let now = self.clock.now_millis();
        let elapsed = now.saturating_sub(shard.generation_start);
        if elapsed < self.ttl_millis {
            return;
        }
        let fresh = new_filter(self.fpp, self.per_shard);
        let old = std::mem::replace(&mut shard.current, fresh);
        // After two TTLs with no rotation both generations are stale.
        shard.previous = (elapsed < self.ttl_millis.saturating_mul(2)).then_some(old);
        shard.generation_start = now;
        shard.released.clear();
    }
}

impl IdempotencyChecker for BloomIdempotencyChecker {
    fn check_and_insert(&self, request_id: &str) -> bool {
        let hash = self.hash(request_id);
        let mut shard = self.shard(hash);
        self.rotate_if_due(&mut shard);
        let in_previous = shard
            .previous
            .as_ref()
            .is_some_and(|previous| previous.contains_hash(hash));
        let in_current = shard.current.insert_hash(hash);
        if in_current || in_previous {
            // A released id is new again, once.
            return !shard.released.is_empty() && shard.released.remove(request_id);
        }
        true
    }

    fn release(&self, request_id: &str) {
        let hash = self.hash(request_id);
        self.shard(hash).released.insert(request_id.to_owned());
    }
}

/// Hands out the [`IdempotencyChecker`] of each aggregate type (SPEC RQ-5).
///
/// A custom provider given to the gateway replaces only the gateway's filters; each
/// processing node keeps its own.
pub trait IdempotencyCheckerProvider: Send + Sync + std::fmt::Debug {
    /// The checker of the aggregate type `named`; the same one on every call.
    fn checker(&self, named: &NamedAggregate) -> Arc<dyn IdempotencyChecker>;

    /// The checker of `aggregate_id`'s type: [`checker`](Self::checker) of its
    /// [`NamedAggregate`]. A provider may answer it without making that name (the gateway and
    /// each node ask once per command).
    fn checker_of(&self, aggregate_id: &AggregateId) -> Arc<dyn IdempotencyChecker> {
        self.checker(&aggregate_id.named_aggregate())
    }
}

/// The default provider: one [`BloomIdempotencyChecker`] per aggregate type, made on first
/// use from one [`IdempotencyConfig`], or [`NoopIdempotencyChecker`] when it is disabled.
#[derive(Debug)]
pub struct BloomIdempotencyCheckerProvider {
    config: IdempotencyConfig,
    clock: Arc<dyn Clock>,
    checkers: Mutex<HashMap<NamedAggregate, Arc<dyn IdempotencyChecker>>>,
}

impl BloomIdempotencyCheckerProvider {
    /// A provider of filters configured by `config`, on the system clock.
    pub fn new(config: IdempotencyConfig) -> Self {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// A provider of filters configured by `config`, on `clock`.
    pub fn with_clock(config: IdempotencyConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            config,
            clock,
            checkers: Mutex::new(HashMap::default()),
        }
    }
}

impl IdempotencyCheckerProvider for BloomIdempotencyCheckerProvider {
    fn checker_of(&self, aggregate_id: &AggregateId) -> Arc<dyn IdempotencyChecker> {
        let found = self
            .checkers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .find(|(named, _)| {
                named.aggregate_name == aggregate_id.aggregate_name
                    && named.context_name == aggregate_id.context_name
            })
            .map(|(_, checker)| checker.clone());
        found.unwrap_or_else(|| self.checker(&aggregate_id.named_aggregate()))
    }

    fn checker(&self, named: &NamedAggregate) -> Arc<dyn IdempotencyChecker> {
        let mut checkers = self
            .checkers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(checker) = checkers.get(named) {
            return checker.clone();
        }
        checkers
            .entry(named.clone())
            .or_insert_with(|| {
                if self.config.enabled {
                    Arc::new(BloomIdempotencyChecker::with_clock(
                        &self.config,
                        self.clock.clone(),
                    ))
                } else {
                    Arc::new(NoopIdempotencyChecker)
                }
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use wow_core::id::ManualClock;

    fn config() -> IdempotencyConfig {
        IdempotencyConfig {
            ttl: Duration::from_secs(60),
            expected_insertions: 10_000,
            ..IdempotencyConfig::default()
        }
    }

    #[test]
    fn a_request_id_is_new_once() {
        let checker = BloomIdempotencyChecker::new(&config());
        assert!(checker.check_and_insert("r-1"));
        assert!(!checker.check_and_insert("r-1"));
        assert!(checker.check_and_insert("r-2"));
    }

    #[test]
    fn a_released_request_id_is_new_again_once() {
        let checker = BloomIdempotencyChecker::new(&config());
        assert!(checker.check_and_insert("r-1"));
        checker.release("r-1");
        assert!(
            checker.check_and_insert("r-1"),
            "released reservation is new again"
        );
        assert!(!checker.check_and_insert("r-1"));
    }

    #[test]
    fn rotation_forgets_after_two_generations_not_one() {
        let clock = Arc::new(ManualClock::default());
        let checker = BloomIdempotencyChecker::with_clock(&config(), clock.clone());
        assert!(checker.check_and_insert("old"));
        clock.advance(61_000);
        assert!(
            !checker.check_and_insert("old"),
            "one rotation keeps the previous generation"
        );
        assert!(checker.check_and_insert("fresh"));
        clock.advance(61_000);
        // "old" was re-inserted into the second generation above, so it is still seen.
        assert!(!checker.check_and_insert("fresh"));
        clock.advance(278_000);
        assert!(
            checker.check_and_insert("fresh"),
            "after two idle TTLs everything is forgotten"
        );
    }

    #[test]
    fn concurrent_checks_of_one_request_id_let_one_through() {
        let checker = Arc::new(BloomIdempotencyChecker::new(&config()));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let checker = checker.clone();
                std::thread::spawn(move || checker.check_and_insert("same"))
            })
            .collect();
        let new = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|new| *new)
            .count();
        assert_eq!(new, 1);
    }

    #[test]
    fn false_positive_rate_stays_near_the_configured_rate() {
        let checker = BloomIdempotencyChecker::new(&IdempotencyConfig {
            expected_insertions: 40_000,
            fpp: 0.001,
            ..IdempotencyConfig::default()
        });
        for i in 0..20_000 {
            checker.check_and_insert(&format!("in-{i}"));
        }
        let false_positives = (0..20_000)
            .filter(|i| !checker.check_and_insert(&format!("out-{i}")))
            .count();
        assert!(
            false_positives < 200,
            "{false_positives} false positives in 20000"
        );
    }

    #[test]
    fn provider_keeps_one_checker_per_aggregate_type() {
        let provider = BloomIdempotencyCheckerProvider::new(config());
        let account = NamedAggregate::new("bank", "account");
        assert!(provider.checker(&account).check_and_insert("r"));
        assert!(!provider.checker(&account).check_and_insert("r"));
        assert!(provider
            .checker(&NamedAggregate::new("bank", "transfer"))
            .check_and_insert("r"));
        let disabled = BloomIdempotencyCheckerProvider::new(IdempotencyConfig::disabled());
        assert!(disabled.checker(&account).check_and_insert("r"));
        assert!(disabled.checker(&account).check_and_insert("r"));
    }
}
