//! Deadlines (SPEC DM-2) on PostgreSQL, beyond the conformance suite: rows outlive the store
//! that wrote them, a deadline write the database refuses takes its stream with it, a rename
//! moves them as the in-memory reference does, rows come in the reference's order, two appends
//! that change the same deadlines in opposite orders never deadlock, and a `fired` delete that
//! meets a reschedule in flight keeps the new schedule.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};
use wow_core::eventsourcing::{AggregateRename, AppendChanges, EventStoreError, History};

use serde_json::json;
use wow_core::deadline::{
    deadline_request_id, DeadlineBacklog, DeadlineChange, DeadlineStore, ScheduledCommand,
};
use wow_core::{AggregateId, Stores};
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

/// `aggregate` under the type name `name`.
fn named(aggregate: &AggregateId, name: &str) -> AggregateId {
    let mut renamed = aggregate.clone();
    name.clone_into(&mut renamed.aggregate_name);
    renamed
}

/// A raw connection to `schema`, its connection driven in the background.
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

#[tokio::test]
async fn a_scheduled_row_survives_a_new_store_on_the_same_schema() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let order = aggregate();
    let expiry = row(&order, "expire", 1_000, 1);
    let mut reminder = row(&order, "reminders/remind", 500, 1);
    reminder.request_id = "e-1/0".to_owned();
    test.store
        .append_with(&stream(&order, 1, "r-1"), &schedule(expiry.clone()))
        .await
        .unwrap();
    test.store.schedule(&reminder).await.unwrap();

    // What a restarted process opens: a new pool on the same schema.
    let restarted = test.reopen().await;
    assert_eq!(
        restarted.scheduled_for(&order).await.unwrap(),
        vec![expiry.clone(), reminder.clone()]
    );
    assert_eq!(
        restarted.due(1_000, 10).await.unwrap(),
        vec![reminder, expiry.clone()]
    );
    assert_eq!(
        restarted.backlog().await.unwrap(),
        DeadlineBacklog {
            pending: 2,
            next_due_at: Some(500)
        }
    );
    assert!(restarted.fired(&expiry).await.unwrap());
    assert_eq!(test.store.scheduled_for(&order).await.unwrap().len(), 1);
}

/// A deadline whose row the database itself refuses (JSONB holds no `\u0000`) fails the
/// append after its stream was inserted: the stream is rolled back with it.
#[tokio::test]
async fn a_deadline_the_database_refuses_rolls_back_its_stream() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let order = aggregate();
    let mut refused = row(&order, "expire", 10, 1);
    refused.body = json!({"reason": "nul \u{0000} byte"});
    let outcome = test
        .store
        .append_with(&stream(&order, 1, "r-1"), &schedule(refused))
        .await;
    assert!(
        matches!(outcome, Err(EventStoreError::Internal(_))),
        "{outcome:?}"
    );
    assert!(test
        .store
        .load(&order, 1, u64::MAX)
        .await
        .unwrap()
        .is_empty());
    assert!(test.store.scheduled_for(&order).await.unwrap().is_empty());
    // The request id and the version are free again.
    test.store
        .append_with(
            &stream(&order, 1, "r-1"),
            &schedule(row(&order, "expire", 10, 1)),
        )
        .await
        .expect("the same append without the bad row");
}

/// Several changes of one append, out of name order and one name twice, leave the rows the
/// in-memory reference leaves (the store makes them in name order, keeping each name's own).
#[tokio::test]
async fn an_appends_changes_leave_the_rows_the_reference_leaves() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let memory = Stores::in_memory();
    let order = aggregate();
    let changes = AppendChanges::deadlines(vec![
        DeadlineChange::Schedule(row(&order, "remind", 30, 1)),
        DeadlineChange::Schedule(row(&order, "expire", 10, 1)),
        DeadlineChange::Cancel {
            name: "expire".to_owned(),
        },
        DeadlineChange::Schedule(row(&order, "archive", 90, 1)),
        DeadlineChange::Cancel {
            name: "remind".to_owned(),
        },
        DeadlineChange::Schedule(row(&order, "remind", 40, 1)),
    ]);
    let ours = Stores::of(test.store.clone());
    for stores in [&ours, &memory] {
        stores
            .events
            .append_with(&stream(&order, 1, "r-1"), &changes)
            .await
            .unwrap();
    }
    let expected = memory.deadlines.scheduled_for(&order).await.unwrap();
    assert_eq!(
        expected.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["archive", "remind"]
    );
    assert_eq!(
        ours.deadlines.scheduled_for(&order).await.unwrap(),
        expected
    );
}

/// Rows due at the same time come in key order (tenant, aggregate name, id, name; by bytes,
/// whatever the database's collation), as in the in-memory reference.
#[tokio::test]
async fn rows_due_at_one_time_come_in_the_references_key_order() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let memory = Stores::in_memory();
    let ours = Stores::of(test.store.clone());
    let base = aggregate();
    let owners: Vec<AggregateId> = ["b", "B", "a", "A-2", "a-1"]
        .iter()
        .map(|id| {
            let mut owner = base.clone();
            (*id).clone_into(&mut owner.id);
            owner
        })
        .collect();
    for stores in [&ours, &memory] {
        for owner in &owners {
            for name in ["z", "Z", "expire"] {
                stores
                    .deadlines
                    .schedule(&row(owner, name, 7, 1))
                    .await
                    .unwrap();
            }
        }
    }
    let expected = memory.deadlines.due(7, 100).await.unwrap();
    assert_eq!(expected.len(), 15);
    assert_eq!(ours.deadlines.due(7, 100).await.unwrap(), expected);
    assert_eq!(
        ours.deadlines.due(7, 4).await.unwrap(),
        memory.deadlines.due(7, 4).await.unwrap()
    );
}

/// A rename moves the rows aggregates of the old name own and re-addresses those sent to
/// them, in its transaction; a row the new name already holds under a moved row's key is
/// replaced by it. The outcome is the in-memory reference's; a dry run moves nothing.
#[tokio::test]
async fn a_rename_moves_the_deadlines_as_the_reference_does() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let memory = Stores::in_memory();
    let ours = Stores::of(test.store.clone());
    let order = aggregate();
    let payment = named(&aggregate(), "payment");
    // A saga's row, owned by a payment and sent to the order.
    let mut chase = row(&payment, "chaser/chase", 20, 1);
    chase.target = order.clone();
    // A saga's row of the new name under the key the order's own row moves to.
    let stale = row(&named(&order, "purchase"), "expire", 99, 7);
    for stores in [&ours, &memory] {
        stores
            .events
            .append_with(
                &stream(&order, 1, "r-1"),
                &schedule(row(&order, "expire", 10, 1)),
            )
            .await
            .unwrap();
        stores.deadlines.schedule(&chase).await.unwrap();
        stores.deadlines.schedule(&stale).await.unwrap();
        stores
            .renames
            .rename_aggregate(AggregateRename::new(&order.aggregate_name, "purchase").dry_run())
            .await
            .unwrap();
        assert_eq!(
            stores.deadlines.scheduled_for(&order).await.unwrap().len(),
            1,
            "a dry run moves nothing"
        );
        stores
            .renames
            .rename_aggregate(AggregateRename::new(&order.aggregate_name, "purchase"))
            .await
            .unwrap();
    }
    let purchase = named(&order, "purchase");
    let mut moved = row(&purchase, "expire", 10, 1);
    moved.target = purchase.clone();
    let mut chased = chase.clone();
    chased.target = purchase.clone();
    for stores in [&ours, &memory] {
        assert!(stores
            .deadlines
            .scheduled_for(&order)
            .await
            .unwrap()
            .is_empty());
        assert_eq!(
            stores.deadlines.scheduled_for(&purchase).await.unwrap(),
            vec![moved.clone()]
        );
        assert_eq!(
            stores.deadlines.scheduled_for(&payment).await.unwrap(),
            vec![chased.clone()]
        );
        assert_eq!(
            stores.deadlines.due(i64::MAX, 10).await.unwrap(),
            vec![moved.clone(), chased.clone()]
        );
    }
}

/// The scheduler's `fired` for a schedule that an append is replacing right now waits for
/// that append, then finds the new request id and leaves the row: a deadline scheduled
/// again is never lost to the firing of the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fired_waits_for_a_reschedule_in_flight_and_keeps_it() {
    let Some(test) = support::fresh().await else {
        return;
    };
    let order = aggregate();
    let first = row(&order, "expire", 10, 1);
    test.store
        .append_with(&stream(&order, 1, "r-1"), &schedule(first.clone()))
        .await
        .unwrap();
    let again = row(&order, "expire", 50, 2);
    let client = raw(test.store.schema()).await;
    client.batch_execute("BEGIN").await.unwrap();
    client
        .execute(
            "UPDATE deadline SET due_at = $1, request_id = $2 WHERE aggregate_id = $3",
            &[&again.due_at, &again.request_id, &order.id],
        )
        .await
        .unwrap();
    let in_flight: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let firing = {
        let (store, first) = (test.store.clone(), first.clone());
        tokio::spawn(async move { store.fired(&first).await })
    };
    // Polls the server until the delete is seen waiting on the transaction in flight.
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = client
            .query_one(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                &[&in_flight],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(
            !firing.is_finished(),
            "fired did not wait for the reschedule"
        );
        assert!(Instant::now() < give_up, "fired never reached the row");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.batch_execute("COMMIT").await.unwrap();
    let deleted = firing.await.expect("fired runs").unwrap();
    assert!(!deleted, "the old schedule's firing deletes nothing");
    assert_eq!(test.store.scheduled_for(&order).await.unwrap(), vec![again]);
}

/// Two appends of one aggregate (at different versions, so both may commit) change the same
/// two deadlines at once, in opposite orders, round after round: both succeed and neither
/// dies of a deadlock (the changes are made in name order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_in_opposite_orders_never_deadlock() {
    let Some(test) = support::fresh().await else {
        return;
    };
    for _ in 0..20 {
        let order = aggregate();
        let tasks =
            [(2, ["expire", "remind"]), (3, ["remind", "expire"])].map(|(version, names)| {
                let (store, order) = (test.store.clone(), order.clone());
                tokio::spawn(async move {
                    let changes = AppendChanges::deadlines(
                        names
                            .iter()
                            .map(|name| DeadlineChange::Schedule(row(&order, name, 10, version)))
                            .collect(),
                    );
                    store
                        .append_with(&stream(&order, version, &format!("r-{version}")), &changes)
                        .await
                })
            });
        for task in tasks {
            task.await
                .expect("the append runs")
                .expect("both appends commit");
        }
        assert_eq!(test.store.scheduled_for(&order).await.unwrap().len(), 2);
    }
}
