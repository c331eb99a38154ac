//! How a node reaches NATS and how the command stream is laid out.

use std::time::Duration;

/// Where JetStream keeps the command stream's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommandStorage {
    /// On disk: commands accepted at `SENT` survive a NATS restart (within what JetStream
    /// itself promises: see the crate documentation).
    #[default]
    File,
    /// In memory: faster, and every command not yet handled is lost when NATS restarts.
    /// Callers see a timeout, and a look-up answers `NONE`: the resend is safe.
    Memory,
}

/// The distributed mode's settings. Every node of one deployment must agree on `stream`,
/// `subject_prefix` and `partitions`: they decide which partition a command goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsConfig {
    /// The server, e.g. `nats://127.0.0.1:4222`.
    pub url: String,
    /// The JetStream stream that carries commands.
    pub stream: String,
    /// Commands go to `{subject_prefix}.{partition}`.
    pub subject_prefix: String,
    /// Wait signals go to `{wait_prefix}.{node}`: each gateway listens on its own subject.
    pub wait_prefix: String,
    /// How many command partitions there are: the most processors that can share the work.
    pub partitions: u32,
    /// Copies of the command stream in a NATS cluster (1 on a single server). More copies
    /// survive the loss of a server; each costs a round trip per command.
    pub replicas: usize,
    /// Where the command stream lives.
    pub storage: CommandStorage,
    /// How long a command may wait in the stream for a processor before JetStream drops it.
    pub max_age: Duration,
    /// How long a processor may hold a command without acknowledging it before JetStream
    /// delivers it again. A new owner of a partition gets its unacknowledged commands at
    /// once, whatever this says.
    pub ack_wait: Duration,
}

impl NatsConfig {
    /// The defaults for a server at `url`: stream `WOW_COMMANDS`, subjects `wow.commands.*`,
    /// signals on `wow.wait.*`, 16 partitions, one replica on file, a day's retention, 30 s
    /// to acknowledge.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            stream: "WOW_COMMANDS".to_owned(),
            subject_prefix: "wow.commands".to_owned(),
            wait_prefix: "wow.wait".to_owned(),
            partitions: 16,
            replicas: 1,
            storage: CommandStorage::File,
            max_age: Duration::from_secs(24 * 60 * 60),
            ack_wait: Duration::from_secs(30),
        }
    }

    /// The subject of `partition`'s commands.
    pub fn partition_subject(&self, partition: u32) -> String {
        format!("{}.{partition}", self.subject_prefix)
    }

    /// The durable consumer that reads `partition`.
    pub fn partition_consumer(&self, partition: u32) -> String {
        format!("partition-{partition}")
    }

    /// The subject where the node `node` receives its wait signals.
    pub fn wait_subject(&self, node: &str) -> String {
        format!("{}.{node}", self.wait_prefix)
    }
}
