mod record;
mod retry;
mod store;

pub use record::{ExecutionFailed, ExecutionFailedStatus, FailedExecution, AGGREGATE_PROCESSOR};
pub use retry::RetrySpec;
pub use store::{
    due_order, next_record, succeeded, CompensationStore, FailureQuery, InMemoryCompensationStore,
};
