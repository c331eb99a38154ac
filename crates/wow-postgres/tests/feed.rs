//! The global feed never lets a reader pass a stream that commits late (docs/distributed.md).
//!
//! PostgreSQL hands out positions at insert time, not at commit: a transaction that took a
//! lower position can commit after one that took a higher. These tests hold such a
//! transaction open on a raw connection and check that the feed holds back every stream
//! behind it until it ends. Every transaction is ended before anything is asserted: one left
//! open would block dropping the test's schema.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::Duration;
use wow_core::eventsourcing::{
    EventFeed, EventStore, EventStoreError, FeedEntry, GlobalPosition, History,
};

use wow_core::DomainEventStream;
use wow_tck::fixtures::{aggregate, stream};

/// How the store inserts a stream (its `INSERT`, `txid` left to its default).
const INSERT: &str = "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING position";

async fn insert(client: &tokio_postgres::Client, s: &DomainEventStream) -> i64 {
    insert_with(client, INSERT, s).await
}

/// Inserts `s` with `sql`, [`INSERT`] or a variant of it with the same parameters.
async fn insert_with(client: &tokio_postgres::Client, sql: &str, s: &DomainEventStream) -> i64 {
    client
        .query_one(
            sql,
            &[
                &s.aggregate_id.aggregate_name,
                &s.aggregate_id.id,
                &(s.version as i64),
                &s.aggregate_id.context_name,
                &s.aggregate_id.tenant_id,
                &s.id,
                &s.request_id,
                &s.command_id,
                &s.fingerprint,
                &s.create_time,
                &serde_json::to_value(&s.header).unwrap(),
                &serde_json::to_value(&s.body).unwrap(),
            ],
        )
        .await
        .expect("the stream inserts")
        .get(0)
}

/// The feed from the start once it shows `count` streams (other tests' transactions on the
/// same server may hold it back for a moment).
async fn settled(store: &impl EventStore, count: usize) -> Vec<FeedEntry> {
    let deadline = tokio::time::Instant::now() + wow_tck::event_store::SETTLE;
    loop {
        let entries = store
            .read_feed(GlobalPosition::START, 100)
            .await
            .expect("the feed reads");
        if entries.len() >= count || tokio::time::Instant::now() >= deadline {
            return entries;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn ids(entries: &Result<Vec<FeedEntry>, EventStoreError>) -> Vec<String> {
    entries
        .as_ref()
        .map(|entries| entries.iter().map(|e| e.stream.id.clone()).collect())
        .unwrap_or_default()
}

/// Transaction A inserts a stream (a lower position) and stays open; B appends through the
/// store (a higher position) and commits. While A is open the feed must not show B: a reader
/// that took B and kept its position would never see A's stream, which sorts before it once
/// A commits. After A commits, the feed shows A's stream, then B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_behind_an_open_transaction_is_held_back_until_it_commits() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let store = &test.store;
    let held = store.pool().get().await.expect("a connection");
    held.batch_execute("BEGIN").await.expect("A begins");
    let xid: String = held
        .query_one("SELECT pg_current_xact_id()::TEXT", &[])
        .await
        .expect("A takes an xid")
        .get(0);
    let late = stream(&aggregate(), 1, "r-a");
    let late_position = insert(&held, &late).await;

    let early = stream(&aggregate(), 1, "r-b");
    let appended = store.append(&early).await;
    let while_open = store.read_feed(GlobalPosition::START, 100).await;
    let after_late = store
        .read_feed(
            GlobalPosition::new(xid.parse().expect("an xid"), late_position as u64),
            100,
        )
        .await;

    held.batch_execute("COMMIT").await.expect("A commits");
    drop(held);
    appended.expect("B appends");
    assert!(
        ids(&while_open).is_empty(),
        "the feed showed {:?} while a transaction with a lower position was open",
        ids(&while_open)
    );
    assert!(
        ids(&after_late).is_empty(),
        "the feed showed {:?} after A's own position while A was open",
        ids(&after_late)
    );

    let entries = settled(store, 2).await;
    let streams: Vec<_> = entries.iter().map(|e| e.stream.clone()).collect();
    assert_eq!(streams, vec![late, early], "A's stream first, then B");
    assert!(entries[0].position < entries[1].position);
    assert_eq!(
        entries[0].position,
        GlobalPosition::new(xid.parse().unwrap(), late_position as u64)
    );
}

/// Any transaction that holds an xid holds the feed back (the documented cost), even one
/// that writes nothing to the store and rolls back: B shows only once it has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_open_transaction_with_an_xid_holds_the_feed_back_until_it_ends() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let store = &test.store;
    let held = store.pool().get().await.expect("a connection");
    held.batch_execute("BEGIN; SELECT pg_current_xact_id()")
        .await
        .expect("A begins and takes an xid");

    let appended = store.append(&stream(&aggregate(), 1, "r-b")).await;
    let while_open = store.read_feed(GlobalPosition::START, 100).await;

    held.batch_execute("ROLLBACK").await.expect("A ends");
    drop(held);
    appended.expect("B appends");
    assert!(
        ids(&while_open).is_empty(),
        "the feed showed {:?} past an open transaction",
        ids(&while_open)
    );
    assert_eq!(settled(store, 1).await.len(), 1, "B shows once A has ended");
}

/// Transaction ids order as numbers, not as their text: a stream of transaction 9 comes
/// before one of transaction 10, whatever their positions (the `xid8` travels as text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_transactions_as_numbers_not_as_text() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let store = &test.store;
    let client = store.pool().get().await.expect("a connection");
    let with_txid = |txid: &str| {
        INSERT
            .replace("body)", "body, txid)")
            .replace("$12)", &format!("$12, '{txid}'::XID8)"))
    };
    let of_ten = stream(&aggregate(), 1, "r-10");
    let of_nine = stream(&aggregate(), 1, "r-9");
    let ten = insert_with(&client, &with_txid("10"), &of_ten).await;
    let nine = insert_with(&client, &with_txid("9"), &of_nine).await;
    drop(client);

    let entries = settled(store, 2).await;
    let positions: Vec<_> = entries.iter().map(|e| e.position).collect();
    assert_eq!(
        positions,
        vec![
            GlobalPosition::new(9, nine as u64),
            GlobalPosition::new(10, ten as u64)
        ]
    );
    assert_eq!(entries[0].stream, of_nine);
    let after_nine = store.read_feed(positions[0], 100).await.unwrap();
    assert_eq!(after_nine.len(), 1);
    assert_eq!(after_nine[0].stream, of_ten);
}
