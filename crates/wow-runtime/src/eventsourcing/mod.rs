//! Aggregates from their streams: [`load_aggregate`] (snapshot, then the events after
//! it), the [`AggregateCache`] of recently used states, and the [`Snapshotter`] that writes
//! snapshots by a [`SnapshotStrategy`].

mod cache;
mod repository;
mod snapshotter;

pub use cache::{AggregateCache, DEFAULT_CACHE_CAPACITY};
pub use repository::{load_aggregate, recorded_scope, LoadError};
pub use snapshotter::{SnapshotStrategy, Snapshotter};
