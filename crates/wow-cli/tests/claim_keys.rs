//! `wow migrate --claim-keys` (SPEC DM-1): products written before their type declared its
//! SKU a unique key hold no key; the backfill folds each one and claims its SKU, lists the
//! value two products share (with both ids) instead of stopping, and changes nothing when run
//! again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::wow;
use wow_core::aggregate::Aggregate;
use wow_core::eventsourcing::{History, KeyIndex};
use wow_core::unique_key::UniqueKey;
use wow_core::{AggregateId, DomainEvent, DomainEventStream};
use wow_example_shop::product::{Product, ProductCreated, ProductEvent};
use wow_sqlite::{SqliteOptions, SqliteStore};

fn product(id: &str) -> AggregateId {
    Product::named_aggregate().aggregate_id(id.to_owned(), "(0)".to_owned())
}

/// A product's first stream as a build without unique keys appended it: no key claimed.
fn created(id: &str, sku: &str) -> DomainEventStream {
    let event = ProductEvent::ProductCreated(ProductCreated {
        sku: sku.to_owned(),
        name: format!("product {id}"),
        stock: 1,
    });
    DomainEventStream {
        id: wow_core::id::new_id(),
        request_id: format!("create-{id}"),
        command_id: wow_core::id::new_id(),
        aggregate_id: product(id),
        version: 1,
        create_time: 1_700_000_000_000,
        fingerprint: String::new(),
        header: Default::default(),
        body: vec![DomainEvent::of(&event).unwrap()],
    }
}

async fn holder(path: &std::path::Path, sku: &str) -> Option<AggregateId> {
    let store = SqliteStore::open(SqliteOptions::new(path)).await.unwrap();
    store
        .find_key("(0)", &UniqueKey::new("sku", sku))
        .await
        .unwrap()
        .map(|held| held.aggregate_id)
}

#[tokio::test]
async fn claim_keys_backfills_each_products_sku_reports_the_shared_one_and_is_idempotent() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("shop.db");
    {
        let store = SqliteStore::open(SqliteOptions::new(&path)).await.unwrap();
        for (id, sku) in [("p-1", "SKU-A"), ("p-2", "SKU-B"), ("p-3", "SKU-A")] {
            store.append(&created(id, sku)).await.unwrap();
        }
    }
    assert_eq!(holder(&path, "SKU-A").await, None, "nothing claimed yet");
    let url = format!("sqlite://{}", path.display());

    let (code, said) = wow(&["migrate", "--store", &url, "--claim-keys"]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("3 aggregates folded, 2 keys claimed, 0 held already, 1 conflicts"),
        "{said}"
    );
    let conflict = said
        .lines()
        .find(|line| line.starts_with("conflict:"))
        .unwrap_or_else(|| panic!("a conflict line: {said}"));
    assert!(conflict.contains("`SKU-A`"), "{conflict}");
    assert!(
        conflict.contains(&product("p-3").to_string())
            && conflict.contains(&product("p-1").to_string()),
        "both ids: {conflict}"
    );
    assert_eq!(holder(&path, "SKU-A").await, Some(product("p-1")));
    assert_eq!(holder(&path, "SKU-B").await, Some(product("p-2")));

    let (code, again) = wow(&["migrate", "--store", &url, "--claim-keys"]);
    assert_eq!(code, 0, "{again}");
    assert!(
        again.contains("3 aggregates folded, 0 keys claimed, 2 held already, 1 conflicts"),
        "{again}"
    );
    assert_eq!(holder(&path, "SKU-A").await, Some(product("p-1")));
}
