//! The in-process DomainEventBus: a bounded queue per partition, read by a worker that runs
//! the dispatcher; what does not fit is read back from the event store.

mod overflow;
mod worker;

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use async_trait::async_trait;
use foldhash::fast::RandomState;
use tokio::sync::mpsc;

use self::overflow::Overflow;
use crate::event::EventDispatcher;
use crate::metrics::PipelineMetrics;
use wow_core::event::DomainEventStream;
use wow_core::event::{DomainEventBus, EventBusError};
use wow_core::eventsourcing::EventStore;

/// Streams a partition holds in memory before the rest is read back from the event store.
pub const DEFAULT_PARTITION_CAPACITY: usize = 1024;

/// An in-process [`DomainEventBus`]: partitions by aggregate so that one aggregate's streams
/// reach consumers in version order, each partition a bounded queue read by one worker that
/// runs an [`EventDispatcher`]. The worker takes whatever has queued up at once and runs
/// different aggregates' streams side by side (one aggregate's in order), so their writes
/// share the store's commits. A panic while dispatching one stream never ends a worker
/// (SPEC PX-1).
///
/// Memory stays bounded when consumers fall behind: a stream that finds its partition's
/// queue full is not kept; the partition notes its aggregate and first version instead, and
/// once the queue has drained the worker reads those streams back from the event store, the
/// source of truth, in version order. Publishing never waits for consumers, and callers
/// waiting for a consumer's stage are answered as usual.
///
/// Ownership runs one way: the bus holds only the sending ends, the workers own the
/// receiving ends and the dispatcher. Dropping every clone of the bus ends the workers once
/// their queues drain.
pub struct InMemoryDomainEventBus {
    partitions: Vec<Partition>,
    hasher: RandomState,
    metrics: Arc<PipelineMetrics>,
}

struct Partition {
    queue: mpsc::Sender<Arc<DomainEventStream>>,
    overflow: Arc<Overflow>,
}

/// The receiving ends of an [`InMemoryDomainEventBus`], until [`EventFeed::start`] hands them
/// to workers. Streams published before that wait in the queues (or in the store).
pub struct EventFeed {
    partitions: Vec<(mpsc::Receiver<Arc<DomainEventStream>>, Arc<Overflow>)>,
    metrics: Arc<PipelineMetrics>,
}

impl fmt::Debug for InMemoryDomainEventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryDomainEventBus")
            .field("partitions", &self.partitions.len())
            .field("backlog", &self.metrics.event_backlog())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for EventFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventFeed")
            .field("partitions", &self.partitions.len())
            .finish()
    }
}

impl InMemoryDomainEventBus {
    /// A bus of `partitions` queues (at least 1) of [`DEFAULT_PARTITION_CAPACITY`] streams
    /// each, and the feed that reads them: build the node on the bus and the dispatcher (with
    /// the gateway its sagas send through) after, then [`EventFeed::start`] it.
    pub fn channel(partitions: usize) -> (Self, EventFeed) {
        Self::bounded(
            partitions,
            DEFAULT_PARTITION_CAPACITY,
            Arc::new(PipelineMetrics::default()),
        )
    }

    /// A bus of `partitions` queues (at least 1) of `capacity` streams each (at least 1),
    /// counting its backlog in `metrics` ([`PipelineMetrics::event_backlog`]).
    pub fn bounded(
        partitions: usize,
        capacity: usize,
        metrics: Arc<PipelineMetrics>,
    ) -> (Self, EventFeed) {
        let (senders, receivers) = (0..partitions.max(1))
            .map(|_| {
                let (queue, receiver) = mpsc::channel(capacity.max(1));
                let overflow = Arc::new(Overflow::default());
                (
                    Partition {
                        queue,
                        overflow: overflow.clone(),
                    },
                    (receiver, overflow),
                )
            })
            .unzip();
        let bus = Self {
            partitions: senders,
            hasher: RandomState::default(),
            metrics: metrics.clone(),
        };
        let feed = EventFeed {
            partitions: receivers,
            metrics,
        };
        (bus, feed)
    }

    /// A bus of `partitions` workers (at least 1) feeding `dispatcher`, reading what
    /// overflowed from `store`, started at once. Must be called inside a tokio runtime.
    pub fn new(
        partitions: usize,
        dispatcher: Arc<EventDispatcher>,
        store: Arc<dyn EventStore>,
    ) -> Self {
        let (bus, feed) = Self::channel(partitions);
        feed.start(dispatcher, store);
        bus
    }

    /// Streams published and not yet dispatched to every consumer, in memory or in the
    /// store.
    pub fn backlog(&self) -> u64 {
        self.metrics.event_backlog()
    }
}

impl EventFeed {
    /// Starts one worker per partition, each running `dispatcher` on its streams (one
    /// aggregate's in order) and reading streams that did not fit its queue from `store`.
    /// Must be called inside a tokio runtime.
    pub fn start(self, dispatcher: Arc<EventDispatcher>, store: Arc<dyn EventStore>) {
        for (receiver, overflow) in self.partitions {
            let worker = worker::PartitionWorker {
                dispatcher: dispatcher.clone(),
                store: store.clone(),
                overflow,
                metrics: self.metrics.clone(),
            };
            tokio::spawn(worker.run(receiver));
        }
    }
}

#[async_trait]
impl DomainEventBus for InMemoryDomainEventBus {
    async fn publish(&self, stream: Arc<DomainEventStream>) -> Result<(), EventBusError> {
        let key = (&stream.aggregate_id.aggregate_name, &stream.aggregate_id.id);
        let index = (self.hasher.hash_one(key) % self.partitions.len() as u64) as usize;
        let partition = &self.partitions[index];
        if partition.queue.is_closed() {
            return Err(EventBusError::Closed);
        }
        self.metrics.add_event_backlog(1);
        partition.overflow.publish(&partition.queue, stream);
        Ok(())
    }
}
