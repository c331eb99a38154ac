//! Stores that record which of their methods were called: the inner store of the forwarding
//! tests, which prove that a decorator lets every method, queries included, reach the store it
//! wraps (see [`EventStoreDecorator`](crate::eventsourcing::EventStoreDecorator)).

use crate::eventsourcing::{
    AppendChanges, EventFeed, EventStore, EventStoreError, FeedEntry, GlobalPosition, History,
    InMemoryEventStore, InMemorySnapshotStore, KeyIndex, KeysToClaim, RequestLog, Snapshot,
    SnapshotStore, SnapshotStoreError, StreamQueries, TenantStreams,
};
use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use wow_model::aggregate_id::{AggregateId, NamedAggregate};
use wow_model::error_code::ErrorCode;
use wow_model::event::{DomainEvent, DomainEventStream};
use wow_model::eventsourcing::{RejectionRecord, RequestDecision, RequestRecord};
use wow_model::id::{new_id, now_millis};
use wow_model::query::{DocumentQuery, Filter};
use wow_model::unique_key::{KeyChange, KeyClaim, KeyHolder, UniqueKey};

/// Declares the enum of a store trait's methods, with `ALL` listing every variant in order.
macro_rules! methods {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every method of the trait, in the order the trait declares them.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];
        }
    };
}

/// The calls recorded since they were last taken.
#[derive(Debug)]
pub(crate) struct Calls<M>(Mutex<Vec<M>>);

impl<M> Default for Calls<M> {
    fn default() -> Self {
        Self(Mutex::new(Vec::new()))
    }
}

impl<M> Calls<M> {
    pub(crate) fn push(&self, method: M) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(method);
    }

    pub(crate) fn take(&self) -> Vec<M> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Declares [`EventStoreMethod`] from the table of [`event_store_methods!`]: one variant per
/// method of the narrow traits, in the table's order.
macro_rules! method_enum {
    ($($trait:ident { $($name:ident($($arg:ident: $ty:ty),*) -> $ok:ty => $variant:ident;)* })*) => {
        /// A method of [`EventStore`], by name: what a [`RecordingEventStore`] records.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum EventStoreMethod {
            $($(
                #[doc = concat!("[`", stringify!($trait), "::", stringify!($name), "`].")]
                $variant,
            )*)*
        }

        impl EventStoreMethod {
            /// Every method of the narrow traits, in the order of their table.
            pub const ALL: &'static [EventStoreMethod] = &[$($(EventStoreMethod::$variant,)*)*];
        }
    };
}

event_store_methods!(method_enum);

impl EventStoreMethod {
    /// The method of the inner store that a call of this one reaches through a decorator
    /// that does not state it: itself, except [`RequestLog::find_request`], which a decorator
    /// derives from its `find_decision` and so reaches the inner store as
    /// [`EventStoreMethod::FindDecision`].
    pub fn forwarded_as(self) -> Self {
        match self {
            Self::FindRequest => Self::FindDecision,
            other => other,
        }
    }

    /// What [`RecordingEventStore::trace`] answers through a decorator that changes nothing:
    /// each method reaches the inner store once, as [`forwarded_as`](Self::forwarded_as).
    /// A test of a wrapper that keeps a method from the inner store on purpose changes that
    /// method's entry.
    pub fn forwarded_trace() -> BTreeMap<Self, Vec<Self>> {
        Self::ALL
            .iter()
            .map(|&method| (method, vec![method.forwarded_as()]))
            .collect()
    }

    /// Calls this method once on `store`, with arguments an empty store accepts (a new
    /// aggregate of the context `recording`, a valid stream for `append`), and answers
    /// whether the call succeeded.
    pub async fn call(self, store: &dyn EventStore) -> Result<(), EventStoreError> {
        let named = NamedAggregate::new("recording", "probe");
        let id = AggregateId::new("recording", "probe", new_id(), "tenant");
        let request_id = new_id();
        match self {
            Self::Append => store.append(&probe_stream(&id, &request_id)).await,
            Self::AppendWith => {
                let claim = KeyChange::Claim(UniqueKey::new("probe", new_id()));
                store
                    .append_with(
                        &probe_stream(&id, &request_id),
                        &AppendChanges::keys(vec![claim]),
                    )
                    .await
            }
            Self::FindKey => store
                .find_key("tenant", &UniqueKey::new("probe", new_id()))
                .await
                .map(drop),
            Self::ClaimKeys => store
                .claim_keys(KeysToClaim {
                    aggregate_id: &id,
                    version: 1,
                    keys: &[UniqueKey::new("probe", new_id())],
                })
                .await
                .map(drop),
            Self::Load => store.load(&id, 1, 1).await.map(drop),
            Self::LoadByTime => store.load_by_time(&id, 0, now_millis()).await.map(drop),
            Self::Last => store.last(&id).await.map(drop),
            Self::FindRequest => store.find_request(&id, &request_id).await.map(drop),
            Self::FindDecision => store.find_decision(&id, &request_id).await.map(drop),
            Self::RecordRejection => {
                let rejection = RejectionRecord {
                    command_id: new_id(),
                    fingerprint: String::new(),
                    error_code: ErrorCode::NotFound,
                    error_msg: "a probe".to_owned(),
                    version: 0,
                    create_time: now_millis(),
                };
                store.record_rejection(&id, &request_id, &rejection).await
            }
            Self::ScanAggregateIds => store.scan_aggregate_ids(&named, None, 10).await.map(drop),
            Self::ReadFeed => store.read_feed(GlobalPosition::START, 10).await.map(drop),
            Self::QueryStreams => store
                .query_streams(
                    TenantStreams::new(&named, "tenant"),
                    &DocumentQuery::new(Filter::All, 10),
                )
                .await
                .map(drop),
            Self::CountStreams => store
                .count_streams(TenantStreams::new(&named, "tenant"), &Filter::All)
                .await
                .map(drop),
            Self::ReleaseKey => store
                .release_key("tenant", &UniqueKey::new("probe", new_id()))
                .await
                .map(drop),
        }
    }
}

fn probe_stream(id: &AggregateId, request_id: &str) -> DomainEventStream {
    DomainEventStream {
        id: new_id(),
        request_id: request_id.to_owned(),
        command_id: new_id(),
        aggregate_id: id.clone(),
        version: 1,
        create_time: now_millis(),
        fingerprint: String::new(),
        header: BTreeMap::new(),
        body: vec![DomainEvent {
            id: new_id(),
            name: "Probed".to_owned(),
            revision: "0.0.1".to_owned(),
            body: serde_json::json!({}),
        }],
    }
}

/// An [`InMemoryEventStore`] that records each of its methods that is called, in call order;
/// every call is then answered by the in-memory store.
#[derive(Debug, Default)]
pub struct RecordingEventStore {
    store: InMemoryEventStore,
    calls: Calls<EventStoreMethod>,
}

impl RecordingEventStore {
    /// An empty store that has recorded nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The methods called since the last take, in call order; the record is then empty.
    pub fn take_calls(&self) -> Vec<EventStoreMethod> {
        self.calls.take()
    }

    /// Calls each method of [`EventStore`] once on `outer`, a wrapper (or a stack of them)
    /// over this store, and answers, for each, the methods of this store the call reached, in
    /// order. The answers of the calls are not judged: a wrapper that fails a call without
    /// asking this store shows as a method that reached nothing. A wrapper that holds calls
    /// until told ([`GatedEventStore`](crate::eventsourcing::GatedEventStore)) must be let
    /// through first. Compare with [`EventStoreMethod::forwarded_trace`].
    pub async fn trace(
        &self,
        outer: &dyn EventStore,
    ) -> BTreeMap<EventStoreMethod, Vec<EventStoreMethod>> {
        self.calls.take();
        let mut traced = BTreeMap::new();
        for &method in EventStoreMethod::ALL {
            // Whether the call succeeded is the wrapper's business; what it reached is ours.
            let _answer = method.call(outer).await;
            traced.insert(method, self.calls.take());
        }
        traced
    }
}

/// Writes the recording store's impl of each narrow trait from the table of
/// [`event_store_methods!`]: each method records its [`EventStoreMethod`], then asks the
/// in-memory store.
macro_rules! recording_impls {
    ($($trait:ident { $($name:ident($($arg:ident: $ty:ty),*) -> $ok:ty => $variant:ident;)* })*) => {
        $(
            #[deny(clippy::missing_trait_methods)]
            #[async_trait]
            impl $trait for RecordingEventStore {
                $(
                    async fn $name(&self, $($arg: $ty),*) -> Result<$ok, EventStoreError> {
                        self.calls.push(EventStoreMethod::$variant);
                        self.store.$name($($arg),*).await
                    }
                )*
            }
        )*
    };
}

event_store_methods!(recording_impls);

methods! {
    /// A method of [`SnapshotStore`], by name: what a [`RecordingSnapshotStore`] records.
    SnapshotStoreMethod {
        /// [`SnapshotStore::load`].
        Load,
        /// [`SnapshotStore::version`].
        Version,
        /// [`SnapshotStore::save`].
        Save,
    }
}

impl SnapshotStoreMethod {
    /// What [`RecordingSnapshotStore::trace`] answers through a decorator that changes
    /// nothing: each method reaches the inner store once, as itself.
    pub fn forwarded_trace() -> BTreeMap<Self, Vec<Self>> {
        Self::ALL
            .iter()
            .map(|&method| (method, vec![method]))
            .collect()
    }

    /// Calls this method once on `store`, with arguments an empty store accepts, and
    /// answers whether the call succeeded.
    pub async fn call(self, store: &dyn SnapshotStore) -> Result<(), SnapshotStoreError> {
        let id = AggregateId::new("recording", "probe", new_id(), "tenant");
        match self {
            Self::Load => store.load(&id).await.map(drop),
            Self::Version => store.version(&id).await.map(drop),
            Self::Save => {
                let snapshot = Snapshot {
                    aggregate_id: id,
                    version: 1,
                    state: serde_json::json!({}),
                    snapshot_time: now_millis(),
                    state_version: 1,
                };
                store.save(&snapshot).await.map(drop)
            }
        }
    }
}

/// An [`InMemorySnapshotStore`] that records each of its methods that is called, in call
/// order; every call is then answered by the in-memory store.
#[derive(Debug, Default)]
pub struct RecordingSnapshotStore {
    store: InMemorySnapshotStore,
    calls: Calls<SnapshotStoreMethod>,
}

impl RecordingSnapshotStore {
    /// An empty store that has recorded nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The methods called since the last take, in call order; the record is then empty.
    pub fn take_calls(&self) -> Vec<SnapshotStoreMethod> {
        self.calls.take()
    }

    /// Calls each method of [`SnapshotStore`] once on `outer`, a wrapper over this store, and
    /// answers, for each, the methods of this store the call reached, in order; as
    /// [`RecordingEventStore::trace`] does.
    pub async fn trace(
        &self,
        outer: &dyn SnapshotStore,
    ) -> BTreeMap<SnapshotStoreMethod, Vec<SnapshotStoreMethod>> {
        self.calls.take();
        let mut traced = BTreeMap::new();
        for &method in SnapshotStoreMethod::ALL {
            // Whether the call succeeded is the wrapper's business; what it reached is ours.
            let _answer = method.call(outer).await;
            traced.insert(method, self.calls.take());
        }
        traced
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl SnapshotStore for RecordingSnapshotStore {
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        self.calls.push(SnapshotStoreMethod::Load);
        self.store.load(aggregate_id).await
    }

    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        self.calls.push(SnapshotStoreMethod::Version);
        self.store.version(aggregate_id).await
    }

    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        self.calls.push(SnapshotStoreMethod::Save);
        self.store.save(snapshot).await
    }
}
