//! Identifiers and time, taken through traits so that tests and the simulation control them.
//!
//! Every identifier the framework makes is time-ordered (UUIDv7): random keys in a store's
//! unique indexes cost an embedded database several times its insert rate.

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::{ContextV7, Timestamp, Uuid};

/// Makes the identifiers of commands, streams and events.
///
/// Implementations must return a value never returned before by this generator, and should
/// return values that sort by creation time.
pub trait IdGenerator: Debug + Send + Sync {
    /// A fresh identifier.
    fn next_id(&self) -> String;

    /// Whether this is the process default ([`UuidV7IdGenerator`], what [`new_id`] and the
    /// model's constructors use): then a value made by a constructor already carries one of
    /// its ids, and [`CommandResult::stamped`](crate::command::CommandResult::stamped) keeps
    /// it instead of making a second. Leave it `false` in other generators.
    fn is_process_default(&self) -> bool {
        false
    }
}

/// The default [`IdGenerator`]: UUIDv7 in hyphenated form, ordered by creation time within
/// the process (a shared counter orders ids made in the same millisecond).
#[derive(Debug, Clone, Copy, Default)]
pub struct UuidV7IdGenerator;

impl IdGenerator for UuidV7IdGenerator {
    fn next_id(&self) -> String {
        static CONTEXT: Mutex<ContextV7> = Mutex::new(ContextV7::new());
        let millis = u64::try_from(now_millis()).unwrap_or(0);
        let nanos = u32::try_from((millis % 1000) * 1_000_000).unwrap_or(0);
        let timestamp = Timestamp::from_unix(&CONTEXT, millis / 1000, nanos);
        Uuid::new_v7(timestamp).hyphenated().to_string()
    }

    fn is_process_default(&self) -> bool {
        true
    }
}

/// A fresh time-ordered identifier from the default generator.
pub fn new_id() -> String {
    UuidV7IdGenerator.next_id()
}

/// The wall clock as the framework reads it: milliseconds since the Unix epoch.
pub trait Clock: Debug + Send + Sync {
    /// The current time in milliseconds since the Unix epoch.
    fn now_millis(&self) -> i64;

    /// Whether this is the process default ([`SystemClock`], what [`now_millis`] and the
    /// model's constructors read): see [`IdGenerator::is_process_default`]. Leave it `false`
    /// in other clocks.
    fn is_process_default(&self) -> bool {
        false
    }
}

/// The default [`Clock`]: the operating system's wall clock, read through [`now_millis`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        now_millis()
    }

    fn is_process_default(&self) -> bool {
        true
    }
}

/// The operating system's wall clock in milliseconds since the Unix epoch (0 if the clock is
/// set before 1970), read exactly. Costs a clock read (about 50 ns on this project's machines).
pub fn exact_now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The wall clock in milliseconds since the Unix epoch, at most about a millisecond behind.
///
/// Every command reads the time several times (its message, results, stream, the Bloom
/// filters' rotation); a clock read costs about 50 ns here, more than the rest of a Bloom
/// check. So one background thread, started on first use, stores the time every
/// millisecond, and this reads that value: an atomic load. It never goes backwards.
pub fn now_millis() -> i64 {
    static NOW: OnceLock<&'static AtomicI64> = OnceLock::new();
    NOW.get_or_init(|| {
        let now: &'static AtomicI64 = Box::leak(Box::new(AtomicI64::new(exact_now_millis())));
        let ticker = std::thread::Builder::new()
            .name("wow-coarse-clock".to_owned())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(1));
                now.fetch_max(exact_now_millis(), Ordering::Relaxed);
            });
        if let Err(error) = ticker {
            tracing::warn!(%error, "no coarse-clock thread; time stays at process start");
        }
        now
    })
    .load(Ordering::Relaxed)
}

/// A [`Clock`] that moves only when told: for tests and the simulation.
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicI64);

impl ManualClock {
    /// A clock at `millis`.
    pub fn at(millis: i64) -> Self {
        Self(std::sync::atomic::AtomicI64::new(millis))
    }

    /// Moves the clock forward by `millis`.
    pub fn advance(&self, millis: i64) {
        self.0
            .fetch_add(millis, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_unique_and_time_ordered() {
        let ids: Vec<String> = (0..1000).map(|_| new_id()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted, ids,
            "UUIDv7 ids must be unique and sort in creation order"
        );
    }
}
