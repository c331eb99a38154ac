//! `GET /metrics` in the Prometheus text format: commands by stage and error code, command
//! latency, the pipeline's duplicate counters (Bloom hits, caught by the store, caught by
//! the append), and the quarantined aggregates (SPEC PX-1). `GET /metrics.json` has the
//! same counters as JSON, for the operations page (`/ui`). Both count every tenant's: with
//! any token configured they answer only an operator token (the `operator` module).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::header;
use axum::response::IntoResponse;
use wow_core::CommandResult;
use wow_runtime::metrics::MetricsSnapshot;

/// Latency bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Counters of the HTTP command routes.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    results: BTreeMap<(String, String), u64>,
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl HttpMetrics {
    /// Counts one answered command.
    pub(crate) fn observe(&self, result: &CommandResult, latency: Duration) {
        let mut counts = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        *counts
            .results
            .entry((
                result.stage.as_str().to_owned(),
                result.error_code.to_string(),
            ))
            .or_default() += 1;
        let seconds = latency.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(counts.buckets.iter_mut()) {
            if seconds <= *bound {
                *bucket += 1;
            }
        }
        counts.count += 1;
        counts.sum += seconds;
    }
}

/// The answer to `GET /metrics`: `metrics`, the pipeline's counters and the quarantine's
/// size, in the Prometheus text format.
pub(crate) fn render(
    metrics: &HttpMetrics,
    pipeline: &MetricsSnapshot,
    quarantined: usize,
    lag: &[crate::lag::ConsumerLag],
) -> impl IntoResponse {
    let mut out = String::new();
    {
        let counts = metrics.inner.lock().unwrap_or_else(|p| p.into_inner());
        write_commands(&mut out, &counts);
    }
    write_pipeline(&mut out, pipeline, quarantined);
    crate::lag::write(&mut out, lag);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}

/// Writes a metric's `# HELP` and `# TYPE` lines.
fn describe(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes a metric without labels: its `# HELP` and `# TYPE` lines and its one sample.
fn single(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    describe(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// The command counters and the latency histogram, in the Prometheus text format.
fn write_commands(out: &mut String, counts: &Counts) {
    describe(
        out,
        "wow_commands_total",
        "counter",
        "Commands answered over HTTP, by stage reached and error code.",
    );
    for ((stage, code), n) in &counts.results {
        let _ = writeln!(
            out,
            "wow_commands_total{{stage=\"{stage}\",error_code=\"{code}\"}} {n}"
        );
    }
    describe(
        out,
        "wow_command_duration_seconds",
        "histogram",
        "Time from request to answer.",
    );
    for (bound, n) in BUCKETS.iter().zip(counts.buckets.iter()) {
        let _ = writeln!(
            out,
            "wow_command_duration_seconds_bucket{{le=\"{bound}\"}} {n}"
        );
    }
    let _ = writeln!(
        out,
        "wow_command_duration_seconds_bucket{{le=\"+Inf\"}} {}",
        counts.count
    );
    let _ = writeln!(out, "wow_command_duration_seconds_sum {}", counts.sum);
    let _ = writeln!(out, "wow_command_duration_seconds_count {}", counts.count);
}

/// The pipeline's counters and the quarantine, in the Prometheus text format.
fn write_pipeline(out: &mut String, pipeline: &MetricsSnapshot, quarantined: usize) {
    describe(
        out,
        "wow_duplicates_total",
        "counter",
        "Duplicate request ids, by where they were caught.",
    );
    for (caught_by, n) in [
        ("store", pipeline.duplicates_by_store),
        ("append", pipeline.duplicates_by_append),
    ] {
        let _ = writeln!(out, "wow_duplicates_total{{caught_by=\"{caught_by}\"}} {n}");
    }
    describe(
        out,
        "wow_consumer_signals_total",
        "counter",
        "Each consumer's signals of the downstream stages, by stage, consumer and error code.",
    );
    for ((stage, consumer, code), n) in &pipeline.signals {
        let _ = writeln!(
            out,
            "wow_consumer_signals_total{{stage=\"{stage}\",consumer=\"{consumer}\",error_code=\"{code}\"}} {n}"
        );
    }
    single(
        out,
        "wow_bloom_hits_total",
        "counter",
        "Request ids a Bloom filter said it may have seen.",
        pipeline.bloom_hits,
    );
    single(
        out,
        "wow_handler_runs_total",
        "counter",
        "Times an aggregate's handler ran.",
        pipeline.handler_runs,
    );
    single(
        out,
        "wow_event_backlog",
        "gauge",
        "Streams appended and not yet handled by every consumer (queued in memory or left in the store to be read back).",
        pipeline.event_backlog,
    );
    single(
        out,
        "wow_quarantined_aggregates",
        "gauge",
        "Aggregates quarantined because their history cannot be applied (SPEC PX-1).",
        quarantined,
    );
}

/// The answer to `GET /metrics.json`: the counters of `/metrics`, read at the same moment,
/// as JSON.
pub(crate) fn render_json(
    metrics: &HttpMetrics,
    pipeline: &MetricsSnapshot,
    quarantined: usize,
    lag: &[crate::lag::ConsumerLag],
) -> axum::Json<serde_json::Value> {
    let (commands, latency) = {
        let counts = metrics.inner.lock().unwrap_or_else(|p| p.into_inner());
        let commands: Vec<serde_json::Value> = counts
            .results
            .iter()
            .map(|((stage, code), n)| serde_json::json!({"stage": stage, "errorCode": code, "count": n}))
            .collect();
        let buckets: Vec<serde_json::Value> = BUCKETS
            .iter()
            .zip(counts.buckets.iter())
            .map(|(bound, n)| serde_json::json!({"le": bound, "count": n}))
            .collect();
        let latency =
            serde_json::json!({"buckets": buckets, "count": counts.count, "sum": counts.sum});
        (commands, latency)
    };
    let signals: Vec<serde_json::Value> = pipeline
        .signals
        .iter()
        .map(|((stage, consumer, code), n)| {
            serde_json::json!({"stage": stage, "consumer": consumer, "errorCode": code, "count": n})
        })
        .collect();
    axum::Json(serde_json::json!({
        "consumerLag": lag,
        "commands": commands,
        "latency": latency,
        "consumerSignals": signals,
        "duplicates": {"store": pipeline.duplicates_by_store, "append": pipeline.duplicates_by_append},
        "bloomHits": pipeline.bloom_hits,
        "handlerRuns": pipeline.handler_runs,
        "eventBacklog": pipeline.event_backlog,
        "quarantined": quarantined,
    }))
}
