//! Consumers driven by the event store's global feed: the store is the source of truth, each
//! partition of the work keeps a durable cursor in it, and a wake-up only says "there is
//! more". What a processor of a distributed deployment runs (docs/distributed.md).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use futures::FutureExt;
use tokio::sync::{watch, Notify};

use crate::event::EventDispatcher;
use wow_core::event::DomainEventStream;
use wow_core::event::{ConsumerPositions, DomainEventBus, EventBusError};
use wow_core::eventsourcing::{EventStore, FeedEntry, GlobalPosition};
use wow_core::panic_message;
use wow_core::{group_by_aggregate, AggregateId};

/// Streams read from the feed at once.
const PAGE: usize = 512;

/// How long a follower with nothing to read waits before it reads again without being woken:
/// streams of its partitions appended by another node (around a takeover) are seen within it.
pub const FEED_POLL: Duration = Duration::from_millis(500);

/// The longest wait after the store failed before the follower reads again.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(2);

/// Which partition an aggregate's streams belong to (the same function the command bus
/// partitions by, so a processor consumes the streams of the partitions it processes).
pub type PartitionOf = Arc<dyn Fn(&AggregateId) -> u32 + Send + Sync>;

/// Runs a dispatcher over the global feed, for the partitions a node owns.
///
/// Each partition has its own cursor, saved in the store under `{name}:{partition}` after
/// its streams up to there were dispatched. A partition that moves to this node is read from
/// its saved cursor on, so the streams its previous owner appended but did not get to are
/// dispatched here. A stream dispatched twice (a crash between the dispatch and the cursor's
/// save, a takeover) is applied once by each consumer's processed-message record (SPEC
/// DS-1, DS-2). One aggregate's streams are dispatched in version order: the feed lists them
/// so (each is appended after the one before it committed).
pub struct FeedFollower {
    dispatcher: Arc<EventDispatcher>,
    store: Arc<dyn EventStore>,
    cursors: Arc<dyn ConsumerPositions>,
    name: String,
    partition_of: PartitionOf,
}

impl std::fmt::Debug for FeedFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedFollower")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl FeedFollower {
    /// A follower dispatching `store`'s feed to `dispatcher`, its cursors in `cursors` under
    /// `name` (one name per deployment).
    pub fn new(
        dispatcher: Arc<EventDispatcher>,
        store: Arc<dyn EventStore>,
        cursors: Arc<dyn ConsumerPositions>,
        name: impl Into<String>,
        partition_of: PartitionOf,
    ) -> Self {
        Self {
            dispatcher,
            store,
            cursors,
            name: name.into(),
            partition_of,
        }
    }

    fn cursor_name(&self, partition: u32) -> String {
        format!("{}:{partition}", self.name)
    }

    /// Follows the feed for the partitions in `owned` (as they change) until `stop`
    /// completes; reads again at once when `wake` is notified, else every [`FEED_POLL`].
    pub async fn run(
        self,
        mut owned: watch::Receiver<BTreeSet<u32>>,
        wake: Arc<Notify>,
        stop: impl Future<Output = ()> + Send,
    ) {
        let mut stop = std::pin::pin!(stop);
        let mut cursors: BTreeMap<u32, GlobalPosition> = BTreeMap::new();
        let mut failures = 0u32;
        loop {
            let now = owned.borrow_and_update().clone();
            cursors.retain(|partition, _| now.contains(partition));
            let mut ready = true;
            let mut moved_here = false;
            for &partition in &now {
                if cursors.contains_key(&partition) {
                    continue;
                }
                match self.cursors.feed_cursor(&self.cursor_name(partition)).await {
                    Ok(cursor) => {
                        cursors.insert(partition, cursor);
                        moved_here = true;
                    }
                    Err(error) => {
                        tracing::warn!(%error, partition, "cannot read the feed cursor");
                        ready = false;
                    }
                }
            }
            if moved_here {
                // Another node may have parked streams of these partitions, or handled more
                // of them (SPEC DS-5): read the lanes again before delivering any.
                self.dispatcher.partitions_moved().await;
            }
            let read = match cursors.values().min() {
                Some(&from) if ready => self.step(&mut cursors, from).await,
                _ => Ok(false),
            };
            let pause = match read {
                Ok(true) => {
                    failures = 0;
                    continue;
                }
                Ok(false) => FEED_POLL,
                Err(()) => {
                    failures = failures.saturating_add(1);
                    Duration::from_millis(50 << failures.min(6)).min(MAX_RETRY_DELAY)
                }
            };
            tokio::select! {
                () = &mut stop => return,
                changed = owned.changed() => if changed.is_err() { return },
                () = wake.notified() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Reads one page after `from` and dispatches the streams of owned partitions past their
    /// cursors; returns whether it read anything.
    async fn step(
        &self,
        cursors: &mut BTreeMap<u32, GlobalPosition>,
        from: GlobalPosition,
    ) -> Result<bool, ()> {
        let page = match self.store.read_feed(from, PAGE).await {
            Ok(page) => page,
            Err(error) => {
                tracing::warn!(%error, "cannot read the feed; trying again");
                return Err(());
            }
        };
        let Some(last) = page.last().map(|entry| entry.position) else {
            return Ok(false);
        };
        let mine: Vec<FeedEntry> = page
            .into_iter()
            .filter(|entry| {
                let partition = (self.partition_of)(&entry.stream.aggregate_id);
                cursors
                    .get(&partition)
                    .is_some_and(|cursor| entry.position > *cursor)
            })
            .collect();
        self.dispatch(mine).await;
        for (&partition, cursor) in cursors.iter_mut() {
            if last > *cursor {
                *cursor = last;
                if let Err(error) = self
                    .cursors
                    .save_feed_cursor(&self.cursor_name(partition), last)
                    .await
                {
                    // Kept in memory; saved with the next page. A restart reads these
                    // streams again, and their records apply them once.
                    tracing::warn!(%error, partition, "cannot save the feed cursor");
                }
            }
        }
        Ok(true)
    }

    /// Dispatches `entries`, aggregates side by side, each in feed order.
    async fn dispatch(&self, entries: Vec<FeedEntry>) {
        let groups = group_by_aggregate(entries, |entry| &entry.stream.aggregate_id);
        join_all(groups.into_iter().map(|group| async move {
            for entry in group {
                let dispatched = AssertUnwindSafe(self.dispatcher.dispatch(&entry.stream))
                    .catch_unwind()
                    .await;
                if let Err(panic) = dispatched {
                    tracing::error!(
                        aggregate_id = %entry.stream.aggregate_id,
                        version = entry.stream.version,
                        panic = panic_message(panic.as_ref()),
                        "dispatching a stream from the feed panicked"
                    );
                }
            }
        }))
        .await;
    }
}

/// The [`DomainEventBus`] of a node whose consumers follow the feed: publishing only wakes
/// the follower (the stream is already in the store, which it reads).
#[derive(Debug, Clone, Default)]
pub struct FeedWake {
    wake: Arc<Notify>,
}

impl FeedWake {
    /// A bus waking a follower through a new [`Notify`].
    pub fn new() -> Self {
        Self::default()
    }

    /// What the follower waits on.
    pub fn notify(&self) -> Arc<Notify> {
        self.wake.clone()
    }
}

#[async_trait]
impl DomainEventBus for FeedWake {
    async fn publish(&self, _stream: Arc<DomainEventStream>) -> Result<(), EventBusError> {
        self.wake.notify_one();
        Ok(())
    }
}
