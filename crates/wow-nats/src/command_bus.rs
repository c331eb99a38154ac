//! The gateway's side of the distributed command bus: a command becomes one JetStream
//! message on its request's subject in its partition, and `SENT` means JetStream stored it;
//! whether a request is still in transit is a look-up of that subject.

use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::{self, stream::LastRawMessageErrorKind};
use async_nats::{Client, HeaderMap};
use async_trait::async_trait;
use bytes::Bytes;
use wow_core::command::{CommandBus, CommandBusError, InTransit, JsonCommand};
use wow_core::AggregateId;
use wow_runtime::command::PROTOCOL_VERSION;
use wow_runtime::trace_context::TRACE_HEADERS;

use crate::config::NatsConfig;
use crate::partition::{partition_of, request_token};

/// The command header naming the subject where a command's stage signals go: the sending
/// gateway's own (see [`WaitSignals`](crate::WaitSignals)). Defined in wow-core, where a saga
/// copies it onto the links of a chained wait.
pub use wow_runtime::command::WAIT_REPLY_HEADER;

/// The NATS header carrying the wire protocol version of the gateway (SPEC RQ-14), so a
/// processor can refuse a message it cannot read before decoding its body.
pub const PROTOCOL_NATS_HEADER: &str = "Wow-Protocol";

/// The NATS header carrying the command id, so a message whose body cannot be read can
/// still be answered.
pub const COMMAND_ID_NATS_HEADER: &str = "Wow-Command-Id";

/// How long a send waits for JetStream to store the command before it answers
/// `ServiceUnavailable`.
const STORE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a look-up waits for JetStream to say whether a request is in transit before it
/// answers `Unavailable` (the look-up then says `UNKNOWN`).
const LOOK_UP_TIMEOUT: Duration = Duration::from_secs(2);

/// A [`CommandBus`] over JetStream. `send` returns once JetStream stored the command (stage
/// `SENT`); a disconnected client answers [`CommandBusError::Unavailable`] at once, and the
/// client reconnects by itself.
///
/// Each message carries the command id as `Nats-Msg-Id`, so JetStream drops a second
/// publish of the same message within its duplicate window, and the command's W3C
/// `traceparent` and `tracestate` (SPEC OB-1) as NATS headers of those names.
///
/// A command's subject names its partition and its request
/// (`{prefix}.{partition}.{request token}`, see [`request_token`]), and the stream keeps a
/// message until the partition's owner acknowledges it, which it does once the decision is
/// durable. So [`in_transit`](CommandBus::in_transit) asks JetStream for the last message
/// on that subject: any gateway, not only the sender, can tell that a command is in transit
/// (SPEC TO-1).
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

    /// The subject of `request_id`'s commands to `aggregate_id`.
    fn subject(&self, aggregate_id: &AggregateId, request_id: &str) -> String {
        let partition = partition_of(
            &aggregate_id.tenant_id,
            &aggregate_id.aggregate_name,
            &aggregate_id.id,
            self.config.partitions,
        );
        self.config
            .request_subject(partition, &request_token(aggregate_id, request_id))
    }

    /// Asks the stream for the last message on `subject`.
    async fn last_on(&self, subject: &str) -> Result<InTransit, CommandBusError> {
        let stream = self
            .jetstream
            .get_stream_no_info(&self.config.stream)
            .await
            .map_err(unavailable)?;
        match stream.get_last_raw_message_by_subject(subject).await {
            Ok(_) => Ok(InTransit::Held),
            Err(error) => match error.kind() {
                LastRawMessageErrorKind::NoMessageFound => Ok(InTransit::Absent),
                // No stream: nothing is in transit (a server whose memory stream went
                // with a restart, say).
                LastRawMessageErrorKind::JetStream(inner)
                    if inner.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND =>
                {
                    Ok(InTransit::Absent)
                }
                _ => Err(unavailable(error)),
            },
        }
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
        let subject = self.subject(&command.aggregate_id, &command.request_id);
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", command.id.as_str());
        headers.insert(COMMAND_ID_NATS_HEADER, command.id.as_str());
        headers.insert(PROTOCOL_NATS_HEADER, PROTOCOL_VERSION.to_string().as_str());
        // SPEC OB-1: the trace context rides in the NATS headers too, where a tool that
        // reads the transport (and the receiving worker) finds it without the payload.
        for key in TRACE_HEADERS {
            if let Some(value) = command.header.get(key) {
                headers.insert(key, value.as_str());
            }
        }
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

    /// One JetStream request: the last message on the request's subject. A message there
    /// is [`InTransit::Held`]; none is [`InTransit::Absent`]; a client not connected, a
    /// JetStream error or no answer within 2 s is [`CommandBusError::Unavailable`].
    async fn in_transit(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<InTransit, CommandBusError> {
        if !self.is_connected() {
            return Err(unavailable(Unavailable("not connected to NATS")));
        }
        let subject = self.subject(aggregate_id, request_id);
        match tokio::time::timeout(LOOK_UP_TIMEOUT, self.last_on(&subject)).await {
            Ok(answer) => answer,
            Err(_elapsed) => Err(unavailable(Unavailable(
                "JetStream did not say in time whether the command is in transit",
            ))),
        }
    }
}
