//! Tests of ViewProjection over the crate's Counter example.
#![allow(clippy::unwrap_used)]

mod support;

use serde::{Deserialize, Serialize};
use support::{add, counter, stream};
use wow_core::eventsourcing::History;

use std::sync::Arc;

use wow_core::event::EventConsumer;
use wow_core::testing_example::{Counter, CounterEvent};
use wow_core::view::view;
use wow_core::view::InMemoryViewStore;
use wow_core::view::*;
use wow_core::AggregateId;
use wow_core::ErrorCode;
use wow_runtime::view::ViewProjection;

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Total {
    additions: u64,
    sum: u64,
}

#[derive(Debug)]
struct CounterTotal;

impl View for CounterTotal {
    type Aggregate = Counter;
    type State = Total;
    const NAME: &'static str = "counter_total";

    fn apply(state: &mut Total, event: &CounterEvent) {
        if let CounterEvent::Added(added) = event {
            state.additions += 1;
            state.sum += added.by;
        }
    }
}

fn projection() -> (Arc<dyn ViewStore>, ViewProjection<CounterTotal>) {
    let store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    (store.clone(), ViewProjection::new(store))
}

#[tokio::test]
async fn folds_streams_in_version_order_into_a_typed_row() {
    let (store, projection) = projection();
    let c = counter("c-1", "t");
    assert_eq!(projection.name(), "counter_total");
    assert!(view::<CounterTotal>(&*store, "t", "c-1")
        .await
        .unwrap()
        .is_none());
    projection
        .handle(&stream(&c, 1, &[CounterEvent::Started]))
        .await
        .unwrap();
    projection
        .handle(&stream(&c, 2, &[add(2), add(3)]))
        .await
        .unwrap();
    assert_eq!(
        view::<CounterTotal>(&*store, "t", "c-1").await.unwrap(),
        Some((
            Total {
                additions: 2,
                sum: 5
            },
            2
        ))
    );
}

#[tokio::test]
async fn a_redelivered_or_older_stream_changes_nothing() {
    let (store, projection) = projection();
    let c = counter("c-1", "t");
    let first = stream(&c, 1, &[add(1)]);
    projection.handle(&first).await.unwrap();
    projection.handle(&first).await.unwrap();
    // Another stream at a version already in (a replay after positions were lost).
    projection
        .handle(&stream(&c, 1, &[add(100)]))
        .await
        .unwrap();
    assert_eq!(
        view::<CounterTotal>(&*store, "t", "c-1").await.unwrap(),
        Some((
            Total {
                additions: 1,
                sum: 1
            },
            1
        ))
    );
}

#[tokio::test]
async fn a_gap_must_wait_and_applies_once_the_missing_stream_is_in() {
    let (store, projection) = projection();
    let c = counter("c-1", "t");
    let third = stream(&c, 3, &[add(30)]);
    projection.handle(&stream(&c, 1, &[add(1)])).await.unwrap();
    let error = projection.handle(&third).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::IllegalState);
    assert!(error.message.contains("must wait"), "{error}");
    assert_eq!(
        view::<CounterTotal>(&*store, "t", "c-1")
            .await
            .unwrap()
            .unwrap()
            .1,
        1
    );
    projection.handle(&stream(&c, 2, &[add(2)])).await.unwrap();
    projection.handle(&third).await.unwrap();
    assert_eq!(
        view::<CounterTotal>(&*store, "t", "c-1").await.unwrap(),
        Some((
            Total {
                additions: 3,
                sum: 33
            },
            3
        ))
    );
}

#[tokio::test]
async fn tenants_have_their_own_rows_and_other_aggregates_are_ignored() {
    let (store, projection) = projection();
    projection
        .handle(&stream(&counter("c-1", "a"), 1, &[add(1)]))
        .await
        .unwrap();
    projection
        .handle(&stream(&counter("c-1", "b"), 1, &[add(7)]))
        .await
        .unwrap();
    let elsewhere = AggregateId::new("demo", "other", "c-1", "a");
    projection
        .handle(&stream(&elsewhere, 2, &[add(9)]))
        .await
        .unwrap();
    assert_eq!(
        view::<CounterTotal>(&*store, "a", "c-1")
            .await
            .unwrap()
            .unwrap()
            .0
            .sum,
        1
    );
    assert_eq!(
        view::<CounterTotal>(&*store, "b", "c-1")
            .await
            .unwrap()
            .unwrap()
            .0
            .sum,
        7
    );
}

#[tokio::test]
async fn a_stream_that_does_not_decode_fails_and_writes_nothing() {
    let (store, projection) = projection();
    let c = counter("c-1", "t");
    let mut bad = stream(&c, 1, &[add(1)]);
    bad.body[0].name = "Renamed".to_owned();
    let error = projection.handle(&bad).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::IllegalState);
    assert!(view::<CounterTotal>(&*store, "t", "c-1")
        .await
        .unwrap()
        .is_none());
}

/// A stream whose projection failed (a store lost for a moment) holds no later stream of its
/// aggregate back when the projection has the history: the gap is filled from it, in order,
/// each stream recorded, and the failed stream's own retry finds it in.
#[tokio::test]
async fn with_history_a_gap_is_filled_from_it_and_the_missed_streams_retry_finds_it_in() {
    use wow_core::eventsourcing::{EventStore, InMemoryEventStore};
    let history = Arc::new(InMemoryEventStore::new());
    let store: Arc<dyn ViewStore> = Arc::new(InMemoryViewStore::new());
    let projection = ViewProjection::<CounterTotal>::new(store.clone())
        .with_history(history.clone() as Arc<dyn EventStore>);
    let c = counter("c-1", "t");
    let streams: Vec<_> = (1..=4)
        .map(|version| stream(&c, version, &[add(version * 10)]))
        .collect();
    for written in &streams {
        history.append(written).await.unwrap();
    }
    projection.handle(&streams[0]).await.unwrap();
    // Versions 2 and 3 were missed (their projection failed); 4 comes.
    projection.handle(&streams[3]).await.unwrap();
    let expected = Some((
        Total {
            additions: 4,
            sum: 100,
        },
        4,
    ));
    assert_eq!(
        view::<CounterTotal>(&*store, "t", "c-1").await.unwrap(),
        expected
    );
    // The retries of the missed streams change nothing.
    projection.handle(&streams[1]).await.unwrap();
    projection.handle(&streams[2]).await.unwrap();
    assert_eq!(
        view::<CounterTotal>(&*store, "t", "c-1").await.unwrap(),
        expected
    );
}
