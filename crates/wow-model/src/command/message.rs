//! A command message: one concrete attempt to carry out a caller's intent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::aggregate_id::AggregateId;
use crate::command::fingerprint::request_fingerprint;
use crate::command::{BindingError, CommandBody, CommandKind};
use crate::id;

/// The message header holding the owner of the aggregate a command acts for (Wow's
/// `ownerId`: `Command-Owner-Id` or the path's `/owner/{ownerId}/`); its stream inherits it.
pub const OWNER_ID_HEADER: &str = "owner_id";
/// The message header holding the space of the aggregate (Wow's `spaceId`, `Wow-Space-Id`).
pub const SPACE_ID_HEADER: &str = "space_id";
/// The message header holding the W3C trace context's `traceparent` (SPEC OB-1): the HTTP
/// request's, carried by the command, its stream, and every command a consumer of that stream
/// sends, so one trace shows one intent. Spelled as the W3C header, so it is the same name
/// on HTTP, in NATS headers and in stored headers.
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// The message header holding the W3C trace context's `tracestate`, carried beside
/// [`TRACEPARENT_HEADER`] when the request had one.
pub const TRACESTATE_HEADER: &str = "tracestate";

/// One command message (SPEC ID-1, ID-2).
///
/// `id` (the command id) is new for every message, even one rebuilt from the same body;
/// `request_id` names the caller's business intent and is what makes a resend a duplicate.
/// When the caller gives no request id it is the command id, so such a command cannot be
/// retried idempotently: give a stable request id for anything you may resend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandMessage<B> {
    /// The command id, unique per message; stage signals and wait handles are keyed by it.
    pub id: String,
    /// The caller's business intent; a second stream with it in one aggregate is a duplicate.
    pub request_id: String,
    /// The aggregate the command is for.
    pub aggregate_id: AggregateId,
    /// The version the caller expects the aggregate to be at, if it pins one.
    pub aggregate_version: Option<u64>,
    /// The command's stable name.
    pub name: String,
    /// Whether the command creates, may create, needs an existing aggregate, or is void.
    pub kind: CommandKind,
    /// Free-form headers carried with the message.
    pub header: BTreeMap<String, String>,
    /// The command's body.
    pub body: B,
    /// When the message was made, in milliseconds since the Unix epoch.
    pub create_time: i64,
}

impl<B> CommandMessage<B> {
    /// A message with a fresh command id (also the request id), made now.
    pub fn new(
        aggregate_id: AggregateId,
        name: impl Into<String>,
        kind: CommandKind,
        body: B,
    ) -> Self {
        let command_id = id::new_id();
        Self {
            request_id: command_id.clone(),
            id: command_id,
            aggregate_id,
            aggregate_version: None,
            name: name.into(),
            kind,
            header: BTreeMap::new(),
            body,
            create_time: id::now_millis(),
        }
    }

    /// Sets the request id: reuse it when resending the same intent.
    pub fn with_request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = request_id.into();
        self
    }

    /// Pins the version the aggregate must be at for the command to run.
    pub fn with_expected_version(mut self, version: u64) -> Self {
        self.aggregate_version = Some(version);
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.header.insert(key.into(), value.into());
        self
    }

    /// Whether the command creates its aggregate (version 1).
    pub fn is_create(&self) -> bool {
        self.kind == CommandKind::Create
    }

    /// Whether the command may create its aggregate when it is missing.
    pub fn allow_create(&self) -> bool {
        self.kind.may_create()
    }

    /// Whether no aggregate handles the command (SPEC RQ-12).
    pub fn is_void(&self) -> bool {
        self.kind == CommandKind::Void
    }
}

impl<B: CommandBody> CommandMessage<B> {
    /// A message for a typed command, named and kinded by its enum.
    pub fn of(aggregate_id: AggregateId, body: B) -> Self {
        let name = body.command_name();
        let kind = body.kind();
        Self::new(aggregate_id, name, kind, body)
    }

    /// Runs the body's validation.
    pub fn validate(&self) -> Result<(), Vec<BindingError>> {
        self.body.validate()
    }

    /// The request fingerprint (SPEC ID-5) of this command's name and body.
    pub fn fingerprint(&self) -> Result<String, serde_json::Error> {
        Ok(request_fingerprint(&self.name, &self.body.to_body()?))
    }

    /// The same message with its body as JSON, as the gateway and the bus carry it.
    pub fn into_json(self) -> Result<CommandMessage<serde_json::Value>, serde_json::Error> {
        let body = self.body.to_body()?;
        Ok(CommandMessage {
            id: self.id,
            request_id: self.request_id,
            aggregate_id: self.aggregate_id,
            aggregate_version: self.aggregate_version,
            name: self.name,
            kind: self.kind,
            header: self.header,
            body,
            create_time: self.create_time,
        })
    }
}

impl CommandMessage<serde_json::Value> {
    /// The request fingerprint (SPEC ID-5) of this command's name and JSON body.
    pub fn json_fingerprint(&self) -> String {
        request_fingerprint(&self.name, &self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_id_defaults_to_the_command_id_and_rebuilds_get_new_ids() {
        let aggregate = AggregateId::new("bank", "account", "a-1", "t");
        let first = CommandMessage::new(aggregate.clone(), "deposit", CommandKind::Normal, ());
        assert_eq!(first.request_id, first.id);
        let rebuilt = CommandMessage::new(aggregate, "deposit", CommandKind::Normal, ());
        assert_ne!(
            first.id, rebuilt.id,
            "a rebuilt command gets a new command id"
        );
        let keyed = rebuilt.with_request_id("intent-1");
        assert_eq!(keyed.request_id, "intent-1");
        assert_ne!(keyed.request_id, keyed.id);
    }
}
