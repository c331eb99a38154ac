//! Sending an outbox's stored rows, each at most once to completion (SPEC DS-2).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use super::outbox_page;
use wow_core::event::{
    run_external_effect, ConsumerStoreError, EffectError, EffectJournal, EffectOutcome,
};
use wow_core::outbox::{Outbox, OutboxEntry, OutboxSender};
use wow_core::view::{ViewStore, ViewStoreError};

/// What one [`OutboxDelivery::deliver`] did.
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

/// Why a delivery stopped before the end of the outbox. The rows done before it stay done.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// The rows could not be listed.
    #[error("the outbox could not be read: {0}")]
    Rows(#[from] ViewStoreError),
    /// The effect journal could not record a start or an end.
    #[error("the effect journal failed: {0}")]
    Journal(#[from] ConsumerStoreError),
}

/// Sends the rows of the outbox `O` from its view store through an [`OutboxSender`], each at
/// most once to completion: journaled "started" under the key `{consumer}:{row id}` in the
/// effect journal, and "done" after the send.
pub struct OutboxDelivery<O: Outbox> {
    rows: Arc<dyn ViewStore>,
    journal: Arc<dyn EffectJournal>,
    consumer: String,
    page: usize,
    outbox: PhantomData<fn() -> O>,
}

impl<O: Outbox> fmt::Debug for OutboxDelivery<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboxDelivery")
            .field("outbox", &O::NAME)
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

impl<O: Outbox> OutboxDelivery<O> {
    /// The delivery of the rows of `O` in `rows`, journaled in `journal` as `consumer` (the
    /// sender's name: the prefix of every effect key, so it must stay the same across
    /// releases).
    pub fn new(
        rows: Arc<dyn ViewStore>,
        journal: Arc<dyn EffectJournal>,
        consumer: impl Into<String>,
    ) -> Self {
        Self {
            rows,
            journal,
            consumer: consumer.into(),
            page: 200,
            outbox: PhantomData,
        }
    }

    /// Reads the rows `page` at a time (at least 1) instead of 200.
    pub fn with_page(mut self, page: usize) -> Self {
        self.page = page.max(1);
        self
    }

    /// Sends every stored row through `sender`, across tenants, in (tenant, row id) order,
    /// `now` being the time the journal records. A row done before is not sent; a row left
    /// "started" by a crash is confirmed by its key and sent again, under the same key, only
    /// when `sender` has no trace of it. A failed send is counted and logged, stays
    /// "started", and the delivery goes on with the next row.
    ///
    /// Fails with [`DeliveryError`] when the rows cannot be read or the journal cannot
    /// record; the rows done before it stay done.
    pub async fn deliver(
        &self,
        sender: &dyn OutboxSender<O::Row>,
        now: i64,
    ) -> Result<Delivery, DeliveryError> {
        let mut delivery = Delivery::default();
        let mut after: Option<(String, String)> = None;
        loop {
            let page = outbox_page::<O>(
                self.rows.as_ref(),
                after.as_ref().map(|(t, i)| (t.as_str(), i.as_str())),
                self.page,
            )
            .await?;
            for entry in &page {
                self.send_one(entry, sender, now, &mut delivery).await?;
            }
            match page.last() {
                Some(last) if page.len() == self.page => {
                    after = Some((last.tenant_id.clone(), last.id.clone()));
                }
                _ => return Ok(delivery),
            }
        }
    }

    async fn send_one(
        &self,
        entry: &OutboxEntry<O::Row>,
        sender: &dyn OutboxSender<O::Row>,
        now: i64,
        delivery: &mut Delivery,
    ) -> Result<(), DeliveryError> {
        let row = &entry.row;
        let outcome = run_external_effect(
            self.journal.as_ref(),
            &self.consumer,
            &entry.id,
            now,
            |attempt| async move {
                if attempt.resumed.is_some() && sender.sent(&attempt.key).await? {
                    return Ok(false);
                }
                sender.send(&attempt.key, row).await?;
                Ok(true)
            },
        )
        .await;
        match outcome {
            Ok(EffectOutcome::Done(true)) => delivery.sent += 1,
            Ok(EffectOutcome::Done(false)) => delivery.confirmed += 1,
            Ok(EffectOutcome::AlreadyDone) => delivery.already_done += 1,
            Err(EffectError::Journal(error)) => return Err(error.into()),
            Err(error) => {
                tracing::warn!(
                    outbox = O::NAME,
                    row = entry.id,
                    tenant = entry.tenant_id,
                    %error,
                    "an outbox row could not be sent; it is resumed next time"
                );
                delivery.failed += 1;
            }
        }
        Ok(())
    }
}
