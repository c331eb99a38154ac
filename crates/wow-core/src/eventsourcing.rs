//! Event sourcing: the EventStore and SnapshotStore contracts, their in-memory versions,
//! the decisions they record, the global feed of appended streams ([`GlobalPosition`],
//! [`FeedEntry`]). [`EventStore`] is the bundle of five narrow traits, one per concern a
//! store serves: [`History`] (append and load), [`RequestLog`] (decisions and look-ups),
//! [`EventFeed`], [`StreamQueries`] (Wow's event queries) and [`KeyIndex`] (unique keys). Loading, caching and snapshotting aggregates are `wow-runtime`'s. A wrapper that adds
//! one concern to a store implements [`EventStoreDecorator`] (or
//! [`SnapshotStoreDecorator`]) and states only what it changes; [`RecordingEventStore`]
//! proves in a test that every other method reaches the store it wraps.
pub use wow_contracts::eventsourcing::{
    check_appendable, check_claimable, check_conditions, check_deadline_changes, check_key_changes,
    check_rejectable, check_rename, check_time_range, check_version_range, stream_document,
    AggregateRename, AggregateRenames, AppendChanges, ConditionFailed, ConnectionUse, EventFeed,
    EventStore, EventStoreDecorator, EventStoreError, EventStoreMethod, FeedEntry, GatedEventStore,
    GlobalPosition, History, InMemoryEventStore, InMemoryRenames, InMemorySnapshotStore, KeyIndex,
    KeyTaken, KeysToClaim, ParseGlobalPositionError, PendingMigration, RecordingEventStore,
    RecordingSnapshotStore, RejectedStream, RenameError, RenamedRows, RequestLog, SchemaStatus,
    Snapshot, SnapshotStore, SnapshotStoreDecorator, SnapshotStoreError, SnapshotStoreMethod,
    StoreCheck, StoreHealth, StreamQueries, TenantStreams,
};
pub use wow_model::error::BoxError;
pub use wow_model::eventsourcing::{
    is_recorded_rejection, RejectionRecord, RequestDecision, RequestRecord,
};
