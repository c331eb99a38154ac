//! Each consumer's lag (SPEC DS-6), read when `/metrics` or `/metrics.json` is: how many
//! streams it is behind, how many of them are parked behind a failed one (SPEC DS-5), how
//! many failures wait for a retry or an operator, and how old the oldest stream it holds
//! back is.

use std::fmt::Write;

use serde::Serialize;
use wow_core::compensation::{ExecutionFailedStatus, FailureQuery};
use wow_runtime::compensation::CompensationScheduler;

/// The most failure records of one status a reading counts.
const MAX_COUNTED: usize = 10_000;

/// One consumer's lag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConsumerLag {
    /// The consumer.
    pub(crate) consumer: String,
    /// Streams it has not handled yet: the process's queue (shared by every consumer), the
    /// failed streams heading its lanes and the streams parked behind them.
    pub(crate) streams_behind: u64,
    /// Streams parked behind a failed one of the same aggregate.
    pub(crate) parked_streams: u64,
    /// Its failures waiting for a retry (`FAILED`) or for an operator (`EXHAUSTED`).
    pub(crate) failures_waiting: u64,
    /// How old the oldest stream it holds back is (a lane's head or a failure), in
    /// milliseconds; 0 when it holds none back.
    pub(crate) oldest_unhandled_ms: i64,
}

/// Every consumer's lag, with `backlog` streams queued in the process; empty without a
/// compensation scheduler (nothing is recorded, nothing is parked). A store that cannot be
/// read gives an error, and the reading leaves the lag out.
pub(crate) async fn read(
    scheduler: Option<&CompensationScheduler>,
    backlog: u64,
    now: i64,
) -> Result<Vec<ConsumerLag>, String> {
    let Some(scheduler) = scheduler else {
        return Ok(Vec::new());
    };
    let lanes = match scheduler.parked() {
        Some(parked) => parked.lanes(None).await.map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    let mut failures = Vec::new();
    for status in [
        ExecutionFailedStatus::Failed,
        ExecutionFailedStatus::Exhausted,
    ] {
        let query = FailureQuery {
            status: Some(status),
            limit: MAX_COUNTED,
            ..FailureQuery::default()
        };
        failures.extend(
            scheduler
                .failures()
                .list(&query)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(scheduler
        .consumer_names()
        .into_iter()
        .map(|consumer| {
            let lanes: Vec<_> = lanes.iter().filter(|l| l.consumer == consumer).collect();
            let waiting: Vec<_> = failures.iter().filter(|f| f.consumer == consumer).collect();
            let parked_streams: u64 = lanes.iter().map(|lane| lane.parked()).sum();
            let oldest = lanes
                .iter()
                .map(|lane| lane.since)
                .chain(waiting.iter().map(|failure| failure.created_at))
                .min();
            ConsumerLag {
                streams_behind: backlog + parked_streams + lanes.len() as u64,
                parked_streams,
                failures_waiting: waiting.len() as u64,
                oldest_unhandled_ms: oldest.map_or(0, |since| (now - since).max(0)),
                consumer,
            }
        })
        .collect())
}

/// The lag as Prometheus gauges, one sample per consumer each.
pub(crate) fn write(out: &mut String, lag: &[ConsumerLag]) {
    type Field = fn(&ConsumerLag) -> String;
    let gauges: [(&str, &str, Field); 4] = [
        (
            "wow_consumer_streams_behind",
            "Streams the consumer has not handled yet: the process's queue, its failed streams and the streams parked behind them",
            |lag| lag.streams_behind.to_string(),
        ),
        (
            "wow_consumer_parked_streams",
            "Streams parked behind a failed stream of the same aggregate (SPEC DS-5)",
            |lag| lag.parked_streams.to_string(),
        ),
        (
            "wow_consumer_failures_waiting",
            "The consumer's failures waiting for a retry (FAILED) or an operator (EXHAUSTED)",
            |lag| lag.failures_waiting.to_string(),
        ),
        (
            "wow_consumer_oldest_unhandled_age_seconds",
            "Age of the oldest stream the consumer holds back (a failed or parked one); 0 when none",
            |lag| format!("{:.3}", lag.oldest_unhandled_ms as f64 / 1000.0),
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for consumer in lag {
            let _ = writeln!(
                out,
                "{name}{{consumer=\"{}\"}} {}",
                consumer.consumer,
                value(consumer)
            );
        }
    }
}
