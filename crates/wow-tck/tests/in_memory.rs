//! The in-memory reference stores pass the whole conformance suite.

use std::sync::Arc;

use wow_core::eventsourcing::{InMemoryEventStore, InMemorySnapshotStore};

mod event_store {
    use super::*;
    wow_tck::event_store_tck!(|| async { Arc::new(InMemoryEventStore::new()) });
}

mod snapshot_store {
    use super::*;
    wow_tck::snapshot_store_tck!(|| async { Arc::new(InMemorySnapshotStore::new()) });
}
