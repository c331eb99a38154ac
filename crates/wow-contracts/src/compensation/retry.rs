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

    /// Why this spec cannot be a record's (an operator's edit): `max_attempts` is 0, or the
    /// first wait is longer than the longest; `None` when it can.
    pub fn invalid(&self) -> Option<&'static str> {
        if self.max_attempts == 0 {
            return Some("maxAttempts must be at least 1");
        }
        if self.initial_backoff_ms > self.max_backoff_ms {
            return Some("initialBackoffMs must not exceed maxBackoffMs");
        }
        None
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

/// A record's own spec as its JSON shows it, camelCase as the record's other fields:
/// `{"maxAttempts": n, "initialBackoffMs": ms, "maxBackoffMs": ms}`, every field required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetrySpecJson {
    /// [`RetrySpec::max_attempts`].
    pub max_attempts: u32,
    /// [`RetrySpec::initial_backoff_ms`].
    pub initial_backoff_ms: u64,
    /// [`RetrySpec::max_backoff_ms`].
    pub max_backoff_ms: u64,
}

impl From<RetrySpecJson> for RetrySpec {
    fn from(json: RetrySpecJson) -> Self {
        Self {
            max_attempts: json.max_attempts,
            initial_backoff_ms: json.initial_backoff_ms,
            max_backoff_ms: json.max_backoff_ms,
        }
    }
}

impl From<RetrySpec> for RetrySpecJson {
    fn from(spec: RetrySpec) -> Self {
        Self {
            max_attempts: spec.max_attempts,
            initial_backoff_ms: spec.initial_backoff_ms,
            max_backoff_ms: spec.max_backoff_ms,
        }
    }
}

/// `Option<RetrySpec>` (de)serialised as `Option<RetrySpecJson>`: the record's `retrySpec`.
pub(crate) mod camel_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{RetrySpec, RetrySpecJson};

    /// Writes `spec` in the camelCase shape.
    pub(crate) fn serialize<S: Serializer>(
        spec: &Option<RetrySpec>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        spec.map(RetrySpecJson::from).serialize(serializer)
    }

    /// Reads a spec of the camelCase shape.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<RetrySpec>, D::Error> {
        Ok(Option::<RetrySpecJson>::deserialize(deserializer)?.map(RetrySpec::from))
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

    #[test]
    fn an_operators_spec_needs_an_attempt_and_a_first_wait_within_the_longest() {
        let json: RetrySpecJson = serde_json::from_str(
            r#"{"maxAttempts": 3, "initialBackoffMs": 10, "maxBackoffMs": 100}"#,
        )
        .unwrap();
        assert_eq!(RetrySpec::from(json).invalid(), None);
        let none = RetrySpec {
            max_attempts: 0,
            ..RetrySpec::default()
        };
        assert!(none.invalid().is_some());
        let upside_down = RetrySpec {
            initial_backoff_ms: 2,
            max_backoff_ms: 1,
            ..RetrySpec::default()
        };
        assert!(upside_down.invalid().is_some());
        assert!(serde_json::from_str::<RetrySpecJson>(r#"{"maxAttempts": 3}"#).is_err());
    }
}
