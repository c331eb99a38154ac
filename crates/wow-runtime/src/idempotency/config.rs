//! `idempotency.*`: how each Bloom filter is sized and how long it remembers.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The settings of the per-aggregate-type Bloom filters (SPEC RQ-5).
///
/// Defaults: enabled, a 60 s TTL, 1,000,000 expected insertions per generation, a 0.00001
/// false-positive rate. A request id is remembered for at least one TTL and at most two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "snake_case")]
pub struct IdempotencyConfig {
    /// Whether the filter is used at all; when off every request id looks new and the append
    /// is the only duplicate check. Default `true`.
    pub enabled: bool,
    /// How long one generation of the filter collects request ids before it is rotated out.
    /// Default 60 s.
    #[serde(with = "millis")]
    pub ttl: Duration,
    /// Request ids one generation is sized for. Default 1,000,000.
    pub expected_insertions: usize,
    /// The false-positive rate at `expected_insertions`. Default 0.00001.
    pub fpp: f64,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl: Duration::from_secs(60),
            expected_insertions: 1_000_000,
            fpp: 0.00001,
        }
    }
}

impl IdempotencyConfig {
    /// Settings with the filter turned off.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// Checks the settings are usable: a TTL above zero, at least one expected insertion and
    /// a false-positive rate strictly between 0 and 1.
    pub fn validate(&self) -> Result<(), String> {
        if self.ttl.is_zero() {
            return Err("idempotency.ttl must be above zero".to_owned());
        }
        if self.expected_insertions == 0 {
            return Err("idempotency.expected_insertions must be at least 1".to_owned());
        }
        if !(self.fpp > 0.0 && self.fpp < 1.0) {
            return Err("idempotency.fpp must be between 0 and 1 (exclusive)".to_owned());
        }
        Ok(())
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}
