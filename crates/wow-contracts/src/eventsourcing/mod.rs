//! Event sourcing: the event store as five narrow traits and their bundle, the snapshot
//! store, the global feed, their in-memory references, forwarding bases and recording
//! wrappers.

#[macro_use]
mod methods;

mod decorator;
mod error;
mod event_store;
mod feed;
mod gated;
mod health;
mod history;
mod in_memory;
mod key_index;
pub(crate) mod recording;
mod rename;
mod request_log;
mod schema_status;
mod snapshot;
mod stream_queries;

pub use decorator::{EventStoreDecorator, SnapshotStoreDecorator};
pub use error::{ConditionFailed, EventStoreError, KeyTaken, RejectedStream, SnapshotStoreError};
pub use event_store::{
    check_appendable, check_claimable, check_conditions, check_deadline_changes, check_key_changes,
    check_rejectable, check_time_range, check_version_range, AppendChanges, EventStore,
};
pub use feed::{EventFeed, FeedEntry, GlobalPosition, ParseGlobalPositionError};
pub use gated::GatedEventStore;
pub use health::{ConnectionUse, StoreCheck, StoreHealth};
pub use history::History;
pub use in_memory::{InMemoryEventStore, InMemorySnapshotStore};
pub use key_index::{KeyIndex, KeysToClaim};
pub use recording::{
    EventStoreMethod, RecordingEventStore, RecordingSnapshotStore, SnapshotStoreMethod,
};
pub use rename::{
    check_rename, AggregateRename, AggregateRenames, InMemoryRenames, RenameError, RenamedRows,
};
pub use request_log::RequestLog;
pub use schema_status::{PendingMigration, SchemaStatus};
pub use snapshot::{Snapshot, SnapshotStore};
pub use stream_queries::{stream_document, StreamQueries, TenantStreams};
