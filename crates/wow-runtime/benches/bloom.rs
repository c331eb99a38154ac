//! Bloom-filter check-and-insert: the fast half of every request-id check.
//!
//! `cargo bench -p wow-runtime --bench bloom`
//!
//! `read_id_only` is the cost of fetching the next pre-generated id from memory, which the
//! other two include; subtract it to get the check alone.

// criterion_group! makes undocumented public functions.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use wow_core::id::new_id;
use wow_runtime::idempotency::{BloomIdempotencyChecker, IdempotencyChecker, IdempotencyConfig};

fn check_and_insert(c: &mut Criterion) {
    // The default sizing: 1,000,000 ids per generation at a 0.00001 false-positive rate.
    let checker = BloomIdempotencyChecker::new(&IdempotencyConfig::default());
    // Fresh, time-ordered request ids, as the framework makes them; generated up front so
    // that only the check is timed.
    let ids: Vec<String> = (0..1_000_000).map(|_| new_id()).collect();
    let mut group = c.benchmark_group("bloom");
    group.throughput(Throughput::Elements(1));
    let mut next = 0usize;
    group.bench_function("read_id_only", |b| {
        b.iter(|| {
            let id = &ids[next % ids.len()];
            next += 1;
            black_box(id.as_bytes()[35])
        })
    });
    let mut next = 0usize;
    group.bench_function("check_and_insert_new_id", |b| {
        b.iter(|| {
            let id = &ids[next % ids.len()];
            next += 1;
            checker.check_and_insert(id)
        })
    });
    group.bench_function("check_and_insert_seen_id", |b| {
        b.iter(|| checker.check_and_insert(&ids[7]))
    });
    group.finish();
}

fn ids_and_time(c: &mut Criterion) {
    let mut group = c.benchmark_group("ids");
    group.bench_function("new_id", |b| b.iter(new_id));
    group.bench_function("now_millis", |b| b.iter(wow_core::id::now_millis));
    group.finish();
}

criterion_group!(benches, check_and_insert, ids_and_time);
criterion_main!(benches);
