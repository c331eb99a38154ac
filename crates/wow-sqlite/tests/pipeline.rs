//! The pipeline on the SQLite store, across a restart of the whole process state (SPEC RQ-4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../wow-core/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use serde_json::json;
use support::*;
use wow_core::command::ORIGINAL_COMMAND_ID;
use wow_core::eventsourcing::EventStore;
use wow_core::ErrorCode;
use wow_runtime::command::WaitPlan;
use wow_runtime::eventsourcing::SnapshotStrategy;
use wow_runtime::pipeline::LocalPipeline;
use wow_sqlite::{SqliteOptions, SqliteStore};

fn pipeline(store: SqliteStore) -> LocalPipeline {
    let events: Arc<dyn EventStore> = Arc::new(store.clone());
    LocalPipeline::builder(registry(), events)
        .snapshots(Arc::new(store), SnapshotStrategy::Every(2))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_append_rejects_a_resend_with_the_original_outcome() {
    let folder = tempfile::tempdir().unwrap();
    let options = SqliteOptions::new(folder.path().join("wow.db"));
    let id = account_id();
    let first = deposit(&id, 5).with_request_id("deposit-1");
    let original = {
        let first_life = pipeline(SqliteStore::open(options.clone()).await.unwrap());
        first_life
            .gateway
            .send_and_wait(open(&id, 10), WaitPlan::processed())
            .await
            .unwrap();
        first_life
            .gateway
            .send_and_wait(first.clone(), WaitPlan::processed())
            .await
            .unwrap()
    };

    // A new process: new Bloom filters, empty caches, the same file.
    let second_life = pipeline(SqliteStore::open(options).await.unwrap());
    let runs = second_life.metrics.snapshot().handler_runs;
    let error = second_life
        .gateway
        .send_and_wait(resend(&first), WaitPlan::processed())
        .await
        .unwrap_err();
    let result = error.result();
    assert_eq!(result.error_code, ErrorCode::DuplicateRequestId);
    assert_eq!(result.aggregate_version, original.aggregate_version);
    assert_eq!(
        result.result.get(ORIGINAL_COMMAND_ID),
        Some(&json!(first.id))
    );
    let after = second_life.metrics.snapshot();
    assert_eq!(
        after.handler_runs,
        runs + 1,
        "the filter had not seen it: the handler ran again"
    );
    assert_eq!(after.duplicates_by_append, 1, "and the append rejected it");

    // The history holds the one deposit, and the aggregate goes on from it.
    let next = second_life
        .gateway
        .send_and_wait(deposit(&id, 1), WaitPlan::processed())
        .await
        .unwrap();
    assert_eq!(next.aggregate_version, Some(3));
    let history = second_life.store().load(&id, 1, u64::MAX).await.unwrap();
    assert_eq!(
        history
            .iter()
            .filter(|s| s.request_id == "deposit-1")
            .count(),
        1
    );
}
