//! Void commands through a gateway backed by history (SPEC RQ-12, ID-3): a resend is dropped
//! only on the gateway's exact record of its (aggregate, request id) within the filter's
//! window, never on a Bloom filter's "maybe seen" alone; otherwise it is delivered again (at
//! least once). Time is a manual clock shared by the filters and the gateway: no sleeps.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use support::*;
use wow_core::command::{CommandHandler, InMemoryCommandBus, JsonCommand};
use wow_core::id::ManualClock;
use wow_core::{AggregateId, CommandStage, ErrorCode, NamedAggregate};
use wow_runtime::command::{CommandGateway, CommandGatewayBuilder, WaitPlan, SENT};
use wow_runtime::idempotency::{
    BloomIdempotencyCheckerProvider, DefaultRequestIdChecker, EventStoreRequestIdExistenceChecker,
    IdempotencyChecker, IdempotencyCheckerProvider, IdempotencyConfig,
};
use wow_runtime::metrics::PipelineMetrics;

const TTL: Duration = Duration::from_secs(60);

/// The void commands the bus delivered, as a processing node's log would show them: the
/// aggregate id and request id of each, in delivery order.
#[derive(Debug, Default)]
struct Deliveries(Mutex<Vec<(AggregateId, String)>>);

#[async_trait]
impl CommandHandler for Deliveries {
    async fn handle(&self, command: JsonCommand) {
        if command.is_void() {
            self.0
                .lock()
                .unwrap()
                .push((command.aggregate_id.clone(), command.request_id.clone()));
        }
    }
}

impl Deliveries {
    fn of(&self, aggregate: &AggregateId, request_id: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(id, request)| id == aggregate && request == request_id)
            .count()
    }
}

/// A filter that says "maybe seen" of every request id: every check is a false positive.
#[derive(Debug)]
struct AlwaysMaybe;

impl IdempotencyChecker for AlwaysMaybe {
    fn check_and_insert(&self, _request_id: &str) -> bool {
        false
    }

    fn release(&self, _request_id: &str) {}
}

impl IdempotencyCheckerProvider for AlwaysMaybe {
    fn checker(&self, _named: &NamedAggregate) -> Arc<dyn IdempotencyChecker> {
        Arc::new(AlwaysMaybe)
    }
}

/// A gateway whose checker asks history (as `wow serve`'s does), on a manual clock, sending
/// to a bus whose node records the void commands it is given.
struct Fixture {
    gateway: CommandGateway,
    deliveries: Arc<Deliveries>,
    clock: Arc<ManualClock>,
    metrics: Arc<PipelineMetrics>,
}

impl Fixture {
    fn new() -> Self {
        Self::with(IdempotencyConfig::default(), None, |builder| builder)
    }

    /// A gateway whose filters are `filters` instead of Bloom filters.
    fn new_with_filters(filters: Arc<dyn IdempotencyCheckerProvider>) -> Self {
        Self::with(IdempotencyConfig::default(), Some(filters), |builder| {
            builder
        })
    }

    /// `filters`: the Bloom filters of `config` when `None`.
    fn with(
        config: IdempotencyConfig,
        filters: Option<Arc<dyn IdempotencyCheckerProvider>>,
        configure: impl FnOnce(CommandGatewayBuilder) -> CommandGatewayBuilder,
    ) -> Self {
        let config = IdempotencyConfig { ttl: TTL, ..config };
        let clock = Arc::new(ManualClock::at(1_000_000));
        let metrics = Arc::new(PipelineMetrics::default());
        let filters = filters.unwrap_or_else(|| {
            Arc::new(BloomIdempotencyCheckerProvider::with_clock(
                config.clone(),
                clock.clone(),
            ))
        });
        let checker = DefaultRequestIdChecker::new(
            filters,
            Arc::new(EventStoreRequestIdExistenceChecker::new(memory_store())),
        )
        .with_metrics(metrics.clone());
        let bus = Arc::new(InMemoryCommandBus::new(4, 1024));
        let deliveries = Arc::new(Deliveries::default());
        bus.subscribe(deliveries.clone());
        let builder = CommandGateway::builder(registry(), bus.clone())
            .request_id_checker(Arc::new(checker))
            .idempotency(config)
            .clock(clock.clone())
            .metrics(metrics.clone());
        Self {
            gateway: configure(builder).build(),
            deliveries,
            clock,
            metrics,
        }
    }

    /// Sends the void `note` and asserts it went out at `SENT`.
    async fn sent(&self, note: JsonCommand) {
        let sent = self
            .gateway
            .send_and_wait(note, WaitPlan::sent())
            .await
            .expect("the void command is sent");
        assert_eq!(
            (sent.stage, sent.error_code, sent.result.get(SENT)),
            (CommandStage::Sent, ErrorCode::Ok, Some(&json!(true)))
        );
    }

    /// Sends the void `note` and asserts it was refused as a duplicate, not sent.
    async fn dropped(&self, note: JsonCommand) {
        let error = self
            .gateway
            .send_and_wait(note, WaitPlan::sent())
            .await
            .expect_err("the resend is dropped");
        assert_eq!(error.error_code(), &ErrorCode::DuplicateRequestId);
        assert_eq!(error.result().result.get(SENT), Some(&json!(false)));
    }

    /// Waits until every void command sent to `aggregate` before now was delivered: a marker
    /// sent after them on the same aggregate (one partition, in order) has arrived.
    async fn drained(&self, aggregate: &AggregateId) {
        let marker = wow_core::id::new_id();
        self.sent(note(aggregate, &marker)).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.deliveries.of(aggregate, &marker) == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the marker was not delivered"
            );
            tokio::task::yield_now().await;
        }
    }
}

fn audit(id: &str) -> AggregateId {
    AggregateId::new("bank", "account", id, "t1")
}

fn note(aggregate: &AggregateId, request_id: &str) -> JsonCommand {
    command(aggregate, AccountCommand::Audit).with_request_id(request_id)
}

/// SPEC ID-3: the issue's case, `n2` after `n1` with one request id, both delivered; and a
/// third aggregate of another tenant.
#[tokio::test]
async fn a_void_command_to_another_aggregate_with_a_used_request_id_is_delivered() {
    let f = Fixture::new();
    let mut elsewhere = audit("n1");
    elsewhere.tenant_id = "t2".into();
    for aggregate in [audit("n1"), audit("n2"), elsewhere] {
        f.sent(note(&aggregate, "same")).await;
        f.drained(&aggregate).await;
        assert_eq!(f.deliveries.of(&aggregate, "same"), 1, "{aggregate}");
    }
}

/// SPEC RQ-12: the same (aggregate, request id) again within the window is refused
/// `DuplicateRequestId` at `SENT` and never reaches the node.
#[tokio::test]
async fn an_exact_void_resend_within_the_window_is_dropped_as_a_duplicate() {
    let f = Fixture::new();
    let n1 = audit("n1");
    let first = note(&n1, "r-1");
    f.sent(first.clone()).await;
    f.clock.advance(59_999);
    f.dropped(resend(&first)).await;
    f.drained(&n1).await;
    assert_eq!(
        f.deliveries.of(&n1, "r-1"),
        1,
        "delivered once, never again"
    );
}

/// A filter that says "maybe seen" of everything: a fresh void command is still delivered,
/// because the gateway's exact record does not hold it; an exact resend is still dropped.
#[tokio::test]
async fn a_bloom_false_positive_does_not_drop_a_fresh_void_command() {
    let f = Fixture::new_with_filters(Arc::new(AlwaysMaybe));
    let n1 = audit("n1");
    f.sent(note(&n1, "fresh")).await;
    f.sent(note(&n1, "also-fresh")).await;
    f.dropped(note(&n1, "fresh")).await;
    f.drained(&n1).await;
    assert_eq!(f.deliveries.of(&n1, "fresh"), 1);
    assert_eq!(f.deliveries.of(&n1, "also-fresh"), 1);
    assert!(
        f.metrics.snapshot().bloom_hits >= 3,
        "every check was a filter hit"
    );
}

/// A real Bloom filter far too small for its load (64 bits a shard for a thousand ids): most
/// fresh ids are false positives, and every one of them is delivered all the same.
#[tokio::test]
async fn false_positives_of_an_overfull_filter_drop_no_fresh_void_command() {
    let f = Fixture::with(
        IdempotencyConfig {
            expected_insertions: 1,
            fpp: 0.5,
            ..IdempotencyConfig::default()
        },
        None,
        |builder| builder,
    );
    let n1 = audit("n1");
    for i in 0..1000 {
        f.sent(note(&n1, &format!("r-{i}"))).await;
    }
    f.drained(&n1).await;
    for i in 0..1000 {
        assert_eq!(f.deliveries.of(&n1, &format!("r-{i}")), 1, "r-{i}");
    }
    assert!(
        f.metrics.snapshot().bloom_hits > 500,
        "the filter answered 'maybe seen' for most of them: {}",
        f.metrics.snapshot().bloom_hits
    );
}

/// Past the window the record has forgotten the send: the resend is delivered again (at least
/// once), though the filter, which keeps a generation longer, still says "maybe seen".
#[tokio::test]
async fn a_void_resend_after_the_window_is_delivered_again() {
    let f = Fixture::new();
    let n1 = audit("n1");
    let first = note(&n1, "r-1");
    f.sent(first.clone()).await;
    f.clock.advance(60_000);
    let hits = f.metrics.snapshot().bloom_hits;
    f.sent(resend(&first)).await;
    assert_eq!(
        f.metrics.snapshot().bloom_hits,
        hits + 1,
        "the filter still remembered it"
    );
    f.dropped(resend(&first)).await;
    f.drained(&n1).await;
    assert_eq!(
        f.deliveries.of(&n1, "r-1"),
        2,
        "the window starts again at the delivered resend"
    );
}

/// With the filters off every request id looks new: no void resend is dropped.
#[tokio::test]
async fn a_gateway_with_its_filters_off_drops_no_void_resend() {
    let f = Fixture::with(IdempotencyConfig::disabled(), None, |builder| builder);
    let n1 = audit("n1");
    let first = note(&n1, "r-1");
    f.sent(first.clone()).await;
    f.sent(resend(&first)).await;
    f.drained(&n1).await;
    assert_eq!(f.deliveries.of(&n1, "r-1"), 2);
}

/// The record holds at most its capacity; the send it forgot first is delivered again.
#[tokio::test]
async fn a_void_command_evicted_from_a_full_record_is_delivered_again() {
    let f = Fixture::with(IdempotencyConfig::default(), None, |builder| {
        builder.void_record_capacity(2)
    });
    let (a, b, c) = (audit("a"), audit("b"), audit("c"));
    for aggregate in [&a, &b, &c] {
        f.sent(note(aggregate, "r")).await;
    }
    f.dropped(note(&c, "r")).await;
    f.sent(note(&a, "r")).await;
    f.drained(&a).await;
    assert_eq!(f.deliveries.of(&a, "r"), 2, "evicted, then delivered again");
}

/// A void command whose send failed is forgotten: its retry goes out, even where the filter
/// still says "maybe seen".
#[tokio::test]
async fn a_void_command_whose_send_failed_goes_out_on_its_retry() {
    let deliveries = Arc::new(Deliveries::default());
    let bus = Arc::new(InMemoryCommandBus::new(1, 16));
    let gateway = CommandGateway::builder(registry(), bus.clone())
        .request_id_checker(Arc::new(DefaultRequestIdChecker::new(
            Arc::new(AlwaysMaybe),
            Arc::new(EventStoreRequestIdExistenceChecker::new(memory_store())),
        )))
        .clock(Arc::new(ManualClock::at(1_000_000)))
        .build();
    let n1 = audit("n1");
    let refused = gateway
        .send_and_wait(note(&n1, "r"), WaitPlan::sent())
        .await
        .expect_err("nobody subscribes yet");
    assert_eq!(refused.result().result.get(SENT), Some(&json!(false)));
    assert_ne!(refused.error_code(), &ErrorCode::DuplicateRequestId);
    bus.subscribe(deliveries.clone());
    gateway
        .send_and_wait(note(&n1, "r"), WaitPlan::sent())
        .await
        .expect("the retry goes out");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while deliveries.of(&n1, "r") == 0 {
        assert!(tokio::time::Instant::now() < deadline, "not delivered");
        tokio::task::yield_now().await;
    }
}
