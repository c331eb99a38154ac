//! An event store that holds appends until released: for testing what callers see while a
//! store is slow (timeouts, outcome look-ups, abandoned waits).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Semaphore;

use crate::contracts::eventsourcing::{EventStore, EventStoreError, FeedEntry, GlobalPosition};
use crate::model::aggregate_id::{AggregateId, NamedAggregate};
use crate::model::event::DomainEventStream;
use crate::model::eventsourcing::{RejectionRecord, RequestDecision};

/// Wraps a store; every append waits for a permit from [`GatedEventStore::release`] before it
/// reaches the inner store. Reads pass straight through.
#[derive(Debug)]
pub struct GatedEventStore {
    inner: Arc<dyn EventStore>,
    gate: Semaphore,
}

impl GatedEventStore {
    /// A gate, closed, in front of `inner`.
    pub fn new(inner: Arc<dyn EventStore>) -> Self {
        Self {
            inner,
            gate: Semaphore::new(0),
        }
    }

    /// Lets `appends` more appends through.
    pub fn release(&self, appends: usize) {
        self.gate.add_permits(appends);
    }
}

#[async_trait]
impl EventStore for GatedEventStore {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        let permit = self
            .gate
            .acquire()
            .await
            .map_err(|e| EventStoreError::Unavailable(Box::new(e)))?;
        permit.forget();
        self.inner.append(stream).await
    }

    async fn load(
        &self,
        id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.inner.load(id, head, tail).await
    }

    async fn load_by_time(
        &self,
        id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.inner.load_by_time(id, start, end).await
    }

    async fn last(&self, id: &AggregateId) -> Result<Option<DomainEventStream>, EventStoreError> {
        self.inner.last(id).await
    }

    async fn find_decision(
        &self,
        id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        self.inner.find_decision(id, request_id).await
    }

    async fn record_rejection(
        &self,
        id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        self.inner.record_rejection(id, request_id, rejection).await
    }

    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        self.inner.scan_aggregate_ids(named, after, limit).await
    }

    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError> {
        self.inner.read_feed(after, limit).await
    }

    async fn query_streams(
        &self,
        named: &crate::model::aggregate_id::NamedAggregate,
        tenant_id: &str,
        query: &crate::model::query::DocumentQuery,
    ) -> Result<Vec<crate::model::event::DomainEventStream>, EventStoreError> {
        self.inner.query_streams(named, tenant_id, query).await
    }

    async fn count_streams(
        &self,
        named: &crate::model::aggregate_id::NamedAggregate,
        tenant_id: &str,
        filter: &crate::model::query::Filter,
    ) -> Result<u64, EventStoreError> {
        self.inner.count_streams(named, tenant_id, filter).await
    }
}
