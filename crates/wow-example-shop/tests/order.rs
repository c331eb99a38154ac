//! The order: priced by a pricing service when it is placed (SPEC DM-3), expired by a deadline
//! when it is not paid in time (SPEC DM-2), its stock held by the `stock` saga and given back
//! when it expires.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wow_core::eventsourcing::{History, InMemoryEventStore, RequestLog};

use serde_json::json;
use wow_core::aggregate::{AggregateRegistry, AggregateSpec, Services};
use wow_core::command::CommandKind;
use wow_core::deadline::DeadlineStore;
use wow_core::id::ManualClock;
use wow_core::{AggregateId, CommandMessage, CommandResult, ErrorCode};
use wow_example_shop::order::*;
use wow_example_shop::product::{Product, ProductCreated, ProductEvent};
use wow_example_shop::stock::StockSaga;
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

const T0: i64 = 1_800_000_000_000;
const FIFTEEN_MINUTES: i64 = 15 * 60 * 1000;

/// A pricing service whose answers the test sets: a price, a failure, or no answer at all;
/// it counts the calls.
#[derive(Debug, Default)]
struct FakePricing {
    calls: AtomicUsize,
    failing: AtomicBool,
    hanging: AtomicBool,
    panicking: AtomicBool,
}

#[wow_core::async_trait]
impl Pricing for FakePricing {
    async fn unit_price(&self, sku: &str) -> Result<u64, PricingError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.hanging.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        tokio::task::yield_now().await;
        assert!(
            !self.panicking.load(Ordering::SeqCst),
            "the pricing client panicked"
        );
        if self.failing.load(Ordering::SeqCst) {
            return Err(PricingError("the price list is down".to_owned()));
        }
        Ok(if sku == "MUG-1" { 1_200 } else { 500 })
    }
}

fn prices(fake: &Arc<FakePricing>) -> Prices {
    Prices(fake.clone())
}

/// A spec of the order with product `p-1` (SKU `MUG-1`) in stock, as placing reads it.
fn order_spec() -> AggregateSpec<Order> {
    AggregateSpec::<Order>::new().with_aggregate::<Product>(
        "p-1",
        [ProductEvent::ProductCreated(ProductCreated {
            sku: "MUG-1".to_owned(),
            name: "Mug".to_owned(),
            stock: 3,
        })],
    )
}

fn place(quantity: u64) -> OrderCommand {
    OrderCommand::Place(Place {
        product: "p-1".to_owned(),
        sku: "MUG-1".to_owned(),
        quantity,
    })
}

fn placed_at(at: i64) -> OrderEvent {
    OrderEvent::OrderPlaced(OrderPlaced {
        product: "p-1".to_owned(),
        sku: "MUG-1".to_owned(),
        quantity: 2,
        unit_price: 1_200,
        total: 2_400,
        expires_at: at + FIFTEEN_MINUTES,
    })
}

#[test]
fn an_order_is_placed_at_the_quoted_price_and_its_expiry_is_scheduled() {
    let fake = Arc::new(FakePricing::default());
    order_spec()
        .with_service(prices(&fake))
        .given_nothing()
        .at(T0)
        .when(place(2))
        .expect_events([placed_at(T0)])
        .expect_deadlines(|pending| {
            assert_eq!(pending.len(), 1);
            assert_eq!(pending[0].name, "expire");
            assert_eq!(pending[0].due_at, T0 + FIFTEEN_MINUTES);
        });
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_failing_pricing_service_is_not_a_decision() {
    let fake = Arc::new(FakePricing::default());
    fake.failing.store(true, Ordering::SeqCst);
    order_spec()
        .with_service(prices(&fake))
        .given_nothing()
        .when(place(2))
        .expect_error_code(ErrorCode::ServiceFailed);
}

#[test]
fn paying_cancels_the_expiry_and_an_unpaid_order_expires_when_its_time_comes() {
    AggregateSpec::<Order>::new()
        .given([placed_at(T0)])
        .at(T0)
        .when(OrderCommand::Pay(Pay { amount: 2_400 }))
        .expect_events([OrderEvent::OrderPaid(OrderPaid {
            amount: 2_400,
            product: "p-1".to_owned(),
        })])
        .expect_deadlines(|pending| assert!(pending.is_empty()))
        .advance(Duration::from_secs(3600))
        .expect_fired([]);
    AggregateSpec::<Order>::new()
        .given([placed_at(T0)])
        .at(T0)
        .when(OrderCommand::Pay(Pay { amount: 1 }))
        .expect_error_code(ErrorCode::domain("WrongAmount"))
        .advance(Duration::from_millis(FIFTEEN_MINUTES as u64))
        .expect_fired([OrderCommand::Expire(Expire {})])
        .expect_events([OrderEvent::OrderExpired(OrderExpired {
            product: "p-1".to_owned(),
            quantity: 2,
        })])
        .expect_state(|order| assert_eq!(order.status, OrderStatus::Expired));
}

fn registry() -> AggregateRegistry {
    let mut registry = AggregateRegistry::new();
    registry.register::<Order>().unwrap();
    registry.register::<Product>().unwrap();
    registry
}

fn order_id(id: &str) -> AggregateId {
    AggregateId::new("shop", "order", id, "t1")
}

fn command(
    id: &AggregateId,
    name: &str,
    body: serde_json::Value,
    request_id: &str,
) -> wow_core::command::JsonCommand {
    CommandMessage::new(id.clone(), name, CommandKind::Normal, body).with_request_id(request_id)
}

async fn send(
    pipeline: &LocalPipeline,
    command: wow_core::command::JsonCommand,
) -> Result<CommandResult, CommandResult> {
    match pipeline
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
    {
        Ok(result) => Ok(result),
        Err(wow_core::command::CommandResultError::Failed(result)) => Err(*result),
        Err(other) => panic!("the command was not decided: {other}"),
    }
}

/// Creates product `p-1` (SKU `MUG-1`, 3 in stock) in tenant `t1` through `pipeline`.
async fn stocked(pipeline: &LocalPipeline) -> AggregateId {
    let product = AggregateId::new("shop", "product", "p-1", "t1");
    let create = CommandMessage::new(
        product.clone(),
        "create",
        CommandKind::Create,
        json!({"sku": "MUG-1", "name": "Mug", "stock": 3}),
    );
    send(pipeline, create).await.unwrap();
    product
}

fn placing(id: &AggregateId, request_id: &str) -> wow_core::command::JsonCommand {
    command(
        id,
        "place",
        json!({"product": "p-1", "sku": "MUG-1", "quantity": 2}),
        request_id,
    )
}

#[tokio::test]
async fn a_failed_price_records_nothing_and_the_resend_decides_again() {
    let fake = Arc::new(FakePricing::default());
    fake.failing.store(true, Ordering::SeqCst);
    let store = Arc::new(InMemoryEventStore::new());
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .services(Services::new().with(prices(&fake)))
        .build();
    stocked(&pipeline).await;
    let order = order_id("o-1");
    let failed = send(&pipeline, placing(&order, "r-place"))
        .await
        .unwrap_err();
    assert_eq!(failed.error_code, ErrorCode::ServiceFailed);
    assert!(store.load(&order, 1, u64::MAX).await.unwrap().is_empty());
    assert!(
        store
            .find_request(&order, "r-place")
            .await
            .unwrap()
            .is_none(),
        "a service failure is not the request's decision"
    );
    fake.failing.store(false, Ordering::SeqCst);
    let placed = send(&pipeline, placing(&order, "r-place")).await.unwrap();
    assert_eq!(placed.aggregate_version, Some(1));
    let streams = store.load(&order, 1, u64::MAX).await.unwrap();
    assert_eq!(
        streams[0].body[0].body["unitPrice"]
            .as_u64()
            .or(streams[0].body[0].body["unit_price"].as_u64()),
        Some(1_200)
    );
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_slow_pricing_service_is_cut_at_the_commands_deadline() {
    let fake = Arc::new(FakePricing::default());
    fake.hanging.store(true, Ordering::SeqCst);
    let pipeline = LocalPipeline::builder(registry(), Arc::new(InMemoryEventStore::new()))
        .services(Services::new().with(prices(&fake)))
        .decision_budget(Duration::from_millis(200))
        .build();
    stocked(&pipeline).await;
    let failed = send(&pipeline, placing(&order_id("o-slow"), "r-1"))
        .await
        .unwrap_err();
    assert_eq!(failed.error_code, ErrorCode::ServiceFailed);
    assert!(
        failed.error_msg.contains("did not answer in time"),
        "{}",
        failed.error_msg
    );
}

#[tokio::test]
async fn replaying_history_never_asks_the_price_again() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shop-order-{}.db", wow_core::id::new_id()));
    let fake = Arc::new(FakePricing::default());
    let order = order_id("o-replay");
    {
        let store = Arc::new(
            wow_sqlite::SqliteStore::open(wow_sqlite::SqliteOptions::new(&path))
                .await
                .unwrap(),
        );
        let pipeline = LocalPipeline::builder(registry(), store)
            .services(Services::new().with(prices(&fake)))
            .build();
        stocked(&pipeline).await;
        send(&pipeline, placing(&order, "r-place")).await.unwrap();
    }
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    // A restart: a new process on the same file rebuilds the order from its history.
    let store = Arc::new(
        wow_sqlite::SqliteStore::open(wow_sqlite::SqliteOptions::new(&path))
            .await
            .unwrap(),
    );
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .services(Services::new().with(prices(&fake)))
        .build();
    let paid = send(
        &pipeline,
        command(&order, "pay", json!({"amount": 2_400}), "r-pay"),
    )
    .await
    .unwrap();
    assert_eq!(
        paid.aggregate_version,
        Some(2),
        "the total replayed from history is the quoted one"
    );
    let resent = send(&pipeline, placing(&order, "r-place")).await;
    assert!(resent.is_err(), "the placing's request id was decided");
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        1,
        "history is replayed, the price is never asked again"
    );
    assert!(
        store.scheduled_for(&order).await.unwrap().is_empty(),
        "paying cancelled the expiry"
    );
}

#[tokio::test]
async fn an_expired_order_gives_its_stock_back() {
    let fake = Arc::new(FakePricing::default());
    let store = Arc::new(InMemoryEventStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(clock.clone())
        .services(Services::new().with(prices(&fake)))
        .saga(Arc::new(StockSaga))
        .deadlines(store.clone())
        .build();
    let product = stocked(&pipeline).await;
    let order = order_id("o-expiring");
    pipeline
        .gateway
        .send_and_wait(
            placing(&order, "r-place"),
            WaitPlan::new(wow_core::CommandStage::SagaHandled),
        )
        .await
        .unwrap();
    let stock = || async {
        let last = store.load(&product, 1, u64::MAX).await.unwrap();
        last.last().unwrap().body[0].body["stock"].as_u64().unwrap()
    };
    assert_eq!(stock().await, 1, "the placed order holds two units");

    clock.advance(FIFTEEN_MINUTES);
    let scheduler = pipeline.deadline_scheduler(store.clone());
    assert_eq!(scheduler.fire_due().await.unwrap().fired, 1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while stock().await != 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stock never came back"
        );
        tokio::task::yield_now().await;
    }
    assert!(store.scheduled_for(&order).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_panic_after_an_await_in_decide_fails_that_command_only() {
    let fake = Arc::new(FakePricing::default());
    fake.panicking.store(true, Ordering::SeqCst);
    let store = Arc::new(InMemoryEventStore::new());
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .services(Services::new().with(prices(&fake)))
        .build();
    stocked(&pipeline).await;
    let order = order_id("o-panic");
    let failed = send(&pipeline, placing(&order, "r-1")).await.unwrap_err();
    assert_eq!(failed.error_code, ErrorCode::InternalServerError);
    assert!(
        store.find_request(&order, "r-1").await.unwrap().is_none(),
        "nothing recorded"
    );
    fake.panicking.store(false, Ordering::SeqCst);
    send(&pipeline, placing(&order, "r-1")).await.unwrap();
}

#[test]
fn an_order_for_a_product_that_does_not_exist_or_of_another_sku_is_refused() {
    let fake = Arc::new(FakePricing::default());
    AggregateSpec::<Order>::new()
        .with_aggregate::<Product>("p-1", [])
        .with_service(prices(&fake))
        .given_nothing()
        .when(place(2))
        .expect_error_code(ErrorCode::domain("NoSuchProduct"));
    order_spec()
        .with_service(prices(&fake))
        .given_nothing()
        .when(OrderCommand::Place(Place {
            product: "p-1".to_owned(),
            sku: "CUP-9".to_owned(),
            quantity: 1,
        }))
        .expect_error_code(ErrorCode::domain("WrongSku"));
    order_spec()
        .with_service(prices(&fake))
        .given_nothing()
        .when(place(1))
        .expect_conditions(&[("product", "p-1", 1)]);
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        1,
        "a refused order asks no price"
    );
}

#[tokio::test]
async fn an_order_placed_through_a_node_reads_the_product_from_the_store_in_its_tenant() {
    let fake = Arc::new(FakePricing::default());
    let pipeline = LocalPipeline::builder(registry(), Arc::new(InMemoryEventStore::new()))
        .services(Services::new().with(prices(&fake)))
        .build();
    let refused = send(&pipeline, placing(&order_id("o-early"), "r-1"))
        .await
        .unwrap_err();
    assert_eq!(refused.error_code, ErrorCode::domain("NoSuchProduct"));
    stocked(&pipeline).await;
    send(&pipeline, placing(&order_id("o-later"), "r-1"))
        .await
        .unwrap();
    let mut elsewhere = order_id("o-elsewhere");
    elsewhere.tenant_id = "t2".to_owned();
    let other_tenant = send(&pipeline, placing(&elsewhere, "r-1"))
        .await
        .unwrap_err();
    assert_eq!(other_tenant.error_code, ErrorCode::domain("NoSuchProduct"));
}

/// What `read` answers once `done` holds of it, read again until then (10 s at most: the
/// view is projected on its own way, after the command answered).
async fn until<T: std::fmt::Debug, F: std::future::Future<Output = T>>(
    what: &str,
    read: impl Fn() -> F,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = read().await;
        if done(&now) {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the view never saw {what}: {now:?}"
        );
        tokio::task::yield_now().await;
    }
}

/// SPEC DM-4: `product_orders`, over products and orders, follows an order from its placing
/// to its expiry: the line, its reservation by the `stock` saga, and the stock given back.
#[tokio::test]
async fn the_product_orders_view_follows_an_order_and_its_reservation() {
    use wow_core::view::{InMemoryViewStore, ViewKey, ViewStore};
    use wow_example_shop::product_orders::{OrderLineStatus, ProductOrders, ProductOrdersRow};

    let fake = Arc::new(FakePricing::default());
    let store = Arc::new(InMemoryEventStore::new());
    let views = Arc::new(InMemoryViewStore::new());
    let clock = Arc::new(ManualClock::at(T0));
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(clock.clone())
        .services(Services::new().with(prices(&fake)))
        .saga(Arc::new(StockSaga))
        .projection(Arc::new(wow_runtime::view::MultiStreamProjection::<
            ProductOrders,
        >::new(views.clone())))
        .deadlines(store.clone())
        .build();
    stocked(&pipeline).await;
    let order = order_id("o-view");
    pipeline
        .gateway
        .send_and_wait(
            placing(&order, "r-place"),
            WaitPlan::new(wow_core::CommandStage::SagaHandled),
        )
        .await
        .unwrap();
    let row = || async {
        let row = views
            .load(&ViewKey::new("product_orders", "t1", "p-1"))
            .await
            .unwrap()
            .expect("the product has a row");
        serde_json::from_value::<ProductOrdersRow>(row.state).unwrap()
    };
    // The saga's reservation is a stream of the product, projected on its own way.
    let placed = until("the reservation", row, |now| {
        now.orders.first().is_some_and(|line| line.reserved)
    })
    .await;
    assert_eq!((placed.sku.as_str(), placed.stock), ("MUG-1", 1));
    assert_eq!(placed.orders.len(), 1);
    assert_eq!(placed.orders[0].status, OrderLineStatus::Placed);

    clock.advance(FIFTEEN_MINUTES);
    let scheduler = pipeline.deadline_scheduler(store.clone());
    assert_eq!(scheduler.fire_due().await.unwrap().fired, 1);
    let released = until("the release", row, |now| {
        now.stock == 3 && now.orders.first().is_some_and(|line| !line.reserved)
    })
    .await;
    assert_eq!(released.orders[0].status, OrderLineStatus::Expired);
}
