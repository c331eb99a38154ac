//! The gateway's side of the distributed command bus: a command becomes one JetStream
//! message on its partition's subject, and `SENT` means JetStream stored it.

use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream;
use async_nats::{Client, HeaderMap};
use async_trait::async_trait;
use bytes::Bytes;
use wow_core::command::{CommandBus, CommandBusError, JsonCommand, PROTOCOL_VERSION};

use crate::config::NatsConfig;
use crate::partition::command_partition;

/// The command header naming the subject where a command's stage signals go: the sending
/// gateway's own (see [`WaitSignals`](crate::WaitSignals)). Defined in wow-core, where a saga
/// copies it onto the links of a chained wait.
pub use wow_core::command::WAIT_REPLY_HEADER;

/// The NATS header carrying the wire protocol version of the gateway (SPEC RQ-14), so a
/// processor can refuse a message it cannot read before decoding its body.
pub const PROTOCOL_NATS_HEADER: &str = "Wow-Protocol";

/// The NATS header carrying the command id, so a message whose body cannot be read can
/// still be answered.
pub const COMMAND_ID_NATS_HEADER: &str = "Wow-Command-Id";

/// How long a send waits for JetStream to store the command before it answers
/// `ServiceUnavailable`.
const STORE_TIMEOUT: Duration = Duration::from_secs(5);

/// A [`CommandBus`] over JetStream. `send` returns once JetStream stored the command (stage
/// `SENT`); a disconnected client answers [`CommandBusError::Unavailable`] at once, and the
/// client reconnects by itself.
///
/// Each message carries the command id as `Nats-Msg-Id`, so JetStream drops a second
/// publish of the same message within its duplicate window.
#[derive(Debug, Clone)]
pub struct NatsCommandBus {
    client: Client,
    jetstream: jetstream::Context,
    config: Arc<NatsConfig>,
    reply_subject: Arc<str>,
}

impl NatsCommandBus {
    /// A bus on `client` whose commands' signals go to `reply_subject` (the one a
    /// [`WaitSignals`](crate::WaitSignals) of this gateway listens on).
    pub fn new(
        client: Client,
        config: Arc<NatsConfig>,
        reply_subject: impl Into<Arc<str>>,
    ) -> Self {
        Self {
            jetstream: jetstream::new(client.clone()),
            client,
            config,
            reply_subject: reply_subject.into(),
        }
    }

    /// Whether the client is connected to NATS now.
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == State::Connected
    }
}

fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> CommandBusError {
    CommandBusError::Unavailable(Box::new(error))
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unavailable(&'static str);

#[async_trait]
impl CommandBus for NatsCommandBus {
    async fn send(&self, mut command: JsonCommand) -> Result<(), CommandBusError> {
        if !self.is_connected() {
            return Err(unavailable(Unavailable("not connected to NATS")));
        }
        command
            .header
            .insert(WAIT_REPLY_HEADER.to_owned(), self.reply_subject.to_string());
        let subject = self
            .config
            .partition_subject(command_partition(&command, self.config.partitions));
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", command.id.as_str());
        headers.insert(COMMAND_ID_NATS_HEADER, command.id.as_str());
        headers.insert(PROTOCOL_NATS_HEADER, PROTOCOL_VERSION.to_string().as_str());
        let payload = Bytes::from(serde_json::to_vec(&command).map_err(unavailable)?);
        let stored = async {
            self.jetstream
                .publish_with_headers(subject, headers, payload)
                .await
                .map_err(unavailable)?
                .await
                .map_err(unavailable)
        };
        match tokio::time::timeout(STORE_TIMEOUT, stored).await {
            Ok(Ok(_ack)) => Ok(()),
            Ok(Err(error)) => Err(error),
            Err(_elapsed) => Err(unavailable(Unavailable(
                "JetStream did not confirm the command in time",
            ))),
        }
    }
}
