//! What can go wrong when starting or stopping partition leases.

use std::time::Duration;

/// A boxed error from the NATS client.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A failure to start or stop [`PartitionLeases`](crate::PartitionLeases).
///
/// Failures while the keeper runs are not reported here: a renewal or an acquire that fails is
/// retried the next round, and a lease that could not be renewed in time ends by its
/// [`Fence`](crate::Fence).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// The configuration cannot work (no partitions, a TTL too short, a node id or bucket name
    /// NATS rejects). Fix the configuration; retrying will not help.
    #[error("invalid lease configuration: {0}")]
    InvalidConfig(String),
    /// The bucket could not be opened or created: NATS is unreachable, JetStream is disabled,
    /// or the account has no room for it. Retry later.
    #[error("cannot open or create the lease bucket `{bucket}`")]
    Bucket {
        /// The bucket's name.
        bucket: String,
        /// What NATS answered.
        #[source]
        source: BoxError,
    },
    /// The bucket exists with another entry age than this node's TTL. Every node must use the
    /// bucket's TTL (the fencing rule depends on it): configure the same TTL everywhere, or
    /// delete the bucket when no node runs.
    #[error(
        "the lease bucket `{bucket}` keeps entries {bucket_max_age:?}, but the TTL is {ttl:?}"
    )]
    TtlMismatch {
        /// The bucket's name.
        bucket: String,
        /// The bucket's `max_age`.
        bucket_max_age: Duration,
        /// The TTL this node was configured with.
        ttl: Duration,
    },
    /// Some leases could not be released on stop. Nothing to do: they expire after the TTL
    /// and other nodes take them then.
    #[error("{failed} lease(s) could not be released; they expire after the TTL")]
    Release {
        /// How many releases failed.
        failed: usize,
        /// The first failure.
        #[source]
        source: BoxError,
    },
    /// The keeper task panicked or was aborted. Its leases expire after the TTL.
    #[error("the lease keeper task failed")]
    Keeper(#[source] BoxError),
}
