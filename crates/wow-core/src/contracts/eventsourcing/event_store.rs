//! The EventStore contract: the persistence boundary of SPEC ES-1.

use async_trait::async_trait;

use crate::contracts::eventsourcing::{EventStoreError, FeedEntry, GlobalPosition};
use crate::model::aggregate_id::{AggregateId, NamedAggregate};
use crate::model::deadline::{check_deadline_name, DeadlineChange};
use crate::model::event::DomainEventStream;
use crate::model::eventsourcing::{RejectionRecord, RequestDecision, RequestRecord};
use crate::model::query::{DocumentQuery, Filter};
use crate::model::unique_key::{check_unique_key, KeyChange, KeyClaim, KeyHolder, UniqueKey};

/// What a decision changes besides its aggregate's history, written in the same atomic write
/// as its stream: the unique keys it claims and releases (SPEC DM-1) and the deadlines it
/// schedules and cancels (SPEC DM-2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendChanges {
    /// Claims and releases of the aggregate's unique keys.
    pub keys: Vec<KeyChange>,
    /// Deadlines the aggregate schedules (a row per owner and name) and cancels.
    pub deadlines: Vec<DeadlineChange>,
}

impl AppendChanges {
    /// Key changes only.
    pub fn keys(keys: Vec<KeyChange>) -> Self {
        Self {
            keys,
            deadlines: Vec::new(),
        }
    }

    /// Deadline changes only.
    pub fn deadlines(deadlines: Vec<DeadlineChange>) -> Self {
        Self {
            keys: Vec::new(),
            deadlines,
        }
    }

    /// Whether it changes nothing (the append is then a plain [`EventStore::append`]).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.deadlines.is_empty()
    }
}

/// Checks the deadline changes every store's `append_with` shares: each row is the stream's
/// aggregate's, in its tenant, with a well-formed name and request id.
pub fn check_deadline_changes(
    stream: &DomainEventStream,
    deadlines: &[DeadlineChange],
) -> Result<(), EventStoreError> {
    for change in deadlines {
        check_deadline_name(change.name()).map_err(EventStoreError::IllegalArgument)?;
        if let DeadlineChange::Schedule(row) = change {
            if row.owner != stream.aggregate_id {
                return Err(EventStoreError::IllegalArgument(format!(
                    "deadline `{}` belongs to {}, not to the appending aggregate {}",
                    row.name, row.owner, stream.aggregate_id
                )));
            }
            if row.target.tenant_id != row.owner.tenant_id {
                return Err(EventStoreError::IllegalArgument(format!(
                    "deadline `{}` sends to another tenant",
                    row.name
                )));
            }
            crate::model::aggregate_id::check_request_id(&row.request_id).map_err(|why| {
                EventStoreError::IllegalArgument(format!(
                    "deadline `{}`'s request id {why}",
                    row.name
                ))
            })?;
        }
    }
    Ok(())
}

/// Checks the arguments every store's `append` shares; a backend calls it before writing.
pub fn check_appendable(stream: &DomainEventStream) -> Result<(), EventStoreError> {
    if stream.version == 0 {
        return Err(EventStoreError::IllegalArgument(
            "a stream's version starts at 1".to_owned(),
        ));
    }
    if stream.body.is_empty() {
        return Err(EventStoreError::IllegalArgument(
            "a stream holds at least one event".to_owned(),
        ));
    }
    if stream.request_id.is_empty() {
        return Err(EventStoreError::IllegalArgument(
            "a stream's request id must not be empty".to_owned(),
        ));
    }
    Ok(())
}

/// Checks the key changes every store's `append_with` shares (after
/// [`check_appendable`]); a backend calls it first.
pub fn check_key_changes(keys: &[KeyChange]) -> Result<(), EventStoreError> {
    for change in keys {
        let (KeyChange::Claim(key) | KeyChange::Release(key)) = change;
        check_unique_key(key).map_err(EventStoreError::IllegalArgument)?;
    }
    Ok(())
}

/// Checks the arguments every store's [`EventStore::claim_keys`] shares: a version from 1,
/// and keys [`check_unique_key`] accepts.
pub fn check_claimable(version: u64, keys: &[UniqueKey]) -> Result<(), EventStoreError> {
    if version == 0 {
        return Err(EventStoreError::IllegalArgument(
            "a key is claimed at a version from 1".to_owned(),
        ));
    }
    for key in keys {
        check_unique_key(key).map_err(EventStoreError::IllegalArgument)?;
    }
    Ok(())
}

/// Checks the arguments every store's `record_rejection` shares; a backend calls it first.
pub fn check_rejectable(request_id: &str) -> Result<(), EventStoreError> {
    if request_id.is_empty() {
        return Err(EventStoreError::IllegalArgument(
            "a rejection's request id must not be empty".to_owned(),
        ));
    }
    Ok(())
}

/// Checks an inclusive version range `head..=tail`.
pub fn check_version_range(head: u64, tail: u64) -> Result<(), EventStoreError> {
    if head == 0 {
        return Err(EventStoreError::IllegalArgument(
            "head version starts at 1".to_owned(),
        ));
    }
    if head > tail {
        return Err(EventStoreError::IllegalArgument(format!(
            "head version {head} is after tail version {tail}"
        )));
    }
    Ok(())
}

/// Checks an inclusive time range `start..=end`.
pub fn check_time_range(start: i64, end: i64) -> Result<(), EventStoreError> {
    if start > end {
        return Err(EventStoreError::IllegalArgument(format!(
            "start time {start} is after end time {end}"
        )));
    }
    Ok(())
}

/// The authoritative history of aggregates, one [`DomainEventStream`] per command.
///
/// Every backend passes the conformance suite in `wow-tck` (SPEC ES-2).
///
/// # Cancel safety
///
/// Reads are cancel safe. `append` is not: a future dropped before it completes may or may
/// not have appended its stream; [`EventStore::find_request`] tells which.
#[async_trait]
pub trait EventStore: Send + Sync + std::fmt::Debug {
    /// Appends `stream` as one unit, all its events or none.
    ///
    /// Inside one atomic write, checked in this order: the aggregate already holds the request
    /// id → [`EventStoreError::DuplicateRequestId`]; the version is taken and it is 1 →
    /// [`EventStoreError::DuplicateAggregateId`]; the version is taken →
    /// [`EventStoreError::EventVersionConflict`]. Version 0, no events or an empty request id
    /// are [`EventStoreError::IllegalArgument`]. Returns once the stream is durable.
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError>;

    /// Appends `stream` as [`EventStore::append`] does and, in the same atomic write, makes
    /// the changes its decision makes besides history: all or nothing.
    ///
    /// **Keys** (SPEC DM-1): each claim takes its key for the stream's aggregate in the
    /// aggregate's tenant, each release gives it up. Checked after the request id and the
    /// version, a claim of a key another aggregate of the tenant holds fails the whole append
    /// with [`EventStoreError::DuplicateKey`] naming the holder, and the store's own unique
    /// constraint decides between two concurrent claimants. A claim of a key the aggregate
    /// holds, or a release of one it does not, changes nothing. A key
    /// [`check_unique_key`](crate::model::unique_key::check_unique_key) refuses is
    /// [`EventStoreError::IllegalArgument`].
    ///
    /// **Reservations** (SPEC DM-1): a claim of a key with
    /// [`reserved_until`](UniqueKey::reserved_until) holds it until that time, judged by the
    /// store's clock (the process's in memory and on SQLite, the database's on PostgreSQL),
    /// and not after: a reservation that lapsed holds nothing, another aggregate's claim
    /// takes the key, and [`EventStore::find_key`] no longer finds it. A claim of a key the
    /// aggregate holds sets the reservation time to the claim's, so a claim without one
    /// confirms a reservation; once another aggregate took the lapsed key, that confirmation
    /// is refused `DuplicateKey` like any claim of a held key.
    ///
    /// **Deadlines** (SPEC DM-2): each schedule writes the aggregate's row of that name
    /// (replacing one there), each cancel deletes it; a row is then pending for
    /// [`DeadlineStore`](crate::deadline::DeadlineStore). A change
    /// [`check_deadline_changes`] refuses is `IllegalArgument`.
    ///
    /// With no changes it is [`EventStore::append`]; a store that keeps neither refuses any
    /// with `IllegalArgument`.
    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        if changes.is_empty() {
            return self.append(stream).await;
        }
        Err(EventStoreError::IllegalArgument(
            "this event store keeps no unique keys and no deadlines".to_owned(),
        ))
    }

    /// Who holds `key` in `tenant_id`, if an aggregate does (SPEC DM-1): the value alone is
    /// looked up (`key`'s reservation time is ignored), a reservation that lapsed by the
    /// store's clock is not held, and the holder's key carries its reservation time when it
    /// has one. One indexed read.
    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        let _ = (tenant_id, key);
        Err(EventStoreError::IllegalArgument(
            "this event store holds no unique keys".to_owned(),
        ))
    }

    /// Claims `keys` for `aggregate_id` at `version`, outside an append: a backfill of keys an
    /// aggregate type declared after its aggregates were made (SPEC DM-1). Each key on its
    /// own, in order: claimed when free or a lapsed reservation ([`KeyClaim::Claimed`], held
    /// from then on as by an append at `version`, with the key's reservation time); left
    /// alone when the aggregate holds it already ([`KeyClaim::Held`]); reported and left alone
    /// when another aggregate holds it ([`KeyClaim::Taken`], naming the holder). So running it
    /// twice changes nothing the second time. The store's unique constraint decides against a
    /// concurrent claimant, as in [`EventStore::append_with`].
    ///
    /// Version 0 or a key [`check_claimable`] refuses is [`EventStoreError::IllegalArgument`],
    /// as is every call on a store that keeps no keys (the default).
    async fn claim_keys(
        &self,
        aggregate_id: &AggregateId,
        version: u64,
        keys: &[UniqueKey],
    ) -> Result<Vec<KeyClaim>, EventStoreError> {
        let _ = (aggregate_id, version, keys);
        Err(EventStoreError::IllegalArgument(
            "this event store holds no unique keys".to_owned(),
        ))
    }

    /// The streams of `aggregate_id` with versions in `head..=tail`, in version order.
    ///
    /// `head` 0 or `head > tail` is [`EventStoreError::IllegalArgument`].
    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError>;

    /// The streams of `aggregate_id` made in `start..=end` (milliseconds since the Unix
    /// epoch), in version order. `start > end` is [`EventStoreError::IllegalArgument`].
    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError>;

    /// The stream with the highest version of `aggregate_id`, if it has any.
    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError>;

    /// The record of the stream that holds `request_id` within `aggregate_id`, if one was
    /// appended (SPEC ES-5, RQ-6). A recorded rejection is not a stream: see
    /// [`EventStore::find_decision`]. Another aggregate's use of the same value is not seen.
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

    /// The decision recorded for `request_id` within `aggregate_id` (SPEC ID-6, TO-1): its
    /// appended stream, its recorded rejection, or `None` when no decision was recorded (a
    /// resend with that request id is safe). One indexed read. A decision made under
    /// another tenant is not seen (SPEC TN-1): it answers `None`.
    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError>;

    /// Records `rejection` as the final decision on `request_id` within `aggregate_id`
    /// (SPEC ID-6), under the same unique key as appended streams: from then on an append
    /// of a stream with that request id fails with [`EventStoreError::DuplicateRequestId`].
    ///
    /// Fails with [`EventStoreError::DuplicateRequestId`] when the key already holds a
    /// decision (a stream, or an earlier rejection): the store's own constraint decides
    /// which came first, also when a rejection and an append race. Look the winner up with
    /// [`EventStore::find_decision`]. An empty request id is
    /// [`EventStoreError::IllegalArgument`].
    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError>;

    /// Up to `limit` aggregates of the type `named` (context and name), of every tenant, each
    /// once, in (tenant id, aggregate id) order, starting after `after` (from the first when
    /// `None`): pass the last aggregate of one page to get the next. Two tenants may both
    /// hold an id (SPEC TN-1); each is listed.
    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError>;

    /// Up to `limit` appended streams of every tenant and aggregate whose positions come
    /// after `after`, in [`GlobalPosition`] order: the store's global feed (docs/distributed.md).
    /// Pass the last entry's position to get the next page; [`GlobalPosition::START`] reads
    /// from the first stream. `limit` 0 reads nothing.
    ///
    /// The promise a reader resumes on: **no gap is filled in later.** When a read after `a`
    /// returns entries up to position `p`, they are all the streams the store will ever hold
    /// between `a` and `p`: no stream with a lower position appears after a reader has moved
    /// past it, so a reader that resumes after the last position it handled skips nothing.
    /// To keep it, a store whose positions can commit out of order (PostgreSQL) holds back
    /// streams behind a transaction still in flight: an acknowledged append appears once
    /// every transaction with an older transaction id, anywhere in that database server,
    /// has ended, so not always at once. Recorded rejections (SPEC
    /// ID-6) are decisions, not streams, and never appear. Each stream appears once, whole,
    /// as [`EventStore::load`] returns it.
    ///
    /// Fails with [`EventStoreError::Unavailable`] when the store cannot be reached and
    /// [`EventStoreError::Internal`] when a stored row cannot be read; nothing is consumed
    /// either way, so the same read may be retried.
    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError>;

    /// The appended streams of the aggregate type `named` in `tenant_id` that match
    /// `query.filter`, as Wow's event stream queries ask (`POST /{aggregate}/event/list`):
    /// each stream is the document of its JSON with Wow's field names (`id`, `aggregateId`,
    /// `tenantId`, `ownerId`, `spaceId`, `requestId`, `commandId`, `version`, `createTime`,
    /// `header`, `body` with the events as stored), in `query.sort` order and then by
    /// (aggregate id, version), `query.limit` of them from `query.offset`. The store runs the
    /// filter itself, with the semantics of [`Filter`]; another tenant's streams are never
    /// read, and rejections are not streams.
    ///
    /// Fails with [`EventStoreError::IllegalArgument`] when the store cannot run the query
    /// (the default: it runs none), and as [`EventStore::load`] does.
    async fn query_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let _ = (named, tenant_id, query);
        Err(EventStoreError::IllegalArgument(
            "this event store does not run queries".to_owned(),
        ))
    }

    /// How many appended streams of `named` in `tenant_id` match `filter`.
    ///
    /// Fails as [`query_streams`](Self::query_streams) does.
    async fn count_streams(
        &self,
        named: &NamedAggregate,
        tenant_id: &str,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        let _ = (named, tenant_id, filter);
        Err(EventStoreError::IllegalArgument(
            "this event store does not run queries".to_owned(),
        ))
    }

    /// An operator's release (SPEC DM-1): frees `key` in `tenant_id` whoever holds it, and
    /// answers the holder it had (`None`: the key was free, and nothing changed). One atomic
    /// write: a claim racing it either took the key before (and is what is released) or
    /// finds it free after.
    ///
    /// History is not touched: the holder's state still names the key, and no event says it
    /// was released. Until that aggregate gives the key up by a decision of its own, another
    /// aggregate may claim it; the holder's later releases of it change nothing, and a
    /// recover of the holder claims it again (refused `DuplicateKey` when another aggregate
    /// took it meanwhile). A key
    /// [`check_unique_key`](crate::model::unique_key::check_unique_key) refuses is
    /// [`EventStoreError::IllegalArgument`]; so is any key on a store that keeps none (the
    /// default).
    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        let _ = (tenant_id, key);
        Err(EventStoreError::IllegalArgument(
            "this event store holds no unique keys".to_owned(),
        ))
    }
}

/// A stream as the document Wow's event stream queries filter: its JSON, with `ownerId` and
/// `spaceId` from its header (empty when its command named none).
pub fn stream_document(stream: &DomainEventStream) -> serde_json::Value {
    let mut document = serde_json::to_value(stream).unwrap_or_default();
    if let Some(object) = document.as_object_mut() {
        object.remove("fingerprint");
        for (field, header) in [
            ("ownerId", crate::model::command::OWNER_ID_HEADER),
            ("spaceId", crate::model::command::SPACE_ID_HEADER),
        ] {
            let value = stream.header.get(header).cloned().unwrap_or_default();
            object.insert(field.to_owned(), serde_json::Value::String(value));
        }
    }
    document
}
