//! A gateway whose signals cross a network answers a caller waiting for `PROCESSED` from the
//! store when the signal never comes (SPEC TO-1): the node below decides and records, and its
//! signals go to a coordinator no gateway listens to, as when a processor is killed after its
//! append or NATS restarts with the signal in flight.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::*;
use wow_core::command::{CommandBus, InMemoryCommandBus};
use wow_core::event::NoopDomainEventBus;
use wow_core::eventsourcing::{EventStore, EventStoreError, RequestDecision};
use wow_core::{CommandStage, ErrorCode};
use wow_runtime::command::{
    CommandGateway, CommandGatewayBuilder, DefaultCommandHandler, WaitCoordinator, WaitPlan,
    RECORDED,
};
use wow_runtime::idempotency::{EventStoreRequestIdExistenceChecker, RequestIdExistenceChecker};

const WAIT: Duration = Duration::from_secs(10);

/// A bus whose node decides on `store` and sends its signals where no caller waits.
fn lossy_bus(store: &Arc<dyn EventStore>) -> Arc<InMemoryCommandBus> {
    let bus = Arc::new(InMemoryCommandBus::new(4, 64));
    let node = DefaultCommandHandler::builder(
        registry(),
        store.clone(),
        Arc::new(NoopDomainEventBus),
        WaitCoordinator::new(),
    );
    bus.subscribe(Arc::new(node.build()));
    bus
}

/// A gateway (`configure`d) in front of a [`lossy_bus`] on one store.
fn deployment(
    configure: impl FnOnce(CommandGatewayBuilder, Arc<dyn EventStore>) -> CommandGatewayBuilder,
) -> CommandGateway {
    let store = memory_store();
    let bus: Arc<dyn CommandBus> = lossy_bus(&store);
    configure(CommandGateway::builder(registry(), bus), store).build()
}

fn looking_up(builder: CommandGatewayBuilder, store: Arc<dyn EventStore>) -> CommandGatewayBuilder {
    builder.look_up_lost_signals(Arc::new(EventStoreRequestIdExistenceChecker::new(store)))
}

#[tokio::test(start_paused = true)]
async fn a_lost_processed_signal_is_answered_from_the_store_before_the_wait_runs_out() {
    let gateway = deployment(looking_up);
    let id = account_id();
    let started = tokio::time::Instant::now();
    let opened = gateway
        .send_and_wait(open(&id, 5), WaitPlan::processed().with_timeout(WAIT))
        .await
        .unwrap();
    assert!(opened.succeeded);
    assert_eq!(opened.stage, CommandStage::Processed);
    assert_eq!(opened.aggregate_version, Some(1));
    assert_eq!(opened.result.get(RECORDED), Some(&serde_json::json!(true)));
    assert!(
        started.elapsed() < WAIT,
        "answered after {:?}",
        started.elapsed()
    );

    let deposited = gateway
        .send_and_wait(deposit(&id, 3), WaitPlan::processed().with_timeout(WAIT))
        .await
        .unwrap();
    assert_eq!(deposited.aggregate_version, Some(2));

    // The same id in another tenant is another aggregate: looked up in its own history.
    let other = wow_core::AggregateId::new(&id.context_name, &id.aggregate_name, &id.id, "t-other");
    let opened = gateway
        .send_and_wait(open(&other, 1), WaitPlan::processed().with_timeout(WAIT))
        .await
        .unwrap();
    assert_eq!(opened.aggregate_version, Some(1));
    assert_eq!(opened.tenant_id, "t-other");
}

/// A request log that cannot be asked.
#[derive(Debug)]
struct Unreachable;

#[async_trait::async_trait]
impl RequestIdExistenceChecker for Unreachable {
    async fn find(
        &self,
        _: &wow_core::AggregateId,
        _: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        Err(EventStoreError::Unavailable("the store is down".into()))
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_that_cannot_be_asked_leaves_the_wait_to_run_out_with_the_ids() {
    let gateway = deployment(|builder, _| builder.look_up_lost_signals(Arc::new(Unreachable)));
    let id = account_id();
    let command = open(&id, 5);
    let error = gateway
        .send_and_wait(command.clone(), WaitPlan::processed().with_timeout(WAIT))
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{:?}", error.result());
    // SPEC ID-4: the timeout names the command it is about.
    assert_eq!(error.result().aggregate_id, id.id);
    assert_eq!(error.result().request_id, command.request_id);
    assert_eq!(error.result().command_id, command.id);
}

#[tokio::test(start_paused = true)]
async fn a_recorded_rejection_of_the_command_is_its_answer() {
    let gateway = deployment(looking_up);
    let id = account_id();
    gateway
        .send_and_wait(open(&id, 5), WaitPlan::processed().with_timeout(WAIT))
        .await
        .unwrap();
    // Opening it again is refused, and the refusal is recorded (SPEC ID-6).
    let refused = gateway
        .send_and_wait(open(&id, 9), WaitPlan::processed().with_timeout(WAIT))
        .await
        .unwrap_err();
    assert!(!refused.is_timeout(), "{:?}", refused.result());
    assert_eq!(refused.result().stage, CommandStage::Processed);
    assert_eq!(refused.result().error_code, ErrorCode::DuplicateAggregateId);
}

#[tokio::test(start_paused = true)]
async fn without_look_ups_or_past_processed_the_wait_runs_out() {
    let gateway = deployment(|builder, _| builder);
    let id = account_id();
    let error = gateway
        .send_and_wait(open(&id, 5), WaitPlan::processed().with_timeout(WAIT))
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{:?}", error.result());

    // The store says only that the command was decided, not that a view projected it.
    let gateway = deployment(looking_up);
    let error = gateway
        .send_and_wait(
            open(&account_id(), 5),
            WaitPlan::new(CommandStage::Projected).with_timeout(WAIT),
        )
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{:?}", error.result());
}

#[tokio::test(start_paused = true)]
async fn a_pipeline_on_a_distributed_bus_looks_its_late_signals_up() {
    let store = memory_store();
    let bus = lossy_bus(&store);
    // A gateway role: commands go on the (here: lossy) distributed bus, request ids are
    // checked by the filters alone, look-ups read the store.
    let pipeline = wow_runtime::pipeline::LocalPipeline::builder(registry(), store)
        .command_bus(bus)
        .gateway_without_store()
        .build();
    let opened = pipeline
        .gateway
        .send_and_wait(
            open(&account_id(), 5),
            WaitPlan::processed().with_timeout(WAIT),
        )
        .await
        .unwrap();
    assert_eq!(opened.aggregate_version, Some(1));
}
