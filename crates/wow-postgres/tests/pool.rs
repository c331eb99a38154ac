//! Consumers that fall behind never take the pool from the command path: their transactions
//! use at most half the pool's connections, so appends find one.
#![allow(clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wow_core::eventsourcing::History;

use tokio::sync::Semaphore;
use wow_core::event::Processed;
use wow_tck::fixtures::{aggregate, stream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_find_a_connection_while_every_consumer_holds_a_transaction_open() {
    let Some(test) = support::fresh_with(4).await else {
        return;
    };
    // More consumers than connections, each holding its transaction open until released.
    let gate = Arc::new(Semaphore::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let consumers: Vec<_> = (0..6)
        .map(|n| {
            let (store, gate, inside) = (test.store.clone(), gate.clone(), inside.clone());
            tokio::spawn(async move {
                store
                    .process_once("slow", &format!("m-{n}"), move |_transaction| {
                        Box::pin(async move {
                            inside.fetch_add(1, Ordering::SeqCst);
                            gate.acquire().await.map_err(|e| e.to_string())?.forget();
                            Ok(())
                        })
                    })
                    .await
            })
        })
        .collect();
    // Half the pool's connections (2 of 4) hold consumer transactions; no more get in,
    // however long the others wait. What is seen is asserted only after the consumers are
    // released, so a failure never leaves their transactions open.
    let deadline = Instant::now() + Duration::from_secs(10);
    while inside.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut most_inside = inside.load(Ordering::SeqCst);
    let watch = Instant::now() + Duration::from_millis(500);
    while Instant::now() < watch {
        most_inside = most_inside.max(inside.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let appended = tokio::time::timeout(
        Duration::from_secs(5),
        test.store.append(&stream(&aggregate(), 1, "r-1")),
    )
    .await;

    gate.add_permits(6);
    let mut processed = Vec::new();
    for consumer in consumers {
        processed.push(consumer.await.expect("the task").expect("processed"));
    }
    assert_eq!(most_inside, 2, "consumers hold at most half the pool");
    assert!(
        matches!(appended, Ok(Ok(()))),
        "an append must not wait behind blocked consumers: {appended:?}"
    );
    assert_eq!(processed, vec![Processed::Applied; 6]);
}
