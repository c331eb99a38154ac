//! The request-id check (SPEC RQ-1..RQ-11): a fast Bloom filter per aggregate type, then
//! persisted history when the filter says "maybe seen". Neither is the arbiter of
//! concurrent requests: the EventStore's append is.

mod bloom;
mod checker;
mod config;
mod existence;

pub use bloom::{
    BloomIdempotencyChecker, BloomIdempotencyCheckerProvider, IdempotencyChecker,
    IdempotencyCheckerProvider, NoopIdempotencyChecker,
};
pub use checker::{DefaultRequestIdChecker, RequestIdCheck, RequestIdChecker};
pub use config::IdempotencyConfig;
pub use existence::{
    EventStoreRequestIdExistenceChecker, NoopRequestIdExistenceChecker, RequestIdExistenceChecker,
};
