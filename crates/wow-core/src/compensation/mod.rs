//! Event compensation (SPEC DS-4): a consumer's failure on an appended stream is recorded
//! durably — which consumer, which stream and events, the error, the attempts — and retried
//! later, by a scheduler with exponential backoff or by hand, without touching history.
//! An aggregate a processing node quarantined (SPEC PX-1) is recorded the same way, under
//! the consumer [`AGGREGATE_PROCESSOR`].

mod record;
mod retry;
mod scheduler;
mod store;

pub use record::{ExecutionFailed, ExecutionFailedStatus, FailedExecution, AGGREGATE_PROCESSOR};
pub use retry::RetrySpec;
pub use scheduler::{CompensationError, CompensationScheduler, RetryPass};
pub use store::{
    due_order, next_record, succeeded, CompensationStore, FailureQuery, InMemoryCompensationStore,
};
