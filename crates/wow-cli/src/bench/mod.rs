//! `wow bench`: a load generator for the bank's HTTP API. It opens the accounts (a setup
//! phase, not measured), sends one command over many keep-alive connections for a count or
//! a duration, then reports throughput, latency percentiles, errors by code, how long the
//! consumers took to catch up, and the server's memory.

mod client;
mod duration;
mod embedded;
mod error;
mod probe;
mod progress;
mod report;
mod runner;
mod tally;
mod workload;

use std::io::IsTerminal;
use std::time::Duration;

use wow_core::CommandStage;

use crate::output::out;
use client::Target;
use duration::Limit;
pub(crate) use error::BenchError;
use report::{Report, Shape};
use workload::{Operation, Workload};

/// How long a run lasts when neither `--duration` nor `--count` is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// The flags of `wow bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The running service to load.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        conflicts_with = "embedded"
    )]
    url: String,
    /// Serves the bank in this process on this store (memory://, sqlite://PATH,
    /// postgres://...) on a loopback port, and loads it over HTTP.
    #[arg(long, value_name = "STORE")]
    embedded: Option<String>,
    /// The command to send.
    #[arg(long, value_enum, default_value_t = Operation::Deposit)]
    operation: Operation,
    /// The stage each request waits for.
    #[arg(long, default_value = "PROCESSED")]
    wait_stage: CommandStage,
    /// Concurrent connections, one request in flight on each.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    connections: u16,
    /// How long to send, e.g. 500ms, 10s, 2m [default: 10s].
    #[arg(long, value_parser = duration::parse, conflicts_with = "count")]
    duration: Option<Duration>,
    /// How many requests to send.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Distinct accounts (1: every request on one hot account).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    aggregates: u64,
    /// Names the accounts after this instead of the run's random prefix, so that runs reuse
    /// them (a long history built by one run, measured by the next).
    #[arg(long, value_name = "NAME")]
    accounts: Option<String>,
    /// The server's process id, to report its resident memory.
    #[arg(long)]
    pid: Option<u32>,
    /// A bearer token, when the service requires one.
    #[arg(long, env = "WOW_TOKEN")]
    token: Option<String>,
    /// An operator token, for the backlog read from `/metrics` when the service has tokens
    /// (a tenant's token does not reach `/metrics`; without one the backlog is not reported).
    #[arg(long, env = "WOW_OPERATOR_TOKEN")]
    operator_token: Option<String>,
    /// Sends this many requests per second in all, spread over the connections, instead of
    /// each connection sending as soon as its answer came: an open schedule whose latencies
    /// count from when each request was due (so a stall is not hidden by the requests it
    /// delayed). For the latency at a given load, e.g. half the peak rate.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    rate: Option<u64>,
    /// Prints the report as one JSON object, and no progress bar.
    #[arg(long)]
    json: bool,
}

/// Runs `wow bench`: starts the embedded service if asked, sets up, loads, reports.
pub(crate) async fn run(args: BenchArgs) -> Result<(), BenchError> {
    if args.operation == Operation::Transfer && args.aggregates < 2 {
        return Err(BenchError::Usage(
            "transfer needs --aggregates of at least 2",
        ));
    }
    let embedded = match &args.embedded {
        Some(store) => Some(embedded::start(store).await?),
        None => None,
    };
    let url = embedded
        .as_ref()
        .map_or(args.url.as_str(), |e| e.url.as_str());
    let target = Target::parse(url, args.token.as_deref())?;
    // Whose memory to read: this process's when it serves, else `--pid`'s, if given.
    let memory = if embedded.is_some() {
        Some(None)
    } else {
        args.pid.map(Some)
    };
    let report = load(&args, &target, memory).await;
    if let Some(embedded) = embedded {
        embedded.stop().await;
    }
    let report = report?;
    if args.json {
        out!("{}", serde_json::to_string(&report)?);
    } else {
        out!("{report}");
    }
    Ok(())
}

/// The setup, the measured phase, the drain and the memory readings, as a report.
async fn load(
    args: &BenchArgs,
    target: &Target,
    memory: Option<Option<u32>>,
) -> Result<Report, BenchError> {
    let rss = || memory.and_then(probe::rss_kib);
    let visible = !args.json && std::io::stderr().is_terminal();
    let prefix = run_prefix();
    let accounts = args.accounts.clone().unwrap_or_else(|| prefix.clone());
    let connections = usize::from(args.connections);
    let rss_start_kib = rss();
    let setup_ms = match args.operation {
        Operation::Open => None,
        Operation::Deposit | Operation::Transfer => Some(
            setup(
                target,
                (&prefix, &accounts),
                args.aggregates,
                connections,
                visible,
            )
            .await?,
        ),
    };
    let limit = match (args.count, args.duration) {
        (Some(count), _) => Limit::Count(count),
        (None, time) => Limit::For(time.unwrap_or(DEFAULT_DURATION)),
    };
    let workload = Workload::new(
        args.operation,
        args.wait_stage,
        args.aggregates,
        (&prefix, &accounts),
        'r',
        target,
    )?;
    let progress = progress::Progress::new(args.operation.as_str(), limit, visible);
    let pace = args
        .rate
        .map(|rate| Duration::from_secs_f64(1.0 / rate as f64));
    let outcome = runner::run(target, workload, connections, limit, pace, progress).await?;
    let operator = match &args.operator_token {
        Some(token) => target.with_token(token)?,
        None => target.clone(),
    };
    let drain = probe::drain(&operator).await;
    let shape = Shape {
        target: target_url(target),
        operation: args.operation.as_str(),
        wait_stage: args.wait_stage.as_str(),
        connections,
        aggregates: args.aggregates,
    };
    let mut report = Report::new(shape, &outcome);
    report.setup_ms = setup_ms;
    report.backlog_at_end = drain.backlog_at_end;
    report.drain_ms = drain.drain_ms;
    report.rss_start_kib = rss_start_kib;
    report.rss_end_kib = rss();
    Ok(report)
}

/// Opens accounts `0..aggregates` named after `accounts` (waiting for PROCESSED), under
/// request ids of run `prefix`, and returns how long that took in ms. An account that
/// already exists is fine; any other error ends it.
async fn setup(
    target: &Target,
    (prefix, accounts): (&str, &str),
    aggregates: u64,
    connections: usize,
    visible: bool,
) -> Result<f64, BenchError> {
    let limit = Limit::Count(aggregates);
    let workload = Workload::new(
        Operation::Open,
        CommandStage::Processed,
        aggregates,
        (prefix, accounts),
        's',
        target,
    )?;
    let connections = connections.min(usize::try_from(aggregates).unwrap_or(usize::MAX));
    let progress = progress::Progress::new("setup", limit, visible);
    let outcome = runner::run(target, workload, connections, limit, None, progress).await?;
    let refused: Vec<String> = outcome
        .tally
        .errors
        .iter()
        .filter(|(code, _)| code.as_str() != "DuplicateAggregateId")
        .map(|(code, n)| format!("{code}: {n}"))
        .collect();
    if !refused.is_empty() {
        return Err(BenchError::Setup(refused.join(", ")));
    }
    Ok((outcome.elapsed.as_secs_f64() * 1000.0).round())
}

/// A random prefix for this run's account names and request ids, so that a run never meets
/// the accounts or request ids of an earlier one on the same server.
fn run_prefix() -> String {
    let simple = uuid::Uuid::new_v4().simple().to_string();
    simple.chars().take(8).collect()
}

/// `http://host:port` of `target`.
fn target_url(target: &Target) -> String {
    format!("http://{}", target.address)
}
