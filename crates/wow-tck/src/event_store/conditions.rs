//! Conditional appends (SPEC DM-5): an append that holds only while other aggregates are at
//! the versions its decision read, checked inside the append's atomic write.

use wow_core::aggregate::VersionCondition;
use wow_core::eventsourcing::{AppendChanges, EventStoreError, GlobalPosition};
use wow_core::{AggregateId, DomainEventStream};

use super::feed::read_settled;
use super::{append_ok, load_all, Store};
use crate::fixtures::{aggregate, stream, CONTEXT};

/// A fresh aggregate of type `room` in the suite's tenant: the aggregate decisions read.
fn room() -> AggregateId {
    AggregateId::new(CONTEXT, "room", wow_core::id::new_id(), "tenant-a")
}

fn at(aggregate_id: &AggregateId, version: u64) -> AppendChanges {
    AppendChanges::conditions(vec![VersionCondition {
        aggregate_id: aggregate_id.clone(),
        version,
    }])
}

/// An append of a room others read: guarded, nothing else.
fn guarded() -> AppendChanges {
    AppendChanges {
        read_by_others: true,
        ..AppendChanges::default()
    }
}

fn failed_on(outcome: &Result<(), EventStoreError>, read: &AggregateId, version: u64, actual: u64) {
    match outcome {
        Err(EventStoreError::ConditionFailed(failed)) => {
            assert_eq!(failed.condition.aggregate_id, *read);
            assert_eq!(failed.condition.version, version);
            assert_eq!(failed.actual, actual);
        }
        other => panic!("expected ConditionFailed on {read} at {version}, got {other:?}"),
    }
}

/// A condition that holds lets the append through, whether the aggregate read exists (at
/// its version) or not (version 0).
pub async fn an_append_whose_conditions_hold_is_written(store: Store) {
    let (existing, missing) = (room(), room());
    append_ok(&store, &stream(&existing, 1, "open")).await;
    append_ok(&store, &stream(&existing, 2, "paint")).await;
    let booking = aggregate();
    let mut changes = at(&existing, 2);
    changes.conditions.push(VersionCondition {
        aggregate_id: missing.clone(),
        version: 0,
    });
    store
        .append_with(&stream(&booking, 1, "book"), &changes)
        .await
        .expect("every condition holds");
    assert_eq!(load_all(&store, &booking).await.len(), 1);
}

/// An aggregate that moved since it was read refuses the append whole: no stream, the
/// request id still free (the node decides again under the same one), and the error names
/// the aggregate, the version read and the one found.
pub async fn a_moved_aggregate_refuses_the_append_and_nothing_is_written(store: Store) {
    let read = room();
    append_ok(&store, &stream(&read, 1, "open")).await;
    append_ok(&store, &stream(&read, 2, "close")).await;
    let booking = aggregate();
    let refused = store
        .append_with(&stream(&booking, 1, "book"), &at(&read, 1))
        .await;
    failed_on(&refused, &read, 1, 2);
    assert!(load_all(&store, &booking).await.is_empty());
    assert!(
        store
            .find_decision(&booking, "book")
            .await
            .expect("the look-up answers")
            .is_none(),
        "a refused condition records no decision"
    );
    store
        .append_with(&stream(&booking, 1, "book"), &at(&read, 2))
        .await
        .expect("decided again on what is there now, under the same request id");
}

/// "While it does not exist" is a condition too: once the aggregate is created, an append
/// that read it missing is refused.
pub async fn a_condition_on_a_missing_aggregate_fails_once_it_exists(store: Store) {
    let read = room();
    append_ok(&store, &stream(&read, 1, "open")).await;
    let refused = store
        .append_with(&stream(&aggregate(), 1, "book"), &at(&read, 0))
        .await;
    failed_on(&refused, &read, 0, 1);
}

/// The stream's own conflicts come first: a taken version or request id is reported as it
/// is, whatever the conditions say.
pub async fn an_appends_own_conflicts_come_before_its_conditions(store: Store) {
    let (read, booking) = (room(), aggregate());
    append_ok(&store, &stream(&read, 1, "open")).await;
    append_ok(&store, &stream(&booking, 1, "first")).await;
    let stale = store
        .append_with(&stream(&booking, 1, "second"), &at(&read, 0))
        .await;
    assert!(
        matches!(stale, Err(EventStoreError::DuplicateAggregateId(_))),
        "{stale:?}"
    );
    let resent = store
        .append_with(&stream(&booking, 2, "first"), &at(&read, 0))
        .await;
    assert!(
        matches!(resent, Err(EventStoreError::DuplicateRequestId(_))),
        "{resent:?}"
    );
}

/// Conditions are read in the appending aggregate's tenant: another tenant's aggregate of
/// the same id is not the one read, and a condition naming another tenant, or the appending
/// aggregate itself, is refused as an illegal argument.
pub async fn conditions_are_per_tenant_and_name_other_aggregates(store: Store) {
    let read = room();
    let mut elsewhere = read.clone();
    elsewhere.tenant_id = "tenant-b".to_owned();
    append_ok(&store, &stream(&elsewhere, 1, "open")).await;
    store
        .append_with(&stream(&aggregate(), 1, "book"), &at(&read, 0))
        .await
        .expect("tenant-b's room is not tenant-a's");
    let across = store
        .append_with(&stream(&aggregate(), 1, "book"), &at(&elsewhere, 1))
        .await;
    assert!(
        matches!(across, Err(EventStoreError::IllegalArgument(_))),
        "{across:?}"
    );
    let booking = aggregate();
    let itself = store
        .append_with(&stream(&booking, 1, "book"), &at(&booking, 0))
        .await;
    assert!(
        matches!(itself, Err(EventStoreError::IllegalArgument(_))),
        "{itself:?}"
    );
}

/// Under a race of appends to a room (guarded: others read it) and conditional appends that
/// read it, every conditional append that was written sits in the feed after exactly the
/// room's version it read: none is ordered after a move of the room it depended on, so a
/// consumer never sees a booking that was decided on a room state it has already passed.
pub async fn a_conditional_append_is_never_ordered_after_a_move_of_what_it_read(store: Store) {
    const ROOM_VERSIONS: u64 = 40;
    const BOOKERS: usize = 4;
    let start = GlobalPosition::default();
    let read = room();
    append_ok(&store, &stream(&read, 1, "open")).await;
    let mover = {
        let (store, read) = (store.clone(), read.clone());
        tokio::spawn(async move {
            for version in 2..=ROOM_VERSIONS {
                store
                    .append_with(
                        &stream(&read, version, &format!("move-{version}")),
                        &guarded(),
                    )
                    .await
                    .expect("the room's own appends never conflict");
                tokio::task::yield_now().await;
            }
        })
    };
    let bookers: Vec<_> = (0..BOOKERS)
        .map(|_| {
            let (store, read) = (store.clone(), read.clone());
            tokio::spawn(async move {
                let mut written: Vec<(DomainEventStream, u64)> = Vec::new();
                for _ in 0..500 {
                    let head = store
                        .last(&read)
                        .await
                        .expect("the room reads")
                        .map_or(0, |last| last.version);
                    let booking = stream(&aggregate(), 1, "book");
                    match store.append_with(&booking, &at(&read, head)).await {
                        Ok(()) => written.push((booking, head)),
                        Err(EventStoreError::ConditionFailed(_)) => {}
                        Err(other) => panic!("a conditional append failed otherwise: {other:?}"),
                    }
                    if head == ROOM_VERSIONS {
                        break;
                    }
                }
                written
            })
        })
        .collect();
    mover.await.expect("the room moves");
    let mut written = Vec::new();
    for booker in bookers {
        written.extend(booker.await.expect("the bookers run"));
    }
    let room_streams = usize::try_from(ROOM_VERSIONS).unwrap_or(usize::MAX);
    let entries = read_settled(store.as_ref(), start, room_streams + written.len()).await;
    let mut room_version = 0;
    let mut seen = 0;
    for entry in &entries {
        if entry.stream.aggregate_id == read {
            room_version = entry.stream.version;
        } else if let Some((_, read_at)) = written.iter().find(|(s, _)| s.id == entry.stream.id) {
            seen += 1;
            assert_eq!(
                *read_at, room_version,
                "a booking that read the room at version {read_at} is in the feed after version {room_version}"
            );
        }
    }
    assert_eq!(seen, written.len(), "every written booking is in the feed");
}

/// Two processes on one store: one closes a room while the other books stays in it. No
/// stay of that room follows the room's close in the feed: each booking either committed
/// before the close or was decided again on the closed room and refused.
pub async fn stays_through_two_processes_never_follow_the_close_of_their_room(store: Store) {
    use wow_core::aggregate::Aggregate;
    use wow_core::testing_example::{BookRoom, Nothing, Room, RoomCommand, Stay, StayCommand};
    use wow_core::CommandMessage;
    let node = || {
        let mut registry = wow_core::aggregate::AggregateRegistry::new();
        registry
            .register::<Room>()
            .expect("the room registers once");
        registry
            .register::<Stay>()
            .expect("the stay registers once");
        std::sync::Arc::new(
            wow_runtime::pipeline::LocalPipeline::builder(registry, store.clone()).build(),
        )
    };
    let (booker, closer) = (node(), node());
    let room_id = wow_core::id::new_id();
    let room = Room::named_aggregate().aggregate_id(room_id.clone(), "tck");
    let send = |pipeline: std::sync::Arc<wow_runtime::pipeline::LocalPipeline>,
                command: wow_core::command::JsonCommand| async move {
        super::unique_keys::send(&pipeline, command).await
    };
    let open = CommandMessage::of(room.clone(), RoomCommand::Open(Nothing {}))
        .into_json()
        .expect("room commands encode");
    assert!(send(closer.clone(), open).await.succeeded);
    let bookings: Vec<_> = (0..24)
        .map(|_| {
            let (booker, room_id) = (booker.clone(), room_id.clone());
            let stay = Stay::named_aggregate().aggregate_id(wow_core::id::new_id(), "tck");
            let command = CommandMessage::of(stay, StayCommand::Book(BookRoom { room: room_id }))
                .into_json()
                .expect("stay commands encode");
            tokio::spawn(send(booker, command))
        })
        .collect();
    let close = CommandMessage::of(room.clone(), RoomCommand::Close(Nothing {}))
        .into_json()
        .expect("room commands encode");
    assert!(send(closer.clone(), close).await.succeeded);
    let mut booked = 0;
    for booking in bookings {
        let result = booking.await.expect("the booking runs");
        if result.succeeded {
            booked += 1;
        } else {
            assert_eq!(
                result.error_code,
                wow_core::ErrorCode::domain("RoomClosed"),
                "{result:?}"
            );
        }
    }
    let entries = read_settled(store.as_ref(), GlobalPosition::default(), 2 + booked).await;
    let mut closed = false;
    for entry in entries {
        if entry.stream.aggregate_id == room {
            closed = entry.stream.version == 2;
        } else if entry.stream.aggregate_id.aggregate_name == "stay" {
            assert!(!closed, "a stay follows the close of its room in the feed");
        }
    }
}
