//! The CommandBus: carries command messages from gateways to processing nodes, keeping one
//! aggregate's commands in order.

use std::fmt;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use std::sync::{Arc, RwLock};

use std::panic::AssertUnwindSafe;

use async_trait::async_trait;
use futures::FutureExt;
use serde_json::Value;
use tokio::sync::mpsc;

use wow_model::aggregate_id::{group_by_aggregate, AggregateId};
use wow_model::command::CommandMessage;
use wow_model::error::BoxError;
use wow_model::error_code::ErrorCode;
use wow_model::panic::panic_message;

/// A command as the bus carries it: the body as JSON.
pub type JsonCommand = CommandMessage<Value>;

/// Why the bus did not accept a command. Acceptance was not observed (SPEC ST-3).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandBusError {
    /// The bus is shut down.
    #[error("the command bus is closed")]
    Closed,
    /// No processing node subscribes to the bus.
    #[error("no processing node subscribes to the command bus")]
    NoSubscriber,
    /// The transport failed; the command may or may not have been received.
    #[error("the command bus failed: {0}")]
    Unavailable(#[source] BoxError),
}

impl CommandBusError {
    /// The error code a result reports for this error.
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::ServiceUnavailable
    }
}

/// Whether a bus holds a request's message: handed to the bus and not yet decided (SPEC
/// TO-1), as the bus itself can tell, whichever process asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InTransit {
    /// A message of the request is on the bus: it will be delivered and decided.
    Held,
    /// No message of the request is on the bus (never sent, or taken off once decided).
    Absent,
    /// This bus keeps no record of what it carries; only the sending process's in-flight
    /// registry knows (an in-process bus).
    Untracked,
}

/// Receives the commands of a bus: a processing node.
#[async_trait]
pub trait CommandHandler: Send + Sync + fmt::Debug {
    /// Handles one command to its end, reporting its stages itself.
    async fn handle(&self, command: JsonCommand);
}

/// Carries commands to processing nodes.
///
/// # Cancel safety
///
/// `send` is not cancel safe: a send dropped midway may or may not have delivered.
#[async_trait]
pub trait CommandBus: Send + Sync + fmt::Debug {
    /// Hands `command` to the bus; `Ok` means the bus accepted it (stage `SENT`).
    async fn send(&self, command: JsonCommand) -> Result<(), CommandBusError>;

    /// Whether a message of `request_id` to `aggregate_id` is on the bus and not yet
    /// decided. A bus that answers [`InTransit::Absent`] must take a message off only once
    /// its decision is durable, so that a look-up that then finds no decision in the store
    /// may say that none was made. Default: [`InTransit::Untracked`].
    ///
    /// # Errors
    ///
    /// [`CommandBusError::Unavailable`] when the bus cannot be asked now: the look-up then
    /// answers `UNKNOWN`, never `NONE`.
    async fn in_transit(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<InTransit, CommandBusError> {
        let _ = (aggregate_id, request_id);
        Ok(InTransit::Untracked)
    }
}

type Subscriber = Arc<RwLock<Option<Arc<dyn CommandHandler>>>>;

/// An in-process [`CommandBus`]: partitions by a hash of the aggregate id, one worker task per
/// partition, so one aggregate's commands are handled in order and different aggregates in
/// parallel. Dropping the bus ends its workers once their queues drain; a panicking handler
/// never ends one (SPEC PX-1).
pub struct InMemoryCommandBus {
    partitions: Vec<mpsc::Sender<JsonCommand>>,
    subscriber: Subscriber,
    hasher: RandomState,
}

impl fmt::Debug for InMemoryCommandBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryCommandBus")
            .field("partitions", &self.partitions.len())
            .finish_non_exhaustive()
    }
}

impl InMemoryCommandBus {
    /// A bus of `partitions` workers (at least 1), each queueing up to `capacity` commands
    /// before `send` waits. Must be called inside a tokio runtime.
    pub fn new(partitions: usize, capacity: usize) -> Self {
        let subscriber: Subscriber = Arc::new(RwLock::new(None));
        let partitions = (0..partitions.max(1))
            .map(|_| {
                let (sender, receiver) = mpsc::channel(capacity.max(1));
                tokio::spawn(run_partition(receiver, subscriber.clone()));
                sender
            })
            .collect();
        Self {
            partitions,
            subscriber,
            hasher: RandomState::default(),
        }
    }

    /// Makes `handler` the processing node of this bus, replacing any before it (a restart).
    pub fn subscribe(&self, handler: Arc<dyn CommandHandler>) {
        *self.subscriber.write().unwrap_or_else(|p| p.into_inner()) = Some(handler);
    }

    /// Stops delivering to the current processing node.
    pub fn unsubscribe(&self) {
        *self.subscriber.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn partition(&self, aggregate_id: &AggregateId) -> usize {
        let key = (&aggregate_id.aggregate_name, &aggregate_id.id);
        (self.hasher.hash_one(key) % self.partitions.len() as u64) as usize
    }

    /// The processing node subscribed now, if any.
    pub fn subscriber(&self) -> Option<Arc<dyn CommandHandler>> {
        Self::current(&self.subscriber)
    }

    fn current(subscriber: &Subscriber) -> Option<Arc<dyn CommandHandler>> {
        subscriber.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// One partition's worker. A panic in a handler is caught here (SPEC PX-1): it is logged and
/// the worker goes on with the next command, so one poison command never leaves its
/// partition's later commands without a node. ([`DefaultCommandHandler`](crate::domain::command::DefaultCommandHandler)
/// catches its own panics and answers them; this is for every other handler.)
/// Commands a partition takes from its queue at once.
const BATCH: usize = 256;

/// Runs a partition: takes whatever has queued up, and handles different aggregates'
/// commands side by side, one aggregate's in order, so that their appends share the store's
/// commits instead of waiting for each other.
async fn run_partition(mut receiver: mpsc::Receiver<JsonCommand>, subscriber: Subscriber) {
    let mut batch = Vec::with_capacity(BATCH);
    while receiver.recv_many(&mut batch, BATCH).await > 0 {
        let Some(handler) = InMemoryCommandBus::current(&subscriber) else {
            for command in batch.drain(..) {
                tracing::warn!(command_id = %command.id, "no processing node; command dropped");
            }
            continue;
        };
        // Drained, so the batch keeps its buffer for the next round.
        let groups = group_by_aggregate(batch.drain(..), |command| &command.aggregate_id);
        futures::future::join_all(groups.into_iter().map(|commands| {
            let handler = handler.clone();
            async move {
                for command in commands {
                    handle_one(handler.as_ref(), command).await;
                }
            }
        }))
        .await;
    }
}

async fn handle_one(handler: &dyn CommandHandler, command: JsonCommand) {
    let ids = (command.aggregate_id.clone(), command.id.clone());
    if let Err(payload) = AssertUnwindSafe(handler.handle(command))
        .catch_unwind()
        .await
    {
        let (aggregate_id, command_id) = ids;
        tracing::error!(%aggregate_id, %command_id, panic = %panic_message(payload.as_ref()), "the processing node panicked on a command; the partition goes on");
    }
}

#[async_trait]
impl CommandBus for InMemoryCommandBus {
    async fn send(&self, command: JsonCommand) -> Result<(), CommandBusError> {
        if Self::current(&self.subscriber).is_none() {
            return Err(CommandBusError::NoSubscriber);
        }
        let partition = self.partition(&command.aggregate_id);
        self.partitions[partition]
            .send(command)
            .await
            .map_err(|_| CommandBusError::Closed)
    }
}
