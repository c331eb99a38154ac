//! Firing a backlog of due deadlines (SPEC DM-2, DM-6): how many rows per second the
//! deadline scheduler fires when a backlog is already due, as after an outage.
//!
//! One store, SQLite on a temporary file (`synchronous=FULL`, the default) or PostgreSQL when
//! `WOW_BENCH_POSTGRES_URL` is set (in a schema of its own, `bench_deadlines_<pid>`, dropped
//! at the end). On it:
//! 1. a local pipeline with one aggregate, the hold of `wow_core::testing_example`, whose
//!    placement schedules its `expire` deadline; its clock is two hours back, so every
//!    deadline it schedules is already due. It places `WOW_BENCH_ROWS` holds (default
//!    100,000; 500 under `cargo test --benches`) from 64 concurrent callers, each hold its own
//!    aggregate, spread over `WOW_BENCH_TENANTS` tenants (default 1), one millisecond apart:
//!    each placement's append writes the deadline row, as in production. Not measured.
//! 2. a fresh pipeline over the same store, on the system clock (a cold aggregate cache, as
//!    after a restart), and its scheduler with the default configuration (the batch can be set
//!    by `WOW_BENCH_BATCH`). Measured: `fire_due()` passes one after another until the store's
//!    backlog is empty, each firing `expire` through the gateway, waiting for the node's
//!    decision (the hold expires: one more append, which cancels the row) and deleting the
//!    row. After `WOW_BENCH_LIMIT_SECS` (default 1,800) it stops and reports what it drained.
//!
//! It prints the machine, the store, the wall time, the rows fired per second and a summary
//! of the passes, and checks on a sample of holds that each expired exactly once.
//!
//! `cargo bench -p wow-service --bench deadline_backlog`
//! `WOW_BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test cargo bench -p wow-service --bench deadline_backlog`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wow_core::aggregate::AggregateRegistry;
use wow_core::command::CommandKind;
use wow_core::deadline::DeadlineStore;
use wow_core::eventsourcing::EventStore;
use wow_core::id::{self, ManualClock};
use wow_core::{AggregateId, CommandMessage};
use wow_postgres::{PostgresOptions, PostgresStore};
use wow_runtime::command::WaitPlan;
use wow_runtime::deadline::{FirePass, SchedulerConfig};
use wow_runtime::pipeline::LocalPipeline;
use wow_sqlite::{SqliteOptions, SqliteStore};

/// Concurrent callers placing the holds.
const PLACERS: usize = 64;
const HOUR: i64 = 3_600_000;

fn bench_mode() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name} is not a number: {value}")),
        Err(_) => default,
    }
}

#[derive(Clone, Copy)]
struct Settings {
    rows: usize,
    tenants: usize,
    batch: usize,
    limit: Duration,
}

impl Settings {
    fn from_env() -> Self {
        let rows = if bench_mode() { 100_000 } else { 500 };
        Self {
            rows: env_number("WOW_BENCH_ROWS", rows) as usize,
            tenants: env_number("WOW_BENCH_TENANTS", 1).max(1) as usize,
            batch: env_number("WOW_BENCH_BATCH", SchedulerConfig::default().batch as u64) as usize,
            limit: Duration::from_secs(env_number("WOW_BENCH_LIMIT_SECS", 1_800)),
        }
    }
}

fn registry() -> AggregateRegistry {
    let mut registry = AggregateRegistry::new();
    registry
        .register::<wow_core::testing_example::Hold>()
        .unwrap();
    registry
}

fn first_line_with(path: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|line| line.starts_with(key))?;
    Some(line.split_once(':')?.1.trim().to_owned())
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::process::Command::new("uname")
        .arg("-r")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "?".to_owned());
    let cpu = first_line_with("/proc/cpuinfo", "model name").unwrap_or_else(|| "?".to_owned());
    let memory = first_line_with("/proc/meminfo", "MemTotal").unwrap_or_else(|| "?".to_owned());
    format!("nproc {cores}, kernel {kernel}, {cpu}, memory {memory}")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "?".to_owned())
}

/// Places `settings.rows` holds through a pipeline whose clock is two hours back, so each
/// one's `expire` deadline is due already.
async fn seed<S>(store: &Arc<S>, settings: &Settings) -> Vec<AggregateId>
where
    S: EventStore + DeadlineStore + 'static,
{
    let clock = Arc::new(ManualClock::at(id::now_millis() - 2 * HOUR));
    let pipeline = LocalPipeline::builder(registry(), store.clone())
        .clock(clock.clone())
        .build();
    let holds: Vec<AggregateId> = (0..settings.rows)
        .map(|i| {
            AggregateId::new(
                "demo",
                "hold",
                id::new_id(),
                format!("tenant{}", i % settings.tenants),
            )
        })
        .collect();
    let holds = Arc::new(holds);
    let begun = Instant::now();
    let mut placers = tokio::task::JoinSet::new();
    for placer in 0..PLACERS {
        let gateway = pipeline.gateway.clone();
        let holds = holds.clone();
        let clock = clock.clone();
        placers.spawn(async move {
            for hold in holds.iter().skip(placer).step_by(PLACERS) {
                clock.advance(1);
                let place = CommandMessage::new(
                    hold.clone(),
                    "place",
                    CommandKind::Normal,
                    json!({"minutes": 1}),
                );
                gateway
                    .send_and_wait(place, WaitPlan::processed())
                    .await
                    .expect("a hold is placed");
            }
        });
    }
    while let Some(placed) = placers.join_next().await {
        placed.unwrap();
    }
    drop(pipeline);
    let backlog = store.backlog().await.unwrap();
    assert_eq!(backlog.pending, settings.rows as u64, "{backlog:?}");
    assert!(backlog.next_due_at.is_some_and(|at| at < id::now_millis()));
    println!(
        "seeded {} due deadlines (one hold each, {} tenant(s)) by placing the holds from {PLACERS} callers in {:.1} s",
        settings.rows,
        settings.tenants,
        begun.elapsed().as_secs_f64()
    );
    Arc::try_unwrap(holds).unwrap()
}

/// One pass's counts and time.
struct Pass {
    counts: FirePass,
    took: Duration,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank]
}

fn summary(passes: &[Pass]) -> String {
    let firing: Vec<&Pass> = passes.iter().filter(|p| p.counts.fired > 0).collect();
    let mut fired: Vec<f64> = firing.iter().map(|p| p.counts.fired as f64).collect();
    let mut millis: Vec<f64> = firing.iter().map(|p| p.took.as_secs_f64() * 1e3).collect();
    fired.sort_by(f64::total_cmp);
    millis.sort_by(f64::total_cmp);
    let deferred: usize = passes.iter().map(|p| p.counts.deferred).sum();
    let skipped: usize = passes.iter().map(|p| p.counts.skipped).sum();
    format!(
        "{} passes ({} firing); rows fired per firing pass: min {:.0}, median {:.0}, max {:.0}; \
         time per firing pass: median {:.1} ms, p90 {:.1} ms, max {:.1} ms; deferred {deferred}, skipped {skipped}",
        passes.len(),
        firing.len(),
        percentile(&fired, 0.0),
        percentile(&fired, 0.5),
        percentile(&fired, 1.0),
        percentile(&millis, 0.5),
        percentile(&millis, 0.9),
        percentile(&millis, 1.0),
    )
}

/// Seeds the backlog, then drains it with one scheduler and reports.
async fn bench<S>(store: Arc<S>, settings: &Settings)
where
    S: EventStore + DeadlineStore + 'static,
{
    let holds = seed(&store, settings).await;
    let pipeline = LocalPipeline::builder(registry(), store.clone()).build();
    let config = SchedulerConfig {
        batch: settings.batch,
        ..SchedulerConfig::default()
    };
    println!("scheduler: {config:?}");
    let scheduler = pipeline
        .deadline_scheduler(store.clone())
        .with_config(config);
    println!("load average before the drain: {}", load_average());

    let begun = Instant::now();
    let mut passes = Vec::new();
    let mut fired = 0usize;
    let mut reported = Instant::now();
    let mut complete = false;
    while begun.elapsed() < settings.limit {
        let started = Instant::now();
        let counts = scheduler.fire_due().await.expect("the due rows are read");
        passes.push(Pass {
            counts,
            took: started.elapsed(),
        });
        fired += counts.fired;
        if counts.fired == 0 {
            // Nothing fired: either the backlog is empty, or what is left waits out a retry.
            if store.backlog().await.unwrap().pending == 0 {
                complete = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if reported.elapsed() >= Duration::from_secs(30) {
            reported = Instant::now();
            println!(
                "  after {:.0} s: {fired} fired ({:.0} rows/s)",
                begun.elapsed().as_secs_f64(),
                fired as f64 / begun.elapsed().as_secs_f64()
            );
        }
    }
    let wall = begun.elapsed();
    println!("load average after the drain: {}", load_average());

    let pending = store.backlog().await.unwrap().pending;
    if complete {
        println!("drained {fired} of {} due rows", settings.rows);
    } else {
        println!(
            "STOPPED after {:.0} s: {fired} fired, {pending} still pending",
            settings.limit.as_secs_f64()
        );
    }
    println!(
        "firing: {:.0} rows/s ({fired} rows in {:.2} s)",
        fired as f64 / wall.as_secs_f64(),
        wall.as_secs_f64()
    );
    println!("passes: {}", summary(&passes));

    check_holds(&store, &holds, complete).await;
    if complete {
        assert_eq!(fired, settings.rows);
    }
}

/// Each hold (one in a hundred) expired once, by its deadline, when the drain completed.
async fn check_holds<S: EventStore>(store: &Arc<S>, holds: &[AggregateId], complete: bool) {
    let step = (holds.len() / 100).max(1);
    let mut checked = 0;
    for hold in holds.iter().step_by(step) {
        let names: Vec<String> = store
            .load(hold, 1, u64::MAX)
            .await
            .unwrap()
            .iter()
            .flat_map(|stream| stream.body.iter().map(|event| event.name.clone()))
            .collect();
        if complete {
            assert_eq!(names.len(), 2, "{hold}: {names:?}");
            assert!(names[1].to_lowercase().contains("expired"), "{names:?}");
        }
        checked += 1;
    }
    if complete {
        println!("checked {checked} holds: each placed, then expired once");
    }
}

fn sqlite_path() -> PathBuf {
    let folder = std::env::temp_dir().join("wow-service-bench-deadline-backlog");
    std::fs::create_dir_all(&folder).unwrap();
    folder.join(format!("backlog-{}.db", std::process::id()))
}

async fn on_sqlite(settings: &Settings) {
    let path = sqlite_path();
    let options = SqliteOptions::new(&path);
    println!(
        "store: SQLite, {} (synchronous {:?}, the default)",
        path.display(),
        options.synchronous
    );
    let store = Arc::new(SqliteStore::open(options).await.unwrap());
    bench(store, settings).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

async fn on_postgres(url: &str, settings: &Settings) {
    let schema = format!("bench_deadlines_{}", std::process::id());
    let options = url
        .parse::<PostgresOptions>()
        .expect("WOW_BENCH_POSTGRES_URL is a postgres:// URL")
        .schema(&schema);
    let connections = options.max_connections;
    let store = Arc::new(PostgresStore::open(options).await.unwrap());
    let version = {
        let client = store.pool().get().await.unwrap();
        let row = client.query_one("SHOW server_version", &[]).await.unwrap();
        row.get::<_, String>(0)
    };
    println!(
        "store: PostgreSQL {version} at {}, schema {schema}, a pool of {connections}",
        url.split('?').next().unwrap_or(url)
    );
    // Run on a task of its own, so the schema is dropped whatever happens to it.
    let outcome = {
        let store = store.clone();
        let settings = *settings;
        tokio::spawn(async move { bench(store, &settings).await }).await
    };
    let dropped = match store.pool().get().await {
        Ok(client) => client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
            .map_err(|error| error.to_string()),
        Err(error) => Err(error.to_string()),
    };
    match dropped {
        Ok(()) => println!("dropped schema {schema}"),
        Err(error) => eprintln!("schema {schema} NOT dropped ({error}): drop it by hand"),
    }
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

fn main() {
    let settings = Settings::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("deadline backlog: {}", machine());
    runtime.block_on(async {
        match std::env::var("WOW_BENCH_POSTGRES_URL") {
            Ok(url) => on_postgres(&url, &settings).await,
            Err(_) => on_sqlite(&settings).await,
        }
    });
}
