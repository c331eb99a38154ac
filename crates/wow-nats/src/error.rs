//! Why the distributed mode could not start or carry on.

use wow_core::eventsourcing::BoxError;

/// A failure to set up or use NATS. Commands already accepted are not affected: they wait
/// in the stream for a processor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// The server could not be reached.
    #[error("cannot connect to NATS at {url}: {source}")]
    Connect {
        /// The server's URL.
        url: String,
        /// What the client said.
        #[source]
        source: BoxError,
    },
    /// The command stream could not be made or checked.
    #[error("cannot set up the JetStream stream `{stream}`: {source}")]
    Stream {
        /// The stream's name.
        stream: String,
        /// What the server said.
        #[source]
        source: BoxError,
    },
    /// A partition's consumer could not be made or read.
    #[error("cannot consume partition {partition}: {source}")]
    Consumer {
        /// The partition.
        partition: u32,
        /// What the server said.
        #[source]
        source: BoxError,
    },
    /// The wait-signal subscription could not be made.
    #[error("cannot subscribe to wait signals on `{subject}`: {source}")]
    Subscribe {
        /// The subject.
        subject: String,
        /// What the server said.
        #[source]
        source: BoxError,
    },
    /// The partition leases could not be set up or released.
    #[error(transparent)]
    Lease(#[from] crate::lease::LeaseError),
    /// This node's partition count is not the deployment's.
    #[error("this node is configured with {configured} partitions but the deployment records {recorded}: WOW_NATS_PARTITIONS must be equal on every node")]
    PartitionCount {
        /// This node's count.
        configured: u32,
        /// The count the deployment's first node recorded.
        recorded: String,
    },
    /// The deployment's settings record could not be read or written.
    #[error("cannot check the deployment's settings in the bucket `{bucket}`: {source}")]
    Deployment {
        /// The bucket's name.
        bucket: String,
        /// What the server said.
        #[source]
        source: BoxError,
    },
    /// The settings cannot be served with.
    #[error("invalid NATS settings: {0}")]
    Config(String),
}

impl NatsError {
    /// Whether trying again later may succeed: a stream's, a bucket's or the meta leader's
    /// server away, no leader elected yet, a cluster short of servers for the replicas asked
    /// for. False for what only a change of settings fixes (an unparsable URL, a partition
    /// count or lease TTL that is not the deployment's, invalid settings).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Stream { .. }
            | Self::Consumer { .. }
            | Self::Subscribe { .. }
            | Self::Deployment { .. } => true,
            Self::Lease(error) => matches!(error, crate::lease::LeaseError::Bucket { .. }),
            Self::Connect { .. } | Self::PartitionCount { .. } | Self::Config(_) => false,
        }
    }
}
