//! When failed executions are retried.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::compensation::ExecutionFailedStatus;

/// Exponential backoff with a limit: the `n`-th failure is retried after
/// `min(initial_backoff × 2^(n-1), max_backoff)`, until `max_attempts` executions failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrySpec {
    /// Executions (the first included) after which the scheduler stops retrying.
    pub max_attempts: u32,
    /// The wait after the first failure, in milliseconds.
    pub initial_backoff_ms: u64,
    /// The longest wait, in milliseconds.
    pub max_backoff_ms: u64,
}

impl Default for RetrySpec {
    fn default() -> Self {
        Self {
            max_attempts: 10,
            initial_backoff_ms: 1_000,
            max_backoff_ms: 5 * 60 * 1_000,
        }
    }
}

impl RetrySpec {
    /// The wait after the `attempts`-th failure.
    pub fn backoff(&self, attempts: u32) -> Duration {
        let doubling = 1_u64
            .checked_shl(attempts.saturating_sub(1))
            .unwrap_or(u64::MAX);
        Duration::from_millis(
            self.initial_backoff_ms
                .saturating_mul(doubling)
                .min(self.max_backoff_ms),
        )
    }

    /// The status and next retry time of a record after its `attempts`-th failure at `now`.
    pub fn after_failure(&self, attempts: u32, now: i64) -> (ExecutionFailedStatus, Option<i64>) {
        if attempts >= self.max_attempts {
            return (ExecutionFailedStatus::Exhausted, None);
        }
        let wait = i64::try_from(self.backoff(attempts).as_millis()).unwrap_or(i64::MAX);
        (
            ExecutionFailedStatus::Failed,
            Some(now.saturating_add(wait)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_limit_and_stops_at_max_attempts() {
        let spec = RetrySpec {
            max_attempts: 4,
            initial_backoff_ms: 100,
            max_backoff_ms: 300,
        };
        assert_eq!(spec.backoff(1), Duration::from_millis(100));
        assert_eq!(spec.backoff(2), Duration::from_millis(200));
        assert_eq!(spec.backoff(3), Duration::from_millis(300));
        assert_eq!(spec.backoff(200), Duration::from_millis(300));
        assert_eq!(
            spec.after_failure(1, 1_000),
            (ExecutionFailedStatus::Failed, Some(1_100))
        );
        assert_eq!(
            spec.after_failure(4, 1_000),
            (ExecutionFailedStatus::Exhausted, None)
        );
    }
}
