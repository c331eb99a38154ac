//! The event store under faults: a decorator over the real in-memory store that adds
//! latency, outages, failed appends and rejection records, writes whose answer is lost, and
//! failed reads. It also logs every write that took effect, for the checks.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use wow_core::eventsourcing::AppendChanges;
use wow_core::eventsourcing::{
    EventStore, EventStoreDecorator, EventStoreError, EventStoreMethod, KeysToClaim,
    RejectionRecord,
};
use wow_core::unique_key::{KeyClaim, KeyHolder, UniqueKey};
use wow_core::{AggregateId, DomainEventStream};

use crate::chaos::{Chaos, FaultKind, Logged};

/// Wraps a store; every fault is drawn from the run's [`Chaos`].
#[derive(Debug)]
pub(crate) struct FaultyEventStore {
    inner: Arc<dyn EventStore>,
    chaos: Arc<Chaos>,
    /// The mutation of the mutation test: `record_rejection` answers `Ok` and records
    /// nothing, as a store that ignored SPEC ID-6 would.
    forget_rejections: bool,
}

impl FaultyEventStore {
    pub(crate) fn new(
        inner: Arc<dyn EventStore>,
        chaos: Arc<Chaos>,
        forget_rejections: bool,
    ) -> Self {
        Self {
            inner,
            chaos,
            forget_rejections,
        }
    }

    fn unavailable(what: &str) -> EventStoreError {
        EventStoreError::Unavailable(format!("simulated: {what}").into())
    }

    fn check_up(&self) -> Result<(), EventStoreError> {
        if self.chaos.store_down() {
            return Err(Self::unavailable("store outage"));
        }
        Ok(())
    }

    fn read_fault(&self, what: EventStoreMethod) -> Result<(), EventStoreError> {
        self.check_up()?;
        if self.chaos.inject(FaultKind::StoreReadFailed, || {
            format!("store {what:?} failed")
        }) {
            return Err(Self::unavailable("read failed"));
        }
        Ok(())
    }

    /// An append, with its key changes when it has any, under the campaign's faults: the
    /// failure before writing, and the answer lost after it.
    async fn faulty_append(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        self.reach().await?;
        let label = || {
            format!(
                "append {}@v{} request {}",
                stream.aggregate_id.id,
                stream.version,
                self.chaos.show(&stream.request_id)
            )
        };
        if self.chaos.inject(FaultKind::StoreAppendFailed, label) {
            return Err(Self::unavailable("append failed before writing"));
        }
        if changes.is_empty() {
            self.inner.append(stream).await?;
        } else {
            self.inner.append_with(stream, changes).await?;
        }
        self.chaos.log(
            &stream.aggregate_id.id,
            &stream.request_id,
            Logged::Appended {
                version: stream.version,
                command_id: stream.command_id.clone(),
            },
        );
        if self.chaos.inject(FaultKind::StoreAppendAckLost, label) {
            return Err(Self::unavailable("append written, answer lost"));
        }
        Ok(())
    }

    /// What every method this wrapper states meets before the inner store: the campaign's
    /// latency, then an outage's failure.
    async fn reach(&self) -> Result<(), EventStoreError> {
        self.latency().await;
        self.check_up()
    }

    async fn latency(&self) {
        if self.chaos.faults_on() {
            let latency = self.chaos.range(0, 30);
            tokio::time::sleep(Duration::from_millis(latency)).await;
        }
    }
}

/// Every read, the queries included, may fail as `read_fault` draws.
#[async_trait]
impl EventStoreDecorator for FaultyEventStore {
    fn inner(&self) -> &dyn EventStore {
        &*self.inner
    }

    /// Every read this wrapper does not state: the loads, the decision look-up, the scan,
    /// the feed and the queries.
    fn before(&self, method: EventStoreMethod) -> Result<(), EventStoreError> {
        self.read_fault(method)
    }

    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        self.faulty_append(stream, &AppendChanges::default()).await
    }

    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        self.faulty_append(stream, changes).await
    }

    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        self.reach().await?;
        self.inner.find_key(tenant_id, key).await
    }

    async fn claim_keys(&self, claim: KeysToClaim<'_>) -> Result<Vec<KeyClaim>, EventStoreError> {
        self.reach().await?;
        self.inner.claim_keys(claim).await
    }

    async fn record_rejection(
        &self,
        id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        self.reach().await?;
        let label = || {
            format!(
                "record rejection {} of {} request {}",
                rejection.error_code,
                id.id,
                self.chaos.show(request_id)
            )
        };
        if self.chaos.inject(FaultKind::RejectionWriteFailed, label) {
            return Err(Self::unavailable("rejection record failed before writing"));
        }
        if self.forget_rejections {
            // The mutation: answer as if recorded, record nothing.
            return Ok(());
        }
        self.inner
            .record_rejection(id, request_id, rejection)
            .await?;
        if self.chaos.inject(FaultKind::RejectionWriteAckLost, label) {
            return Err(Self::unavailable("rejection recorded, answer lost"));
        }
        Ok(())
    }

    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        self.reach().await?;
        self.inner.release_key(tenant_id, key).await
    }
}

#[cfg(test)]
mod tests {
    use wow_core::eventsourcing::{EventStoreMethod, RecordingEventStore};

    use super::*;

    fn calm(forget_rejections: bool) -> (Arc<RecordingEventStore>, FaultyEventStore) {
        let inner = Arc::new(RecordingEventStore::new());
        let chaos = Arc::new(Chaos::new(7));
        chaos.calm();
        let store = FaultyEventStore::new(inner.clone(), chaos, forget_rejections);
        (inner, store)
    }

    #[tokio::test]
    async fn every_method_of_the_faulty_store_reaches_the_inner_store_while_faults_are_off() {
        let (inner, store) = calm(false);
        assert_eq!(
            inner.trace(&store).await,
            EventStoreMethod::forwarded_trace()
        );
    }

    #[tokio::test]
    async fn the_mutation_keeps_only_rejection_records_from_the_inner_store() {
        let (inner, store) = calm(true);
        let mut expected = EventStoreMethod::forwarded_trace();
        expected.insert(EventStoreMethod::RecordRejection, Vec::new());
        assert_eq!(inner.trace(&store).await, expected);
    }

    #[tokio::test]
    async fn an_outage_keeps_every_method_from_the_inner_store_the_queries_included() {
        let (inner, store) = calm(false);
        store.chaos.store_down_for(60_000);
        let nothing: std::collections::BTreeMap<_, _> = EventStoreMethod::ALL
            .iter()
            .map(|&method| (method, Vec::new()))
            .collect();
        assert_eq!(inner.trace(&store).await, nothing);
    }
}
