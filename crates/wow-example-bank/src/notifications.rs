//! The `notifications` processor: one outbox row per `Withdrawn` event, in the store's
//! database, exactly once: the rows and the stream's processed-message record commit
//! together (SPEC DS-2), and the row's key is the event id.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use wow_core::event::{ConsumerError, EventConsumer};
use wow_core::eventsourcing::BoxError;
use wow_core::DomainEventStream;

use crate::projection::consumer_error;
use crate::read_model::ReadModels;

/// The consumer name of the processor.
pub const NAME: &str = "notifications";

/// One notification to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutboxRow {
    /// The `Withdrawn` event's id: the row's identity.
    pub event_id: String,
    /// The account.
    pub account_id: String,
    /// The amount withdrawn.
    pub amount: i64,
}

/// The processor.
#[derive(Debug)]
pub struct Notifications {
    models: Arc<ReadModels>,
}

impl Notifications {
    /// The processor writing into `models`.
    pub fn new(models: Arc<ReadModels>) -> Self {
        Self { models }
    }

    /// Every row written so far.
    pub async fn rows(&self) -> Result<Vec<OutboxRow>, BoxError> {
        self.models.outbox().await
    }
}

#[async_trait]
impl EventConsumer for Notifications {
    fn name(&self) -> &str {
        NAME
    }

    async fn handle(&self, stream: &DomainEventStream) -> Result<(), ConsumerError> {
        if stream.aggregate_id.aggregate_name != "account" {
            return Ok(());
        }
        self.models
            .record_withdrawals(NAME, stream)
            .await
            .map(|_| ())
            .map_err(consumer_error)
    }
}
