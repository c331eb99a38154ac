//! PostgreSQL stopped mid-run: appends fail with `ServiceUnavailable` (not a panic, not a
//! conflict), the request look-up cannot answer (the outcome is unknown), and the store
//! recovers by itself once the server is back.
//!
//! It stops the machine's PostgreSQL server, so it is `#[ignore]`d in the ordinary run and
//! `.ci/run` runs it alone, after everything else, and restarts the server whatever happens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;
use std::time::Duration;
use wow_core::eventsourcing::{EventStoreError, History, RequestLog};

use wow_core::{id, AggregateId, DomainEvent, DomainEventStream};

fn cluster(action: &str) {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("a Debian PostgreSQL cluster")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .next()
        .expect("a cluster version");
    let status = Command::new("pg_ctlcluster")
        .args([
            "--skip-systemctl-redirect",
            &version,
            "main",
            action,
            "-m",
            "fast",
        ])
        .status()
        .expect("pg_ctlcluster runs");
    assert!(status.success(), "pg_ctlcluster {action} failed");
}

/// Starts the server again when dropped, even if the test failed halfway.
struct Restart;

impl Drop for Restart {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| cluster("start"));
    }
}

fn stream(aggregate: &AggregateId, version: u64) -> DomainEventStream {
    DomainEventStream {
        id: id::new_id(),
        request_id: id::new_id(),
        command_id: id::new_id(),
        aggregate_id: aggregate.clone(),
        version,
        create_time: id::now_millis(),
        fingerprint: "f".into(),
        header: Default::default(),
        body: vec![DomainEvent {
            id: id::new_id(),
            name: "Happened".into(),
            revision: "0.0.1".into(),
            body: serde_json::json!({}),
        }],
    }
}

#[tokio::test]
#[ignore = "stops the PostgreSQL server: .ci/run runs it alone with --ignored"]
async fn appends_fail_as_unavailable_during_an_outage_and_recover_after_it() {
    let store = support::fresh_with(4)
        .await
        .expect("PostgreSQL is up before the outage");
    let aggregate = AggregateId::new("outage", "ledger", id::new_id(), "t");
    store.append(&stream(&aggregate, 1)).await.unwrap();

    let restart = Restart;
    cluster("stop");
    let during = stream(&aggregate, 2);
    match store.append(&during).await {
        Err(EventStoreError::Unavailable(_)) => {}
        other => panic!("an append during the outage must be Unavailable, got {other:?}"),
    }
    match store.find_request(&aggregate, &during.request_id).await {
        Err(EventStoreError::Unavailable(_)) => {} // the outcome is unknown, not "absent"
        other => panic!("the look-up during the outage must be Unavailable, got {other:?}"),
    }
    cluster("start");
    drop(restart);

    // The same store, no restart of ours: the pool reconnects.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let after = stream(&aggregate, 2);
    loop {
        match store.append(&after).await {
            Ok(()) => break,
            Err(EventStoreError::Unavailable(_)) if tokio::time::Instant::now() < deadline => {
                tokio::task::yield_now().await;
            }
            other => panic!("the store did not recover: {other:?}"),
        }
    }
    assert!(
        store
            .find_request(&aggregate, &during.request_id)
            .await
            .unwrap()
            .is_none(),
        "the failed append left nothing"
    );
    assert_eq!(store.load(&aggregate, 1, 10).await.unwrap().len(), 2);
}
