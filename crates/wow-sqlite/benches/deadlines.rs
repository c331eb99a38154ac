//! Deadlines on SQLite (SPEC DM-2): a million pending deadlines do not slow the command path,
//! and a firing pass's read costs what is due, not what is pending.
//!
//! In one run, on two files made the same way, one holding no deadlines and one holding
//! 1,000,000 pending (due 1 to 31 days ahead, seeded by raw INSERTs in one transaction before
//! anything is measured), `synchronous=FULL`:
//! 1. plain appends from 16 concurrent writers (append.rs's middle case), on each file;
//! 2. the same appends, each scheduling one deadline in its savepoint (`append_with`, one
//!    `DeadlineChange::Schedule`, as an order's placement schedules its expiry): on the empty
//!    file, and on the million due 15 minutes ahead (before every pending row, as an order's
//!    expiry) or at a random time among the pending rows (each insert on a random leaf of the
//!    due index). The rows an iteration scheduled are deleted after it, outside the timing,
//!    so the files stay at 0 and 1,000,000;
//! 3. `due(now, 100)` when 100 rows are due among 100 pending, and among 1,000,100.
//!
//! Criterion measures one case after the other, and this disk's speed moves by more than the
//! differences sought in between; so each comparison is measured again after them, paired:
//! rounds of one batch on each side in alternating order, with the median of the rounds'
//! ratios printed at the end.
//!
//! `cargo bench -p wow-sqlite --bench deadlines`

// criterion_group! makes undocumented public functions.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wow_core::eventsourcing::{AppendChanges, History};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rusqlite::{params, Connection};
use serde_json::json;
use wow_core::deadline::{deadline_request_id, DeadlineChange, DeadlineStore, ScheduledCommand};
use wow_core::{id, AggregateId, DomainEvent, DomainEventStream};
use wow_sqlite::{SqliteOptions, SqliteStore};

/// Pending deadlines in the full file: a million under `cargo bench`, a thousand when
/// `cargo test --benches` runs each case once to check it.
fn pending() -> usize {
    if std::env::args().any(|arg| arg == "--bench") {
        1_000_000
    } else {
        1_000
    }
}

/// Writers and appends per iteration: append.rs's middle case (16 × 312 = 4,992 appends).
const WRITERS: usize = 16;
const APPENDS: usize = 5_000;
const MINUTE: i64 = 60_000;
const DAY: i64 = 24 * 60 * MINUTE;
/// The pending rows are due between one and 31 days from the start of the run.
const WINDOW: i64 = 30 * DAY;

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
        body: vec![event("OrderPlaced"), event("TotalChanged")],
    }
}

fn aggregate() -> AggregateId {
    AggregateId::new("bench", "order", id::new_id(), "t")
}

/// The expiry an order's placement schedules: `expire` sends `ExpireOrder` to the order.
fn expiry(owner: &AggregateId, due_at: i64) -> ScheduledCommand {
    ScheduledCommand {
        owner: owner.clone(),
        name: "expire".to_owned(),
        due_at,
        target: owner.clone(),
        command: "ExpireOrder".to_owned(),
        body: json!({"reason": "unpaid"}),
        request_id: deadline_request_id("expire", 1),
        held_to: None,
    }
}

/// A small xorshift, so the bench needs no random crate.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A time among the pending rows' due times.
    fn among_pending(&mut self, start: i64) -> i64 {
        start + DAY + (self.next() % WINDOW as u64) as i64
    }
}

fn fresh_path(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join("wow-sqlite-bench-deadlines");
    std::fs::create_dir_all(&folder).unwrap();
    folder.join(format!("deadlines-{name}-{}.db", id::new_id()))
}

const SEED: &str = "INSERT INTO deadline (tenant_id, aggregate_name, aggregate_id, name, context_name, due_at, target_context, target_name, target_id, command, body, request_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

/// A raw connection on the store's file, for seeding and for deleting what an iteration
/// scheduled (the store's writer is idle then).
fn raw(path: &Path) -> Connection {
    let connection = Connection::open(path).unwrap();
    connection.busy_timeout(Duration::from_secs(10)).unwrap();
    connection
}

/// `count` expiries of distinct orders, due between one and 31 days after `start`, in one
/// transaction; the WAL is checkpointed into the file after it.
fn seed(path: &Path, count: usize, start: i64) -> Duration {
    let begun = Instant::now();
    let mut connection = raw(path);
    // 1 GiB of page cache for the one transaction, so the due index's random inserts stay
    // in memory until the commit.
    connection
        .pragma_update(None, "cache_size", -1_048_576)
        .unwrap();
    let transaction = connection.transaction().unwrap();
    {
        let mut insert = transaction.prepare(SEED).unwrap();
        let body = json!({"reason": "unpaid"}).to_string();
        let request_id = deadline_request_id("expire", 1);
        let mut random = Random(0x9e37_79b9_7f4a_7c15);
        for _ in 0..count {
            let owner = aggregate();
            insert
                .execute(params![
                    owner.tenant_id,
                    owner.aggregate_name,
                    owner.id,
                    "expire",
                    owner.context_name,
                    random.among_pending(start),
                    owner.context_name,
                    owner.aggregate_name,
                    owner.id,
                    "ExpireOrder",
                    body,
                    request_id,
                ])
                .unwrap();
        }
    }
    transaction.commit().unwrap();
    connection
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    begun.elapsed()
}

/// A store on a fresh file, with `pending` deadlines written into it before it opens for the
/// bench, and a raw connection on the same file.
struct Fixture {
    store: Arc<SqliteStore>,
    raw: Connection,
    pending: usize,
}

fn fixture(runtime: &tokio::runtime::Runtime, pending: usize, start: i64) -> Fixture {
    let path = fresh_path(&pending.to_string());
    // The store makes the schema; the rows go in while it is closed.
    runtime.block_on(async { drop(SqliteStore::open(SqliteOptions::new(&path)).await.unwrap()) });
    if pending > 0 {
        let took = seed(&path, pending, start);
        let size = std::fs::metadata(&path).unwrap().len();
        println!(
            "seeded {pending} pending deadlines by raw INSERTs in one transaction in {:.1} s ({:.0} MB file)",
            took.as_secs_f64(),
            size as f64 / 1e6
        );
    }
    let store = runtime
        .block_on(async { Arc::new(SqliteStore::open(SqliteOptions::new(&path)).await.unwrap()) });
    Fixture {
        store,
        raw: raw(&path),
        pending,
    }
}

impl Fixture {
    fn label(&self) -> &'static str {
        if self.pending == 0 {
            "pending_0"
        } else {
            "pending_1m"
        }
    }

    /// Checks the file holds `expected` pending deadlines.
    fn assert_pending(&self, runtime: &tokio::runtime::Runtime, expected: usize) {
        let backlog = runtime.block_on(self.store.backlog()).unwrap();
        assert_eq!(backlog.pending, expected as u64, "{}", self.label());
    }

    /// Deletes the expiries of `owners`, in one transaction, outside the timing.
    fn forget(&self, owners: &[AggregateId]) {
        self.raw.execute_batch("BEGIN IMMEDIATE").unwrap();
        {
            let mut delete = self
                .raw
                .prepare_cached("DELETE FROM deadline WHERE tenant_id = ?1 AND aggregate_name = ?2 AND aggregate_id = ?3 AND name = 'expire'")
                .unwrap();
            for owner in owners {
                let deleted = delete
                    .execute(params![owner.tenant_id, owner.aggregate_name, owner.id])
                    .unwrap();
                assert_eq!(deleted, 1);
            }
        }
        self.raw.execute_batch("COMMIT").unwrap();
    }
}

/// When an append's deadline is due.
#[derive(Clone, Copy)]
enum Due {
    /// No deadline: a plain `append`.
    Nothing,
    /// 15 minutes after now, before every pending row (an order's expiry).
    Soon,
    /// At a random time among the pending rows' due times.
    AmongPending,
}

/// `total` appends from `WRITERS` tasks to fresh orders, each scheduling per `due`: the time
/// they took, and the orders that scheduled.
async fn append_from(
    store: &Arc<SqliteStore>,
    total: usize,
    due: Due,
    start: i64,
    seed: u64,
) -> (Duration, Vec<AggregateId>) {
    let per_writer = total / WRITERS;
    let begun = Instant::now();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut random =
                    Random(seed ^ (writer as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
                let mut owners = Vec::new();
                for _ in 0..per_writer {
                    let order = aggregate();
                    let stream = stream(&order, 1, id::new_id());
                    let due_at = match due {
                        Due::Nothing => {
                            store.append(&stream).await.unwrap();
                            continue;
                        }
                        Due::Soon => id::now_millis() + 15 * MINUTE,
                        Due::AmongPending => random.among_pending(start),
                    };
                    let changes = AppendChanges::deadlines(vec![DeadlineChange::Schedule(expiry(
                        &order, due_at,
                    ))]);
                    store.append_with(&stream, &changes).await.unwrap();
                    owners.push(order);
                }
                owners
            })
        })
        .collect();
    let mut owners = Vec::with_capacity(total);
    for task in tasks {
        owners.extend(task.await.unwrap());
    }
    (begun.elapsed(), owners)
}

/// Rounds of a paired pass: `bench` under `cargo bench`, one under `cargo test --benches`.
fn rounds(bench: usize) -> usize {
    if std::env::args().any(|arg| arg == "--bench") {
        bench
    } else {
        1
    }
}

fn appends(
    c: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    group: &str,
    cases: &[(&Fixture, Due, &str)],
    start: i64,
) {
    let mut group = c.benchmark_group(group);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Elements((APPENDS / WRITERS * WRITERS) as u64));
    for (round, &(fixture, due, name)) in cases.iter().enumerate() {
        fixture.assert_pending(runtime, fixture.pending);
        let mut seed = 0x1234_5678_9abc_def1 ^ round as u64;
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iterations {
                    seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let (took, owners) =
                        runtime.block_on(append_from(&fixture.store, APPENDS, due, start, seed));
                    elapsed += took;
                    fixture.forget(&owners);
                }
                elapsed
            })
        });
        fixture.assert_pending(runtime, fixture.pending);
    }
    group.finish();
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// The paired pass's result for one comparison: per-round rates of each side (per second),
/// and each round's ratio `b / a`.
struct Pair {
    name: &'static str,
    a: Vec<f64>,
    b: Vec<f64>,
}

impl Pair {
    fn line(mut self) -> String {
        let mut ratios: Vec<f64> = self.a.iter().zip(&self.b).map(|(a, b)| b / a).collect();
        let (low, high) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
        let rounds = ratios.len();
        format!(
            "{}: {:.0} /s against {:.0} /s (medians of {rounds} rounds), ratio of the rounds: median {:.2}, {:.2} to {:.2}",
            self.name,
            median(&mut self.a),
            median(&mut self.b),
            median(&mut ratios),
            low,
            high,
        )
    }
}

/// Appends per batch of the paired pass: short batches, so that the two sides of a round
/// see the same moment of the disk.
const PAIRED_APPENDS: usize = 1_024;

/// `rounds` rounds, each one batch of `PAIRED_APPENDS` appends on `a` and one on `b`, in
/// alternating order, so both sides see the same moments of a noisy disk.
fn paired_appends(
    runtime: &tokio::runtime::Runtime,
    name: &'static str,
    a: (&Fixture, Due),
    b: (&Fixture, Due),
    start: i64,
    rounds: usize,
) -> Pair {
    let mut pair = Pair {
        name,
        a: Vec::new(),
        b: Vec::new(),
    };
    let batch = |(fixture, due): (&Fixture, Due), seed: u64| {
        let (took, owners) = runtime.block_on(append_from(
            &fixture.store,
            PAIRED_APPENDS,
            due,
            start,
            seed,
        ));
        fixture.forget(&owners);
        PAIRED_APPENDS as f64 / took.as_secs_f64()
    };
    // One untimed round first.
    batch(a, 1);
    batch(b, 2);
    for round in 0..rounds {
        let seed = 0x5151_0000 + round as u64 * 2;
        if round % 2 == 0 {
            pair.a.push(batch(a, seed));
            pair.b.push(batch(b, seed + 1));
        } else {
            pair.b.push(batch(b, seed + 1));
            pair.a.push(batch(a, seed));
        }
    }
    a.0.assert_pending(runtime, a.0.pending);
    b.0.assert_pending(runtime, b.0.pending);
    pair
}

/// 100 rows due (in the past) in each file, scheduled through the store.
fn due_rows(runtime: &tokio::runtime::Runtime, fixtures: &[&Fixture]) {
    for fixture in fixtures {
        runtime.block_on(async {
            for i in 0..100 {
                fixture
                    .store
                    .schedule(&expiry(&aggregate(), 1_000 + i))
                    .await
                    .unwrap();
            }
        });
        fixture.assert_pending(runtime, fixture.pending + 100);
        let due = runtime
            .block_on(fixture.store.due(id::now_millis(), 100))
            .unwrap();
        assert_eq!(due.len(), 100);
        assert!(due.iter().all(|row| row.due_at < 1_100));
    }
}

/// A firing pass's read: `due(now, 100)` with 100 rows due.
fn firing(c: &mut Criterion, runtime: &tokio::runtime::Runtime, fixtures: &[&Fixture]) {
    let mut group = c.benchmark_group("deadline_due_100");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(100));
    for fixture in fixtures {
        let store = &fixture.store;
        let now = id::now_millis();
        let name = if fixture.pending == 0 {
            "of_100_pending"
        } else {
            "of_1m_pending"
        };
        group.bench_function(name, |b| {
            b.to_async(runtime)
                .iter(|| async move { store.due(now, 100).await.unwrap() })
        });
    }
    group.finish();
}

/// `rounds` rounds of 200 `due(now, 100)` calls on each file, alternating: calls per second.
fn paired_due(runtime: &tokio::runtime::Runtime, a: &Fixture, b: &Fixture, rounds: usize) -> Pair {
    const CALLS: usize = 200;
    let mut pair = Pair {
        name: "due(now, 100), 100 due among 100 -> among 1,000,100 pending (calls)",
        a: Vec::new(),
        b: Vec::new(),
    };
    let now = id::now_millis();
    let batch = |fixture: &Fixture| {
        runtime.block_on(async {
            let begun = Instant::now();
            for _ in 0..CALLS {
                let due = fixture.store.due(now, 100).await.unwrap();
                assert_eq!(due.len(), 100);
            }
            CALLS as f64 / begun.elapsed().as_secs_f64()
        })
    };
    batch(a);
    batch(b);
    for round in 0..rounds {
        if round % 2 == 0 {
            pair.a.push(batch(a));
            pair.b.push(batch(b));
        } else {
            pair.b.push(batch(b));
            pair.a.push(batch(a));
        }
    }
    pair
}

fn deadlines(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = id::now_millis();
    let empty = fixture(&runtime, 0, start);
    let full = fixture(&runtime, pending(), start);
    appends(
        c,
        &runtime,
        "deadline_command_path",
        &[
            (&empty, Due::Nothing, "plain_append_pending_0"),
            (&full, Due::Nothing, "plain_append_pending_1m"),
        ],
        start,
    );
    appends(
        c,
        &runtime,
        "deadline_scheduling_append",
        &[
            (&empty, Due::Soon, "pending_0"),
            (&full, Due::Soon, "pending_1m_due_before_all"),
            (&full, Due::AmongPending, "pending_1m_due_among_them"),
        ],
        start,
    );
    // The same comparisons again, paired: criterion measures one case after the other, and
    // this disk's speed moves in between.
    let rounds_of_appends = rounds(50);
    let mut pairs = vec![
        paired_appends(
            &runtime,
            "plain append, 0 -> 1m pending",
            (&empty, Due::Nothing),
            (&full, Due::Nothing),
            start,
            rounds_of_appends,
        ),
        paired_appends(
            &runtime,
            "append scheduling one, 0 -> 1m pending, due before all",
            (&empty, Due::Soon),
            (&full, Due::Soon),
            start,
            rounds_of_appends,
        ),
        paired_appends(
            &runtime,
            "append scheduling one, 0 -> 1m pending, due among them",
            (&empty, Due::Soon),
            (&full, Due::AmongPending),
            start,
            rounds_of_appends,
        ),
        paired_appends(
            &runtime,
            "on 0 pending, plain append -> scheduling one",
            (&empty, Due::Nothing),
            (&empty, Due::Soon),
            start,
            rounds_of_appends,
        ),
    ];
    due_rows(&runtime, &[&empty, &full]);
    firing(c, &runtime, &[&empty, &full]);
    pairs.push(paired_due(&runtime, &empty, &full, rounds(30)));
    println!(
        "\npaired, alternating rounds ({WRITERS} writers x {PAIRED_APPENDS} appends per batch):"
    );
    for pair in pairs {
        println!("  {}", pair.line());
    }
    drop((empty, full));
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join("wow-sqlite-bench-deadlines"));
}

criterion_group!(benches, deadlines);
criterion_main!(benches);
