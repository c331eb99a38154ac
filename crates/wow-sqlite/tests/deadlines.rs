//! Deadlines in the SQLite file (SPEC DM-2), beyond the conformance suite: rows outlive the
//! process, follow a renamed aggregate, and share the group commit with the streams that
//! write them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use wow_core::eventsourcing::{
    AggregateRename, AggregateRenames, AppendChanges, EventStoreError, History,
};

use serde_json::json;
use wow_core::deadline::{
    deadline_request_id, DeadlineBacklog, DeadlineChange, DeadlineStore, ScheduledCommand,
};
use wow_core::AggregateId;
use wow_sqlite::{SqliteOptions, SqliteStore};
use wow_tck::fixtures::{aggregate, stream};

fn row(owner: &AggregateId, name: &str, due_at: i64, version: u64) -> ScheduledCommand {
    ScheduledCommand {
        owner: owner.clone(),
        name: name.to_owned(),
        due_at,
        target: owner.clone(),
        command: "expire".to_owned(),
        body: json!({"reason": "unpaid", "lines": [1, 2]}),
        request_id: deadline_request_id(name, version),
        held_to: None,
    }
}

fn schedule(row: ScheduledCommand) -> AppendChanges {
    AppendChanges::deadlines(vec![DeadlineChange::Schedule(row)])
}

async fn open(path: &std::path::Path) -> SqliteStore {
    SqliteStore::open(SqliteOptions::new(path)).await.unwrap()
}

#[tokio::test]
async fn a_scheduled_row_survives_closing_and_reopening_the_file() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("wow.db");
    let order = aggregate();
    let expiry = row(&order, "expire", 1_000, 1);
    let mut reminder = row(&order, "reminders/remind", 500, 1);
    reminder.request_id = "e-1/0".to_owned();
    {
        let store = open(&path).await;
        store
            .append_with(&stream(&order, 1, "r-1"), &schedule(expiry.clone()))
            .await
            .unwrap();
        store.schedule(&reminder).await.unwrap();
    }
    let store = open(&path).await;
    assert_eq!(
        store.scheduled_for(&order).await.unwrap(),
        vec![expiry.clone(), reminder.clone()]
    );
    assert_eq!(store.due(1_000, 10).await.unwrap(), vec![reminder, expiry]);
    assert_eq!(
        store.backlog().await.unwrap(),
        DeadlineBacklog {
            pending: 2,
            next_due_at: Some(500)
        }
    );
}

#[tokio::test]
async fn a_rename_moves_the_deadlines_an_aggregate_owns_and_those_sent_to_it() {
    let folder = tempfile::tempdir().unwrap();
    let store = open(&folder.path().join("wow.db")).await;
    let order = aggregate();
    store
        .append_with(
            &stream(&order, 1, "r-1"),
            &schedule(row(&order, "expire", 10, 1)),
        )
        .await
        .unwrap();
    // A saga's row, owned by another aggregate type and sent to the order.
    let saga = AggregateId::new("tck", "checkout", wow_core::id::new_id(), "tenant-a");
    let mut nudge = row(&saga, "nudge", 20, 1);
    nudge.target = order.clone();
    store.schedule(&nudge).await.unwrap();

    store
        .rename_aggregate(AggregateRename::new("order", "purchase").dry_run())
        .await
        .unwrap();
    assert_eq!(
        store.scheduled_for(&order).await.unwrap().len(),
        1,
        "a dry run moves nothing"
    );

    store
        .rename_aggregate(AggregateRename::new("order", "purchase"))
        .await
        .unwrap();
    let mut purchase = order.clone();
    purchase.aggregate_name = "purchase".to_owned();
    assert!(store.scheduled_for(&order).await.unwrap().is_empty());
    let moved = store.scheduled_for(&purchase).await.unwrap();
    assert_eq!(moved.len(), 1);
    assert_eq!((&moved[0].owner, &moved[0].target), (&purchase, &purchase));
    let sent = store.scheduled_for(&saga).await.unwrap();
    assert_eq!(
        sent[0].target, purchase,
        "the saga's row is sent to today's name"
    );
    // The moved row is the aggregate's under today's name: its fire deletes it.
    assert!(store.fired(&moved[0]).await.unwrap());
    assert_eq!(store.backlog().await.unwrap().pending, 1);
}

/// Appends with deadlines share the group commit with plain ones; the conflicting ones leave
/// no row and the rest of their batches commit theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conflicting_append_leaves_no_row_and_its_batch_keeps_theirs() {
    let folder = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&folder.path().join("wow.db")).await);
    let taken = aggregate();
    store.append(&stream(&taken, 1, "first")).await.unwrap();

    let mut tasks = Vec::new();
    for index in 0..120_i64 {
        let store = store.clone();
        let conflicting = index % 6 == 0;
        let owner = if conflicting {
            taken.clone()
        } else {
            aggregate()
        };
        let s = stream(&owner, 1, &format!("r-{index}"));
        let changes = schedule(row(&owner, "expire", index, 1));
        tasks.push(tokio::spawn(async move {
            (conflicting, store.append_with(&s, &changes).await)
        }));
    }
    let (mut good, mut refused) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            (false, Ok(())) => good += 1,
            (true, Err(EventStoreError::DuplicateAggregateId(_))) => refused += 1,
            (conflicting, outcome) => panic!("conflicting={conflicting}: {outcome:?}"),
        }
    }
    assert_eq!((good, refused), (100, 20));
    assert!(store.scheduled_for(&taken).await.unwrap().is_empty());
    let due = store.due(i64::MAX, 1_000).await.unwrap();
    assert_eq!(due.len(), 100);
    assert!(due.windows(2).all(|w| w[0].due_at <= w[1].due_at));
    assert!(due.iter().all(|row| row.due_at % 6 != 0));
}

#[tokio::test]
async fn a_saga_row_for_another_tenant_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    let store = open(&folder.path().join("wow.db")).await;
    let order = aggregate();
    let mut foreign = row(&order, "nudge", 5, 1);
    foreign.target.tenant_id = "tenant-b".to_owned();
    assert!(matches!(
        store.schedule(&foreign).await,
        Err(EventStoreError::IllegalArgument(_))
    ));
    assert_eq!(store.backlog().await.unwrap(), DeadlineBacklog::default());
}

#[test]
fn the_store_is_a_shareable_deadline_store() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<SqliteStore>();
    let _: fn(SqliteStore) -> Arc<dyn DeadlineStore> = |store| Arc::new(store);
}
