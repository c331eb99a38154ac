//! The DeadlineStore conformance suite (SPEC DM-2): a deadline is a row written in the same
//! atomic write as the stream that schedules it, read back by its due time, and deleted by the
//! schedule that fired it.
//!
//! Each case takes a fresh, empty store that keeps both history and deadlines. Run them all
//! with [`deadline_store_tck!`](crate::deadline_store_tck).

use std::sync::Arc;

use serde_json::json;
use std::time::Duration;

use wow_core::deadline::{
    deadline_request_id, partition_of, DeadlineChange, DeadlineStore, DueQuery, FailedFiring,
    PartitionFilter, ScheduledCommand, HELD,
};
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
        held_to: None,
    }
}

/// A failed firing of `owner`'s row `expire` that carried `request_id`, due again `after`
/// from the store's now (held when `None`).
fn failed_expiry<'a>(
    owner: &'a AggregateId,
    request_id: &'a str,
    after: Option<Duration>,
) -> FailedFiring<'a> {
    FailedFiring {
        owner,
        name: "expire",
        request_id,
        after,
        from: None,
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
                ..AppendChanges::default()
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
    let stale = store.fired(&first).await.expect("fired answers");
    assert!(!stale, "the schedule that fired is gone already");
    assert_eq!(pending(&store, &order).await, vec![again.clone()]);
    assert!(store.fired(&again).await.expect("fired answers"));
    assert!(pending(&store, &order).await.is_empty());
    assert!(!store.fired(&again).await.expect("fired answers twice"));
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

/// A saga's deadline held to an owner and space (SPEC TN-2) reads back with them, from the
/// owner's rows and from the due rows, and scheduling it again without them clears them.
pub async fn a_sagas_deadline_keeps_the_owner_it_is_held_to(store: Store) {
    let order = aggregate();
    let mut held = row(&order, "reminders/remind", 500, 1);
    held.request_id = "e-1/0".to_owned();
    held.held_to = Some(wow_core::aggregate::AggregateScope {
        owner_id: "bob".to_owned(),
        space_id: "shop-1".to_owned(),
    });
    store.schedule(&held).await.expect("the row is written");
    assert_eq!(pending(&store, &order).await, vec![held.clone()]);
    assert_eq!(
        store.due(500, 10).await.expect("due reads"),
        vec![held.clone()]
    );
    let mut across = held.clone();
    across.held_to = None;
    store
        .schedule(&across)
        .await
        .expect("the row is written again");
    assert_eq!(pending(&store, &order).await, vec![across]);
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

/// SPEC DM-6: one tenant's backlog never delays another's rows. A pass shares its budget:
/// each tenant with due rows gets its earliest rows, up to the per-tenant share, whatever
/// another tenant has due before them.
pub async fn one_tenants_backlog_never_delays_another_tenants_rows(store: Store) {
    for i in 0..30 {
        let owner = aggregate();
        append(
            &store,
            &owner,
            1,
            &schedule(row(&owner, "expire", 10 + i, 1)),
        )
        .await;
    }
    let mut quiet = aggregate();
    quiet.tenant_id = "tenant-quiet".to_owned();
    append(&store, &quiet, 1, &schedule(row(&quiet, "expire", 500, 1))).await;
    let query = DueQuery {
        at: Some(1_000),
        limit: 8,
        per_tenant: 4,
        partitions: None,
    };
    let due = store.due_rows(&query).await.expect("due reads");
    assert_eq!(due.len(), 5, "{due:?}");
    let quiet_rows = due
        .iter()
        .filter(|r| r.schedule.owner.tenant_id == "tenant-quiet")
        .count();
    assert_eq!(quiet_rows, 1, "the quiet tenant's row is in the pass");
    let busy: Vec<i64> = due
        .iter()
        .filter(|r| r.schedule.owner.tenant_id == "tenant-a")
        .map(|r| r.schedule.due_at)
        .collect();
    assert_eq!(
        busy,
        vec![10, 11, 12, 13],
        "the busy tenant's earliest, in order"
    );
    // With room for only two rows, each tenant gets one before any gets a second.
    let due = store
        .due_rows(&DueQuery { limit: 2, ..query })
        .await
        .expect("due reads");
    let tenants: Vec<&str> = due
        .iter()
        .map(|r| r.schedule.owner.tenant_id.as_str())
        .collect();
    assert_eq!(tenants, vec!["tenant-a", "tenant-quiet"]);
}

/// SPEC DM-6: a scheduler that holds some partitions reads only their rows, in the query, so
/// rows of partitions it does not hold never stand before its own (a limit of one still
/// finds each partition's row).
pub async fn a_scheduler_reads_only_its_own_partitions_rows(store: Store) {
    let count = 4;
    let mut owners = Vec::new();
    for i in 0..24 {
        let owner = aggregate();
        append(
            &store,
            &owner,
            1,
            &schedule(row(&owner, "expire", 100 + i, 1)),
        )
        .await;
        owners.push(owner);
    }
    let mut seen = 0;
    for partition in 0..count {
        let filter = PartitionFilter {
            count,
            owned: vec![partition],
        };
        let query = DueQuery::at(1_000, 100).in_partitions(filter.clone());
        let due = store.due_rows(&query).await.expect("due reads");
        let expected = owners
            .iter()
            .filter(|o| partition_of(o, count) == partition)
            .count();
        assert_eq!(due.len(), expected, "partition {partition}");
        assert!(due
            .iter()
            .all(|r| partition_of(&r.schedule.owner, count) == partition));
        seen += due.len();
        if expected > 0 {
            let first = store
                .due_rows(&DueQuery::at(1_000, 1).in_partitions(filter))
                .await
                .expect("due reads");
            assert_eq!(first.len(), 1, "partition {partition}'s earliest row");
            assert_eq!(first[0], due[0]);
        }
    }
    assert_eq!(seen, owners.len());
}

/// SPEC DM-2: the next firing time a scheduler sleeps until is the earliest `fire_at` of the
/// partitions it asks for, across tenants, held rows not counted; `None` with no row waiting.
pub async fn the_next_firing_time_is_the_earliest_waiting_row_of_the_partitions_asked(
    store: Store,
) {
    let next = |partitions: Option<PartitionFilter>| {
        let store = store.clone();
        async move {
            store
                .next_fire_at(partitions.as_ref())
                .await
                .expect("the next firing time reads")
        }
    };
    assert_eq!(next(None).await, None, "no row waits");
    let count = 4;
    let mut rows = Vec::new();
    for i in 0..16_i64 {
        let mut owner = aggregate();
        owner.tenant_id = format!("tenant-{}", i % 3);
        let due_at = 10_000 - 100 * ((i * 7) % 16);
        append(
            &store,
            &owner,
            1,
            &schedule(row(&owner, "expire", due_at, 1)),
        )
        .await;
        rows.push((owner, due_at));
    }
    for partition in 0..count {
        let earliest = rows
            .iter()
            .filter(|(owner, _)| partition_of(owner, count) == partition)
            .map(|(_, due_at)| *due_at)
            .min();
        let filter = PartitionFilter {
            count,
            owned: vec![partition],
        };
        assert_eq!(next(Some(filter)).await, earliest, "partition {partition}");
    }
    rows.sort_by_key(|(_, due_at)| *due_at);
    assert_eq!(next(None).await, Some(rows[0].1), "every partition");
    let (first, _) = &rows[0];
    store
        .retry_later(failed_expiry(
            first,
            &deadline_request_id("expire", 1),
            None,
        ))
        .await
        .expect("retry_later answers");
    assert_eq!(
        next(None).await,
        Some(rows[1].1),
        "a held row is not waiting"
    );
}

/// SPEC DM-6: a failed firing counts an attempt and waits (`fire_at`, by the store's clock)
/// without standing before the rows behind it; only the schedule that fired is touched.
pub async fn a_failed_firing_waits_without_holding_up_later_rows(store: Store) {
    let stuck = aggregate();
    let next = aggregate();
    let expiry = row(&stuck, "expire", 1_000, 1);
    append(&store, &stuck, 1, &schedule(expiry.clone())).await;
    append(&store, &next, 1, &schedule(row(&next, "expire", 2_000, 1))).await;
    for expected in 1..=2 {
        let attempts = store
            .retry_later(failed_expiry(
                &stuck,
                &expiry.request_id,
                Some(Duration::from_secs(3_600)),
            ))
            .await
            .expect("retry_later answers");
        assert_eq!(attempts, Some(expected));
    }
    assert_eq!(
        store
            .retry_later(failed_expiry(
                &stuck,
                "deadline/expire/9",
                Some(Duration::ZERO)
            ))
            .await
            .expect("retry_later answers"),
        None,
        "another schedule's failure touches nothing"
    );
    let due = store
        .due_rows(&DueQuery::by_store_clock(1, 1))
        .await
        .expect("due reads");
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].schedule.owner, next, "the row behind the stuck one");
    let now = store.now().await.expect("the store's clock reads");
    let pending = store.pending_for(&stuck).await.expect("pending reads");
    assert_eq!(pending[0].attempts, 2);
    assert!(pending[0].fire_at > now + 3_000_000, "{pending:?}");
    assert_eq!(
        pending[0].schedule, expiry,
        "the schedule itself is unchanged"
    );
}

/// SPEC DM-6: a held row is never due, and an operator's re-fire (`fire_now`) makes it due
/// at once, its attempts kept.
pub async fn a_held_row_waits_for_a_re_fire(store: Store) {
    let order = aggregate();
    let expiry = row(&order, "expire", 1_000, 1);
    append(&store, &order, 1, &schedule(expiry.clone())).await;
    store
        .retry_later(failed_expiry(&order, &expiry.request_id, None))
        .await
        .expect("retry_later answers");
    let pending = store.pending_for(&order).await.expect("pending reads");
    assert!(pending[0].is_held());
    assert_eq!(pending[0].fire_at, HELD);
    assert!(store
        .due_rows(&DueQuery::by_store_clock(10, 10))
        .await
        .expect("due reads")
        .is_empty());
    assert!(store
        .fire_now(&order, "expire")
        .await
        .expect("fire_now answers"));
    assert!(!store
        .fire_now(&order, "other")
        .await
        .expect("fire_now answers"));
    let due = store
        .due_rows(&DueQuery::by_store_clock(10, 10))
        .await
        .expect("due reads");
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].attempts, 1);
    assert!(!due[0].is_held());
}

/// SPEC DM-6: a deadline scheduled again is a new schedule: due at its own time, no attempt.
pub async fn scheduling_again_starts_the_attempts_again(store: Store) {
    let order = aggregate();
    let first = row(&order, "expire", 1_000, 1);
    append(&store, &order, 1, &schedule(first.clone())).await;
    store
        .retry_later(failed_expiry(&order, &first.request_id, None))
        .await
        .expect("retry_later answers");
    let again = row(&order, "expire", 5_000, 2);
    append(&store, &order, 2, &schedule(again.clone())).await;
    let pending = store.pending_for(&order).await.expect("pending reads");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].schedule, again);
    assert_eq!((pending[0].attempts, pending[0].fire_at), (0, 5_000));
}

/// A saga's cancel-all: every row of one name in one tenant goes, whoever owns it; other
/// names and other tenants' rows stay.
pub async fn cancel_named_takes_every_row_of_the_name_in_one_tenant(store: Store) {
    let (a, b) = (aggregate(), aggregate());
    let mut elsewhere = aggregate();
    elsewhere.tenant_id = "tenant-b".to_owned();
    for owner in [&a, &b, &elsewhere] {
        let mut reminder = row(owner, "reminders/remind", 300, 1);
        reminder.request_id = format!("e-{}/0", owner.id);
        store.schedule(&reminder).await.expect("the row is written");
    }
    append(&store, &a, 1, &schedule(row(&a, "expire", 100, 1))).await;
    let cancelled = store
        .cancel_named("tenant-a", "reminders/remind")
        .await
        .expect("cancel_named answers");
    assert_eq!(cancelled, 2);
    assert_eq!(pending(&store, &a).await.len(), 1, "another name stays");
    assert!(pending(&store, &b).await.is_empty());
    assert_eq!(
        pending(&store, &elsewhere).await.len(),
        1,
        "another tenant's stays"
    );
}

/// SPEC DM-6: with no time of its own, a query is judged by the store's clock: a row due a
/// minute from the store's now is not due, one due a second ago is.
pub async fn the_store_clock_judges_what_is_due(store: Store) {
    let now = store.now().await.expect("the store's clock reads");
    let (late, early) = (aggregate(), aggregate());
    append(
        &store,
        &late,
        1,
        &schedule(row(&late, "expire", now - 1_000, 1)),
    )
    .await;
    append(
        &store,
        &early,
        1,
        &schedule(row(&early, "expire", now + 60_000, 1)),
    )
    .await;
    let due = store
        .due_rows(&DueQuery::by_store_clock(10, 10))
        .await
        .expect("due reads");
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].schedule.owner, late);
}
