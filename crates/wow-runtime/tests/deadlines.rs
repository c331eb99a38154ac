//! Deadlines through a running pipeline (SPEC DM-2): the row written with the stream that
//! schedules it, fired when due through the gateway with the request id its schedule derived,
//! taking effect once however often it fires, cancelled by a later event, and fired after a
//! restart when it came due while the process was down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;
use wow_core::eventsourcing::{History, InMemoryEventStore, RequestLog};

use serde_json::json;
use wow_core::aggregate::AggregateRegistry;
use wow_core::command::{CommandKind, JsonCommand};
use wow_core::deadline::DeadlineStore;
use wow_core::id::{self, Clock, ManualClock};
use wow_core::{AggregateId, CommandMessage};
use wow_runtime::background::{Background, BackgroundConfig};
use wow_runtime::command::WaitPlan;
use wow_runtime::deadline::{DeadlineScheduler, FirePass};
use wow_runtime::pipeline::LocalPipeline;

const T0: i64 = 1_800_000_000_000;
const MINUTE: i64 = 60_000;

fn registry() -> AggregateRegistry {
    let mut registry = AggregateRegistry::new();
    registry
        .register::<wow_core::testing_example::Hold>()
        .unwrap();
    registry
}

fn hold_id(tenant: &str) -> AggregateId {
    AggregateId::new("demo", "hold", id::new_id(), tenant)
}

fn command(id: &AggregateId, name: &str, body: serde_json::Value) -> JsonCommand {
    CommandMessage::new(id.clone(), name, CommandKind::Normal, body)
}

struct Node {
    pipeline: LocalPipeline,
    scheduler: DeadlineScheduler,
}

fn node(store: &Arc<InMemoryEventStore>, clock: &Arc<ManualClock>) -> Node {
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(clock.clone())
        .deadlines(store.clone())
        .build();
    let scheduler = pipeline.deadline_scheduler(store.clone());
    Node {
        pipeline,
        scheduler,
    }
}

async fn send(node: &Node, command: JsonCommand) -> wow_core::CommandResult {
    node.pipeline
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
        .expect("the command succeeds")
}

async fn event_names(store: &InMemoryEventStore, id: &AggregateId) -> Vec<String> {
    store
        .load(id, 1, u64::MAX)
        .await
        .unwrap()
        .iter()
        .flat_map(|s| s.body.iter().map(|e| e.name.clone()))
        .collect()
}

#[tokio::test]
async fn a_due_deadline_fires_its_command_once_and_its_row_goes() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let hold = hold_id("t1");
    send(&node, command(&hold, "place", json!({"minutes": 15}))).await;
    let pending = store.scheduled_for(&hold).await.unwrap();
    assert_eq!(pending.len(), 1, "the row is written with the stream");
    assert_eq!(pending[0].due_at, T0 + 15 * MINUTE);

    clock.advance(15 * MINUTE - 1);
    assert_eq!(
        node.scheduler.fire_due().await.unwrap(),
        FirePass::default()
    );
    assert_eq!(event_names(&store, &hold).await, ["Placed"]);

    clock.advance(1);
    let pass = node.scheduler.fire_due().await.unwrap();
    assert_eq!(pass.fired, 1, "{pass:?}");
    assert_eq!(event_names(&store, &hold).await, ["Placed", "Expired"]);
    assert!(store.scheduled_for(&hold).await.unwrap().is_empty());
    assert_eq!(
        node.scheduler.fire_due().await.unwrap(),
        FirePass::default()
    );
}

/// What runs beside a started pipeline fires a due deadline by itself: nobody calls
/// `fire_due`.
#[tokio::test]
async fn the_background_work_fires_due_deadlines_by_itself() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let holds = [hold_id("t1"), hold_id("t2")];
    for hold in &holds {
        send(&node, command(hold, "place", json!({"minutes": 1}))).await;
    }
    clock.advance(MINUTE);
    let config = BackgroundConfig {
        retry_every: None,
        deadline_poll_every: Some(Duration::from_millis(10)),
    };
    let _background = Background::start(config, None, Some(&node.scheduler));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for hold in &holds {
        while event_names(&store, hold).await != ["Placed", "Expired"] {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{hold} not expired by the background work"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(store.scheduled_for(hold).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn firing_twice_takes_effect_once() {
    // The crash between firing and deleting: the command was decided, the row is still there.
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let hold = hold_id("t1");
    send(&node, command(&hold, "place", json!({"minutes": 1}))).await;
    let row = store.scheduled_for(&hold).await.unwrap().remove(0);
    clock.advance(MINUTE);
    // Fired as the scheduler fires it.
    let first = send(&node, wow_runtime::deadline::fired_command(&row)).await;
    // The append that expired the hold cancelled the row; a store that lost that write (or a
    // scheduler that crashed before deleting) has it back.
    store.schedule(&row).await.unwrap();

    let pass = node.scheduler.fire_due().await.unwrap();
    assert_eq!(
        pass.fired, 1,
        "the second firing replays the first decision: {pass:?}"
    );
    assert_eq!(event_names(&store, &hold).await, ["Placed", "Expired"]);
    assert_eq!(first.aggregate_version, Some(2));
    assert!(store.scheduled_for(&hold).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_later_event_cancels_the_deadline_and_nothing_fires() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let hold = hold_id("t1");
    send(&node, command(&hold, "place", json!({"minutes": 5}))).await;
    send(&node, command(&hold, "confirm", json!({}))).await;
    assert!(store.scheduled_for(&hold).await.unwrap().is_empty());
    clock.advance(60 * MINUTE);
    assert_eq!(
        node.scheduler.fire_due().await.unwrap(),
        FirePass::default()
    );
    assert_eq!(event_names(&store, &hold).await, ["Placed", "Confirmed"]);
}

#[tokio::test]
async fn a_rejected_command_schedules_nothing() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let hold = hold_id("t1");
    let refused = node
        .pipeline
        .gateway
        .send_and_wait(
            command(&hold, "place", json!({"minutes": 0})),
            WaitPlan::processed(),
        )
        .await;
    assert!(refused.is_err(), "a hold of 0 minutes is invalid");
    assert!(store.scheduled_for(&hold).await.unwrap().is_empty());
    assert_eq!(store.backlog().await.unwrap().pending, 0);
}

#[tokio::test]
async fn after_a_restart_what_came_due_while_down_fires() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let holds: Vec<AggregateId> = vec![hold_id("t1"), hold_id("t2")];
    {
        let before = node(&store, &clock);
        for hold in &holds {
            send(&before, command(hold, "place", json!({"minutes": 10}))).await;
        }
    }
    // Down for an hour; a new process on the same store.
    clock.advance(60 * MINUTE);
    let after = node(&store, &clock);
    let pass = after.scheduler.fire_due().await.unwrap();
    assert_eq!(pass.fired, 2, "{pass:?}");
    for hold in &holds {
        assert_eq!(event_names(&store, hold).await, ["Placed", "Expired"]);
        assert!(store.scheduled_for(hold).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_scheduler_fires_only_the_deadlines_it_owns() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let mine = hold_id("t1");
    // Another tenant's hold, in the other of two partitions.
    let theirs = std::iter::repeat_with(|| hold_id("t2"))
        .find(|other| {
            wow_core::deadline::partition_of(other, 2) != wow_core::deadline::partition_of(&mine, 2)
        })
        .unwrap();
    send(&node, command(&mine, "place", json!({"minutes": 1}))).await;
    send(&node, command(&theirs, "place", json!({"minutes": 1}))).await;
    clock.advance(MINUTE);
    // Two partitions; this scheduler holds the one `mine` is in.
    let count = 2;
    let partition = wow_core::deadline::partition_of(&mine, count);
    assert_ne!(
        partition,
        wow_core::deadline::partition_of(&theirs, count),
        "the two holds are in different partitions"
    );
    let owned = node.scheduler.clone().owning(Arc::new(move || {
        Some(wow_core::deadline::PartitionFilter {
            count,
            owned: vec![partition],
        })
    }));
    let pass = owned.fire_due().await.unwrap();
    assert_eq!((pass.fired, pass.skipped), (1, 0), "{pass:?}");
    assert_eq!(event_names(&store, &mine).await, ["Placed", "Expired"]);
    assert_eq!(event_names(&store, &theirs).await, ["Placed"]);
    assert_eq!(store.scheduled_for(&theirs).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_running_scheduler_fires_when_woken() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let hold = hold_id("t1");
    send(&node, command(&hold, "place", json!({"minutes": 1}))).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(node.scheduler.clone().run(async move {
        let _ = stopped.await;
    }));
    clock.advance(MINUTE);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        node.scheduler.wake();
        if event_names(&store, &hold).await.len() == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deadline never fired"
        );
        tokio::task::yield_now().await;
    }
    assert!(store.scheduled_for(&hold).await.unwrap().is_empty());
    stop.send(()).unwrap();
    running.await.unwrap();
}

#[tokio::test]
async fn a_saga_schedules_a_command_and_a_redelivery_schedules_it_once() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(clock.clone())
        .saga(Arc::new(wow_core::testing_example::AutoConfirm))
        .deadlines(store.clone())
        .build();
    let scheduler = pipeline.deadline_scheduler(store.clone());
    let node = Node {
        pipeline,
        scheduler,
    };
    let hold = hold_id("t1");
    node.pipeline
        .gateway
        .send_and_wait(
            command(&hold, "place", json!({"minutes": 10})),
            WaitPlan::new(wow_core::CommandStage::SagaHandled),
        )
        .await
        .unwrap();
    let names = |rows: Vec<wow_core::deadline::ScheduledCommand>| -> Vec<String> {
        rows.into_iter().map(|r| r.name).collect()
    };
    assert_eq!(
        names(store.scheduled_for(&hold).await.unwrap()),
        ["auto-confirm/confirm", "expire"],
        "the saga's deadline beside the aggregate's own"
    );
    // The event is delivered again: the same row, not a second one.
    let placed = store.last(&hold).await.unwrap().unwrap();
    node.pipeline.dispatcher.dispatch(&placed).await;
    assert_eq!(store.backlog().await.unwrap().pending, 2);

    clock.advance(30_000);
    let pass = node.scheduler.fire_due().await.unwrap();
    assert_eq!(pass.fired, 1, "{pass:?}");
    assert_eq!(event_names(&store, &hold).await, ["Placed", "Confirmed"]);
    // Confirming cancelled the hold's expiry (its state) and the saga's deadline is gone.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !store.scheduled_for(&hold).await.unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "a deadline stayed");
        tokio::task::yield_now().await;
    }
    clock.advance(60 * MINUTE);
    assert_eq!(
        node.scheduler.fire_due().await.unwrap(),
        FirePass::default()
    );
}

/// Places a hold in `tenant` due in one minute, and returns it.
async fn placed(node: &Node, tenant: &str) -> AggregateId {
    let hold = hold_id(tenant);
    send(node, command(&hold, "place", json!({"minutes": 1}))).await;
    hold
}

/// SPEC DM-6: a row that never succeeds (its target quarantined) waits in the store with a
/// growing backoff, never stands before the rows behind it, and after `max_attempts` is held
/// and recorded for compensation; the record's retry makes it due again, and it fires once
/// its target is whole.
#[tokio::test]
async fn a_row_that_never_succeeds_backs_off_is_held_and_recorded_and_never_blocks_others() {
    use wow_core::compensation::{InMemoryCompensationStore, RetrySpec};
    use wow_runtime::deadline::SchedulerConfig;

    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let failures = Arc::new(InMemoryCompensationStore::new());
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(clock.clone())
        .compensation(failures.clone(), RetrySpec::default())
        .build();
    let node = Node {
        scheduler: pipeline
            .deadline_scheduler(store.clone())
            .with_config(SchedulerConfig {
                batch: 1,
                per_tenant: 1,
                max_attempts: 3,
                ..SchedulerConfig::default()
            }),
        pipeline,
    };
    let stuck = placed(&node, "t1").await;
    clock.advance(1);
    let behind = placed(&node, "t1").await;
    node.pipeline
        .quarantine
        .quarantine(&stuck, 1, "a poison event".to_owned(), T0);
    clock.advance(MINUTE);

    // A batch of one: the stuck row fails and waits; the next pass fires the row behind it.
    let pass = node.scheduler.fire_due().await.unwrap();
    assert_eq!((pass.fired, pass.deferred), (0, 1), "{pass:?}");
    let pass = node.scheduler.fire_due().await.unwrap();
    assert_eq!(pass.fired, 1, "{pass:?}");
    assert_eq!(event_names(&store, &behind).await, ["Placed", "Expired"]);

    a_failing_row_backs_off_then_is_held(&node, &store, &clock, &stuck).await;
    the_held_rows_record_retries_it_once_its_target_is_whole(&node, &store, &failures, &stuck)
        .await;
}

/// Backoff: 1 s after the first failure, then 2 s; after `max_attempts` the row is held and
/// never fires by itself.
async fn a_failing_row_backs_off_then_is_held(
    node: &Node,
    store: &Arc<InMemoryEventStore>,
    clock: &ManualClock,
    stuck: &AggregateId,
) {
    let row = store.pending_for(stuck).await.unwrap().remove(0);
    assert_eq!((row.attempts, row.fire_at), (1, T0 + 1 + MINUTE + 1_000));
    assert_eq!(
        node.scheduler.fire_due().await.unwrap(),
        FirePass::default()
    );
    clock.advance(1_000);
    assert_eq!(node.scheduler.fire_due().await.unwrap().deferred, 1);
    let row = store.pending_for(stuck).await.unwrap().remove(0);
    assert_eq!((row.attempts, row.fire_at - clock.now_millis()), (2, 2_000));
    clock.advance(2_000);
    let pass = node.scheduler.fire_due().await.unwrap();
    assert_eq!((pass.deferred, pass.held), (1, 1), "{pass:?}");
    let row = store.pending_for(stuck).await.unwrap().remove(0);
    assert!(row.is_held(), "{row:?}");
    clock.advance(24 * 60 * MINUTE);
    assert_eq!(
        node.scheduler.fire_due().await.unwrap(),
        FirePass::default()
    );
}

/// The record, as the operations page lists it; once the target is whole, its retry re-fires
/// the deadline.
async fn the_held_rows_record_retries_it_once_its_target_is_whole(
    node: &Node,
    store: &Arc<InMemoryEventStore>,
    failures: &wow_core::compensation::InMemoryCompensationStore,
    stuck: &AggregateId,
) {
    use wow_core::compensation::{CompensationStore, FailureQuery};
    use wow_runtime::deadline::DEADLINE_SCHEDULER;

    let records = failures
        .list(&FailureQuery {
            consumer: Some(DEADLINE_SCHEDULER.to_owned()),
            ..FailureQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(&records[0].aggregate_id, stuck);
    assert_eq!(records[0].event_ids, ["expire"]);
    node.pipeline.quarantine.lift(stuck);
    let compensation = node
        .pipeline
        .compensation()
        .unwrap()
        .with_deadlines(store.clone());
    compensation.retry(&records[0].id).await.unwrap();
    let pass = node.scheduler.fire_due().await.unwrap();
    assert_eq!(pass.fired, 1, "{pass:?}");
    assert_eq!(event_names(store, stuck).await, ["Placed", "Expired"]);
    assert!(store.pending_for(stuck).await.unwrap().is_empty());
}

/// SPEC DM-6: one tenant's flood shares each pass with every other tenant's rows.
#[tokio::test]
async fn one_tenants_flood_shares_each_pass_with_other_tenants() {
    use wow_runtime::deadline::SchedulerConfig;

    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    for _ in 0..20 {
        placed(&node, "flood").await;
    }
    clock.advance(1);
    let quiet = placed(&node, "quiet").await;
    clock.advance(MINUTE);
    let scheduler = node.scheduler.clone().with_config(SchedulerConfig {
        batch: 8,
        per_tenant: 4,
        ..SchedulerConfig::default()
    });
    let pass = scheduler.fire_due().await.unwrap();
    assert_eq!(
        pass.fired, 5,
        "four of the flood and the quiet tenant's: {pass:?}"
    );
    assert_eq!(event_names(&store, &quiet).await, ["Placed", "Expired"]);
}

/// SPEC DM-6: "due" is the store's clock's, not the process's: a scheduler whose clock runs
/// an hour ahead fires nothing early.
#[tokio::test]
async fn a_scheduler_whose_clock_runs_ahead_fires_nothing_early() {
    let store_clock = Arc::new(ManualClock::at(T0));
    let store = Arc::new(InMemoryEventStore::new().with_clock(store_clock.clone()));
    let skewed = Arc::new(ManualClock::at(T0));
    let node = node(&store, &skewed);
    let hold = placed(&node, "t1").await;
    skewed.advance(60 * MINUTE);
    let scheduler = node.scheduler.clone().judged_by_store_clock();
    assert_eq!(scheduler.fire_due().await.unwrap(), FirePass::default());
    assert_eq!(event_names(&store, &hold).await, ["Placed"]);
    store_clock.advance(MINUTE);
    assert_eq!(scheduler.fire_due().await.unwrap().fired, 1);
    assert_eq!(event_names(&store, &hold).await, ["Placed", "Expired"]);
}

/// SPEC DM-6: a firing decided after a later event cancelled its deadline is refused
/// `DeadlineNotPending`, recorded as the decision (a resend gets the same answer), and the
/// handler never runs: a handler never has to re-check the time itself.
#[tokio::test]
async fn a_firing_whose_deadline_a_later_event_cancelled_is_refused_and_recorded() {
    use wow_runtime::deadline::{DEADLINE_HEADER, DEADLINE_OWNER_HEADER};

    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let hold = placed(&node, "t1").await;
    // The scheduler read the row; before its command is decided, the hold is confirmed,
    // which cancels the deadline.
    let row = store.scheduled_for(&hold).await.unwrap().remove(0);
    send(&node, command(&hold, "confirm", json!({}))).await;
    clock.advance(MINUTE);
    let stale = || {
        command(&hold, &row.command, row.body.clone())
            .with_request_id(row.request_id.clone())
            .with_header(DEADLINE_HEADER, row.name.clone())
            .with_header(DEADLINE_OWNER_HEADER, format!("hold/{}", hold.id))
    };
    for attempt in ["first", "resend"] {
        let refused = node
            .pipeline
            .gateway
            .send_and_wait(stale(), WaitPlan::processed())
            .await
            .expect_err("a stale firing is refused");
        let wow_core::command::CommandResultError::Failed(result) = refused else {
            panic!("{attempt}: not a failed result: {refused:?}");
        };
        assert_eq!(
            result.error_code,
            wow_core::ErrorCode::DeadlineNotPending,
            "{attempt}: {result:?}"
        );
    }
    assert_eq!(event_names(&store, &hold).await, ["Placed", "Confirmed"]);
    let decision = store.find_decision(&hold, &row.request_id).await.unwrap();
    assert!(
        matches!(&decision, Some(d) if d.clone().appended().is_none()),
        "the refusal is recorded under the firing's request id: {decision:?}"
    );
}

/// SPEC DM-6: with the scheduler held back, a command that reaches the hold after its
/// expiry came due is decided after the expiry: the node fires the overdue deadline first,
/// with the schedule's request id, so the scheduler's lateness never changes the outcome,
/// and the scheduler's own firing later takes effect once.
#[tokio::test]
async fn a_command_after_a_deadline_came_due_is_decided_after_the_deadlines_command() {
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let node = node(&store, &clock);
    let late = placed(&node, "t1").await;
    let early = placed(&node, "t1").await;
    // Confirmed before its expiry: decided as it comes.
    send(&node, command(&early, "confirm", json!({}))).await;
    assert_eq!(event_names(&store, &early).await, ["Placed", "Confirmed"]);

    // The scheduler is held back (no pass runs); the expiry is a minute overdue.
    clock.advance(2 * MINUTE);
    let refused = node
        .pipeline
        .gateway
        .send_and_wait(command(&late, "confirm", json!({})), WaitPlan::processed())
        .await
        .expect_err("the hold expired before the confirm arrived");
    let wow_core::command::CommandResultError::Failed(result) = refused else {
        panic!("not a failed result: {refused:?}");
    };
    assert_eq!(result.error_code.as_str(), "NotPending", "{result:?}");
    assert_eq!(event_names(&store, &late).await, ["Placed", "Expired"]);
    assert!(store.pending_for(&late).await.unwrap().is_empty());
    // The scheduler, when it runs at last, has nothing left to fire.
    assert_eq!(
        node.scheduler.fire_due().await.unwrap(),
        FirePass::default()
    );
    assert_eq!(event_names(&store, &late).await, ["Placed", "Expired"]);
}

/// Confirms `other`'s hold when any other hold is placed, by a deadline due at once.
#[derive(Debug)]
struct ConfirmOther {
    other: AggregateId,
    across: bool,
}

#[async_trait::async_trait]
impl wow_core::saga::Saga for ConfirmOther {
    type Aggregate = wow_core::testing_example::Hold;

    fn name(&self) -> &str {
        "confirm-other"
    }

    fn acts_across_owners(&self) -> bool {
        self.across
    }

    async fn on_event(
        &self,
        event: &wow_core::testing_example::HoldEvent,
        stream: &wow_core::DomainEventStream,
        ctx: &wow_core::saga::SagaContext<'_>,
    ) -> Result<(), wow_core::event::ConsumerError> {
        use wow_core::testing_example::{Hold, HoldCommand, HoldEvent, Nothing};
        if matches!(event, HoldEvent::Placed(_)) && stream.aggregate_id != self.other {
            ctx.schedule::<Hold>(
                "confirm",
                T0,
                self.other.clone(),
                HoldCommand::Confirm(Nothing {}),
            )
            .await?;
        }
        Ok(())
    }
}

/// SPEC TN-2: a saga's deadline acts for the owner of the event the saga reacted to, as its
/// commands sent at once do: fired for another owner's aggregate it is refused, unless the
/// saga acts across owners.
#[tokio::test]
async fn a_sagas_deadline_is_held_to_the_owner_of_the_event_that_scheduled_it() {
    use wow_core::command::OWNER_ID_HEADER;
    for across in [false, true] {
        let store = Arc::new(InMemoryEventStore::new());
        let clock = Arc::new(ManualClock::at(T0));
        let alices = hold_id("t1");
        let pipeline = LocalPipeline::builder(registry(), store.clone())
            .clock(clock.clone())
            .saga(Arc::new(ConfirmOther {
                other: alices.clone(),
                across,
            }))
            .deadlines(store.clone())
            .build();
        let scheduler = pipeline.deadline_scheduler(store.clone());
        let node = Node {
            pipeline,
            scheduler,
        };
        let as_owner = |id: &AggregateId, owner: &str| {
            command(id, "place", json!({"minutes": 10}))
                .with_header(OWNER_ID_HEADER, owner.to_owned())
        };
        send(&node, as_owner(&alices, "alice")).await;
        let bobs = hold_id("t1");
        node.pipeline
            .gateway
            .send_and_wait(
                as_owner(&bobs, "bob"),
                WaitPlan::new(wow_core::CommandStage::SagaHandled),
            )
            .await
            .unwrap();
        let scheduled = store.scheduled_for(&bobs).await.unwrap();
        let saga_row = scheduled
            .iter()
            .find(|row| row.name == "confirm-other/confirm")
            .expect("the saga scheduled its deadline");
        assert_eq!(
            saga_row
                .held_to
                .as_ref()
                .map(|scope| scope.owner_id.as_str()),
            (!across).then_some("bob"),
            "held to bob unless the saga acts across owners"
        );
        node.scheduler.fire_due().await.unwrap();
        let expected: &[&str] = if across {
            &["Placed", "Confirmed"]
        } else {
            &["Placed"]
        };
        assert_eq!(
            event_names(&store, &alices).await,
            expected,
            "across owners: {across}"
        );
    }
}

/// Time as tokio's clock tells it, from `T0`: under `start_paused` the test's own virtual
/// time, which runs ahead whenever every task waits.
#[derive(Debug)]
struct TokioClock(tokio::time::Instant);

impl Clock for TokioClock {
    fn now_millis(&self) -> i64 {
        T0 + i64::try_from(self.0.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

/// A running scheduler sleeps until the next row comes due, not until its next poll (SPEC
/// DM-2): with a poll of an hour, a deadline placed a minute ahead fires a minute after it
/// was placed, on tokio's virtual clock. The node wakes the scheduler when it schedules the
/// row; the store tells it when the row comes due.
#[tokio::test(start_paused = true)]
async fn a_running_scheduler_sleeps_until_the_next_row_comes_due_not_until_its_poll() {
    use wow_runtime::deadline::SchedulerConfig;

    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(TokioClock(tokio::time::Instant::now()));
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(clock.clone())
        .deadlines(store.clone())
        .build();
    let scheduler = pipeline
        .deadline_scheduler(store.clone())
        .with_config(SchedulerConfig {
            poll_every: Duration::from_secs(3_600),
            ..SchedulerConfig::default()
        });
    let node = Node {
        pipeline,
        scheduler,
    };
    let running = tokio::spawn(node.scheduler.clone().run(std::future::pending()));
    // The scheduler's first look finds nothing: it sleeps for its poll.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let placed_at = tokio::time::Instant::now();
    let hold = hold_id("t1");
    send(&node, command(&hold, "place", json!({"minutes": 1}))).await;
    while event_names(&store, &hold).await != ["Placed", "Expired"] {
        assert!(
            placed_at.elapsed() < Duration::from_secs(1_800),
            "the deadline waited for the scheduler's poll"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waited = placed_at.elapsed();
    assert!(waited >= Duration::from_secs(60), "fired early: {waited:?}");
    running.abort();
}

/// The deadline store under test, counting its due reads and, when told, failing every read
/// of the next firing time.
#[derive(Debug)]
struct Watched {
    inner: Arc<InMemoryEventStore>,
    due_reads: std::sync::atomic::AtomicUsize,
    next_fails: bool,
}

#[wow_core::async_trait]
impl wow_core::deadline::DeadlineStoreDecorator for Watched {
    fn inner(&self) -> &dyn DeadlineStore {
        &*self.inner
    }

    async fn due_rows(
        &self,
        query: &wow_core::deadline::DueQuery,
    ) -> Result<Vec<wow_core::deadline::PendingDeadline>, wow_core::eventsourcing::EventStoreError>
    {
        self.due_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.due_rows(query).await
    }

    async fn next_fire_at(
        &self,
        partitions: Option<&wow_core::deadline::PartitionFilter>,
    ) -> Result<Option<i64>, wow_core::eventsourcing::EventStoreError> {
        if self.next_fails {
            return Err(wow_core::eventsourcing::EventStoreError::Unavailable(
                "the next firing time is unreadable".into(),
            ));
        }
        self.inner.next_fire_at(partitions).await
    }
}

/// A pipeline on tokio's virtual clock whose scheduler reads `watched`, polling every `poll`.
fn watched_node(store: &Arc<InMemoryEventStore>, watched: &Arc<Watched>, poll: Duration) -> Node {
    use wow_runtime::deadline::SchedulerConfig;

    let clock = Arc::new(TokioClock(tokio::time::Instant::now()));
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(clock)
        .deadlines(store.clone())
        .build();
    let scheduler = pipeline
        .deadline_scheduler(watched.clone())
        .with_config(SchedulerConfig {
            poll_every: poll,
            ..SchedulerConfig::default()
        });
    Node {
        pipeline,
        scheduler,
    }
}

/// A flood of wakes (decisions that schedule deadlines, one after another) does not make a
/// pass each: the wakes of 50 ms make one, so a thousand wakes over a second of virtual time
/// read the due rows a few dozen times at most, not a thousand.
#[tokio::test(start_paused = true)]
async fn a_flood_of_wakes_makes_one_pass_per_burst() {
    let store = Arc::new(InMemoryEventStore::new());
    let watched = Arc::new(Watched {
        inner: store.clone(),
        due_reads: std::sync::atomic::AtomicUsize::new(0),
        next_fails: false,
    });
    let node = watched_node(&store, &watched, Duration::from_secs(3_600));
    let running = tokio::spawn(node.scheduler.clone().run(std::future::pending()));
    for _ in 0..1_000 {
        node.scheduler.wake();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let reads = watched.due_reads.load(std::sync::atomic::Ordering::SeqCst);
    assert!(reads >= 2, "woken, it made no pass: {reads}");
    assert!(reads <= 30, "{reads} passes for a second of wakes");
    running.abort();
}

/// A store that cannot tell when its next row comes due leaves the scheduler to its poll: the
/// deadline fires at the first poll after it came due, not never.
#[tokio::test(start_paused = true)]
async fn an_unreadable_next_firing_time_leaves_the_scheduler_to_its_poll() {
    let store = Arc::new(InMemoryEventStore::new());
    let watched = Arc::new(Watched {
        inner: store.clone(),
        due_reads: std::sync::atomic::AtomicUsize::new(0),
        next_fails: true,
    });
    let node = watched_node(&store, &watched, Duration::from_secs(10));
    let running = tokio::spawn(node.scheduler.clone().run(std::future::pending()));
    let placed_at = tokio::time::Instant::now();
    let hold = hold_id("t1");
    send(&node, command(&hold, "place", json!({"minutes": 1}))).await;
    while event_names(&store, &hold).await != ["Placed", "Expired"] {
        assert!(
            placed_at.elapsed() < Duration::from_secs(600),
            "the deadline never fired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waited = placed_at.elapsed();
    assert!(
        waited >= Duration::from_secs(60) && waited <= Duration::from_secs(71),
        "fired {waited:?} after it was placed, not at the first poll after it came due"
    );
    running.abort();
}
