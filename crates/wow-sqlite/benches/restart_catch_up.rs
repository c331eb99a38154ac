//! How long a restart's catch-up takes after a consumer's failure was retried, against one
//! after no failure (docs/benchmarks.md). Run with
//! `cargo bench -p wow-sqlite --bench restart_catch_up`; `WOW_BENCH_VERSIONS` sets the
//! versions per aggregate (500 by default).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wow_core::eventsourcing::History;

use async_trait::async_trait;
use wow_core::compensation::RetrySpec;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::id::ManualClock;
use wow_core::{AggregateId, DomainEventStream, ErrorCode, NamedAggregate};
use wow_runtime::command::WaitCoordinator;
use wow_runtime::compensation::CompensationScheduler;
use wow_runtime::event::{catch_up, EventDispatcher};
use wow_sqlite::{SqliteOptions, SqliteStore};

const AGGREGATES: usize = 16;
/// Of them, the ones whose consumer fails once (on version 10) while later versions arrive.
const FAILING: usize = 8;

/// Counts deliveries; fails once on each (aggregate, version) it is told to.
#[derive(Debug, Default)]
struct Saga {
    deliveries: AtomicU64,
    fail_once: Mutex<HashSet<(String, u64)>>,
}

#[async_trait]
impl EventConsumer for Saga {
    fn name(&self) -> &str {
        "transfer_saga"
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        self.deliveries.fetch_add(1, Ordering::Relaxed);
        let key = (stream.aggregate_id.id.clone(), stream.version);
        if self.fail_once.lock().unwrap().remove(&key) {
            return Err(ConsumerError::new(
                ErrorCode::ServiceUnavailable,
                "NATS is down",
            ));
        }
        Ok(())
    }
}

fn dispatcher(
    store: &Arc<SqliteStore>,
    saga: Arc<Saga>,
    clock: Arc<ManualClock>,
) -> Arc<EventDispatcher> {
    EventDispatcher::builder(WaitCoordinator::new())
        .projection(saga)
        .compensation(store.clone(), RetrySpec::default())
        .positions(store.clone())
        .clock(clock)
        .build()
}

fn stream(aggregate: &AggregateId, version: u64) -> DomainEventStream {
    DomainEventStream {
        id: wow_core::id::new_id(),
        request_id: format!("r-{version}"),
        command_id: wow_core::id::new_id(),
        aggregate_id: aggregate.clone(),
        version,
        create_time: 0,
        fingerprint: format!("f-{version}"),
        header: Default::default(),
        body: vec![wow_core::DomainEvent {
            id: wow_core::id::new_id(),
            name: "Deposited".to_owned(),
            revision: "0.0.1".to_owned(),
            body: serde_json::json!({"amount": 1}),
        }],
    }
}

/// Runs the history live (failing or not), retries, restarts, and times the restart's
/// catch-up: (milliseconds, streams delivered again).
async fn run(failing: bool, versions: u64) -> (f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(SqliteOptions::new(dir.path().join("bench.db")))
            .await
            .unwrap(),
    );
    let clock = Arc::new(ManualClock::at(1_000_000));
    let saga = Arc::new(Saga::default());
    let aggregates: Vec<AggregateId> = (0..AGGREGATES)
        .map(|n| AggregateId::new("bank", "account", format!("account-{n}"), "(0)"))
        .collect();
    if failing {
        let mut fail = saga.fail_once.lock().unwrap();
        for aggregate in &aggregates[..FAILING] {
            fail.insert((aggregate.id.clone(), 10));
        }
    }
    let live = dispatcher(&store, saga, clock.clone());
    for version in 1..=versions {
        for aggregate in &aggregates {
            let stream = stream(aggregate, version);
            store.append(&stream).await.unwrap();
            live.dispatch(&stream).await;
        }
    }
    clock.advance(3_600_000);
    CompensationScheduler::new(live.clone(), store.clone())
        .unwrap()
        .run_due(1_000)
        .await
        .unwrap();
    live.flush_positions().await;
    drop(live);

    let restarted_saga = Arc::new(Saga::default());
    let restarted = dispatcher(&store, restarted_saga.clone(), clock);
    let named = [NamedAggregate::new("bank", "account")];
    let started = Instant::now();
    catch_up(
        &restarted,
        "transfer_saga",
        store.as_ref(),
        &named,
        &mut |_| {},
    )
    .await
    .unwrap();
    let took = started.elapsed().as_secs_f64() * 1_000.0;
    (took, restarted_saga.deliveries.load(Ordering::Relaxed))
}

fn main() {
    let versions = std::env::var("WOW_BENCH_VERSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (clean, clean_replayed) = runtime.block_on(run(false, versions));
    let (after, after_replayed) = runtime.block_on(run(true, versions));
    println!("restart catch-up, {AGGREGATES} aggregates x {versions} versions");
    println!(
        "  no failure:               {clean:8.1} ms, {clean_replayed} streams delivered again"
    );
    println!("  a failure on {FAILING}, retried: {after:8.1} ms, {after_replayed} streams delivered again");
    println!("  ratio: {:.2}", after / clean);
}
