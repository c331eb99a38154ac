//! The `account_balance` projection: each account's balance, hold and last applied version,
//! in the store's database. Each stream is applied once: its processed-message record is
//! written in the same transaction as the row (SPEC DS-2), so a redelivered stream changes
//! nothing.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use wow_core::event::{ConsumerError, EventConsumer, ProcessError};
use wow_core::eventsourcing::BoxError;
use wow_core::{AggregateId, DomainEventStream, ErrorCode};

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

    /// The view of `account` (its tenant and id), if it exists.
    pub async fn view(&self, account: &AggregateId) -> Result<Option<AccountView>, BoxError> {
        self.models.view(account).await
    }
}

/// A read model's failure as a consumer error: the database's failures are
/// `ServiceUnavailable`, the work's (an out-of-order stream, say) `IllegalState`.
pub(crate) fn consumer_error(error: ProcessError) -> ConsumerError {
    let code = match &error {
        ProcessError::Store(_) => ErrorCode::ServiceUnavailable,
        _ => ErrorCode::IllegalState,
    };
    ConsumerError::new(code, error.to_string())
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
