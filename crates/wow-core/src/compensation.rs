//! Event compensation (SPEC DS-4): a consumer's failure on an appended stream is recorded
//! durably (which consumer, which stream and events, the error, the attempts) and
//! retried later, by `wow-runtime`'s scheduler with exponential backoff or by hand,
//! without touching history. An aggregate a processing node quarantined (SPEC PX-1) is recorded the same
//! way, under the consumer [`AGGREGATE_PROCESSOR`].
pub use wow_contracts::compensation::{
    due_order, edited, next_record, skipped, succeeded, CompensationStore, ExecutionFailed,
    ExecutionFailedStatus, FailedExecution, FailureQuery, InMemoryCompensationStore, RecordEdit,
    RecoverableType, RetrySpec, RetrySpecJson, AGGREGATE_PROCESSOR,
};
