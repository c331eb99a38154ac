mod scheduler;

pub use scheduler::{CompensationError, CompensationScheduler, RetryPass};
