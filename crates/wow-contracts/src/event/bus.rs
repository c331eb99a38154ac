//! The DomainEventBus: carries appended streams to the consumers of each stage.

use std::fmt;

use std::sync::Arc;

use async_trait::async_trait;

use wow_model::error::BoxError;
use wow_model::event::DomainEventStream;

/// Why a stream could not be published. The stream is appended all the same (SPEC ST-4):
/// consumers catch up from the event store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventBusError {
    /// The bus is shut down.
    #[error("the event bus is closed")]
    Closed,
    /// The transport failed.
    #[error("the event bus failed: {0}")]
    Unavailable(#[source] BoxError),
}

/// Publishes appended streams.
///
/// # Cancel safety
///
/// `publish` is not cancel safe: a dropped publish may or may not have delivered.
#[async_trait]
pub trait DomainEventBus: Send + Sync + fmt::Debug {
    /// Hands `stream` to the bus.
    async fn publish(&self, stream: Arc<DomainEventStream>) -> Result<(), EventBusError>;
}

/// A [`DomainEventBus`] that drops every stream: for a node whose consumers run elsewhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopDomainEventBus;

#[async_trait]
impl DomainEventBus for NoopDomainEventBus {
    async fn publish(&self, _stream: Arc<DomainEventStream>) -> Result<(), EventBusError> {
        Ok(())
    }
}
