//! The request-id check as the gateway and the processing node run it.

use std::sync::Arc;

use async_trait::async_trait;

use super::{IdempotencyCheckerProvider, RequestIdExistenceChecker};
use crate::eventsourcing::RequestRecord;
use crate::metrics::PipelineMetrics;
use crate::AggregateId;

/// What the request-id check concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestIdCheck {
    /// Go on: the id is new, or the store does not hold it. Not proof: the append decides
    /// (SPEC RQ-11).
    Fresh,
    /// Persisted history holds the id: the intent was recorded before, in this stream.
    Duplicate(RequestRecord),
}

/// Checks a request id before a command goes further (SPEC RQ-1, RQ-2).
#[async_trait]
pub trait RequestIdChecker: Send + Sync + std::fmt::Debug {
    /// Checks `request_id` within `aggregate_id`, reserving it when it is fresh.
    async fn check(&self, aggregate_id: &AggregateId, request_id: &str) -> RequestIdCheck;

    /// Gives back the reservation of a fresh `request_id` whose command was not sent
    /// (SPEC RQ-10).
    fn release(&self, aggregate_id: &AggregateId, request_id: &str);
}

/// First the fast per-aggregate-type filter; on "maybe seen", persisted history decides
/// (SPEC RQ-1). When history cannot be asked the id is let through: the append is the
/// arbiter, and it will reject a duplicate.
#[derive(Debug, Clone)]
pub struct DefaultRequestIdChecker {
    idempotency: Arc<dyn IdempotencyCheckerProvider>,
    existence: Arc<dyn RequestIdExistenceChecker>,
    metrics: Arc<PipelineMetrics>,
}

impl DefaultRequestIdChecker {
    /// A checker of `idempotency`'s filters backed by `existence`.
    pub fn new(
        idempotency: Arc<dyn IdempotencyCheckerProvider>,
        existence: Arc<dyn RequestIdExistenceChecker>,
    ) -> Self {
        Self {
            idempotency,
            existence,
            metrics: Arc::new(PipelineMetrics::default()),
        }
    }

    /// Counts Bloom hits and store confirmations in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<PipelineMetrics>) -> Self {
        self.metrics = metrics;
        self
    }
}

#[async_trait]
impl RequestIdChecker for DefaultRequestIdChecker {
    async fn check(&self, aggregate_id: &AggregateId, request_id: &str) -> RequestIdCheck {
        let checker = self.idempotency.checker(&aggregate_id.named_aggregate());
        if checker.check_and_insert(request_id) {
            return RequestIdCheck::Fresh;
        }
        self.metrics.record_bloom_hit();
        match self.existence.find(aggregate_id, request_id).await {
            Ok(Some(record)) => {
                self.metrics.record_duplicate_by_store();
                RequestIdCheck::Duplicate(record)
            }
            Ok(None) => RequestIdCheck::Fresh,
            Err(error) => {
                tracing::warn!(%aggregate_id, request_id, %error, "request-id existence check failed; the append decides");
                RequestIdCheck::Fresh
            }
        }
    }

    fn release(&self, aggregate_id: &AggregateId, request_id: &str) {
        self.idempotency
            .checker(&aggregate_id.named_aggregate())
            .release(request_id);
    }
}
