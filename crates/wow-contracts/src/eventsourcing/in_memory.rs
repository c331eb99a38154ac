//! In-memory stores: the reference implementations of the store contracts.
//!
//! They keep nothing across restarts and prove nothing about durability (SPEC ES-2); they
//! exist for tests, examples and the `memory://` store. Each check and its write happen under
//! one lock, with no await in between, so they are honest about concurrency.

use crate::eventsourcing::{
    check_appendable, check_conditions, check_deadline_changes, check_key_changes,
    check_rejectable, check_time_range, check_version_range, stream_document, AppendChanges,
    EventFeed, EventStoreError, FeedEntry, GlobalPosition, History, KeyIndex, KeysToClaim,
    RequestLog, Snapshot, SnapshotStore, SnapshotStoreError, StreamQueries, TenantStreams,
};
use std::collections::BTreeMap;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use foldhash::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::deadline::{DeadlineStore, DeadlineTable};
use wow_model::aggregate_id::{AggregateId, NamedAggregate};
use wow_model::deadline::{
    DeadlineBacklog, DueQuery, FailedFiring, PartitionFilter, PendingDeadline, ScheduledCommand,
};
use wow_model::event::DomainEventStream;
use wow_model::eventsourcing::RequestRecord;
use wow_model::eventsourcing::{RejectionRecord, RequestDecision};
use wow_model::id::{Clock, SystemClock};
use wow_model::query::{matches, order, DocumentQuery, Filter};
use wow_model::unique_key::{check_unique_key, KeyChange, KeyClaim, KeyHolder, UniqueKey};

const SHARDS: usize = 64;

/// Makes `stream`'s key changes in `held` at `now` (the store's clock), all or none: every
/// claim is checked before any change is made. `held` is keyed by the value alone
/// ([`UniqueKey::confirmed`]); a holder whose reservation lapsed at `now` holds nothing.
fn change_keys(
    held: &mut HashMap<(String, UniqueKey), KeyHolder>,
    stream: &DomainEventStream,
    keys: &[KeyChange],
    now: i64,
) -> Result<(), EventStoreError> {
    let tenant = &stream.aggregate_id.tenant_id;
    for change in keys {
        if let KeyChange::Claim(key) = change {
            if let Some(holder) = held.get(&(tenant.clone(), key.confirmed())) {
                if holder.aggregate_id != stream.aggregate_id && !holder.key.lapsed_at(now) {
                    return Err(EventStoreError::key_taken(stream, holder.clone()));
                }
            }
        }
    }
    for change in keys {
        match change {
            KeyChange::Release(key) => {
                let slot = (tenant.clone(), key.confirmed());
                if held
                    .get(&slot)
                    .is_some_and(|holder| holder.aggregate_id == stream.aggregate_id)
                {
                    held.remove(&slot);
                }
            }
            KeyChange::Claim(key) => {
                let slot = held
                    .entry((tenant.clone(), key.confirmed()))
                    .or_insert_with(|| KeyHolder {
                        key: key.clone(),
                        aggregate_id: stream.aggregate_id.clone(),
                        version: stream.version,
                    });
                if slot.aggregate_id != stream.aggregate_id {
                    // A lapsed reservation (checked above): the key is taken over.
                    slot.aggregate_id = stream.aggregate_id.clone();
                    slot.version = stream.version;
                }
                slot.key.reserved_until = key.reserved_until;
            }
        }
    }
    Ok(())
}

/// [`KeyIndex::claim_keys`] on `held` at `now`: each key claimed when free (or a lapsed
/// reservation), left alone when `aggregate_id` holds it, reported when another holds it.
fn claim_free_keys(
    held: &mut HashMap<(String, UniqueKey), KeyHolder>,
    aggregate_id: &AggregateId,
    version: u64,
    keys: &[UniqueKey],
    now: i64,
) -> Vec<KeyClaim> {
    keys.iter()
        .map(|key| {
            let slot = (aggregate_id.tenant_id.clone(), key.confirmed());
            match held.get(&slot) {
                Some(holder) if holder.aggregate_id == *aggregate_id => KeyClaim::Held,
                Some(holder) if !holder.key.lapsed_at(now) => KeyClaim::Taken(holder.clone()),
                _ => {
                    held.insert(
                        slot,
                        KeyHolder {
                            key: key.clone(),
                            aggregate_id: aggregate_id.clone(),
                            version,
                        },
                    );
                    KeyClaim::Claimed
                }
            }
        })
        .collect()
}

/// What one request id of an aggregate came to: one key, one decision (SPEC ID-6).
#[derive(Debug)]
enum Decided {
    /// Appended as the stream at this version.
    Appended(u64),
    /// Rejected, for good, in this tenant's name.
    Rejected {
        tenant_id: String,
        record: Box<RejectionRecord>,
    },
}

/// Streams of one aggregate, keyed by version, with its request-id index (streams and
/// rejections share it).
#[derive(Debug, Default)]
struct AggregateHistory {
    streams: BTreeMap<u64, Arc<DomainEventStream>>,
    requests: HashMap<String, Decided>,
}

/// Tenant, aggregate name, aggregate id: the tenant leads, so each tenant's ids are its own
/// namespace (SPEC TN-1).
type Key = (String, String, String);

fn key(aggregate_id: &AggregateId) -> Key {
    (
        aggregate_id.tenant_id.clone(),
        aggregate_id.aggregate_name.clone(),
        aggregate_id.id.clone(),
    )
}

/// An [`EventStore`](crate::eventsourcing::EventStore) in memory, sharded by aggregate so that different aggregates append in
/// parallel.
///
/// The global feed is one list of the appended streams, in append order: the stream at index
/// `i` has the position `(0, i + 1)`. An append pushes to it while it still holds its
/// aggregate's shard (lock order: shard, then feed), so a stream is in the feed exactly when
/// it is in its aggregate's history, and no position is taken before its stream is readable.
#[derive(Debug)]
pub struct InMemoryEventStore {
    shards: Vec<Mutex<HashMap<Key, AggregateHistory>>>,
    feed: Mutex<Vec<Arc<DomainEventStream>>>,
    keys: Mutex<HashMap<(String, UniqueKey), KeyHolder>>,
    deadlines: Mutex<DeadlineTable>,
    hasher: RandomState,
    clock: Arc<dyn Clock>,
}

impl Default for InMemoryEventStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryEventStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            feed: Mutex::new(Vec::new()),
            keys: Mutex::new(HashMap::default()),
            deadlines: Mutex::new(DeadlineTable::default()),
            hasher: RandomState::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Judges its deadlines due by `clock` (the store's clock, SPEC DM-6). Default: the
    /// system clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    fn shard(&self, key: &Key) -> MutexGuard<'_, HashMap<Key, AggregateHistory>> {
        self.lock_shard(self.shard_index(key))
    }

    fn shard_index(&self, key: &Key) -> usize {
        (self.hasher.hash_one(key) % SHARDS as u64) as usize
    }

    fn lock_shard(&self, index: usize) -> MutexGuard<'_, HashMap<Key, AggregateHistory>> {
        // A poisoned shard only means a panic elsewhere mid-read; every write below completes
        // its check and insert without panicking, so the data stays consistent.
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn feed(&self) -> MutexGuard<'_, Vec<Arc<DomainEventStream>>> {
        // As for a shard: a push cannot panic halfway, so a poisoned feed is still whole.
        self.feed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn keys(&self) -> MutexGuard<'_, HashMap<(String, UniqueKey), KeyHolder>> {
        // As for a shard: every change below is checked whole before any is made.
        self.keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn deadlines(&self) -> MutexGuard<'_, DeadlineTable> {
        // As for a shard: each change to the table completes without panicking.
        self.deadlines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn select(
        &self,
        aggregate_id: &AggregateId,
        keep: impl Fn(&DomainEventStream) -> bool,
    ) -> Vec<DomainEventStream> {
        let key = key(aggregate_id);
        let shard = self.shard(&key);
        shard
            .get(&key)
            .map(|history| {
                history
                    .streams
                    .values()
                    .filter(|s| keep(s))
                    .map(|s| DomainEventStream::clone(s))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl InMemoryEventStore {
    /// Every stream of `streams` (an aggregate type in a tenant), in no particular order.
    fn streams_of(&self, streams: TenantStreams<'_>) -> Vec<DomainEventStream> {
        let TenantStreams { named, tenant_id } = streams;
        self.shards
            .iter()
            .flat_map(|shard| {
                let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
                shard
                    .iter()
                    .filter(|((tenant, name, _), _)| {
                        tenant == tenant_id && *name == named.aggregate_name
                    })
                    .flat_map(|(_, history)| {
                        history
                            .streams
                            .values()
                            .map(|s| DomainEventStream::clone(s))
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The first (tenant, id) of the aggregate named `from` that also has history under `to`.
    pub(crate) fn rename_conflict(&self, from: &str, to: &str) -> Option<(String, String)> {
        let mut held = std::collections::HashSet::new();
        let mut renamed = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            for (tenant, name, id) in shard.keys() {
                if name == to {
                    held.insert((tenant.clone(), id.clone()));
                } else if name == from {
                    renamed.push((tenant.clone(), id.clone()));
                }
            }
        }
        renamed.into_iter().find(|key| held.contains(key))
    }

    /// Re-keys the history (streams and rejections) of the aggregate named `from` to `to`, in
    /// the aggregates' histories and in the feed (same positions); the number of rows.
    pub(crate) fn rename(&self, from: &str, to: &str, dry_run: bool) -> u64 {
        // Every shard, in index order, then the keys, then the feed: the order an append
        // takes its one shard, the keys and the feed in, so no append sees half a rename.
        let mut shards: Vec<_> = self
            .shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(|p| p.into_inner()))
            .collect();
        let mut keys = self.keys();
        let mut deadlines = self.deadlines();
        let mut feed = self.feed();
        if !dry_run {
            for holder in keys.values_mut() {
                if holder.aggregate_id.aggregate_name == from {
                    holder.aggregate_id.aggregate_name = to.to_owned();
                }
            }
            deadlines.rename(from, to);
        }
        let moved: Vec<(Key, AggregateHistory)> = shards
            .iter_mut()
            .flat_map(|shard| {
                let keys: Vec<Key> = shard.keys().filter(|k| k.1 == from).cloned().collect();
                keys.into_iter()
                    .filter_map(|k| shard.remove(&k).map(|history| (k, history)))
                    .collect::<Vec<_>>()
            })
            .collect();
        let rows = moved
            .iter()
            .map(|(_, history)| history.requests.len() as u64)
            .sum();
        let mut renamed_streams = std::collections::HashMap::new();
        for ((tenant, _, id), mut history) in moved {
            if !dry_run {
                for stream in history.streams.values_mut() {
                    let mut today = DomainEventStream::clone(stream);
                    today.aggregate_id.aggregate_name = to.to_owned();
                    let today = Arc::new(today);
                    renamed_streams.insert(stream.id.clone(), today.clone());
                    *stream = today;
                }
            }
            let name = if dry_run { from } else { to };
            let key = (tenant, name.to_owned(), id);
            let index = (self.hasher.hash_one(&key) % SHARDS as u64) as usize;
            shards[index].insert(key, history);
        }
        for stream in feed.iter_mut() {
            if let Some(today) = renamed_streams.get(&stream.id) {
                *stream = today.clone();
            }
        }
        rows
    }
}

#[async_trait]
impl History for InMemoryEventStore {
    async fn append(&self, stream: &DomainEventStream) -> Result<(), EventStoreError> {
        self.append_with(stream, &AppendChanges::default()).await
    }

    async fn append_with(
        &self,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Result<(), EventStoreError> {
        check_appendable(stream)?;
        check_key_changes(&changes.keys)?;
        check_deadline_changes(stream, &changes.deadlines)?;
        check_conditions(stream, &changes.conditions)?;
        let own_key = key(&stream.aggregate_id);
        let own = self.shard_index(&own_key);
        // SPEC DM-5: the shards of the aggregates read are held with the appending one's,
        // all in index order (as every holder of several shards takes them), so that none
        // of them moves between the check and the append.
        let mut read = Vec::new();
        for condition in &changes.conditions {
            let index = self.shard_index(&key(&condition.aggregate_id));
            if index != own && !read.contains(&index) {
                read.push(index);
            }
        }
        read.sort_unstable();
        let (before, after): (Vec<usize>, Vec<usize>) = read.into_iter().partition(|i| *i < own);
        let before: Vec<_> = before
            .into_iter()
            .map(|i| (i, self.lock_shard(i)))
            .collect();
        let mut shard = self.lock_shard(own);
        let after: Vec<_> = after.into_iter().map(|i| (i, self.lock_shard(i))).collect();
        if let Some(history) = shard.get(&own_key) {
            if history.requests.contains_key(&stream.request_id) {
                return Err(EventStoreError::duplicate_request_id(stream));
            }
            if history.streams.contains_key(&stream.version) {
                return Err(EventStoreError::version_taken(stream));
            }
        }
        let head = |shard: &HashMap<Key, AggregateHistory>, read: &Key| {
            shard
                .get(read)
                .and_then(|history| history.streams.keys().next_back().copied())
                .unwrap_or(0)
        };
        for condition in &changes.conditions {
            let read = key(&condition.aggregate_id);
            let index = self.shard_index(&read);
            let actual = if index == own {
                head(&shard, &read)
            } else {
                before
                    .iter()
                    .chain(after.iter())
                    .find(|(i, _)| *i == index)
                    .map_or(0, |(_, held)| head(held, &read))
            };
            if actual != condition.version {
                return Err(EventStoreError::condition_failed(stream, condition, actual));
            }
        }
        let history = shard.entry(own_key).or_default();
        let keys = &changes.keys;
        if !keys.is_empty() {
            // Lock order: shard, keys, deadlines, feed.
            change_keys(&mut self.keys(), stream, keys, self.clock.now_millis())?;
        }
        if !changes.deadlines.is_empty() {
            self.deadlines()
                .change(&stream.aggregate_id, &changes.deadlines);
        }
        history
            .requests
            .insert(stream.request_id.clone(), Decided::Appended(stream.version));
        let stored = Arc::new(stream.clone());
        history.streams.insert(stream.version, stored.clone());
        self.feed().push(stored);
        // The shards read are held until the stream is in the feed: an append of an
        // aggregate read, waiting on its shard, lands in the feed after this one.
        drop((before, after));
        Ok(())
    }

    async fn load(
        &self,
        aggregate_id: &AggregateId,
        head: u64,
        tail: u64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        check_version_range(head, tail)?;
        Ok(self.select(aggregate_id, |s| (head..=tail).contains(&s.version)))
    }

    async fn load_by_time(
        &self,
        aggregate_id: &AggregateId,
        start: i64,
        end: i64,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        check_time_range(start, end)?;
        Ok(self.select(aggregate_id, |s| (start..=end).contains(&s.create_time)))
    }

    async fn last(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<DomainEventStream>, EventStoreError> {
        let key = key(aggregate_id);
        let shard = self.shard(&key);
        Ok(shard
            .get(&key)
            .and_then(|history| history.streams.values().next_back())
            .map(|s| DomainEventStream::clone(s)))
    }

    async fn scan_aggregate_ids(
        &self,
        named: &NamedAggregate,
        after: Option<&AggregateId>,
        limit: usize,
    ) -> Result<Vec<AggregateId>, EventStoreError> {
        let mut found: Vec<AggregateId> = Vec::new();
        let after = after.map(|a| (a.tenant_id.as_str(), a.id.as_str()));
        for shard in &self.shards {
            let shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            for ((tenant, name, id), history) in shard.iter() {
                if name != &named.aggregate_name
                    || after.is_some_and(|after| (tenant.as_str(), id.as_str()) <= after)
                {
                    continue;
                }
                let Some(first) = history.streams.values().next() else {
                    continue;
                };
                if first.aggregate_id.context_name == named.context_name {
                    found.push(first.aggregate_id.clone());
                }
            }
        }
        found.sort_by(|a, b| (&a.tenant_id, &a.id).cmp(&(&b.tenant_id, &b.id)));
        found.truncate(limit);
        Ok(found)
    }
}

#[async_trait]
impl RequestLog for InMemoryEventStore {
    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError> {
        let key = key(aggregate_id);
        let shard = self.shard(&key);
        let Some(history) = shard.get(&key) else {
            return Ok(None);
        };
        // Another tenant's decision is not this caller's to see (SPEC TN-1).
        let tenant = &aggregate_id.tenant_id;
        Ok(match history.requests.get(request_id) {
            None => None,
            Some(Decided::Rejected { tenant_id, record }) => (tenant_id == tenant)
                .then(|| RequestDecision::Rejected(RejectionRecord::clone(record))),
            Some(Decided::Appended(version)) => history
                .streams
                .get(version)
                .filter(|stream| &stream.aggregate_id.tenant_id == tenant)
                .map(|stream| {
                    RequestDecision::Appended(RequestRecord {
                        stream_id: stream.id.clone(),
                        version: stream.version,
                        command_id: stream.command_id.clone(),
                        create_time: stream.create_time,
                        fingerprint: stream.fingerprint.clone(),
                    })
                }),
        })
    }

    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError> {
        check_rejectable(request_id)?;
        let key = key(aggregate_id);
        let mut shard = self.shard(&key);
        let history = shard.entry(key).or_default();
        if history.requests.contains_key(request_id) {
            return Err(EventStoreError::request_decided(
                aggregate_id,
                request_id,
                rejection,
            ));
        }
        history.requests.insert(
            request_id.to_owned(),
            Decided::Rejected {
                tenant_id: aggregate_id.tenant_id.clone(),
                record: Box::new(rejection.clone()),
            },
        );
        Ok(())
    }
}

#[async_trait]
impl EventFeed for InMemoryEventStore {
    async fn read_feed(
        &self,
        after: GlobalPosition,
        limit: usize,
    ) -> Result<Vec<FeedEntry>, EventStoreError> {
        // Every position here is (0, index + 1): after (0, n) comes index n; after any
        // position of a later transaction comes nothing.
        if after.transaction > 0 {
            return Ok(Vec::new());
        }
        let feed = self.feed();
        let first = usize::try_from(after.sequence).unwrap_or(usize::MAX);
        let rest = feed.get(first..).unwrap_or_default();
        Ok(rest
            .iter()
            .take(limit)
            .zip(after.sequence.saturating_add(1)..)
            .map(|(stream, sequence)| FeedEntry {
                position: GlobalPosition::new(0, sequence),
                stream: DomainEventStream::clone(stream),
            })
            .collect())
    }
}

#[async_trait]
impl StreamQueries for InMemoryEventStore {
    async fn query_streams(
        &self,
        streams: TenantStreams<'_>,
        query: &DocumentQuery,
    ) -> Result<Vec<DomainEventStream>, EventStoreError> {
        let mut found: Vec<(serde_json::Value, DomainEventStream)> = self
            .streams_of(streams)
            .into_iter()
            .map(|stream| (stream_document(&stream), stream))
            .filter(|(document, _)| matches(&query.filter, document))
            .collect();
        found.sort_by(|(a, x), (b, y)| {
            order(&query.sort, a, b)
                .then_with(|| {
                    x.aggregate_id
                        .id
                        .as_bytes()
                        .cmp(y.aggregate_id.id.as_bytes())
                })
                .then(x.version.cmp(&y.version))
        });
        let offset = usize::try_from(query.offset).unwrap_or(usize::MAX);
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        Ok(found
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(_, stream)| stream)
            .collect())
    }

    async fn count_streams(
        &self,
        streams: TenantStreams<'_>,
        filter: &Filter,
    ) -> Result<u64, EventStoreError> {
        Ok(self
            .streams_of(streams)
            .iter()
            .filter(|stream| matches(filter, &stream_document(stream)))
            .count() as u64)
    }
}

#[async_trait]
impl KeyIndex for InMemoryEventStore {
    async fn find_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        let now = self.clock.now_millis();
        Ok(self
            .keys()
            .get(&(tenant_id.to_owned(), key.confirmed()))
            .filter(|holder| !holder.key.lapsed_at(now))
            .cloned())
    }

    async fn claim_keys(&self, claim: KeysToClaim<'_>) -> Result<Vec<KeyClaim>, EventStoreError> {
        claim.check()?;
        let now = self.clock.now_millis();
        Ok(claim_free_keys(
            &mut self.keys(),
            claim.aggregate_id,
            claim.version,
            claim.keys,
            now,
        ))
    }

    /// Removes the key's entry under the keys' lock alone: an append holds it from its
    /// claims' check to their write, so the release comes wholly before or after.
    async fn release_key(
        &self,
        tenant_id: &str,
        key: &UniqueKey,
    ) -> Result<Option<KeyHolder>, EventStoreError> {
        check_unique_key(key).map_err(EventStoreError::IllegalArgument)?;
        Ok(self.keys().remove(&(tenant_id.to_owned(), key.clone())))
    }
}

/// A [`SnapshotStore`] in memory.
#[derive(Debug, Default)]
pub struct InMemorySnapshotStore {
    snapshots: Mutex<HashMap<Key, Snapshot>>,
}

impl InMemorySnapshotStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn snapshots(&self) -> MutexGuard<'_, HashMap<Key, Snapshot>> {
        self.snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl InMemorySnapshotStore {
    /// Whether the aggregate (tenant, id) has a snapshot under `to` as under `from`.
    pub(crate) fn rename_conflict(&self, from: &str, to: &str) -> Option<(String, String)> {
        let snapshots = self.snapshots();
        snapshots
            .keys()
            .filter(|(_, name, _)| name == from)
            .find(|(tenant, _, id)| {
                snapshots.contains_key(&(tenant.clone(), to.to_owned(), id.clone()))
            })
            .map(|(tenant, _, id)| (tenant.clone(), id.clone()))
    }

    /// Re-keys the snapshots of the aggregate named `from` to `to`; how many.
    pub(crate) fn rename(&self, from: &str, to: &str, dry_run: bool) -> u64 {
        let mut snapshots = self.snapshots();
        let keys: Vec<Key> = snapshots.keys().filter(|k| k.1 == from).cloned().collect();
        if !dry_run {
            for key in &keys {
                if let Some(mut snapshot) = snapshots.remove(key) {
                    snapshot.aggregate_id.aggregate_name = to.to_owned();
                    snapshots.insert((key.0.clone(), to.to_owned(), key.2.clone()), snapshot);
                }
            }
        }
        keys.len() as u64
    }
}

#[async_trait]
impl SnapshotStore for InMemorySnapshotStore {
    async fn load(
        &self,
        aggregate_id: &AggregateId,
    ) -> Result<Option<Snapshot>, SnapshotStoreError> {
        Ok(self.snapshots().get(&key(aggregate_id)).cloned())
    }

    async fn version(&self, aggregate_id: &AggregateId) -> Result<Option<u64>, SnapshotStoreError> {
        Ok(self.snapshots().get(&key(aggregate_id)).map(|s| s.version))
    }

    async fn save(&self, snapshot: &Snapshot) -> Result<bool, SnapshotStoreError> {
        let mut snapshots = self.snapshots();
        let key = key(&snapshot.aggregate_id);
        match snapshots.get(&key) {
            Some(stored) if stored.version > snapshot.version => Ok(false),
            _ => {
                snapshots.insert(key, snapshot.clone());
                Ok(true)
            }
        }
    }
}

#[async_trait]
impl DeadlineStore for InMemoryEventStore {
    async fn due_rows(&self, query: &DueQuery) -> Result<Vec<PendingDeadline>, EventStoreError> {
        let now = self.clock.now_millis();
        Ok(self.deadlines().due(query, now))
    }

    async fn now(&self) -> Result<i64, EventStoreError> {
        Ok(self.clock.now_millis())
    }

    async fn next_fire_at(
        &self,
        partitions: Option<&PartitionFilter>,
    ) -> Result<Option<i64>, EventStoreError> {
        Ok(self.deadlines().next_fire_at(partitions))
    }

    async fn fired(&self, schedule: &ScheduledCommand) -> Result<bool, EventStoreError> {
        Ok(self
            .deadlines()
            .delete(&schedule.owner, &schedule.name, Some(&schedule.request_id)))
    }

    async fn retry_later(&self, failure: FailedFiring<'_>) -> Result<Option<u32>, EventStoreError> {
        let fire_at = failure.fire_at(|| self.clock.now_millis());
        Ok(self
            .deadlines()
            .retry_at(failure.owner, failure.name, failure.request_id, fire_at))
    }

    async fn fire_now(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError> {
        let now = self.clock.now_millis();
        Ok(self.deadlines().fire_at(owner, name, now))
    }

    async fn pending_for(
        &self,
        owner: &AggregateId,
    ) -> Result<Vec<PendingDeadline>, EventStoreError> {
        Ok(self.deadlines().of(owner))
    }

    async fn cancel_named(&self, tenant: &str, name: &str) -> Result<u64, EventStoreError> {
        Ok(self.deadlines().delete_named(tenant, name))
    }

    async fn schedule(&self, row: &ScheduledCommand) -> Result<(), EventStoreError> {
        wow_model::deadline::check_deadline_name(&row.name)
            .map_err(EventStoreError::IllegalArgument)?;
        if row.target.tenant_id != row.owner.tenant_id {
            return Err(EventStoreError::IllegalArgument(format!(
                "deadline `{}` sends to another tenant",
                row.name
            )));
        }
        self.deadlines().schedule(row.clone());
        Ok(())
    }

    async fn cancel(&self, owner: &AggregateId, name: &str) -> Result<bool, EventStoreError> {
        Ok(self.deadlines().delete(owner, name, None))
    }

    async fn backlog(&self) -> Result<DeadlineBacklog, EventStoreError> {
        Ok(self.deadlines().backlog())
    }
}
