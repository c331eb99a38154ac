//! The distributed mode's settings: the node's role and how it reaches NATS.

use std::time::Duration;

#[cfg(feature = "nats")]
use wow_nats::NatsConfig;

/// Where JetStream keeps commands in transit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CommandStorage {
    /// On disk: commands survive a NATS server's restart.
    #[default]
    File,
    /// In memory: faster, gone with the server.
    Memory,
}

use super::role::Role;
use super::sources::{Env, FileConfig, NatsFile};
use super::SettingsError;

/// How a gateway or processor reaches NATS and shares the work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributedSettings {
    /// The NATS server (`WOW_NATS_URL`, `[nats] url`), or a comma-separated list of a
    /// cluster's servers; required by the gateway and processor roles.
    pub nats_url: Option<String>,
    /// Command partitions (`WOW_NATS_PARTITIONS`, default 16): every node of a deployment
    /// must use the same number, and it bounds how many processors share the work.
    pub partitions: u32,
    /// Copies of the command stream, the lease bucket and the deployment bucket in a NATS
    /// cluster (`WOW_NATS_REPLICAS`, default 1; 3 on a three-node cluster).
    pub replicas: usize,
    /// Where JetStream keeps commands in transit (`WOW_NATS_STORAGE`: `file`, the default,
    /// or `memory`).
    pub storage: CommandStorage,
    /// How long a partition lease lasts unrenewed (`WOW_NATS_LEASE_TTL_MS`, default 1 s):
    /// how long a dead processor's partitions wait before another takes them.
    pub lease_ttl: Duration,
    /// How long a processor may hold a command unacknowledged before JetStream delivers it
    /// again (`WOW_NATS_ACK_WAIT_MS`, default 30 s).
    pub ack_wait: Duration,
    /// How often the node pings its NATS server (`WOW_NATS_PING_INTERVAL_MS`, default 1 s):
    /// three unanswered and it moves to another server, so a hung server costs about three
    /// intervals.
    pub ping_interval: Duration,
    /// How often an idle partition consumer hears from its server (`WOW_NATS_HEARTBEAT_MS`,
    /// default 1 s): four intervals without one and the consumer is asked again, then made
    /// afresh.
    pub heartbeat: Duration,
    /// This node's name in leases and signal subjects (`WOW_NODE_ID`); default: made from
    /// the host name, the process id and a random part, so a restart is a new node.
    pub node_id: Option<String>,
    /// What the deployment's names in NATS start with (`WOW_NATS_NAMESPACE`, default
    /// `wow`): stream `{NAMESPACE}_COMMANDS` (upper case), subjects `{namespace}.commands.>`
    /// and `{namespace}.wait.*`, lease bucket `{namespace}_partitions`, deployment bucket
    /// `{NAMESPACE}_COMMANDS_DEPLOYMENT`. Two deployments on
    /// one NATS server need two namespaces. Letters, digits, `-` and `_` only.
    pub namespace: String,
}

impl Default for DistributedSettings {
    fn default() -> Self {
        Self {
            nats_url: None,
            partitions: 16,
            replicas: 1,
            storage: CommandStorage::File,
            lease_ttl: Duration::from_secs(1),
            ack_wait: Duration::from_secs(30),
            ping_interval: Duration::from_secs(1),
            heartbeat: Duration::from_secs(1),
            node_id: None,
            namespace: "wow".to_owned(),
        }
    }
}

impl DistributedSettings {
    /// The NATS layout these settings give, for a node at `url`.
    #[cfg(feature = "nats")]
    pub fn nats_config(&self, url: &str) -> NatsConfig {
        let mut config = NatsConfig::new(url);
        config.partitions = self.partitions;
        config.replicas = self.replicas;
        config.storage = match self.storage {
            CommandStorage::File => wow_nats::CommandStorage::File,
            CommandStorage::Memory => wow_nats::CommandStorage::Memory,
        };
        config.ack_wait = self.ack_wait;
        config.ping_interval = self.ping_interval;
        config.heartbeat = self.heartbeat;
        config.stream = format!("{}_COMMANDS", self.namespace.to_uppercase());
        config.subject_prefix = format!("{}.commands", self.namespace);
        config.wait_prefix = format!("{}.wait", self.namespace);
        config
    }
}

/// The role: `WOW_ROLE`, else `role` in the file, else monolith.
pub(super) fn role(file: &FileConfig, env: &Env<'_>) -> Result<Role, SettingsError> {
    match env.var("WOW_ROLE") {
        Some(value) => value.parse().map_err(|_| SettingsError::Env {
            name: "WOW_ROLE",
            what: "monolith, gateway or processor",
            value,
        }),
        None => Ok(file.role.unwrap_or_default()),
    }
}

/// `[nats]`, with `WOW_NATS_*` and `WOW_NODE_ID` over it.
pub(super) fn distributed(
    file: &FileConfig,
    env: &Env<'_>,
) -> Result<DistributedSettings, SettingsError> {
    let defaults = DistributedSettings::default();
    let nats = file.nats.as_ref();
    let storage = storage(nats, env, defaults.storage)?;
    // A duration: its variable, else its field of `[nats]`, else its default.
    let millis = |name, field: fn(&NatsFile) -> Option<u64>, default| {
        env.millis(name, nats.and_then(field), default)
    };
    let settings = DistributedSettings {
        nats_url: env
            .var("WOW_NATS_URL")
            .or_else(|| nats.and_then(|n| n.url.clone())),
        partitions: env
            .number("WOW_NATS_PARTITIONS")?
            .or(nats.and_then(|n| n.partitions))
            .unwrap_or(defaults.partitions),
        replicas: env
            .number("WOW_NATS_REPLICAS")?
            .or(nats.and_then(|n| n.replicas))
            .unwrap_or(defaults.replicas),
        storage,
        lease_ttl: millis(
            "WOW_NATS_LEASE_TTL_MS",
            |n| n.lease_ttl_ms,
            defaults.lease_ttl,
        )?,
        ack_wait: millis("WOW_NATS_ACK_WAIT_MS", |n| n.ack_wait_ms, defaults.ack_wait)?,
        ping_interval: millis(
            "WOW_NATS_PING_INTERVAL_MS",
            |n| n.ping_interval_ms,
            defaults.ping_interval,
        )?,
        heartbeat: millis(
            "WOW_NATS_HEARTBEAT_MS",
            |n| n.heartbeat_ms,
            defaults.heartbeat,
        )?,
        node_id: env
            .var("WOW_NODE_ID")
            .or_else(|| nats.and_then(|n| n.node_id.clone())),
        namespace: env
            .var("WOW_NATS_NAMESPACE")
            .or_else(|| nats.and_then(|n| n.namespace.clone()))
            .unwrap_or(defaults.namespace),
    };
    checked(&settings)?;
    Ok(settings)
}

/// Where the command stream keeps its messages: `WOW_NATS_STORAGE`, else the file's, else
/// `default`.
fn storage(
    nats: Option<&NatsFile>,
    env: &Env<'_>,
    default: CommandStorage,
) -> Result<CommandStorage, SettingsError> {
    match env
        .var("WOW_NATS_STORAGE")
        .or_else(|| nats.and_then(|n| n.storage.clone()))
    {
        None => Ok(default),
        Some(value) => match value.trim() {
            "file" => Ok(CommandStorage::File),
            "memory" => Ok(CommandStorage::Memory),
            _ => Err(SettingsError::Env {
                name: "WOW_NATS_STORAGE",
                what: "file or memory",
                value,
            }),
        },
    }
}

/// `settings`, refused when a name holds other characters than letters, digits, `-` and
/// `_`, or a number is out of range.
fn checked(settings: &DistributedSettings) -> Result<(), SettingsError> {
    let is_name = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if !is_name(&settings.namespace) {
        return Err(SettingsError::Distributed(format!(
            "the NATS namespace `{}` may hold letters, digits, `-` and `_` only",
            settings.namespace
        )));
    }
    if let Some(node) = settings.node_id.as_deref().filter(|node| !is_name(node)) {
        return Err(SettingsError::Distributed(format!(
            "the node id `{node}` may hold letters, digits, `-` and `_` only"
        )));
    }
    if settings.partitions == 0 {
        return Err(SettingsError::Distributed(
            "nats partitions must be more than zero".into(),
        ));
    }
    if settings.lease_ttl < Duration::from_millis(500) {
        return Err(SettingsError::Distributed(
            "the lease TTL must be at least 500 ms".into(),
        ));
    }
    if settings.ping_interval < Duration::from_millis(100)
        || settings.heartbeat < Duration::from_millis(100)
    {
        return Err(SettingsError::Distributed(
            "the NATS ping interval and heartbeat must be at least 100 ms".into(),
        ));
    }
    Ok(())
}
