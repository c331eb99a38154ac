//! Aggregates from their streams: [`load_aggregate`] (snapshot, then the events after
//! it), the [`AggregateCache`] of recently used states, and the [`Snapshotter`] that writes
//! snapshots by a [`SnapshotStrategy`]; [`claim_declared_keys`], the backfill of unique keys an
//! aggregate type declared after its aggregates were made.

mod cache;
mod key_backfill;
mod repository;
mod snapshotter;

pub use cache::{AggregateCache, DEFAULT_CACHE_CAPACITY};
pub use key_backfill::{
    claim_declared_keys, KeyBackfill, KeyBackfillError, KeyBackfillProgress, KeyConflict,
};
pub(crate) use repository::{internal, replay, replay_failed};
pub use repository::{load_aggregate, recorded_scope, LoadError};
pub use snapshotter::{SnapshotStrategy, Snapshotter};
