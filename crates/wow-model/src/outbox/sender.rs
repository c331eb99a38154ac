//! Where an outbox's rows go.

use async_trait::async_trait;

use crate::error::BoxError;

/// The outside system an outbox's rows go to: it cannot join our transaction, but it accepts
/// an idempotency key and deduplicates by it (as payment and mail APIs do).
#[async_trait]
pub trait OutboxSender<R>: Send + Sync {
    /// Sends `row` under `key`; a second send under the same key sends nothing new.
    async fn send(&self, key: &str, row: &R) -> Result<(), BoxError>;

    /// Whether a send under `key` happened (to confirm an attempt cut off by a crash).
    async fn sent(&self, key: &str) -> Result<bool, BoxError>;
}
