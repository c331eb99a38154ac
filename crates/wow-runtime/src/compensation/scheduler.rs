//! Retries failed executions: by itself with backoff, or by hand for one record.

use std::sync::Arc;
use std::time::Duration;

use crate::deadline::DEADLINE_SCHEDULER;
use crate::event::{CatchUpError, EventDispatcher, RedispatchOutcome, RedispatchRange};
use crate::eventsourcing::{load_aggregate, LoadError};
use wow_core::aggregate::{AggregateRegistry, QuarantinedAggregates};
use wow_core::compensation::{
    CompensationStore, ExecutionFailed, ExecutionFailedStatus, FailedExecution, RecordEdit,
    AGGREGATE_PROCESSOR,
};
use wow_core::deadline::DeadlineStore;
use wow_core::event::{ConsumerError, ConsumerStoreError, ParkedStreams};
use wow_core::eventsourcing::{EventStore, EventStoreError, SnapshotStore};

/// Why a retry could not run. The record is unchanged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompensationError {
    /// There is no record with that id.
    #[error("no failed execution has id `{0}`")]
    NotFound(String),
    /// The record names a consumer this process does not run.
    #[error("no consumer is named `{0}` here")]
    UnknownConsumer(String),
    /// The stream the record names is not in the event store.
    #[error("stream {version} of {aggregate} is not in the event store")]
    StreamMissing {
        /// The aggregate.
        aggregate: String,
        /// The version.
        version: u64,
    },
    /// The dispatcher records no failures, so there is nothing to retry.
    #[error("failures are not recorded: the pipeline has no compensation store")]
    NotConfigured,
    /// The compensation store failed.
    #[error(transparent)]
    Store(#[from] ConsumerStoreError),
    /// The event store failed.
    #[error(transparent)]
    EventStore(#[from] EventStoreError),
}

/// What one scheduler pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryPass {
    /// Records retried.
    pub retried: usize,
    /// Of them, the ones that succeeded.
    pub succeeded: usize,
}

/// Re-runs failed executions (SPEC DS-4): exactly the recorded consumer on exactly the
/// recorded stream, read back from the event store. History is never touched. A success
/// marks the record `SUCCEEDED`; a failure adds an attempt and schedules the next retry
/// with exponential backoff until the [`RetrySpec`](wow_core::compensation::RetrySpec) limit, after which the record is
/// `EXHAUSTED` and only [`retry`](Self::retry) runs it again.
///
/// A record of a quarantined aggregate ([`AGGREGATE_PROCESSOR`], SPEC PX-1) is retried by
/// loading the aggregate again when the scheduler was given the aggregates
/// ([`with_quarantine`](Self::with_quarantine)): a load that succeeds (the stored history or
/// the code was fixed) lifts the quarantine and marks the record `SUCCEEDED`; one that fails
/// keeps the aggregate quarantined and adds an attempt.
#[derive(Debug, Clone)]
pub struct CompensationScheduler {
    dispatcher: Arc<EventDispatcher>,
    store: Arc<dyn EventStore>,
    failures: Arc<dyn CompensationStore>,
    aggregates: Option<Aggregates>,
    deadlines: Option<Arc<dyn DeadlineStore>>,
}

/// What retrying a quarantine takes: the aggregates, their snapshots and the registry to lift.
#[derive(Debug, Clone)]
struct Aggregates {
    registry: AggregateRegistry,
    snapshots: Option<Arc<dyn SnapshotStore>>,
    quarantine: QuarantinedAggregates,
}

impl CompensationScheduler {
    /// The scheduler of the failures `dispatcher` records, reading streams from `store`.
    pub fn new(
        dispatcher: Arc<EventDispatcher>,
        store: Arc<dyn EventStore>,
    ) -> Result<Self, CompensationError> {
        let failures = dispatcher
            .compensation()
            .map(|(failures, _)| failures.clone())
            .ok_or(CompensationError::NotConfigured)?;
        Ok(Self {
            dispatcher,
            store,
            failures,
            aggregates: None,
            deadlines: None,
        })
    }

    /// Retries the records of held deadlines ([`DEADLINE_SCHEDULER`], SPEC DM-6) by making
    /// the row in `deadlines` due again: the deadline scheduler then fires it as any due row,
    /// and a record whose row is gone (cancelled, or fired since) succeeds with nothing to do.
    /// Without it such records cannot be retried ([`CompensationError::UnknownConsumer`]).
    pub fn with_deadlines(mut self, deadlines: Arc<dyn DeadlineStore>) -> Self {
        self.deadlines = Some(deadlines);
        self
    }

    /// Retries the records of quarantined aggregates ([`AGGREGATE_PROCESSOR`]) by loading the
    /// aggregate of `registry` again (from `snapshots` and the event store), and lifts its
    /// quarantine in `quarantine` when that succeeds. Without it such records cannot be
    /// retried ([`CompensationError::UnknownConsumer`]).
    pub fn with_quarantine(
        mut self,
        registry: AggregateRegistry,
        snapshots: Option<Arc<dyn SnapshotStore>>,
        quarantine: QuarantinedAggregates,
    ) -> Self {
        self.aggregates = Some(Aggregates {
            registry,
            snapshots,
            quarantine,
        });
        self
    }

    /// The records, to list and read.
    pub fn failures(&self) -> &Arc<dyn CompensationStore> {
        &self.failures
    }

    /// The names of the consumers whose failures this scheduler retries, in stage order.
    pub fn consumer_names(&self) -> Vec<String> {
        self.dispatcher.consumer_names()
    }

    /// The lanes of streams parked behind a failed one (SPEC DS-5), when the dispatcher
    /// parks them.
    pub fn parked(&self) -> Option<&Arc<dyn ParkedStreams>> {
        self.dispatcher.parked_streams()
    }

    /// Re-runs record `id` now, whatever its retry time or status (a manual retry), and
    /// returns the record after it: `SUCCEEDED`, or with one attempt more. A record that
    /// already succeeded is returned as it is, without running anything.
    pub async fn retry(&self, id: &str) -> Result<ExecutionFailed, CompensationError> {
        let record = self.current(id.to_owned()).await?;
        if record.status.is_settled() {
            return Ok(record);
        }
        self.run(record).await
    }

    /// Skips record `id` for operator `by` (SPEC DS-5): marks it `SKIPPED` (who, when), counts
    /// its stream as handled by its consumer without running it, and runs, in order, the
    /// consumer's streams of the aggregate parked behind it. A record that already succeeded
    /// or was skipped is returned as it stands, and nothing runs.
    pub async fn skip(&self, id: &str, by: &str) -> Result<ExecutionFailed, CompensationError> {
        let record = self.current(id.to_owned()).await?;
        if record.status.is_settled() {
            return Ok(record);
        }
        let consumer = self.dispatcher.consumer(&record.consumer);
        // Read before the record changes: a stream gone from history is refused unskipped.
        let stream = match &consumer {
            Some(_) => Some(self.recorded_stream(&record).await?),
            None => None,
        };
        let now = self.dispatcher.clock().now_millis();
        let after = self
            .failures
            .mark_skipped(id, by, now)
            .await?
            .ok_or_else(|| CompensationError::NotFound(id.to_owned()))?;
        if let (Some(consumer), Some(stream)) = (consumer, stream) {
            if after.status == ExecutionFailedStatus::Skipped {
                self.dispatcher.skip_consumer(&consumer, &stream).await;
            }
        }
        tracing::info!(id, by, consumer = after.consumer, aggregate_id = %after.aggregate_id, version = after.version, "a failed execution was skipped");
        Ok(after)
    }

    /// Applies operator `by`'s `edit` to record `id` at the dispatcher clock's now and returns
    /// the record after it ([`edited`](wow_core::compensation::edited) says what each edit
    /// changes: a retry spec is followed by this scheduler's next retries of the record).
    /// Nothing runs.
    pub async fn edit(
        &self,
        id: &str,
        edit: &RecordEdit,
        by: &str,
    ) -> Result<ExecutionFailed, CompensationError> {
        let now = self.dispatcher.clock().now_millis();
        let after = self
            .failures
            .edit(id, edit, by, now)
            .await?
            .ok_or_else(|| CompensationError::NotFound(id.to_owned()))?;
        tracing::info!(id, by, ?edit, consumer = after.consumer, aggregate_id = %after.aggregate_id, version = after.version, "a failed execution was edited");
        Ok(after)
    }

    /// Whether the dispatcher runs a consumer named `name` (one a re-dispatch can run).
    pub fn runs_consumer(&self, name: &str) -> bool {
        self.dispatcher.consumer(name).is_some()
    }

    /// Runs consumer `consumer` again on the streams of `range`, read from the event store
    /// (an operator's re-dispatch: [`redispatch`](crate::event::redispatch) says what it does
    /// to each kind of consumer); failures are recorded here as live ones.
    pub async fn redispatch(
        &self,
        consumer: &str,
        range: &RedispatchRange,
    ) -> Result<RedispatchOutcome, CatchUpError> {
        crate::event::redispatch(&self.dispatcher, consumer, self.store.as_ref(), range).await
    }

    /// The stream `record` failed on, read back from the event store.
    async fn recorded_stream(
        &self,
        record: &ExecutionFailed,
    ) -> Result<wow_core::DomainEventStream, CompensationError> {
        self.store
            .load(&record.aggregate_id, record.version, record.version)
            .await?
            .into_iter()
            .next()
            .filter(|stream| stream.id == record.stream_id)
            .ok_or_else(|| CompensationError::StreamMissing {
                aggregate: record.aggregate_id.to_string(),
                version: record.version,
            })
    }

    /// Records the failures that could not be recorded when they happened, then retries
    /// every record due at the dispatcher clock's now (up to `limit`), in aggregate and
    /// version order. A record that cannot run (its consumer or stream is gone) is
    /// logged and left for a manual decision.
    pub async fn run_due(&self, limit: usize) -> Result<RetryPass, CompensationError> {
        self.dispatcher.record_pending_failures().await;
        let now = self.dispatcher.clock().now_millis();
        let mut pass = RetryPass::default();
        for record in self.failures.due(now, limit).await? {
            let id = record.id.clone();
            match self.run(record).await {
                Ok(after) => {
                    pass.retried += 1;
                    if after.status == ExecutionFailedStatus::Succeeded {
                        pass.succeeded += 1;
                    }
                }
                Err(error @ (CompensationError::Store(_) | CompensationError::EventStore(_))) => {
                    return Err(error)
                }
                Err(error) => {
                    tracing::warn!(id, %error, "a failed execution cannot be retried");
                }
            }
        }
        Ok(pass)
    }

    /// Runs [`run_due`](Self::run_due) every `every` until the returned task is aborted.
    pub fn spawn(self, every: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = self.run_due(100).await {
                    tracing::warn!(%error, "compensation pass failed; trying again later");
                }
            }
        })
    }

    async fn run(&self, record: ExecutionFailed) -> Result<ExecutionFailed, CompensationError> {
        if record.consumer == AGGREGATE_PROCESSOR {
            return self.reload(record).await;
        }
        if record.consumer == DEADLINE_SCHEDULER {
            return self.re_fire(record).await;
        }
        let consumer = self
            .dispatcher
            .consumer(&record.consumer)
            .ok_or_else(|| CompensationError::UnknownConsumer(record.consumer.clone()))?;
        let stream = self.recorded_stream(&record).await?;
        tracing::info!(id = record.id, consumer = record.consumer, aggregate_id = %record.aggregate_id, version = record.version, attempts = record.attempts, "retrying a failed execution");
        // A failure is recorded on this record by the dispatcher (same consumer and stream).
        if self
            .dispatcher
            .run_consumer(&consumer, &stream)
            .await
            .is_ok()
        {
            return self.succeeded(record.id).await;
        }
        self.current(record.id).await
    }

    /// Marks record `id` succeeded now: the record after it, or as it stands where another
    /// pass changed it first.
    async fn succeeded(&self, id: String) -> Result<ExecutionFailed, CompensationError> {
        let now = self.dispatcher.clock().now_millis();
        match self.failures.mark_succeeded(&id, now).await? {
            Some(after) => Ok(after),
            None => self.current(id).await,
        }
    }

    /// Record `id` as it stands.
    async fn current(&self, id: String) -> Result<ExecutionFailed, CompensationError> {
        self.failures
            .get(&id)
            .await?
            .ok_or(CompensationError::NotFound(id))
    }

    /// Retries a held deadline (SPEC DM-6): its row, if it is still there, is due again now
    /// and the record succeeded (a firing that fails again holds it again and records anew).
    async fn re_fire(&self, record: ExecutionFailed) -> Result<ExecutionFailed, CompensationError> {
        let deadlines = self
            .deadlines
            .as_ref()
            .ok_or_else(|| CompensationError::UnknownConsumer(record.consumer.clone()))?;
        let name = record.event_ids.first().cloned().unwrap_or_default();
        let pending = deadlines
            .pending_for(&record.aggregate_id)
            .await?
            .into_iter()
            .any(|row| row.schedule.name == name && row.schedule.request_id == record.stream_id);
        if pending {
            deadlines.fire_now(&record.aggregate_id, &name).await?;
        }
        tracing::info!(id = record.id, owner = %record.aggregate_id, deadline = name, pending, "retrying a held deadline: due again now");
        self.succeeded(record.id).await
    }

    /// Retries a quarantine (SPEC PX-1): loads the aggregate again; a success lifts the
    /// quarantine and marks the record `SUCCEEDED`, a history that still does not apply
    /// keeps it quarantined and adds an attempt to the record.
    async fn reload(&self, record: ExecutionFailed) -> Result<ExecutionFailed, CompensationError> {
        let unknown = || CompensationError::UnknownConsumer(record.consumer.clone());
        let aggregates = self.aggregates.as_ref().ok_or_else(unknown)?;
        let runtime = aggregates
            .registry
            .get(&record.aggregate_id.aggregate_name)
            .ok_or_else(unknown)?;
        tracing::info!(id = record.id, aggregate_id = %record.aggregate_id, version = record.version, attempts = record.attempts, "retrying a quarantined aggregate: loading it again");
        let loaded = load_aggregate(
            runtime.as_ref(),
            self.store.as_ref(),
            aggregates.snapshots.as_deref(),
            &record.aggregate_id,
        )
        .await;
        let now = self.dispatcher.clock().now_millis();
        let error = match loaded {
            Ok(_) => {
                aggregates.quarantine.lift(&record.aggregate_id);
                tracing::info!(aggregate_id = %record.aggregate_id, "quarantine lifted: the aggregate loads again");
                return self.succeeded(record.id).await;
            }
            Err(LoadError::Store(error)) => return Err(CompensationError::EventStore(error)),
            Err(LoadError::Aggregate(error)) => error,
        };
        let (version, message) = error.unappliable_history().map_or(
            (record.version, error.to_string()),
            |(_, version, message)| (version, message.to_owned()),
        );
        aggregates
            .quarantine
            .quarantine(&record.aggregate_id, version, message.clone(), now);
        let failure = FailedExecution {
            consumer: record.consumer.clone(),
            stage: record.stage,
            aggregate_id: record.aggregate_id.clone(),
            version: record.version,
            stream_id: record.stream_id.clone(),
            event_ids: record.event_ids.clone(),
            error: ConsumerError::internal(message),
        };
        let retry = self
            .dispatcher
            .compensation()
            .map(|(_, retry)| *retry)
            .unwrap_or_default();
        Ok(self.failures.record_failure(&failure, &retry, now).await?)
    }
}
