//! The [`CompensationScheduler`]: retries recorded consumer failures with exponential
//! backoff, without touching history (SPEC DS-4), and releases quarantined aggregates.

mod scheduler;

pub use scheduler::{CompensationError, CompensationScheduler, RetryPass};
