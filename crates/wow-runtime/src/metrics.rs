//! Counters of the command pipeline, read by `/metrics` and the benchmarks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use wow_core::command::{CommandResult, CommandStage};

/// Counters shared by a gateway, its checkers and processing nodes. Cheap to update from any
/// thread; a snapshot is a consistent-enough read for monitoring, not a transaction.
#[derive(Debug, Default)]
pub struct PipelineMetrics {
    bloom_hits: AtomicU64,
    duplicates_by_store: AtomicU64,
    duplicates_by_append: AtomicU64,
    handler_runs: AtomicU64,
    event_backlog: AtomicI64,
    results: Mutex<BTreeMap<(CommandStage, String), u64>>,
    signals: Mutex<BTreeMap<(CommandStage, String, String), u64>>,
}

/// A reading of [`PipelineMetrics`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Request ids the Bloom filter said it may have seen.
    pub bloom_hits: u64,
    /// Duplicates confirmed by persisted history before a handler ran.
    pub duplicates_by_store: u64,
    /// Duplicates only the append caught (the handler had run).
    pub duplicates_by_append: u64,
    /// Times an aggregate's handler ran.
    pub handler_runs: u64,
    /// Streams appended and published, not yet dispatched to every consumer.
    pub event_backlog: u64,
    /// Final results by stage and error code.
    pub results: BTreeMap<(CommandStage, String), u64>,
    /// Each consumer's signals of the downstream stages, by stage, consumer and error code.
    pub signals: BTreeMap<(CommandStage, String, String), u64>,
}

impl PipelineMetrics {
    pub(crate) fn record_bloom_hit(&self) {
        self.bloom_hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_duplicate_by_store(&self) {
        self.duplicates_by_store.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_duplicate_by_append(&self) {
        self.duplicates_by_append.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_handler_run(&self) {
        self.handler_runs.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_result(&self, result: &CommandResult) {
        let mut results = self.results.lock().unwrap_or_else(|p| p.into_inner());
        *results
            .entry((result.stage, result.error_code.to_string()))
            .or_default() += 1;
    }

    pub(crate) fn record_signal(&self, stage: CommandStage, consumer: &str, code: &str) {
        let mut signals = self.signals.lock().unwrap_or_else(|p| p.into_inner());
        let key = (stage, consumer.to_owned(), code.to_owned());
        *signals.entry(key).or_default() += 1;
    }

    pub(crate) fn add_event_backlog(&self, streams: u64) {
        self.event_backlog.fetch_add(
            i64::try_from(streams).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn sub_event_backlog(&self, streams: u64) {
        self.event_backlog.fetch_sub(
            i64::try_from(streams).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Streams published to the event bus and not yet dispatched to every consumer (queued
    /// in memory, or left in the store to be read back): how far consumers are behind.
    pub fn event_backlog(&self) -> u64 {
        u64::try_from(self.event_backlog.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            bloom_hits: self.bloom_hits.load(Ordering::Relaxed),
            duplicates_by_store: self.duplicates_by_store.load(Ordering::Relaxed),
            duplicates_by_append: self.duplicates_by_append.load(Ordering::Relaxed),
            handler_runs: self.handler_runs.load(Ordering::Relaxed),
            event_backlog: self.event_backlog(),
            results: self
                .results
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            signals: self
                .signals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }
}
