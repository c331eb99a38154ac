//! A partition's worker: runs the dispatcher on what has queued up, aggregates side by side,
//! then on what overflowed into the store.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use futures::FutureExt;
use tokio::sync::mpsc;

use super::overflow::{Overflow, Pending};
use crate::event::EventDispatcher;
use crate::metrics::PipelineMetrics;
use wow_core::event::DomainEventStream;
use wow_core::eventsourcing::{EventStore, EventStoreError};
use wow_core::panic_message;
use wow_core::{group_by_aggregate, AggregateId};

/// Streams a worker takes from its queue at once.
const BATCH: usize = 256;

/// Aggregates read back from the store at once.
const READ_BACK_AT_ONCE: usize = 64;

/// Streams read back from the store at a time.
const PAGE: u64 = 500;

/// The longest wait between two attempts to read overflowed streams back.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(1);

pub(super) struct PartitionWorker {
    pub(super) dispatcher: Arc<EventDispatcher>,
    pub(super) store: Arc<dyn EventStore>,
    pub(super) overflow: Arc<Overflow>,
    pub(super) metrics: Arc<PipelineMetrics>,
}

impl PartitionWorker {
    /// Runs until the bus is dropped and everything published is dispatched.
    pub(super) async fn run(self, mut queue: mpsc::Receiver<Arc<DomainEventStream>>) {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            // The queue first: streams that overflowed are all later than any queued stream
            // of their aggregate.
            let open = tokio::select! {
                biased;
                received = queue.recv_many(&mut batch, BATCH) => received > 0,
                () = self.overflow.noted() => true,
            };
            if !batch.is_empty() {
                self.deliver(&mut batch).await;
            }
            if queue.is_empty() && self.overflow.is_pending() {
                self.read_back(&queue).await;
            }
            if !open {
                break;
            }
        }
    }

    /// Dispatches `streams` (leaving it empty, its buffer kept): one aggregate's in order,
    /// different aggregates side by side.
    async fn deliver(&self, streams: &mut Vec<Arc<DomainEventStream>>) {
        let count = streams.len() as u64;
        join_all(
            group_by_aggregate(streams.drain(..), |stream| &stream.aggregate_id)
                .into_iter()
                .map(|streams| async move {
                    for stream in streams {
                        self.dispatch(&stream).await;
                    }
                }),
        )
        .await;
        self.metrics.sub_event_backlog(count);
    }

    async fn dispatch(&self, stream: &DomainEventStream) {
        // SPEC PX-1: the dispatcher contains its consumers' panics; anything else that panics
        // fails this stream's delivery, not the worker (catch-up delivers it again from the
        // consumers' positions).
        if let Err(payload) = AssertUnwindSafe(self.dispatcher.dispatch(stream))
            .catch_unwind()
            .await
        {
            tracing::error!(aggregate_id = %stream.aggregate_id, version = stream.version, panic = %panic_message(payload.as_ref()), "dispatching a stream panicked; the partition goes on");
        }
    }

    /// Reads every overflowed aggregate's streams back from the store, from the first version
    /// that did not fit, and dispatches them. Retries what could not be read (the store is
    /// down: consumers could not write either) until it can, or until the bus is gone.
    async fn read_back(&self, queue: &mpsc::Receiver<Arc<DomainEventStream>>) {
        let Pending { from, streams } = self.overflow.take();
        tracing::debug!(
            aggregates = from.len(),
            streams,
            "reading overflowed streams back from the store"
        );
        let mut left: Vec<(AggregateId, u64)> = from.into_iter().collect();
        let mut delay = Duration::from_millis(20);
        while !left.is_empty() {
            let mut failed = Vec::new();
            for chunk in left.chunks(READ_BACK_AT_ONCE) {
                let outcomes = join_all(chunk.iter().map(|(aggregate, version)| async move {
                    (aggregate, self.read_back_one(aggregate, *version).await)
                }))
                .await;
                for (aggregate, outcome) in outcomes {
                    if let Err((error, next)) = outcome {
                        tracing::warn!(%aggregate, version = next, %error, "could not read overflowed streams back; retrying");
                        failed.push((aggregate.clone(), next));
                    }
                }
            }
            left = failed;
            if !left.is_empty() {
                if queue.is_closed() {
                    tracing::error!(aggregates = left.len(), "the bus stopped before overflowed streams could be read back; catch-up delivers them at the next start");
                    break;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_RETRY_DELAY);
            }
        }
        self.metrics.sub_event_backlog(streams);
    }

    /// Dispatches `aggregate`'s streams from `version` on; on failure, says from which
    /// version to try again.
    async fn read_back_one(
        &self,
        aggregate: &AggregateId,
        version: u64,
    ) -> Result<(), (EventStoreError, u64)> {
        let mut next = version;
        loop {
            let streams = self
                .store
                .load(aggregate, next, next.saturating_add(PAGE - 1))
                .await
                .map_err(|error| (error, next))?;
            let Some(last) = streams.last().map(|stream| stream.version) else {
                return Ok(());
            };
            for stream in &streams {
                self.dispatch(stream).await;
            }
            if (streams.len() as u64) < PAGE {
                return Ok(());
            }
            next = last + 1;
        }
    }
}
