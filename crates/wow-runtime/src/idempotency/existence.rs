//! The authoritative half of the request-id check: does persisted history hold the id?

use std::sync::Arc;

use async_trait::async_trait;

use wow_core::eventsourcing::RequestDecision;
use wow_core::eventsourcing::{EventStore, EventStoreError};
use wow_core::AggregateId;

/// Looks a request id up in persisted history (SPEC RQ-1), after the Bloom filter said
/// "maybe seen".
#[async_trait]
pub trait RequestIdExistenceChecker: Send + Sync + std::fmt::Debug {
    /// The decision recorded on `request_id` in `aggregate_id`'s history (an appended
    /// stream or a recorded rejection, SPEC ID-6), or `None` when there is none.
    async fn find(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError>;

    /// Whether this checker asks persisted history (`false` for a node without an event
    /// store). A void command's resend is dropped only where the answer is authoritative,
    /// and then only on the gateway's exact record of it (SPEC RQ-12).
    fn is_authoritative(&self) -> bool {
        true
    }
}

/// Answers "absent" for every request id: for a node without an event store, such as a
/// gateway-only service (SPEC RQ-3). The processing node then decides.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopRequestIdExistenceChecker;

#[async_trait]
impl RequestIdExistenceChecker for NoopRequestIdExistenceChecker {
    async fn find(
        &self,
        _aggregate_id: &AggregateId,
        _request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        Ok(None)
    }

    fn is_authoritative(&self) -> bool {
        false
    }
}

/// Asks an [`EventStore`] (SPEC RQ-6: by its request-id index where it has one).
#[derive(Debug, Clone)]
pub struct EventStoreRequestIdExistenceChecker {
    store: Arc<dyn EventStore>,
}

impl EventStoreRequestIdExistenceChecker {
    /// A checker over `store`.
    pub fn new(store: Arc<dyn EventStore>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl RequestIdExistenceChecker for EventStoreRequestIdExistenceChecker {
    async fn find(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        self.store.find_decision(aggregate_id, request_id).await
    }
}
