//! Event sourcing: the EventStore and SnapshotStore contracts and their in-memory versions.

mod cache;
mod decision;
mod error;
mod event_store;
mod gated;
mod in_memory;
mod repository;
mod snapshot;
mod snapshotter;

pub use cache::AggregateCache;
pub use decision::{is_recorded_rejection, RejectionRecord, RequestDecision};
pub use error::{BoxError, EventStoreError, RejectedStream, SnapshotStoreError};
pub use event_store::{
    check_appendable, check_rejectable, check_time_range, check_version_range, EventStore,
    RequestRecord,
};
pub use gated::GatedEventStore;
pub use in_memory::{InMemoryEventStore, InMemorySnapshotStore};
pub use repository::{load_aggregate, LoadError};
pub use snapshot::{Snapshot, SnapshotStore};
pub use snapshotter::{SnapshotStrategy, Snapshotter};
