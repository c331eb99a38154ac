//! The end of a run: one table row like the benchmark tables of Wow's README (and a few
//! lines on setup, backlog and memory), or the same fields as one JSON object.

use std::fmt::{self, Write as _};

use serde::Serialize;

use super::runner::Outcome;
use super::tally::{average, Errors};

/// What was run, before anything was measured.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// The base URL the load went to.
    pub(crate) target: String,
    /// The command sent.
    pub(crate) operation: &'static str,
    /// The stage each request waited for.
    pub(crate) wait_stage: &'static str,
    /// Concurrent connections.
    pub(crate) connections: usize,
    /// Distinct accounts.
    pub(crate) aggregates: u64,
}

/// Everything `wow bench` reports.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// The base URL the load went to.
    pub(crate) target: String,
    /// The command sent.
    pub(crate) operation: &'static str,
    /// The stage each request waited for.
    pub(crate) wait_stage: &'static str,
    /// Concurrent connections.
    pub(crate) connections: usize,
    /// Distinct accounts.
    pub(crate) aggregates: u64,
    /// Requests completed, errors included.
    pub(crate) requests: u64,
    /// Requests answered with a 2xx.
    pub(crate) succeeded: u64,
    /// The measured phase's length.
    pub(crate) duration_ms: f64,
    /// Requests per second over the whole phase.
    pub(crate) average_tps: f64,
    /// The most requests completed in one whole second.
    pub(crate) peak_tps: f64,
    /// Mean latency of the answered requests.
    pub(crate) mean_ms: f64,
    /// Median latency.
    pub(crate) p50_ms: f64,
    /// 90th percentile latency.
    pub(crate) p90_ms: f64,
    /// 99th percentile latency.
    pub(crate) p99_ms: f64,
    /// The longest latency.
    pub(crate) max_ms: f64,
    /// Errors by `errorCode`, `HTTP <status>` or `Transport`.
    pub(crate) errors: Errors,
    /// How long opening the accounts took (not measured), when there was a setup.
    pub(crate) setup_ms: Option<f64>,
    /// The consumers' backlog when the load ended (`wow_event_backlog`).
    pub(crate) backlog_at_end: Option<u64>,
    /// How long the backlog took to reach zero after the load.
    pub(crate) drain_ms: Option<u64>,
    /// The server's resident memory before the load, in KiB.
    pub(crate) rss_start_kib: Option<u64>,
    /// The server's resident memory after the load (and the drain), in KiB.
    pub(crate) rss_end_kib: Option<u64>,
}

impl Report {
    /// The report of `outcome` for a run of `shape`; setup, backlog and memory are left
    /// empty for the caller to fill.
    pub(crate) fn new(shape: Shape, outcome: &Outcome) -> Self {
        let tally = &outcome.tally;
        let latency = |quantile: f64| millis(tally.latencies.value_at_quantile(quantile) as f64);
        let errors: u64 = tally.errors.values().sum();
        Self {
            target: shape.target,
            operation: shape.operation,
            wait_stage: shape.wait_stage,
            connections: shape.connections,
            aggregates: shape.aggregates,
            requests: tally.requests,
            succeeded: tally.requests.saturating_sub(errors),
            duration_ms: round(outcome.elapsed.as_secs_f64() * 1000.0, 1),
            average_tps: round(average(tally.requests, outcome.elapsed), 1),
            peak_tps: round(tally.peak_tps(outcome.elapsed), 1),
            mean_ms: millis(tally.latencies.mean()),
            p50_ms: latency(0.50),
            p90_ms: latency(0.90),
            p99_ms: latency(0.99),
            max_ms: millis(tally.latencies.max() as f64),
            errors: tally.errors.clone(),
            setup_ms: None,
            backlog_at_end: None,
            drain_ms: None,
            rss_start_kib: None,
            rss_end_kib: None,
        }
    }
}

/// Microseconds as milliseconds, to the microsecond.
fn millis(micros: f64) -> f64 {
    round(micros / 1000.0, 3)
}

/// `value` to `places` decimals.
fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

/// The table's header and separator.
const HEADER: &str =
    "| operation | wait stage | connections | aggregates | requests | average TPS \
| peak TPS | p50 ms | p90 ms | p99 ms | max ms | errors |\n\
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |";

impl fmt::Display for Report {
    /// The table, then a line each on the target, setup, backlog and memory.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{HEADER}")?;
        writeln!(
            f,
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
            self.operation,
            self.wait_stage,
            self.connections,
            self.aggregates,
            self.requests,
            self.average_tps.round(),
            self.peak_tps.round(),
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.max_ms,
            errors(&self.errors),
        )?;
        writeln!(f)?;
        writeln!(
            f,
            "target:   {} ({:.2} s)",
            self.target,
            self.duration_ms / 1000.0
        )?;
        if let Some(setup) = self.setup_ms {
            writeln!(
                f,
                "setup:    {} accounts opened in {:.2} s (not measured)",
                self.aggregates,
                setup / 1000.0
            )?;
        }
        writeln!(
            f,
            "backlog:  {} at end, drained in {}",
            or_na(self.backlog_at_end, ""),
            or_na(self.drain_ms, " ms"),
        )?;
        write!(
            f,
            "RSS:      {} at start, {} at end",
            or_na(self.rss_start_kib.map(|k| k / 1024), " MiB"),
            or_na(self.rss_end_kib.map(|k| k / 1024), " MiB"),
        )
    }
}

/// `Code: n, Code: n`, or `none`.
fn errors(errors: &Errors) -> String {
    if errors.is_empty() {
        return "none".to_owned();
    }
    let mut out = String::new();
    for (i, (code, n)) in errors.iter().enumerate() {
        let comma = if i == 0 { "" } else { ", " };
        let _ = write!(out, "{comma}{code}: {n}");
    }
    out
}

/// `value` and its unit, or `n/a`.
fn or_na(value: Option<u64>, unit: &str) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v}{unit}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::tally::Tally;
    use super::*;

    fn report() -> Report {
        let mut tally = Tally::new().unwrap_or_else(|e| panic!("{e}"));
        for ms in [1, 2, 3, 4] {
            tally.record(
                Duration::from_millis(100 * ms),
                Some(Duration::from_millis(ms)),
            );
        }
        tally.error("InsufficientBalance");
        tally.error("Transport");
        let outcome = Outcome {
            tally,
            elapsed: Duration::from_secs(2),
        };
        let shape = Shape {
            target: "http://127.0.0.1:8080".into(),
            operation: "deposit",
            wait_stage: "PROCESSED",
            connections: 4,
            aggregates: 10,
        };
        Report::new(shape, &outcome)
    }

    #[test]
    fn the_table_has_one_row_with_every_column() {
        let mut report = report();
        report.backlog_at_end = Some(3);
        report.drain_ms = Some(150);
        let text = report.to_string();
        let row = text.lines().nth(2).unwrap_or_default();
        assert_eq!(row.matches('|').count(), 13, "{row}");
        assert!(
            row.starts_with("| deposit | PROCESSED | 4 | 10 | 4 | 2 | 4 | 2.00 |"),
            "{row}"
        );
        assert!(
            row.ends_with("| InsufficientBalance: 1, Transport: 1 |"),
            "{row}"
        );
        assert!(
            text.contains("backlog:  3 at end, drained in 150 ms"),
            "{text}"
        );
        assert!(
            text.contains("RSS:      n/a at start, n/a at end"),
            "{text}"
        );
    }

    #[test]
    fn the_json_has_the_same_fields() {
        let json = serde_json::to_value(report()).unwrap_or_default();
        assert_eq!(json["requests"], 4);
        assert_eq!(json["succeeded"], 2);
        assert_eq!(json["average_tps"], 2.0);
        let max = json["max_ms"].as_f64().unwrap_or_default();
        assert!((4.0..4.01).contains(&max), "{max}");
        assert_eq!(json["errors"]["Transport"], 1);
        assert!(json["backlog_at_end"].is_null());
    }
}
