//! Roles joined by the in-memory bus: a gateway-only node (no event store) and processing
//! nodes with their own Bloom filters, restarts and TTL rotations (SPEC RQ-2..RQ-8, RQ-10).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use support::*;
use wow_core::command::{
    CommandBus, CommandBusError, InMemoryCommandBus, JsonCommand, ORIGINAL_COMMAND_ID,
};
use wow_core::event::NoopDomainEventBus;
use wow_core::eventsourcing::EventStore;
use wow_core::id::{Clock, ManualClock};
use wow_core::{CommandStage, ErrorCode, NamedAggregate};
use wow_runtime::command::{
    CommandGateway, DefaultCommandHandler, WaitCoordinator, WaitPlan, SENT,
};
use wow_runtime::idempotency::{
    BloomIdempotencyCheckerProvider, DefaultRequestIdChecker, EventStoreRequestIdExistenceChecker,
    IdempotencyChecker, IdempotencyCheckerProvider, IdempotencyConfig, RequestIdChecker,
};
use wow_runtime::metrics::PipelineMetrics;

/// A gateway-only service and a processing node, each with its own counters.
struct Roles {
    store: Arc<dyn EventStore>,
    bus: Arc<InMemoryCommandBus>,
    waits: Arc<WaitCoordinator>,
    gateway: CommandGateway,
    gateway_metrics: Arc<PipelineMetrics>,
}

impl Roles {
    fn new() -> Self {
        Self::with_gateway(|builder| builder)
    }

    fn with_gateway(
        configure: impl FnOnce(
            wow_runtime::command::CommandGatewayBuilder,
        ) -> wow_runtime::command::CommandGatewayBuilder,
    ) -> Self {
        let store = memory_store();
        let bus = Arc::new(InMemoryCommandBus::new(4, 64));
        let waits = WaitCoordinator::new();
        let gateway_metrics = Arc::new(PipelineMetrics::default());
        // The default checker: Bloom filters + NoopRequestIdExistenceChecker (no event store).
        let builder = CommandGateway::builder(registry(), bus.clone())
            .wait_coordinator(waits.clone())
            .metrics(gateway_metrics.clone());
        let gateway = configure(builder).build();
        Self {
            store,
            bus,
            waits,
            gateway,
            gateway_metrics,
        }
    }

    /// Starts a processing node (replacing the one before: a restart), with its own filters
    /// on `clock` when `checked`.
    fn start_node(&self, checked: bool, clock: Arc<dyn Clock>) -> Arc<PipelineMetrics> {
        let metrics = Arc::new(PipelineMetrics::default());
        let mut node = DefaultCommandHandler::builder(
            registry(),
            self.store.clone(),
            Arc::new(NoopDomainEventBus),
            self.waits.clone(),
        )
        .metrics(metrics.clone());
        if checked {
            node = node.request_id_checker(node_checker(&self.store, clock, &metrics));
        }
        self.bus.subscribe(Arc::new(node.build()));
        metrics
    }
}

fn node_checker(
    store: &Arc<dyn EventStore>,
    clock: Arc<dyn Clock>,
    metrics: &Arc<PipelineMetrics>,
) -> Arc<dyn RequestIdChecker> {
    let config = IdempotencyConfig {
        ttl: Duration::from_secs(60),
        expected_insertions: 10_000,
        ..Default::default()
    };
    Arc::new(
        DefaultRequestIdChecker::new(
            Arc::new(BloomIdempotencyCheckerProvider::with_clock(config, clock)),
            Arc::new(EventStoreRequestIdExistenceChecker::new(store.clone())),
        )
        .with_metrics(metrics.clone()),
    )
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::at(1_000_000))
}

#[tokio::test]
async fn gateway_only_lets_a_bloom_hit_through_and_the_node_rejects_it_before_the_handler() {
    let roles = Roles::new();
    let node = roles.start_node(true, clock());
    let id = opened(&roles.gateway, 10).await;
    let first = deposit(&id, 1).with_request_id("once");
    send_ok(&roles.gateway, first.clone()).await;
    let runs = node.snapshot().handler_runs;

    let error = roles
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(
        error.result().stage,
        CommandStage::Processed,
        "the node decided, not the gateway"
    );
    assert_eq!(error.result().aggregate_version, Some(2));
    assert_eq!(
        roles.gateway_metrics.snapshot().bloom_hits,
        1,
        "the gateway saw a Bloom hit and let it through"
    );
    assert_eq!(
        node.snapshot().duplicates_by_store,
        1,
        "the node's store check caught it"
    );
    assert_eq!(
        node.snapshot().handler_runs,
        runs,
        "the handler did not run again"
    );
}

#[tokio::test]
async fn waiting_for_sent_on_a_gateway_only_node_sees_a_resend_succeed() {
    let roles = Roles::new();
    roles.start_node(true, clock());
    let id = opened(&roles.gateway, 10).await;
    let first = deposit(&id, 1).with_request_id("r");
    send_ok(&roles.gateway, first.clone()).await;
    let sent = roles.gateway.send(resend(&first)).await.unwrap();
    assert_eq!((sent.stage, sent.succeeded), (CommandStage::Sent, true));
    let error = roles
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::DuplicateRequestId);
}

#[tokio::test]
async fn after_a_node_restart_the_handler_runs_again_and_the_append_rejects_the_duplicate() {
    let roles = Roles::new();
    roles.start_node(true, clock());
    let id = opened(&roles.gateway, 10).await;
    let first = deposit(&id, 1).with_request_id("before-restart");
    let original = send_ok(&roles.gateway, first.clone()).await;

    let restarted = roles.start_node(true, clock());
    let error = roles
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    let result = error.result();
    assert_eq!(result.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(result.aggregate_version, original.aggregate_version);
    assert_eq!(
        result.result.get(ORIGINAL_COMMAND_ID),
        Some(&json!(first.id))
    );
    let after = restarted.snapshot();
    assert_eq!(
        after.handler_runs, 1,
        "the new filter had not seen the id: the handler ran"
    );
    assert_eq!(after.duplicates_by_append, 1, "the append rejected it");
    assert_eq!(roles.store.load(&id, 1, u64::MAX).await.unwrap().len(), 2);
}

#[tokio::test]
async fn after_a_ttl_rotation_the_append_rejects_the_duplicate() {
    let roles = Roles::new();
    let clock = clock();
    let node = roles.start_node(true, clock.clone());
    let id = opened(&roles.gateway, 10).await;
    let first = deposit(&id, 1).with_request_id("old-intent");
    send_ok(&roles.gateway, first.clone()).await;

    // Within the window the node's filter catches it before the handler.
    roles
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(node.snapshot().duplicates_by_store, 1);
    // Two idle TTLs later both generations are gone.
    clock.advance(121_000);
    let runs = node.snapshot().handler_runs;
    let error = roles
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(node.snapshot().handler_runs, runs + 1);
    assert_eq!(node.snapshot().duplicates_by_append, 1);
}

#[tokio::test]
async fn without_a_node_checker_the_append_is_the_only_duplicate_check() {
    let roles = Roles::new();
    let node = roles.start_node(false, clock());
    let id = opened(&roles.gateway, 10).await;
    let first = deposit(&id, 1).with_request_id("unchecked");
    send_ok(&roles.gateway, first.clone()).await;
    let error = roles
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(
        node.snapshot().handler_runs,
        3,
        "open, deposit, and the resend all ran"
    );
    assert_eq!(node.snapshot().duplicates_by_append, 1);
}

/// A provider that counts the checkers it hands out, wrapping filters of its own.
#[derive(Debug)]
struct CountingProvider {
    inner: BloomIdempotencyCheckerProvider,
    asked: std::sync::atomic::AtomicUsize,
}

impl IdempotencyCheckerProvider for CountingProvider {
    fn checker(&self, named: &NamedAggregate) -> Arc<dyn IdempotencyChecker> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.checker(named)
    }
}

#[tokio::test]
async fn a_custom_provider_replaces_only_the_gateways_filters() {
    let provider = Arc::new(CountingProvider {
        inner: BloomIdempotencyCheckerProvider::new(IdempotencyConfig::disabled()),
        asked: Default::default(),
    });
    let roles = Roles::with_gateway(|builder| {
        builder.request_id_checker(Arc::new(DefaultRequestIdChecker::new(
            provider.clone(),
            Arc::new(wow_runtime::idempotency::NoopRequestIdExistenceChecker),
        )))
    });
    let node = roles.start_node(true, clock());
    let id = opened(&roles.gateway, 10).await;
    let first = deposit(&id, 1).with_request_id("custom");
    send_ok(&roles.gateway, first.clone()).await;
    let error = roles
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::DuplicateRequestId);
    assert!(
        provider.asked.load(std::sync::atomic::Ordering::SeqCst) >= 3,
        "the gateway used the custom provider"
    );
    assert_eq!(
        node.snapshot().duplicates_by_store,
        1,
        "the node's own filter still caught the resend"
    );
}

#[tokio::test]
async fn a_monolith_holds_two_filters_and_its_gateway_rejects_a_known_resend_before_sending() {
    let pipeline =
        wow_runtime::pipeline::LocalPipeline::builder(registry(), memory_store()).build();
    let id = account_id();
    send_ok(&pipeline.gateway, open(&id, 1)).await;
    let first = deposit(&id, 1).with_request_id("mono");
    send_ok(&pipeline.gateway, first.clone()).await;
    let runs = pipeline.metrics.snapshot().handler_runs;
    let error = pipeline
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    let result = error.result();
    assert_eq!(result.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(
        result.stage,
        CommandStage::Sent,
        "caught by the request-id precheck"
    );
    assert_eq!(
        result.result.get(SENT),
        Some(&json!(false)),
        "it never reached the bus"
    );
    assert_eq!(pipeline.metrics.snapshot().handler_runs, runs);
    // The node's filter is its own: after a node restart the gateway still knows the id.
    pipeline.restart_node();
    let error = pipeline
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().stage, CommandStage::Sent);
}

#[tokio::test]
async fn a_failed_send_releases_the_reservation() {
    let roles = Roles::new();
    let id = account_id();
    // No processing node subscribes yet: the bus refuses.
    let first = open(&id, 1).with_request_id("open-1");
    let error = roles
        .gateway
        .send_and_wait(first.clone(), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::ServiceUnavailable);
    assert_eq!(error.result().stage, CommandStage::Sent);
    assert_eq!(error.result().result.get(SENT), Some(&json!(false)));
    assert_eq!(roles.waits.waiting(), 0);

    roles.start_node(true, clock());
    let retried = send_ok(&roles.gateway, resend(&first)).await;
    assert_eq!(retried.aggregate_version, Some(1));
    assert_eq!(
        roles.gateway_metrics.snapshot().bloom_hits,
        0,
        "the retry was not taken for a duplicate"
    );
}

/// A bus that accepts nothing and never answers: a send that hangs.
#[derive(Debug)]
struct StalledBus;

#[async_trait]
impl CommandBus for StalledBus {
    async fn send(&self, _command: JsonCommand) -> Result<(), CommandBusError> {
        std::future::pending().await
    }
}

#[tokio::test(start_paused = true)]
async fn a_send_that_times_out_is_a_sent_failure_and_releases_the_reservation() {
    let gateway = CommandGateway::builder(registry(), Arc::new(StalledBus))
        .send_timeout(Duration::from_secs(2))
        .build();
    let id = account_id();
    let first = open(&id, 1).with_request_id("stalled");
    let error = gateway
        .send_and_wait(first.clone(), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().stage, CommandStage::Sent);
    assert_eq!(error.result().error_code, ErrorCode::ServiceUnavailable);
    assert!(
        !error.is_timeout(),
        "acceptance was not observed; no caller wait expired"
    );
    assert_eq!(gateway.wait_coordinator().waiting(), 0);
    let error = gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(
        gateway.metrics().snapshot().bloom_hits,
        0,
        "released: {:?}",
        error.result().error_code
    );
}

#[tokio::test]
async fn a_replayed_create_reports_the_original_outcome_and_a_competing_create_is_a_conflict() {
    let roles = Roles::new();
    roles.start_node(true, clock());
    let id = account_id();
    let create = open(&id, 5).with_request_id("create-1");
    send_ok(&roles.gateway, create.clone()).await;
    roles.start_node(true, clock()); // the new node's filter has not seen it

    let error = roles
        .gateway
        .send_and_wait(resend(&create), WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(error.result().aggregate_version, Some(1));
    assert_eq!(
        error.result().result.get(ORIGINAL_COMMAND_ID),
        Some(&json!(create.id))
    );

    let competing = open(&id, 9).with_request_id("create-2");
    let error = roles
        .gateway
        .send_and_wait(competing, WaitPlan::processed())
        .await
        .unwrap_err();
    assert_eq!(error.result().error_code, ErrorCode::DuplicateAggregateId);
    assert_eq!(roles.store.load(&id, 1, u64::MAX).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_node_accepts_commands_from_an_older_gateway_and_refuses_a_newer_protocol() {
    let roles = Roles::new();
    roles.start_node(true, clock());
    let id = account_id();
    // An older gateway sends neither the protocol nor the wait-stage header.
    let old = open(&id, 1);
    assert!(old.header.is_empty());
    let mut observer = roles.waits.observe(&old.id, WaitPlan::processed());
    roles.bus.send(old).await.unwrap();
    let processed = observer.next().await.unwrap();
    assert_eq!(
        (processed.stage, processed.succeeded),
        (CommandStage::Processed, true)
    );
    drop(observer);

    let newer = deposit(&id, 1).with_header(wow_runtime::command::PROTOCOL_HEADER, "99");
    let mut observer = roles.waits.observe(&newer.id, WaitPlan::processed());
    roles.bus.send(newer).await.unwrap();
    let refused = observer.next().await.unwrap();
    assert_eq!(refused.error_code, ErrorCode::IllegalState);
    assert_eq!(roles.store.load(&id, 1, u64::MAX).await.unwrap().len(), 1);
}

/// Counts the void commands the bus delivers, as a processing node's log would show them.
#[derive(Debug, Default)]
struct VoidDeliveries(std::sync::Mutex<Vec<String>>);

#[async_trait]
impl wow_core::command::CommandHandler for VoidDeliveries {
    async fn handle(&self, command: JsonCommand) {
        if command.is_void() {
            self.0.lock().unwrap().push(command.request_id.clone());
        }
    }
}

/// SPEC RQ-12: a gateway-only node has no history to ask, and a void command leaves none, so
/// a resend of a void command through it is not rejected: it is sent again and delivered
/// again (at least once), and each send is answered at `SENT`, the only stage a void
/// command has.
#[tokio::test]
async fn a_void_command_resent_to_a_gateway_only_node_is_sent_again() {
    let roles = Roles::new();
    let deliveries = Arc::new(VoidDeliveries::default());
    roles.bus.subscribe(deliveries.clone());
    let id = account_id();
    let note = command(&id, AccountCommand::Audit).with_request_id("note-gw");
    for message in [note.clone(), resend(&note), resend(&note)] {
        let sent = roles
            .gateway
            .send_and_wait(message, WaitPlan::sent())
            .await
            .expect("a void resend through a gateway-only node is sent");
        assert_eq!(sent.stage, CommandStage::Sent);
        assert_eq!(sent.error_code, ErrorCode::Ok);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while deliveries.0.lock().unwrap().len() < 3 && tokio::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        *deliveries.0.lock().unwrap(),
        vec!["note-gw"; 3],
        "delivered once per send: at least once, never dropped"
    );
}
