//! SPEC PX-1: a panic or an arithmetic overflow in a handler, an `apply` or a consumer fails
//! that one command or delivery and never a partition, a worker or the process; an aggregate
//! whose history cannot be applied is quarantined and reported, not retried in a loop.
//!
//! Every pipeline here runs one bus partition, so every aggregate shares the worker a panic
//! would have killed. CI runs this file in release too (`.ci/run`), where overflows panic only
//! because the workspace sets `overflow-checks = true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use wow_core::aggregate::{Aggregate, AggregateRegistry, CommandContext, QuarantinedAggregates};
use wow_core::command::{CommandResultError, JsonCommand};
use wow_core::compensation::{
    CompensationStore, ExecutionFailed, ExecutionFailedStatus, FailureQuery,
    InMemoryCompensationStore, RetrySpec, AGGREGATE_PROCESSOR,
};
use wow_core::event::{ConsumerError, EventConsumer, InMemoryConsumerPositions};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore, InMemorySnapshotStore};
use wow_core::saga::{Saga, SagaContext};
use wow_core::{
    id, AggregateId, Command, CommandMessage, CommandResult, CommandStage, DomainEventStream,
    ErrorCode, Event, NamedAggregate,
};
use wow_runtime::command::{RequestOutcome, WaitPlan, QUARANTINED, RECORDED};
use wow_runtime::eventsourcing::SnapshotStrategy;
use wow_runtime::pipeline::{LocalPipeline, LocalPipelineBuilder};

// ---- an aggregate whose handler and apply panic on demand ----

#[derive(Debug)]
struct Fragile;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct FragileState {
    count: u64,
}

#[derive(Debug, Clone, Command)]
enum FragileCommand {
    #[command(create)]
    Start,
    /// Records `Touched`.
    Touch,
    /// The handler panics.
    Boom,
    /// The handler overflows a `u64`.
    Overflow,
    /// Records `Poisoned`, whose `apply` panics until its tag is fixed.
    Poison,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Tag {
    tag: String,
}

#[derive(Debug, Clone, PartialEq, Event)]
enum FragileEvent {
    Started,
    Touched,
    Poisoned(Tag),
}

/// How often `apply` ran on each tag's `Poisoned` event.
static POISON_APPLIES: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());
/// Tags whose `Poisoned` event applies without a panic ("the code was fixed").
static FIXED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn poison_applies(aggregate_id: &AggregateId) -> u32 {
    POISON_APPLIES
        .lock()
        .unwrap()
        .get(&aggregate_id.id)
        .copied()
        .unwrap_or(0)
}

fn fix(aggregate_id: &AggregateId) {
    FIXED.lock().unwrap().insert(aggregate_id.id.clone());
}

impl Aggregate for Fragile {
    const CONTEXT_NAME: &'static str = "demo";
    const AGGREGATE_NAME: &'static str = "fragile";
    type State = FragileState;
    type Command = FragileCommand;
    type Event = FragileEvent;
    type Error = std::convert::Infallible;

    fn handle(
        state: &FragileState,
        command: FragileCommand,
        ctx: &CommandContext<'_>,
    ) -> Result<Vec<FragileEvent>, Self::Error> {
        Ok(match command {
            FragileCommand::Start => vec![FragileEvent::Started],
            FragileCommand::Touch => vec![FragileEvent::Touched],
            FragileCommand::Boom => panic!("boom in the handler of {}", ctx.aggregate_id.id),
            FragileCommand::Overflow => {
                // `count` is at least 1 here: an overflow, which must panic in every build.
                let total = state.count + std::hint::black_box(u64::MAX);
                vec![FragileEvent::Touched; usize::from(total > 0)]
            }
            FragileCommand::Poison => vec![FragileEvent::Poisoned(Tag {
                tag: ctx.aggregate_id.id.clone(),
            })],
        })
    }

    fn apply(state: &mut FragileState, event: &FragileEvent) {
        state.count += 1;
        if let FragileEvent::Poisoned(Tag { tag }) = event {
            *POISON_APPLIES
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(tag.clone())
                .or_default() += 1;
            let fixed = FIXED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(tag);
            assert!(fixed, "poisoned event of {tag}");
        }
    }
}

// ---- helpers ----

const DEADLINE: Duration = Duration::from_secs(10);

fn registry() -> AggregateRegistry {
    let mut registry = AggregateRegistry::new();
    registry.register::<Fragile>().unwrap();
    registry
}

fn fragile_id() -> AggregateId {
    AggregateId::new("demo", "fragile", id::new_id(), "t1")
}

fn command(aggregate_id: &AggregateId, body: FragileCommand) -> JsonCommand {
    CommandMessage::of(aggregate_id.clone(), body)
        .into_json()
        .unwrap()
}

/// One partition: every aggregate shares the worker a panic would take down.
fn builder(store: &Arc<dyn EventStore>) -> LocalPipelineBuilder {
    LocalPipeline::builder(registry(), store.clone()).partitions(1)
}

/// Sends `command`, waits for `stage` (within [`DEADLINE`]), and returns the final result,
/// success or failure.
async fn send_for(
    pipeline: &LocalPipeline,
    command: JsonCommand,
    stage: CommandStage,
) -> CommandResult {
    let sent = pipeline
        .gateway
        .send_and_wait(command, WaitPlan::new(stage));
    match tokio::time::timeout(DEADLINE, sent).await {
        Ok(Ok(result)) => result,
        Ok(Err(CommandResultError::Failed(result))) => *result,
        Ok(Err(other)) => panic!("no result: {other}"),
        Err(_) => panic!("no result within {DEADLINE:?}: a worker stopped"),
    }
}

async fn send(pipeline: &LocalPipeline, command: JsonCommand) -> CommandResult {
    send_for(pipeline, command, CommandStage::Processed).await
}

#[track_caller]
fn assert_ok(result: &CommandResult) {
    assert!(result.succeeded, "{result:?}");
}

#[track_caller]
fn assert_quarantined(result: &CommandResult, version: u64) {
    assert_eq!(
        result.error_code,
        ErrorCode::InternalServerError,
        "{result:?}"
    );
    assert!(!result.succeeded);
    assert_eq!(result.result[QUARANTINED]["version"], version, "{result:?}");
}

async fn history(
    store: &Arc<dyn EventStore>,
    aggregate_id: &AggregateId,
) -> Vec<DomainEventStream> {
    store.load(aggregate_id, 1, u64::MAX).await.unwrap()
}

async fn records_of(failures: &InMemoryCompensationStore, consumer: &str) -> Vec<ExecutionFailed> {
    failures
        .list(&FailureQuery {
            consumer: Some(consumer.to_owned()),
            ..FailureQuery::default()
        })
        .await
        .unwrap()
}

#[test]
fn the_quarantine_handle_is_send_sync_and_cheap_to_clone() {
    fn shared<T: Send + Sync + Clone + 'static>() {}
    shared::<QuarantinedAggregates>();
}

// ---- (a) handlers ----

#[tokio::test]
async fn a_panicking_handler_fails_its_command_only_and_the_partition_goes_on() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let pipeline = builder(&store).build();
    let (a, b) = (fragile_id(), fragile_id());
    assert_ok(&send(&pipeline, command(&a, FragileCommand::Start)).await);
    assert_ok(&send(&pipeline, command(&b, FragileCommand::Start)).await);

    let boom = command(&a, FragileCommand::Boom).with_request_id("boom-1");
    let runs_before = pipeline.metrics.snapshot().handler_runs;
    let failed = send(&pipeline, boom.clone()).await;
    assert_eq!(failed.stage, CommandStage::Processed);
    assert_eq!(failed.error_code, ErrorCode::InternalServerError);
    assert!(!failed.succeeded);
    assert!(
        failed.error_msg.contains("boom in the handler"),
        "the panic's message is in the answer: {}",
        failed.error_msg
    );
    assert_eq!(history(&store, &a).await.len(), 1, "nothing appended");
    assert!(
        store.find_decision(&a, "boom-1").await.unwrap().is_none(),
        "no decision recorded: a panic is not a business rejection"
    );

    // Another aggregate on the same (only) partition is served.
    let touched = send(&pipeline, command(&b, FragileCommand::Touch)).await;
    assert_ok(&touched);
    assert_eq!(touched.aggregate_version, Some(2));
    // So is the aggregate itself: its (evicted) state is reloaded, it is not quarantined.
    let touched = send(&pipeline, command(&a, FragileCommand::Touch)).await;
    assert_ok(&touched);
    assert_eq!(touched.aggregate_version, Some(2));
    assert!(pipeline.quarantine.is_empty());

    // The same intent again runs the handler again (nothing was decided), and fails again.
    let mut again = boom.clone();
    again.id = id::new_id();
    let failed_again = send(&pipeline, again).await;
    assert_eq!(failed_again.error_code, ErrorCode::InternalServerError);
    assert!(failed_again.result.get("replayed").is_none());
    assert_eq!(
        pipeline.metrics.snapshot().handler_runs - runs_before,
        4,
        "boom, touch, touch, boom again: each ran its handler"
    );
}

#[tokio::test]
async fn an_overflow_in_a_handler_panics_and_fails_its_command_only() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let pipeline = builder(&store).build();
    let a = fragile_id();
    assert_ok(&send(&pipeline, command(&a, FragileCommand::Start)).await);

    let failed = send(&pipeline, command(&a, FragileCommand::Overflow)).await;
    assert_eq!(failed.error_code, ErrorCode::InternalServerError);
    assert!(
        failed.error_msg.contains("overflow"),
        "an overflow is a panic, never a wrap: {}",
        failed.error_msg
    );
    assert_eq!(history(&store, &a).await.len(), 1, "nothing appended");
    assert_ok(&send(&pipeline, command(&a, FragileCommand::Touch)).await);
}

// ---- (b) apply ----

#[tokio::test]
async fn a_panicking_apply_quarantines_the_aggregate_and_a_restart_quarantines_it_again_once() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let failures = Arc::new(InMemoryCompensationStore::new());
    let process = || {
        builder(&store)
            .snapshots(
                Arc::new(InMemorySnapshotStore::new()),
                SnapshotStrategy::EveryVersion,
            )
            .compensation(failures.clone(), RetrySpec::default())
            .build()
    };
    let pipeline = process();
    let (a, b) = (fragile_id(), fragile_id());
    assert_ok(&send(&pipeline, command(&a, FragileCommand::Start)).await);
    assert_ok(&send(&pipeline, command(&b, FragileCommand::Start)).await);

    let (poison, streams) = a_poisoned_append_stands_and_quarantines(&pipeline, &store, &a).await;
    the_other_aggregate_goes_on_through_every_stage(&pipeline, &a, &b).await;
    the_quarantine_is_reported_and_recorded(&pipeline, &failures, &a, &streams).await;
    a_quarantined_aggregate_is_answered_at_once(&pipeline, &a, &poison).await;

    // A restart: a new process over the same stores loads the aggregate once, from its
    // snapshot at version 1 and the poisoned stream, quarantines it again, and stops there.
    drop(pipeline);
    let pipeline = process();
    let record = a_restart_quarantines_it_again_once(&pipeline, &failures, &a, &b).await;
    a_retry_lifts_the_quarantine_once_the_history_applies(&pipeline, &a, &record).await;
}

/// The append of a poisoned event stands; the answer says so, and that the aggregate is
/// quarantined. The poison command and the aggregate's history.
async fn a_poisoned_append_stands_and_quarantines(
    pipeline: &LocalPipeline,
    store: &Arc<dyn EventStore>,
    a: &AggregateId,
) -> (JsonCommand, Vec<DomainEventStream>) {
    let poison = command(a, FragileCommand::Poison).with_request_id("poison-1");
    let answered = send(pipeline, poison.clone()).await;
    assert_quarantined(&answered, 2);
    assert_eq!(answered.aggregate_version, Some(2), "the appended version");
    assert_eq!(answered.result[RECORDED], true, "the intent took effect");
    assert!(
        answered.error_msg.contains("poisoned event of"),
        "{}",
        answered.error_msg
    );
    let streams = history(store, a).await;
    assert_eq!(streams.len(), 2, "history is the truth: the append stands");
    assert!(matches!(
        pipeline.look_up_request(a, "poison-1").await,
        RequestOutcome::Appended(record) if record.version == 2
    ));
    (poison, streams)
}

/// The other aggregate on the same partition goes on, through every stage; with one
/// partition, its snapshot also means the poisoned stream went through the snapshotter
/// (whose own apply panicked: a failed SNAPSHOT stage, not a dead worker).
async fn the_other_aggregate_goes_on_through_every_stage(
    pipeline: &LocalPipeline,
    a: &AggregateId,
    b: &AggregateId,
) {
    let touched = send_for(
        pipeline,
        command(b, FragileCommand::Touch),
        CommandStage::Snapshot,
    )
    .await;
    assert_ok(&touched);
    assert_eq!(
        poison_applies(a),
        2,
        "the node's apply and the snapshotter's"
    );
}

/// Reported by the registry, and as a compensation record of the aggregate processor.
async fn the_quarantine_is_reported_and_recorded(
    pipeline: &LocalPipeline,
    failures: &InMemoryCompensationStore,
    a: &AggregateId,
    streams: &[DomainEventStream],
) {
    let quarantined = pipeline.quarantine.list();
    assert_eq!(quarantined.len(), 1);
    assert_eq!(&quarantined[0].aggregate_id, a);
    assert_eq!(quarantined[0].version, 2);
    assert!(quarantined[0].message.contains("poisoned event of"));
    let records = records_of(failures, AGGREGATE_PROCESSOR).await;
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(
        (record.stage, &record.aggregate_id, record.version),
        (CommandStage::Processed, a, 2)
    );
    assert_eq!(record.stream_id, streams[1].id);
    assert_eq!(record.error_code, ErrorCode::InternalServerError);
    assert!(record.error_message.contains("poisoned event of"));
    assert_eq!(record.attempts, 1);
}

/// Later commands are answered at once: no handler, no replay of the history; a resend of
/// the appended intent learns its original outcome.
async fn a_quarantined_aggregate_is_answered_at_once(
    pipeline: &LocalPipeline,
    a: &AggregateId,
    poison: &JsonCommand,
) {
    let runs = pipeline.metrics.snapshot().handler_runs;
    for _ in 0..3 {
        assert_quarantined(&send(pipeline, command(a, FragileCommand::Touch)).await, 2);
    }
    assert_eq!(pipeline.metrics.snapshot().handler_runs, runs);
    assert_eq!(poison_applies(a), 2, "the history was not applied again");
    // A resend of the appended intent learns its original outcome.
    let mut resent = poison.clone();
    resent.id = id::new_id();
    let duplicate = send(pipeline, resent).await;
    assert_eq!(duplicate.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(duplicate.aggregate_version, Some(2));
}

/// After a restart the quarantine is lifted until the aggregate is loaded, once: it is
/// quarantined again and its record counts one attempt more. That record.
async fn a_restart_quarantines_it_again_once(
    pipeline: &LocalPipeline,
    failures: &InMemoryCompensationStore,
    a: &AggregateId,
    b: &AggregateId,
) -> ExecutionFailed {
    assert!(
        pipeline.quarantine.is_empty(),
        "a restart lifts the quarantine"
    );
    assert_ok(&send(pipeline, command(b, FragileCommand::Touch)).await);
    for _ in 0..3 {
        assert_quarantined(&send(pipeline, command(a, FragileCommand::Touch)).await, 2);
    }
    assert_eq!(
        poison_applies(a),
        3,
        "one failed load after the restart, not one per command"
    );
    assert_eq!(pipeline.quarantine.len(), 1);
    let record = records_of(failures, AGGREGATE_PROCESSOR).await.remove(0);
    assert_eq!(record.attempts, 2, "the same record, one attempt more");
    record
}

/// A retry while the history still does not apply keeps the quarantine; once it applies (the
/// code or the stored stream was fixed), a retry lifts it.
async fn a_retry_lifts_the_quarantine_once_the_history_applies(
    pipeline: &LocalPipeline,
    a: &AggregateId,
    record: &ExecutionFailed,
) {
    let scheduler = pipeline.compensation().unwrap();
    let retried = scheduler.retry(&record.id).await.unwrap();
    assert_eq!(
        (retried.status, retried.attempts),
        (ExecutionFailedStatus::Failed, 3)
    );
    assert_eq!(pipeline.quarantine.len(), 1);
    // Once it applies (the code or the stored stream was fixed), a retry lifts it.
    fix(a);
    let retried = scheduler.retry(&record.id).await.unwrap();
    assert_eq!(retried.status, ExecutionFailedStatus::Succeeded);
    assert!(pipeline.quarantine.is_empty());
    let touched = send(pipeline, command(a, FragileCommand::Touch)).await;
    assert_ok(&touched);
    assert_eq!(touched.aggregate_version, Some(3));
}

// ---- (c) consumers ----

/// A projection that panics on the streams of one aggregate from one version on, while told
/// to, and otherwise records the streams it handled.
#[derive(Debug)]
struct Touchy {
    bad: AggregateId,
    from_version: u64,
    failing: AtomicBool,
    handled: Mutex<Vec<(String, u64)>>,
}

impl Touchy {
    fn new(bad: &AggregateId, from_version: u64) -> Arc<Self> {
        Arc::new(Self {
            bad: bad.clone(),
            from_version,
            failing: AtomicBool::new(true),
            handled: Mutex::new(Vec::new()),
        })
    }

    fn handled(&self) -> Vec<(String, u64)> {
        self.handled.lock().unwrap().clone()
    }
}

#[async_trait]
impl EventConsumer for Touchy {
    fn name(&self) -> &str {
        "touchy"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        if self.failing.load(Ordering::SeqCst)
            && stream.aggregate_id == self.bad
            && stream.version == self.from_version
        {
            panic!("touchy cannot take version {}", stream.version);
        }
        self.handled
            .lock()
            .unwrap()
            .push((stream.aggregate_id.id.clone(), stream.version));
        Ok(())
    }
}

/// A saga that panics on every `Touched` event of one aggregate, and sends nothing.
#[derive(Debug)]
struct PanickySaga {
    bad: AggregateId,
}

#[async_trait]
impl Saga for PanickySaga {
    type Aggregate = Fragile;

    fn name(&self) -> &str {
        "panicky_saga"
    }

    async fn on_event(
        &self,
        event: &FragileEvent,
        stream: &DomainEventStream,
        _: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        if matches!(event, FragileEvent::Touched) && stream.aggregate_id == self.bad {
            panic!("the saga trips on {}", stream.version);
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_panicking_consumer_fails_that_delivery_only_and_keeps_consuming() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let failures = Arc::new(InMemoryCompensationStore::new());
    let (a, b) = (fragile_id(), fragile_id());
    let touchy = Touchy::new(&a, 2);
    let pipeline = builder(&store)
        .projection(touchy.clone())
        .saga(Arc::new(PanickySaga { bad: a.clone() }))
        .compensation(failures.clone(), RetrySpec::default())
        .build();
    for id in [&a, &b] {
        let started = send_for(
            &pipeline,
            command(id, FragileCommand::Start),
            CommandStage::SagaHandled,
        )
        .await;
        assert_ok(&started);
    }

    let record =
        a_panicking_projection_fails_its_delivery_and_is_recorded(&pipeline, &failures, &a).await;
    a_sagas_panic_is_its_own_failure_and_only_the_failed_aggregate_waits(
        &pipeline, &failures, &touchy, &a, &b,
    )
    .await;

    // Once the consumer is fixed, a retry of the failed delivery succeeds.
    touchy.failing.store(false, Ordering::SeqCst);
    let retried = pipeline
        .compensation()
        .unwrap()
        .retry(&record.id)
        .await
        .unwrap();
    assert_eq!(retried.status, ExecutionFailedStatus::Succeeded);
    let handled: Vec<_> = touchy
        .handled()
        .into_iter()
        .filter(|(id, _)| *id == a.id)
        .collect();
    assert_eq!(
        handled,
        vec![(a.id.clone(), 1), (a.id.clone(), 2), (a.id.clone(), 3)],
        "the retry releases version 3 after version 2"
    );
}

/// `touchy`'s panic on `a`'s version 2 fails that PROJECTED stage and is recorded, to be
/// retried later. The record.
async fn a_panicking_projection_fails_its_delivery_and_is_recorded(
    pipeline: &LocalPipeline,
    failures: &InMemoryCompensationStore,
    a: &AggregateId,
) -> ExecutionFailed {
    let projected = send_for(
        pipeline,
        command(a, FragileCommand::Touch),
        CommandStage::Projected,
    )
    .await;
    assert_eq!(projected.error_code, ErrorCode::InternalServerError);
    assert!(
        projected.error_msg.contains("touchy cannot take version 2"),
        "{}",
        projected.error_msg
    );
    let record = records_of(failures, "touchy").await.remove(0);
    assert_eq!(
        (record.stage, &record.aggregate_id, record.version),
        (CommandStage::Projected, a, 2)
    );
    assert_eq!(record.error_code, ErrorCode::InternalServerError);
    assert!(record
        .error_message
        .contains("touchy cannot take version 2"));
    assert_eq!(
        record.status,
        ExecutionFailedStatus::Failed,
        "retried later"
    );
    record
}

/// The saga's panic (on the same stream, in a later stage) is its own failure, recorded the
/// same way. `a`'s later stream waits behind each consumer's failure (SPEC DS-5), answered
/// `StreamParked`, while `b`'s streams reach both consumers.
async fn a_sagas_panic_is_its_own_failure_and_only_the_failed_aggregate_waits(
    pipeline: &LocalPipeline,
    failures: &InMemoryCompensationStore,
    touchy: &Touchy,
    a: &AggregateId,
    b: &AggregateId,
) {
    let parked = send_for(
        pipeline,
        command(a, FragileCommand::Touch),
        CommandStage::Projected,
    )
    .await;
    assert_eq!(parked.error_code, ErrorCode::StreamParked, "{parked:?}");
    assert_eq!(parked.aggregate_version, Some(3));
    let handled = send_for(
        pipeline,
        command(b, FragileCommand::Touch),
        CommandStage::Projected,
    )
    .await;
    assert_ok(&handled);
    assert_eq!(handled.aggregate_version, Some(2));
    let sagas = send_for(
        pipeline,
        command(b, FragileCommand::Touch),
        CommandStage::SagaHandled,
    )
    .await;
    assert_ok(&sagas);
    let saga_records = records_of(failures, "panicky_saga").await;
    assert_eq!(
        saga_records.iter().map(|r| r.version).collect::<Vec<_>>(),
        vec![2],
        "one record, the failed delivery's; version 3 waits behind it"
    );
    assert!(saga_records[0]
        .error_message
        .contains("the saga trips on 2"));
    let handled = touchy.handled();
    for expected in [(b.id.clone(), 2), (b.id.clone(), 3)] {
        assert!(handled.contains(&expected), "{expected:?} in {handled:?}");
    }
    assert!(!handled.contains(&(a.id.clone(), 3)), "{handled:?}");
}

#[tokio::test]
async fn a_consumer_that_panics_during_catch_up_stops_that_aggregate_only() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let (a, b) = (fragile_id(), fragile_id());
    {
        let writer = builder(&store).build();
        for id in [&a, &b] {
            assert_ok(&send(&writer, command(id, FragileCommand::Start)).await);
            assert_ok(&send(&writer, command(id, FragileCommand::Touch)).await);
            assert_ok(&send(&writer, command(id, FragileCommand::Touch)).await);
        }
    }
    let failures = Arc::new(InMemoryCompensationStore::new());
    let touchy = Touchy::new(&a, 2);
    let pipeline = builder(&store)
        .projection(touchy.clone())
        .compensation(failures.clone(), RetrySpec::default())
        .positions(Arc::new(InMemoryConsumerPositions::new()))
        .build();
    let caught_up = tokio::time::timeout(
        DEADLINE,
        pipeline.catch_up(&[NamedAggregate::new("demo", "fragile")], &mut |_, _| {}),
    )
    .await
    .expect("catch-up ends")
    .unwrap();
    let (_, progress) = &caught_up[0];
    assert_eq!(progress.aggregates_done, 2);
    assert_eq!(
        progress.aggregates_failed, 1,
        "the panic stopped aggregate a only"
    );
    assert_eq!(
        progress.streams_handled,
        1 + 3,
        "a up to the panic, all of b"
    );
    let mut handled = touchy.handled();
    handled.sort();
    let mut expected = vec![
        (a.id.clone(), 1),
        (b.id.clone(), 1),
        (b.id.clone(), 2),
        (b.id.clone(), 3),
    ];
    expected.sort();
    assert_eq!(handled, expected);
    let record = records_of(&failures, "touchy").await.remove(0);
    assert_eq!((record.aggregate_id, record.version), (a, 2));
    assert_eq!(record.error_code, ErrorCode::InternalServerError);
    assert!(record
        .error_message
        .contains("touchy cannot take version 2"));
}
