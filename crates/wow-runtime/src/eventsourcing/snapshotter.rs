//! Saves snapshots of aggregates as their streams are appended (stage `SNAPSHOT`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::eventsourcing::{internal, replay, replay_failed, AggregateCache};
use wow_core::aggregate::AggregateRegistry;
use wow_core::aggregate::AggregateState;
use wow_core::event::ConsumerError;
use wow_core::event::DomainEventStream;
use wow_core::eventsourcing::{EventStore, Snapshot, SnapshotStore};
use wow_core::id::{Clock, SystemClock};

/// When to save a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotStrategy {
    /// After every stream.
    #[default]
    EveryVersion,
    /// After every stream whose version is a multiple of N (N ≥ 1).
    Every(u64),
    /// Never here: another writer keeps the snapshots that loads read (a service with
    /// snapshot queries on reads the materialized snapshots), so no snapshotter runs.
    Never,
}

impl SnapshotStrategy {
    fn due(self, version: u64) -> bool {
        match self {
            SnapshotStrategy::EveryVersion => true,
            SnapshotStrategy::Every(n) => version % n.max(1) == 0,
            SnapshotStrategy::Never => false,
        }
    }
}

/// Folds appended streams into states and saves snapshots by a [`SnapshotStrategy`].
///
/// Keeps recent states in memory; a stream that does not follow the cached state (a gap
/// after a restart, a missed delivery) rebuilds the state from the snapshot store and the
/// event store, so a snapshot always equals a fold of history up to its version.
#[derive(Debug)]
pub struct Snapshotter {
    registry: AggregateRegistry,
    events: Arc<dyn EventStore>,
    snapshots: Arc<dyn SnapshotStore>,
    strategy: SnapshotStrategy,
    cache: AggregateCache,
    clock: Arc<dyn Clock>,
}

impl Snapshotter {
    /// A snapshotter of `registry`'s aggregates, reading `events` and writing `snapshots`.
    pub fn new(
        registry: AggregateRegistry,
        events: Arc<dyn EventStore>,
        snapshots: Arc<dyn SnapshotStore>,
        strategy: SnapshotStrategy,
    ) -> Self {
        Self {
            registry,
            events,
            snapshots,
            strategy,
            cache: AggregateCache::new(10_000),
            clock: Arc::new(SystemClock),
        }
    }

    /// Times snapshots by `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Folds `stream` in and saves a snapshot when the strategy says so; returns whether it
    /// saved one.
    pub async fn handle(&self, stream: &DomainEventStream) -> Result<bool, ConsumerError> {
        let aggregate_id = &stream.aggregate_id;
        let Some(runtime) = self.registry.get(&aggregate_id.aggregate_name) else {
            return Ok(false);
        };
        let state = match self.cache.take(aggregate_id) {
            Some(mut state) if state.version() + 1 == stream.version => {
                runtime.apply(&mut state, stream).map_err(internal)?;
                state
            }
            Some(state) if state.version() == stream.version => state,
            _ => self.rebuild(runtime.as_ref(), stream).await?,
        };
        // A snapshot holds the aggregate's own state only: a deleted one is not snapshotted,
        // so a load replays the deletion from history after the last snapshot before it.
        let due = self.strategy.due(state.version()) && !state.is_deleted();
        let saved = if due {
            self.save(aggregate_id, &state).await?
        } else {
            false
        };
        self.cache.put(aggregate_id, state);
        Ok(saved)
    }

    async fn save(
        &self,
        aggregate_id: &wow_core::AggregateId,
        state: &AggregateState,
    ) -> Result<bool, ConsumerError> {
        let snapshot = Snapshot {
            aggregate_id: aggregate_id.clone(),
            version: state.version(),
            state: state.to_json().map_err(internal)?,
            snapshot_time: self.clock.now_millis(),
            state_version: state.schema_version(),
        };
        self.snapshots
            .save(&snapshot)
            .await
            .map_err(|error| ConsumerError::new(error.error_code(), error.to_string()))
    }

    async fn rebuild(
        &self,
        runtime: &dyn wow_core::aggregate::AggregateRuntime,
        stream: &DomainEventStream,
    ) -> Result<AggregateState, ConsumerError> {
        let aggregate_id = &stream.aggregate_id;
        let mut state = runtime.initial_state();
        if let Ok(Some(snapshot)) = self.snapshots.load(aggregate_id).await {
            if snapshot.version <= stream.version {
                if let Ok(restored) = runtime.restore_state(&snapshot) {
                    state = restored;
                }
            }
        }
        if state.version() < stream.version {
            replay(
                runtime,
                self.events.as_ref(),
                aggregate_id,
                &mut state,
                stream.version,
            )
            .await
            .map_err(replay_failed)?;
        }
        Ok(state)
    }
}
