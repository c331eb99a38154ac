//! The bank assembled as a service's `main` assembles it: its parts registered on the
//! `wow-service` builder, started without a socket.
#![allow(dead_code, unreachable_pub, clippy::expect_used)]

use std::time::Duration;

use wow_core::compensation::RetrySpec;
use wow_core::Stores;
use wow_example_bank::account::Account;
use wow_example_bank::audit::Audit;
use wow_example_bank::notifications::{self, NotificationOutbox, OutboxRow};
use wow_example_bank::projection::{self, AccountBalance, AccountView};
use wow_example_bank::transfer::TransferSaga;
use wow_runtime::compensation::CompensationScheduler;
use wow_runtime::event::CatchUpProgress;
use wow_runtime::idempotency::IdempotencyConfig;
use wow_runtime::outbox::{Delivery, DeliveryError, OutboxDelivery, OutboxProcessor};
use wow_runtime::pipeline::LocalPipeline;
use wow_service::{RunningService, Service, ServiceBuilder, Settings};

/// The bank's parts on the builder: `account` and `audit`, the `account_balance` view, the
/// `notifications` outbox and the `transfer` saga.
pub fn service(stores: Stores) -> ServiceBuilder {
    Service::builder()
        .aggregate::<Account>()
        .aggregate::<Audit>()
        .view::<AccountBalance>()
        .outbox::<NotificationOutbox>()
        .saga(TransferSaga)
        .stores(stores)
}

/// How a test runs the bank: its Bloom filters, and how failed consumers are retried.
#[derive(Debug, Clone)]
pub struct BankOptions {
    /// The `idempotency.*` settings of every Bloom filter.
    pub idempotency: IdempotencyConfig,
    /// The backoff and limit of retries of failed consumers.
    pub retry: RetrySpec,
    /// How often failed consumers are retried; `None` retries only by hand.
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

/// The bank started over its stores, and what a test reads of it.
#[derive(Debug)]
pub struct Bank {
    service: RunningService,
    compensation: CompensationScheduler,
}

impl Bank {
    /// Starts the bank over `stores` with the default options.
    pub async fn start(stores: Stores) -> Result<Self, wow_service::ServiceError> {
        Self::start_with(stores, BankOptions::default()).await
    }

    /// Starts the bank over `stores` with `options`; its consumers have caught up when it
    /// returns.
    pub async fn start_with(
        stores: Stores,
        options: BankOptions,
    ) -> Result<Self, wow_service::ServiceError> {
        let settings = Settings {
            idempotency: options.idempotency,
            retry: options.retry,
            retry_every: options.retry_every,
            ..Settings::default()
        };
        let service = service(stores).settings(settings).build().await?;
        let compensation = service.pipeline().compensation()?;
        Ok(Self {
            service,
            compensation,
        })
    }

    /// The gateway, node and dispatch.
    pub fn pipeline(&self) -> &LocalPipeline {
        self.service.pipeline()
    }

    /// The stores it runs on.
    pub fn stores(&self) -> &Stores {
        self.service.stores()
    }

    /// The retrier of failed consumer executions.
    pub fn compensation(&self) -> &CompensationScheduler {
        &self.compensation
    }

    /// What the start's catch-up did, per consumer.
    pub fn caught_up(&self) -> &[(String, CatchUpProgress)] {
        self.service.caught_up()
    }

    /// The account as the `account_balance` view shows it, if it exists.
    pub async fn account_view(
        &self,
        account: &wow_core::AggregateId,
    ) -> Result<Option<AccountView>, wow_core::BoxError> {
        projection::account_view(self.stores().views.as_ref(), account).await
    }

    /// Every notification recorded so far, across tenants, in (tenant, event id) order.
    pub async fn notifications(&self) -> Vec<OutboxRow> {
        OutboxProcessor::<NotificationOutbox>::new(self.stores().views.clone())
            .rows()
            .await
            .expect("the outbox lists")
            .into_iter()
            .map(|entry| entry.row)
            .collect()
    }

    /// Sends every notification through `mailer`, each at most once to completion.
    pub async fn deliver(
        &self,
        mailer: &impl notifications::Mailer,
        now: i64,
    ) -> Result<Delivery, DeliveryError> {
        let stores = self.stores();
        OutboxDelivery::<NotificationOutbox>::new(
            stores.views.clone(),
            stores.effects.clone(),
            notifications::SENDER,
        )
        .deliver(mailer, now)
        .await
    }

    /// Returns once every consumer position recorded so far is written.
    pub async fn flush(&self) {
        self.pipeline().dispatcher.flush_positions().await;
    }
}
