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
//! - **One table.** The event store's methods are listed once, by narrow trait, in
//!   `event_store_methods!` (`methods.rs`): the decorator trait, its blanket impl of each
//!   narrow trait, the recording store's impls and [`EventStoreMethod`] are all written from
//!   it. A method added to a narrow trait is one line there, and one probe call in
//!   [`EventStoreMethod::call`] (its `match` does not build without it).
//! - **A new method cannot slip past.** A method added to a narrow trait and not to the table
//!   stops the blanket impl from building (a required method) or is refused by
//!   `#[deny(clippy::missing_trait_methods)]` on the blanket impls (a provided one: the
//!   workspace's clippy runs with `-D warnings`). The recording store carries the same lint,
//!   and from the table's line on [`RecordingEventStore::trace`] calls the new method through
//!   every wrapper under test.
//! - **Leaf stores are written out.** Backends (and stores outside this workspace) implement
//!   the narrow traits directly, each in the module of its table, with the traits' defaults
//!   (a store that runs no queries states none). Only the forwarding is generated, where
//!   every method has the same body.
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

use crate::eventsourcing::{
    AppendChanges, EventFeed, EventStore, EventStoreError, FeedEntry, GlobalPosition, History,
    KeyIndex, KeysToClaim, RequestLog, Snapshot, SnapshotStore, SnapshotStoreError, StreamQueries,
    TenantStreams,
};
use async_trait::async_trait;

use crate::eventsourcing::EventStoreMethod;
#[cfg(doc)]
use crate::eventsourcing::RecordingEventStore;
use wow_model::aggregate_id::{AggregateId, NamedAggregate};
use wow_model::event::DomainEventStream;
use wow_model::eventsourcing::{RejectionRecord, RequestDecision, RequestRecord};
use wow_model::query::{DocumentQuery, Filter};
use wow_model::unique_key::{KeyClaim, KeyHolder, UniqueKey};

/// Writes the forwarding base from the table of [`event_store_methods!`]: the decorator trait,
/// each method forwarding to `inner` by default, and one blanket impl per narrow trait that
/// makes every decorator that store.
macro_rules! forwarding_base {
    ($($trait:ident { $($name:ident($($arg:ident: $ty:ty),*) -> $ok:ty => $variant:ident;)* })*) => {
        /// A wrapper that adds one concern to the [`EventStore`] it wraps: every type that
        /// implements it is an [`EventStore`] whose methods are these.
        ///
        /// Each method forwards to [`inner`](Self::inner) unless the wrapper states it, and
        /// then does what the wrapper says; [`find_request`](Self::find_request) is derived
        /// from [`find_decision`](Self::find_decision) as [`RequestLog::find_request`] is.
        /// Each method's contract is that of the narrow trait's method of its name.
        #[async_trait]
        pub trait EventStoreDecorator: Send + Sync + std::fmt::Debug {
            /// The store this wrapper adds its concern to: every method it does not state is
            /// this store's.
            fn inner(&self) -> &dyn EventStore;

            /// Runs before every method this wrapper does not state reaches the inner store,
            /// with the method called: an `Err` is that call's answer and the inner store is
            /// not reached. By default every call goes on. A wrapper that adds one check to
            /// many methods (a fault, a gate) states it here once.
            fn before(&self, method: EventStoreMethod) -> Result<(), EventStoreError> {
                let _ = method;
                Ok(())
            }

            $($(
                #[doc = concat!("[`", stringify!($trait), "::", stringify!($name), "`]; by default the inner store's.")]
                async fn $name(&self, $($arg: $ty),*) -> Result<$ok, EventStoreError> {
                    let this = self;
                    forwarded!(this, $variant, $name($($arg),*))
                }
            )*)*
        }

        $(
            #[doc = concat!("Every decorator is a [`", stringify!($trait), "`]: each method is the decorator's own.")]
            #[deny(clippy::missing_trait_methods)]
            #[async_trait]
            impl<T: EventStoreDecorator> $trait for T {
                $(
                    async fn $name(&self, $($arg: $ty),*) -> Result<$ok, EventStoreError> {
                        EventStoreDecorator::$name(self, $($arg),*).await
                    }
                )*
            }
        )*
    };
}

/// What a decorator's method does unless the wrapper states it: `find_request` is derived
/// from the wrapper's own `find_decision` (so a wrapper that changes the decision look-up
/// changes it too); every other method is the inner store's, after the wrapper's `before`.
macro_rules! forwarded {
    ($this:ident, $variant:ident, find_request($($arg:ident),*)) => {
        Ok($this
            .find_decision($($arg),*)
            .await?
            .and_then(RequestDecision::appended))
    };
    ($this:ident, $variant:ident, $name:ident($($arg:ident),*)) => {{
        $this.before(EventStoreMethod::$variant)?;
        $this.inner().$name($($arg),*).await
    }};
}

event_store_methods!(forwarding_base);

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
    use crate::eventsourcing::RequestLog;
    use crate::eventsourcing::StreamQueries;
    use std::sync::Arc;

    use super::*;
    use crate::eventsourcing::{
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
        let outer = crate::eventsourcing::GatedEventStore::new(plain.clone());
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
        let streams =
            StreamQueries::query_streams(&plain, TenantStreams::new(&named, "tenant"), &query)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(streams.len(), 1);
        let counted = StreamQueries::count_streams(
            &plain,
            TenantStreams::new(&named, "tenant"),
            &Filter::All,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counted, 1);
    }
}
