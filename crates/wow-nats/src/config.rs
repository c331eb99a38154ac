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
    /// The server, e.g. `nats://127.0.0.1:4222`, or a comma-separated list of a cluster's
    /// servers (`nats://a:4222,nats://b:4222,nats://c:4222`): the client connects to any of
    /// them and moves to another when its server is lost.
    pub url: String,
    /// The JetStream stream that carries commands.
    pub stream: String,
    /// Commands go to `{subject_prefix}.{partition}.{request token}`.
    pub subject_prefix: String,
    /// Wait signals go to `{wait_prefix}.{node}`: each gateway listens on its own subject.
    pub wait_prefix: String,
    /// How many command partitions there are: the most processors that can share the work.
    pub partitions: u32,
    /// Copies of every stream and bucket of the deployment in a NATS cluster: the command
    /// stream, the lease bucket, the deployment bucket (1 on a single server, 3 on a
    /// three-node cluster). More copies survive the loss of a server; each costs a round trip
    /// per write. Existing ones with fewer copies are raised to this on start.
    pub replicas: usize,
    /// How often the client pings its server. Three pings unanswered (about three intervals)
    /// and it drops the connection and moves to another server: what a hung server costs.
    pub ping_interval: std::time::Duration,
    /// How often the server tells an idle partition consumer it is still there. A consumer
    /// that misses two, twice in a row, counts as stalled (its server or leader lost): it is
    /// asked again, then started again, and the node is not ready meanwhile.
    pub heartbeat: std::time::Duration,
    /// Where the command stream lives.
    pub storage: CommandStorage,
    /// How long a command may wait in the stream for a processor before JetStream drops it.
    pub max_age: Duration,
    /// How long a processor may hold a command without acknowledging it before JetStream
    /// delivers it again. What a crashed processor held waits this long for the next owner
    /// only while a replica of the partition's consumer is away (a NATS server lost);
    /// otherwise the next owner gets it at once.
    pub ack_wait: Duration,
}

impl NatsConfig {
    /// The defaults for a server at `url`: stream `WOW_COMMANDS`, subjects `wow.commands.>`,
    /// signals on `wow.wait.*`, 16 partitions, one replica on file, a ping and a consumer
    /// heartbeat a second, a day's retention, 30 s to acknowledge.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            stream: "WOW_COMMANDS".to_owned(),
            subject_prefix: "wow.commands".to_owned(),
            wait_prefix: "wow.wait".to_owned(),
            partitions: 16,
            replicas: 1,
            ping_interval: Duration::from_secs(1),
            heartbeat: Duration::from_secs(1),
            storage: CommandStorage::File,
            max_age: Duration::from_secs(24 * 60 * 60),
            ack_wait: Duration::from_secs(30),
        }
    }

    /// The subject of one request's commands in `partition`: `{subject_prefix}.{partition}.
    /// {token}`, where `token` is the request's [`request_token`](crate::request_token), so
    /// that a look-up can ask JetStream whether a message of the request is still there.
    pub fn request_subject(&self, partition: u32, token: &str) -> String {
        format!("{}.{partition}.{token}", self.subject_prefix)
    }

    /// The subjects of `partition`'s commands: `{subject_prefix}.{partition}.>`.
    pub fn partition_filter(&self, partition: u32) -> String {
        format!("{}.{partition}.>", self.subject_prefix)
    }

    /// The subject older gateways (before the request token) sent `partition`'s commands
    /// to: `{subject_prefix}.{partition}`. Processors still consume it (SPEC RQ-14).
    pub fn legacy_partition_subject(&self, partition: u32) -> String {
        format!("{}.{partition}", self.subject_prefix)
    }

    /// The subjects of the command stream: `{subject_prefix}.>`, both forms above.
    pub fn stream_subjects(&self) -> String {
        format!("{}.>", self.subject_prefix)
    }

    /// The durable consumer that reads `partition`'s commands.
    pub fn partition_consumer(&self, partition: u32) -> String {
        format!("partition-{partition}-requests")
    }

    /// The durable consumer that reads what older gateways sent to `partition`. Named as
    /// older processors name their own, which read the same subject: during a rolling
    /// upgrade, whichever version takes the partition replaces it, and no two consumers of
    /// the work-queue stream ever filter one subject.
    pub fn legacy_partition_consumer(&self, partition: u32) -> String {
        format!("partition-{partition}")
    }

    /// The key-value bucket recording what every node of the deployment must agree on:
    /// `{stream}_DEPLOYMENT`.
    pub fn deployment_bucket(&self) -> String {
        format!("{}_DEPLOYMENT", self.stream)
    }

    /// The servers of [`url`](Self::url), split at commas, blanks trimmed.
    pub fn servers(&self) -> Vec<String> {
        self.url
            .split(',')
            .map(str::trim)
            .filter(|server| !server.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// The subject where the node `node` receives its wait signals.
    pub fn wait_subject(&self, node: &str) -> String {
        format!("{}.{node}", self.wait_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comma_separated_url_names_each_server_of_a_cluster() {
        let config = NatsConfig::new("nats://a:4222, nats://b:4222,,nats://c:4222 ");
        assert_eq!(
            config.servers(),
            ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
        );
        assert_eq!(
            NatsConfig::new("nats://a:4222").servers(),
            ["nats://a:4222"]
        );
    }
}
