//! What a store migrated from an earlier schema must still hold (SPEC ID-6, TN-1): run by
//! each backend's migration test after it has written history the old way and opened the
//! store under the current schema.

use wow_core::event::ConsumerPositions;
use wow_core::eventsourcing::{
    EventStore, EventStoreError, GlobalPosition, History, RejectionRecord, RequestDecision,
    SnapshotStore,
};
use wow_core::{AggregateId, DomainEventStream, ErrorCode};

use crate::event_store::feed::read_settled;
use crate::fixtures::stream;

/// `store`, migrated, holds `old` (versions 1 and 2 of `order`, request ids `r-1` and `r-2`),
/// the consumer `view`'s position 2 and a snapshot at version 2 of `order`, all written
/// before the migration: the history loads equal, every old request id still holds its key
/// against appends and rejections, positions and snapshots keep their aggregate under its
/// tenant, and another tenant may take the same id and request id for itself. The global
/// feed lists the old streams first, in their order, then those appended since, and no
/// rejection.
pub async fn a_migrated_store_keeps_what_it_held<S>(
    store: &S,
    order: &AggregateId,
    old: &[DomainEventStream],
) where
    S: EventStore + SnapshotStore + ConsumerPositions,
{
    assert_eq!(History::load(store, order, 1, 10).await.unwrap(), old);
    // Positions and snapshots keep their aggregate, now under its tenant (version 5).
    let positions = ConsumerPositions::positions(store, "view", std::slice::from_ref(order))
        .await
        .unwrap();
    assert_eq!(positions.get(order), Some(&2));
    assert_eq!(SnapshotStore::version(store, order).await.unwrap(), Some(2));
    // Another tenant holds nothing under the same id, and may take `r-1` for itself.
    let mut twin = order.clone();
    twin.tenant_id = "t-other".to_owned();
    assert!(History::load(store, &twin, 1, 10).await.unwrap().is_empty());
    let twins_first = stream(&twin, 1, "r-1");
    store.append(&twins_first).await.unwrap();
    match store.find_decision(order, "r-1").await.unwrap() {
        Some(RequestDecision::Appended(record)) => {
            assert_eq!(record.stream_id, old[0].id);
            assert_eq!(record.command_id, old[0].command_id);
            assert_eq!(record.version, 1);
        }
        other => panic!("r-1 was appended before the migration, got {other:?}"),
    }
    for (version, request_id) in [(3, "r-1"), (1, "r-2")] {
        assert!(
            matches!(
                store.append(&stream(order, version, request_id)).await,
                Err(EventStoreError::DuplicateRequestId(_))
            ),
            "{request_id} at version {version} must be a duplicate"
        );
    }
    let rejection = RejectionRecord {
        command_id: "c".to_owned(),
        fingerprint: "f".to_owned(),
        error_code: ErrorCode::NotFound,
        error_msg: "no".to_owned(),
        version: 2,
        create_time: 0,
    };
    assert!(matches!(
        store.record_rejection(order, "r-2", &rejection).await,
        Err(EventStoreError::DuplicateRequestId(_))
    ));
    let third = stream(order, 3, "r-3");
    store.append(&third).await.unwrap();
    store
        .record_rejection(order, "r-4", &rejection)
        .await
        .unwrap();
    assert_eq!(
        store.find_decision(order, "r-4").await.unwrap(),
        Some(RequestDecision::Rejected(rejection))
    );
    assert_eq!(History::load(store, order, 1, 10).await.unwrap().len(), 3);
    let feed = read_settled(store, GlobalPosition::START, 4).await;
    let streams: Vec<_> = feed.into_iter().map(|entry| entry.stream).collect();
    assert_eq!(
        streams,
        [old, &[twins_first, third]].concat(),
        "the feed lists the old streams first"
    );
}

/// Records on `order` (whose version 1 is appended) what a build before SPEC ES-3 held: an
/// expected-version conflict recorded as the decision of `r-conflict`, beside a business
/// rejection of `r-rule`. The caller then takes its schema back to the version before the
/// migration that drops such records, and opens the store again.
pub async fn record_conflicts_as_an_earlier_build_did(store: &dyn EventStore, order: &AggregateId) {
    for (request_id, code) in [
        ("r-conflict", ErrorCode::CommandExpectVersionConflict),
        ("r-rule", ErrorCode::domain("InsufficientBalance")),
    ] {
        let record = RejectionRecord {
            command_id: wow_core::id::new_id(),
            fingerprint: "f".to_owned(),
            error_msg: code.to_string(),
            error_code: code,
            version: 1,
            create_time: 0,
        };
        store
            .record_rejection(order, request_id, &record)
            .await
            .unwrap();
    }
}

/// After the migration (see [`record_conflicts_as_an_earlier_build_did`]) the conflict no
/// longer holds its request id: no decision is found and the request's retry appends; the
/// business rejection stays recorded.
pub async fn a_migrated_store_holds_no_conflict_as_a_decision(
    store: &dyn EventStore,
    order: &AggregateId,
) {
    assert!(store
        .find_decision(order, "r-conflict")
        .await
        .unwrap()
        .is_none());
    assert!(matches!(
        store.find_decision(order, "r-rule").await.unwrap(),
        Some(RequestDecision::Rejected(record))
            if record.error_code == ErrorCode::domain("InsufficientBalance")
    ));
    store.append(&stream(order, 2, "r-conflict")).await.unwrap();
}
