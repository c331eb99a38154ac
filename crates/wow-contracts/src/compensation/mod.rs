//! Event compensation (SPEC DS-4): a consumer's failure on an appended stream recorded
//! durably (which consumer, which stream, the error, the attempts) for a later retry.

mod record;
mod retry;
mod store;

pub use record::{
    ExecutionFailed, ExecutionFailedStatus, FailedExecution, RecoverableType, AGGREGATE_PROCESSOR,
};
pub use retry::{RetrySpec, RetrySpecJson};
pub use store::{
    due_order, edited, next_record, skipped, succeeded, CompensationStore, FailureQuery,
    InMemoryCompensationStore, RecordEdit,
};
