//! Unique keys (SPEC DM-1) on PostgreSQL, beyond the conformance suite: the primary key of
//! `unique_key` decides between a claimant and a transaction still in flight, claims in
//! opposite orders never deadlock, and the holder named is the one the in-memory reference
//! names.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;
use wow_core::eventsourcing::{
    AppendChanges, EventStore, EventStoreError, InMemoryEventStore, KeyIndex,
};

use wow_core::unique_key::{KeyChange, UniqueKey};
use wow_core::AggregateId;
use wow_tck::fixtures::{aggregate, stream};

fn sku(value: &str) -> UniqueKey {
    UniqueKey::new("sku", value)
}

fn fresh(name: &str) -> String {
    format!("{name}-{}", wow_core::id::new_id())
}

async fn claim(
    store: &(impl EventStore + ?Sized),
    aggregate: &AggregateId,
    values: &[&str],
) -> Result<(), EventStoreError> {
    let keys: Vec<KeyChange> = values.iter().map(|v| KeyChange::Claim(sku(v))).collect();
    let request_id = format!("r-{}", wow_core::id::new_id());
    store
        .append_with(
            &stream(aggregate, 1, &request_id),
            &AppendChanges::keys(keys),
        )
        .await
}

/// A raw connection to the test's schema, its connection driven in the background.
async fn raw(schema: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&support::url(), tokio_postgres::NoTls)
        .await
        .expect("a raw connection");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("SET search_path TO {schema}"))
        .await
        .unwrap();
    client
}

/// Opens a transaction on `client` that holds `value` for `holder` and leaves it open.
async fn hold_in_flight(client: &tokio_postgres::Client, holder: &AggregateId, value: &str) {
    client.batch_execute("BEGIN").await.unwrap();
    client
        .execute(
            "INSERT INTO unique_key (tenant_id, key_space, key_value, context_name, aggregate_name, aggregate_id, version) VALUES ($1, 'sku', $2, $3, $4, $5, 1)",
            &[
                &holder.tenant_id,
                &value,
                &holder.context_name,
                &holder.aggregate_name,
                &holder.id,
            ],
        )
        .await
        .unwrap();
}

/// A claim of a key another transaction has written but not committed waits for it, and the
/// outcome is that transaction's: rolled back, the key is the claimant's; committed, the
/// claim is `DuplicateKey` naming its writer. No read made before the wait could tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_waits_for_a_claimant_in_flight_and_takes_its_outcome() {
    let Some(test) = support::fresh().await else {
        return;
    };
    for commit in [false, true] {
        let client = raw(test.store.schema()).await;
        let (writer, claimant, value) = (aggregate(), aggregate(), fresh("flight"));
        hold_in_flight(&client, &writer, &value).await;
        let store = test.store.clone();
        let claiming = {
            let (claimant, value) = (claimant.clone(), value.clone());
            tokio::spawn(async move { claim(&store, &claimant, &[&value]).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let waited = !claiming.is_finished();
        client
            .batch_execute(if commit { "COMMIT" } else { "ROLLBACK" })
            .await
            .unwrap();
        let outcome = claiming.await.expect("the claim runs");
        assert!(waited, "the claim waits for the transaction in flight");
        let expected = if commit { &writer } else { &claimant };
        match (commit, outcome) {
            (false, Ok(())) => {}
            (true, Err(EventStoreError::DuplicateKey(taken))) => {
                assert_eq!(&taken.holder.aggregate_id, expected);
                assert_eq!(taken.holder.version, 1);
            }
            (_, other) => panic!("commit {commit}: unexpected outcome {other:?}"),
        }
        let held = test.store.find_key("tenant-a", &sku(&value)).await.unwrap();
        assert_eq!(held.map(|h| h.aggregate_id).as_ref(), Some(expected));
    }
}

/// Two aggregates claim the same two keys at once, in opposite orders, round after round:
/// one takes both, the other is `DuplicateKey`, and neither dies of a deadlock (the changes
/// are made in key order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_in_opposite_orders_never_deadlock() {
    let Some(test) = support::fresh().await else {
        return;
    };
    for _ in 0..20 {
        let (a, b) = (fresh("a"), fresh("b"));
        let (first, second) = (aggregate(), aggregate());
        let tasks = [(first.clone(), [a.clone(), b.clone()]), (second, [b, a])].map(
            |(aggregate, values)| {
                let store = test.store.clone();
                tokio::spawn(async move {
                    let values: Vec<&str> = values.iter().map(String::as_str).collect();
                    claim(&store, &aggregate, &values).await
                })
            },
        );
        let mut won = 0;
        for task in tasks {
            match task.await.expect("the claim runs") {
                Ok(()) => won += 1,
                Err(EventStoreError::DuplicateKey(_)) => {}
                Err(other) => panic!("a losing claim is DuplicateKey, got {other:?}"),
            }
        }
        assert_eq!(won, 1, "exactly one claimant takes both keys");
    }
}

/// When several claimed keys are taken, `DuplicateKey` names the holder of the first of them
/// in the order the changes were given, as the in-memory reference does.
#[tokio::test]
async fn the_first_taken_claim_in_the_given_order_is_named_as_in_memory() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let memory = InMemoryEventStore::new();
    let stores: [&dyn EventStore; 2] = [&test.store, &memory];
    let (low, high) = (fresh("a"), fresh("b"));
    let (holds_low, holds_high, claimant) = (aggregate(), aggregate(), aggregate());
    for store in stores {
        claim(store, &holds_low, &[&low]).await.unwrap();
        claim(store, &holds_high, &[&high]).await.unwrap();
        for (order, named) in [([&high, &low], &holds_high), ([&low, &high], &holds_low)] {
            let values: Vec<&str> = order.iter().map(|v| v.as_str()).collect();
            match claim(store, &claimant, &values).await {
                Err(EventStoreError::DuplicateKey(taken)) => {
                    assert_eq!(&taken.holder.aggregate_id, named, "{store:?}");
                }
                other => panic!("{store:?}: expected DuplicateKey, got {other:?}"),
            }
        }
    }
}
