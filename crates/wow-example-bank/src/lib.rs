//! # The `bank` example domain
//!
//! The domain of docs/http-api.md, a contract which outside tools test against: an `account`
//! aggregate, the `transfer` saga, the `account_balance` projection, the `notifications`
//! processor, and the void `audit` `note` command. `wow serve` runs it.
//!
//! Read `account.rs` first: it is what a team writes for an aggregate.

pub mod account;
pub mod audit;
pub mod notifications;
pub mod projection;
pub mod transfer;

use std::sync::Arc;
use std::time::Duration;

use wow_core::aggregate::{AggregateRegistry, RegistrationError};
use wow_core::compensation::RetrySpec;
use wow_core::{NamedAggregate, Stores};
use wow_runtime::compensation::{CompensationError, CompensationScheduler};
use wow_runtime::event::{CatchUpError, CatchUpProgress};
use wow_runtime::eventsourcing::SnapshotStrategy;
use wow_runtime::idempotency::IdempotencyConfig;
use wow_runtime::pipeline::LocalPipeline;
use wow_runtime::view::ViewProjection;

/// The context every bank aggregate belongs to.
pub const CONTEXT: &str = "bank";

/// The bank's aggregates: `account` and `audit`.
pub fn registry() -> Result<AggregateRegistry, RegistrationError> {
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

/// The bank running in one process over its stores: its pipeline, view and outbox.
#[derive(Debug)]
pub struct Bank {
    /// The gateway, node and dispatch.
    pub pipeline: LocalPipeline,
    /// The `account_balance` read model.
    pub balances: Arc<ViewProjection<projection::AccountBalance>>,
    /// The `notifications` outbox: its processor and its delivery.
    pub notifications: Arc<notifications::Notifications>,
    /// The retrier of failed consumer executions.
    pub compensation: CompensationScheduler,
    /// What the start-up catch-up did, per consumer.
    pub caught_up: Vec<(String, CatchUpProgress)>,
    /// The stores it runs on.
    pub stores: Stores,
    retries: Option<tokio::task::JoinHandle<()>>,
}

/// The aggregates whose history the bank's consumers read.
pub fn consumed_aggregates() -> [NamedAggregate; 1] {
    [NamedAggregate::new(CONTEXT, "account")]
}

/// The names of the bank's views and outboxes, each also its consumer's name: what a
/// rebuild can empty (its rows and processed-message records in the view store, and its
/// positions), to be refilled from history by the next catch-up.
pub const READ_MODELS: [&str; 2] = [projection::NAME, notifications::NAME];

impl Bank {
    /// Starts the bank over `stores` with the default options: `Bank::start(Stores::in_memory())`
    /// for a test.
    pub async fn start(stores: Stores) -> Result<Self, BankError> {
        Self::start_with(stores, BankOptions::default()).await
    }

    /// Starts the bank over `stores` with `options`: history and snapshots (every 10
    /// versions) in its event and snapshot stores, the `account_balance` view and the
    /// `notifications` outbox in its view store, positions, compensation records and the
    /// effect journal in theirs. Pass stores of one database ([`Stores::of`]) so that each
    /// consumer's write commits with its processed-message record (SPEC DS-2).
    ///
    /// Before it returns, every consumer (the projection, the processor and the saga) catches
    /// up with the history it has not handled yet, from its positions; failures on the way
    /// are recorded for compensation, and retried every `options.retry_every`.
    pub async fn start_with(stores: Stores, options: BankOptions) -> Result<Self, BankError> {
        Self::start_with_progress(stores, options, &mut |_, _| {}).await
    }

    /// [`Bank::start_with`], telling `progress` how the catch-up goes (the consumer's name
    /// and how far it is), for a progress bar.
    pub async fn start_with_progress(
        stores: Stores,
        options: BankOptions,
        progress: &mut (dyn FnMut(&str, &CatchUpProgress) + Send),
    ) -> Result<Self, BankError> {
        let balances = Arc::new(ViewProjection::new(stores.views.clone()));
        let notifications = Arc::new(notifications::Notifications::new(
            stores.views.clone(),
            stores.effects.clone(),
        ));
        let pipeline = LocalPipeline::builder(registry()?, stores.events.clone())
            .idempotency(options.idempotency)
            .projection(balances.clone())
            .event_processor(notifications.clone())
            .saga(Arc::new(transfer::TransferSaga))
            .compensation(stores.compensation.clone(), options.retry)
            .positions(stores.positions.clone())
            .snapshots(stores.snapshots.clone(), SnapshotStrategy::Every(10))
            .build();
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
            stores,
            retries,
        })
    }
}

impl Bank {
    /// The account as the `account_balance` view shows it, if it exists.
    pub async fn account_view(
        &self,
        account: &wow_core::AggregateId,
    ) -> Result<Option<projection::AccountView>, wow_core::BoxError> {
        projection::account_view(self.stores.views.as_ref(), account).await
    }

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
    Registry(#[from] RegistrationError),
    /// The consumers could not catch up with the history.
    #[error("catching up from the event store failed: {0}")]
    CatchUp(#[from] CatchUpError),
    /// The compensation scheduler could not start.
    #[error("the compensation scheduler could not start: {0}")]
    Compensation(#[from] CompensationError),
}
