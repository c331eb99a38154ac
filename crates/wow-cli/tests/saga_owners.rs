//! Owners through sagas (SPEC TN-2), over real HTTP with owner-bound tokens on SQLite and
//! PostgreSQL, and through a gateway and a processor over NATS.
//!
//! - The shop as served (`wow serve --example shop`): its `stock` saga acts across owners, as
//!   the shop declares, so bob's order holds units of alice's product; bob himself reaches
//!   nothing of that product (403).
//! - The same shop with a `stock` saga held to its owner (the framework's default): bob's
//!   order on alice's product is placed, its saga step is refused
//!   `IllegalAccessOwnerAggregate` by the node and recorded for compensation, and alice's
//!   product is untouched; bob's order on his own product holds its units.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use support::Served;
use wow_core::compensation::FailureQuery;
use wow_core::event::ConsumerError;
use wow_core::saga::{Saga, SagaContext};
use wow_core::{DomainEventStream, ErrorCode, Stores};
use wow_example_shop::order::{Order, OrderEvent, OrderPolicy, PriceList, Prices};
use wow_example_shop::product::Product;
use wow_example_shop::stock::StockSaga;
use wow_http::TokenBinding;
use wow_service::{RunningService, Service, Settings};

const TOKENS: &str = "alice=tenant-a/alice,bob=tenant-a/bob";

struct Api {
    client: Client,
    address: String,
}

impl Api {
    fn at(address: &str) -> Self {
        Self {
            client: Client::new(),
            address: address.to_owned(),
        }
    }

    async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `POST /{path}` as `token`, waiting for `stage`.
    async fn command(
        &self,
        token: &str,
        path: &str,
        request_id: &str,
        stage: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let request = self
            .client
            .post(format!("http://{}/{path}", self.address))
            .bearer_auth(token)
            .header("Command-Request-Id", request_id)
            .header("Command-Wait-Stage", stage)
            .header("Command-Wait-Timeout", "20000")
            .json(&body);
        Self::answer(request).await
    }

    async fn get(&self, token: &str, path: &str) -> (StatusCode, Value) {
        let request = self
            .client
            .get(format!("http://{}/{path}", self.address))
            .bearer_auth(token);
        Self::answer(request).await
    }

    /// The state of `path` (`product/p-a`) as `token` reads it.
    async fn state(&self, token: &str, path: &str) -> Value {
        let (status, body) = self.get(token, &format!("{path}/state")).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        body
    }

    async fn create_product(&self, token: &str, id: &str, sku: &str) {
        let (status, body) = self
            .command(
                token,
                &format!("product/{id}/create"),
                &format!("create-{id}"),
                "PROCESSED",
                json!({"sku": sku, "name": "Mug", "stock": 3}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{id}: {body}");
    }

    /// Places `order` for two units of `product` as `token`, waiting until the sagas ran.
    async fn place(&self, token: &str, order: &str, product: &str, sku: &str) -> Value {
        let (_, body) = self
            .command(
                token,
                &format!("order/{order}/place"),
                &format!("place-{order}"),
                "SAGA_HANDLED",
                json!({"product": product, "sku": sku, "quantity": 2}),
            )
            .await;
        body
    }
}

/// Bob reaches nothing of alice's product `p-a` himself: every command and read is 403.
async fn bob_cannot_touch(api: &Api) {
    for (command, body) in [
        ("reserve", json!({"order": "o-sneak", "quantity": 1})),
        ("release", json!({"order": "o-a"})),
        ("adjust_stock", json!({"by": -3})),
        ("rename", json!({"name": "Bob's now"})),
    ] {
        let (status, answer) = api
            .command(
                "bob",
                &format!("product/p-a/{command}"),
                &format!("bob-{command}"),
                "PROCESSED",
                body,
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{command}: {answer}");
        assert_eq!(
            answer["errorCode"], "IllegalAccessOwnerAggregate",
            "{command}: {answer}"
        );
    }
    let (status, answer) = api.get("bob", "product/p-a/state").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
}

/// The shop as served: its stock saga acts across owners.
async fn a_buyers_order_holds_a_sellers_stock(api: &Api) {
    api.create_product("alice", "p-a", "MUG-A").await;
    let placed = api.place("bob", "o-b", "p-a", "MUG-A").await;
    assert_eq!(placed["errorCode"], "Ok", "{placed}");
    let product = api.state("alice", "product/p-a").await;
    assert_eq!(product["stock"], 1, "{product}");
    assert_eq!(product["reserved"], json!({"o-b": 2}), "{product}");
    // The order is bob's: alice cannot read it.
    let (status, answer) = api.get("alice", "order/o-b/state").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    bob_cannot_touch(api).await;
    let product = api.state("alice", "product/p-a").await;
    assert_eq!(
        (&product["stock"], &product["name"]),
        (&json!(1), &json!("Mug"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shops_stock_saga_holds_another_owners_stock_for_an_order_on_sqlite() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("shop.db").display());
    let served = serve_shop(&store);
    a_buyers_order_holds_a_sellers_stock(&Api::at(&served.address)).await;
    assert!(served.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shops_stock_saga_holds_another_owners_stock_for_an_order_on_postgres() {
    let Some((base, schema)) = support::postgres_schema("saga_owners") else {
        return;
    };
    let served = serve_shop(&format!("{base}?schema={schema}"));
    a_buyers_order_holds_a_sellers_stock(&Api::at(&served.address)).await;
    assert!(served.stop().success());
    support::drop_schema(&base, &schema);
}

fn serve_shop(store: &str) -> Served {
    Served::start(
        &["--listen", "127.0.0.1:0", "--example", "shop"],
        &[("WOW_STORE", store), ("WOW_AUTH_TOKENS", TOKENS)],
    )
}

/// The shop's `stock` saga as the framework holds a saga by default: to the owner and space
/// of the order whose event it reacts to.
#[derive(Debug)]
struct HeldStock;

#[wow_core::async_trait]
impl Saga for HeldStock {
    type Aggregate = Order;

    fn name(&self) -> &str {
        "stock"
    }

    async fn on_event(
        &self,
        event: &OrderEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError> {
        StockSaga.on_event(event, stream, ctx).await
    }
}

/// Settings with alice's and bob's tokens, on `store`.
fn settings(store: &str) -> Settings {
    let mut settings = Settings {
        store: Some(store.to_owned()),
        retry_every: None,
        ..Settings::default()
    };
    for owner in ["alice", "bob"] {
        settings.auth_tokens.insert(
            owner.to_owned(),
            TokenBinding::tenant("tenant-a").with_owner(owner),
        );
    }
    settings
}

/// The shop with [`HeldStock`], started with `settings`.
async fn held_shop(settings: Settings) -> RunningService {
    let prices = PriceList {
        default_price: Some(1_200),
        ..PriceList::default()
    };
    Service::builder()
        .aggregate::<Product>()
        .aggregate::<Order>()
        .saga(HeldStock)
        .service(Prices(Arc::new(prices)))
        .service(OrderPolicy::default())
        .settings(settings)
        .build()
        .await
        .unwrap()
}

/// A service served on a free port until the sender is dropped or sent to.
struct InProcess {
    address: String,
    stores: Stores,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl InProcess {
    async fn serve(running: RunningService) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let stores = running.stores().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = running
                .serve_on(listener, async {
                    let _ = stopped.await;
                })
                .await;
        });
        Self {
            address,
            stores,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the service stops")
            .unwrap();
    }
}

/// With the saga held to its owner: bob's order on alice's product is placed, its saga step
/// is refused and recorded, and alice's product is untouched; his order on his own product
/// holds its units. `stores`: where the failure is recorded.
async fn a_held_saga_is_refused_another_owners_product(api: &Api, stores: &Stores) {
    api.create_product("alice", "p-a", "MUG-A").await;
    api.create_product("bob", "p-b", "MUG-B").await;

    let placed = api.place("bob", "o-b", "p-a", "MUG-A").await;
    assert_eq!(
        placed["errorCode"], "IllegalAccessOwnerAggregate",
        "{placed}"
    );
    // The answer says the order itself was appended, apart from the saga step's failure.
    assert_eq!(placed["result"]["recorded"], true, "{placed}");
    assert_eq!(placed["result"]["failedStage"], "SAGA_HANDLED", "{placed}");
    assert_eq!(placed["aggregateVersion"], 1, "{placed}");
    let sent = placed["result"]["commands"].as_array().cloned();
    let sent = sent.unwrap_or_default();
    assert!(
        sent.iter()
            .any(|c| c["command"] == "reserve" && c["errorCode"] == "IllegalAccessOwnerAggregate"),
        "the reserve was refused: {placed}"
    );
    let order = api.state("bob", "order/o-b").await;
    assert_eq!(
        order["status"], "Placed",
        "the order is bob's to place: {order}"
    );
    let product = api.state("alice", "product/p-a").await;
    assert_eq!(product["stock"], 3, "{product}");
    assert_eq!(product["reserved"], json!({}), "{product}");

    let deadline = Instant::now() + Duration::from_secs(20);
    let record = loop {
        let records = stores
            .compensation
            .list(&FailureQuery::default())
            .await
            .unwrap();
        if let Some(record) = records.into_iter().find(|r| r.consumer == "stock") {
            break record;
        }
        assert!(Instant::now() < deadline, "the refused step is recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(record.error_code, ErrorCode::IllegalAccessOwnerAggregate);
    assert_eq!(
        (record.aggregate_id.id.as_str(), record.version),
        ("o-b", 1)
    );

    let placed = api.place("bob", "o-b2", "p-b", "MUG-B").await;
    assert_eq!(placed["errorCode"], "Ok", "{placed}");
    let product = api.state("bob", "product/p-b").await;
    assert_eq!(product["reserved"], json!({"o-b2": 2}), "{product}");
    bob_cannot_touch(api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saga_held_to_its_owner_is_refused_another_owners_product_on_sqlite() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", folder.path().join("held.db").display());
    let served = InProcess::serve(held_shop(settings(&store)).await).await;
    a_held_saga_is_refused_another_owners_product(&Api::at(&served.address), &served.stores).await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saga_held_to_its_owner_is_refused_another_owners_product_on_postgres() {
    let Some((base, schema)) = support::postgres_schema("saga_held") else {
        return;
    };
    let store = format!("{base}?schema={schema}");
    let served = InProcess::serve(held_shop(settings(&store)).await).await;
    a_held_saga_is_refused_another_owners_product(&Api::at(&served.address), &served.stores).await;
    served.stop().await;
    support::drop_schema(&base, &schema);
}

/// The same through a gateway and a processor over NATS (PostgreSQL): the owner the gateway
/// took from bob's token reaches the processor with the order, and the owner the saga's
/// command carries survives its own trip through NATS to the node that refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_saga_held_to_its_owner_is_refused_through_a_gateway_and_a_processor() {
    let nats =
        std::env::var("WOW_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let reachable = std::net::TcpStream::connect_timeout(
        &"127.0.0.1:4222".parse().unwrap(),
        Duration::from_secs(2),
    )
    .is_ok();
    if !reachable {
        wow_tck::skip::unavailable(
            wow_tck::skip::Requirement::Backends,
            "no NATS at 127.0.0.1:4222",
        );
        return;
    }
    let Some((base, schema)) = support::postgres_schema("saga_dist") else {
        return;
    };
    let store = format!("{base}?schema={schema}");
    let namespace = format!("t{}", &schema[schema.len() - 12..]);
    let node = |role: wow_service::Role| {
        let mut settings = settings(&store);
        settings.distributed.nats_url = Some(nats.clone());
        settings.distributed.namespace = namespace.clone();
        settings.distributed.partitions = 4;
        settings.distributed.storage = wow_service::CommandStorage::Memory;
        settings.distributed.lease_ttl = Duration::from_secs(2);
        settings.with_role(role).unwrap()
    };
    let processor = InProcess::serve(held_shop(node(wow_service::Role::Processor)).await).await;
    let gateway = InProcess::serve(held_shop(node(wow_service::Role::Gateway)).await).await;
    a_held_saga_is_refused_another_owners_product(&Api::at(&gateway.address), &processor.stores)
        .await;
    gateway.stop().await;
    processor.stop().await;
    support::drop_schema(&base, &schema);
    if let Ok(client) = async_nats::connect(nats).await {
        let jetstream = async_nats::jetstream::new(client);
        let upper = namespace.to_uppercase();
        let _ = jetstream.delete_stream(format!("{upper}_COMMANDS")).await;
        let _ = jetstream
            .delete_key_value(format!("{namespace}_partitions"))
            .await;
        let _ = jetstream
            .delete_key_value(format!("{upper}_COMMANDS_DEPLOYMENT"))
            .await;
    }
}
