//! Losing the primary, on servers of the tests' own (never the shared one): a frozen server
//! is answered `Unavailable` within the call deadline and served again once it runs; a
//! server that came back read-only (as a standby does) is `Unavailable`, never an internal
//! fault, and never answers "no decision" from there; a hung first host of a multi-host URL
//! does not stop the walk to the next.
//!
//! Each test prints how long the store was without answers, and skips loudly when the
//! PostgreSQL binaries are missing (fails under `WOW_REQUIRE_BACKENDS=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};
use wow_core::eventsourcing::{EventStoreError, History, RequestDecision, RequestLog, StoreHealth};

use support::server::OwnServer;
use wow_core::AggregateId;
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_tck::fixtures::{aggregate, stream};

/// What a call may take past its deadline: the scheduler's and the machine's slack.
const SLACK: Duration = Duration::from_millis(1500);

async fn open(url: &str, deadline: Duration) -> PostgresStore {
    PostgresStore::open(
        url.parse::<PostgresOptions>()
            .unwrap()
            .schema("failover")
            .max_connections(4)
            .call_timeout(deadline),
    )
    .await
    .expect("the store opens")
}

/// Appends `request_id` at `version` as a careful caller does after an unknown outcome:
/// look it up, and resend only when no decision is recorded, until it is appended or
/// `patience` is over. How long it took.
async fn append_safely(
    store: &PostgresStore,
    aggregate: &AggregateId,
    version: u64,
    request_id: &str,
    patience: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        match store.find_decision(aggregate, request_id).await {
            Ok(Some(RequestDecision::Appended(record))) => {
                assert_eq!(record.version, version);
                return started.elapsed();
            }
            Ok(None) => match store.append(&stream(aggregate, version, request_id)).await {
                Ok(()) => return started.elapsed(),
                Err(EventStoreError::Unavailable(_) | EventStoreError::DuplicateRequestId(_)) => {}
                Err(other) => panic!("a resend after NONE failed: {other:?}"),
            },
            Ok(Some(other)) => panic!("an unexpected decision: {other:?}"),
            Err(EventStoreError::Unavailable(_)) => {}
            Err(other) => panic!("a look-up failed as no outage does: {other:?}"),
        }
        assert!(
            started.elapsed() < patience,
            "not served again within {patience:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_is_unavailable_within_the_deadline_and_served_again_once_it_runs() {
    let Some(server) = OwnServer::start(&[]) else {
        return;
    };
    let deadline = Duration::from_secs(1);
    let store = open(&server.url(), deadline).await;
    let aggregate = aggregate();
    store.append(&stream(&aggregate, 1, "r-1")).await.unwrap();

    server.freeze();
    // Every call ends within the deadline, unavailable: the pooled connections, then the
    // new ones (the socket connects, the server never answers).
    for _ in 0..3 {
        let started = Instant::now();
        let appended = store.append(&stream(&aggregate, 2, "r-2")).await;
        let waited = started.elapsed();
        assert!(
            matches!(appended, Err(EventStoreError::Unavailable(_))),
            "{appended:?}"
        );
        assert!(waited < deadline + SLACK, "the append waited {waited:?}");
        let started = Instant::now();
        let looked = store.find_decision(&aggregate, "r-2").await;
        let waited = started.elapsed();
        assert!(
            matches!(looked, Err(EventStoreError::Unavailable(_))),
            "a look-up of a frozen server must be unknown, not {looked:?}"
        );
        assert!(waited < deadline + SLACK, "the look-up waited {waited:?}");
    }

    let started = Instant::now();
    let check = store.check(Duration::from_millis(500)).await;
    assert_eq!(check.status, "DOWN", "{check:?}");
    assert!(check.lost_for_ms.is_some(), "{check:?}");
    assert!(started.elapsed() < Duration::from_millis(500) + SLACK);

    server.thaw();
    // The appends sent to the frozen server may commit now: the look-up decides.
    let back = append_safely(&store, &aggregate, 2, "r-2", Duration::from_secs(10)).await;
    println!("frozen server: served again {back:?} after it runs");
    assert!(
        back < deadline + Duration::from_secs(2),
        "back after {back:?}"
    );
    let history = store.load(&aggregate, 1, u64::MAX).await.unwrap();
    let versions: Vec<_> = history.iter().map(|s| s.version).collect();
    assert_eq!(versions, vec![1, 2], "nothing lost, nothing doubled");
    let check = store.check(Duration::from_millis(500)).await;
    assert_eq!((check.status, check.lost_for_ms), ("UP", None), "{check:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_back_as_read_only_is_unavailable_and_never_answers_no_decision() {
    let Some(server) = OwnServer::start(&[]) else {
        return;
    };
    let store = open(&server.url(), Duration::from_secs(2)).await;
    let aggregate = aggregate();
    store.append(&stream(&aggregate, 1, "r-1")).await.unwrap();

    // The host comes back read-only, as a standby (or a demoted primary) does.
    server
        .execute(&["ALTER SYSTEM SET default_transaction_read_only = on"])
        .await;
    server.restart();
    let mut last = None;
    for attempt in 0..4 {
        let appended = store
            .append(&stream(&aggregate, 2, &format!("ro-{attempt}")))
            .await;
        match appended {
            Err(error @ EventStoreError::Unavailable(_)) => last = Some(error.to_string()),
            other => panic!("an append on a read-only server must be Unavailable: {other:?}"),
        }
        for request_id in ["r-1", "never-sent"] {
            let looked = store.find_decision(&aggregate, request_id).await;
            assert!(
                matches!(looked, Err(EventStoreError::Unavailable(_))),
                "a look-up on a read-only server must be unknown, not {looked:?}"
            );
        }
    }
    let last = last.unwrap();
    assert!(last.contains("25006"), "the SQLSTATE is said: {last}");
    let check = store.check(Duration::from_millis(500)).await;
    assert_eq!(
        (check.status, check.reachable, check.writable),
        ("READ_ONLY", true, false),
        "{check:?}"
    );

    // Writable again (a promotion): served again by itself, nothing of the refused appends.
    server
        .execute(&[
            "SET default_transaction_read_only = off",
            "ALTER SYSTEM RESET default_transaction_read_only",
        ])
        .await;
    server.restart();
    let back = append_safely(&store, &aggregate, 2, "r-2", Duration::from_secs(10)).await;
    println!("read-only server: served again {back:?} after it is writable");
    let history = store.load(&aggregate, 1, u64::MAX).await.unwrap();
    let requests: Vec<_> = history.iter().map(|s| s.request_id.as_str()).collect();
    assert_eq!(requests, vec!["r-1", "r-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_first_host_does_not_stop_the_walk_to_the_next() {
    let Some(server) = OwnServer::start(&[]) else {
        return;
    };
    // A host that takes connections and never says a word.
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung_port = hung.local_addr().unwrap().port();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hung.accept().await {
            held.push(socket);
        }
    });
    let url = format!(
        "postgres://postgres@127.0.0.1:{hung_port},127.0.0.1:{}/postgres?target_session_attrs=read-write&connect_timeout=1",
        server.port()
    );
    let started = Instant::now();
    let store = open(&url, Duration::from_secs(3)).await;
    let opened = started.elapsed();
    let aggregate = aggregate();
    store.append(&stream(&aggregate, 1, "r-1")).await.unwrap();
    println!("hung first host: opened on the second in {opened:?}");
    assert!(
        opened < Duration::from_secs(1) + SLACK,
        "the walk waited {opened:?}"
    );
    holder.abort();
}
