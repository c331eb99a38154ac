//! One forwarding base for store decorators: a wrapper that adds one concern to a store
//! (faults, a gate, metrics, tenancy, upcasting) states only the methods whose behaviour it
//! changes, and every other method reaches the store it wraps.
//!
//! # The design
//!
//! A decorator implements [`EventStoreDecorator`] (or [`SnapshotStoreDecorator`], or
//! [`ViewStoreDecorator`](crate::view::ViewStoreDecorator)), not the store trait itself. The
//! decorator trait has the store trait's methods, each with a default body that forwards to
//! [`inner`](EventStoreDecorator::inner), and one blanket impl per store trait
//! (`impl<T: EventStoreDecorator> EventStore for T`) turns every decorator into a store. As in
//! tower, where a `Layer` wraps a `Service` in another `Service`, the wrapper is a store in its
//! own right, passed wherever an `Arc<dyn EventStore>` is taken.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use async_trait::async_trait;
//! use wow_core::eventsourcing::{EventStore, EventStoreDecorator, EventStoreError};
//! use wow_core::DomainEventStream;
//!
//! /// Counts appends; every other method reaches `inner` as it is.
//! #[derive(Debug)]
//! struct CountAppends {
//!     inner: Arc<dyn EventStore>,
//!     appends: AtomicUsize,
//! }
//!
//! #[async_trait]
//! impl EventStoreDecorator for CountAppends {
//!     fn inner(&self) -> &dyn EventStore {
//!         &*self.inner
//!     }
//!
//!     async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
//!         self.appends.fetch_add(1, Ordering::Relaxed);
//!         self.inner.append(stream).await
//!     }
//! }
//! ```
//!
//! Why this shape and not another:
//!
//! - **Nothing to drop.** A wrapper that writes out every method by hand drops the ones it
//!   forgets, and a forgotten method with a default body (`query_streams`, `count_streams`,
//!   [`ViewStore::declare_query_index`](crate::view::ViewStore::declare_query_index)) still
//!   compiles: it answers the trait's default instead of the inner store's. Here forwarding
//!   is written once, in the blanket impls, and a wrapper only ever adds to it.
//! - **A new method cannot slip past.** A method added to a store trait without a default
//!   body stops the blanket impl from building until it forwards the method. One added with
//!   a default body is refused by `#[deny(clippy::missing_trait_methods)]` on the blanket
//!   impls, which rejects an impl that leaves a provided method to the trait's default (the
//!   workspace's clippy runs with `-D warnings`). Forwarding it means declaring it in the
//!   decorator trait too, with a default that forwards. The recording stores carry the same
//!   lint, so they must record the new method under a new [`EventStoreMethod`] variant, and
//!   from then on [`RecordingEventStore::trace`] calls it through every wrapper under test.
//! - **The store traits stay as they are.** Backends (and stores outside this workspace) keep
//!   implementing [`EventStore`] directly, with its defaults. Splitting it into narrower
//!   traits would have changed every backend's impl for the same guarantee. Removing the
//!   defaults and adding a `forward_event_store!` macro would have made every leaf store
//!   state the queries it does not run, and hidden the forwarding from rustdoc and from the
//!   compiler's help.
//!
//! [`RequestLog::find_request`] is derived from `find_decision` by the store trait itself;
//! a decorator derives it the same way, from its own
//! [`find_decision`](EventStoreDecorator::find_decision), so a wrapper that changes the
//! decision look-up (makes it fail, say) changes `find_request` with it. Through a decorator
//! that states neither, `find_request` reaches the inner store as its `find_decision`.
//!
//! A method called on a concrete decorator with both its decorator trait and its store trait
//! in scope is ambiguous; call it through the store trait
//! (`History::append(&*wrapper, ..)`) or through an `Arc<dyn EventStore>`.

use crate::contracts::eventsourcing::EventFeed;
use crate::contracts::eventsourcing::History;
use crate::contracts::eventsourcing::KeyIndex;
use crate::contracts::eventsourcing::RequestLog;
use crate::contracts::eventsourcing::StreamQueries;
use async_trait::async_trait;

use crate::contracts::eventsourcing::AppendChanges;
use crate::contracts::eventsourcing::{
    EventStore, EventStoreError, FeedEntry, GlobalPosition, Snapshot, SnapshotStore,
    SnapshotStoreError,
};
#[cfg(doc)]
use crate::contracts::eventsourcing::{EventStoreMethod, RecordingEventStore};
use crate::model::aggregate_id::{AggregateId, NamedAggregate};
use crate::model::event::DomainEventStream;
use crate::model::eventsourcing::{RejectionRecord, RequestDecision, RequestRecord};
use crate::model::query::{DocumentQuery, Filter};
use crate::model::unique_key::{KeyClaim, KeyHolder, UniqueKey};

/// A wrapper that adds one concern to the [`EventStore`] it wraps: every type that implements
/// it is an [`EventStore`] whose methods are these.
///
/// Each method forwards to [`inner`](Self::inner) unless the wrapper states it, and then does
/// what the wrapper says; [`find_request`](Self::find_request) is derived from
/// [`find_decision`](Self::find_decision) as [`RequestLog::find_request`] is. Each method's
/// contract is that of the [`EventStore`] method of its name.
#[async_trait]
pub trait EventStoreDecorator: Send + Sync + std::fmt::Debug {
    /// The store this wrapper adds its concern to: every method it does not state is this
    /// store's.
    fn inner(&self) -> &dyn EventStore;

    /// [`History::append`]; by default the inner store's.
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        self.inner().append(stream).await
    }

    /// [`History::append_with`]; by default the inner store's.
    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        self.inner().append_with(stream, changes).await
    }

    /// [`KeyIndex::find_key`]; by default the inner store's.
    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        self.inner().find_key(tenant_id, key).await
    }

    /// [`KeyIndex::claim_keys`]; by default the inner store's.
    async fn claim_keys(
        &self,
        aggregate_id: &AggregateId,
        version: u64,
        keys: &[UniqueKey],
    ) -> Result<Vec<KeyClaim>, EventStoreError> {
        self.inner().claim_keys(aggregate_id, version, keys).await
    }

    /// [`History::load`]; by default the inner store's.
    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.inner().load(aggregate_id, head, tail).await
    }

    /// [`History::load_by_time`]; by default the inner store's.
    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.inner().load_by_time(aggregate_id, start, end).await
    }

    /// [`History::last`]; by default the inner store's.
    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError> {
        self.inner().last(aggregate_id).await
    }

    /// [`RequestLog::find_request`]; by default derived from this wrapper's
    /// [`find_decision`](Self::find_decision), as the store trait derives it.
    async fn find_request(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestRecord>, EventStoreError> {
        Ok(self
            .find_decision(aggregate_id, request_id)
            .await?
            .and_then(RequestDecision::appended))
    }

    /// [`RequestLog::find_decision`]; by default the inner store's.
    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        self.inner().find_decision(aggregate_id, request_id).await
    }

    /// [`RequestLog::record_rejection`]; by default the inner store's.
    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        self.inner()
            .record_rejection(aggregate_id, request_id, rejection)
            .await
    }

    /// [`History::scan_aggregate_ids`]; by default the inner store's.
    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        self.inner().scan_aggregate_ids(named, after, limit).await
    }

    /// [`EventFeed::read_feed`]; by default the inner store's.
    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError> {
        self.inner().read_feed(after, limit).await
    }

    /// [`StreamQueries::query_streams`]; by default the inner store's.
    async fn query_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        self.inner().query_streams(named, tenant_id, query).await
    }

    /// [`StreamQueries::count_streams`]; by default the inner store's.
    async fn count_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        self.inner().count_streams(named, tenant_id, filter).await
    }

    /// [`KeyIndex::release_key`]; by default the inner store's.
    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        self.inner().release_key(tenant_id, key).await
    }
}

/// Every decorator is an event store: each method is the decorator's own.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<T: EventStoreDecorator> History for T {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        EventStoreDecorator::append(self, stream).await
    }

    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        EventStoreDecorator::append_with(self, stream, changes).await
    }

    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        EventStoreDecorator::load(self, aggregate_id, head, tail).await
    }

    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        EventStoreDecorator::load_by_time(self, aggregate_id, start, end).await
    }

    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError> {
        EventStoreDecorator::last(self, aggregate_id).await
    }

    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        EventStoreDecorator::scan_aggregate_ids(self, named, after, limit).await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<T: EventStoreDecorator> RequestLog for T {
    async fn find_request(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestRecord>, EventStoreError> {
        EventStoreDecorator::find_request(self, aggregate_id, request_id).await
    }

    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        EventStoreDecorator::find_decision(self, aggregate_id, request_id).await
    }

    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        EventStoreDecorator::record_rejection(self, aggregate_id, request_id, rejection).await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<T: EventStoreDecorator> EventFeed for T {
    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError> {
        EventStoreDecorator::read_feed(self, after, limit).await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<T: EventStoreDecorator> StreamQueries for T {
    async fn query_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        EventStoreDecorator::query_streams(self, named, tenant_id, query).await
    }

    async fn count_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        EventStoreDecorator::count_streams(self, named, tenant_id, filter).await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<T: EventStoreDecorator> KeyIndex for T {
    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        EventStoreDecorator::find_key(self, tenant_id, key).await
    }

    async fn claim_keys(
        &self,
        aggregate_id: &AggregateId,
        version: u64,
        keys: &[UniqueKey],
    ) -> Result<Vec<KeyClaim>, EventStoreError> {
        EventStoreDecorator::claim_keys(self, aggregate_id, version, keys).await
    }

    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        EventStoreDecorator::release_key(self, tenant_id, key).await
    }
}

/// A wrapper that adds one concern to the [`SnapshotStore`] it wraps: every type that
/// implements it is a [`SnapshotStore`] whose methods are these, each forwarding to
/// [`inner`](Self::inner) unless the wrapper states it. Each method's contract is that of the
/// [`SnapshotStore`] method of its name.
#[async_trait]
pub trait SnapshotStoreDecorator: Send + Sync + std::fmt::Debug {
    /// The store this wrapper adds its concern to: every method it does not state is this
    /// store's.
    fn inner(&self) -> &dyn SnapshotStore;

    /// [`SnapshotStore::load`]; by default the inner store's.
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        self.inner().load(aggregate_id).await
    }

    /// [`SnapshotStore::version`]; by default the inner store's.
    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        self.inner().version(aggregate_id).await
    }

    /// [`SnapshotStore::save`]; by default the inner store's.
    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        self.inner().save(snapshot).await
    }
}

/// Every snapshot decorator is a snapshot store: each method is the decorator's own.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<T: SnapshotStoreDecorator> SnapshotStore for T {
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        SnapshotStoreDecorator::load(self, aggregate_id).await
    }

    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        SnapshotStoreDecorator::version(self, aggregate_id).await
    }

    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        SnapshotStoreDecorator::save(self, snapshot).await
    }
}

#[cfg(test)]
mod tests {
    use crate::contracts::eventsourcing::RequestLog;
    use crate::contracts::eventsourcing::StreamQueries;
    use std::sync::Arc;

    use super::*;
    use crate::contracts::eventsourcing::{
        EventStoreMethod, RecordingEventStore, RecordingSnapshotStore, SnapshotStoreMethod,
    };

    /// States nothing but its inner stores.
    #[derive(Debug, Default)]
    struct Plain {
        events: RecordingEventStore,
        snapshots: RecordingSnapshotStore,
    }

    impl EventStoreDecorator for Plain {
        fn inner(&self) -> &dyn EventStore {
            &self.events
        }
    }

    impl SnapshotStoreDecorator for Plain {
        fn inner(&self) -> &dyn SnapshotStore {
            &self.snapshots
        }
    }

    /// Changes the decision look-up only: it always fails.
    #[derive(Debug, Default)]
    struct DecisionsDown(RecordingEventStore);

    #[async_trait]
    impl EventStoreDecorator for DecisionsDown {
        fn inner(&self) -> &dyn EventStore {
            &self.0
        }

        async fn find_decision(
            &self,
            _: &AggregateId,
            _: &str,
        ) -> Result<Option<RequestDecision>, EventStoreError> {
            Err(EventStoreError::Unavailable("down".into()))
        }
    }

    #[tokio::test]
    async fn every_event_store_method_of_a_decorator_that_states_none_reaches_the_inner_store() {
        let plain = Plain::default();
        assert_eq!(
            plain.events.trace(&plain).await,
            EventStoreMethod::forwarded_trace()
        );
    }

    #[tokio::test]
    async fn every_snapshot_store_method_of_a_decorator_that_states_none_reaches_the_inner_store() {
        let plain = Plain::default();
        assert_eq!(
            plain.snapshots.trace(&plain).await,
            SnapshotStoreMethod::forwarded_trace()
        );
    }

    #[tokio::test]
    async fn a_decorator_stacked_on_another_reaches_the_innermost_store() {
        let plain = Arc::new(Plain::default());
        let outer = crate::contracts::eventsourcing::GatedEventStore::new(plain.clone());
        // One permit for each kind of append the trace makes.
        outer.release(2);
        assert_eq!(
            plain.events.trace(&outer).await,
            EventStoreMethod::forwarded_trace()
        );
    }

    #[tokio::test]
    async fn find_request_follows_the_decorators_own_decision_look_up() {
        let down = DecisionsDown::default();
        let mut expected = EventStoreMethod::forwarded_trace();
        expected.insert(EventStoreMethod::FindDecision, Vec::new());
        expected.insert(EventStoreMethod::FindRequest, Vec::new());
        assert_eq!(down.0.trace(&down).await, expected);
        let id = AggregateId::new("recording", "probe", "p-1", "tenant");
        assert!(RequestLog::find_request(&down, &id, "r-1").await.is_err());
    }

    #[tokio::test]
    async fn the_query_methods_answer_as_the_inner_store_does() {
        let plain = Plain::default();
        EventStoreMethod::Append
            .call(&plain)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let named = NamedAggregate::new("recording", "probe");
        let query = DocumentQuery::new(Filter::All, 10);
        let streams = StreamQueries::query_streams(&plain, &named, "tenant", &query)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(streams.len(), 1);
        let counted = StreamQueries::count_streams(&plain, &named, "tenant", &Filter::All)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counted, 1);
    }
}
