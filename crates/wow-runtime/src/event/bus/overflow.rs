//! What a partition did not keep in memory: the aggregates whose streams are to be read back
//! from the event store, each from the first version that did not fit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, Notify};

use wow_core::event::DomainEventStream;
use wow_core::AggregateId;

/// A partition's overflow. Once one stream has not fit, every later stream of the partition
/// goes here too until the worker takes the overflow, so that no stream of an aggregate is
/// queued in memory behind one of its earlier streams left in the store.
#[derive(Debug, Default)]
pub(super) struct Overflow {
    state: Mutex<Pending>,
    wake: Notify,
}

/// Aggregates to read back, with the first version of each not delivered from memory.
#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) from: HashMap<AggregateId, u64>,
    /// Streams published into this overflow (its share of the backlog).
    pub(super) streams: u64,
}

impl Overflow {
    /// Queues `stream` in memory when the partition is not behind and its queue has room;
    /// notes its aggregate and version otherwise.
    pub(super) fn publish(
        &self,
        queue: &mpsc::Sender<Arc<DomainEventStream>>,
        stream: Arc<DomainEventStream>,
    ) {
        let mut pending = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let stream = if pending.from.is_empty() {
            match queue.try_send(stream) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(stream))
                | Err(mpsc::error::TrySendError::Closed(stream)) => stream,
            }
        } else {
            stream
        };
        let first = pending
            .from
            .entry(stream.aggregate_id.clone())
            .or_insert(stream.version);
        *first = (*first).min(stream.version);
        pending.streams += 1;
        drop(pending);
        self.wake.notify_one();
    }

    /// Whether streams wait in the store.
    pub(super) fn is_pending(&self) -> bool {
        !self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .from
            .is_empty()
    }

    /// Takes what is pending; the partition queues in memory again from here on.
    pub(super) fn take(&self) -> Pending {
        std::mem::take(&mut *self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Resolves once something was noted since the last call.
    pub(super) async fn noted(&self) {
        self.wake.notified().await;
    }
}
