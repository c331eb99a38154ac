//! The DomainEventBus: carries appended streams to the consumers of each stage.

use std::fmt;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use async_trait::async_trait;
use futures::FutureExt;
use tokio::sync::mpsc;

use super::EventDispatcher;
use crate::eventsourcing::BoxError;
use crate::panic::panic_message;
use crate::DomainEventStream;

/// Why a stream could not be published. The stream is appended all the same (SPEC ST-4):
/// consumers catch up from the event store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventBusError {
    /// The bus is shut down.
    #[error("the event bus is closed")]
    Closed,
    /// The transport failed.
    #[error("the event bus failed: {0}")]
    Unavailable(#[source] BoxError),
}

/// Publishes appended streams.
///
/// # Cancel safety
///
/// `publish` is not cancel safe: a dropped publish may or may not have delivered.
#[async_trait]
pub trait DomainEventBus: Send + Sync + fmt::Debug {
    /// Hands `stream` to the bus.
    async fn publish(&self, stream: Arc<DomainEventStream>) -> Result<(), EventBusError>;
}

/// An in-process [`DomainEventBus`]: partitions by aggregate so that one aggregate's streams
/// reach consumers in version order, and runs an [`EventDispatcher`] per partition. A panic
/// while dispatching one stream never ends a partition's worker (SPEC PX-1).
pub struct InMemoryDomainEventBus {
    partitions: Vec<mpsc::UnboundedSender<Arc<DomainEventStream>>>,
    hasher: RandomState,
}

impl fmt::Debug for InMemoryDomainEventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryDomainEventBus")
            .field("partitions", &self.partitions.len())
            .finish_non_exhaustive()
    }
}

impl InMemoryDomainEventBus {
    /// A bus of `partitions` workers (at least 1) feeding `dispatcher`. Must be called inside
    /// a tokio runtime; workers end when the bus is dropped and their queues drain.
    pub fn new(partitions: usize, dispatcher: Arc<EventDispatcher>) -> Self {
        let partitions = (0..partitions.max(1))
            .map(|_| {
                let (sender, mut receiver) = mpsc::unbounded_channel::<Arc<DomainEventStream>>();
                let dispatcher = dispatcher.clone();
                tokio::spawn(async move {
                    while let Some(stream) = receiver.recv().await {
                        // SPEC PX-1: the dispatcher contains its consumers' panics; anything
                        // else that panics fails this stream's delivery, not the worker
                        // (catch-up delivers it again from the consumers' positions).
                        if let Err(payload) = AssertUnwindSafe(dispatcher.dispatch(&stream))
                            .catch_unwind()
                            .await
                        {
                            tracing::error!(aggregate_id = %stream.aggregate_id, version = stream.version, panic = %panic_message(payload.as_ref()), "dispatching a stream panicked; the partition goes on");
                        }
                    }
                });
                sender
            })
            .collect();
        Self {
            partitions,
            hasher: RandomState::default(),
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

/// A [`DomainEventBus`] that drops every stream: for a node whose consumers run elsewhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopDomainEventBus;

#[async_trait]
impl DomainEventBus for NoopDomainEventBus {
    async fn publish(&self, _stream: Arc<DomainEventStream>) -> Result<(), EventBusError> {
        Ok(())
    }
}
