//! The chaos run of the distributed mode, started by hand (never by `cargo test --workspace`
//! or CI: it is `#[ignore]`d):
//!
//! ```sh
//! WOW_CHAOS_SECS=60 WOW_CHAOS_SEED=7 cargo test -p wow-cli --test chaos -- --ignored --nocapture
//! ```
//!
//! One gateway and two processors (`wow serve` processes) on a PostgreSQL database of the
//! run's own (`wow_chaos_<pid>` on the test server, dropped at the end) and a NATS server of
//! its own. Callers deposit and transfer between a few accounts, waiting at `PROCESSED` and
//! `SAGA_HANDLED` with a 2 s timeout, and resolve every unknown outcome as SPEC TO-2 says,
//! while a seeded schedule kills a processor, the gateway or NATS (SIGKILL) and starts it
//! again. Then every answer is held against history (`checks.rs`); the run fails if any check
//! does. `docs/distributed.md` ("Chaos run") says what each check proves and what a run costs.
//!
//! Settings: `WOW_CHAOS_SECS` (load time, default 60), `WOW_CHAOS_SEED` (the kill schedule
//! and the callers' draws; default from the clock, printed), `WOW_CHAOS_CALLERS` (6),
//! `WOW_CHAOS_ACCOUNTS` (4), `WOW_CHAOS_QUIET_SECS` (how long to wait for quiet, 60),
//! `WOW_CHAOS_LEASE_TTL_MS` (the processors' lease TTL, default 1000 as in production).

#[path = "../support/mod.rs"]
mod support;

mod checks;
mod client;
mod cluster;
mod history;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Api, Intent, Op, Outcome};
use cluster::{Cluster, Fault};

/// Milliseconds since the epoch: the clock the processes stamp history with.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The run's random draws (SplitMix64): the same seed gives the same schedule.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A source seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..high` (`low` when the range is empty).
    pub(crate) fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % high.saturating_sub(low).max(1)
    }
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The run's settings, from the environment.
struct Settings {
    seed: u64,
    secs: u64,
    callers: usize,
    quiet: Duration,
    accounts: Vec<String>,
    logs: std::path::PathBuf,
    lease_ttl_ms: u64,
}

impl Settings {
    /// Reads the settings and prints them.
    fn read() -> Self {
        let seed = setting("WOW_CHAOS_SEED", now_ms());
        let secs = setting("WOW_CHAOS_SECS", 60);
        let callers = setting("WOW_CHAOS_CALLERS", 6) as usize;
        let quiet = Duration::from_secs(setting("WOW_CHAOS_QUIET_SECS", 60));
        let accounts: Vec<String> = (0..setting("WOW_CHAOS_ACCOUNTS", 4))
            .map(|n| format!("chaos-{n}"))
            .collect();
        let logs = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("chaos-{seed}"));
        println!("chaos: WOW_CHAOS_SEED={seed} WOW_CHAOS_SECS={secs}, {callers} callers, {} accounts; logs in {}", accounts.len(), logs.display());
        let lease_ttl_ms = setting("WOW_CHAOS_LEASE_TTL_MS", 1_000);
        Self {
            seed,
            secs,
            callers,
            quiet,
            accounts,
            logs,
            lease_ttl_ms,
        }
    }
}

/// Opens every account, each resolved within `quiet`.
async fn open_the_accounts(api: &Api, settings: &Settings) -> Vec<Intent> {
    let mut intents: Vec<Intent> = Vec::new();
    for account in &settings.accounts {
        let open = Op::Open {
            account: account.clone(),
            balance: 1_000,
        };
        let deadline = Instant::now() + settings.quiet;
        intents.push(
            api.resolve(0, format!("open-{account}"), open, deadline)
                .await,
        );
    }
    intents
}

/// Starts the callers, each with draws of its own, resolving its intents by `deadline`.
fn start_the_callers(
    api: &Api,
    settings: &Settings,
    stop: &Arc<AtomicBool>,
    deadline: Instant,
) -> Vec<tokio::task::JoinHandle<Vec<Intent>>> {
    (0..settings.callers)
        .map(|n| {
            let rng = Rng::new(settings.seed ^ (n as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F));
            let load = client::caller(
                api.clone(),
                n,
                settings.accounts.clone(),
                rng,
                stop.clone(),
                deadline,
            );
            tokio::spawn(load)
        })
        .collect()
}

/// Prints each check's counts and first failures; the number of failures.
fn print_the_checks(checks: &[checks::Check]) -> usize {
    let mut failed = 0;
    for check in checks {
        let seen: Vec<String> = check
            .seen
            .iter()
            .map(|(what, n)| format!("{what} {n}"))
            .collect();
        println!(
            "{}: {} failures; {}",
            check.name,
            check.failures.len(),
            seen.join(", ")
        );
        for failure in check.failures.iter().take(5) {
            println!("   {failure}");
        }
        failed += check.failures.len();
    }
    failed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a chaos run by hand (minutes, own NATS and database): see docs/distributed.md"]
async fn chaos() {
    let settings = Settings::read();
    let (seed, logs) = (settings.seed, &settings.logs);
    let mut cluster = match Cluster::start(logs.clone(), settings.lease_ttl_ms).await {
        Ok(cluster) => cluster,
        Err(error) => panic!("the deployment did not start: {error}"),
    };
    let t0 = now_ms();
    let api = match Api::new(cluster.gateway()) {
        Ok(api) => api,
        Err(error) => panic!("{error}"),
    };
    let mut intents = open_the_accounts(&api, &settings).await;

    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let load_until = started + Duration::from_secs(settings.secs);
    let tasks = start_the_callers(&api, &settings, &stop, load_until + settings.quiet);
    let faults = cluster.chaos(&mut Rng::new(seed), load_until).await;
    let whole = cluster.heal().await;
    stop.store(true, Ordering::Relaxed);
    let mut lost_callers = 0;
    for task in tasks {
        match task.await {
            Ok(done) => intents.extend(done),
            Err(_) => lost_callers += 1,
        }
    }
    let loaded = started.elapsed();
    let snapshot = history::until_quiet(
        &api,
        &cluster.store,
        &settings.accounts,
        Instant::now() + settings.quiet,
    )
    .await;
    let checks = checks::all(&intents, &snapshot, &faults, t0);
    record(logs, &intents, &faults, t0);

    println!(
        "chaos: {} intents in {loaded:?} ({} applied, {} rejected, {} unresolved), {} kills; whole at the end: {whole}; quiet: {}; peak RSS kB {:?}",
        intents.len(),
        intents.iter().filter(|i| matches!(i.outcome, Outcome::Applied { .. })).count(),
        intents.iter().filter(|i| matches!(i.outcome, Outcome::Rejected { .. })).count(),
        intents.iter().filter(|i| i.outcome == Outcome::Unresolved).count(),
        faults.len(),
        snapshot.quiet,
        cluster.peak_rss_kb,
    );
    let failed = lost_callers + print_the_checks(&checks);
    cluster.clean().await;
    assert!(
        whole,
        "the deployment was not whole at the end (seed {seed})"
    );
    assert_eq!(
        failed,
        0,
        "{failed} failures (seed {seed}); the full record is in {}",
        logs.display()
    );
}

/// Writes every intent (its sends and look-ups, times from the run's start) and every fault,
/// one JSON object a line, to `logs/record.jsonl`.
fn record(logs: &std::path::Path, intents: &[Intent], faults: &[Fault], t0: u64) {
    let at = |ms: u64| ms.saturating_sub(t0);
    let mut lines = Vec::new();
    for fault in faults {
        lines.push(serde_json::json!({
            "fault": format!("{:?}", fault.victim),
            "killed": at(fault.killed_ms),
            "restarted": at(fault.restarted_ms),
            "whole": fault.healthy_ms.map(at),
        }));
    }
    for intent in intents {
        lines.push(serde_json::json!({
            "caller": intent.caller,
            "requestId": intent.request_id,
            "op": format!("{:?}", intent.op),
            "outcome": format!("{:?}", intent.outcome),
            "sends": intent.sends.iter().map(|s| serde_json::json!({
                "sent": at(s.started_ms), "answered": at(s.ended_ms), "status": s.status,
                "commandId": s.command_id, "errorCode": s.error_code, "stage": s.stage,
                "version": s.version, "originalCommandId": s.original_command_id,
            })).collect::<Vec<_>>(),
            "lookUps": intent.look_ups.iter().map(|l| serde_json::json!({
                "asked": at(l.started_ms), "answered": at(l.ended_ms), "answer": format!("{:?}", l.answer),
            })).collect::<Vec<_>>(),
        }));
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let written = std::fs::File::create(logs.join("record.jsonl"))
        .and_then(|mut file| file.write_all(text.as_bytes()));
    if let Err(error) = written {
        eprintln!("chaos: could not write the record: {error}");
    }
}
