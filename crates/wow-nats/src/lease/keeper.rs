//! The keeper task: renews, acquires and releases one node's leases, and ends them on time.
//!
//! It owns the node's view of its leases. Network rounds and deadline enforcement run in one
//! `select!`, so a lease ends at its deadline even while a request hangs on an unreachable
//! server; the round goes on afterwards and finds the lease gone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_nats::jetstream::kv;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::{oneshot, watch};
use tokio::time::{interval, sleep, sleep_until, timeout, Instant, MissedTickBehavior};

use super::error::{BoxError, LeaseError};
use super::fence::Fence;
use super::share::share_of;
use super::OwnedPartitions;

const PARTITION_PREFIX: &str = "partition.";
const NODE_PREFIX: &str = "node.";

/// The header a KV entry's operation is in (`PUT`, `DEL`, `PURGE`); absent on a plain put.
const KV_OPERATION: &str = "KV-Operation";

fn partition_key(partition: u32) -> String {
    format!("{PARTITION_PREFIX}{partition}")
}

/// A lease this node holds: the key's revision as last written by us, and its fence.
#[derive(Debug)]
struct Lease {
    revision: u64,
    fence: Fence,
}

/// A renewal's partition, the revision it was sent with, when it was sent and what it came
/// to.
type RenewalAnswer = (u32, u64, Instant, Renewal);

/// What one renewal request came to.
#[derive(Debug)]
enum Renewal {
    /// Renewed; the key's new revision.
    Renewed(u64),
    /// The key is not at the revision we last wrote.
    Conflict,
    /// No answer, or an error: the lease ends at its deadline unless a retry succeeds.
    Failed(String),
}

/// The state of one node's keeper task.
#[derive(Debug)]
pub(crate) struct Keeper {
    store: kv::Store,
    node_id: String,
    node_value: Bytes,
    partitions: u32,
    ttl: Duration,
    margin: Duration,
    leases: Mutex<BTreeMap<u32, Lease>>,
    owned: watch::Sender<OwnedPartitions>,
}

impl Keeper {
    pub(crate) fn new(
        store: kv::Store,
        node_id: String,
        partitions: u32,
        ttl: Duration,
        margin: Duration,
    ) -> (Self, watch::Receiver<OwnedPartitions>) {
        let (owned, owned_rx) = watch::channel(OwnedPartitions::new());
        let keeper = Self {
            store,
            node_value: Bytes::from(node_id.clone().into_bytes()),
            node_id,
            partitions,
            ttl,
            margin,
            leases: Mutex::new(BTreeMap::new()),
            owned,
        };
        (keeper, owned_rx)
    }

    /// Runs rounds every `ttl / 3`, and at once when a key is deleted (a release),
    /// until `shutdown` fires or its sender is dropped; then releases everything.
    pub(crate) async fn run(self, mut shutdown: oneshot::Receiver<()>) -> Result<(), LeaseError> {
        let mut ticks = interval(self.ttl / 3);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Changes to the bucket; `None` until a round has opened the watch.
        let mut changes: Option<kv::Watch> = None;
        'run: loop {
            tokio::select! {
                _ = &mut shutdown => break 'run,
                () = sleep_until(self.next_deadline()) => {
                    self.expire_due();
                    continue 'run;
                }
                _ = ticks.tick() => {}
                entry = next_change(&mut changes) => {
                    if !self.on_change(&entry) {
                        continue 'run;
                    }
                    ticks.reset();
                }
            }
            let open_watch = changes.is_none();
            let round = async {
                // The watch is opened beside the round, not before it: opening one makes a
                // consumer, which waits on the JetStream meta leader, and renewals must not.
                // A change made while it opens is missed by the watch only: the renewals'
                // compare-and-set and the next round's listing find it, as without a watch.
                let watch = async {
                    if open_watch {
                        self.watch_releases().await
                    } else {
                        None
                    }
                };
                let (watch, ()) = tokio::join!(watch, self.round());
                watch
            };
            tokio::pin!(round);
            // On shutdown the round in flight may finish (for up to a TTL): dropped halfway,
            // it could leave a key written whose revision is never recorded, which then stays
            // taken until it expires.
            let mut stop_by = None;
            loop {
                tokio::select! {
                    _ = &mut shutdown, if stop_by.is_none() => {
                        stop_by = Some(Instant::now() + self.ttl);
                    }
                    () = sleep_until(stop_by.unwrap_or_else(far_future)), if stop_by.is_some() => {
                        break 'run;
                    }
                    () = sleep_until(self.next_deadline()) => self.expire_due(),
                    watch = &mut round => {
                        if watch.is_some() {
                            changes = watch;
                        }
                        break;
                    }
                }
            }
            if stop_by.is_some() {
                break 'run;
            }
        }
        self.release_all().await
    }

    /// Acts on a change seen on the bucket; returns whether to run a round now (someone
    /// released a key). A foreign write on a key this node holds ends that lease at once,
    /// without waiting for the next renewal to fail.
    fn on_change(&self, entry: &kv::Entry) -> bool {
        if entry.operation != kv::Operation::Put {
            return true;
        }
        let partition = entry
            .key
            .strip_prefix(PARTITION_PREFIX)
            .and_then(|partition| partition.parse::<u32>().ok());
        if let Some(partition) = partition {
            let mut leases = self.lock();
            // Only a write after ours: the watch may still hold the previous owner's last
            // renewal, from before our `create`.
            let foreign = leases.get(&partition).is_some_and(|lease| {
                entry.revision > lease.revision && entry.value != self.node_value
            });
            if foreign {
                if let Some(lease) = leases.remove(&partition) {
                    lease.fence.end();
                    self.publish(&leases);
                    tracing::warn!(
                        node = %self.node_id,
                        partition,
                        "another writer changed the lease; partition stopped at once"
                    );
                }
            }
        }
        false
    }

    /// A watch on the bucket's changes, so a release elsewhere is taken up, and a foreign write
    /// noticed, without waiting for the next tick. Without it (NATS refused) the keeper learns
    /// both on ticks only.
    async fn watch_releases(&self) -> Option<kv::Watch> {
        // Bounded, so a round never waits longer for its watch than for its own requests.
        match timeout(self.bound(), self.store.watch_all()).await {
            Ok(Ok(watch)) => Some(watch),
            Err(_) => {
                tracing::debug!(node = %self.node_id, "the bucket's watch did not open in time; rounds run on ticks");
                None
            }
            Ok(Err(error)) => {
                tracing::debug!(node = %self.node_id, %error, "cannot watch the bucket; rounds run on ticks only");
                None
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u32, Lease>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How long each request of a round may take: a third of the TTL (1 s for the default
    /// 3 s), the rounds' interval. A round that waits on a server that does not answer must
    /// leave time, before the leases' deadlines, for the next round, which may find the
    /// bucket's new leader.
    fn bound(&self) -> Duration {
        self.ttl / 3
    }

    /// The local deadline of a lease whose request was sent at `sent`.
    fn deadline(&self, sent: Instant) -> Instant {
        sent + self.ttl - self.margin
    }

    /// The earliest deadline among held leases (far away when there is none).
    fn next_deadline(&self) -> Instant {
        self.lock()
            .values()
            .map(|lease| lease.fence.valid_until())
            .min()
            .unwrap_or_else(far_future)
    }

    /// Publishes the owned set as `leases` has it.
    fn publish(&self, leases: &BTreeMap<u32, Lease>) {
        let now: OwnedPartitions = leases
            .iter()
            .map(|(partition, lease)| (*partition, lease.fence.clone()))
            .collect();
        self.owned.send_if_modified(|owned| {
            if *owned == now {
                false
            } else {
                *owned = now;
                true
            }
        });
    }

    /// Drops every lease whose fence is no longer valid (deadline passed or ended).
    fn expire_due(&self) {
        let mut leases = self.lock();
        leases.retain(|partition, lease| {
            let valid = lease.fence.is_valid();
            if !valid {
                lease.fence.end();
                tracing::warn!(
                    node = %self.node_id,
                    partition,
                    "lease expired locally before a renewal succeeded; partition stopped"
                );
            }
            valid
        });
        self.publish(&leases);
    }

    /// One round: announce this node, renew, list, then acquire or release towards the share.
    async fn round(&self) {
        // The liveness key first, so that it expires before this node's leases do: a node
        // that finds the leases gone also finds this node gone, and takes its full share.
        // Bounded: a hung server must not hold the renewals behind it past their deadlines.
        let refresh = self.store.put(self.node_key(), self.node_value.clone());
        let refreshed = match timeout(self.bound(), refresh).await {
            Ok(Ok(_)) => true,
            Ok(Err(error)) => {
                tracing::warn!(node = %self.node_id, %error, "cannot refresh the node's liveness key");
                false
            }
            Err(_) => {
                tracing::warn!(node = %self.node_id, "the node's liveness key was not refreshed in time");
                false
            }
        };
        self.renew().await;
        if !refreshed {
            // The bucket takes no writes (no leader, a hung server): a listing would wait
            // as long for nothing. The next round, a third of the TTL on, tries again.
            return;
        }
        let (live, taken) = match self.list().await {
            Ok(listing) => listing,
            Err(error) => {
                tracing::warn!(node = %self.node_id, %error, "cannot list leases; retrying next round");
                return;
            }
        };
        let share = share_of(self.partitions, &live, &self.node_id);
        let owned: BTreeSet<u32> = self.lock().keys().copied().collect();
        if owned.len() < share as usize {
            let wanted = share as usize - owned.len();
            // Free partitions, and keys still holding this node's id that it no longer holds
            // (its lease ended locally while a hung server kept the renewals' replies): those
            // are taken back at once rather than left unowned until they expire.
            let free = (0..self.partitions).filter_map(|p| match taken.get(&p) {
                _ if owned.contains(&p) => None,
                None => Some((p, None)),
                Some(Some(revision)) => Some((p, Some(*revision))),
                Some(None) => None,
            });
            let mut acquired = 0;
            for (partition, ours) in free {
                if acquired == wanted {
                    break;
                }
                match self.acquire(partition, ours).await {
                    Ok(true) => acquired += 1,
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(node = %self.node_id, partition, %error, "cannot acquire; retrying next round");
                        break;
                    }
                }
            }
        } else if owned.len() > share as usize {
            if let Some(&partition) = owned.last() {
                self.release(partition).await;
            }
        }
    }

    fn node_key(&self) -> String {
        format!("{NODE_PREFIX}{}", self.node_id)
    }

    /// Renews every held lease at once, each with its last revision, each request bounded
    /// by a third of the TTL (a hung server must not hold the round past the leases'
    /// deadlines).
    async fn renew(&self) {
        let results = self.send_renewals().await;
        let orphans = self.apply_renewals(results);
        if !orphans.is_empty() {
            // Their fences ended at the latest now: the margin's head start still holds.
            sleep(self.margin).await;
        }
        for (partition, revision) in orphans {
            self.delete(partition, revision).await;
        }
    }

    /// One update of each held lease's key, all at once: each answer with the partition,
    /// the revision it was sent with and when it was sent.
    async fn send_renewals(&self) -> Vec<RenewalAnswer> {
        let held: Vec<(u32, u64)> = self
            .lock()
            .iter()
            .map(|(partition, lease)| (*partition, lease.revision))
            .collect();
        futures::future::join_all(held.into_iter().map(|(partition, revision)| {
            let request =
                self.store
                    .update(partition_key(partition), self.node_value.clone(), revision);
            async move {
                // Taken before the request can leave: the lease counts from no later than this.
                let sent = Instant::now();
                let outcome = match timeout(self.bound(), request).await {
                    Ok(Ok(new_revision)) => Renewal::Renewed(new_revision),
                    Ok(Err(error)) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                        Renewal::Conflict
                    }
                    Ok(Err(error)) => Renewal::Failed(error.to_string()),
                    Err(_) => Renewal::Failed("no answer in time".to_owned()),
                };
                (partition, revision, sent, outcome)
            }
        }))
        .await
    }

    /// Extends each lease its renewal reached in time and ends each another writer took;
    /// answers the keys renewed for a lease that had already ended here (the orphans, to
    /// free).
    fn apply_renewals(&self, results: Vec<RenewalAnswer>) -> Vec<(u32, u64)> {
        let mut orphans = Vec::new();
        {
            let mut leases = self.lock();
            for (partition, revision, sent, outcome) in results {
                let current = leases
                    .get(&partition)
                    .filter(|lease| lease.revision == revision)
                    .is_some();
                match outcome {
                    Renewal::Renewed(new_revision) if current => {
                        let extended = leases.get_mut(&partition).is_some_and(|lease| {
                            lease.revision = new_revision;
                            lease.fence.extend(self.deadline(sent))
                        });
                        if !extended {
                            // Renewed too late: the fence had already expired and stays so.
                            leases.remove(&partition);
                            orphans.push((partition, new_revision));
                        }
                    }
                    // The lease ended locally while the request was out; the key is ours
                    // though, so free it.
                    Renewal::Renewed(new_revision) => orphans.push((partition, new_revision)),
                    // Someone wrote the key since: the lease ends at once. (A write of ours
                    // whose reply was lost looks the same; the key still holds this node's
                    // id then, and the next round takes it back: see `acquire`.)
                    Renewal::Conflict => {
                        if current {
                            if let Some(lease) = leases.remove(&partition) {
                                lease.fence.end();
                            }
                        }
                        tracing::warn!(
                            node = %self.node_id,
                            partition,
                            "another writer changed the lease; partition stopped at once"
                        );
                    }
                    Renewal::Failed(error) => {
                        tracing::warn!(
                            node = %self.node_id,
                            partition,
                            %error,
                            "cannot renew; the lease ends at its deadline unless a retry succeeds"
                        );
                    }
                }
            }
            self.publish(&leases);
        }
        orphans
    }

    /// The live node ids (this one included) and the partitions someone holds.
    ///
    /// Read from the bucket stream's leader alone: the keys from a stream info with a
    /// subject filter, then each key's last entry. Listing keys through a consumer, as
    /// `kv::Store::keys` does, makes a consumer every round, which waits on the JetStream
    /// meta leader: losing that server (which may hold nothing of the bucket) would stall
    /// every renewal round, and the leases with them.
    ///
    /// A taken partition maps to its key's revision when the key holds this node's id.
    async fn list(&self) -> Result<(BTreeSet<String>, BTreeMap<u32, Option<u64>>), BoxError> {
        let keys = async {
            let mut subjects = self
                .store
                .stream
                .info_with_subjects(format!("{}>", self.store.prefix))
                .await?;
            let mut keys = Vec::new();
            while let Some((subject, _count)) = subjects.try_next().await? {
                keys.push(subject);
            }
            let entries = futures::future::join_all(keys.iter().map(|subject| async move {
                match self
                    .store
                    .stream
                    .get_last_raw_message_by_subject(subject)
                    .await
                {
                    Ok(message) => Ok(Some(message)),
                    // Expired or removed since the listing: nobody's.
                    Err(error) if error.kind() == LastRawMessageErrorKind::NoMessageFound => {
                        Ok(None)
                    }
                    Err(error) => Err(error),
                }
            }))
            .await;
            let mut live = Vec::new();
            for entry in entries {
                let Some(message) = entry? else { continue };
                let removed = message
                    .headers
                    .get(KV_OPERATION)
                    .is_some_and(|operation| operation.as_str() != "PUT");
                if !removed {
                    if let Some(key) = message.subject.strip_prefix(self.store.prefix.as_str()) {
                        let ours = message.payload == self.node_value;
                        live.push((key.to_owned(), ours.then_some(message.sequence)));
                    }
                }
            }
            Ok::<_, BoxError>(live)
        };
        let keys = timeout(self.bound(), keys).await??;
        let mut live = BTreeSet::from([self.node_id.clone()]);
        let mut taken = BTreeMap::new();
        for (key, ours) in keys {
            if let Some(node) = key.strip_prefix(NODE_PREFIX) {
                live.insert(node.to_owned());
            } else if let Some(partition) = key.strip_prefix(PARTITION_PREFIX) {
                if let Ok(partition) = partition.parse::<u32>() {
                    taken.insert(partition, ours);
                }
            }
        }
        Ok((live, taken))
    }

    /// Tries to create the partition's key, or, when `ours` names the revision of a key that
    /// still holds this node's id, to rewrite it at that revision; `Ok(false)` when someone
    /// else holds it or wrote it meanwhile. Either way the fence counts from this request.
    async fn acquire(&self, partition: u32, ours: Option<u64>) -> Result<bool, BoxError> {
        let sent = Instant::now();
        let key = partition_key(partition);
        let written = match ours {
            None => match self.store.create(&key, self.node_value.clone()).await {
                Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
                other => other.map(Some).map_err(BoxError::from),
            },
            Some(revision) => match self
                .store
                .update(&key, self.node_value.clone(), revision)
                .await
            {
                Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(None),
                other => other.map(Some).map_err(BoxError::from),
            },
        };
        match written {
            Ok(Some(revision)) => {
                let valid_until = self.deadline(sent);
                if Instant::now() >= valid_until {
                    // Acquired too slowly to be of any use: give it back.
                    self.delete(partition, revision).await;
                    return Ok(false);
                }
                let mut leases = self.lock();
                let fence = Fence::new(partition, sent, valid_until);
                leases.insert(partition, Lease { revision, fence });
                self.publish(&leases);
                tracing::info!(node = %self.node_id, partition, "partition acquired");
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Gives up one partition: fence first, the key after the margin.
    async fn release(&self, partition: u32) {
        let lease = {
            let mut leases = self.lock();
            let lease = leases.remove(&partition);
            self.publish(&leases);
            lease
        };
        if let Some(lease) = lease {
            lease.fence.end();
            tracing::info!(node = %self.node_id, partition, "releasing partition above the share");
            sleep(self.margin).await;
            self.delete(partition, lease.revision).await;
        }
    }

    /// Deletes the partition's key if it is still at `revision`; best effort.
    async fn delete(&self, partition: u32, revision: u64) {
        if let Err(error) = self.delete_own(partition, revision).await {
            tracing::warn!(node = %self.node_id, partition, %error, "cannot delete the lease; it expires after the TTL");
        }
    }

    /// Deletes the partition's key if it is at `revision`, or at a later revision that still
    /// holds this node's id: a write of ours whose reply was lost (a renewal timed out after
    /// the server applied it, a round dropped on shutdown). Node ids are unique among live
    /// nodes, so a key holding ours was written by this node.
    async fn delete_own(&self, partition: u32, revision: u64) -> Result<(), BoxError> {
        let key = partition_key(partition);
        match self
            .store
            .delete_expect_revision(&key, Some(revision))
            .await
        {
            Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                match self.store.entry(key.clone()).await? {
                    Some(entry)
                        if entry.operation == kv::Operation::Put
                            && entry.value == self.node_value =>
                    {
                        self.store
                            .delete_expect_revision(&key, Some(entry.revision))
                            .await?;
                        Ok(())
                    }
                    // Someone else's now, or gone: nothing of ours to delete.
                    _ => Ok(()),
                }
            }
            result => Ok(result?),
        }
    }

    /// Ends every fence, waits the margin, deletes the keys and the node's liveness key.
    async fn release_all(&self) -> Result<(), LeaseError> {
        let leases = {
            let mut leases = self.lock();
            let taken = std::mem::take(&mut *leases);
            self.publish(&leases);
            taken
        };
        for lease in leases.values() {
            lease.fence.end();
        }
        if !leases.is_empty() {
            sleep(self.margin).await;
        }
        let deletes = leases
            .iter()
            .map(|(partition, lease)| self.delete_own(*partition, lease.revision));
        let mut errors: Vec<BoxError> = futures::future::join_all(deletes)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        if let Err(error) = self.store.delete(self.node_key()).await {
            errors.push(Box::new(error));
        }
        tracing::info!(node = %self.node_id, released = leases.len(), "leases released");
        let failed = errors.len();
        match errors.into_iter().next() {
            None => Ok(()),
            Some(source) => Err(LeaseError::Release { failed, source }),
        }
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// The next change the watch shows; never resolves when there is no watch. A watch that
/// fails or ends is dropped, to be opened again by the next round.
async fn next_change(changes: &mut Option<kv::Watch>) -> kv::Entry {
    if let Some(watch) = changes {
        if let Some(Ok(entry)) = watch.next().await {
            return entry;
        }
        *changes = None;
    }
    std::future::pending().await
}
