//! Partition ownership as leases in a JetStream key-value bucket. The protocol, the fencing
//! rule and what stop, drop and abort do are documented on [`PartitionLeases`].

mod bucket;
mod error;
mod fence;
mod keeper;
mod share;

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

pub use error::LeaseError;
pub use fence::Fence;

/// The partitions a node owns, each with its lease's fence.
pub type OwnedPartitions = BTreeMap<u32, Fence>;

/// The bucket used when none is configured.
pub const DEFAULT_BUCKET: &str = "wow_partitions";

/// How a node takes part in partition leasing. Plain values; see each setter for its default.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    node_id: String,
    partitions: u32,
    bucket: String,
    ttl: Duration,
    margin: Option<Duration>,
    replicas: usize,
}

impl LeaseConfig {
    /// Leases on partitions `0..partitions` for the node `node_id`, which must be unique among
    /// live nodes and made of ASCII letters, digits, `-`, `_` and `=`.
    pub fn new(node_id: impl Into<String>, partitions: u32) -> Self {
        Self {
            node_id: node_id.into(),
            partitions,
            bucket: DEFAULT_BUCKET.to_owned(),
            ttl: Duration::from_secs(10),
            margin: None,
            replicas: 1,
        }
    }

    /// The bucket's name. Default [`DEFAULT_BUCKET`].
    pub fn bucket(mut self, bucket: impl Into<String>) -> Self {
        self.bucket = bucket.into();
        self
    }

    /// The lease TTL, the bucket's `max_age`: how long a crashed node's partitions stay
    /// unowned at most (plus one round of `ttl / 3`). Every node of a bucket must use the same.
    /// Default 10 s.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long before the server would let the key go the local lease ends, to cover clock
    /// rate drift and give workers time to stop. At most `ttl / 4`: a round that releases a
    /// partition waits the margin, and the next renewal of the other leases must still come
    /// before their deadline (rounds are `ttl / 3` apart). Default `ttl / 5`.
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// Copies of the bucket in a NATS cluster: use the deployment's replica setting (3 on a
    /// three-node cluster), or losing the one server holding the bucket leaves every
    /// partition unowned until it returns. An existing bucket with fewer copies is raised to
    /// this many on start. Default 1.
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    fn effective_margin(&self) -> Duration {
        self.margin.unwrap_or(self.ttl / 5)
    }

    fn validate(&self) -> Result<(), LeaseError> {
        let invalid = |why: &str| Err(LeaseError::InvalidConfig(why.to_owned()));
        if self.partitions == 0 {
            return invalid("there must be at least one partition");
        }
        let valid_id = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '=');
        if self.node_id.is_empty() || !self.node_id.chars().all(valid_id) {
            return invalid("the node id must be ASCII letters, digits, `-`, `_` or `=`");
        }
        if self.ttl < Duration::from_millis(100) {
            return invalid("the TTL must be at least 100 ms");
        }
        let margin = self.effective_margin();
        if margin.is_zero() || margin > self.ttl / 4 {
            return invalid("the margin must be positive and at most a quarter of the TTL");
        }
        Ok(())
    }
}

/// A running lease keeper for one node: the handle to its task.
///
/// Command partitions `0..N` are each consumed by one processor node at a time. Each node runs
/// a keeper: a task that holds leases on partitions and publishes the set it owns, with a
/// [`Fence`] per partition, through a [`tokio::sync::watch`] channel that the command
/// consumer watches to start and stop partitions.
///
/// # The bucket
///
/// One bucket (default `wow_partitions`, file storage, history 1, [`LeaseConfig::replicas`]
/// copies) whose `max_age` is the
/// lease TTL: NATS 2.9 has no per-key TTL, so an entry not rewritten within the TTL disappears.
/// Key `partition.{n}` holds the owner's node id, `node.{id}` says that node is alive.
///
/// - Acquire is a KV `create` (fails if the key exists).
/// - Renew is a KV `update` with the last revision seen (compare-and-set: fails if anyone else
///   wrote the key since).
/// - Release is a delete guarded by the last revision, so a node never deletes another's
///   lease. (When that revision is stale because the reply to a write of ours was lost, the
///   delete is guarded by the key's current revision if the key still holds this node's id.)
///
/// Every `ttl / 3`, and at once when it sees a key deleted (a release), the keeper rewrites
/// its `node.{id}` key, renews its leases, lists the live keys, and moves towards its share:
/// it acquires free partitions up to the share and releases one partition per round above it. With `L` live nodes sorted by id, the first `N mod L`
/// get `ceil(N / L)` and the others `floor(N / L)`. Plain `ceil` for everyone (the first
/// design) can leave a joining node at zero for good, e.g. 4 partitions held 2 + 2 when a third
/// node joins: nobody is above `ceil(4 / 3) = 2`, so nothing is ever freed. Shares that sum to
/// `N` exactly leave no such stable state; releasing one per round keeps a join from making
/// several nodes drop partitions at once.
///
/// # Fencing
///
/// A node stops handling a partition before another node can acquire it. The keeper records
/// the local instant it *sent* each acquire or renew request that succeeded; the lease is then
/// valid locally until `sent + ttl - margin`. The server counts the entry's age from when it
/// stored it, which is after the request was sent, so no other node can `create` the key before
/// `sent + ttl` of the holder's clock (clock *rates* are assumed to differ by less than
/// `margin / ttl`; clock offsets do not matter). The [`Fence`] goes invalid at the local
/// deadline by itself, whether or not the keeper still runs or NATS is reachable, so a partition
/// worker that checks it stops at least `margin` before anyone else can start.
///
/// - A write by anyone else on a held key ends the lease at once: the keeper watches the
///   bucket and sees it within milliseconds, and failing that the next renewal's
///   compare-and-set fails. There is no margin to give then; only an operator or a
///   misconfigured node writes another's key.
/// - A release (above the share, or on stop) ends the fence first, waits `margin`, then deletes
///   the key: the worker gets the same head start as on expiry.
/// - A renewal that succeeds after the fence already expired does not revive it; the keeper
///   deletes that key (guarded by its revision) after the margin, rather than leaving the
///   partition taken for a whole TTL.
///
/// # Shutdown and drop
///
/// [`PartitionLeases::stop`] lets the round in flight finish (for up to a TTL), ends every
/// fence, waits `margin`, deletes the owned keys and the node key, and waits for the task. Dropping the handle does the same in the background.
/// [`PartitionLeases::abort`] ends the task without releasing (what a crash does): the other
/// nodes take its partitions once the TTL has passed, and its fences, which may still be held
/// by workers, go invalid at their deadlines. When the task is gone, the owned-set channel is
/// closed: a consumer then stops every partition (the fences say the same by their deadline).
///
/// # Example
///
/// A command consumer that runs a worker per owned partition, each stopping with its fence:
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use wow_nats::{LeaseConfig, PartitionLeases};
///
/// let client = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let jetstream = async_nats::jetstream::new(client);
/// let config = LeaseConfig::new("node-1", 16).ttl(Duration::from_secs(10));
/// let leases = PartitionLeases::start(&jetstream, config).await?;
/// let mut owned = leases.owned();
/// while owned.changed().await.is_ok() {
///     for (partition, fence) in owned.borrow_and_update().iter() {
///         let fence = fence.clone();
///         let partition = *partition;
///         // A real consumer starts each partition once; see `Fence`'s equality.
///         tokio::spawn(async move {
///             tokio::select! {
///                 () = fence.lost() => {}
///                 () = async { /* consume `partition`, checking `fence.is_valid()` */ } => {}
///             }
///         });
///     }
/// }
/// leases.stop().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct PartitionLeases {
    node_id: String,
    owned: watch::Receiver<OwnedPartitions>,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<Result<(), LeaseError>>,
}

impl PartitionLeases {
    /// Opens (or creates) the bucket and starts the keeper task, which takes its first round
    /// at once.
    ///
    /// # Errors
    ///
    /// [`LeaseError::InvalidConfig`] for a configuration that cannot work,
    /// [`LeaseError::Bucket`] when the bucket can be neither opened nor created,
    /// [`LeaseError::TtlMismatch`] when it exists with another `max_age` than the TTL.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is leased before it returns.
    pub async fn start(
        jetstream: &jetstream::Context,
        config: LeaseConfig,
    ) -> Result<Self, LeaseError> {
        config.validate()?;
        let store = bucket::open(jetstream, &config.bucket, config.ttl, config.replicas).await?;
        let (keeper, owned) = keeper::Keeper::new(
            store,
            config.node_id.clone(),
            config.partitions,
            config.ttl,
            config.effective_margin(),
        );
        let (shutdown, shutdown_rx) = oneshot::channel();
        let task = tokio::spawn(keeper.run(shutdown_rx));
        Ok(Self {
            node_id: config.node_id,
            owned,
            shutdown,
            task,
        })
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The partitions this node owns, updated as leases begin and end. A partition leaves the
    /// set no later than its fence goes invalid; the channel closes when the keeper ends.
    pub fn owned(&self) -> watch::Receiver<OwnedPartitions> {
        self.owned.clone()
    }

    /// Releases every lease (fences first, then the keys after the margin) and ends the task.
    ///
    /// # Errors
    ///
    /// [`LeaseError::Release`] when some keys could not be deleted (they expire after the
    /// TTL), [`LeaseError::Keeper`] when the task had panicked.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future still stops the keeper: it releases in the background, as when
    /// the handle is dropped; only the outcome is lost.
    pub async fn stop(self) -> Result<(), LeaseError> {
        // The keeper may have ended already; then there is nothing to tell it.
        let _ = self.shutdown.send(());
        match self.task.await {
            Ok(result) => result,
            Err(error) => Err(LeaseError::Keeper(Box::new(error))),
        }
    }

    /// Ends the keeper at once without releasing anything, as a crash would: others take its
    /// partitions after the TTL, and its fences go invalid at their deadlines.
    pub fn abort(self) {
        self.task.abort();
    }
}
