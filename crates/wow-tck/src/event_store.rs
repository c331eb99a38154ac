//! The EventStore conformance suite (SPEC ES-1, ES-2, ES-3, ES-5, RQ-6, ID-3, ID-6, DM-1,
//! DM-5, and the global feed of docs/distributed.md).
//!
//! Each case takes a fresh, empty store. Run them all with [`event_store_tck!`](crate::event_store_tck).

use std::collections::HashSet;
use std::sync::Arc;

use wow_core::eventsourcing::{EventStore, EventStoreError};
use wow_core::{AggregateId, DomainEventStream, NamedAggregate};

use crate::fixtures::{aggregate, stream, stream_at, AGGREGATE, CONTEXT};

mod conditions;
mod conflicts;
mod decisions;
pub(crate) mod feed;
mod key_reservations;
mod keys;
mod queries;
mod unique_keys;
pub use conditions::{
    a_condition_on_a_missing_aggregate_fails_once_it_exists,
    a_conditional_append_is_never_ordered_after_a_move_of_what_it_read,
    a_moved_aggregate_refuses_the_append_and_nothing_is_written,
    an_append_whose_conditions_hold_is_written,
    an_appends_own_conflicts_come_before_its_conditions,
    conditions_are_per_tenant_and_name_other_aggregates,
    stays_through_two_processes_never_follow_the_close_of_their_room,
};
pub use conflicts::{
    a_lost_race_on_the_append_records_nothing, a_redelivered_message_is_its_own_success,
    a_stale_pin_of_an_appended_intent_is_its_duplicate,
    an_expected_version_conflict_records_nothing,
};
pub use decisions::{
    a_rejection_blocks_a_later_append_of_its_request_id,
    a_second_rejection_of_a_request_id_is_a_duplicate,
    an_append_blocks_a_later_rejection_of_its_request_id, decisions_are_seen_only_by_their_tenant,
    records_a_rejection_and_finds_it, rejection_and_append_race_has_exactly_one_decision,
    rejections_are_per_aggregate, rejects_a_rejection_with_an_empty_request_id,
};
pub use feed::{
    a_feed_reader_racing_appenders_skips_nothing, rejections_are_not_in_the_feed,
    the_feed_lists_appended_streams_in_append_order, the_feed_of_an_empty_store_is_empty,
    the_feed_pages_by_limit, the_feed_resumes_after_a_position, SETTLE,
};
pub use key_reservations::{
    a_confirmed_reservation_holds_its_key_for_good,
    a_lapsed_reservation_frees_its_key_and_a_late_confirmation_is_refused,
    a_reservation_holds_its_key_until_its_time,
    a_sign_up_confirmed_late_loses_its_name_to_a_later_one,
    claim_keys_takes_free_keys_and_reports_held_ones,
    claims_of_a_lapsed_reservation_have_exactly_one_winner,
};
pub use queries::queries_streams_as_documents;
pub use unique_keys::{
    a_claim_is_written_with_its_stream, a_key_another_aggregate_holds_refuses_the_whole_append,
    a_refused_append_changes_no_key, a_release_frees_a_key_and_a_move_takes_the_new_one,
    a_release_racing_claims_frees_the_key_once,
    a_second_claimant_is_refused_and_its_resend_replays_the_refusal,
    an_operator_release_frees_a_key_whoever_holds_it,
    claiming_a_key_held_and_releasing_one_not_held_change_nothing,
    claims_through_two_processes_have_exactly_one_winner,
    concurrent_claims_of_one_value_have_exactly_one_winner, keys_are_per_tenant_and_per_space,
};

/// The store under test.
pub type Store = Arc<dyn EventStore>;

async fn load_all(store: &Store, aggregate: &AggregateId) -> Vec<DomainEventStream> {
    store
        .load(aggregate, 1, u64::MAX)
        .await
        .expect("loading a whole aggregate succeeds")
}

async fn append_ok(store: &Store, stream: &DomainEventStream) {
    if let Err(error) = store.append(stream).await {
        panic!("append of version {} failed: {error:?}", stream.version);
    }
}

/// Appended streams load back whole and equal, in version order; an unknown aggregate loads
/// as empty.
pub async fn appends_and_loads_streams_in_version_order(store: Store) {
    let order = aggregate();
    let streams: Vec<_> = (1..=3)
        .map(|v| stream(&order, v, &format!("r-{v}")))
        .collect();
    for s in &streams {
        append_ok(&store, s).await;
    }
    assert_eq!(load_all(&store, &order).await, streams);
    assert!(load_all(&store, &aggregate()).await.is_empty());
}

/// A second stream with a request id the aggregate holds is `DuplicateRequestId`, carries
/// the rejected stream's ids, and leaves nothing behind.
pub async fn rejects_duplicate_request_id(store: Store) {
    let order = aggregate();
    let first = stream(&order, 1, "r-1");
    append_ok(&store, &first).await;
    let again = stream(&order, 2, "r-1");
    match store.append(&again).await {
        Err(EventStoreError::DuplicateRequestId(rejected)) => {
            assert_eq!(rejected.stream_id, again.id);
            assert_eq!(rejected.command_id, again.command_id);
            assert_eq!(rejected.request_id, "r-1");
            assert_eq!(rejected.version, 2);
            assert_eq!(rejected.aggregate_id, order);
        }
        other => panic!("expected DuplicateRequestId, got {other:?}"),
    }
    assert_eq!(load_all(&store, &order).await, vec![first.clone()]);
    let record = store.find_request(&order, "r-1").await.unwrap().unwrap();
    assert_eq!(
        record.command_id, first.command_id,
        "the original keeps the request id"
    );
}

/// A stream at a taken version is `EventVersionConflict` and leaves nothing behind.
pub async fn rejects_event_version_conflict(store: Store) {
    let order = aggregate();
    let first = stream(&order, 1, "r-1");
    let second = stream(&order, 2, "r-2");
    append_ok(&store, &first).await;
    append_ok(&store, &second).await;
    let stale = stream(&order, 2, "r-3");
    match store.append(&stale).await {
        Err(EventStoreError::EventVersionConflict(rejected)) => {
            assert_eq!(rejected.stream_id, stale.id);
            assert_eq!(rejected.request_id, "r-3");
            assert_eq!(rejected.command_id, stale.command_id);
            assert_eq!(rejected.version, 2);
        }
        other => panic!("expected EventVersionConflict, got {other:?}"),
    }
    assert_eq!(load_all(&store, &order).await, vec![first, second]);
    assert!(
        store.find_request(&order, "r-3").await.unwrap().is_none(),
        "a rejected stream's request id is not recorded"
    );
}

/// A second create (version 1) with another request id is `DuplicateAggregateId` and leaves
/// nothing behind.
pub async fn rejects_duplicate_aggregate_id(store: Store) {
    let order = aggregate();
    let first = stream(&order, 1, "create-1");
    append_ok(&store, &first).await;
    let other = stream(&order, 1, "create-2");
    match store.append(&other).await {
        Err(EventStoreError::DuplicateAggregateId(rejected)) => {
            assert_eq!(rejected.stream_id, other.id);
            assert_eq!(rejected.request_id, "create-2");
            assert_eq!(rejected.version, 1);
        }
        other => panic!("expected DuplicateAggregateId, got {other:?}"),
    }
    assert_eq!(load_all(&store, &order).await, vec![first]);
    assert!(store
        .find_request(&order, "create-2")
        .await
        .unwrap()
        .is_none());
}

/// A create replayed with its own request id is `DuplicateRequestId`, not
/// `DuplicateAggregateId` (SPEC ES-4: the replay of the original request is told apart from a
/// competing create); the same holds at any version.
pub async fn reports_replayed_request_as_duplicate_request_id(store: Store) {
    let order = aggregate();
    append_ok(&store, &stream(&order, 1, "create-1")).await;
    let replay = stream(&order, 1, "create-1");
    assert!(
        matches!(
            store.append(&replay).await,
            Err(EventStoreError::DuplicateRequestId(_))
        ),
        "a replayed create must be reported as DuplicateRequestId"
    );
    append_ok(&store, &stream(&order, 2, "r-2")).await;
    let replay = stream(&order, 2, "r-2");
    assert!(
        matches!(
            store.append(&replay).await,
            Err(EventStoreError::DuplicateRequestId(_))
        ),
        "a replayed stream at a taken version must be reported as DuplicateRequestId"
    );
    assert_eq!(load_all(&store, &order).await.len(), 2);
}

/// Two aggregates may hold the same request id independently (SPEC ID-3).
pub async fn accepts_same_request_id_on_two_aggregates(store: Store) {
    let (a, b) = (aggregate(), aggregate());
    append_ok(&store, &stream(&a, 1, "shared")).await;
    append_ok(&store, &stream(&b, 1, "shared")).await;
    let mut other_type = aggregate();
    other_type.aggregate_name = "invoice".to_owned();
    other_type.id = a.id.clone();
    append_ok(&store, &stream(&other_type, 1, "shared")).await;
    assert_eq!(load_all(&store, &a).await.len(), 1);
    assert_eq!(load_all(&store, &b).await.len(), 1);
    assert_eq!(load_all(&store, &other_type).await.len(), 1);
}

/// Version 0, an empty stream or an empty request id is `IllegalArgument`, and nothing is
/// stored.
pub async fn rejects_illegal_streams(store: Store) {
    let order = aggregate();
    let zero = stream(&order, 0, "r-0");
    let mut empty = stream(&order, 1, "r-1");
    empty.body.clear();
    let no_request = stream(&order, 1, "");
    for bad in [zero, empty, no_request] {
        assert!(
            matches!(
                store.append(&bad).await,
                Err(EventStoreError::IllegalArgument(_))
            ),
            "version {} with {} events and request id {:?} must be rejected",
            bad.version,
            bad.body.len(),
            bad.request_id
        );
    }
    assert!(load_all(&store, &order).await.is_empty());
    assert!(store.last(&order).await.unwrap().is_none());
}

/// `find_request` answers with the holding stream's version, command id, create time and
/// fingerprint; an unknown request id, or one held by another aggregate, is absent.
pub async fn finds_request_by_aggregate_and_request_id(store: Store) {
    let (order, other) = (aggregate(), aggregate());
    append_ok(&store, &stream(&order, 1, "r-1")).await;
    let second = stream_at(&order, 2, "r-2", 1_700_000_000_123);
    append_ok(&store, &second).await;
    append_ok(&store, &stream(&other, 1, "only-other")).await;

    let record = store
        .find_request(&order, "r-2")
        .await
        .unwrap()
        .expect("r-2 is held");
    assert_eq!(record.version, 2);
    assert_eq!(record.stream_id, second.id);
    assert_eq!(record.command_id, second.command_id);
    assert_eq!(record.create_time, 1_700_000_000_123);
    assert_eq!(record.fingerprint, second.fingerprint);
    assert!(store
        .find_request(&order, "never-sent")
        .await
        .unwrap()
        .is_none());
    assert!(store
        .find_request(&order, "only-other")
        .await
        .unwrap()
        .is_none());
    assert!(store
        .find_request(&aggregate(), "r-1")
        .await
        .unwrap()
        .is_none());
}

/// `load` returns exactly the versions in `head..=tail`; `load_by_time` exactly the streams
/// made in `start..=end`.
pub async fn loads_by_version_range_and_time_range(store: Store) {
    let order = aggregate();
    let base = 1_700_000_000_000;
    let streams: Vec<_> = (1..=5)
        .map(|v| stream_at(&order, v, &format!("r-{v}"), base + 1000 * v as i64))
        .collect();
    for s in &streams {
        append_ok(&store, s).await;
    }
    assert_eq!(
        store.load(&order, 2, 4).await.unwrap(),
        streams[1..4].to_vec()
    );
    assert_eq!(
        store.load(&order, 3, 3).await.unwrap(),
        streams[2..3].to_vec()
    );
    assert_eq!(
        store.load(&order, 4, 100).await.unwrap(),
        streams[3..].to_vec()
    );
    assert!(store.load(&order, 6, 9).await.unwrap().is_empty());
    let by_time = store
        .load_by_time(&order, base + 2000, base + 4000)
        .await
        .unwrap();
    assert_eq!(by_time, streams[1..4].to_vec());
    assert_eq!(
        store
            .load_by_time(&order, i64::MIN, i64::MAX)
            .await
            .unwrap(),
        streams
    );
    assert!(store
        .load_by_time(&order, base + 1, base + 999)
        .await
        .unwrap()
        .is_empty());
}

/// A head of 0, a head after the tail, or a start after the end is `IllegalArgument`, never a
/// panic.
pub async fn rejects_bad_ranges(store: Store) {
    let order = aggregate();
    append_ok(&store, &stream(&order, 1, "r-1")).await;
    for (head, tail) in [(0, 5), (3, 2), (u64::MAX, 1)] {
        assert!(
            matches!(
                store.load(&order, head, tail).await,
                Err(EventStoreError::IllegalArgument(_))
            ),
            "load({head}, {tail}) must be IllegalArgument"
        );
    }
    assert!(matches!(
        store.load_by_time(&order, 10, 9).await,
        Err(EventStoreError::IllegalArgument(_))
    ));
}

/// `last` is the stream with the highest version, or none.
pub async fn returns_last_stream(store: Store) {
    let order = aggregate();
    assert!(store.last(&order).await.unwrap().is_none());
    let streams: Vec<_> = (1..=3)
        .map(|v| stream(&order, v, &format!("r-{v}")))
        .collect();
    for s in &streams {
        append_ok(&store, s).await;
    }
    assert_eq!(store.last(&order).await.unwrap(), Some(streams[2].clone()));
}

/// `scan_aggregate_ids` lists each aggregate of one type once, in (tenant, id) order after
/// the cursor, up to the limit, filtered by context and name, with its tenant.
pub async fn scans_aggregate_ids(store: Store) {
    let mut ids: Vec<AggregateId> = Vec::new();
    for index in 0..7 {
        let mut order = aggregate();
        order.tenant_id = format!("tenant-{}", index % 2);
        append_ok(&store, &stream(&order, 1, "r-1")).await;
        append_ok(&store, &stream(&order, 2, "r-2")).await;
        ids.push(order);
    }
    let mut invoice = aggregate();
    invoice.aggregate_name = "invoice".to_owned();
    append_ok(&store, &stream(&invoice, 1, "r-1")).await;
    let mut elsewhere = aggregate();
    elsewhere.context_name = "other-context".to_owned();
    elsewhere.aggregate_name = "stock".to_owned();
    append_ok(&store, &stream(&elsewhere, 1, "r-1")).await;
    // Another tenant's aggregate with an id that tenant-0 holds is listed too (SPEC TN-1).
    let mut twin = ids[0].clone();
    twin.tenant_id = "tenant-1".to_owned();
    append_ok(&store, &stream(&twin, 1, "r-1")).await;
    ids.push(twin);
    ids.sort_by(|a, b| (&a.tenant_id, &a.id).cmp(&(&b.tenant_id, &b.id)));

    let named = NamedAggregate::new(CONTEXT, AGGREGATE);
    let all = store.scan_aggregate_ids(&named, None, 100).await.unwrap();
    assert_eq!(
        all, ids,
        "each aggregate once, in (tenant, id) order, with its tenant"
    );
    let first = store.scan_aggregate_ids(&named, None, 4).await.unwrap();
    assert_eq!(first, ids[..4].to_vec());
    let rest = store
        .scan_aggregate_ids(&named, Some(&first[3]), 100)
        .await
        .unwrap();
    assert_eq!(rest, ids[4..].to_vec());
    let wrong_context = NamedAggregate::new("other-context", AGGREGATE);
    assert!(store
        .scan_aggregate_ids(&wrong_context, None, 100)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .scan_aggregate_ids(&named, None, 0)
        .await
        .unwrap()
        .is_empty());
}

/// 1000 appends to distinct aggregates in parallel all succeed and all load back.
pub async fn appends_in_parallel_to_distinct_aggregates(store: Store) {
    let tasks: Vec<_> = (0..1000)
        .map(|index| {
            let store = store.clone();
            tokio::spawn(async move {
                let order = aggregate();
                let s = stream(&order, 1, &format!("r-{index}"));
                store.append(&s).await.map(|()| s)
            })
        })
        .collect();
    let mut appended = Vec::new();
    for task in tasks {
        appended.push(task.await.expect("task runs").expect("append succeeds"));
    }
    for s in appended {
        assert_eq!(load_all(&store, &s.aggregate_id).await, vec![s]);
    }
}

/// 64 writers append version N+1 to one aggregate at once: exactly one wins, every other gets
/// `EventVersionConflict`, and history holds the winner only.
pub async fn version_race_has_exactly_one_winner(store: Store) {
    let order = aggregate();
    append_ok(&store, &stream(&order, 1, "r-0")).await;
    let tasks: Vec<_> = (0..64)
        .map(|index| {
            let (store, order) = (store.clone(), order.clone());
            tokio::spawn(async move {
                let s = stream(&order, 2, &format!("racer-{index}"));
                (store.append(&s).await, s)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.expect("task runs") {
            (Ok(()), s) => winners.push(s),
            (Err(EventStoreError::EventVersionConflict(_)), _) => {}
            (Err(other), _) => {
                panic!("a losing racer must get EventVersionConflict, got {other:?}")
            }
        }
    }
    assert_eq!(winners.len(), 1, "exactly one racer wins");
    let history = load_all(&store, &order).await;
    assert_eq!(history.len(), 2);
    assert_eq!(history[1], winners[0]);
}

/// 64 writers append one request id at different versions at once: exactly one wins, every
/// other gets `DuplicateRequestId` or `EventVersionConflict`, and never do two streams hold
/// that request id.
pub async fn duplicate_storm_stores_one_stream_per_request_id(store: Store) {
    let order = aggregate();
    append_ok(&store, &stream(&order, 1, "r-0")).await;
    let tasks: Vec<_> = (0..64u64)
        .map(|index| {
            let (store, order) = (store.clone(), order.clone());
            tokio::spawn(async move {
                // Half race for the next version, half for later ones.
                let version = if index % 2 == 0 { 2 } else { 2 + index };
                store.append(&stream(&order, version, "storm")).await
            })
        })
        .collect();
    let mut wins = 0;
    for task in tasks {
        match task.await.expect("task runs") {
            Ok(()) => wins += 1,
            Err(
                EventStoreError::DuplicateRequestId(_) | EventStoreError::EventVersionConflict(_),
            ) => {}
            Err(other) => panic!("a losing writer must get a conflict, got {other:?}"),
        }
    }
    assert_eq!(wins, 1, "exactly one writer wins");
    let holding: Vec<_> = load_all(&store, &order)
        .await
        .into_iter()
        .filter(|s| s.request_id == "storm")
        .collect();
    assert_eq!(holding.len(), 1, "never two streams with one request id");
    let record = store.find_request(&order, "storm").await.unwrap().unwrap();
    assert_eq!(record.version, holding[0].version);
}

/// Every field of a stream survives the store: ids, header, fingerprint, revisions, bodies.
pub async fn preserves_every_stream_field(store: Store) {
    let order = aggregate();
    let s = stream_at(&order, 1, "r-1", 1_700_000_000_001);
    append_ok(&store, &s).await;
    let loaded = load_all(&store, &order).await;
    assert_eq!(loaded, vec![s.clone()]);
    let ids: HashSet<_> = loaded[0].body.iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(loaded[0].aggregate_id.tenant_id, "tenant-a");
    assert_eq!(loaded[0].body[1].revision, "0.0.2");
}

/// Each tenant's aggregate ids and request ids are its own namespace (SPEC TN-1): two tenants
/// may both hold `order-1`, each with its own version 1 under the same request id; each loads,
/// finds and scans only its own history, and a rejection in one tenant leaves the other's
/// request id free.
pub async fn tenants_are_namespaces(store: Store) {
    let a = aggregate();
    let mut b = a.clone();
    b.tenant_id = "tenant-b".to_owned();
    let (a1, b1) = (stream(&a, 1, "r-1"), stream(&b, 1, "r-1"));
    append_ok(&store, &a1).await;
    append_ok(&store, &b1).await;
    append_ok(&store, &stream(&a, 2, "r-2")).await;

    assert_eq!(load_all(&store, &a).await.len(), 2);
    assert_eq!(
        load_all(&store, &b).await,
        vec![b1.clone()],
        "only its own history"
    );
    assert_eq!(store.last(&b).await.unwrap(), Some(b1.clone()));
    let by_time = store.load_by_time(&b, 0, i64::MAX).await.unwrap();
    assert_eq!(by_time, vec![b1.clone()]);
    let found = store
        .find_request(&b, "r-1")
        .await
        .unwrap()
        .expect("b's own decision");
    assert_eq!(found.version, 1);
    assert_eq!(found.stream_id, b1.id, "b's stream, not a's");
    assert!(
        store.find_request(&b, "r-2").await.unwrap().is_none(),
        "a's request id is not b's"
    );

    // b's version 2 is free though a holds one, and a's version-1 conflict is a's alone.
    append_ok(&store, &stream(&b, 2, "r-9")).await;
    let err = store.append(&stream(&b, 3, "r-1")).await.unwrap_err();
    assert!(
        matches!(err, EventStoreError::DuplicateRequestId(_)),
        "{err:?}"
    );

    // A rejection of `r-3` in tenant b; tenant a may still append `r-3`.
    let rejection = decisions::rejection(wow_core::ErrorCode::domain("Refused"), 2);
    store.record_rejection(&b, "r-3", &rejection).await.unwrap();
    append_ok(&store, &stream(&a, 3, "r-3")).await;
    assert!(matches!(
        store.find_decision(&b, "r-3").await.unwrap(),
        Some(wow_core::eventsourcing::RequestDecision::Rejected(_))
    ));
    assert!(matches!(
        store.find_decision(&a, "r-3").await.unwrap(),
        Some(wow_core::eventsourcing::RequestDecision::Appended(_))
    ));
}
