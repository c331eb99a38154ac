//! The in-process DomainEventBus: a channel per partition, read by workers that run the
//! dispatcher.

use std::fmt;
use std::hash::BuildHasher;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use foldhash::fast::RandomState;
use futures::FutureExt;
use tokio::sync::mpsc;

use crate::contracts::event::{DomainEventBus, EventBusError};
use crate::model::event::DomainEventStream;
use crate::model::panic::panic_message;
use crate::runtime::event::EventDispatcher;

/// An in-process [`DomainEventBus`]: partitions by aggregate so that one aggregate's streams
/// reach consumers in version order, each partition a channel read by one worker that runs
/// an [`EventDispatcher`]. A panic while dispatching one stream never ends a worker (SPEC
/// PX-1).
///
/// Ownership runs one way: the bus holds only the sending ends, the workers own the
/// receiving ends and the dispatcher. Dropping every clone of the bus ends the workers once
/// their queues drain.
pub struct InMemoryDomainEventBus {
    partitions: Vec<mpsc::UnboundedSender<Arc<DomainEventStream>>>,
    hasher: RandomState,
}

/// The receiving ends of an [`InMemoryDomainEventBus`], until [`EventFeed::start`] hands them
/// to workers. Streams published before that wait in the channels.
pub struct EventFeed {
    partitions: Vec<mpsc::UnboundedReceiver<Arc<DomainEventStream>>>,
}

impl fmt::Debug for InMemoryDomainEventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryDomainEventBus")
            .field("partitions", &self.partitions.len())
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
    /// A bus of `partitions` channels (at least 1) and the feed that reads them: build the
    /// node on the bus and the dispatcher (with the gateway its sagas send through) after,
    /// then [`EventFeed::start`] it.
    pub fn channel(partitions: usize) -> (Self, EventFeed) {
        let (senders, receivers) = (0..partitions.max(1))
            .map(|_| mpsc::unbounded_channel::<Arc<DomainEventStream>>())
            .unzip();
        let bus = Self {
            partitions: senders,
            hasher: RandomState::default(),
        };
        (
            bus,
            EventFeed {
                partitions: receivers,
            },
        )
    }

    /// A bus of `partitions` workers (at least 1) feeding `dispatcher`, started at once. Must
    /// be called inside a tokio runtime.
    pub fn new(partitions: usize, dispatcher: Arc<EventDispatcher>) -> Self {
        let (bus, feed) = Self::channel(partitions);
        feed.start(dispatcher);
        bus
    }
}

impl EventFeed {
    /// Starts one worker per partition, each running `dispatcher` on its streams in order.
    /// Must be called inside a tokio runtime.
    pub fn start(self, dispatcher: Arc<EventDispatcher>) {
        for receiver in self.partitions {
            tokio::spawn(run_partition(receiver, dispatcher.clone()));
        }
    }
}

async fn run_partition(
    mut receiver: mpsc::UnboundedReceiver<Arc<DomainEventStream>>,
    dispatcher: Arc<EventDispatcher>,
) {
    while let Some(stream) = receiver.recv().await {
        // SPEC PX-1: the dispatcher contains its consumers' panics; anything else that panics
        // fails this stream's delivery, not the worker (catch-up delivers it again from the
        // consumers' positions).
        if let Err(payload) = AssertUnwindSafe(dispatcher.dispatch(&stream))
            .catch_unwind()
            .await
        {
            tracing::error!(aggregate_id = %stream.aggregate_id, version = stream.version, panic = %panic_message(payload.as_ref()), "dispatching a stream panicked; the partition goes on");
        }
    }
}

#[async_trait]
impl DomainEventBus for InMemoryDomainEventBus {
    async fn publish(&self, stream: Arc<DomainEventStream>) -> Result<(), EventBusError> {
        let key = (&stream.aggregate_id.aggregate_name, &stream.aggregate_id.id);
        let index = (self.hasher.hash_one(key) % self.partitions.len() as u64) as usize;
        self.partitions[index]
            .send(stream)
            .map_err(|_| EventBusError::Closed)
    }
}
