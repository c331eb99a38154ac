//! The request-id check as the gateway and the processing node run it.

use std::sync::Arc;

use async_trait::async_trait;

use crate::idempotency::{IdempotencyCheckerProvider, RequestIdExistenceChecker};
use crate::metrics::PipelineMetrics;
use wow_core::eventsourcing::RequestDecision;
use wow_core::AggregateId;

/// What the request-id check concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestIdCheck {
    /// Go on: the id is new, or the store does not hold it. Not proof: the append decides
    /// (SPEC RQ-11).
    Fresh,
    /// The filter has seen the id and persisted history holds no decision on it: go on (for
    /// an aggregate's command the append decides). Not proof either: the filter may be
    /// wrong, so a void command is dropped only when the gateway's exact record also holds
    /// it (SPEC RQ-12). Only a checker backed by history answers this.
    MaybeSeen,
    /// Persisted history holds a decision on the id (SPEC ID-6): an appended stream or a
    /// recorded rejection. Answer it; never run the command again.
    Decided(RequestDecision),
}

/// Checks a request id before a command goes further (SPEC RQ-1, RQ-2).
#[async_trait]
pub trait RequestIdChecker: Send + Sync + std::fmt::Debug {
    /// Checks `request_id` within `aggregate_id`, reserving it when it is fresh.
    async fn check(&self, aggregate_id: &AggregateId, request_id: &str) -> RequestIdCheck;

    /// Gives back the reservation of a fresh `request_id` whose command was not sent
    /// (SPEC RQ-10).
    fn release(&self, aggregate_id: &AggregateId, request_id: &str);

    /// Whether this checker asks persisted history, so that it can answer
    /// [`RequestIdCheck::MaybeSeen`] (`false` for a gateway with no event store). A gateway
    /// whose checker does not keeps no record of its void commands and never drops their
    /// resends (SPEC RQ-12). Default `true`.
    fn is_authoritative(&self) -> bool {
        true
    }
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
        let checker = self.idempotency.checker_of(aggregate_id);
        if checker.check_and_insert(&filter_key(aggregate_id, request_id)) {
            return RequestIdCheck::Fresh;
        }
        self.metrics.record_bloom_hit();
        match self.existence.find(aggregate_id, request_id).await {
            Ok(Some(decision)) => {
                self.metrics.record_duplicate_by_store();
                RequestIdCheck::Decided(decision)
            }
            Ok(None) if self.existence.is_authoritative() => RequestIdCheck::MaybeSeen,
            Ok(None) => RequestIdCheck::Fresh,
            Err(error) => {
                tracing::warn!(%aggregate_id, request_id, %error, "request-id existence check failed; the append decides");
                RequestIdCheck::Fresh
            }
        }
    }

    fn release(&self, aggregate_id: &AggregateId, request_id: &str) {
        self.idempotency
            .checker_of(aggregate_id)
            .release(&filter_key(aggregate_id, request_id));
    }

    fn is_authoritative(&self) -> bool {
        self.existence.is_authoritative()
    }
}

/// What the Bloom filter of an aggregate type records for `request_id`: the aggregate's whole
/// identity (tenant, context, aggregate name, id) and the request id, so that a request id is
/// "maybe seen" only where it was used on the same aggregate (SPEC ID-3: two aggregates may use
/// one value; TN-1: one tenant's ids never make another's look seen). The separator is U+001F,
/// which neither a tenant id, a registered name nor an aggregate id the gateway accepts holds;
/// like any filter hit, a collision costs only a look-up in history, and a void command is
/// dropped only on the gateway's exact record, never on a filter hit (SPEC RQ-12).
fn filter_key(aggregate_id: &AggregateId, request_id: &str) -> String {
    let AggregateId {
        context_name,
        aggregate_name,
        id,
        tenant_id,
    } = aggregate_id;
    format!("{tenant_id}\u{1f}{context_name}\u{1f}{aggregate_name}\u{1f}{id}\u{1f}{request_id}")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use wow_core::eventsourcing::History;

    use super::*;
    use crate::idempotency::{
        BloomIdempotencyCheckerProvider, EventStoreRequestIdExistenceChecker, IdempotencyConfig,
    };
    use wow_core::event::{DomainEvent, DomainEventStream};
    use wow_core::eventsourcing::{EventStoreError, InMemoryEventStore};

    /// Counts how often persisted history is asked.
    #[derive(Debug)]
    struct Counting {
        inner: EventStoreRequestIdExistenceChecker,
        asked: AtomicUsize,
    }

    #[async_trait]
    impl RequestIdExistenceChecker for Counting {
        async fn find(
            &self,
            aggregate_id: &AggregateId,
            request_id: &str,
        ) -> Result<Option<RequestDecision>, EventStoreError> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            self.inner.find(aggregate_id, request_id).await
        }
    }

    #[tokio::test]
    async fn asks_history_only_after_the_filter_says_maybe_seen() {
        let store = Arc::new(InMemoryEventStore::new());
        let existence = Arc::new(Counting {
            inner: EventStoreRequestIdExistenceChecker::new(store.clone()),
            asked: AtomicUsize::new(0),
        });
        let checker = DefaultRequestIdChecker::new(
            Arc::new(BloomIdempotencyCheckerProvider::new(
                IdempotencyConfig::default(),
            )),
            existence.clone(),
        );
        let aggregate = AggregateId::new("bank", "account", "a-1", "t");
        assert_eq!(
            checker.check(&aggregate, "r-1").await,
            RequestIdCheck::Fresh
        );
        assert_eq!(
            existence.asked.load(Ordering::SeqCst),
            0,
            "a new id is let through at once"
        );

        // Maybe seen, but not in history (the first attempt never got appended): go on.
        assert_eq!(
            checker.check(&aggregate, "r-1").await,
            RequestIdCheck::MaybeSeen
        );
        assert_eq!(existence.asked.load(Ordering::SeqCst), 1);

        let stream = DomainEventStream {
            id: "s".into(),
            request_id: "r-1".into(),
            command_id: "c-1".into(),
            aggregate_id: aggregate.clone(),
            version: 1,
            create_time: 5,
            fingerprint: "f".into(),
            header: Default::default(),
            body: vec![DomainEvent {
                id: "e".into(),
                name: "Opened".into(),
                revision: "0.0.1".into(),
                body: serde_json::json!({}),
            }],
        };
        store.append(&stream).await.unwrap();
        match checker.check(&aggregate, "r-1").await {
            RequestIdCheck::Decided(RequestDecision::Appended(record)) => {
                assert_eq!((record.version, record.command_id.as_str()), (1, "c-1"))
            }
            other => panic!("expected a duplicate, got {other:?}"),
        }
        assert_eq!(existence.asked.load(Ordering::SeqCst), 2);
    }

    /// SPEC ID-3: the filter's key holds the whole aggregate identity, so a request id used on
    /// one aggregate is new on another of the same type, in another tenant, or of another
    /// id; history is not even asked.
    #[tokio::test]
    async fn a_request_id_used_on_one_aggregate_is_new_on_every_other() {
        let existence = Arc::new(Counting {
            inner: EventStoreRequestIdExistenceChecker::new(Arc::new(InMemoryEventStore::new())),
            asked: AtomicUsize::new(0),
        });
        let checker = DefaultRequestIdChecker::new(
            Arc::new(BloomIdempotencyCheckerProvider::new(
                IdempotencyConfig::default(),
            )),
            existence.clone(),
        );
        let n1 = AggregateId::new("bank", "account", "n1", "t");
        for aggregate in [
            n1.clone(),
            AggregateId::new("bank", "account", "n2", "t"),
            AggregateId::new("bank", "account", "n1", "t2"),
            AggregateId::new("bank", "account", "n1", wow_core::DEFAULT_TENANT_ID),
        ] {
            assert_eq!(
                checker.check(&aggregate, "same").await,
                RequestIdCheck::Fresh,
                "{aggregate}"
            );
        }
        assert_eq!(existence.asked.load(Ordering::SeqCst), 0);
        assert_eq!(
            checker.check(&n1, "same").await,
            RequestIdCheck::MaybeSeen,
            "the same aggregate's resend is a filter hit"
        );
        assert!(checker.is_authoritative());
    }
}
