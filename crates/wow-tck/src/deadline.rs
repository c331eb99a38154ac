//! The DeadlineStore conformance suite (SPEC DM-2): a deadline is a row written in the same
//! atomic write as the stream that schedules it, read back by its due time, and deleted by the
//! schedule that fired it.
//!
//! Each case takes a fresh, empty store that keeps both history and deadlines. Run them all
//! with [`deadline_store_tck!`](crate::deadline_store_tck).

use std::sync::Arc;

use serde_json::json;
use wow_core::deadline::{deadline_request_id, DeadlineChange, DeadlineStore, ScheduledCommand};
use wow_core::eventsourcing::{AppendChanges, EventStore, EventStoreError};
use wow_core::unique_key::{KeyChange, UniqueKey};
use wow_core::AggregateId;

use crate::fixtures::{aggregate, stream};

/// A store that keeps history and deadlines in one database.
pub trait DeadlineTck: EventStore + DeadlineStore {}

impl<T: EventStore + DeadlineStore + ?Sized> DeadlineTck for T {}

/// The store under test.
pub type Store = Arc<dyn DeadlineTck>;

/// The row `owner` schedules as `name`, due at `due_at`, written by its stream at `version`.
pub fn row(owner: &AggregateId, name: &str, due_at: i64, version: u64) -> ScheduledCommand {
    ScheduledCommand {
        owner: owner.clone(),
        name: name.to_owned(),
        due_at,
        target: owner.clone(),
        command: "expire".to_owned(),
        body: json!({"reason": "unpaid", "ünïcode": "✓"}),
        request_id: deadline_request_id(name, version),
    }
}

fn schedule(row: ScheduledCommand) -> AppendChanges {
    AppendChanges::deadlines(vec![DeadlineChange::Schedule(row)])
}

fn cancel(name: &str) -> AppendChanges {
    AppendChanges::deadlines(vec![DeadlineChange::Cancel {
        name: name.to_owned(),
    }])
}

async fn append(store: &Store, owner: &AggregateId, version: u64, changes: &AppendChanges) {
    let request_id = format!("r-{version}");
    if let Err(error) = store
        .append_with(&stream(owner, version, &request_id), changes)
        .await
    {
        panic!("append of version {version} with deadlines failed: {error:?}");
    }
}

async fn pending(store: &Store, owner: &AggregateId) -> Vec<ScheduledCommand> {
    store
        .scheduled_for(owner)
        .await
        .expect("the pending deadlines of an aggregate read")
}

/// A schedule is written with its stream: the row reads back whole, is not due before its
/// time, and is due from it on.
pub async fn a_schedule_is_written_with_its_stream(store: Store) {
    let order = aggregate();
    let expiry = row(&order, "expire", 1_000_000, 1);
    append(&store, &order, 1, &schedule(expiry.clone())).await;
    assert_eq!(pending(&store, &order).await, vec![expiry.clone()]);
    assert!(store.due(999_999, 10).await.expect("due reads").is_empty());
    assert_eq!(
        store.due(1_000_000, 10).await.expect("due reads"),
        vec![expiry]
    );
    let history = store
        .load(&order, 1, u64::MAX)
        .await
        .expect("history loads");
    assert_eq!(history.len(), 1, "the stream is written with its row");
}

/// An append refused for its version or its request id, or for a key another aggregate
/// holds, writes no row: the deadline never outlives the decision that made it.
pub async fn a_refused_append_schedules_nothing(store: Store) {
    let order = aggregate();
    append(&store, &order, 1, &AppendChanges::default()).await;
    let conflict = store
        .append_with(
            &stream(&order, 1, "r-other"),
            &schedule(row(&order, "expire", 5, 1)),
        )
        .await;
    assert!(
        matches!(
            conflict,
            Err(EventStoreError::DuplicateAggregateId(_) | EventStoreError::EventVersionConflict(_))
        ),
        "{conflict:?}"
    );
    let duplicate = store
        .append_with(
            &stream(&order, 2, "r-1"),
            &schedule(row(&order, "expire", 5, 2)),
        )
        .await;
    assert!(
        matches!(duplicate, Err(EventStoreError::DuplicateRequestId { .. })),
        "{duplicate:?}"
    );
    let sku = UniqueKey::new("sku", wow_core::id::new_id());
    let holder = aggregate();
    store
        .append_with(
            &stream(&holder, 1, "r-1"),
            &AppendChanges::keys(vec![KeyChange::Claim(sku.clone())]),
        )
        .await
        .expect("the first claim is taken");
    let taken = store
        .append_with(
            &stream(&order, 2, "r-2"),
            &AppendChanges {
                keys: vec![KeyChange::Claim(sku)],
                deadlines: vec![DeadlineChange::Schedule(row(&order, "expire", 5, 2))],
            },
        )
        .await;
    assert!(
        matches!(taken, Err(EventStoreError::DuplicateKey(_))),
        "{taken:?}"
    );
    assert!(pending(&store, &order).await.is_empty());
    assert!(store.due(i64::MAX, 10).await.expect("due reads").is_empty());
    let history = store
        .load(&order, 1, u64::MAX)
        .await
        .expect("history loads");
    assert_eq!(history.len(), 1, "nothing but the first stream");
}

/// A later stream moves a deadline (one row, the new time and request id) and cancels it.
pub async fn a_later_stream_moves_and_cancels_a_deadline(store: Store) {
    let order = aggregate();
    append(&store, &order, 1, &schedule(row(&order, "expire", 100, 1))).await;
    let moved = row(&order, "expire", 500, 2);
    append(&store, &order, 2, &schedule(moved.clone())).await;
    assert_eq!(pending(&store, &order).await, vec![moved]);
    assert!(store.due(499, 10).await.expect("due reads").is_empty());
    append(&store, &order, 3, &cancel("expire")).await;
    assert!(pending(&store, &order).await.is_empty());
    assert!(store.due(i64::MAX, 10).await.expect("due reads").is_empty());
    // Cancelling what is not there changes nothing.
    append(&store, &order, 4, &cancel("expire")).await;
}

/// What is due comes earliest first, at most the limit asked for, and never what is not due.
pub async fn due_rows_come_earliest_first_within_the_limit(store: Store) {
    let owners: Vec<AggregateId> = (0..5).map(|_| aggregate()).collect();
    for (i, owner) in owners.iter().enumerate() {
        let due_at = [40, 10, 30, 20, 90][i];
        append(&store, owner, 1, &schedule(row(owner, "expire", due_at, 1))).await;
    }
    let due = store.due(35, 2).await.expect("due reads");
    let times: Vec<i64> = due.iter().map(|r| r.due_at).collect();
    assert_eq!(times, vec![10, 20]);
    let due = store.due(35, 10).await.expect("due reads");
    let times: Vec<i64> = due.iter().map(|r| r.due_at).collect();
    assert_eq!(times, vec![10, 20, 30]);
    let backlog = store.backlog().await.expect("the backlog reads");
    assert_eq!(backlog.pending, 5);
    assert_eq!(backlog.next_due_at, Some(10));
}

/// `fired` deletes the row only while it carries the request id that fired: a deadline
/// scheduled again meanwhile stays pending.
pub async fn fired_deletes_only_the_schedule_that_fired(store: Store) {
    let order = aggregate();
    let first = row(&order, "expire", 100, 1);
    append(&store, &order, 1, &schedule(first.clone())).await;
    let again = row(&order, "expire", 200, 2);
    append(&store, &order, 2, &schedule(again.clone())).await;
    let stale = store
        .fired(&order, "expire", &first.request_id)
        .await
        .expect("fired answers");
    assert!(!stale, "the schedule that fired is gone already");
    assert_eq!(pending(&store, &order).await, vec![again.clone()]);
    assert!(store
        .fired(&order, "expire", &again.request_id)
        .await
        .expect("fired answers"));
    assert!(pending(&store, &order).await.is_empty());
    assert!(!store
        .fired(&order, "expire", &again.request_id)
        .await
        .expect("fired answers twice"));
}

/// Deadlines are per tenant and per aggregate: the same id and name in two tenants are two
/// rows, and one tenant's cancel leaves the other's.
pub async fn deadlines_are_per_tenant(store: Store) {
    let a = aggregate();
    let mut b = a.clone();
    b.tenant_id = "tenant-b".to_owned();
    append(&store, &a, 1, &schedule(row(&a, "expire", 100, 1))).await;
    append(&store, &b, 1, &schedule(row(&b, "expire", 200, 1))).await;
    assert_eq!(pending(&store, &a).await.len(), 1);
    assert_eq!(pending(&store, &b).await[0].due_at, 200);
    append(&store, &a, 2, &cancel("expire")).await;
    assert!(pending(&store, &a).await.is_empty());
    assert_eq!(pending(&store, &b).await.len(), 1);
    let due = store.due(i64::MAX, 10).await.expect("due reads");
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].owner.tenant_id, "tenant-b");
}

/// A saga's schedule, written on its own, is idempotent (a redelivered event writes the same
/// row) and cancelled by name.
pub async fn a_schedule_on_its_own_is_idempotent(store: Store) {
    let order = aggregate();
    let mut reminder = row(&order, "reminders/remind", 300, 1);
    reminder.request_id = "e-1/0".to_owned();
    store.schedule(&reminder).await.expect("the row is written");
    store
        .schedule(&reminder)
        .await
        .expect("the row is written again");
    assert_eq!(pending(&store, &order).await, vec![reminder.clone()]);
    assert!(store
        .cancel(&order, "reminders/remind")
        .await
        .expect("cancel answers"));
    assert!(!store
        .cancel(&order, "reminders/remind")
        .await
        .expect("cancel answers twice"));
    assert!(pending(&store, &order).await.is_empty());
    let mut elsewhere = row(&order, "reminders/remind", 300, 1);
    elsewhere.target.tenant_id = "tenant-b".to_owned();
    let refused = store.schedule(&elsewhere).await;
    assert!(
        matches!(refused, Err(EventStoreError::IllegalArgument(_))),
        "a row never sends into another tenant: {refused:?}"
    );
    assert!(pending(&store, &order).await.is_empty());
}

/// A deadline the store cannot keep (a malformed name, another aggregate's row) is
/// `IllegalArgument`, and nothing of the append is written.
pub async fn a_malformed_deadline_refuses_the_whole_append(store: Store) {
    let order = aggregate();
    let bad_name = store
        .append_with(
            &stream(&order, 1, "r-1"),
            &schedule(row(&order, "no spaces", 5, 1)),
        )
        .await;
    assert!(
        matches!(bad_name, Err(EventStoreError::IllegalArgument(_))),
        "{bad_name:?}"
    );
    let other = aggregate();
    let foreign = store
        .append_with(
            &stream(&order, 1, "r-1"),
            &schedule(row(&other, "expire", 5, 1)),
        )
        .await;
    assert!(
        matches!(foreign, Err(EventStoreError::IllegalArgument(_))),
        "{foreign:?}"
    );
    assert!(store
        .load(&order, 1, u64::MAX)
        .await
        .expect("loads")
        .is_empty());
    assert!(store.due(i64::MAX, 10).await.expect("due reads").is_empty());
}
