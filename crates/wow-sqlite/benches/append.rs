//! Appends on SQLite: how close group commit comes to the machine's limit.
//!
//! In one run, on the same schema and rows (2 events per stream), `synchronous=FULL`:
//! (a) raw SQLite, one row per transaction; (b) raw SQLite, 1000 rows per transaction;
//! (c) `SqliteStore::append` from 1, 16 and 64 concurrent writers, with time-ordered ids, and
//! at 64 writers with random (UUIDv4) request ids as a user might send them; (d) the same
//! 64 writers, each append claiming one unique key (SPEC DM-1), against (c) in one run.
//!
//! `cargo bench -p wow-sqlite --bench append`

// criterion_group! makes undocumented public functions.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wow_core::eventsourcing::{AppendChanges, History};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rusqlite::{params, Connection};
use wow_core::unique_key::{KeyChange, UniqueKey};
use wow_core::{id, AggregateId, DomainEvent, DomainEventStream};
use wow_sqlite::{SqliteOptions, SqliteStore};

fn stream(aggregate: &AggregateId, version: u64, request_id: String) -> DomainEventStream {
    let event = |name: &str| DomainEvent {
        id: id::new_id(),
        name: name.to_owned(),
        revision: "0.0.1".to_owned(),
        body: serde_json::json!({"sku": format!("sku-{version}"), "quantity": version, "price": {"amount": 1250, "currency": "EUR"}}),
    };
    DomainEventStream {
        id: id::new_id(),
        request_id,
        command_id: id::new_id(),
        aggregate_id: aggregate.clone(),
        version,
        create_time: id::now_millis(),
        fingerprint: "0123456789abcdef0123456789abcdef".to_owned(),
        header: Default::default(),
        body: vec![event("LineAdded"), event("TotalChanged")],
    }
}

fn fresh_path(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join("wow-sqlite-bench");
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(format!("{name}-{}.db", id::new_id()));
    path
}

const INSERT: &str = "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

fn insert_raw(connection: &Connection, s: &DomainEventStream) {
    connection
        .prepare_cached(INSERT)
        .unwrap()
        .execute(params![
            s.aggregate_id.aggregate_name,
            s.aggregate_id.id,
            s.version as i64,
            s.aggregate_id.context_name,
            s.aggregate_id.tenant_id,
            s.id,
            s.request_id,
            s.command_id,
            s.fingerprint,
            s.create_time,
            serde_json::to_string(&s.header).unwrap(),
            serde_json::to_string(&s.body).unwrap(),
        ])
        .unwrap();
}

/// A raw connection on a file with the store's schema (made by opening a store on it once).
fn raw_connection(runtime: &tokio::runtime::Runtime, name: &str) -> Connection {
    let path = fresh_path(name);
    runtime.block_on(async { drop(SqliteStore::open(SqliteOptions::new(&path)).await.unwrap()) });
    let connection = Connection::open(&path).unwrap();
    connection
        .pragma_update(None, "journal_mode", "WAL")
        .unwrap();
    connection
        .pragma_update(None, "synchronous", "FULL")
        .unwrap();
    connection
}

fn raw(c: &mut Criterion, runtime: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("sqlite_raw");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    let connection = raw_connection(runtime, "raw-one");
    const ONE: u64 = 200;
    group.throughput(Throughput::Elements(ONE));
    group.bench_function("one_row_per_transaction", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let streams: Vec<_> = (0..ONE)
                    .map(|_| stream(&aggregate(), 1, id::new_id()))
                    .collect();
                let start = Instant::now();
                for s in &streams {
                    connection.execute_batch("BEGIN IMMEDIATE").unwrap();
                    insert_raw(&connection, s);
                    connection.execute_batch("COMMIT").unwrap();
                }
                total += start.elapsed();
            }
            total
        })
    });
    let connection = raw_connection(runtime, "raw-batched");
    const BATCHED: u64 = 10_000;
    group.throughput(Throughput::Elements(BATCHED));
    group.bench_function("1000_rows_per_transaction", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let streams: Vec<_> = (0..BATCHED)
                    .map(|_| stream(&aggregate(), 1, id::new_id()))
                    .collect();
                let start = Instant::now();
                for chunk in streams.chunks(1000) {
                    connection.execute_batch("BEGIN IMMEDIATE").unwrap();
                    for s in chunk {
                        insert_raw(&connection, s);
                    }
                    connection.execute_batch("COMMIT").unwrap();
                }
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

fn aggregate() -> AggregateId {
    AggregateId::new("bench", "order", id::new_id(), "t")
}

/// `total` appends from `writers` tasks, each appending to fresh aggregates.
async fn append_from(
    store: &Arc<SqliteStore>,
    writers: usize,
    total: usize,
    random_request_ids: bool,
    claim: bool,
) -> Duration {
    let per_writer = total / writers;
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..per_writer {
                    let request_id = if random_request_ids {
                        uuid::Uuid::new_v4().to_string()
                    } else {
                        id::new_id()
                    };
                    let stream = stream(&aggregate(), 1, request_id.clone());
                    if claim {
                        let key = KeyChange::Claim(UniqueKey::new("sku", request_id));
                        store
                            .append_with(&stream, &AppendChanges::keys(vec![key]))
                            .await
                            .unwrap();
                    } else {
                        store.append(&stream).await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

fn ours(c: &mut Criterion, runtime: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("sqlite_append");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    for (writers, total, random, claim) in [
        (1usize, 200usize, false, false),
        (16, 5_000, false, false),
        (64, 10_000, false, false),
        (64, 10_000, true, false),
        (64, 10_000, false, true),
    ] {
        let store = runtime.block_on(async {
            Arc::new(
                SqliteStore::open(SqliteOptions::new(fresh_path("ours")))
                    .await
                    .unwrap(),
            )
        });
        group.throughput(Throughput::Elements(total as u64));
        let name = match (random, claim) {
            (true, _) => format!("writers_{writers}_random_request_ids"),
            (_, true) => format!("writers_{writers}_each_claiming_a_key"),
            _ => format!("writers_{writers}"),
        };
        group.bench_function(name, |b| {
            b.to_async(runtime).iter_custom(|iterations| {
                let store = store.clone();
                async move {
                    let mut elapsed = Duration::ZERO;
                    for _ in 0..iterations {
                        elapsed += append_from(&store, writers, total, random, claim).await;
                    }
                    elapsed
                }
            })
        });
        let (transactions, writes) = store.writer_stats();
        println!(
            "group commit, {writers} writers: {writes} appends in {transactions} transactions, {:.1} per transaction",
            writes as f64 / transactions.max(1) as f64
        );
    }
    group.finish();
}

fn appends(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    raw(c, &runtime);
    ours(c, &runtime);
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join("wow-sqlite-bench"));
}

criterion_group!(benches, appends);
criterion_main!(benches);
