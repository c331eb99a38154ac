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
