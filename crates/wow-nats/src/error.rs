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
    /// The settings cannot be served with.
    #[error("invalid NATS settings: {0}")]
    Config(String),
}
