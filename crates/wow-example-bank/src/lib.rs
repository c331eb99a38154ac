//! # The `bank` example domain
//!
//! The domain DESIGN.md §6 specifies, which outside tools test against: an `account`
//! aggregate, the `transfer` saga, the `account_balance` projection, the `notifications`
//! processor, and the void `audit` `note` command. `wow serve` runs it.
//!
//! Read `account.rs` first: it is what a team writes for an aggregate.

pub mod account;
pub mod audit;
pub mod notifications;
pub mod projection;
pub mod read_model;
pub mod transfer;

use std::sync::Arc;

use wow_core::aggregate::{AggregateRegistry, DuplicateAggregateName};
use wow_core::eventsourcing::{EventStore, SnapshotStore, SnapshotStrategy};
use wow_core::idempotency::IdempotencyConfig;
use wow_core::pipeline::LocalPipeline;

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

/// The bank running in one process over `store`: its pipeline and read models.
#[derive(Debug)]
pub struct Bank {
    /// The gateway, node and dispatch.
    pub pipeline: LocalPipeline,
    /// The `account_balance` read model.
    pub balances: Arc<projection::AccountBalanceProjection>,
    /// The `notifications` outbox.
    pub notifications: Arc<notifications::Notifications>,
}

impl Bank {
    /// Starts the bank over `store` (and `snapshots`, every 10 versions), after the read
    /// models caught up with the history already in the store.
    pub async fn start(
        store: Arc<dyn EventStore>,
        snapshots: Option<Arc<dyn SnapshotStore>>,
    ) -> Result<Self, BankError> {
        Self::start_with(
            store,
            snapshots,
            IdempotencyConfig::default(),
            ReadModels::memory(),
        )
        .await
    }

    /// [`Bank::start`] with the `idempotency.*` settings of its Bloom filters and the
    /// database of its read models (the store's own, so that they commit with their
    /// processed-message records).
    pub async fn start_with(
        store: Arc<dyn EventStore>,
        snapshots: Option<Arc<dyn SnapshotStore>>,
        idempotency: IdempotencyConfig,
        read_models: ReadModels,
    ) -> Result<Self, BankError> {
        read_models.prepare().await.map_err(BankError::ReadModels)?;
        let read_models = Arc::new(read_models);
        let balances = Arc::new(projection::AccountBalanceProjection::new(
            read_models.clone(),
        ));
        let notifications = Arc::new(notifications::Notifications::new(read_models));
        balances.catch_up(store.as_ref()).await?;
        notifications.catch_up(store.as_ref()).await?;
        let mut builder = LocalPipeline::builder(registry()?, store)
            .idempotency(idempotency)
            .projection(balances.clone())
            .event_processor(notifications.clone())
            .saga(Arc::new(transfer::TransferSaga));
        if let Some(snapshots) = snapshots {
            builder = builder.snapshots(snapshots, SnapshotStrategy::Every(10));
        }
        Ok(Self {
            pipeline: builder.build(),
            balances,
            notifications,
        })
    }
}

/// Why the bank could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BankError {
    /// Two aggregates share a name (a programming error).
    #[error(transparent)]
    Registry(#[from] DuplicateAggregateName),
    /// The read models could not read the history.
    #[error("catching up from the event store failed: {0}")]
    CatchUp(#[from] wow_core::eventsourcing::EventStoreError),
    /// The read models' tables could not be made.
    #[error("the read models' tables could not be made: {0}")]
    ReadModels(wow_core::eventsourcing::BoxError),
}
