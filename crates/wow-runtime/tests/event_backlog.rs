//! The event bus keeps memory bounded when consumers fall behind: what does not fit a
//! partition's queue is read back from the event store, in version order per aggregate, and
//! callers waiting for a consumer's stage are still answered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use support::*;
use tokio::sync::Semaphore;
use wow_core::command::CommandStage;
use wow_core::event::{ConsumerError, DomainEventStream, EventConsumer};
use wow_core::eventsourcing::{
    EventStore, EventStoreDecorator, EventStoreError, EventStoreMethod, RecordingEventStore,
};
use wow_core::AggregateId;
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

/// Records every (aggregate, version) it handles, in order; handles a stream only when the
/// test hands it a permit, so the test decides when it falls behind.
#[derive(Debug)]
struct GatedRecorder {
    permits: Arc<Semaphore>,
    seen: Mutex<HashMap<AggregateId, Vec<u64>>>,
}

#[async_trait]
impl EventConsumer for GatedRecorder {
    fn name(&self) -> &str {
        "gated_recorder"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        self.permits.acquire().await.expect("open").forget();
        self.seen
            .lock()
            .unwrap()
            .entry(stream.aggregate_id.clone())
            .or_default()
            .push(stream.version);
        Ok(())
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_that_overflow_the_queue_are_read_back_from_the_store_in_order() {
    let recorder = Arc::new(GatedRecorder {
        permits: Arc::new(Semaphore::new(0)),
        seen: Mutex::new(HashMap::new()),
    });
    let pipeline = LocalPipeline::builder(registry(), memory_store())
        .projection(recorder.clone())
        .partitions(1)
        .partition_capacity(2)
        .build();
    let accounts: Vec<AggregateId> = (0..5).map(|_| account_id()).collect();
    for id in &accounts {
        send_ok(&pipeline.gateway, open(id, 0)).await;
    }
    const DEPOSITS: u64 = 20;
    for round in 0..DEPOSITS {
        for id in &accounts {
            let result = pipeline
                .gateway
                .send_and_wait(deposit(id, round + 1), WaitPlan::processed())
                .await
                .expect("sent");
            assert!(result.succeeded, "{result:?}");
        }
    }
    // The consumer has not handled anything: nearly all of it is in the store, not memory.
    let published = accounts.len() as u64 * (DEPOSITS + 1);
    assert_eq!(pipeline.metrics.event_backlog(), published);

    // A caller waiting for the projection of a stream that did not fit is answered once the
    // consumer gets to it.
    let last = accounts[0].clone();
    let waiting = {
        let gateway = pipeline.gateway.clone();
        tokio::spawn(async move {
            gateway
                .send_and_wait(
                    deposit(&last, 1),
                    WaitPlan::new(CommandStage::Projected).with_timeout(Duration::from_secs(20)),
                )
                .await
        })
    };

    recorder.permits.add_permits(10_000);
    let projected = waiting.await.unwrap().expect("answered");
    assert!(projected.succeeded, "{projected:?}");
    assert_eq!(projected.stage, CommandStage::Projected);
    until("the backlog is drained", || {
        pipeline.metrics.event_backlog() == 0
    })
    .await;

    let seen = recorder.seen.lock().unwrap();
    for (index, id) in accounts.iter().enumerate() {
        let mut versions = seen.get(id).cloned().unwrap_or_default();
        // A stream delivered twice (from memory and from the store) is harmless (SPEC DS-1),
        // but never out of order.
        versions.dedup();
        let expected = DEPOSITS + 1 + u64::from(index == 0);
        assert_eq!(versions, (1..=expected).collect::<Vec<_>>(), "{id}");
    }
}

/// Delegates to a store; its next `failing` reads fail as an outage would.
#[derive(Debug)]
struct FailingReads {
    inner: Arc<dyn EventStore>,
    failing: AtomicUsize,
    failed: AtomicUsize,
}

impl FailingReads {
    fn outage(&self) -> Result<(), EventStoreError> {
        let left = self.failing.load(Ordering::SeqCst);
        if left > 0
            && self
                .failing
                .compare_exchange(left, left - 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(EventStoreError::Unavailable("the store is down".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl EventStoreDecorator for FailingReads {
    fn inner(&self) -> &dyn EventStore {
        &*self.inner
    }

    async fn load(
        &self,
        id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.outage()?;
        self.inner.load(id, head, tail).await
    }
}

#[tokio::test]
async fn failing_reads_passes_every_method_to_the_inner_store_while_the_store_is_up() {
    let inner = Arc::new(RecordingEventStore::new());
    let store = FailingReads {
        inner: inner.clone(),
        failing: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
    };
    assert_eq!(
        inner.trace(&store).await,
        EventStoreMethod::forwarded_trace()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_while_reading_the_overflow_back_is_retried_and_nothing_is_lost() {
    let recorder = Arc::new(GatedRecorder {
        permits: Arc::new(Semaphore::new(0)),
        seen: Mutex::new(HashMap::new()),
    });
    let store = Arc::new(FailingReads {
        inner: memory_store(),
        failing: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
    });
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .projection(recorder.clone())
        .partitions(1)
        .partition_capacity(2)
        .build();
    let accounts: Vec<AggregateId> = (0..3).map(|_| account_id()).collect();
    for id in &accounts {
        send_ok(&pipeline.gateway, open(id, 0)).await;
    }
    const DEPOSITS: u64 = 10;
    for round in 0..DEPOSITS {
        for id in &accounts {
            send_ok(&pipeline.gateway, deposit(id, round + 1)).await;
        }
    }
    // The store goes down for the next three reads, then comes back.
    store.failing.store(3, Ordering::SeqCst);
    recorder.permits.add_permits(10_000);
    until("the backlog is drained", || {
        pipeline.metrics.event_backlog() == 0
    })
    .await;

    assert_eq!(
        store.failed.load(Ordering::SeqCst),
        3,
        "the read-back met the outage"
    );
    let seen = recorder.seen.lock().unwrap();
    for id in &accounts {
        let mut versions = seen.get(id).cloned().unwrap_or_default();
        versions.dedup();
        assert_eq!(versions, (1..=DEPOSITS + 1).collect::<Vec<_>>(), "{id}");
    }
}
