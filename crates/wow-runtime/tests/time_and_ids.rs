//! Time and ids come in through `Clock` and `IdGenerator` (docs/distributed.md): a pipeline wired with
//! its own takes every timestamp and id of a command's path from them, results and stage
//! signals included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use support::*;
use wow_core::eventsourcing::{History, InMemoryEventStore, InMemorySnapshotStore, SnapshotStore};
use wow_core::id::{IdGenerator, ManualClock};
use wow_core::CommandStage;
use wow_runtime::command::WaitPlan;
use wow_runtime::eventsourcing::SnapshotStrategy;
use wow_runtime::pipeline::LocalPipeline;

/// Ids `fixed-1`, `fixed-2`, ...: nothing else makes ids of that shape.
#[derive(Debug, Default)]
struct Counted(AtomicU64);

impl IdGenerator for Counted {
    fn next_id(&self) -> String {
        format!("fixed-{}", self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

#[tokio::test]
async fn a_pipeline_takes_time_and_ids_from_its_wiring() {
    let store = Arc::new(InMemoryEventStore::new());
    let snapshots = Arc::new(InMemorySnapshotStore::new());
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(Arc::new(ManualClock::at(1_000)))
        .id_generator(Arc::new(Counted::default()))
        .snapshots(snapshots.clone(), SnapshotStrategy::Every(1))
        .build();
    let id = account_id();

    let mut stages = Box::pin(
        pipeline
            .gateway
            .send_and_wait_stream(open(&id, 10), WaitPlan::new(CommandStage::Snapshot)),
    );
    let mut seen = Vec::new();
    while let Some(result) = stages.next().await {
        assert!(result.succeeded, "{result:?}");
        seen.push(result);
    }
    assert!(seen.len() >= 2, "SENT and PROCESSED at least: {seen:?}");
    for result in &seen {
        assert_eq!(result.signal_time, 1_000, "{result:?}");
        assert!(result.id.starts_with("fixed-"), "{result:?}");
    }

    let streams = store.load(&id, 1, u64::MAX).await.unwrap();
    assert_eq!(streams[0].create_time, 1_000);
    assert!(streams[0].id.starts_with("fixed-"));
    assert!(streams[0]
        .body
        .iter()
        .all(|event| event.id.starts_with("fixed-")));
    let snapshot = snapshots
        .load(&id)
        .await
        .unwrap()
        .expect("a snapshot at version 1");
    assert_eq!(snapshot.snapshot_time, 1_000);
}
