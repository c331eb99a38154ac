//! The `account_balance` projection: each account's balance, hold and last applied version,
//! in the store's database. Each stream is applied once: its processed-message record is
//! written in the same transaction as the row (SPEC DS-2), so a redelivered stream changes
//! nothing.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::eventsourcing::{BoxError, EventStore, EventStoreError};
use wow_core::{DomainEventStream, ErrorCode, NamedAggregate};

use crate::read_model::ReadModels;

/// The consumer name of the projection.
pub const NAME: &str = "account_balance";

/// One account as the read model shows it (`GET /account/{id}/view`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AccountView {
    /// The account id.
    pub id: String,
    /// The holder's name.
    pub name: String,
    /// The available balance.
    pub balance: i64,
    /// The amount held by transfers in flight.
    pub held: i64,
    /// The last event version applied.
    pub version: u64,
}

/// The projection.
#[derive(Debug)]
pub struct AccountBalanceProjection {
    models: Arc<ReadModels>,
}

impl AccountBalanceProjection {
    /// The projection writing into `models`.
    pub fn new(models: Arc<ReadModels>) -> Self {
        Self { models }
    }

    /// The view of account `id`, if it exists.
    pub async fn view(&self, id: &str) -> Result<Option<AccountView>, BoxError> {
        self.models.view(id).await
    }

    /// Applies every account stream of `store` it has not applied yet (on start, and for a
    /// read model added later).
    pub async fn catch_up(&self, store: &dyn EventStore) -> Result<(), EventStoreError> {
        for stream in account_streams(store).await? {
            if let Err(error) = self.handle(&stream).await {
                tracing::warn!(%error, stream = %stream.id, "catch-up of account_balance failed for a stream");
            }
        }
        Ok(())
    }
}

/// Every `account` stream in `store`, aggregate by aggregate, in version order.
pub(crate) async fn account_streams(
    store: &dyn EventStore,
) -> Result<Vec<DomainEventStream>, EventStoreError> {
    let named = NamedAggregate::new(crate::CONTEXT, "account");
    let mut after: Option<String> = None;
    let mut streams = Vec::new();
    loop {
        let page = store
            .scan_aggregate_ids(&named, after.as_deref(), 500)
            .await?;
        let Some(last) = page.last() else {
            return Ok(streams);
        };
        after = Some(last.id.clone());
        for aggregate in &page {
            streams.extend(store.load(aggregate, 1, u64::MAX).await?);
        }
    }
}

pub(crate) fn consumer_error(error: impl std::fmt::Display) -> ConsumerError {
    ConsumerError::new(ErrorCode::ServiceUnavailable, error.to_string())
}

#[async_trait]
impl EventConsumer for AccountBalanceProjection {
    fn name(&self) -> &str {
        NAME
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        if stream.aggregate_id.aggregate_name != "account" {
            return Ok(());
        }
        self.models
            .project_balance(NAME, stream)
            .await
            .map(|_| ())
            .map_err(consumer_error)
    }
}
