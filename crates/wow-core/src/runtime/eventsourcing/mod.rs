mod cache;
mod repository;
mod snapshotter;

pub use cache::{AggregateCache, DEFAULT_CACHE_CAPACITY};
pub use repository::{load_aggregate, recorded_scope, LoadError};
pub use snapshotter::{SnapshotStrategy, Snapshotter};
