//! Failures after and around the append: publication, consumers, callers that go away, and
//! concurrent writers on one store (SPEC ST-4, ST-5, ST-6, ES-3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use wow_core::eventsourcing::{GatedEventStore, RequestLog};

use async_trait::async_trait;
use serde_json::json;
use support::*;
use wow_core::command::InMemoryCommandBus;
use wow_core::event::{ConsumerError, DomainEventBus, EventBusError, EventConsumer};
use wow_core::{CommandStage, DomainEventStream, ErrorCode};
use wow_runtime::command::{CommandGateway, DefaultCommandHandler, WaitCoordinator, WaitPlan};
use wow_runtime::pipeline::LocalPipeline;

/// An event bus whose transport is down.
#[derive(Debug)]
struct BrokenEventBus;

#[async_trait]
impl DomainEventBus for BrokenEventBus {
    async fn publish(&self, _stream: Arc<DomainEventStream>) -> Result<(), EventBusError> {
        Err(EventBusError::Unavailable("connection reset".into()))
    }
}

#[tokio::test]
async fn a_publication_failure_after_the_append_reports_the_appended_version() {
    let store = memory_store();
    let bus = Arc::new(InMemoryCommandBus::new(2, 16));
    let waits = WaitCoordinator::new();
    let node = DefaultCommandHandler::builder(
        registry(),
        store.clone(),
        Arc::new(BrokenEventBus),
        waits.clone(),
    )
    .build();
    bus.subscribe(Arc::new(node));
    let gateway = CommandGateway::builder(registry(), bus)
        .wait_coordinator(waits)
        .build();
    let id = account_id();
    let error = gateway
        .send_and_wait(open(&id, 3), WaitPlan::processed())
        .await
        .unwrap_err();
    let result = error.result();
    assert_eq!(result.stage, CommandStage::Processed);
    assert!(!result.succeeded);
    assert_eq!(result.error_code, ErrorCode::ServiceUnavailable);
    assert_eq!(
        result.aggregate_version,
        Some(1),
        "the failure says what was appended"
    );
    assert_eq!(result.result.get("recorded"), Some(&json!(true)));
    assert_eq!(store.load(&id, 1, 1).await.unwrap().len(), 1);
}

/// A projection that fails on every stream.
#[derive(Debug)]
struct FailingProjection;

#[async_trait]
impl EventConsumer for FailingProjection {
    fn name(&self) -> &str {
        "failing"
    }

    async fn handle(&self, _stream: &DomainEventStream) -> Result<(), ConsumerError> {
        Err(ConsumerError::new(
            ErrorCode::domain("ReadModelDown"),
            "read model unreachable",
        ))
    }
}

/// A consumer that counts what it saw.
#[derive(Debug, Default)]
struct Counting {
    name: &'static str,
    seen: std::sync::Mutex<Vec<u64>>,
}

#[async_trait]
impl EventConsumer for Counting {
    fn name(&self) -> &str {
        self.name
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        self.seen.lock().unwrap().push(stream.version);
        Ok(())
    }
}

#[tokio::test]
async fn a_consumer_failure_fails_its_stage_only_and_keeps_history() {
    let healthy = Arc::new(Counting {
        name: "healthy",
        ..Default::default()
    });
    let processor = Arc::new(Counting {
        name: "notifier",
        ..Default::default()
    });
    let pipeline = LocalPipeline::builder(registry(), memory_store())
        .projection(Arc::new(FailingProjection))
        .projection(healthy.clone())
        .event_processor(processor.clone())
        .build();
    let id = account_id();
    let error = pipeline
        .gateway
        .send_and_wait(open(&id, 3), WaitPlan::new(CommandStage::Projected))
        .await
        .unwrap_err();
    assert_eq!(error.result().stage, CommandStage::Projected);
    assert_eq!(
        error.result().error_code,
        ErrorCode::domain("ReadModelDown")
    );
    assert_eq!(error.result().aggregate_version, Some(1));

    // The other consumers ran, on their own stages.
    let healthy_done = pipeline
        .gateway
        .send_and_wait(
            deposit(&id, 1),
            WaitPlan::new(CommandStage::EventHandled).for_function("notifier"),
        )
        .await
        .unwrap();
    assert_eq!(
        healthy_done
            .function
            .as_ref()
            .map(|f| f.processor_name.as_str()),
        Some("notifier")
    );
    assert_eq!(*processor.seen.lock().unwrap(), vec![1, 2]);
    assert_eq!(*healthy.seen.lock().unwrap(), vec![1, 2]);
    // History is untouched by the failures.
    assert_eq!(
        pipeline.store().load(&id, 1, u64::MAX).await.unwrap().len(),
        2
    );
}

#[tokio::test]
async fn a_caller_that_goes_away_releases_its_wait_and_the_command_goes_on() {
    let store = Arc::new(GatedEventStore::new(memory_store()));
    let pipeline = LocalPipeline::builder(registry(), store.clone()).build();
    let id = account_id();
    let create = open(&id, 1).with_request_id("abandoned");
    let command_id = create.id.clone();

    let gateway = pipeline.gateway.clone();
    let caller =
        tokio::spawn(async move { gateway.send_and_wait(create, WaitPlan::processed()).await });
    // The caller is registered once the command is on its way; then it disconnects.
    let registered = async {
        while pipeline.waits.waiting() == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), registered)
        .await
        .expect("the caller registers its wait within the deadline");
    let observer = pipeline.waits.observe(&command_id, WaitPlan::processed());
    caller.abort();
    assert!(caller.await.unwrap_err().is_cancelled());

    let mut observer = observer;
    store.release(1);
    let mut last = None;
    while let Some(result) = observer.next().await {
        last = Some(result);
    }
    let processed = last.unwrap();
    assert_eq!(
        (processed.stage, processed.succeeded),
        (CommandStage::Processed, true)
    );
    drop(observer);
    assert_eq!(pipeline.waits.waiting(), 0, "no handle leaked");
    assert!(store
        .find_request(&id, "abandoned")
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn a_stale_node_re_decides_an_unpinned_command_and_fails_a_pinned_one() {
    let store = memory_store();
    let node_a = LocalPipeline::builder(registry(), store.clone()).build();
    let node_b = LocalPipeline::builder(registry(), store.clone()).build();
    let id = account_id();
    send_ok(&node_a.gateway, open(&id, 10)).await;
    send_ok(&node_a.gateway, deposit(&id, 1)).await;
    // Node B writes behind node A's cache.
    send_ok(&node_b.gateway, deposit(&id, 2)).await;

    let redecided = send_ok(&node_a.gateway, deposit(&id, 3)).await;
    assert_eq!(
        redecided.aggregate_version,
        Some(4),
        "reloaded and decided again, at the next free version"
    );

    send_ok(&node_b.gateway, deposit(&id, 4)).await;
    let pinned = deposit(&id, 5).with_expected_version(4);
    let error = node_a
        .gateway
        .send_and_wait(pinned, WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(
        error.result().error_code,
        ErrorCode::CommandExpectVersionConflict,
        "a pinned command is never moved to another version: decided again on fresh state, \
         where history has passed its pin"
    );
    assert_eq!(error.result().aggregate_version, Some(5));

    let history = store.load(&id, 1, u64::MAX).await.unwrap();
    let versions: Vec<u64> = history.iter().map(|s| s.version).collect();
    assert_eq!(
        versions,
        vec![1, 2, 3, 4, 5],
        "contiguous, nothing overwritten"
    );
    let amounts: Vec<_> = history[1..]
        .iter()
        .map(|s| s.body[0].body["amount"].clone())
        .collect();
    assert_eq!(amounts, vec![json!(1), json!(2), json!(3), json!(4)]);

    // Pinned to the true version, it goes through.
    let pinned = deposit(&id, 5).with_expected_version(5);
    let ok = send_ok(&node_a.gateway, pinned).await;
    assert_eq!(ok.aggregate_version, Some(6));
}

#[tokio::test]
async fn a_pinned_version_that_is_not_current_is_rejected_before_the_handler() {
    let pipeline = LocalPipeline::builder(registry(), memory_store()).build();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 10)).await;
    let error = pipeline
        .gateway
        .send_and_wait(
            deposit(&id, 1).with_expected_version(7),
            WaitPlan::processed(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.result().error_code,
        ErrorCode::CommandExpectVersionConflict
    );
    assert_eq!(error.result().aggregate_version, Some(1));
}
