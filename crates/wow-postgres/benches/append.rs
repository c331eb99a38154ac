//! Appends on PostgreSQL against the local server, in one run: a raw `INSERT` of the same
//! rows with the same constraints, one per transaction, from 64 connections; and
//! `PostgresStore::append` from 1, 16 and 64 concurrent writers. Each case in a fresh schema.
//!
//! `cargo bench -p wow-postgres --bench append` (server: `WOW_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`).

// criterion_group! makes undocumented public functions.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};
use wow_core::eventsourcing::History;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use wow_core::{id, AggregateId, DomainEvent, DomainEventStream};
use wow_postgres::{PostgresOptions, PostgresStore};

fn url() -> String {
    std::env::var("WOW_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn stream() -> DomainEventStream {
    let event = |name: &str| DomainEvent {
        id: id::new_id(),
        name: name.to_owned(),
        revision: "0.0.1".to_owned(),
        body: serde_json::json!({"sku": "sku-1", "quantity": 1, "price": {"amount": 1250, "currency": "EUR"}}),
    };
    DomainEventStream {
        id: id::new_id(),
        request_id: id::new_id(),
        command_id: id::new_id(),
        aggregate_id: AggregateId::new("bench", "order", id::new_id(), "t"),
        version: 1,
        create_time: id::now_millis(),
        fingerprint: "0123456789abcdef0123456789abcdef".to_owned(),
        header: Default::default(),
        body: vec![event("LineAdded"), event("TotalChanged")],
    }
}

async fn store(connections: usize) -> Arc<PostgresStore> {
    let schema = format!("wow_bench_{}", uuid::Uuid::now_v7().simple());
    let options = url()
        .parse::<PostgresOptions>()
        .unwrap()
        .schema(schema)
        .max_connections(connections);
    Arc::new(PostgresStore::open(options).await.unwrap())
}

async fn drop_schema(store: &PostgresStore) {
    let (client, connection) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", store.schema()))
        .await
        .unwrap();
}

const INSERT: &str = "INSERT INTO event_stream (aggregate_name, aggregate_id, version, context_name, tenant_id, stream_id, request_id, command_id, fingerprint, create_time, header, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// `total` raw inserts from 64 connections of their own, one row per transaction.
async fn raw(schema: &str, total: usize) -> Duration {
    let mut clients = Vec::new();
    for _ in 0..64 {
        let (client, connection) = tokio_postgres::connect(
            &format!("{} options=-csearch_path={schema}", key_value_url()),
            tokio_postgres::NoTls,
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        clients.push(client);
    }
    let per = total / clients.len();
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|client| {
            tokio::spawn(async move {
                let statement = client.prepare(INSERT).await.unwrap();
                for _ in 0..per {
                    let s = stream();
                    let header = serde_json::to_value(&s.header).unwrap();
                    let body = serde_json::to_value(&s.body).unwrap();
                    client
                        .execute(
                            &statement,
                            &[
                                &s.aggregate_id.aggregate_name,
                                &s.aggregate_id.id,
                                &1i64,
                                &s.aggregate_id.context_name,
                                &s.aggregate_id.tenant_id,
                                &s.id,
                                &s.request_id,
                                &s.command_id,
                                &s.fingerprint,
                                &s.create_time,
                                &header,
                                &body,
                            ],
                        )
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

/// The URL in key=value form, so an `options` parameter can be added.
fn key_value_url() -> String {
    let config: tokio_postgres::Config = url().parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    format!(
        "host={host} port={} user={} dbname={}",
        config.get_ports().first().copied().unwrap_or(5432),
        config.get_user().unwrap_or("postgres"),
        config.get_dbname().unwrap_or("test")
    )
}

async fn ours(store: &Arc<PostgresStore>, writers: usize, total: usize) -> Duration {
    let per = total / writers;
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..per {
                    store.append(&stream()).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

fn appends(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("postgres");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    const TOTAL: usize = 6_400;
    group.throughput(Throughput::Elements(TOTAL as u64));
    let raw_store = runtime.block_on(store(1));
    group.bench_function("raw_insert_64_connections", |b| {
        b.to_async(&runtime).iter_custom(|iterations| {
            let schema = raw_store.schema().to_owned();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    total += raw(&schema, TOTAL).await;
                }
                total
            }
        })
    });
    runtime.block_on(drop_schema(&raw_store));
    for writers in [1usize, 16, 64] {
        let store = runtime.block_on(store(writers));
        let total = if writers == 1 { 640 } else { TOTAL };
        group.throughput(Throughput::Elements(total as u64));
        group.bench_function(format!("append_{writers}_writers"), |b| {
            b.to_async(&runtime).iter_custom(|iterations| {
                let store = store.clone();
                async move {
                    let mut elapsed = Duration::ZERO;
                    for _ in 0..iterations {
                        elapsed += ours(&store, writers, total).await;
                    }
                    elapsed
                }
            })
        });
        runtime.block_on(drop_schema(&store));
    }
    group.finish();
}

criterion_group!(benches, appends);
criterion_main!(benches);
