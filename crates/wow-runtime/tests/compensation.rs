//! Downstream failures are recorded and retried without touching history (SPEC DS-4);
//! consumers catch up from their positions; external effects resume with their key (DS-2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use support::*;
use wow_core::command::CommandResultError;
use wow_core::compensation::{
    CompensationStore, ExecutionFailedStatus, FailureQuery, InMemoryCompensationStore, RetrySpec,
};
use wow_core::event::{
    effect_key, run_external_effect, ConsumerError, ConsumerPositions, EffectOutcome,
    EventConsumer, InMemoryConsumerPositions, InMemoryEffectJournal, InMemoryProcessedMessages,
};
use wow_core::id::ManualClock;
use wow_core::saga::{Saga, SagaContext};
use wow_core::{AggregateId, CommandStage, DomainEventStream, ErrorCode, NamedAggregate};
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

/// A projection that records the stream ids it applied (once each), failing while told to.
#[derive(Debug)]
struct Flaky {
    name: &'static str,
    failures_left: AtomicU32,
    failing: AtomicBool,
    calls: AtomicU32,
    applied: InMemoryProcessedMessages<Vec<String>>,
}

impl Flaky {
    fn new(name: &'static str, failures: u32) -> Arc<Self> {
        Arc::new(Self {
            name,
            failures_left: AtomicU32::new(failures),
            failing: AtomicBool::new(false),
            calls: AtomicU32::new(0),
            applied: InMemoryProcessedMessages::new(Vec::new()),
        })
    }

    fn applied(&self) -> Vec<String> {
        self.applied.read(Clone::clone)
    }
}

#[async_trait]
impl EventConsumer for Flaky {
    fn name(&self) -> &str {
        self.name
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let left = self.failures_left.load(Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) || left > 0 {
            self.failures_left
                .store(left.saturating_sub(1), Ordering::SeqCst);
            return Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "the read model is down",
            ));
        }
        self.applied
            .process_once(self.name, &stream.id, |applied| {
                applied.push(stream.id.clone());
                Ok(())
            })
            .map(|_| ())
            .map_err(|error| ConsumerError::internal(error.to_string()))
    }
}

/// Sends `command` and waits for `stage`, whatever its outcome.
async fn wait_for(
    pipeline: &LocalPipeline,
    command: wow_core::command::JsonCommand,
    stage: CommandStage,
) -> wow_core::CommandResult {
    match pipeline
        .gateway
        .send_and_wait(command, WaitPlan::new(stage))
        .await
    {
        Ok(result) => result,
        Err(CommandResultError::Failed(result)) => *result,
        Err(other) => panic!("no result: {other}"),
    }
}

/// An event store holding the streams of `commands`, written by a pipeline without
/// consumers (history made before a consumer existed).
async fn history(
    commands: Vec<wow_core::command::JsonCommand>,
) -> Arc<dyn wow_core::eventsourcing::EventStore> {
    let store = memory_store();
    let writer = LocalPipeline::builder(registry(), store.clone()).build();
    for command in commands {
        send_ok(&writer.gateway, command).await;
    }
    store
}

const SPEC: RetrySpec = RetrySpec {
    max_attempts: 4,
    initial_backoff_ms: 1_000,
    max_backoff_ms: 60_000,
};

fn pipeline_with(
    store: Arc<dyn wow_core::eventsourcing::EventStore>,
    consumers: &[Arc<Flaky>],
    failures: Arc<InMemoryCompensationStore>,
    clock: Arc<ManualClock>,
) -> LocalPipeline {
    let mut builder = LocalPipeline::builder(registry(), store)
        .compensation(failures, SPEC)
        .clock(clock);
    for consumer in consumers {
        builder = builder.projection(consumer.clone());
    }
    builder.build()
}

#[tokio::test]
async fn a_failed_projection_is_recorded_and_retried_with_backoff_until_it_succeeds() {
    let clock = Arc::new(ManualClock::at(1_000_000));
    let failures = Arc::new(InMemoryCompensationStore::new());
    let flaky = Flaky::new("balances", 2);
    let pipeline = pipeline_with(
        memory_store(),
        std::slice::from_ref(&flaky),
        failures.clone(),
        clock.clone(),
    );
    let id = account_id();
    let projected = wait_for(&pipeline, open(&id, 10), CommandStage::Projected).await;
    assert_eq!(projected.error_code, ErrorCode::ServiceUnavailable);
    let history_before = pipeline.store().load(&id, 1, u64::MAX).await.unwrap();

    let records = failures.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(records.len(), 1, "the failure is recorded");
    let record = &records[0];
    assert_eq!(record.consumer, "balances");
    assert_eq!(record.stage, CommandStage::Projected);
    assert_eq!(record.aggregate_id, id);
    assert_eq!(record.version, 1);
    assert_eq!(record.stream_id, history_before[0].id);
    assert_eq!(record.event_ids, vec![history_before[0].body[0].id.clone()]);
    assert_eq!(record.error_code, ErrorCode::ServiceUnavailable);
    assert_eq!(record.attempts, 1);
    assert_eq!(record.next_retry_at, Some(1_001_000));

    let scheduler = pipeline.compensation().unwrap();
    assert_eq!(
        scheduler.run_due(10).await.unwrap().retried,
        0,
        "not due yet"
    );
    clock.advance(1_000);
    let pass = scheduler.run_due(10).await.unwrap();
    assert_eq!((pass.retried, pass.succeeded), (1, 0));
    let again = failures.get(&record.id).await.unwrap().unwrap();
    assert_eq!(again.attempts, 2);
    assert_eq!(again.status, ExecutionFailedStatus::Failed);
    assert_eq!(
        again.next_retry_at,
        Some(1_001_000 + 2_000),
        "the backoff doubles"
    );

    clock.advance(2_000);
    let pass = scheduler.run_due(10).await.unwrap();
    assert_eq!((pass.retried, pass.succeeded), (1, 1));
    let done = failures.get(&record.id).await.unwrap().unwrap();
    assert_eq!(done.status, ExecutionFailedStatus::Succeeded);
    assert_eq!(flaky.applied(), vec![history_before[0].id.clone()]);
    assert_eq!(
        pipeline.store().load(&id, 1, u64::MAX).await.unwrap(),
        history_before,
        "history is never touched"
    );
    clock.advance(1_000_000);
    assert_eq!(scheduler.run_due(10).await.unwrap().retried, 0);
}

#[tokio::test]
async fn a_manual_retry_runs_exactly_that_consumer_for_exactly_that_stream() {
    let clock = Arc::new(ManualClock::at(0));
    let failures = Arc::new(InMemoryCompensationStore::new());
    let flaky = Flaky::new("flaky", 0);
    flaky.failing.store(true, Ordering::SeqCst);
    let steady = Flaky::new("steady", 0);
    let pipeline = pipeline_with(
        memory_store(),
        &[flaky.clone(), steady.clone()],
        failures.clone(),
        clock.clone(),
    );
    let (a, b) = (account_id(), account_id());
    for command in [open(&a, 1), open(&b, 2), deposit(&a, 3)] {
        wait_for(&pipeline, command, CommandStage::Projected).await;
    }
    let records = failures.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(
        records.len(),
        2,
        "a's deposit waits behind a's failed open (SPEC DS-5), unrecorded"
    );
    assert!(records.iter().all(|r| r.consumer == "flaky"));
    let steady_calls = steady.calls.load(Ordering::SeqCst);
    let flaky_calls = flaky.calls.load(Ordering::SeqCst);

    flaky.failing.store(false, Ordering::SeqCst);
    let target = records
        .iter()
        .find(|r| r.aggregate_id == b)
        .unwrap()
        .clone();
    let after = pipeline
        .compensation()
        .unwrap()
        .retry(&target.id)
        .await
        .unwrap();
    assert_eq!(after.status, ExecutionFailedStatus::Succeeded);
    assert_eq!(flaky.calls.load(Ordering::SeqCst), flaky_calls + 1);
    assert_eq!(
        steady.calls.load(Ordering::SeqCst),
        steady_calls,
        "no other consumer ran"
    );
    assert_eq!(flaky.applied(), vec![target.stream_id.clone()]);
    let still_failed = failures
        .list(&FailureQuery {
            status: Some(ExecutionFailedStatus::Failed),
            ..FailureQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(still_failed.len(), 1, "the other record waits for its turn");

    // A retry of a record that succeeded runs nothing.
    let again = pipeline
        .compensation()
        .unwrap()
        .retry(&target.id)
        .await
        .unwrap();
    assert_eq!(again.status, ExecutionFailedStatus::Succeeded);
    assert_eq!(flaky.calls.load(Ordering::SeqCst), flaky_calls + 1);
    assert!(matches!(
        pipeline
            .compensation()
            .unwrap()
            .retry("no-such-record")
            .await,
        Err(wow_runtime::compensation::CompensationError::NotFound(_))
    ));
}

#[tokio::test]
async fn an_exhausted_record_waits_for_a_manual_retry() {
    let clock = Arc::new(ManualClock::at(0));
    let failures = Arc::new(InMemoryCompensationStore::new());
    let flaky = Flaky::new("flaky", 0);
    flaky.failing.store(true, Ordering::SeqCst);
    let pipeline = pipeline_with(
        memory_store(),
        std::slice::from_ref(&flaky),
        failures.clone(),
        clock.clone(),
    );
    wait_for(&pipeline, open(&account_id(), 1), CommandStage::Projected).await;
    let scheduler = pipeline.compensation().unwrap();
    for _ in 0..10 {
        clock.advance(120_000);
        scheduler.run_due(10).await.unwrap();
    }
    let record = failures
        .list(&FailureQuery::default())
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        record.attempts, SPEC.max_attempts,
        "the scheduler stops at the limit"
    );
    assert_eq!(record.status, ExecutionFailedStatus::Exhausted);

    flaky.failing.store(false, Ordering::SeqCst);
    let after = scheduler.retry(&record.id).await.unwrap();
    assert_eq!(after.status, ExecutionFailedStatus::Succeeded);
    assert_eq!(flaky.applied(), vec![record.stream_id]);
}

/// Every withdrawal is swept into savings; the saga fails once after sending its command.
#[derive(Debug)]
struct SweepThenFail {
    savings: AggregateId,
    fail_once: AtomicBool,
}

#[async_trait]
impl Saga for SweepThenFail {
    type Aggregate = Account;

    fn name(&self) -> &str {
        "sweep"
    }

    async fn on_event(
        &self,
        event: &AccountEvent,
        _stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        let AccountEvent::Withdrawn(Moved { amount }) = event else {
            return Ok(());
        };
        let deposit = AccountCommand::Deposit(Amount { amount: *amount });
        ctx.send_to::<Account>(self.savings.clone(), deposit)
            .await?;
        if self.fail_once.swap(false, Ordering::SeqCst) {
            return Err(ConsumerError::internal("crashed after sending"));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_retried_saga_resends_under_the_same_request_id_and_moves_money_once() {
    let clock = Arc::new(ManualClock::at(0));
    let failures = Arc::new(InMemoryCompensationStore::new());
    let savings = account_id();
    let pipeline = LocalPipeline::builder(registry(), memory_store())
        .saga(Arc::new(SweepThenFail {
            savings: savings.clone(),
            fail_once: AtomicBool::new(true),
        }))
        .compensation(failures.clone(), SPEC)
        .clock(clock.clone())
        .build();
    let checking = account_id();
    for command in [open(&savings, 0), open(&checking, 100)] {
        send_ok(&pipeline.gateway, command).await;
    }
    let withdraw = command(&checking, AccountCommand::Withdraw(Amount { amount: 30 }));
    let handled = wait_for(&pipeline, withdraw, CommandStage::SagaHandled).await;
    assert_eq!(handled.error_code, ErrorCode::InternalServerError);
    let sent = handled.result["commands"].as_array().unwrap();
    assert_eq!(sent.len(), 1, "a failed saga still reports what it sent");
    assert_eq!(sent[0]["command"], "deposit");
    assert_eq!(sent[0]["aggregateId"], savings.id.as_str());
    assert!(sent[0]["requestId"].as_str().unwrap().ends_with("/0"));
    let record = failures
        .list(&FailureQuery::default())
        .await
        .unwrap()
        .remove(0);
    assert_eq!(record.stage, CommandStage::SagaHandled);

    clock.advance(1_000);
    let pass = pipeline.compensation().unwrap().run_due(10).await.unwrap();
    assert_eq!(
        pass.succeeded, 1,
        "the resend is a duplicate, treated as done"
    );
    let deposits = pipeline.store().load(&savings, 1, u64::MAX).await.unwrap();
    assert_eq!(
        deposits.len(),
        2,
        "opened, then one deposit: the money moved once"
    );
}

#[tokio::test]
async fn a_consumer_added_later_catches_up_and_resumes_from_its_position() {
    let accounts: Vec<_> = (0..3).map(|_| account_id()).collect();
    let mut commands = Vec::new();
    for (n, id) in accounts.iter().enumerate() {
        commands.push(open(id, 0));
        commands.extend((0..=n as u64).map(|amount| deposit(id, amount + 1)));
    }
    let store = history(commands).await;
    let total_streams = 3 + 1 + 2 + 3;
    let positions = Arc::new(InMemoryConsumerPositions::new());
    let late = Flaky::new("late", 0);
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .projection(late.clone())
        .positions(positions.clone())
        .build();
    let named = [NamedAggregate::new("bank", "account")];
    let steps = Mutex::new(Vec::new());
    let report = pipeline
        .catch_up(&named, &mut |name, step| {
            steps.lock().unwrap().push((name.to_owned(), step.clone()))
        })
        .await
        .unwrap();
    assert_eq!(report.len(), 1);
    assert_eq!(report[0].1.streams_handled, total_streams);
    assert_eq!(report[0].1.aggregates_total, 3);
    assert_eq!(report[0].1.aggregates_done, 3);
    assert_eq!(
        steps.lock().unwrap().len(),
        3,
        "progress after every aggregate"
    );
    assert_eq!(late.applied().len() as u64, total_streams);

    let again = pipeline.catch_up(&named, &mut |_, _| {}).await.unwrap();
    assert_eq!(
        again[0].1.streams_handled, 0,
        "it resumes from its positions"
    );

    // A live delivery moves the position too.
    wait_for(&pipeline, deposit(&accounts[0], 5), CommandStage::Projected).await;
    let found = positions
        .positions("late", &[accounts[0].clone()])
        .await
        .unwrap();
    assert_eq!(found.get(&accounts[0]), Some(&3));
    let again = pipeline.catch_up(&named, &mut |_, _| {}).await.unwrap();
    assert_eq!(again[0].1.streams_handled, 0);

    // A rebuild from scratch replays everything; the processed records keep one effect.
    positions.reset("late").await.unwrap();
    let rebuilt = pipeline.catch_up(&named, &mut |_, _| {}).await.unwrap();
    assert_eq!(rebuilt[0].1.streams_handled, total_streams + 1);
    assert_eq!(late.applied().len() as u64, total_streams + 1);
}

#[tokio::test]
async fn catch_up_stops_an_aggregate_at_its_failing_stream_and_records_it() {
    let id = account_id();
    let store = history(vec![open(&id, 0), deposit(&id, 1), deposit(&id, 2)]).await;
    let failures = Arc::new(InMemoryCompensationStore::new());
    let flaky = Flaky::new("late", 0);
    flaky.failing.store(true, Ordering::SeqCst);
    let positions = Arc::new(InMemoryConsumerPositions::new());
    let pipeline = LocalPipeline::builder(registry(), store)
        .projection(flaky.clone())
        .positions(positions.clone())
        .compensation(failures.clone(), SPEC)
        .build();
    let named = [NamedAggregate::new("bank", "account")];
    let report = pipeline.catch_up(&named, &mut |_, _| {}).await.unwrap();
    assert_eq!(report[0].1.aggregates_failed, 1);
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 1, "later streams wait");
    let records = failures.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].version, 1);

    flaky.failing.store(false, Ordering::SeqCst);
    let report = pipeline.catch_up(&named, &mut |_, _| {}).await.unwrap();
    assert_eq!(
        report[0].1.streams_handled, 3,
        "the next catch-up goes on in order"
    );
    assert_eq!(flaky.applied().len(), 3);
}

/// An outside system that deduplicates by idempotency key, as payment APIs do.
#[derive(Debug, Default)]
struct Mailer {
    sent: Mutex<Vec<String>>,
}

impl Mailer {
    fn send(&self, key: &str) {
        let mut sent = self.sent.lock().unwrap();
        if !sent.iter().any(|k| k == key) {
            sent.push(key.to_owned());
        }
    }

    fn has(&self, key: &str) -> bool {
        self.sent.lock().unwrap().iter().any(|k| k == key)
    }
}

#[tokio::test]
async fn an_external_effect_cut_off_after_it_started_resumes_with_the_same_key() {
    let journal = InMemoryEffectJournal::new();
    let mailer = Mailer::default();
    let event_id = "event-1";

    // The first delivery sends, then crashes before recording it done.
    let first = run_external_effect(&journal, "mailer", event_id, 10, |attempt| {
        assert_eq!(attempt.resumed, None);
        mailer.send(&attempt.key);
        async { Err::<(), _>("the process died".into()) }
    })
    .await;
    assert!(first.is_err());

    // The redelivery gets the same key and learns that an attempt started before.
    let mut resumed = None;
    let second = run_external_effect(&journal, "mailer", event_id, 20, |attempt| {
        resumed = attempt.resumed;
        let confirmed = mailer.has(&attempt.key);
        if !confirmed {
            mailer.send(&attempt.key);
        }
        async move { Ok::<_, wow_core::eventsourcing::BoxError>(confirmed) }
    })
    .await
    .unwrap();
    assert_eq!(
        second,
        EffectOutcome::Done(true),
        "confirmed by the key, not repeated"
    );
    let resumed = resumed.unwrap();
    assert_eq!(resumed.earlier_attempts, 1);
    assert_eq!(resumed.first_started, 10);

    // A third delivery finds it done and does not call the effect.
    let third = run_external_effect(&journal, "mailer", event_id, 30, |_| async {
        panic!("a done effect must not run again")
    })
    .await
    .unwrap();
    assert_eq!(third, EffectOutcome::<()>::AlreadyDone);
    assert_eq!(mailer.sent.lock().unwrap().len(), 1);
    assert_eq!(effect_key("mailer", event_id), "mailer:event-1");
    assert_ne!(effect_key("mailer", event_id), effect_key("sms", event_id));
}

#[tokio::test]
async fn catch_up_delivers_a_stream_that_was_never_published_before_a_later_one() {
    let id = account_id();
    let store = history(vec![open(&id, 0), deposit(&id, 1), deposit(&id, 2)]).await;
    let late = Flaky::new("late", 0);
    let positions = Arc::new(InMemoryConsumerPositions::new());
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .projection(late.clone())
        .positions(positions.clone())
        .build();
    // Version 2 is lost between the append and the publish (a crash); 1 and 3 arrive.
    let history = store.load(&id, 1, u64::MAX).await.unwrap();
    pipeline.dispatcher.dispatch(&history[0]).await;
    pipeline.dispatcher.dispatch(&history[2]).await;
    pipeline.dispatcher.flush_positions().await;
    let found = positions
        .positions("late", std::slice::from_ref(&id))
        .await
        .unwrap();
    assert_eq!(
        found.get(&id),
        Some(&1),
        "the position stops before the gap"
    );

    let named = [NamedAggregate::new("bank", "account")];
    let report = pipeline.catch_up(&named, &mut |_, _| {}).await.unwrap();
    assert_eq!(report[0].1.streams_handled, 2, "2, then 3 again (a no-op)");
    let mut applied = late.applied();
    applied.sort();
    let mut expected: Vec<_> = history.iter().map(|s| s.id.clone()).collect();
    expected.sort();
    assert_eq!(applied, expected, "every stream applied once");
    let found = positions
        .positions("late", std::slice::from_ref(&id))
        .await
        .unwrap();
    assert_eq!(found.get(&id), Some(&3));
}

/// A compensation store that refuses every write while it is down.
#[derive(Debug, Default)]
struct Unreachable {
    inner: InMemoryCompensationStore,
    down: AtomicBool,
}

#[async_trait]
impl CompensationStore for Unreachable {
    async fn record_failure(
        &self,
        failure: &wow_core::compensation::FailedExecution,
        retry: &RetrySpec,
        now: i64,
    ) -> Result<wow_core::compensation::ExecutionFailed, wow_core::event::ConsumerStoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(wow_core::event::ConsumerStoreError::Unavailable(
                "down".into(),
            ));
        }
        self.inner.record_failure(failure, retry, now).await
    }

    async fn mark_succeeded(
        &self,
        id: &str,
        now: i64,
    ) -> Result<Option<wow_core::compensation::ExecutionFailed>, wow_core::event::ConsumerStoreError>
    {
        self.inner.mark_succeeded(id, now).await
    }

    async fn mark_skipped(
        &self,
        id: &str,
        by: &str,
        now: i64,
    ) -> Result<Option<wow_core::compensation::ExecutionFailed>, wow_core::event::ConsumerStoreError>
    {
        self.inner.mark_skipped(id, by, now).await
    }

    async fn edit(
        &self,
        id: &str,
        edit: &wow_core::compensation::RecordEdit,
        by: &str,
        now: i64,
    ) -> Result<Option<wow_core::compensation::ExecutionFailed>, wow_core::event::ConsumerStoreError>
    {
        self.inner.edit(id, edit, by, now).await
    }

    async fn get(
        &self,
        id: &str,
    ) -> Result<Option<wow_core::compensation::ExecutionFailed>, wow_core::event::ConsumerStoreError>
    {
        self.inner.get(id).await
    }

    async fn list(
        &self,
        query: &FailureQuery,
    ) -> Result<Vec<wow_core::compensation::ExecutionFailed>, wow_core::event::ConsumerStoreError>
    {
        self.inner.list(query).await
    }

    async fn due(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<wow_core::compensation::ExecutionFailed>, wow_core::event::ConsumerStoreError>
    {
        self.inner.due(now, limit).await
    }
}

#[tokio::test]
async fn a_failure_the_store_could_not_take_is_recorded_when_it_is_back() {
    let clock = Arc::new(ManualClock::at(0));
    let failures = Arc::new(Unreachable::default());
    failures.down.store(true, Ordering::SeqCst);
    let flaky = Flaky::new("flaky", 0);
    flaky.failing.store(true, Ordering::SeqCst);
    let pipeline = LocalPipeline::builder(registry(), memory_store())
        .projection(flaky.clone())
        .compensation(failures.clone(), SPEC)
        .clock(clock.clone())
        .build();
    wait_for(&pipeline, open(&account_id(), 1), CommandStage::Projected).await;
    assert!(failures
        .inner
        .list(&FailureQuery::default())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        pipeline.dispatcher.record_pending_failures().await,
        1,
        "kept while the store is down"
    );

    failures.down.store(false, Ordering::SeqCst);
    flaky.failing.store(false, Ordering::SeqCst);
    let scheduler = pipeline.compensation().unwrap();
    assert_eq!(
        scheduler.run_due(10).await.unwrap().retried,
        0,
        "recorded first, due later"
    );
    let recorded = failures.inner.list(&FailureQuery::default()).await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        (recorded[0].attempts, recorded[0].next_retry_at),
        (1, Some(1_000)),
        "timed when it happened"
    );
    clock.advance(1_000);
    assert_eq!(scheduler.run_due(10).await.unwrap().succeeded, 1);
    assert_eq!(flaky.applied().len(), 1);
    assert_eq!(pipeline.dispatcher.record_pending_failures().await, 0);
}

#[tokio::test]
async fn a_record_whose_stream_is_not_in_history_is_left_for_a_person() {
    let clock = Arc::new(ManualClock::at(0));
    let failures = Arc::new(InMemoryCompensationStore::new());
    let flaky = Flaky::new("flaky", 0);
    let id = account_id();
    let pipeline = pipeline_with(
        history(vec![open(&id, 1)]).await,
        std::slice::from_ref(&flaky),
        failures.clone(),
        clock.clone(),
    );
    let stream = pipeline.store().last(&id).await.unwrap().unwrap();
    let mut failure = wow_core::compensation::FailedExecution::of(
        "flaky",
        CommandStage::Projected,
        &stream,
        ConsumerError::internal("down"),
    );
    failure.stream_id = "a-stream-history-never-had".to_owned();
    let record = failures.record_failure(&failure, &SPEC, 0).await.unwrap();

    let scheduler = pipeline.compensation().unwrap();
    match scheduler.retry(&record.id).await {
        Err(wow_runtime::compensation::CompensationError::StreamMissing { aggregate, version }) => {
            assert_eq!((aggregate, version), (id.to_string(), 1));
        }
        other => panic!("expected StreamMissing, got {other:?}"),
    }
    clock.advance(60_000);
    let pass = scheduler.run_due(10).await.unwrap();
    assert_eq!(pass.retried, 0, "a pass goes on past it");
    assert_eq!(failures.get(&record.id).await.unwrap(), Some(record));
    assert!(flaky.applied().is_empty(), "the consumer never ran");
}

/// An operator's re-dispatch of a range (one aggregate, or every one of the type) runs the
/// consumer on exactly those streams, in version order; a projection with processed-message
/// records applies nothing twice and applies, once, a stream it never handled (after the
/// versions below it that it never handled either); its positions never move back.
#[tokio::test]
async fn a_redispatch_runs_the_range_and_applies_nothing_twice() {
    use wow_runtime::event::RedispatchRange;

    let accounts: Vec<_> = (0..2).map(|_| account_id()).collect();
    let mut commands = Vec::new();
    for id in &accounts {
        commands.push(open(id, 0));
        commands.extend((1..=3).map(|amount| deposit(id, amount)));
    }
    let store = history(commands).await;
    let positions = Arc::new(InMemoryConsumerPositions::new());
    let view = Flaky::new("view", 0);
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .projection(view.clone())
        .positions(positions.clone())
        .compensation(Arc::new(InMemoryCompensationStore::new()), SPEC)
        .build();
    let scheduler = pipeline.compensation().unwrap();
    let named = NamedAggregate::new("bank", "account");
    let first = &accounts[0];
    let range = RedispatchRange {
        aggregate: named.clone(),
        aggregate_id: Some(first.id.clone()),
        tenant_id: Some(first.tenant_id.clone()),
        from_version: 2,
        to_version: Some(3),
    };
    let done = scheduler.redispatch("view", &range).await.unwrap();
    assert_eq!(
        (
            done.aggregates,
            done.streams_handled,
            done.aggregates_failed
        ),
        (1, 2, 0)
    );
    let streams = store.load(first, 1, u64::MAX).await.unwrap();
    assert_eq!(
        view.applied(),
        vec![
            streams[0].id.clone(),
            streams[1].id.clone(),
            streams[2].id.clone()
        ],
        "versions 2 and 3 of that aggregate, never handled before, each applied once, in \
         order, after version 1, which the consumer had not handled either (SPEC DS-5)"
    );
    let before = view.calls.load(Ordering::SeqCst);
    scheduler.redispatch("view", &range).await.unwrap();
    assert_eq!(
        view.calls.load(Ordering::SeqCst),
        before + 2,
        "delivered again"
    );
    assert_eq!(view.applied().len(), 3, "and applied nothing twice");

    let everything = RedispatchRange {
        aggregate_id: None,
        tenant_id: None,
        from_version: 1,
        to_version: None,
        ..range
    };
    let done = scheduler.redispatch("view", &everything).await.unwrap();
    assert_eq!((done.aggregates, done.streams_handled), (2, 8));
    assert_eq!(view.applied().len(), 8, "each stream applied once");
    let found = positions.positions("view", &accounts).await.unwrap();
    assert_eq!(found.get(first), Some(&4));
    assert_eq!(found.get(&accounts[1]), Some(&4));
    let narrower = RedispatchRange {
        from_version: 1,
        to_version: Some(1),
        ..everything
    };
    scheduler.redispatch("view", &narrower).await.unwrap();
    let found = positions.positions("view", &accounts).await.unwrap();
    assert_eq!(found.get(first), Some(&4), "a position never moves back");
    assert!(matches!(
        scheduler.redispatch("nope", &narrower).await,
        Err(wow_runtime::event::CatchUpError::UnknownConsumer(_))
    ));
}
