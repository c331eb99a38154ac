//! A node of today's release, whose aggregate was renamed (`counter` → `tally`, declared in
//! `ALIASES`), processes the commands a gateway of the previous release still sends under the
//! former name: under today's name, with the same request-id decisions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use wow_core::aggregate::AggregateRegistry;
use wow_core::command::{CommandResultError, InMemoryCommandBus, JsonCommand};
use wow_core::event::NoopDomainEventBus;
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::testing_example::{Add, Counter, CounterCommand, Tally};
use wow_core::{AggregateId, CommandMessage, ErrorCode};
use wow_runtime::command::{CommandGateway, DefaultCommandHandler, WaitCoordinator, WaitPlan};

fn command(id: &AggregateId, body: CounterCommand, request_id: &str) -> JsonCommand {
    CommandMessage::of(id.clone(), body)
        .into_json()
        .unwrap()
        .with_request_id(request_id)
}

#[tokio::test]
async fn commands_under_a_former_name_are_processed_under_todays() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let waits = WaitCoordinator::new();
    let mut today = AggregateRegistry::new();
    today.register::<Tally>().unwrap();
    let node = DefaultCommandHandler::builder(
        today,
        store.clone(),
        Arc::new(NoopDomainEventBus),
        waits.clone(),
    )
    .build();
    let bus = Arc::new(InMemoryCommandBus::new(2, 16));
    bus.subscribe(Arc::new(node));
    // The gateway of the previous release knows the aggregate as `counter` only.
    let mut previous = AggregateRegistry::new();
    previous.register::<Counter>().unwrap();
    let gateway = CommandGateway::builder(previous, bus)
        .wait_coordinator(waits)
        .build();

    let old = AggregateId::new("demo", "counter", "c1", "t1");
    let started = gateway
        .send_and_wait(
            command(&old, CounterCommand::Start, "r-1"),
            WaitPlan::processed(),
        )
        .await
        .unwrap();
    assert_eq!(started.aggregate_name, "tally");
    let added = gateway
        .send_and_wait(
            command(&old, CounterCommand::Add(Add { by: 4 }), "r-2"),
            WaitPlan::processed(),
        )
        .await
        .unwrap();
    assert_eq!(added.aggregate_version, Some(2));
    let resend = gateway
        .send_and_wait(
            command(&old, CounterCommand::Add(Add { by: 4 }), "r-2"),
            WaitPlan::processed(),
        )
        .await;
    match resend {
        Err(CommandResultError::Failed(result)) => {
            assert_eq!(result.error_code, ErrorCode::DuplicateRequestId);
            assert_eq!(result.aggregate_version, Some(2));
        }
        other => panic!("a resend is the original decision: {other:?}"),
    }
    let today_id = AggregateId::new("demo", "tally", "c1", "t1");
    assert_eq!(store.load(&today_id, 1, u64::MAX).await.unwrap().len(), 2);
    assert!(store.load(&old, 1, u64::MAX).await.unwrap().is_empty());
}
