//! Sagas: react to events by sending commands through the gateway, with request ids derived
//! from the event that caused them (SPEC DS-3), so a redelivered event cannot start a second
//! business intent. [`SagaSpec`] tests a saga without a store or a bus.

mod spec;

use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::contracts::command::JsonCommand;
use crate::contracts::event::ConsumerError;
use crate::model::command::CommandResult;
use crate::model::command::CommandResultError;
use crate::model::error_code::ErrorCode;
use crate::model::event::{DomainEvent, DomainEventStream};
use crate::runtime::command::{CommandGateway, WaitPlan};

pub use spec::{SagaExpect, SagaGiven, SagaReply, SagaSpec, SentCommand};

/// A saga: for each event of an appended stream, the commands that should follow, sent
/// through [`SagaContext::send`].
#[async_trait]
pub trait Saga: Send + Sync + std::fmt::Debug {
    /// The saga's name (a wait can name it).
    fn name(&self) -> &str;

    /// Reacts to `event` (of `stream`). Failing here fails the saga's stage only.
    async fn on_event(
        &self,
        event: &DomainEvent,
        stream: &DomainEventStream,
        ctx: &SagaContext<'_>,
    ) -> Result<(), ConsumerError>;
}

/// The request id of the `index`-th command a saga sends for the event `event_id`: the same
/// on every delivery of that event.
pub fn saga_request_id(event_id: &str, index: usize) -> String {
    format!("{event_id}/{index}")
}

/// Where a [`SagaContext`] sends a command once its request id is derived: the gateway in
/// a running service, a scripted replier in a [`SagaSpec`]. The seam sits below the request
/// id derivation and the duplicate rule of [`SagaContext::send`], so a spec runs exactly the
/// code a service runs, up to the gateway.
#[async_trait]
pub(crate) trait SagaSender: Send + Sync + std::fmt::Debug {
    /// Sends `command` and waits until it is processed: its result, or why it failed.
    async fn process(&self, command: JsonCommand) -> Result<CommandResult, CommandResultError>;
}

#[async_trait]
impl SagaSender for CommandGateway {
    async fn process(&self, command: JsonCommand) -> Result<CommandResult, CommandResultError> {
        self.send_and_wait(command, WaitPlan::processed()).await
    }
}

/// What a saga sends through, for one event: every command gets the next derived request id.
#[derive(Debug)]
pub struct SagaContext<'a> {
    sender: &'a dyn SagaSender,
    event_id: &'a str,
    sent: Mutex<Vec<Value>>,
}

impl<'a> SagaContext<'a> {
    pub(crate) fn new(sender: &'a dyn SagaSender, event_id: &'a str) -> Self {
        Self {
            sender,
            event_id,
            sent: Mutex::new(Vec::new()),
        }
    }

    /// Sends `command` with the next request id derived from the event, and waits until it is
    /// processed.
    ///
    /// A `DuplicateRequestId` answer means a delivery of this event before already sent it:
    /// it is returned as `Ok`, with that code and the original version, because the intent is
    /// done. Any other failure is returned as it came.
    pub async fn send(
        &self,
        mut command: JsonCommand,
    ) -> Result<CommandResult, CommandResultError> {
        let index = {
            let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
            command.request_id = saga_request_id(self.event_id, sent.len());
            sent.push(json!({
                "aggregateName": command.aggregate_id.aggregate_name,
                "aggregateId": command.aggregate_id.id,
                "command": command.name,
                "requestId": command.request_id,
                "commandId": command.id,
            }));
            sent.len() - 1
        };
        let outcome = self.sender.process(command).await;
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Value::Object(entry)) = sent.get_mut(index) {
            let code = match &outcome {
                Ok(result) => result.error_code.to_string(),
                Err(error) => error.error_code().to_string(),
            };
            entry.insert("errorCode".to_owned(), Value::String(code));
        }
        match outcome {
            Err(CommandResultError::Failed(result))
                if result.error_code == ErrorCode::DuplicateRequestId =>
            {
                Ok(*result)
            }
            other => other,
        }
    }

    pub(crate) fn into_sent(self) -> Vec<Value> {
        self.sent.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}
