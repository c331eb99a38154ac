//! Unique keys across aggregates (SPEC DM-1): a value (an email, a SKU) an aggregate holds
//! in a named key space of its tenant. An aggregate states the keys its state holds
//! ([`Aggregate::unique_keys`](crate::aggregate::Aggregate::unique_keys)); the node hands
//! the difference a decision makes ([`key_changes`]) to the store with the stream, and the
//! store writes both in one atomic write, its unique constraint deciding between two
//! claimants ([`History::append_with`](crate::eventsourcing::History::append_with)).
pub use wow_model::unique_key::{
    check_unique_key, key_changes, KeyChange, KeyClaim, KeyHolder, UniqueKey, MAX_KEY_SPACE_LEN,
    MAX_KEY_VALUE_LEN,
};
