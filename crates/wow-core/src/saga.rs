//! Sagas: react to events by sending commands, with request ids derived from the events
//! (SPEC DS-3), so a redelivered event cannot start a second business intent.

use async_trait::async_trait;

use crate::command::JsonCommand;
use crate::event::ConsumerError;
use crate::{DomainEvent, DomainEventStream};

/// A saga: for each event, the commands to send next. The dispatcher sets each command's
/// request id from the event's id and the command's index, sends it through the gateway,
/// and treats a `DuplicateRequestId` as already done.
#[async_trait]
pub trait Saga: Send + Sync + std::fmt::Debug {
    /// The saga's name (a wait can name it).
    fn name(&self) -> &str;

    /// The commands `event` (of `stream`) calls for, in order.
    async fn on_event(
        &self,
        event: &DomainEvent,
        stream: &DomainEventStream,
    ) -> Result<Vec<JsonCommand>, ConsumerError>;
}

/// The request id of the `index`-th command a saga sends for the event `event_id`: the same
/// on every delivery of that event.
pub fn saga_request_id(event_id: &str, index: usize) -> String {
    format!("{event_id}/{index}")
}
