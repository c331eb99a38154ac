mod decorator;
mod error;
mod event_store;
mod feed;
mod gated;
mod health;
mod in_memory;
pub(crate) mod recording;
mod rename;
mod schema_status;
mod snapshot;

pub use decorator::{EventStoreDecorator, SnapshotStoreDecorator};
pub use error::{EventStoreError, KeyTaken, RejectedStream, SnapshotStoreError};
pub use event_store::{
    check_appendable, check_claimable, check_deadline_changes, check_key_changes, check_rejectable,
    check_time_range, check_version_range, stream_document, AppendChanges, EventStore,
};
pub use feed::{FeedEntry, GlobalPosition, ParseGlobalPositionError};
pub use gated::GatedEventStore;
pub use health::{ConnectionUse, StoreCheck, StoreHealth};
pub use in_memory::{InMemoryEventStore, InMemorySnapshotStore};
pub use recording::{
    EventStoreMethod, RecordingEventStore, RecordingSnapshotStore, SnapshotStoreMethod,
};
pub use rename::{check_rename, AggregateRenames, InMemoryRenames, RenameError, RenamedRows};
pub use schema_status::{PendingMigration, SchemaStatus};
pub use snapshot::{Snapshot, SnapshotStore};
