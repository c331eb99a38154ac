//! One value per backend for every store contract it implements, so a service names its
//! database once, where it is assembled.

use std::sync::Arc;

use crate::compensation::{CompensationStore, InMemoryCompensationStore};
use crate::deadline::DeadlineStore;
use crate::event::{
    ConsumerPositions, EffectJournal, InMemoryConsumerPositions, InMemoryEffectJournal,
    InMemoryParkedStreams, ParkedStreams,
};
use crate::eventsourcing::{
    AggregateRenames, EventStore, InMemoryEventStore, InMemoryRenames, InMemorySnapshotStore,
    SnapshotStore, StoreHealth,
};
use crate::view::{InMemoryViewStore, ViewStore};

/// Every store a service runs on: history, snapshots, consumer positions, compensation
/// records, parked streams, views and the effect journal.
///
/// A backend that implements all the contracts gives one value for all of them
/// ([`Stores::of`]), so each consumer's write and its processed-message record commit in the
/// same database (SPEC DS-2). Clones share the stores.
#[derive(Debug, Clone)]
pub struct Stores {
    /// The event store: history, request ids and rejection records.
    pub events: Arc<dyn EventStore>,
    /// Aggregate snapshots.
    pub snapshots: Arc<dyn SnapshotStore>,
    /// Where each consumer has got to, per aggregate.
    pub positions: Arc<dyn ConsumerPositions>,
    /// Failed consumer executions and their retries (SPEC DS-4).
    pub compensation: Arc<dyn CompensationStore>,
    /// The lanes of streams parked behind a failed one, per consumer and aggregate (SPEC
    /// DS-5).
    pub parked: Arc<dyn ParkedStreams>,
    /// View rows and outboxes, with their processed-message records.
    pub views: Arc<dyn ViewStore>,
    /// The journal of external effects (SPEC DS-2).
    pub effects: Arc<dyn EffectJournal>,
    /// Re-keys an aggregate kept under an old name (an alias) across all of the above.
    pub renames: Arc<dyn AggregateRenames>,
    /// The pending deadlines (SPEC DM-2), written with the event store's appends.
    pub deadlines: Arc<dyn DeadlineStore>,
    /// What the backend says of itself to `/health` (reachable, writable, connections);
    /// `None` for a backend with nothing to say (in memory, embedded).
    pub health: Option<Arc<dyn StoreHealth>>,
}

impl Stores {
    /// One backend value serving every contract.
    pub fn of<S>(store: S) -> Self
    where
        S: EventStore
            + SnapshotStore
            + ConsumerPositions
            + CompensationStore
            + ParkedStreams
            + ViewStore
            + EffectJournal
            + AggregateRenames
            + DeadlineStore
            + Clone
            + 'static,
    {
        Self {
            events: Arc::new(store.clone()),
            snapshots: Arc::new(store.clone()),
            positions: Arc::new(store.clone()),
            compensation: Arc::new(store.clone()),
            parked: Arc::new(store.clone()),
            views: Arc::new(store.clone()),
            effects: Arc::new(store.clone()),
            renames: Arc::new(store.clone()),
            deadlines: Arc::new(store),
            health: None,
        }
    }

    /// Everything in memory, nothing durable: for tests and `memory://`.
    pub fn in_memory() -> Self {
        let renames = InMemoryRenames {
            events: Arc::new(InMemoryEventStore::new()),
            snapshots: Arc::new(InMemorySnapshotStore::new()),
            positions: Arc::new(InMemoryConsumerPositions::default()),
            compensation: Arc::new(InMemoryCompensationStore::default()),
        };
        Self {
            events: renames.events.clone(),
            snapshots: renames.snapshots.clone(),
            positions: renames.positions.clone(),
            compensation: renames.compensation.clone(),
            parked: Arc::new(InMemoryParkedStreams::new()),
            views: Arc::new(InMemoryViewStore::default()),
            effects: Arc::new(InMemoryEffectJournal::default()),
            deadlines: renames.events.clone(),
            renames: Arc::new(renames),
            health: None,
        }
    }

    /// These stores with `health` reporting on the backend in `/health`.
    pub fn with_health(mut self, health: Arc<dyn StoreHealth>) -> Self {
        self.health = Some(health);
        self
    }

    /// These stores with history in `events` instead (the others stay): for a fault-injecting
    /// or counting wrapper around the event store.
    pub fn with_events(mut self, events: Arc<dyn EventStore>) -> Self {
        self.events = events;
        self
    }
}
