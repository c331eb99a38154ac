//! Ownership in the local pipeline runs one way (gateway → command bus → node → event bus →
//! dispatcher, which holds the gateway only weakly): dropping the pipeline ends its workers
//! and releases its stores, with no setter or `Drop` hook to break a loop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;
use wow_core::compensation::{InMemoryCompensationStore, RetrySpec};
use wow_core::eventsourcing::InMemoryEventStore;
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

#[tokio::test]
async fn dropping_the_pipeline_releases_its_stores() {
    let store = Arc::new(InMemoryEventStore::new());
    let failures = Arc::new(InMemoryCompensationStore::new());
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .compensation(failures.clone(), RetrySpec::default())
        .build();
    let id = account_id();
    let opened = pipeline
        .gateway
        .send_and_wait(open(&id, 10), WaitPlan::processed())
        .await
        .expect("opened");
    assert!(opened.succeeded);

    drop(pipeline);

    // The workers end asynchronously once their queues drain: poll against a deadline.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Arc::strong_count(&store) > 1 || Arc::strong_count(&failures) > 1 {
        assert!(
            Instant::now() < deadline,
            "the pipeline's tasks still hold the stores: event store {}, compensation {}",
            Arc::strong_count(&store),
            Arc::strong_count(&failures)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
