//! Tests of ViewProjection over the crate's Counter example.
#![allow(clippy::unwrap_used)]

mod support;

use serde::{Deserialize, Serialize};
use support::{add, counter, stream};

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
