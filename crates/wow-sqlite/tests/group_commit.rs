//! Group commit: concurrent appends share transactions, and a conflicting stream fails alone
//! while the rest of its batch commits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use wow_core::eventsourcing::{EventStoreError, History};

use wow_sqlite::{SqliteOptions, SqliteStore};
use wow_tck::fixtures::{aggregate, stream};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conflicting_stream_fails_alone_and_its_batch_commits() {
    let folder = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(SqliteOptions::new(folder.path().join("wow.db")))
            .await
            .unwrap(),
    );
    let taken = aggregate();
    store.append(&stream(&taken, 1, "first")).await.unwrap();

    // 200 good appends and 20 conflicting ones, all at once.
    let mut tasks = Vec::new();
    for index in 0..220 {
        let store = store.clone();
        let conflicting = index % 11 == 0;
        let s = if conflicting {
            stream(&taken, 1, &format!("late-{index}"))
        } else {
            stream(&aggregate(), 1, &format!("good-{index}"))
        };
        tasks.push(tokio::spawn(async move {
            (conflicting, store.append(&s).await)
        }));
    }
    let (mut good, mut refused) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            (false, Ok(())) => good += 1,
            (true, Err(EventStoreError::DuplicateAggregateId(_))) => refused += 1,
            (conflicting, outcome) => panic!("conflicting={conflicting}: {outcome:?}"),
        }
    }
    assert_eq!((good, refused), (200, 20));
    let (transactions, writes) = store.writer_stats();
    assert_eq!(writes, 221);
    assert!(
        transactions < writes,
        "concurrent appends share transactions: {transactions} for {writes} writes"
    );
    assert_eq!(store.load(&taken, 1, 10).await.unwrap().len(), 1);
}
