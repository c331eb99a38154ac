//! The downstream cases that run the framework's own runtime over a backend's stores: live
//! deliveries, compensation retries, catch-up after a restart, two processors around a
//! partition move (SPEC DS-2, DS-4, DS-5). Listed in [`downstream_tck!`](crate::downstream_tck).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use wow_core::compensation::{ExecutionFailedStatus, FailureQuery, RetrySpec};
use wow_core::event::{
    ConsumerError, ConsumerPositions, ConsumerStoreError, EventConsumer, PositionRun,
};
use wow_core::eventsourcing::GlobalPosition;
use wow_core::id::ManualClock;
use wow_core::{AggregateId, DomainEventStream, ErrorCode, NamedAggregate};
use wow_runtime::command::WaitCoordinator;
use wow_runtime::compensation::CompensationScheduler;
use wow_runtime::event::{catch_up, EventDispatcher};

use crate::downstream::Store;
use crate::fixtures;

const CONSUMER: &str = "balances";

const RETRY: RetrySpec = RetrySpec {
    max_attempts: 5,
    initial_backoff_ms: 1_000,
    max_backoff_ms: 60_000,
};

/// A projection that counts its deliveries and fails once on each version it is told to.
#[derive(Debug, Default)]
struct Counting {
    deliveries: AtomicU32,
    fail_once_on: Mutex<HashSet<u64>>,
}

impl Counting {
    fn failing_once_on(version: u64) -> Arc<Self> {
        let counting = Self::default();
        counting
            .fail_once_on
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(version);
        Arc::new(counting)
    }

    fn deliveries(&self) -> u32 {
        self.deliveries.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl EventConsumer for Counting {
    fn name(&self) -> &str {
        CONSUMER
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        self.deliveries.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .fail_once_on
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&stream.version);
        if failing {
            return Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "the message broker is down",
            ));
        }
        Ok(())
    }
}

/// A dispatcher running `consumer` over `positions`, recording failures in the case's store.
fn dispatcher(
    stores: &Store,
    consumer: Arc<Counting>,
    positions: Arc<dyn ConsumerPositions>,
    clock: Arc<ManualClock>,
) -> Arc<EventDispatcher> {
    EventDispatcher::builder(WaitCoordinator::new())
        .projection(consumer)
        .compensation(stores.compensation.clone(), RETRY)
        .positions(positions)
        .clock(clock)
        .build()
}

/// Appends versions `from..=to` of `aggregate` to the case's history, and returns them.
async fn append(
    stores: &Store,
    aggregate: &AggregateId,
    from: u64,
    to: u64,
) -> Vec<DomainEventStream> {
    let mut streams = Vec::new();
    for version in from..=to {
        let stream = fixtures::stream(aggregate, version, &format!("r-{version}"));
        stores.events.append(&stream).await.unwrap();
        streams.push(stream);
    }
    streams
}

/// The consumer's position on `aggregate` once the dispatcher's pending positions are written.
async fn position_after_flush(
    dispatcher: &EventDispatcher,
    positions: &dyn ConsumerPositions,
    aggregate: &AggregateId,
) -> Option<u64> {
    dispatcher.flush_positions().await;
    positions
        .positions(CONSUMER, std::slice::from_ref(aggregate))
        .await
        .unwrap()
        .get(aggregate)
        .copied()
}

fn named(aggregate: &AggregateId) -> NamedAggregate {
    NamedAggregate::new(&aggregate.context_name, &aggregate.aggregate_name)
}

/// A consumer fails once on version 4 while later versions arrive; the compensation
/// scheduler retries it. Its position ends at the head, a version after the retry moves it
/// on, and a restart (a new dispatcher on a new handle) catches up without delivering
/// anything again.
pub async fn a_consumer_failing_once_ends_at_the_head_and_a_restart_replays_nothing(stores: Store) {
    let aggregate = fixtures::aggregate();
    let clock = Arc::new(ManualClock::at(1_000_000));
    let consumer = Counting::failing_once_on(4);
    let live = dispatcher(
        &stores,
        consumer.clone(),
        stores.positions.clone(),
        clock.clone(),
    );
    for stream in append(&stores, &aggregate, 1, 10).await {
        live.dispatch(&stream).await;
    }
    assert_eq!(
        position_after_flush(&live, stores.positions.as_ref(), &aggregate).await,
        Some(3),
        "version 4 failed and waits for its retry"
    );

    clock.advance(i64::try_from(RETRY.initial_backoff_ms).unwrap_or(i64::MAX));
    let scheduler = CompensationScheduler::new(live.clone(), stores.events.clone()).unwrap();
    let pass = scheduler.run_due(100).await.unwrap();
    assert_eq!((pass.retried, pass.succeeded), (1, 1));
    assert_eq!(
        position_after_flush(&live, stores.positions.as_ref(), &aggregate).await,
        Some(10),
        "the retry filled the gap: every version up to the head was handled"
    );
    for stream in append(&stores, &aggregate, 11, 11).await {
        live.dispatch(&stream).await;
    }
    assert_eq!(
        position_after_flush(&live, stores.positions.as_ref(), &aggregate).await,
        Some(11)
    );
    assert_eq!(consumer.deliveries(), 12, "11 versions, one of them twice");
    let records: Vec<_> = stores
        .compensation
        .list(&FailureQuery {
            consumer: Some(CONSUMER.to_owned()),
            ..FailureQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(records.len(), 1, "one failure, recorded once");
    assert_eq!(records[0].status, ExecutionFailedStatus::Succeeded);

    let restarted_consumer = Arc::new(Counting::default());
    let restarted = dispatcher(
        &stores,
        restarted_consumer.clone(),
        stores.reopened_positions().await,
        clock,
    );
    let done = catch_up(
        &restarted,
        CONSUMER,
        stores.events.as_ref(),
        &[named(&aggregate)],
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        (done.streams_handled, restarted_consumer.deliveries()),
        (0, 0),
        "a restart after the retry replays no history"
    );
}

/// Positions that wait until a gate opens: the writes of a processor that lost its
/// partition, still in flight while the processor that took it writes its own.
#[derive(Debug)]
struct Gated {
    inner: Arc<dyn ConsumerPositions>,
    open: watch::Receiver<bool>,
}

#[async_trait]
impl ConsumerPositions for Gated {
    async fn positions(
        &self,
        consumer: &str,
        aggregates: &[AggregateId],
    ) -> Result<std::collections::HashMap<AggregateId, u64>, ConsumerStoreError> {
        self.inner.positions(consumer, aggregates).await
    }

    async fn advance_runs(&self, runs: &[PositionRun<'_>]) -> Result<(), ConsumerStoreError> {
        let mut open = self.open.clone();
        let _ = open.wait_for(|open| *open).await;
        self.inner.advance_runs(runs).await
    }

    async fn reset(&self, consumer: &str) -> Result<(), ConsumerStoreError> {
        self.inner.reset(consumer).await
    }

    async fn feed_cursor(&self, reader: &str) -> Result<GlobalPosition, ConsumerStoreError> {
        self.inner.feed_cursor(reader).await
    }

    async fn save_feed_cursor(
        &self,
        reader: &str,
        position: GlobalPosition,
    ) -> Result<(), ConsumerStoreError> {
        self.inner.save_feed_cursor(reader, position).await
    }
}

/// Processor A handles versions 1..=5 of an aggregate and loses its partition before its
/// positions are written; processor B takes the partition, handles 6..=10 and writes first;
/// then A's positions land. No write is lost: the position is at 10, and B's next version
/// moves it on (a view that never failed must not stay behind after a partition move).
pub async fn positions_written_late_by_a_processor_that_lost_the_partition_are_not_lost(
    stores: Store,
) {
    let aggregate = fixtures::aggregate();
    let clock = Arc::new(ManualClock::at(1_000_000));
    let (open, gate) = watch::channel(false);
    let a = dispatcher(
        &stores,
        Arc::new(Counting::default()),
        Arc::new(Gated {
            inner: stores.positions.clone(),
            open: gate,
        }),
        clock.clone(),
    );
    let b = dispatcher(
        &stores,
        Arc::new(Counting::default()),
        stores.positions.clone(),
        clock,
    );
    let streams = append(&stores, &aggregate, 1, 11).await;
    for stream in &streams[..5] {
        a.dispatch(stream).await;
    }
    for stream in &streams[5..10] {
        b.dispatch(stream).await;
    }
    assert_eq!(
        position_after_flush(&b, stores.positions.as_ref(), &aggregate).await,
        None,
        "1..=5 is not written yet"
    );
    open.send_replace(true);
    let landed = tokio::time::timeout(Duration::from_secs(10), a.flush_positions()).await;
    assert!(
        landed.is_ok(),
        "A's positions are written once the gate opens"
    );
    assert_eq!(
        position_after_flush(&b, stores.positions.as_ref(), &aggregate).await,
        Some(10),
        "A's late run joins B's"
    );
    b.dispatch(&streams[10]).await;
    assert_eq!(
        position_after_flush(&b, stores.positions.as_ref(), &aggregate).await,
        Some(11)
    );
}
