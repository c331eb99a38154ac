//! The `notifications` processor: one outbox row per `Withdrawn` event, in the store's
//! database, exactly once: the rows and the stream's processed-message record commit
//! together (SPEC DS-2), and the row's key is the event id.

use std::sync::Arc;

use async_trait::async_trait;
use wow_core::event::{
    run_external_effect, ConsumerError, EffectError, EffectOutcome, EventConsumer,
};
use wow_core::eventsourcing::BoxError;
use wow_core::DomainEventStream;

use crate::projection::consumer_error;
pub use crate::read_model::OutboxRow;
use crate::read_model::ReadModels;

/// The consumer name of the processor.
pub const NAME: &str = crate::read_model::NOTIFICATIONS;

/// The outside system that sends a notification: it cannot join our transaction, but it
/// accepts an idempotency key and deduplicates by it (as payment and mail APIs do).
#[async_trait]
pub trait Mailer: Send + Sync {
    /// Sends `row` under `key`; a second send under the same key sends nothing new.
    async fn send(&self, key: &str, row: &OutboxRow) -> Result<(), BoxError>;

    /// Whether a send under `key` happened (to confirm an attempt cut off by a crash).
    async fn sent(&self, key: &str) -> Result<bool, BoxError>;
}

/// The consumer name of the sender, in the effect journal.
pub const SENDER: &str = "notification_sender";

/// What [`Notifications::deliver`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Rows sent now.
    pub sent: usize,
    /// Rows an earlier attempt had sent: confirmed by their key, not sent again.
    pub confirmed: usize,
    /// Rows an earlier delivery recorded done.
    pub already_done: usize,
    /// Rows whose send failed; they stay "started" and are resumed next time.
    pub failed: usize,
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

    /// Sends every outbox row through `mailer`, each at most once to completion (SPEC DS-2):
    /// the send is journaled "started" under a key derived from the row's event id, and
    /// "done" after it. A row left "started" by a crash is confirmed with the mailer by its
    /// key, and sent again under the same key only if the mailer has no trace of it.
    pub async fn deliver(&self, mailer: &dyn Mailer, now: i64) -> Result<Delivery, BoxError> {
        let journal = self.models.effects();
        let mut delivery = Delivery::default();
        for row in self.rows().await? {
            let row = &row;
            let outcome = run_external_effect(
                journal.as_ref(),
                SENDER,
                &row.event_id,
                now,
                |attempt| async move {
                    if attempt.resumed.is_some() && mailer.sent(&attempt.key).await? {
                        return Ok(false);
                    }
                    mailer.send(&attempt.key, row).await?;
                    Ok(true)
                },
            )
            .await;
            match outcome {
                Ok(EffectOutcome::Done(true)) => delivery.sent += 1,
                Ok(EffectOutcome::Done(false)) => delivery.confirmed += 1,
                Ok(EffectOutcome::AlreadyDone) => delivery.already_done += 1,
                Err(EffectError::Effect(error)) => {
                    tracing::warn!(event_id = row.event_id, %error, "a notification could not be sent; it is resumed next time");
                    delivery.failed += 1;
                }
                Err(error) => return Err(Box::new(error)),
            }
        }
        Ok(delivery)
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
