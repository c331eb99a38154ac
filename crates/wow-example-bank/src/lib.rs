//! # The `bank` example domain
//!
//! The domain DESIGN.md §6 specifies, which outside tools test against: an `account`
//! aggregate, the `transfer` saga, the `account_balance` projection, the `notifications`
//! processor, and the void `audit` `note` command. `wow serve` runs it.
//!
//! Read `account.rs` first: it is what a team writes for an aggregate.

pub mod account;
pub mod api;
pub mod audit;
pub mod notifications;
pub mod projection;
pub mod read_model;
pub mod transfer;

use std::sync::Arc;
use std::time::Duration;

use wow_core::aggregate::{AggregateRegistry, DuplicateAggregateName};
use wow_core::compensation::{CompensationError, CompensationScheduler, RetrySpec};
use wow_core::event::{CatchUpError, CatchUpProgress};
use wow_core::eventsourcing::{EventStore, SnapshotStore, SnapshotStrategy};
use wow_core::idempotency::IdempotencyConfig;
use wow_core::pipeline::LocalPipeline;
use wow_core::NamedAggregate;

pub use read_model::ReadModels;

/// The context every bank aggregate belongs to.
pub const CONTEXT: &str = "bank";

/// The bank's aggregates: `account` and `audit`.
pub fn registry() -> Result<AggregateRegistry, DuplicateAggregateName> {
    let mut registry = AggregateRegistry::new();
    registry
        .register::<account::Account>()?
        .register::<audit::Audit>()?;
    Ok(registry)
}

/// How the bank runs: its Bloom filters, and how failed consumers are retried.
#[derive(Debug, Clone)]
pub struct BankOptions {
    /// The `idempotency.*` settings of every Bloom filter.
    pub idempotency: IdempotencyConfig,
    /// The backoff and limit of retries of failed consumers (SPEC DS-4).
    pub retry: RetrySpec,
    /// How often the compensation scheduler looks for due retries; `None` runs none (retries
    /// only by hand).
    pub retry_every: Option<Duration>,
}

impl Default for BankOptions {
    fn default() -> Self {
        Self {
            idempotency: IdempotencyConfig::default(),
            retry: RetrySpec::default(),
            retry_every: Some(Duration::from_secs(1)),
        }
    }
}

/// The bank running in one process over `store`: its pipeline and read models.
#[derive(Debug)]
pub struct Bank {
    /// The gateway, node and dispatch.
    pub pipeline: LocalPipeline,
    /// The `account_balance` read model.
    pub balances: Arc<projection::AccountBalanceProjection>,
    /// The `notifications` outbox.
    pub notifications: Arc<notifications::Notifications>,
    /// The retrier of failed consumer executions.
    pub compensation: CompensationScheduler,
    /// What the start-up catch-up did, per consumer.
    pub caught_up: Vec<(String, CatchUpProgress)>,
    retries: Option<tokio::task::JoinHandle<()>>,
}

/// The aggregates whose history the bank's consumers read.
pub fn consumed_aggregates() -> [NamedAggregate; 1] {
    [NamedAggregate::new(CONTEXT, "account")]
}

impl Bank {
    /// Starts the bank over `store` (and `snapshots`, every 10 versions), with read models and
    /// consumer records in memory.
    pub async fn start(
        store: Arc<dyn EventStore>,
        snapshots: Option<Arc<dyn SnapshotStore>>,
    ) -> Result<Self, BankError> {
        Self::start_with(
            store,
            snapshots,
            BankOptions::default(),
            ReadModels::memory(),
        )
        .await
    }

    /// Starts the bank with `options`, its read models and consumer records in `read_models`
    /// (the store's own database, so that they commit with their processed-message records).
    ///
    /// Before it returns, every consumer (the projection, the processor and the saga) catches
    /// up with the history it has not handled yet, from its positions; failures on the way
    /// are recorded for compensation, and retried every `options.retry_every`.
    pub async fn start_with(
        store: Arc<dyn EventStore>,
        snapshots: Option<Arc<dyn SnapshotStore>>,
        options: BankOptions,
        read_models: ReadModels,
    ) -> Result<Self, BankError> {
        Self::start_with_progress(store, snapshots, options, read_models, &mut |_, _| {}).await
    }

    /// [`Bank::start_with`], telling `progress` how the catch-up goes (the consumer's name
    /// and how far it is), for a progress bar.
    pub async fn start_with_progress(
        store: Arc<dyn EventStore>,
        snapshots: Option<Arc<dyn SnapshotStore>>,
        options: BankOptions,
        read_models: ReadModels,
        progress: &mut (dyn FnMut(&str, &CatchUpProgress) + Send),
    ) -> Result<Self, BankError> {
        read_models.prepare().await.map_err(BankError::ReadModels)?;
        let read_models = Arc::new(read_models);
        let balances = Arc::new(projection::AccountBalanceProjection::new(
            read_models.views(),
        ));
        let notifications = Arc::new(notifications::Notifications::new(read_models.clone()));
        let mut builder = LocalPipeline::builder(registry()?, store)
            .idempotency(options.idempotency)
            .projection(balances.clone())
            .event_processor(notifications.clone())
            .saga(Arc::new(transfer::TransferSaga))
            .compensation(read_models.compensation_store(), options.retry)
            .positions(read_models.positions());
        if let Some(snapshots) = snapshots {
            builder = builder.snapshots(snapshots, SnapshotStrategy::Every(10));
        }
        let pipeline = builder.build();
        let caught_up = pipeline.catch_up(&consumed_aggregates(), progress).await?;
        for (consumer, done) in &caught_up {
            tracing::info!(
                consumer,
                streams = done.streams_handled,
                aggregates = done.aggregates_done,
                failed = done.aggregates_failed,
                "caught up"
            );
        }
        let compensation = pipeline.compensation()?;
        let retries = options
            .retry_every
            .map(|every| compensation.clone().spawn(every));
        Ok(Self {
            pipeline,
            balances,
            notifications,
            compensation,
            caught_up,
            retries,
        })
    }
}

impl Bank {
    /// Returns once every consumer position recorded so far is written (they are written in
    /// the background): call it before a graceful stop, so that the next start resumes
    /// exactly where this one ended.
    pub async fn flush(&self) {
        self.pipeline.dispatcher.flush_positions().await;
    }
}

impl Drop for Bank {
    /// Stops the compensation scheduler.
    fn drop(&mut self) {
        if let Some(retries) = self.retries.take() {
            retries.abort();
        }
    }
}

/// Why the bank could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BankError {
    /// Two aggregates share a name (a programming error).
    #[error(transparent)]
    Registry(#[from] DuplicateAggregateName),
    /// The consumers could not catch up with the history.
    #[error("catching up from the event store failed: {0}")]
    CatchUp(#[from] CatchUpError),
    /// The compensation scheduler could not start.
    #[error("the compensation scheduler could not start: {0}")]
    Compensation(#[from] CompensationError),
    /// The read models' tables could not be made.
    #[error("the read models' tables could not be made: {0}")]
    ReadModels(wow_core::eventsourcing::BoxError),
}
