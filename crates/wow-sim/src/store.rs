//! The event store under faults: a decorator over the real in-memory store that adds
//! latency, outages, failed appends and rejection records, writes whose answer is lost, and
//! failed reads. It also logs every write that took effect, for the checks.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use wow_core::eventsourcing::{EventStore, EventStoreError, RejectionRecord, RequestDecision};
use wow_core::{AggregateId, DomainEventStream, NamedAggregate};

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

    fn read_fault(&self, what: &str) -> Result<(), EventStoreError> {
        self.check_up()?;
        if self.chaos.inject(FaultKind::StoreReadFailed, || {
            format!("store {what} failed")
        }) {
            return Err(Self::unavailable("read failed"));
        }
        Ok(())
    }

    async fn latency(&self) {
        if self.chaos.faults_on() {
            let latency = self.chaos.range(0, 30);
            tokio::time::sleep(Duration::from_millis(latency)).await;
        }
    }
}

#[async_trait]
impl EventStore for FaultyEventStore {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        self.latency().await;
        self.check_up()?;
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
        self.inner.append(stream).await?;
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

    async fn load(
        &self,
        id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.read_fault("load")?;
        self.inner.load(id, head, tail).await
    }

    async fn load_by_time(
        &self,
        id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.read_fault("load_by_time")?;
        self.inner.load_by_time(id, start, end).await
    }

    async fn last(&self, id: &AggregateId) -> Result<Option<DomainEventStream>, EventStoreError> {
        self.read_fault("last")?;
        self.inner.last(id).await
    }

    async fn find_decision(
        &self,
        id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        self.read_fault("find_decision")?;
        self.inner.find_decision(id, request_id).await
    }

    async fn record_rejection(
        &self,
        id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        self.latency().await;
        self.check_up()?;
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

    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        self.read_fault("scan")?;
        self.inner.scan_aggregate_ids(named, after, limit).await
    }

    async fn read_feed(
        &self,
        after: wow_core::eventsourcing::GlobalPosition,
        limit: usize,
    ) -> Result<Vec<wow_core::eventsourcing::FeedEntry>, wow_core::eventsourcing::EventStoreError>
    {
        self.read_fault("feed")?;
        self.inner.read_feed(after, limit).await
    }
}
