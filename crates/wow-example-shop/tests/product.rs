//! The product, given → when → expect, and through a processing node: its SKU is unique in
//! its tenant and moves with it (SPEC DM-1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use wow_core::aggregate::{AggregateRegistry, AggregateSpec};
use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
use wow_core::unique_key::{KeyChange, UniqueKey};
use wow_core::{AggregateId, CommandMessage, CommandResult, ErrorCode};
use wow_example_shop::product::*;
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

fn sku(value: &str) -> UniqueKey {
    UniqueKey::new("sku", value)
}

fn created(value: &str) -> ProductEvent {
    ProductEvent::ProductCreated(ProductCreated {
        sku: value.to_owned(),
        name: "Mug".to_owned(),
        stock: 3,
    })
}

#[test]
fn creating_claims_the_sku_and_changing_it_moves_the_key() {
    AggregateSpec::<Product>::new()
        .given_nothing()
        .when(ProductCommand::Create(Create {
            sku: "MUG-1".into(),
            name: "Mug".into(),
            stock: 3,
        }))
        .expect_events([created("MUG-1")])
        .expect_keys([KeyChange::Claim(sku("MUG-1"))]);
    AggregateSpec::<Product>::new()
        .given([created("MUG-1")])
        .when(ProductCommand::ChangeSku(ChangeSku {
            sku: "MUG-2".into(),
        }))
        .expect_keys([
            KeyChange::Release(sku("MUG-1")),
            KeyChange::Claim(sku("MUG-2")),
        ]);
    AggregateSpec::<Product>::new()
        .given([created("MUG-1")])
        .when(ProductCommand::Rename(Rename { name: "Cup".into() }))
        .expect_keys([]);
}

#[test]
fn the_rules_of_a_product() {
    AggregateSpec::<Product>::new()
        .given([created("MUG-1")])
        .when(ProductCommand::ChangeSku(ChangeSku {
            sku: "MUG-1".into(),
        }))
        .expect_error_code(ErrorCode::domain("SameSku"))
        .expect_keys([]);
    AggregateSpec::<Product>::new()
        .given([created("MUG-1")])
        .when(ProductCommand::AdjustStock(AdjustStock { by: -4 }))
        .expect_error_code(ErrorCode::domain("OutOfStock"));
    AggregateSpec::<Product>::new()
        .given_nothing()
        .when(ProductCommand::Create(Create {
            sku: "mug 1".into(),
            name: String::new(),
            stock: 0,
        }))
        .expect_binding_errors(&["sku", "name"]);
}

fn shop(store: Arc<dyn EventStore>) -> LocalPipeline {
    let mut registry = AggregateRegistry::new();
    registry.register::<Product>().unwrap();
    LocalPipeline::builder(registry, store).build()
}

async fn send(shop: &LocalPipeline, id: &str, command: ProductCommand) -> CommandResult {
    let product = AggregateId::new("shop", "product", id, "t1");
    let command = CommandMessage::of(product, command).into_json().unwrap();
    match shop
        .gateway
        .send_and_wait(command, WaitPlan::processed())
        .await
    {
        Ok(result) => result,
        Err(error) => error.result().clone(),
    }
}

fn create(value: &str) -> ProductCommand {
    ProductCommand::Create(Create {
        sku: value.into(),
        name: "Mug".into(),
        stock: 1,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_product_cannot_take_an_sku_until_the_first_gives_it_up() {
    let store: Arc<dyn EventStore> = Arc::new(InMemoryEventStore::new());
    let shop = shop(store.clone());
    assert!(send(&shop, "p-1", create("MUG-1")).await.succeeded);
    let refused = send(&shop, "p-2", create("MUG-1")).await;
    assert_eq!(refused.error_code, ErrorCode::DuplicateKey);
    assert!(
        refused.error_msg.contains("MUG-1") && !refused.error_msg.contains("p-1"),
        "the refusal names the key, not its holder: {}",
        refused.error_msg
    );

    let moved = send(
        &shop,
        "p-1",
        ProductCommand::ChangeSku(ChangeSku {
            sku: "MUG-9".into(),
        }),
    )
    .await;
    assert!(moved.succeeded, "{moved:?}");
    assert!(send(&shop, "p-2", create("MUG-1")).await.succeeded);
    let holder = |value: &'static str| {
        let store = store.clone();
        async move {
            store
                .find_key("t1", &sku(value))
                .await
                .unwrap()
                .map(|held| held.aggregate_id.id)
        }
    };
    assert_eq!(holder("MUG-1").await.as_deref(), Some("p-2"));
    assert_eq!(holder("MUG-9").await.as_deref(), Some("p-1"));
}
