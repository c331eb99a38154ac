//! A failure keeps each aggregate's order (SPEC DS-5): once a consumer's delivery of an
//! aggregate's stream fails, its later streams of that aggregate wait behind it, are not
//! attempted and run no retries of their own; other aggregates go on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use support::*;
use wow_core::compensation::{
    CompensationStore, ExecutionFailedStatus, FailureQuery, InMemoryCompensationStore, RetrySpec,
};
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::id::ManualClock;
use wow_core::{AggregateId, CommandStage, DomainEventStream, ErrorCode};
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

/// An event processor that writes down every (aggregate, version) it handles, and fails the
/// versions it is told to fail until told otherwise.
#[derive(Debug, Default)]
struct Ledger {
    handled: Mutex<Vec<(String, u64)>>,
    failing: Mutex<HashSet<(String, u64)>>,
}

impl Ledger {
    fn fail(&self, id: &AggregateId, version: u64) {
        let mut failing = self.failing.lock().unwrap();
        failing.insert((id.id.clone(), version));
    }

    fn heal(&self) {
        self.failing.lock().unwrap().clear();
    }

    /// The versions of `id` handled, in the order they were handled.
    fn versions_of(&self, id: &AggregateId) -> Vec<u64> {
        let handled = self.handled.lock().unwrap();
        handled
            .iter()
            .filter(|(aggregate, _)| *aggregate == id.id)
            .map(|(_, version)| *version)
            .collect()
    }
}

#[async_trait]
impl EventConsumer for Ledger {
    fn name(&self) -> &str {
        "ledger"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        let key = (stream.aggregate_id.id.clone(), stream.version);
        if self.failing.lock().unwrap().contains(&key) {
            return Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "what the ledger calls is down",
            ));
        }
        self.handled.lock().unwrap().push(key);
        Ok(())
    }
}

const SPEC: RetrySpec = RetrySpec {
    max_attempts: 3,
    initial_backoff_ms: 1_000,
    max_backoff_ms: 1_000,
};

fn pipeline(
    ledger: &Arc<Ledger>,
    failures: &Arc<InMemoryCompensationStore>,
    clock: &Arc<ManualClock>,
) -> LocalPipeline {
    LocalPipeline::builder(registry(), memory_store())
        .compensation(failures.clone(), SPEC)
        .clock(clock.clone())
        .event_processor(ledger.clone())
        .build()
}

/// Sends `command` and waits until the ledger's stage has run on it, whatever its outcome.
async fn handled(pipeline: &LocalPipeline, command: wow_core::command::JsonCommand) {
    // A failed stage is an answer too: the wait ends either way.
    let _ = pipeline
        .gateway
        .send_and_wait(command, WaitPlan::new(CommandStage::EventHandled))
        .await;
}

#[tokio::test]
async fn a_consumer_never_handles_an_aggregates_next_version_before_the_one_that_failed() {
    let (ledger, failures) = (Arc::new(Ledger::default()), Arc::default());
    let clock = Arc::new(ManualClock::at(1_000_000));
    let pipeline = pipeline(&ledger, &failures, &clock);
    let id = account_id();
    ledger.fail(&id, 1);
    handled(&pipeline, open(&id, 10)).await;
    handled(&pipeline, deposit(&id, 5)).await;
    handled(&pipeline, deposit(&id, 7)).await;
    assert_eq!(
        ledger.versions_of(&id),
        Vec::<u64>::new(),
        "versions 2 and 3 wait behind version 1"
    );

    ledger.heal();
    clock.advance(1_000);
    pipeline.compensation().unwrap().run_due(10).await.unwrap();
    assert_eq!(
        ledger.versions_of(&id),
        vec![1, 2, 3],
        "the head's success releases the rest in order"
    );
    let open_failures = failures
        .list(&FailureQuery {
            status: Some(ExecutionFailedStatus::Failed),
            ..FailureQuery::default()
        })
        .await
        .unwrap();
    assert!(open_failures.is_empty(), "{open_failures:?}");
}

#[tokio::test]
async fn a_poison_stream_runs_the_retries_alone_and_other_aggregates_go_on() {
    let (ledger, failures) = (Arc::new(Ledger::default()), Arc::default());
    let clock = Arc::new(ManualClock::at(1_000_000));
    let pipeline = pipeline(&ledger, &failures, &clock);
    let (poisoned, other) = (account_id(), account_id());
    ledger.fail(&poisoned, 1);
    handled(&pipeline, open(&poisoned, 10)).await;
    for amount in 1..=5 {
        handled(&pipeline, deposit(&poisoned, amount)).await;
    }
    handled(&pipeline, open(&other, 10)).await;
    handled(&pipeline, deposit(&other, 1)).await;
    assert_eq!(
        ledger.versions_of(&other),
        vec![1, 2],
        "other aggregates go on"
    );

    // Run the retries to the limit: only the head counts them and only the head reaches it.
    let scheduler = pipeline.compensation().unwrap();
    for _ in 0..SPEC.max_attempts {
        clock.advance(1_000);
        scheduler.run_due(100).await.unwrap();
    }
    let records = failures.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(
        records.len(),
        1,
        "one record, the head's; the later streams are parked, not failed: {records:?}"
    );
    assert_eq!(records[0].version, 1);
    assert_eq!(records[0].attempts, SPEC.max_attempts);
    assert_eq!(ledger.versions_of(&poisoned), Vec::<u64>::new());
}

#[tokio::test]
async fn an_operators_skip_is_recorded_and_runs_the_parked_streams_in_order() {
    let (ledger, failures) = (Arc::new(Ledger::default()), Arc::default());
    let clock = Arc::new(ManualClock::at(1_000_000));
    let pipeline = pipeline(&ledger, &failures, &clock);
    let id = account_id();
    ledger.fail(&id, 2);
    handled(&pipeline, open(&id, 10)).await;
    for amount in 1..=3 {
        handled(&pipeline, deposit(&id, amount)).await;
    }
    assert_eq!(ledger.versions_of(&id), vec![1], "3 and 4 wait behind 2");
    let head = failures.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(head.len(), 1);

    clock.advance(5_000);
    let skipped = pipeline
        .compensation()
        .unwrap()
        .skip(&head[0].id, "operator:ana")
        .await
        .unwrap();
    assert_eq!(skipped.status, ExecutionFailedStatus::Skipped);
    assert_eq!(skipped.skipped_by.as_deref(), Some("operator:ana"));
    assert_eq!(skipped.updated_at, 1_005_000);
    assert_eq!(
        ledger.versions_of(&id),
        vec![1, 3, 4],
        "version 2 is never run; the parked ones run in order"
    );

    // The still-failing version 2 is not retried, and the aggregate's next stream runs.
    clock.advance(60_000);
    let pass = pipeline.compensation().unwrap().run_due(10).await.unwrap();
    assert_eq!(pass.retried, 0);
    handled(&pipeline, deposit(&id, 4)).await;
    assert_eq!(ledger.versions_of(&id), vec![1, 3, 4, 5]);
}
