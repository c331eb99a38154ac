//! In-process `send_and_wait` through the whole pipeline on the in-memory store: gateway
//! (validation, Bloom check), bus, processing node (Bloom check, cached aggregate, handler,
//! append), wait signal. 64 concurrent callers.
//!
//! Two shapes: 10,000 accounts with short histories, and 100 accounts holding 2,000 events
//! each (the shape where replaying history on every command collapses). Both at `SENT` and
//! at `PROCESSED`. After the criterion runs, a latency pass prints p50/p99.
//!
//! `cargo bench -p wow-runtime --bench pipeline`

// criterion_group! makes undocumented public functions.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

/// The allocator a service built on wow-rs should use: the pipeline allocates per command,
/// and glibc's malloc spends a large share of the time in its own locks and consolidation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use support::*;
use wow_core::AggregateId;
use wow_runtime::command::WaitPlan;
use wow_runtime::pipeline::LocalPipeline;

const CALLERS: usize = 64;

struct Shape {
    name: &'static str,
    accounts: Vec<AggregateId>,
    pipeline: Arc<LocalPipeline>,
}

async fn shape(name: &'static str, accounts: usize, history: usize) -> Shape {
    let pipeline = Arc::new(LocalPipeline::builder(registry(), memory_store()).build());
    let ids: Vec<AggregateId> = (0..accounts).map(|_| account_id()).collect();
    for id in &ids {
        pipeline
            .gateway
            .send_and_wait(open(id, 0), WaitPlan::processed())
            .await
            .expect("open");
    }
    run(
        &pipeline,
        &ids,
        history.saturating_sub(1) * accounts,
        WaitPlan::processed(),
    )
    .await;
    Shape {
        name,
        accounts: ids,
        pipeline,
    }
}

/// Sends `total` deposits from 64 callers round-robin over `accounts`; returns the elapsed
/// time and every command's latency.
async fn run(
    pipeline: &Arc<LocalPipeline>,
    accounts: &[AggregateId],
    total: usize,
    plan: WaitPlan,
) -> (Duration, Vec<Duration>) {
    let accounts = Arc::new(accounts.to_vec());
    let start = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let (pipeline, accounts, plan) = (pipeline.clone(), accounts.clone(), plan.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(total / CALLERS + 1);
                let mut i = caller;
                while i < total {
                    let command = deposit(&accounts[i % accounts.len()], 1);
                    let began = Instant::now();
                    pipeline
                        .gateway
                        .send_and_wait(command, plan.clone())
                        .await
                        .expect("deposit");
                    latencies.push(began.elapsed());
                    i += CALLERS;
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(total);
    for task in tasks {
        latencies.extend(task.await.expect("caller"));
    }
    (start.elapsed(), latencies)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1));
    sorted[index]
}

fn send_and_wait(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let shapes = runtime.block_on(async {
        vec![
            shape("10k_accounts_short_history", 10_000, 1).await,
            shape("100_accounts_2000_events", 100, 2_000).await,
        ]
    });
    let mut group = c.benchmark_group("send_and_wait_64_callers");
    const BATCH: u64 = 10_000;
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(20);
    for shape in &shapes {
        for (stage, plan) in [
            ("sent", WaitPlan::sent()),
            ("processed", WaitPlan::processed()),
        ] {
            group.bench_function(format!("{}/{stage}", shape.name), |b| {
                b.to_async(&runtime).iter_custom(|iterations| {
                    let (pipeline, accounts, plan) =
                        (shape.pipeline.clone(), shape.accounts.clone(), plan.clone());
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iterations {
                            total += run(&pipeline, &accounts, BATCH as usize, plan.clone())
                                .await
                                .0;
                        }
                        total
                    }
                })
            });
        }
    }
    group.finish();

    for shape in &shapes {
        for (stage, plan) in [
            ("sent", WaitPlan::sent()),
            ("processed", WaitPlan::processed()),
        ] {
            let (elapsed, mut latencies) =
                runtime.block_on(run(&shape.pipeline, &shape.accounts, 200_000, plan));
            latencies.sort_unstable();
            println!(
                "latency {}/{stage}: {:.0} commands/s, p50 {:?}, p99 {:?} (200,000 commands, 64 callers)",
                shape.name,
                200_000.0 / elapsed.as_secs_f64(),
                percentile(&latencies, 0.50),
                percentile(&latencies, 0.99),
            );
        }
    }
}

criterion_group!(benches, send_and_wait);
criterion_main!(benches);
