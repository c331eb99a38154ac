//! The parked-streams conformance suite (SPEC DS-5): a backend's [`ParkedStreams`] lanes and
//! skipped compensation records, then the framework's dispatcher over them across a restart.
//! Run every case with [`parking_tck!`](crate::parking_tck), over the same stores as the
//! downstream suite.
//!
//! [`ParkedStreams`]: wow_core::event::ParkedStreams

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use wow_core::compensation::{ExecutionFailedStatus, FailedExecution, RetrySpec};
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::id::ManualClock;
use wow_core::{AggregateId, CommandStage, DomainEventStream, ErrorCode, NamedAggregate};
use wow_runtime::command::WaitCoordinator;
use wow_runtime::compensation::CompensationScheduler;
use wow_runtime::event::{catch_up, EventDispatcher};

use crate::fixtures;

/// The stores of one backend: the downstream suite's.
pub type Store = crate::downstream::Stores;

const CONSUMER: &str = "ledger";

const RETRY: RetrySpec = RetrySpec {
    max_attempts: 5,
    initial_backoff_ms: 1_000,
    max_backoff_ms: 60_000,
};

fn account(id: &str, tenant: &str) -> AggregateId {
    AggregateId::new("tck", "account", id, tenant)
}

/// A lane opens at the failed version, takes later versions behind it (in any order, the
/// highest kept), closes only when nothing is parked past what its release delivered, and is
/// gone once closed: a version parked after that is the consumer's to run.
pub async fn a_lane_parks_behind_its_head_and_closes_only_past_what_was_parked(stores: Store) {
    let lanes = stores.parked.clone();
    let a = account("a", "tenant-a");
    assert_eq!(lanes.lane(CONSUMER, &a).await.unwrap(), None);
    assert!(
        !lanes.park(CONSUMER, &a, 3).await.unwrap(),
        "no lane is open: nothing parks"
    );

    let opened = lanes.hold(CONSUMER, &a, 2, 5_000).await.unwrap();
    assert_eq!(
        (opened.head_version, opened.parked_through, opened.since),
        (2, 2, 5_000)
    );
    assert_eq!(opened.parked(), 0);
    assert!(lanes.park(CONSUMER, &a, 4).await.unwrap());
    assert!(lanes.park(CONSUMER, &a, 3).await.unwrap());
    let lane = lanes.lane(CONSUMER, &a).await.unwrap().unwrap();
    assert_eq!((lane.head_version, lane.parked_through), (2, 4));
    assert_eq!(lane.parked(), 2);

    // A release that delivered through 3 must not close a lane parked through 4.
    assert!(!lanes.release(CONSUMER, &a, 3).await.unwrap());
    // A stream released from the lane failed: it heads the lane, the rest stay parked.
    let moved = lanes.hold(CONSUMER, &a, 3, 9_000).await.unwrap();
    assert_eq!(
        (moved.head_version, moved.parked_through, moved.since),
        (3, 4, 5_000),
        "the lane keeps when it opened"
    );
    assert!(lanes.release(CONSUMER, &a, 4).await.unwrap());
    assert_eq!(lanes.lane(CONSUMER, &a).await.unwrap(), None);
    assert!(!lanes.release(CONSUMER, &a, 4).await.unwrap());
    assert!(!lanes.park(CONSUMER, &a, 5).await.unwrap());
}

/// Lanes are per consumer, tenant and aggregate; `lanes` lists them oldest first, of one
/// consumer when asked.
pub async fn lanes_are_per_consumer_tenant_and_aggregate(stores: Store) {
    let lanes = stores.parked.clone();
    let (a, a_elsewhere, b) = (
        account("a", "tenant-a"),
        account("a", "tenant-b"),
        account("b", "tenant-a"),
    );
    lanes.hold(CONSUMER, &a, 1, 3_000).await.unwrap();
    lanes.hold("mailer", &a, 2, 1_000).await.unwrap();
    lanes.hold(CONSUMER, &b, 5, 2_000).await.unwrap();
    assert_eq!(lanes.lane(CONSUMER, &a_elsewhere).await.unwrap(), None);
    assert!(!lanes.park(CONSUMER, &a_elsewhere, 2).await.unwrap());

    let all: Vec<_> = lanes
        .lanes(None)
        .await
        .unwrap()
        .into_iter()
        .map(|lane| (lane.consumer, lane.aggregate_id.id, lane.head_version))
        .collect();
    assert_eq!(
        all,
        vec![
            ("mailer".to_owned(), "a".to_owned(), 2),
            (CONSUMER.to_owned(), "b".to_owned(), 5),
            (CONSUMER.to_owned(), "a".to_owned(), 1),
        ]
    );
    let ledger = lanes.lanes(Some(CONSUMER)).await.unwrap();
    assert_eq!(ledger.len(), 2);
    assert!(ledger.iter().all(|lane| lane.consumer == CONSUMER));
    assert!(lanes.release("mailer", &a, 2).await.unwrap());
    assert!(lanes.lane(CONSUMER, &a).await.unwrap().is_some());
}

/// An operator's skip marks a failure `SKIPPED` with who and when; it is no longer due, and a
/// second skip (or one of a record that succeeded) changes nothing.
pub async fn a_skipped_failure_names_its_operator_and_is_never_due(stores: Store) {
    let store = stores.compensation.clone();
    let aggregate = account("a", "tenant-a");
    let stream = fixtures::stream(&aggregate, 2, "r-2");
    let failure = FailedExecution::of(
        CONSUMER,
        CommandStage::Projected,
        &stream,
        ConsumerError::new(ErrorCode::ServiceUnavailable, "down"),
    );
    let record = store.record_failure(&failure, &RETRY, 1_000).await.unwrap();
    assert_eq!(record.skipped_by, None);

    let skipped = store
        .mark_skipped(&record.id, "operator:ana", 7_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(skipped.status, ExecutionFailedStatus::Skipped);
    assert_eq!(skipped.skipped_by.as_deref(), Some("operator:ana"));
    assert_eq!((skipped.updated_at, skipped.next_retry_at), (7_000, None));
    assert_eq!(store.get(&record.id).await.unwrap(), Some(skipped.clone()));
    assert!(store.due(i64::MAX, 10).await.unwrap().is_empty());

    let again = store
        .mark_skipped(&record.id, "operator:bo", 9_000)
        .await
        .unwrap();
    assert_eq!(again, Some(skipped), "the first skip stands");
    assert_eq!(
        store
            .mark_skipped("no-such-record", "operator:ana", 9_000)
            .await
            .unwrap(),
        None
    );
}

/// A projection that records the versions it handled and fails on the ones it is told to.
#[derive(Debug, Default)]
struct Ledger {
    handled: Mutex<Vec<u64>>,
    failing: Mutex<Vec<u64>>,
}

impl Ledger {
    fn failing_on(version: u64) -> Arc<Self> {
        let ledger = Self::default();
        ledger
            .failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(version);
        Arc::new(ledger)
    }

    fn heal(&self) {
        self.failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn handled(&self) -> Vec<u64> {
        self.handled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl EventConsumer for Ledger {
    fn name(&self) -> &str {
        CONSUMER
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        let failing = self
            .failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&stream.version);
        if failing {
            return Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "the ledger's bank is down",
            ));
        }
        self.handled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(stream.version);
        Ok(())
    }
}

/// The framework's dispatcher over the case's stores, its lanes in the backend.
fn dispatcher(
    stores: &Store,
    ledger: Arc<Ledger>,
    clock: Arc<ManualClock>,
) -> Arc<EventDispatcher> {
    EventDispatcher::builder(WaitCoordinator::new())
        .projection(ledger)
        .compensation(stores.compensation.clone(), RETRY)
        .parked_streams(stores.parked.clone())
        .positions(stores.positions.clone())
        .event_store(stores.events.clone())
        .clock(clock)
        .build()
}

/// Version 2 fails; 3 and 4 arrive and are parked, not run; the process restarts (a new
/// dispatcher on the same database); the retry of 2 succeeds and runs 3 and 4 after it. The
/// consumer handled 1, 2, 3, 4 in that order, each once, and one failure was recorded.
pub async fn parked_streams_wait_across_a_restart_and_run_in_order_after_the_retry(stores: Store) {
    let aggregate = fixtures::aggregate();
    let clock = Arc::new(ManualClock::at(1_000_000));
    let ledger = Ledger::failing_on(2);
    let live = dispatcher(&stores, ledger.clone(), clock.clone());
    for version in 1..=4 {
        let stream = fixtures::stream(&aggregate, version, &format!("r-{version}"));
        stores.events.append(&stream).await.unwrap();
        live.dispatch(&stream).await;
    }
    assert_eq!(ledger.handled(), vec![1], "3 and 4 wait behind 2");
    let lane = stores.parked.lane(CONSUMER, &aggregate).await.unwrap();
    assert_eq!(
        lane.map(|lane| (lane.head_version, lane.parked_through)),
        Some((2, 4)),
        "the lane is in the store"
    );
    live.flush_positions().await;
    drop(live);

    ledger.heal();
    let restarted = dispatcher(&stores, ledger.clone(), clock.clone());
    clock.advance(i64::try_from(RETRY.initial_backoff_ms).unwrap_or(i64::MAX));
    let scheduler = CompensationScheduler::new(restarted.clone(), stores.events.clone()).unwrap();
    let pass = scheduler.run_due(100).await.unwrap();
    assert_eq!(
        (pass.retried, pass.succeeded),
        (1, 1),
        "only the head is retried"
    );
    assert_eq!(ledger.handled(), vec![1, 2, 3, 4]);
    assert_eq!(
        stores.parked.lane(CONSUMER, &aggregate).await.unwrap(),
        None
    );
}

/// Catch-up meets a failure at version 2 of 5: 3 to 5 park behind it rather than being left
/// undelivered, the retry runs 2 to 5 in order, and a live version 6 after it runs next.
pub async fn a_failure_in_catch_up_parks_the_rest_and_the_retry_runs_them_before_the_next_live_stream(
    stores: Store,
) {
    let aggregate = fixtures::aggregate();
    let clock = Arc::new(ManualClock::at(1_000_000));
    let ledger = Ledger::failing_on(2);
    let dispatcher = dispatcher(&stores, ledger.clone(), clock.clone());
    for version in 1..=5 {
        let stream = fixtures::stream(&aggregate, version, &format!("r-{version}"));
        stores.events.append(&stream).await.unwrap();
    }
    let named = NamedAggregate::new(&aggregate.context_name, &aggregate.aggregate_name);
    let caught = catch_up(
        &dispatcher,
        CONSUMER,
        stores.events.as_ref(),
        std::slice::from_ref(&named),
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!(caught.streams_handled, 1);
    assert_eq!(ledger.handled(), vec![1]);
    let lane = stores.parked.lane(CONSUMER, &aggregate).await.unwrap();
    assert_eq!(
        lane.map(|lane| (lane.head_version, lane.parked_through)),
        Some((2, 5))
    );
    ledger.heal();
    clock.advance(i64::try_from(RETRY.initial_backoff_ms).unwrap_or(i64::MAX));
    let scheduler = CompensationScheduler::new(dispatcher.clone(), stores.events.clone()).unwrap();
    scheduler.run_due(100).await.unwrap();
    assert_eq!(ledger.handled(), vec![1, 2, 3, 4, 5]);
    assert_eq!(
        stores.parked.lane(CONSUMER, &aggregate).await.unwrap(),
        None
    );

    let live = fixtures::stream(&aggregate, 6, "r-6");
    stores.events.append(&live).await.unwrap();
    dispatcher.dispatch(&live).await;
    assert_eq!(ledger.handled(), vec![1, 2, 3, 4, 5, 6]);
}

/// Versions 2 and 3 are never published (their appends' answers were lost): when version 4
/// arrives, the consumer handles 2 and 3 first, read from history. After a restart the
/// stored position says where it got to, and a stream past a gap is preceded the same way.
pub async fn a_stream_past_a_gap_is_preceded_by_the_missing_ones_from_history(stores: Store) {
    let aggregate = fixtures::aggregate();
    let clock = Arc::new(ManualClock::at(1_000_000));
    let ledger = Arc::new(Ledger::default());
    let live = dispatcher(&stores, ledger.clone(), clock.clone());
    let mut streams = Vec::new();
    for version in 1..=7 {
        let stream = fixtures::stream(&aggregate, version, &format!("r-{version}"));
        stores.events.append(&stream).await.unwrap();
        streams.push(stream);
    }
    live.dispatch(&streams[0]).await;
    live.dispatch(&streams[3]).await;
    assert_eq!(ledger.handled(), vec![1, 2, 3, 4]);
    live.flush_positions().await;
    drop(live);

    let restarted_ledger = Arc::new(Ledger::default());
    let restarted = dispatcher(&stores, restarted_ledger.clone(), clock);
    restarted.dispatch(&streams[6]).await;
    assert_eq!(
        restarted_ledger.handled(),
        vec![5, 6, 7],
        "from the stored position on, in order"
    );
}
